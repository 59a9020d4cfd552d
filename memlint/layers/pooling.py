"""Pooling layers: max and average pooling over windows, and global pooling.

Window pooling shares :class:`_Pooling` (N-d windows, strides defaulting to the pool size);
global pooling shares :class:`_GlobalPooling`.  Keras 3's short names (``MaxPool2D``,
``GlobalAvgPool2D``, ...) are aliases.  None of these layers has weights.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Optional

from memlint.layers.base import (
    NOT_TORCH,
    Args,
    Saved,
    data_format,
    instead_of_input,
    LayerError,
    LayerKind,
    check_rank,
    conv_output_length,
    format_shape,
    register,
    spatial_axes,
)
from memlint.layers.convolutional import int_tuple

# Keras 1 keywords of the 1D layers (``MaxPooling1D(pool_length=2, stride=None)``), whose
# input was always (steps, channels).
KERAS1_1D_KEYWORDS = frozenset({"pool_length", "stride", "border_mode"})


def _max_pool_saved(self, config, input_shape, output_shape):
    """Max pooling routes the gradient to each window's maximum: it keeps its input
    (TensorFlow's gradient kernel also reads the output; XLA recomputes the windows), and
    XLA's backward (a select-and-scatter rewritten with int32 window indices) holds rank + 2
    index arrays and one value array of the output's size while it runs.  The scatter
    writes into zeros of the input's shape: where a ReLU wrote the input, XLA shares that
    broadcast with the ReLU's ``max(x, 0)`` and materialises it in the forward pass, alive
    until this backward writes the input's gradient over it.  Where another layer also
    reads the input (a U-Net's skip connection), the scatter adds into that layer's share
    of the gradient instead and no zeros are made (T4, A100 and H100 plans of U-Nets: the
    scatter's destination a slice of the concatenation's gradient).  The walk resolves
    ``"scatter zeros"`` against the profile, the input's producer and its readers.  PyTorch
    keeps each window's argmax as int64 indices and, over two or three spatial axes, the input it
    pooled (for channels-last data, Keras's channels-first copy); one-axis pooling keeps no
    input (measured on the CPU torch step)."""
    rank = len(input_shape) - 2
    saved = [Saved("input", needed_for="inputs"),
             Saved("output", needed_for="inputs", profiles=("tf-graph", "default")),
             Saved("scatter zeros", tuple(input_shape), needed_for="inputs",
                   profiles=("xla",)),
             Saved("argmax indices", tuple(output_shape), "int64", needed_for="inputs",
                   profiles=("torch",))] + _window_scratch(rank, output_shape)
    return _torch_layout_copy(config, input_shape, saved, output_shape)


def _average_pool_saved(self, config, input_shape, output_shape):
    """Average pooling's gradient needs only shapes under XLA and TensorFlow; PyTorch's
    ``avg_pool`` backward over two or three spatial axes reads the input it pooled (for
    channels-last data, Keras's channels-first copy)."""
    return _torch_layout_copy(config, input_shape, [
        Saved("input", needed_for="inputs", profiles=("torch",))], output_shape)


def _torch_layout_copy(config, input_shape, saved: list, output_shape=None) -> list:
    """Keras's torch backend pools channels-last data as a channels-first copy
    (``permute(...).contiguous()``, keras/src/backend/torch/nn.py): the copy is what the
    pooling op keeps, not the input, and where ``"same"`` padding is uneven a padded copy
    of it besides (measured: both alive until the backward).  Pooling over one axis keeps
    neither."""
    if len(input_shape) == 3:
        return instead_of_input(saved, "torch", [])
    copies = []
    if config["data_format"] != "channels_first":
        copies.append(Saved("layout copy", tuple(input_shape), needed_for="inputs"))
    padded = _padded(config, input_shape, output_shape)
    if padded is not None:
        copies.append(Saved("padded copy", padded, needed_for="inputs"))
    return instead_of_input(saved, "torch", copies) if copies else saved


def _padding_totals(config, input_shape, output_shape) -> Optional[dict]:
    """The padding ``"same"`` adds on each spatial axis (axis -> total), or None where it
    pads nothing or a size is unknown."""
    if config["padding"] != "same" or not isinstance(output_shape, tuple) \
            or not isinstance(input_shape, tuple):
        return None
    axes, _ = spatial_axes(len(input_shape) - 2, config["data_format"])
    totals = {}
    for i, axis in enumerate(axes):
        length, out = input_shape[axis], output_shape[axis]
        if not isinstance(length, int) or not isinstance(out, int):
            return None
        totals[axis] = max((out - 1) * config["strides"][i] + config["pool_size"][i]
                           - length, 0)
    return totals


def _padded(config, input_shape, output_shape):
    """The input's shape after the explicit padding the torch backend adds where
    ``"same"`` padding is uneven (None when it adds none or a size is unknown)."""
    totals = _padding_totals(config, input_shape, output_shape)
    if totals is None or not any(total % 2 == 1 for total in totals.values()):
        return None
    return tuple(d + totals[axis] if axis in totals else d
                 for axis, d in enumerate(input_shape))


def pads_before(config, input_shape, output_shape) -> bool:
    """Whether ``"same"`` padding puts a padding row before some spatial axis (XLA's
    select-and-scatter of the pooling's backward then scatters into a padded map, sliced
    after); unknown sizes count as padded."""
    if config.get("padding") != "same":
        return False
    totals = _padding_totals(config, input_shape, output_shape)
    return totals is None or any(total // 2 > 0 for total in totals.values())


def _global_max_saved(self, config, input_shape, output_shape):
    """Global max pooling compares its input with its output in the backward: it keeps
    both (no scatter: its gradient is a select).  Under XLA the comparison is a one-byte
    mask of the input's shape beside the count of maxima per output (H100 plan of
    Conv2D(32, relu) -> GlobalMaxPooling2D at batch 32: ``pred[32, 32, 32, 32]`` alive
    until the select writes the input's gradient)."""
    rank = len(input_shape) - 2
    others = tuple(name for name in NOT_TORCH if name != "xla")
    return [Saved("input", needed_for="inputs"), Saved("output", needed_for="inputs"),
            Saved("location mask", tuple(input_shape), "bool", needed_for="inputs",
                  when="backward", profiles=("xla",)),
            Saved("maxima counts", tuple(output_shape), "float32", needed_for="inputs",
                  when="backward", profiles=("xla",))] + [
        replace(s, profiles=others) for s in _window_scratch(rank, output_shape)]


def _window_scratch(rank: int, output_shape) -> list:
    """XLA's select-and-scatter scratch (PyTorch scatters by its saved argmax indices)."""
    return [Saved("window indices", tuple(output_shape), "int32", needed_for="inputs",
                  when="backward", count=rank + 2, profiles=NOT_TORCH),
            Saved("window values", tuple(output_shape), needed_for="inputs", when="backward",
                  profiles=NOT_TORCH)]


class _Pooling(LayerKind):
    """``MaxPoolingND`` / ``AveragePoolingND(pool_size, strides=None, padding='valid')``."""

    family = "pooling"
    rank: ClassVar[int] = 2
    default_pool: ClassVar[Optional[int]] = 2

    def configure(self, args: Args) -> dict:
        # Keras 3's AveragePooling needs pool_size; Keras 1 and 2 defaulted it to 2, as
        # MaxPooling still does, so code written for them keeps its meaning.
        pool = args.get("pool_size", self.default_pool, pos=0, aliases=("pool_length",))
        pool = int_tuple(pool, self.rank, "pool_size")
        strides = args.get("strides", None, pos=1, aliases=("stride", "subsample"))
        strides = pool if strides is None else int_tuple(strides, self.rank, "strides")
        padding = args.get("padding", "valid", pos=2, aliases=("border_mode",))
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise LayerError(f"padding must be 'valid' or 'same', got {padding!r}")
        if self.rank == 1 and KERAS1_1D_KEYWORDS & set(args.keywords):
            fmt = "channels_last"
        else:
            fmt = data_format(args, pos=3)
        return {"pool_size": pool, "strides": strides, "padding": padding.lower(),
                "data_format": fmt}

    def output_shape(self, config, input_shape):
        check_rank(input_shape, self.rank + 2, self.class_name)
        axes, _ = spatial_axes(self.rank, config["data_format"])
        out = list(input_shape)
        for i, axis in enumerate(axes):
            length = conv_output_length(input_shape[axis], config["pool_size"][i],
                                        config["padding"], config["strides"][i])
            if length is not None and length <= 0:
                raise LayerError(
                    f"{self.class_name} output would have a dimension of size {length}: input "
                    f"{format_shape(input_shape)}, pool_size={config['pool_size']}, "
                    f"strides={config['strides']}, padding='{config['padding']}'")
            out[axis] = length
        return tuple(out)


@register
class MaxPooling1D(_Pooling):
    """``MaxPooling1D(pool_size=2)`` over (steps, channels)."""

    name = "MaxPooling1D"
    saved = _max_pool_saved
    aliases = ("MaxPool1D",)
    rank = 1


@register
class MaxPooling2D(_Pooling):
    """``MaxPooling2D(pool_size=(2, 2))`` over (rows, cols, channels)."""

    name = "MaxPooling2D"
    saved = _max_pool_saved
    aliases = ("MaxPool2D",)
    rank = 2


@register
class MaxPooling3D(_Pooling):
    """``MaxPooling3D(pool_size=(2, 2, 2))`` over (depth, rows, cols, channels)."""

    name = "MaxPooling3D"
    saved = _max_pool_saved
    aliases = ("MaxPool3D",)
    rank = 3


@register
class AveragePooling1D(_Pooling):
    """``AveragePooling1D(pool_size)`` over (steps, channels)."""

    name = "AveragePooling1D"
    aliases = ("AvgPool1D",)
    saved = _average_pool_saved
    rank = 1


@register
class AveragePooling2D(_Pooling):
    """``AveragePooling2D(pool_size)`` over (rows, cols, channels)."""

    name = "AveragePooling2D"
    aliases = ("AvgPool2D",)
    saved = _average_pool_saved
    rank = 2


@register
class AveragePooling3D(_Pooling):
    """``AveragePooling3D(pool_size)`` over (depth, rows, cols, channels)."""

    name = "AveragePooling3D"
    aliases = ("AvgPool3D",)
    saved = _average_pool_saved
    rank = 3


class _GlobalPooling(LayerKind):
    """``GlobalMaxPoolingND`` / ``GlobalAveragePoolingND(data_format=None, keepdims=False)``:
    reduces every spatial axis, keeping the batch and channel axes."""

    family = "pooling"
    rank: ClassVar[int] = 2

    def configure(self, args: Args) -> dict:
        return {"data_format": data_format(args, pos=0),
                "keepdims": bool(args.get("keepdims", False, pos=1))}

    def output_shape(self, config, input_shape):
        check_rank(input_shape, self.rank + 2, self.class_name)
        batch = input_shape[0]
        first = config["data_format"] == "channels_first"
        channels = input_shape[1] if first else input_shape[-1]
        if not config["keepdims"]:
            return (batch, channels)
        ones = (1,) * self.rank
        return (batch, channels) + ones if first else (batch,) + ones + (channels,)


@register
class GlobalMaxPooling1D(_GlobalPooling):
    """``GlobalMaxPooling1D()``: the maximum over steps."""

    name = "GlobalMaxPooling1D"
    saved = _global_max_saved
    aliases = ("GlobalMaxPool1D",)
    rank = 1


@register
class GlobalMaxPooling2D(_GlobalPooling):
    """``GlobalMaxPooling2D()``: the maximum over rows and cols."""

    name = "GlobalMaxPooling2D"
    saved = _global_max_saved
    aliases = ("GlobalMaxPool2D",)
    rank = 2


@register
class GlobalMaxPooling3D(_GlobalPooling):
    """``GlobalMaxPooling3D()``: the maximum over depth, rows and cols."""

    name = "GlobalMaxPooling3D"
    saved = _global_max_saved
    aliases = ("GlobalMaxPool3D",)
    rank = 3


@register
class GlobalAveragePooling1D(_GlobalPooling):
    """``GlobalAveragePooling1D()``: the mean over steps."""

    name = "GlobalAveragePooling1D"
    aliases = ("GlobalAvgPool1D",)
    rank = 1


@register
class GlobalAveragePooling2D(_GlobalPooling):
    """``GlobalAveragePooling2D()``: the mean over rows and cols."""

    name = "GlobalAveragePooling2D"
    aliases = ("GlobalAvgPool2D",)
    rank = 2


@register
class GlobalAveragePooling3D(_GlobalPooling):
    """``GlobalAveragePooling3D()``: the mean over depth, rows and cols."""

    name = "GlobalAveragePooling3D"
    aliases = ("GlobalAvgPool3D",)
    rank = 3
