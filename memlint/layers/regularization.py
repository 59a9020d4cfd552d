"""Regularization layers: Dropout and the spatial dropouts.

None of them has weights or changes the shape.  Keras validates the rate when the layer is
created, and the spatial variants require inputs of a fixed rank.
"""

from __future__ import annotations

from memlint.layers.base import (
    Args,
    Saved,
    LayerError,
    LayerKind,
    UnresolvedArgument,
    check_rank,
    data_format,
    register,
)


def _rate(args: Args):
    """``rate`` (Keras 1: ``p``), checked to lie in [0, 1] when known; None when unknown."""
    if not args.has("rate", pos=0, aliases=("p",)):
        raise LayerError("a dropout layer needs a 'rate' argument")
    try:
        rate = args.get("rate", pos=0, aliases=("p",))
    except UnresolvedArgument:
        return None  # given but not known statically; it changes no shape
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise LayerError(f"rate must be a float between 0 and 1, got {rate!r}")
    if not 0 <= rate <= 1:
        raise LayerError(f"rate must be a float between 0 and 1, got {rate!r}")
    return rate


def _noise_shape(args: Args):
    """``noise_shape``: None, or a sequence of positive ints / None, as Keras checks it."""
    try:
        value = args.get("noise_shape", None)
    except UnresolvedArgument:
        return None
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise LayerError(f"noise_shape must be a tuple or list of ints, got {value!r}")
    for dim in value:
        if dim is None:
            continue
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise LayerError(f"noise_shape must hold positive ints or None, got {value!r}")
    return tuple(value)


@register
class Dropout(LayerKind):
    """``Dropout(rate, noise_shape=None, seed=None)``; Keras 1 spelled the rate ``p``."""

    name = "Dropout"
    family = "regularization"
    masks_gradient = True

    def configure(self, args: Args) -> dict:
        return {"rate": _rate(args), "noise_shape": _noise_shape(args)}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        """The keep mask, one byte per element (XLA keeps a ``pred`` array)."""
        if config.get("rate") == 0:
            return []
        shape = output_shape
        noise = config.get("noise_shape")
        if isinstance(noise, (list, tuple)) and len(noise) == len(output_shape):
            shape = tuple(d if n is None else n for d, n in zip(output_shape, noise))
        return [Saved("mask", tuple(shape), "bool", needed_for="inputs")]


class _SpatialDropout(LayerKind):
    """Drops whole feature maps; the input must have ``rank`` dims (batch included).

    Unlike most layers, Keras 3 builds these from ``(rate, [data_format,] seed, name, dtype)``
    only: generic keywords such as ``trainable`` raise a TypeError.
    """

    family = "regularization"
    masks_gradient = True
    rank = 0
    has_data_format = True
    _REJECTED = ("trainable", "noise_shape", "activity_regularizer", "autocast")

    def configure(self, args: Args) -> dict:
        for key in self._REJECTED:
            if key in args.keywords:
                raise LayerError(f"{self.name} does not accept the argument '{key}'")
        config = {"rate": _rate(args)}
        if self.has_data_format:
            config["data_format"] = self._data_format(args)
        return config

    @staticmethod
    def _data_format(args: Args) -> str:
        # Keras 1 ``dim_ordering="default"`` meant the global setting.
        if not args.has("data_format") and args.get("dim_ordering", None) == "default":
            return args.context.data_format
        return data_format(args)

    def output_shape(self, config, input_shape):
        check_rank(input_shape, self.rank, self.name)
        return input_shape

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        """One byte per (sample, channel): the mask is broadcast over the feature map."""
        if config.get("rate") == 0:
            return []
        first = config.get("data_format") == "channels_first"
        shape = tuple(d if i == 0 or (i == 1 if first else i == len(output_shape) - 1) else 1
                      for i, d in enumerate(output_shape))
        return [Saved("mask", shape, "bool", needed_for="inputs")]


@register
class SpatialDropout1D(_SpatialDropout):
    """``SpatialDropout1D(rate)`` on ``(batch, steps, channels)``."""

    name = "SpatialDropout1D"
    rank = 3
    has_data_format = False


@register
class SpatialDropout2D(_SpatialDropout):
    """``SpatialDropout2D(rate, data_format=None)`` on 4D image batches."""

    name = "SpatialDropout2D"
    rank = 4


@register
class SpatialDropout3D(_SpatialDropout):
    """``SpatialDropout3D(rate, data_format=None)`` on 5D volume batches."""

    name = "SpatialDropout3D"
    rank = 5


def _unit_interval(args: Args, name: str, layer: str, alias: str):
    """A required argument (Keras 1: ``alias``) checked to lie in [0, 1] when known (None
    when unknown)."""
    if not args.has(name, pos=0, aliases=(alias,)):
        raise LayerError(f"{layer} needs a '{name}' argument")
    try:
        value = args.get(name, pos=0, aliases=(alias,))
    except UnresolvedArgument:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise LayerError(f"{layer} {name} must be a float between 0 and 1, got {value!r}")
    return value


@register
class GaussianNoise(LayerKind):
    """``GaussianNoise(stddev, seed=None)`` (Keras 1: ``sigma``): additive noise in training;
    stddev in [0, 1]."""

    name = "GaussianNoise"
    family = "regularization"

    def configure(self, args: Args) -> dict:
        return {"stddev": _unit_interval(args, "stddev", self.name, "sigma")}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return []  # added noise: the gradient passes through unchanged


@register
class GaussianDropout(LayerKind):
    """``GaussianDropout(rate, seed=None)`` (Keras 1: ``p``): multiplicative noise; rate in
    [0, 1]."""

    name = "GaussianDropout"
    family = "regularization"

    def configure(self, args: Args) -> dict:
        return {"rate": _unit_interval(args, "rate", self.name, "p")}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return [Saved("noise", tuple(output_shape), needed_for="inputs")]  # a float multiplier


@register
class AlphaDropout(LayerKind):
    """``AlphaDropout(rate, noise_shape=None, seed=None)``: SELU-preserving dropout."""

    name = "AlphaDropout"
    family = "regularization"

    def configure(self, args: Args) -> dict:
        return {"rate": _unit_interval(args, "rate", self.name, "p")}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return [Saved("mask", tuple(output_shape), "bool", needed_for="inputs")]


def _penalty(args: Args, name: str, pos: int):
    """An L1/L2 factor: None means 0; otherwise a finite, non-negative number (Keras L1L2)."""
    try:
        value = args.get(name, 0.0, pos=pos)
    except UnresolvedArgument:
        return None
    if value is None:
        return 0.0
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or value != value or value in (float("inf"), float("-inf")) or value < 0):
        raise LayerError(f"ActivityRegularization {name} must be a non-negative float, "
                         f"got {value!r}")
    return float(value)


@register
class ActivityRegularization(LayerKind):
    """``ActivityRegularization(l1=0.0, l2=0.0)``: adds a loss, no weights, same shape."""

    name = "ActivityRegularization"
    family = "regularization"

    def configure(self, args: Args) -> dict:
        return {"l1": _penalty(args, "l1", 0), "l2": _penalty(args, "l2", 1)}

    elementwise = True

    def saved(self, config, input_shape, output_shape):
        return [Saved("input", needed_for="inputs")]  # the penalty's gradient needs x
