"""Attention layers: MultiHeadAttention, Attention and AdditiveAttention."""

from __future__ import annotations

from dataclasses import replace

from memlint.ir import Weight
from memlint.layers.base import (NOT_TORCH, Args, LayerError, LayerKind, Saved, format_shape,
                                  register)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LayerError(f"{name} must be a positive int, got {value!r}")
    return value


def _known_last(shape: tuple, what: str) -> int:
    if not shape or shape[-1] is None:
        raise LayerError(f"the last dimension of the {what} must be defined, got {shape}")
    return shape[-1]


@register
class MultiHeadAttention(LayerKind):
    """``MultiHeadAttention(num_heads, key_dim, value_dim=None, use_bias=True,
    output_shape=None, attention_axes=None)``, called on ``[query, value]`` or
    ``[query, value, key]`` (key defaults to value).

    Four projections (EinsumDense in Keras), ``H`` heads:

    * query ``(q, H, key_dim)`` and key ``(k, H, key_dim)``, biases ``(H, key_dim)``;
    * value ``(v, H, value_dim)``, bias ``(H, value_dim)``;
    * output ``(H, value_dim, *out)``, bias ``out``, where ``out`` is ``output_shape`` or
      the query's last dimension;

    plus, with ``use_gate=True``, a gate ``(q, H, value_dim)`` with bias ``(H, value_dim)``.
    The output is the query shape with its last dimension replaced by ``out``.
    """

    name = "MultiHeadAttention"
    family = "attention"
    multi_input = True

    def configure(self, args: Args) -> dict:
        num_heads = _positive_int("num_heads", args.get("num_heads", pos=0))
        key_dim = _positive_int("key_dim", args.get("key_dim", pos=1))
        value_dim = args.get("value_dim", None, pos=2)
        if value_dim is not None:
            _positive_int("value_dim", value_dim)
        output_shape = args.get("output_shape", None, pos=5)
        if not output_shape:
            output_shape = None
        elif isinstance(output_shape, int):
            output_shape = (output_shape,)
        elif isinstance(output_shape, (list, tuple)):
            output_shape = tuple(output_shape)
        else:
            raise LayerError(f"output_shape must be an int, tuple or list, got {output_shape!r}")
        axes = args.get("attention_axes", None, pos=6)
        if isinstance(axes, int):
            axes = (axes,)
        elif axes and not isinstance(axes, (list, tuple)):
            raise LayerError(f"attention_axes must be an int, list or tuple, got {axes!r}")
        return {
            "num_heads": num_heads,
            "key_dim": key_dim,
            "value_dim": value_dim or key_dim,
            "use_bias": bool(args.get("use_bias", True, pos=4)),
            "output_shape": output_shape,
            "attention_axes": None if axes is None else tuple(axes),
            "use_gate": bool(args.get("use_gate", False)),
            "dropout": args.get("dropout", 0.0, pos=3),
        }

    @staticmethod
    def _inputs(input_shape) -> tuple:
        """``(query, value, key)`` shapes; key is the value when not given."""
        shapes = [tuple(s) for s in input_shape]
        if len(shapes) not in (2, 3):
            raise LayerError(
                f"MultiHeadAttention is called on query, value and optionally key; "
                f"got {len(shapes)} inputs"
            )
        query, value = shapes[0], shapes[1]
        key = shapes[2] if len(shapes) == 3 else value
        if value[1:-1] != key[1:-1]:
            raise LayerError(
                "all dimensions of value and key but the last must be equal, got "
                f"value {format_shape(value)} and key {format_shape(key)}"
            )
        return query, value, key

    def output_shape(self, config, input_shape):
        query, value, _ = self._inputs(input_shape)
        self._check_attention_axes(config, value)
        if config["output_shape"]:
            return query[:-1] + config["output_shape"]
        return query

    @staticmethod
    def _check_attention_axes(config, value: tuple) -> None:
        """Keras indexes the projected value (one more dim than ``value``) with these axes."""
        axes = config["attention_axes"]
        if axes is None:
            return
        rank = len(value) + 1
        for axis in axes:
            position = axis if axis >= 0 else rank - 1 + axis
            if not -rank <= position < rank:
                raise LayerError(
                    f"attention axis {axis} is out of range for value {format_shape(value)}"
                )

    def saved_tensors(self, config, input_shape):
        """The projected query, key and value, the softmax scores (and their dropout), and
        the per-head output before the output projection (default attention axes: every
        axis between batch and features)."""
        query, value, key = self._inputs(input_shape)
        heads, key_dim, value_dim = config["num_heads"], config["key_dim"], config["value_dim"]
        batch, q_axes, k_axes = query[0], query[1:-1], key[1:-1]
        scores = (batch, heads) + q_axes + k_axes
        saved = [query[:-1] + (heads, key_dim), key[:-1] + (heads, key_dim),
                 value[:-1] + (heads, value_dim), scores, query[:-1] + (heads, value_dim)]
        if config.get("dropout"):
            saved.append(scores)
        return saved

    def saved(self, config, input_shape, output_shape):
        """Its inputs (for the projections' gradients), the projected query, key and value,
        the scores and their softmax probabilities (and a one-byte dropout mask), the heads'
        output before the output projection; while its backward runs, one more score-sized
        gradient (XLA's plans: two score-sized buffers per attention layer from the forward
        pass until its backward, three while its backward runs); while it runs, in inference
        too, the scores, their softmax and the value projection."""
        q_proj, k_proj, v_proj, scores, heads = self.saved_tensors(config, input_shape)[:5]
        out = [Saved("input", index=i, needed_for="weights") for i in range(len(input_shape))]
        out += [Saved("query projection", q_proj), Saved("key projection", k_proj),
                Saved("value projection", v_proj), Saved("attention probabilities", scores),
                Saved("attention scores", scores),
                Saved("heads output", heads, needed_for="weights")]
        if config.get("dropout"):
            out.append(Saved("dropout mask", scores, "bool"))
        out.append(Saved("score gradients", scores, when="backward"))
        # while it runs (inference too): the scores and their softmax, and the value
        # projection (H100 predict plan: two f32[32, 4, 128, 128] and the value's)
        out += [Saved("attention probabilities", scores, when="forward", count=2),
                Saved("value projection", v_proj, when="forward")]
        return self.torch_attention(config, input_shape, out, scores)

    @staticmethod
    def torch_attention(config, input_shape, out: list, scores: tuple) -> list:
        """Under torch, without dropout and on sequences (a 4-D projected query), Keras
        calls ``scaled_dot_product_attention``, a fused kernel that keeps no score matrix:
        its output (heads first, besides the heads-last copy the output projection reads)
        and one float32 log-sum-exp per query and head instead (measured on the CPU torch
        step; CUDA's memory-efficient and flash kernels keep the same).  With
        dropout, Keras computes the scores itself: its softmax keeps the scores alive
        (``_keras_logits``) besides the probabilities, and the product with the values
        keeps the dropped probabilities."""
        sequences = len(_query_value("MultiHeadAttention", input_shape)[0]) == 3
        if config.get("dropout") or not sequences:
            return out + [Saved("dropped probabilities", scores, profiles=("torch",))] \
                if config.get("dropout") else out
        score_sized = ("attention probabilities", "attention scores", "score gradients")
        kept = [replace(s, profiles=NOT_TORCH) if s.what in score_sized and not s.profiles
                else s for s in out]
        heads = next(s.shape for s in out if s.what == "heads output")
        return kept + [Saved("log-sum-exp", scores[:3], "float32", profiles=("torch",)),
                       Saved("fused attention output", heads, profiles=("torch",))]

    def weights(self, config, input_shape):
        query, value, key = self._inputs(input_shape)
        heads, key_dim, value_dim = config["num_heads"], config["key_dim"], config["value_dim"]
        q = _known_last(query, "query")
        out_dims = config["output_shape"] or (q,)
        projections = [
            ("query", (q, heads, key_dim), (heads, key_dim)),
            ("key", (_known_last(key, "key"), heads, key_dim), (heads, key_dim)),
            ("value", (_known_last(value, "value"), heads, value_dim), (heads, value_dim)),
            ("attention_output", (heads, value_dim) + tuple(out_dims), tuple(out_dims)),
        ]
        if config["use_gate"]:
            projections.append(("gate", (q, heads, value_dim), (heads, value_dim)))
        out = []
        for name, kernel, bias in projections:
            out.append(Weight(f"{name}/kernel", kernel))
            if config["use_bias"]:
                out.append(Weight(f"{name}/bias", bias))
        return out


