"""Core layers: Dense, EinsumDense, Identity, Masking and InputLayer."""

from __future__ import annotations

import re

from memlint.ir import Weight
from memlint.layers.base import Args, LayerError, LayerKind, Saved, activation_arg, register


@register
class Dense(LayerKind):
    """``Dense(units)``: a kernel over the last axis plus an optional bias."""

    name = "Dense"
    family = "core"

    def configure(self, args: Args) -> dict:
        units = args.get("units", pos=0, aliases=("output_dim",))
        if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
            raise LayerError(f"units must be a positive int, got {units!r}")
        return {"units": units, "use_bias": bool(args.get("use_bias", True, aliases=("bias",))),
                "activation": activation_arg(args, pos=1)}  # for saved() only

    def output_shape(self, config, input_shape):
        if len(input_shape) < 2:
            raise LayerError(f"Dense needs input of rank >= 2, got {input_shape}")
        return tuple(input_shape[:-1]) + (config["units"],)

    def weights(self, config, input_shape):
        last = input_shape[-1]
        if last is None:
            raise LayerError("the last dimension of the input to Dense must be defined, got None")
        out = [Weight("kernel", (last, config["units"]))]
        if config["use_bias"]:
            out.append(Weight("bias", (config["units"],)))
        return out

    def saved(self, config, input_shape, output_shape):
        """The default, and under XLA, a softmax's product: the normalisation over the units
        reduces across the product's columns, which no product's epilogue does, so the
        product is a buffer of its own beside the output while the call runs (H100 predict
        plan of a Dense(5000, softmax) over 32 x 20 positions: ``f32[640, 5000]`` beside the
        predictions, -43.6% without it)."""
        out = super().saved(config, input_shape, output_shape)
        function = config.get("activation")
        if isinstance(function, str) and function.lower() in ("softmax", "log_softmax") \
                and isinstance(output_shape, tuple):
            out.append(Saved("unfused product", tuple(output_shape), when="forward",
                             profiles=("xla",)))
        return out


@register
class InputLayer(LayerKind):
    """The placeholder a model starts from; it has no weights and passes its shape through."""

    name = "InputLayer"
    family = "core"


@register
class Identity(LayerKind):
    """``Identity()``: returns its input unchanged; no weights."""

    name = "Identity"
    family = "core"
    elementwise = True


@register
class Masking(LayerKind):
    """``Masking(mask_value=0.0)``: marks timesteps equal to ``mask_value``; same shape."""

    name = "Masking"
    family = "core"


# ---------------------------------------------------------------- EinsumDense

