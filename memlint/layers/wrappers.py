"""Wrapper and function layers: TimeDistributed and Lambda.

``TimeDistributed(layer)`` applies one copy of ``layer`` to every step of the time axis
(axis 1): the inner layer is built on the per-step shape ``(batch, *rest)``, so it owns the
same weights as if called on one step, and the output puts the time axis back in second
place.  Keras builds the inner layer and asks for its output shape directly, without calling
it, so the inner layer's own input checks (``input_spec``) are not applied.  The inner layer
may also be a model or a layer class of the analysed file: the frontend applies those
(``NESTED_ADAPTERS`` in :mod:`memlint.layers.base`).

``Lambda(function, output_shape=None)`` runs an arbitrary function.  memlint never runs it, so
its output shape is known only from ``output_shape``; Keras 3 takes that shape without the
batch axis and puts the input's batch size in front, without checking it against what the
function returns.
"""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import (
    REGISTRY,
    nested_call,
    nested_layer,
    nested_object,
    Args,
    LayerError,
    LayerKind,
    Saved,
    Unknown,
    UnresolvedArgument,
    format_shape,
    register,
)


# ---------------------------------------------------------------- TimeDistributed

def _inner(value, wrapper: str) -> dict:
    """The layer a wrapper applies per step, as a plain description; it must take one input.
    A model, or a layer class of the analysed file, is applied through the frontend."""
    found = nested_object(value)
    if found is not None:
        return found
    layer = nested_layer(value, f"{wrapper} layer", "a Keras layer instance")
    if REGISTRY[layer["class_name"]].multi_input:
        raise LayerError(f"{wrapper} passes one tensor per step, but {layer['class_name']} "
                         "needs a list of inputs")
    return layer


@register
class TimeDistributed(LayerKind):
    """``TimeDistributed(layer)``: ``layer`` applied to every slice along axis 1.

    The input must have at least 3 dimensions ``(batch, time, ...)``; the inner layer sees
    ``(batch, ...)``.  Output ``(batch, time) + inner_output[1:]``; weights are the inner
    layer's, built once on the per-step shape.
    """

    name = "TimeDistributed"
    family = "wrappers"

    def configure(self, args: Args) -> dict:
        return {"layer": _inner(args.get("layer", pos=0), self.name)}

    @staticmethod
    def _step_shape(input_shape) -> tuple:
        if isinstance(input_shape, list) or input_shape is None or len(input_shape) < 3:
            got = "unknown" if input_shape is None else format_shape(input_shape)
            raise LayerError(
                f"TimeDistributed expects an input with at least 3 dimensions "
                f"(batch, time, ...), got {got}"
            )
        return (input_shape[0], *input_shape[2:])

    def output_shape(self, config, input_shape):
        step = self._step_shape(input_shape)
        inner = config["layer"]
        out = nested_call(inner, "output_shape", step)
        if isinstance(out, list):
            raise LayerError(
                f"TimeDistributed needs a layer with one output, but {inner['class_name']} "
                f"returns {len(out)}"
            )
        return (out[0], input_shape[1], *out[1:])

    def weights(self, config, input_shape):
        step = self._step_shape(input_shape)
        inner = config["layer"]
        return [
            Weight(w.name, w.shape, trainable=w.trainable and inner["trainable"])
            for w in nested_call(inner, "weights", step)
        ]

    def saved_tensors(self, config, input_shape):
        # The inner layer runs on every step: each tensor it keeps gains the time axis.
        step = self._step_shape(input_shape)
        inner = config["layer"]
        saved = nested_call(inner, "saved_tensors", step)
        return [(s[0], input_shape[1], *s[1:]) for s in saved]

    def not_modelled(self, config, profile):
        """A layer class of the file as the inner layer: its ``call()`` is not traced."""
        found = config["layer"].get("object") if isinstance(config.get("layer"), dict) \
            else None
        untraced = getattr(found, "untraced", None)
        return untraced() if untraced is not None else None

    @staticmethod
    def _step_gradients(input_shape) -> list:
        """With a static time axis Keras runs the inner layer on each step's slice of the
        input in a Python loop; under torch autograd each slice's gradient is a zero tensor
        of the whole input's size with that slice written (``select_backward``), summed into
        the input's gradient one step at a time: two such buffers beside the sum while the
        backward runs (a torch step of TimeDistributed(Conv2D) -> TimeDistributed(
        MaxPooling2D) over 6 frames: two ``select_backward`` results and their sum, each
        [6, 32, 16, 16, 8], alive at the peak)."""
        if not isinstance(input_shape[1], int):
            return []
        return [Saved("step gradients", tuple(input_shape), needed_for="inputs",
                      when="backward", count=2, profiles=("torch",))]

    def saved(self, config, input_shape, output_shape):
        """The inner layer's, on every step: its input and output are slices of the
        wrapper's (kept as they are), its own buffers gain the time axis.  A model or a layer
        class of the file as the inner layer keeps its input and its inner tensors."""
        step = self._step_shape(input_shape)
        inner = config["layer"]
        if inner.get("object") is not None:
            inner_saved = [Saved("inner tensors", s) for s in
                           nested_call(inner, "saved_tensors", step)]
            return [Saved("input")] + [Saved(s.what, (s.shape[0], input_shape[1], *s.shape[1:]))
                                       for s in inner_saved if s.shape] + \
                self._step_gradients(input_shape)
        kind = REGISTRY[inner["class_name"]]
        step_out = (output_shape[0], *output_shape[2:])
        out = self._step_gradients(input_shape)
        for s in kind.saved(inner["config"], step, step_out):
            if s.what == "unfused product" and s.when == "forward":
                continue  # each step's product: the time-major steps the walk holds
            if s.what in ("input", "output", "sign") or not s.per_batch or not s.shape:
                out.append(s)
            else:
                out.append(Saved(s.what, (s.shape[0], input_shape[1], *s.shape[1:]), s.dtype,
                                 s.needed_for, s.index, s.when, s.per_batch, s.count,
                                 s.profiles))
        return out


