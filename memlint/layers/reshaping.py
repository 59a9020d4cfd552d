"""Reshaping layers: Flatten, Reshape, Permute, RepeatVector, and the N-d ZeroPadding,
Cropping and UpSampling layers.  None of them has weights."""

from __future__ import annotations

from math import prod
from typing import ClassVar

from memlint.layers.base import (
    Args,
    data_format,
    LayerError,
    LayerKind,
    Saved,
    check_rank,
    format_shape,
    register,
    spatial_axes,
)
from memlint.layers.convolutional import (
    int_tuple,
    is_int,
    known,
    positive_int,
)


@register
class Flatten(LayerKind):
    """``Flatten()``: everything but the batch axis in one axis (rank-1 inputs give size 1).

    ``data_format`` only changes the order of the values, not the shape.
    """

    name = "Flatten"
    family = "reshaping"

    def configure(self, args: Args) -> dict:
        return {"data_format": data_format(args, pos=0)}

    def output_shape(self, config, input_shape):
        if not input_shape:
            raise LayerError("Flatten needs an input of rank >= 1")
        rest = input_shape[1:]
        return (input_shape[0], None if None in rest else prod(rest))


@register
class Reshape(LayerKind):
    """``Reshape(target_shape)``: a new shape (batch excluded) of the same size; one entry may
    be -1, computed from the input size."""

    name = "Reshape"
    family = "reshaping"

    def configure(self, args: Args) -> dict:
        target = known(args.get("target_shape", pos=0), "target_shape")
        if not isinstance(target, (tuple, list)):
            raise LayerError(f"target_shape must be a tuple of ints, got {target!r}")
        if not all(d is None or (is_int(d) and d >= -1) for d in target):
            raise LayerError(f"target_shape entries must be ints >= 0 or one -1, got {target!r}")
        if list(target).count(-1) > 1:
            raise LayerError(f"target_shape may hold only one -1, got {target!r}")
        return {"target_shape": tuple(target)}

    def output_shape(self, config, input_shape):
        target = config["target_shape"]
        rest = input_shape[1:]
        if None in rest or None in target:
            # Keras cannot check the size then, and leaves -1 unknown
            return (input_shape[0],) + tuple(None if d == -1 else d for d in target)
        size = prod(rest)
        known = prod(d for d in target if d != -1)
        if -1 not in target:
            if known != size:
                raise LayerError(f"cannot reshape {format_shape(input_shape)} ({size} values) "
                                 f"to {target} ({known} values)")
            return (input_shape[0],) + target
        if known == 0 or size % known:
            raise LayerError(f"cannot reshape {format_shape(input_shape)} ({size} values) "
                             f"to {target}: the other entries' product {known} does not "
                             f"divide {size}")
        return (input_shape[0],) + tuple(size // known if d == -1 else d for d in target)


@register
class Permute(LayerKind):
    """``Permute(dims)``: reorders the non-batch axes; ``dims`` is a permutation of 1..n."""

    name = "Permute"
    family = "reshaping"

    def configure(self, args: Args) -> dict:
        dims = known(args.get("dims", pos=0), "dims")
        if (not isinstance(dims, (tuple, list)) or not all(is_int(d) for d in dims)
                or sorted(dims) != list(range(1, len(dims) + 1))):
            raise LayerError(f"dims must be a permutation of 1..n, got {dims!r}")
        return {"dims": tuple(dims)}

    def output_shape(self, config, input_shape):
        dims = config["dims"]
        check_rank(input_shape, len(dims) + 1, self.class_name)
        return (input_shape[0],) + tuple(input_shape[d] for d in dims)


@register
class RepeatVector(LayerKind):
    """``RepeatVector(n)``: (batch, features) to (batch, n, features)."""

    name = "RepeatVector"
    family = "reshaping"

    def configure(self, args: Args) -> dict:
        return {"n": positive_int(args.get("n", pos=0), "n")}

    def output_shape(self, config, input_shape):
        check_rank(input_shape, 2, self.class_name)
        return (input_shape[0], config["n"], input_shape[1])


# ---------------------------------------------------------------- N-d spatial layers

def _pairs(value, rank: int, name: str) -> tuple:
    """Padding or cropping as ``rank`` (before, after) pairs of ints >= 0.

    Accepts an int (the same on every side), ``rank`` ints (symmetric per axis), or ``rank``
    entries that are each an int or a pair.  Keras 1's forms are read too: for 2D, four ints
    ``(top, bottom, left, right)``; and a dict of ``top_pad``/``bottom_pad``/... (2D) or
    ``left_pad``/``right_pad`` (1D).
    """
    known(value, name)
    if isinstance(value, dict):
        keys = {1: (("left_pad", "right_pad"),),
                2: (("top_pad", "bottom_pad"), ("left_pad", "right_pad"))}.get(rank)
        if keys is None:
            raise LayerError(f"'{name}' must be an int or a tuple, got {value!r}")
        value = tuple(tuple(value.get(k, 0) for k in pair) for pair in keys)
    elif rank == 2 and isinstance(value, (tuple, list)) and len(value) == 4:
        value = (tuple(value[:2]), tuple(value[2:]))
    if rank == 1:
        return (int_tuple(value, 2, name, minimum=0),)
    if is_int(value):
        value = (value,) * rank
    if not isinstance(value, (tuple, list)) or len(value) != rank:
        raise LayerError(f"'{name}' must be an int, {rank} ints or {rank} pairs of ints, "
                         f"got {value!r}")
    return tuple(int_tuple(entry, 2, name, minimum=0) for entry in value)


class _Spatial(LayerKind):
    """A layer that changes each spatial axis of an N-d input on its own."""

    family = "reshaping"
    rank: ClassVar[int] = 2
    has_data_format: ClassVar[bool] = True

    def fmt(self, args: Args, pos: int) -> str:
        return data_format(args, pos) if self.has_data_format else "channels_last"

    def output_shape(self, config, input_shape):
        check_rank(input_shape, self.rank + 2, self.class_name)
        axes, _ = spatial_axes(self.rank, config["data_format"])
        out = list(input_shape)
        for i, axis in enumerate(axes):
            if input_shape[axis] is not None:
                out[axis] = self.length(config, i, input_shape[axis], input_shape)
        return tuple(out)

    def length(self, config, i: int, length: int, input_shape) -> int:
        raise NotImplementedError


class _ZeroPadding(_Spatial):
    """``ZeroPaddingND(padding)``: adds zeros before and after each spatial axis."""

    default: ClassVar = 1

    def configure(self, args: Args) -> dict:
        padding = args.get("padding", self.default, pos=0)
        return {"padding": _pairs(padding, self.rank, "padding"), "data_format": self.fmt(args, 1)}

    def length(self, config, i, length, input_shape):
        return length + sum(config["padding"][i])


@register
class ZeroPadding1D(_ZeroPadding):
    """``ZeroPadding1D(padding=1)`` over (steps, channels)."""

    name = "ZeroPadding1D"
    rank = 1


@register
class ZeroPadding2D(_ZeroPadding):
    """``ZeroPadding2D(padding=(1, 1))`` over (rows, cols, channels)."""

    name = "ZeroPadding2D"
    rank = 2


@register
class ZeroPadding3D(_ZeroPadding):
    """``ZeroPadding3D(padding=(1, 1, 1))`` over (depth, rows, cols, channels)."""

    name = "ZeroPadding3D"
    rank = 3


class _Cropping(_Spatial):
    """``CroppingND(cropping)``: removes values before and after each spatial axis."""

    default: ClassVar = 0

    def configure(self, args: Args) -> dict:
        cropping = args.get("cropping", self.default, pos=0)
        return {"cropping": _pairs(cropping, self.rank, "cropping"),
                "data_format": self.fmt(args, 1)}

    def length(self, config, i, length, input_shape):
        out = length - sum(config["cropping"][i])
        if out <= 0:
            raise LayerError(f"{self.class_name} cropping {config['cropping']} leaves nothing of "
                             f"the input {format_shape(input_shape)}")
        return out


@register
class Cropping1D(_Cropping):
    """``Cropping1D(cropping=(1, 1))`` over (steps, channels); it has no data_format."""

    name = "Cropping1D"
    rank = 1
    default = (1, 1)
    has_data_format = False


@register
class Cropping2D(_Cropping):
    """``Cropping2D(cropping=((0, 0), (0, 0)))`` over (rows, cols, channels)."""

    name = "Cropping2D"
    rank = 2


@register
class Cropping3D(_Cropping):
    """``Cropping3D(cropping=((1, 1), (1, 1), (1, 1)))`` over (depth, rows, cols, channels)."""

    name = "Cropping3D"
    rank = 3
    default = 1


class _UpSampling(_Spatial):
    """``UpSamplingND(size)``: repeats the values along each spatial axis ``size`` times."""

    def configure(self, args: Args) -> dict:
        size = args.get("size", 2, pos=0, aliases=("length",))
        return {"size": int_tuple(size, self.rank, "size"), "data_format": self.fmt(args, 1)}

    def length(self, config, i, length, input_shape):
        return length * config["size"][i]


@register
class UpSampling1D(_UpSampling):
    """``UpSampling1D(size=2)`` over (steps, channels); Keras 1 called ``size`` ``length``."""

    name = "UpSampling1D"
    rank = 1
    has_data_format = False

    def configure(self, args):
        size = args.get("size", 2, pos=0, aliases=("length",))
        return {"size": (positive_int(size, "size"),), "data_format": "channels_last"}


@register
class UpSampling2D(_UpSampling):
    """``UpSampling2D(size=(2, 2), data_format=None, interpolation="nearest")`` over (rows,
    cols, channels); the interpolation decides how XLA computes it (memory/walk.py), not
    the shape (None where it is not known statically)."""

    name = "UpSampling2D"
    rank = 2

    def configure(self, args: Args) -> dict:
        how = args.get("interpolation", "nearest", pos=2)
        return {**super().configure(args), "interpolation": how if isinstance(how, str) else None}

    @staticmethod
    def interpolates(config: dict) -> bool:
        """Whether it interpolates (anything but ``"nearest"``, or an interpolation not
        known statically) rather than repeating rows."""
        return config.get("interpolation") != "nearest"

    def saved(self, config: dict, input_shape, output_shape) -> list:
        """An interpolating resize (anything but ``"nearest"``) is, under XLA, a product per
        spatial axis whose last one is written in the product's own layout and transposed
        into the output: a buffer of the output's size beside the output while the call
        runs; its backward transposes the output's gradient into one too (H100 and T4 plans
        of 2x2 to 8x8 bilinear upsamplings of 3 to 256 channels)."""
        if not self.interpolates(config) or output_shape is None:
            return []
        return [Saved("resize product", tuple(output_shape), when="forward",
                      profiles=("xla",)),
                Saved("transposed output gradient", tuple(output_shape), when="backward",
                      profiles=("xla",))]


@register
class UpSampling3D(_UpSampling):
    """``UpSampling3D(size=(2, 2, 2))`` over (depth, rows, cols, channels)."""

    name = "UpSampling3D"
    rank = 3
