"""Activation layers: Activation, ReLU, LeakyReLU, PReLU, ELU and Softmax.

All of them keep the input shape.  Only PReLU has a weight: a learned slope per input element,
shared along ``shared_axes``.
"""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import (Args, LayerError, LayerKind, Saved, UnresolvedArgument,
                                 activation_need, activation_products, register)


_UNKNOWN = object()


def _function_saves(need) -> list:
    """What an element-wise function keeps for its gradient (see ``ACTIVATION_NEEDS``)."""
    if need == "sign":
        return [Saved("sign", needed_for="inputs")]
    if need == "output":
        return [Saved("output", needed_for="inputs")]
    if need == "input":
        return [Saved("input", needed_for="inputs")]
    return []


def _value(args: Args, name: str, default=None, *, pos=None, aliases: tuple = ()):
    """An argument that changes no shape or weight: its value, or ``_UNKNOWN``."""
    try:
        return args.get(name, default, pos=pos, aliases=aliases)
    except UnresolvedArgument:
        return _UNKNOWN


def _check_slope(layer: str, name: str, value, *, allow_none: bool = False):
    """Reject what Keras rejects (a negative value, or None where not allowed); return the
    value to keep in the config (None when unknown)."""
    if value is _UNKNOWN:
        return None
    if value is None:
        if not allow_none:
            raise LayerError(f"{name} of a {layer} layer cannot be None")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise LayerError(f"{name} of a {layer} layer cannot be negative, got {value!r}")
    return value


@register
class Activation(LayerKind):
    """``Activation(activation)``: applies a named function element-wise."""

    name = "Activation"
    family = "activations"

    def configure(self, args: Args) -> dict:
        if not args.has("activation", pos=0):
            raise LayerError("Activation needs an 'activation' argument")
        activation = _value(args, "activation", pos=0)
        return {"activation": activation if isinstance(activation, str) else None}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        name = config.get("activation")
        return _function_saves(activation_need(name) if name is not None else "input") \
            + activation_products(name, output_shape)


@register
class ReLU(LayerKind):
    """``ReLU(max_value=None, negative_slope=0.0, threshold=0.0)``."""

    name = "ReLU"
    family = "activations"

    def configure(self, args: Args) -> dict:
        return {
            "max_value": _check_slope("ReLU", "max_value", _value(args, "max_value", pos=0),
                                      allow_none=True),
            "negative_slope": _check_slope("ReLU", "negative_slope",
                                           _value(args, "negative_slope", 0.0, pos=1)),
            "threshold": _check_slope("ReLU", "threshold", _value(args, "threshold", 0.0, pos=2)),
        }

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return _function_saves("sign")


@register
class LeakyReLU(LayerKind):
    """``LeakyReLU(negative_slope=0.3)``; Keras 1/2 called the slope ``alpha``."""

    name = "LeakyReLU"
    family = "activations"

    def configure(self, args: Args) -> dict:
        # Keras 3 lets a deprecated ``alpha=`` win over ``negative_slope``.
        if args.has("alpha"):
            slope = _value(args, "alpha")
        else:
            slope = _value(args, "negative_slope", 0.3, pos=0)
        return {"negative_slope": _check_slope("LeakyReLU", "negative_slope", slope)}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return _function_saves("sign")


@register
class PReLU(LayerKind):
    """``PReLU(shared_axes=None)``: a learned slope for every input element but the batch.

    Axes listed in ``shared_axes`` (1-based, as Keras counts them with the batch at 0) share
    one slope, so the ``alpha`` weight has size 1 there.
    """

    name = "PReLU"
    family = "activations"

    def configure(self, args: Args) -> dict:
        shared = args.get("shared_axes", None)
        if shared is None:
            axes = None
        elif isinstance(shared, (list, tuple)):
            axes = list(shared)
        else:
            axes = [shared]
        if axes is not None and not all(isinstance(a, int) and not isinstance(a, bool)
                                        for a in axes):
            raise LayerError(f"shared_axes must be ints, got {shared!r}")
        return {"shared_axes": axes}

    def weights(self, config, input_shape):
        alpha = list(input_shape[1:])
        for axis in config["shared_axes"] or ():
            # Keras writes ``param_shape[axis - 1] = 1`` with Python indexing, negative
            # axes included.
            index = axis - 1
            if not -len(alpha) <= index < len(alpha):
                raise LayerError(f"shared axis {axis} is out of range for input {input_shape}")
            alpha[index] = 1
        if any(d is None for d in alpha):
            raise LayerError(
                f"PReLU needs every non-shared input dimension defined, got {input_shape}"
            )
        return [Weight("alpha", tuple(alpha))]

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return [Saved("input")]  # the slope's gradient and the input's both need x


@register
class ELU(LayerKind):
    """``ELU(alpha=1.0)``."""

    name = "ELU"
    family = "activations"

    def configure(self, args: Args) -> dict:
        alpha = _value(args, "alpha", 1.0, pos=0)
        return {"alpha": None if alpha is _UNKNOWN else alpha}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return _function_saves("input")


@register
class Softmax(LayerKind):
    """``Softmax(axis=-1)``; Keras only uses the axis when the layer runs."""

    name = "Softmax"
    family = "activations"

    def configure(self, args: Args) -> dict:
        axis = _value(args, "axis", -1, pos=0)
        if axis is _UNKNOWN:
            axis = None
        return {"axis": list(axis) if isinstance(axis, (list, tuple)) else axis}

    def saved(self, config, input_shape, output_shape):
        return _function_saves("output")