# ---------------------------------------------------------------- Lambda

_NO_SHAPE = ("a Lambda's output shape is not known without running its function; "
             "pass output_shape=")


def _is_shape(value) -> bool:
    """A tuple of ints / None: one shape (Keras's ``is_shape_tuple``)."""
    return isinstance(value, tuple) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value
    )


def _add_batch(structure, batch):
    """``output_shape`` with the batch size in front of every shape in it.

    A tuple of ints is one shape; any other tuple or list holds several outputs.  Keras fails
    on anything else (an int, a list of ints, a string) when the layer is called.
    """
    if _is_shape(structure):
        if any(v is not None and v < 0 for v in structure):
            raise LayerError(f"Lambda output_shape has a negative dimension: {structure!r}")
        return (batch, *structure)
    if isinstance(structure, (tuple, list)):
        return [_add_batch(s, batch) for s in structure]
    raise LayerError(
        f"Lambda output_shape must be a tuple (without the batch axis) or a list of "
        f"tuples, got {structure!r}"
    )


def _first_shape(input_shape):
    """The first shape in a (possibly nested) structure of input shapes."""
    while isinstance(input_shape, list) and input_shape:
        input_shape = input_shape[0]
    return input_shape


@register
class Lambda(LayerKind):
    """``Lambda(function, output_shape=None, mask=None, arguments=None)``: no weights.

    The output shape is ``(batch,) + output_shape`` (Keras 3 adds the batch axis; a list or
    tuple of tuples gives several outputs).  Without ``output_shape`` Keras traces the
    function, and a callable ``output_shape`` is called on the input shape: the Keras
    frontend does both for functions of the analysed code (``models._resolve_lambda``) and
    gives this kind the result; otherwise the call is unresolved.  What a traced function
    computes is ``config["work"]``: "elementwise", "layout" (elements moved or joined: a
    slice, a concatenation) or absent (anything else, or not traced).
    """

    name = "Lambda"
    family = "wrappers"

    def configure(self, args: Args) -> dict:
        if not args.has("function", pos=0):
            raise UnresolvedArgument("function", "required argument is missing")
        # The function itself is never evaluated: it may well be Unknown.
        if "output_shape" in args.keywords:
            raw = args.keywords["output_shape"]
        elif len(args.positional) > 1:
            raw = args.positional[1]
        else:
            raw = None
        if raw is None:
            return {"output_shape": None, "unresolved": ("function", _NO_SHAPE)}
        if isinstance(raw, Unknown):
            return {"output_shape": None, "unresolved": ("output_shape", raw.reason)}
        if not isinstance(raw, (tuple, list, int, str, float)):
            return {"output_shape": None,
                    "unresolved": ("output_shape", "a callable output_shape is not evaluated")}
        if _contains_unknown(raw):
            return {"output_shape": None,
                    "unresolved": ("output_shape", "part of output_shape is not known statically")}
        return {"output_shape": raw, "unresolved": None}

    def saved(self, config, input_shape, output_shape):
        """An unknown function: its input (what most functions' gradients read)."""
        return [Saved("input", needed_for="inputs")]

    def is_elementwise(self, config) -> bool:
        """Where the frontend traced the function (``config["work"]``): element-wise
        operations alone, the output of the input's shape."""
        return isinstance(config, dict) and config.get("work") == "elementwise"

    def output_shape(self, config, input_shape):
        if config["unresolved"] is not None:
            raise UnresolvedArgument(*config["unresolved"])
        first = _first_shape(input_shape)
        batch = first[0] if isinstance(first, tuple) and first else None
        return _add_batch(config["output_shape"], batch)


def _contains_unknown(value) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, (tuple, list)):
        return any(_contains_unknown(v) for v in value)
    return False
