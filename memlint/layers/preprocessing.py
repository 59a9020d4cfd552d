"""Preprocessing layers that can sit inside a model.

Rescaling, Normalization, the image layers (Resizing, CenterCrop, the Random* augmentations)
and the categorical encoders (CategoryEncoding, Discretization).  Only Normalization has
weights (non-trainable statistics).

Keras 3 computes the image layers' output shapes without checking the rank much: Resizing
and CenterCrop treat any input that is not rank 4 as one unbatched image (so the first
dimension, the batch, is overwritten), RandomCrop writes its size at fixed negative axes,
and the other augmentations keep the shape whatever it is.
"""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import (
    Args,
    LayerError,
    LayerKind,
    UnresolvedArgument,
    data_format,
    register,
)


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float))  # Keras accepts bools here, as Python does


@register
class Rescaling(LayerKind):
    """``Rescaling(scale, offset=0.0)``: ``x * scale + offset``; no weights, same shape."""

    name = "Rescaling"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        if not args.has("scale", pos=0):
            raise LayerError("Rescaling needs a 'scale' argument")
        config = {}
        for key, pos, default in (("scale", 0, None), ("offset", 1, 0.0)):
            try:
                value = args.get(key, default, pos=pos)
            except UnresolvedArgument:
                value = None  # e.g. a NumPy array: it changes no shape
            config[key] = list(value) if isinstance(value, tuple) else value
        return config


# ---------------------------------------------------------------- Normalization

def _nested_shape(value) -> tuple | None:
    """The NumPy shape of a scalar or nested list; None if not a regular nesting of numbers."""
    if _number(value):
        return ()
    if isinstance(value, (list, tuple)):
        if not value:
            return (0,)
        inner = {_nested_shape(v) for v in value}
        if len(inner) == 1 and None not in inner:
            return (len(value),) + inner.pop()
    return None


@register
class Normalization(LayerKind):
    """``Normalization(axis=-1, mean=None, variance=None, invert=False)``.

    Without ``mean``/``variance`` it creates non-trainable ``mean`` and ``variance`` with the
    sizes of the kept axes (which must be known) and a scalar ``count``; with them, no
    weights.  ``axis=None`` keeps no axis (scalar statistics).
    """

    name = "Normalization"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if axis is None:
            axes = ()
        elif _int(axis):
            axes = (axis,)
        elif isinstance(axis, (list, tuple)) and all(_int(a) for a in axis):
            axes = tuple(axis)
        else:
            raise LayerError(f"Normalization axis must be an int, a list of ints or None, "
                             f"got {axis!r}")
        given = []
        shapes = []
        for key, pos in (("mean", 1), ("variance", 2)):
            try:
                value = args.get(key, None, pos=pos)
            except UnresolvedArgument:
                given.append(True)  # an array the frontend cannot see: statistics are given
                shapes.append(None)
                continue
            given.append(value is not None)
            shapes.append(None if value is None else _nested_shape(value))
        if given[0] != given[1]:
            raise LayerError("Normalization needs both mean and variance, or neither")
        if shapes[0] is not None and shapes[1] is not None:
            if shapes[0] != shapes[1]:
                raise LayerError(f"Normalization mean and variance shapes differ: "
                                 f"{shapes[0]} and {shapes[1]}")
            if len(shapes[0]) > len(axes):
                raise LayerError(f"the rank of mean ({len(shapes[0])}) exceeds the number of "
                                 f"axes ({len(axes)})")
        return {"axis": axes, "statistics_given": given[0]}

    def _kept(self, config, input_shape) -> tuple:
        rank = len(input_shape)
        if any(a < -rank or a >= rank for a in config["axis"]):
            raise LayerError(f"Normalization axis {config['axis']} is out of range for "
                             f"input rank {rank}")
        kept = sorted(a if a >= 0 else a + rank for a in config["axis"])
        for a in kept:
            if input_shape[a] is None:
                raise LayerError(f"Normalization: the kept axis {a} of input {input_shape} "
                                 "must be defined")
        return tuple(input_shape[a] for a in kept)

    def output_shape(self, config, input_shape):
        self._kept(config, input_shape)
        return input_shape

    def weights(self, config, input_shape):
        shape = self._kept(config, input_shape)
        if config["statistics_given"]:
            return []
        return [Weight("mean", shape, trainable=False),
                Weight("variance", shape, trainable=False),
                Weight("count", (), trainable=False)]