def _query_value(layer: str, input_shape) -> tuple:
    """The query and value shapes of ``[query, value]`` or ``[query, value, key]``."""
    shapes = [tuple(s) for s in input_shape]
    if len(shapes) not in (2, 3):
        raise LayerError(f"{layer} is called on [query, value] or [query, value, key]; "
                         f"got {len(shapes)} inputs")
    return shapes[0], shapes[1]


@register
class Attention(LayerKind):
    """``Attention(use_scale=False, score_mode="dot", dropout=0.0)``: dot-product attention
    called on ``[query, value]`` or ``[query, value, key]``.

    The output is the query shape with the value's last dimension.  ``use_scale`` adds one
    scalar ``scale``; ``score_mode="concat"`` one scalar ``concat_score_weight``.  Keras
    checks no other dimension when building.
    """

    name = "Attention"
    family = "attention"
    multi_input = True

    def configure(self, args: Args) -> dict:
        score_mode = args.get("score_mode", "dot", pos=1)
        if score_mode not in ("dot", "concat"):
            raise LayerError(f"score_mode must be 'dot' or 'concat', got {score_mode!r}")
        dropout = args.get("dropout", 0.0, pos=2)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise LayerError(f"dropout must be a float, got {dropout!r}")
        return {"use_scale": bool(args.get("use_scale", self._default_scale, pos=0)),
                "score_mode": score_mode}

    _default_scale = False

    def output_shape(self, config, input_shape):
        query, value = _query_value(self.name, input_shape)
        return query[:-1] + value[-1:]

    def saved_tensors(self, config, input_shape):
        """The (query steps x value steps) scores and their softmax."""
        query, value = _query_value(self.name, input_shape)
        scores = query[:-1] + value[1:-1]
        return [scores, scores]

    def saved(self, config, input_shape, output_shape):
        """Its inputs, the softmax probabilities, and one score-sized gradient while its
        backward runs; while it runs (inference too), the scores and their softmax."""
        out = [Saved("input", index=i) for i in range(len(input_shape))]
        for i, shape in enumerate(self.saved_tensors(config, input_shape)[:-1]):
            out.append(Saved("attention scores" if i else "attention probabilities", shape))
        scores = self.saved_tensors(config, input_shape)[-1]
        return out + [Saved("score gradients", scores, when="backward"),
                      Saved("attention probabilities", scores, when="forward", count=2)]

    def weights(self, config, input_shape):
        _query_value(self.name, input_shape)
        out = []
        if config["use_scale"]:
            out.append(Weight("scale", ()))
        if config["score_mode"] == "concat":
            out.append(Weight("concat_score_weight", ()))
        return out