_EQUATION_FORMS = (
    (re.compile(r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)"), False),
    (re.compile(r"0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)"), True),
    (re.compile(r"([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0"), False),
)


def _analyze_einsum(equation: str, bias_axes, input_shape, partial_output) -> tuple:
    """``(kernel_shape, bias_shape, output_shape)`` the way Keras's EinsumDense derives them.

    Follows ``keras.src.layers.core.einsum_dense._analyze_split_string`` step by step,
    including its Python indexing; an index outside the input is a build error.
    """
    replaced = equation.replace("...", "0")
    for pattern, left_elided in _EQUATION_FORMS:
        match = pattern.match(replaced)
        if match:
            break
    else:
        raise LayerError(
            f"invalid einsum equation {equation!r}: expected [X],[Y]->[Z], ...[X],[Y]->...[Z] "
            "or [X]...,[Y]->[Z]..."
        )
    input_spec, weight_spec, output_spec = match.group(1), match.group(2), match.group(3)
    try:
        return _split_einsum(input_spec, weight_spec, output_spec, bias_axes,
                             list(input_shape), list(partial_output), left_elided)
    except IndexError as exc:
        raise LayerError(
            f"einsum equation {equation!r} does not fit input shape {input_shape}"
        ) from exc


def _split_einsum(input_spec, weight_spec, output_spec, bias_axes, input_shape, output_shape,
                  left_elided):
    elided = len(input_shape) - len(input_spec)
    output_shape.insert(0, input_shape[0])
    if elided > 0 and left_elided:
        for i in range(1, elided):
            output_shape.insert(1, input_shape[i])
    elif elided > 0:
        for i in range(len(input_shape) - elided, len(input_shape)):
            output_shape.append(input_shape[i])
    if left_elided:
        input_map = {d: (i + elided) - len(input_shape) for i, d in enumerate(input_spec)}
        output_map = {d: i + elided for i, d in enumerate(output_spec)}
    else:
        input_map = {d: i for i, d in enumerate(input_spec)}
        output_map = {d: i for i, d in enumerate(output_spec)}
    for d in input_spec:
        size = input_shape[input_map[d]]
        if d in output_map:
            out = output_shape[output_map[d]]
            if out is not None and out != size:
                raise LayerError(
                    f"input and output shapes differ at shared dimension '{d}': "
                    f"{size} and {out}"
                )
    for d in output_spec:
        if d not in input_spec and d not in weight_spec:
            raise LayerError(f"output dimension '{d}' appears in neither the input nor the "
                             "weight spec")
    kernel = []
    for d in weight_spec:
        if d in output_map:
            kernel.append(output_shape[output_map[d]])
        elif d in input_map:
            kernel.append(input_shape[input_map[d]])
        else:
            raise LayerError(f"weight dimension '{d}' matches neither the input nor the output")
    bias = None
    if bias_axes is not None:
        offset = elided if left_elided else 0
        sizes = {d: output_shape[i + offset] for i, d in enumerate(output_spec)}
        for d in bias_axes:
            if d not in output_spec:
                raise LayerError(f"bias dimension '{d}' is not part of the output spec "
                                 f"'{output_spec}'")
        first = min(output_spec.find(d) for d in bias_axes)
        bias = [sizes[d] if d in bias_axes else 1 for d in output_spec[first:]]
        if not left_elided:
            bias += [1] * max(elided, 0)
    return tuple(kernel), None if bias is None else tuple(bias), tuple(output_shape)


@register
class EinsumDense(LayerKind):
    """``EinsumDense(equation, output_shape, bias_axes=None)``: a dense layer written as an
    einsum ``input,kernel->output``.

    The kernel takes each letter's size from the output (``output_shape``, batch excluded)
    or else from the input; the bias spans the output from the first ``bias_axes`` letter
    on, with 1 on the letters not listed.  Every weight dimension must be known.
    """

    name = "EinsumDense"
    family = "core"

    def configure(self, args: Args) -> dict:
        equation = args.get("equation", pos=0)
        if not isinstance(equation, str):
            raise LayerError(f"EinsumDense equation must be a string, got {equation!r}")
        output_shape = args.get("output_shape", pos=1)
        if isinstance(output_shape, int) and not isinstance(output_shape, bool):
            output_shape = (output_shape,)
        elif isinstance(output_shape, (list, tuple)):
            output_shape = tuple(output_shape)
        else:
            raise LayerError(f"EinsumDense output_shape must be an int or a tuple, "
                             f"got {output_shape!r}")
        bias_axes = args.get("bias_axes", None, pos=3)
        if bias_axes is not None and not isinstance(bias_axes, str):
            raise LayerError(f"EinsumDense bias_axes must be a string, got {bias_axes!r}")
        return {"equation": equation, "output_shape": output_shape, "bias_axes": bias_axes,
                "activation": activation_arg(args)}  # for saved() only

    def _analyze(self, config, input_shape) -> tuple:
        return _analyze_einsum(config["equation"], config["bias_axes"], input_shape,
                               config["output_shape"])

    def output_shape(self, config, input_shape):
        self.weights(config, input_shape)  # Keras builds (creating the weights) first
        return self._analyze(config, input_shape)[2]

    def weights(self, config, input_shape):
        kernel, bias, _ = self._analyze(config, input_shape)
        out = [("kernel", kernel)] + ([("bias", bias)] if bias is not None else [])
        for name, shape in out:
            if any(d is None for d in shape):
                raise LayerError(f"EinsumDense {name} shape {shape} has an undefined dimension")
        return [Weight(name, shape) for name, shape in out]