# ---------------------------------------------------------------- image layers

def _image_format(args: Args, pos=None) -> str:
    return data_format(args, pos=pos)


class _SizedImage(LayerKind):
    """Resizing and CenterCrop: ``(height, width)`` written over the spatial axes."""

    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        height = args.get("height", pos=0)
        width = args.get("width", pos=1)
        return {"height": height, "width": width, "data_format": self._format(args)}

    def _format(self, args: Args) -> str:
        return _image_format(args)

    def output_shape(self, config, input_shape):
        shape = list(input_shape)
        if len(shape) == 4:
            first = 1 if config["data_format"] == "channels_last" else 2
        else:  # Keras reads any other rank as one unbatched image
            first = 0 if config["data_format"] == "channels_last" else 1
        if first + 1 >= len(shape):
            raise LayerError(f"{self.name} cannot resize input {input_shape}")
        shape[first], shape[first + 1] = config["height"], config["width"]
        return tuple(shape)


@register
class Resizing(_SizedImage):
    """``Resizing(height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
    pad_to_aspect_ratio=False, ..., data_format=None)``; no weights."""

    name = "Resizing"

    def _format(self, args: Args) -> str:
        return _image_format(args, pos=8)


@register
class CenterCrop(_SizedImage):
    """``CenterCrop(height, width, data_format=None)``: rank 3 (unbatched) or 4 only; a
    crop larger than the image resizes up, so any size is accepted."""

    name = "CenterCrop"

    def _format(self, args: Args) -> str:
        return _image_format(args, pos=2)

    def output_shape(self, config, input_shape):
        if len(input_shape) not in (3, 4):
            raise LayerError(f"CenterCrop expects input of rank 3 or 4, got {input_shape}")
        return super().output_shape(config, input_shape)


@register
class RandomCrop(LayerKind):
    """``RandomCrop(height, width, seed=None, data_format=None)``: the size is written at
    axes -3, -2 (channels_last) or -2, -1 (channels_first), whatever the rank."""

    name = "RandomCrop"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        return {"height": args.get("height", pos=0), "width": args.get("width", pos=1),
                "data_format": _image_format(args, pos=3)}

    def output_shape(self, config, input_shape):
        axes = (-3, -2) if config["data_format"] == "channels_last" else (-2, -1)
        if len(input_shape) < -axes[0]:
            raise LayerError(f"RandomCrop cannot crop input {input_shape}")
        shape = list(input_shape)
        shape[axes[0]], shape[axes[1]] = config["height"], config["width"]
        return tuple(shape)


def _base_factor(factor, bounds: tuple, layer: str):
    """Keras's BaseImagePreprocessingLayer factor check: a number within ``bounds``, or two
    numbers not entirely outside them."""
    error = LayerError(f"{layer} factor must be a number or two numbers in "
                       f"[{bounds[0]}, {bounds[1]}], got {factor!r}")
    if isinstance(factor, (list, tuple)):
        if len(factor) != 2 or not all(_number(f) for f in factor):
            raise error
        if factor[0] > bounds[1] or factor[1] < bounds[0]:
            raise error
    elif _number(factor):
        if not bounds[0] <= factor <= bounds[1]:
            raise error
    else:
        raise error


def _range_factor(factor, name: str, layer: str, lower_open: bool) -> None:
    """RandomZoom / RandomTranslation factor check: each number in [-1, 1] ((-1, 1] for
    zoom)."""
    numbers = factor if isinstance(factor, (list, tuple)) else [factor]
    if isinstance(factor, (list, tuple)) and len(factor) != 2:
        raise LayerError(f"{layer} {name} must be a number or two numbers, got {factor!r}")
    for number in numbers:
        if not _number(number):
            raise LayerError(f"{layer} {name} must be a number or two numbers, got {factor!r}")
        if number > 1.0 or number < -1.0 or (lower_open and number == -1.0):
            raise LayerError(f"{layer} {name} is out of range: {factor!r}")