@register
class AdditiveAttention(Attention):
    """``AdditiveAttention(use_scale=True, dropout=0.0)``: Bahdanau-style attention.

    Same inputs and output as :class:`Attention`; ``use_scale`` creates a ``scale`` vector
    the size of the query's last dimension, which must then be known.
    """

    name = "AdditiveAttention"
    _default_scale = True

    def configure(self, args: Args) -> dict:
        # AdditiveAttention(use_scale, dropout, **kwargs): dropout is its second argument.
        score_mode = args.get("score_mode", "dot")
        if score_mode not in ("dot", "concat"):
            raise LayerError(f"score_mode must be 'dot' or 'concat', got {score_mode!r}")
        dropout = args.get("dropout", 0.0, pos=1)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise LayerError(f"dropout must be a float, got {dropout!r}")
        return {"use_scale": bool(args.get("use_scale", True, pos=0))}

    def saved_tensors(self, config, input_shape):
        """The broadcast sum of query and key (steps x steps x features) under the tanh, and
        the scores with their softmax."""
        query, value = _query_value(self.name, input_shape)
        scores = query[:-1] + value[1:-1]
        return [query[:-1] + value[1:-1] + query[-1:], scores, scores]

    def weights(self, config, input_shape):
        query, _ = _query_value(self.name, input_shape)
        if not config["use_scale"]:
            return []
        return [Weight("scale", (_known_last(query, "query"),))]