_FILL_MODES = ("reflect", "wrap", "constant", "nearest")
_INTERPOLATIONS = ("nearest", "bilinear")


def _fill_and_interpolation(args: Args, layer: str, fill_pos: int, interp_pos: int) -> None:
    fill_mode = args.get("fill_mode", "reflect", pos=fill_pos)
    if fill_mode not in _FILL_MODES:
        raise LayerError(f"{layer} fill_mode must be one of {', '.join(_FILL_MODES)}, "
                         f"got {fill_mode!r}")
    interpolation = args.get("interpolation", "bilinear", pos=interp_pos)
    if interpolation not in _INTERPOLATIONS:
        raise LayerError(f"{layer} interpolation must be 'nearest' or 'bilinear', "
                         f"got {interpolation!r}")


class _Augmentation(LayerKind):
    """A random augmentation: no weights and the same shape, whatever the rank."""

    family = "preprocessing"


@register
class RandomFlip(_Augmentation):
    """``RandomFlip(mode="horizontal_and_vertical", seed=None, data_format=None)``; Keras
    does not validate ``mode`` when building."""

    name = "RandomFlip"

    def configure(self, args: Args) -> dict:
        return {"mode": args.get("mode", "horizontal_and_vertical", pos=0),
                "data_format": _image_format(args, pos=2)}


@register
class RandomRotation(_Augmentation):
    """``RandomRotation(factor, fill_mode="reflect", interpolation="bilinear", ...)``;
    ``factor`` is a fraction of 2π in [-1, 1]."""

    name = "RandomRotation"

    def configure(self, args: Args) -> dict:
        factor = args.get("factor", pos=0)
        _base_factor(factor or 0.0, (-1, 1), self.name)
        _fill_and_interpolation(args, self.name, 1, 2)
        return {"factor": factor, "data_format": _image_format(args, pos=5)}


@register
class RandomZoom(_Augmentation):
    """``RandomZoom(height_factor, width_factor=None, fill_mode, interpolation, ...)``;
    factors lie in (-1, 1]."""

    name = "RandomZoom"

    def configure(self, args: Args) -> dict:
        height = args.get("height_factor", pos=0)
        _range_factor(height, "height_factor", self.name, lower_open=True)
        width = args.get("width_factor", None, pos=1)
        if width is not None:
            _range_factor(width, "width_factor", self.name, lower_open=True)
        _fill_and_interpolation(args, self.name, 2, 3)
        return {"height_factor": height, "width_factor": width,
                "data_format": _image_format(args, pos=6)}


@register
class RandomTranslation(_Augmentation):
    """``RandomTranslation(height_factor, width_factor, fill_mode, interpolation, ...)``;
    both factors are required and lie in [-1, 1]."""

    name = "RandomTranslation"

    def configure(self, args: Args) -> dict:
        height = args.get("height_factor", pos=0)
        width = args.get("width_factor", pos=1)
        _range_factor(height, "height_factor", self.name, lower_open=False)
        _range_factor(width, "width_factor", self.name, lower_open=False)
        _fill_and_interpolation(args, self.name, 2, 3)
        return {"height_factor": height, "width_factor": width,
                "data_format": _image_format(args, pos=6)}


@register
class RandomContrast(_Augmentation):
    """``RandomContrast(factor, value_range=(0, 255), seed=None)``; factor in [0, 1]."""

    name = "RandomContrast"

    def configure(self, args: Args) -> dict:
        factor = args.get("factor", pos=0)
        _base_factor(factor, (0, 1), self.name)
        return {"factor": factor, "data_format": _image_format(args)}


# ---------------------------------------------------------------- categorical encoders

@register
class CategoryEncoding(LayerKind):
    """``CategoryEncoding(num_tokens, output_mode="multi_hot", sparse=False)``.

    ``multi_hot`` (Keras 2: ``binary``) and ``count`` replace the last axis by
    ``num_tokens``; ``one_hot`` appends it, unless the last axis is 1 (and not the only one),
    which it replaces.
    """

    name = "CategoryEncoding"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        mode = args.get("output_mode", "multi_hot", pos=1)
        if mode == "binary":
            mode = "multi_hot"
        if mode not in ("count", "one_hot", "multi_hot"):
            raise LayerError(f"CategoryEncoding output_mode must be 'count', 'one_hot' or "
                             f"'multi_hot', got {mode!r}")
        tokens = args.get("num_tokens", None, pos=0)
        if tokens is None:
            raise LayerError("CategoryEncoding needs num_tokens")
        if not _int(tokens) or tokens < 1:
            raise LayerError(f"num_tokens must be an int >= 1, got {tokens!r}")
        return {"num_tokens": tokens, "output_mode": mode}

    def output_shape(self, config, input_shape):
        shape, tokens = tuple(input_shape), config["num_tokens"]
        if not shape:
            return (tokens,)
        if config["output_mode"] == "one_hot" and (shape[-1] != 1 or len(shape) == 1):
            return shape + (tokens,)
        return shape[:-1] + (tokens,)


@register
class Discretization(LayerKind):
    """``Discretization(bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int",
    sparse=False)``.

    ``int`` keeps the shape; the others encode ``len(bin_boundaries) + 1`` (or ``num_bins``)
    bins: ``one_hot`` like CategoryEncoding, ``multi_hot``/``count`` fold axis 1 away, as
    Keras 3 computes it: ``(batch, *shape[2:], depth)``.  Keras 3 takes no generic layer
    keywords (``trainable``) here.
    """

    name = "Discretization"
    family = "preprocessing"
    _ACCEPTED = ("bin_boundaries", "num_bins", "epsilon", "output_mode", "sparse", "dtype",
                 "name")

    def configure(self, args: Args) -> dict:
        for key in args.keywords:
            if key not in self._ACCEPTED:
                raise LayerError(f"Discretization does not accept the argument '{key}'")
        if len(args.positional) > 7:
            raise LayerError("Discretization takes at most 7 positional arguments")
        sparse = args.get("sparse", False, pos=4)
        mode = args.get("output_mode", "int", pos=3)
        if sparse and mode == "int":
            raise LayerError("Discretization sparse=True needs a one_hot, multi_hot or count "
                             "output_mode")
        if mode not in ("int", "one_hot", "multi_hot", "count"):
            raise LayerError(f"Discretization output_mode must be 'int', 'one_hot', "
                             f"'multi_hot' or 'count', got {mode!r}")
        num_bins = args.get("num_bins", None, pos=1)
        if num_bins is not None and (not _number(num_bins) or num_bins < 0):
            raise LayerError(f"num_bins must be >= 0, got {num_bins!r}")
        try:
            boundaries = args.get("bin_boundaries", None, pos=0)
            depth = None if boundaries is None else len(boundaries) + 1
        except UnresolvedArgument:
            boundaries, depth = Ellipsis, None  # given, but its length is unknown
        except TypeError as exc:
            raise LayerError(f"bin_boundaries must be a list, got {boundaries!r}") from exc
        if num_bins is not None and boundaries is not None:
            raise LayerError("Discretization takes num_bins or bin_boundaries, not both")
        if num_bins is None and boundaries is None:
            raise LayerError("Discretization needs num_bins or bin_boundaries")
        if num_bins is not None:
            depth = num_bins
        if depth is None and mode != "int":
            raise UnresolvedArgument("bin_boundaries", "its length is not known statically")
        return {"output_mode": mode, "depth": depth}

    def output_shape(self, config, input_shape):
        shape, mode, depth = tuple(input_shape), config["output_mode"], config["depth"]
        if mode == "int":
            return shape
        if mode == "one_hot":
            if shape and shape[-1] == 1 and len(shape) > 1:
                return shape[:-1] + (depth,)
            return shape + (depth,)
        if len(shape) >= 2:
            return (shape[0],) + shape[2:] + (depth,)
        return (depth,)


