"""Keras 2 locally connected layers: LocallyConnected1D and LocallyConnected2D.

Keras 3 dropped them; models written for Keras 2 (and Keras 1) still use them.  They work
like Conv1D/Conv2D with unshared weights: every output position has its own kernel.  The
spatial input size and the channels must therefore be known.

Weights follow Keras 2 and depend on ``implementation``:

* ``1`` (the default; ``padding="valid"`` only): a kernel
  ``(output positions, prod(kernel_size) * channels, filters)``;
* ``2``: a dense, masked kernel ``(*input spatial, channels, *output spatial, filters)``;
* ``3``: a sparse kernel holding one value per connected (input position, output position,
  input channel, filter), where windows clipped at the border (``padding="same"``) connect
  fewer positions;

plus a bias ``(*output spatial, filters)`` (one per position and filter) with
``use_bias=True``.  Output lengths use Keras 2's rule: ``ceil(length / stride)`` for
``same``, ``ceil((length - kernel + 1) / stride)`` for ``valid``.
"""

from __future__ import annotations

from math import prod
from typing import ClassVar

from memlint.ir import Weight
from memlint.layers.base import (
    Args,
    activation_arg,
    LayerError,
    LayerKind,
    UnresolvedArgument,
    check_rank,
    data_format,
    format_shape,
    register,
)
from memlint.layers.convolutional import int_tuple, is_int


def _output_length(length: int, kernel: int, padding: str, stride: int) -> int:
    """Keras 2 ``conv_utils.conv_output_length`` (dilation 1)."""
    if padding == "valid":
        length = length - kernel + 1
    return (length + stride - 1) // stride


def _connections(length: int, kernel: int, padding: str, stride: int, out: int) -> int:
    """Keras 2 ``conv_connected_inputs`` summed over output positions along one axis."""
    left = kernel // 2
    right = kernel - left
    total = 0
    for position in range(out):
        center = position * stride + (left if padding == "valid" else 0)
        total += max(0, min(length, center + right) - max(0, center - left))
    return total


_KERAS1_KEYWORDS = ("nb_filter", "filter_length", "nb_row", "nb_col", "border_mode",
                    "subsample", "subsample_length", "dim_ordering", "init", "bias",
                    "W_regularizer", "b_regularizer", "W_constraint", "b_constraint")


class _LocallyConnected(LayerKind):
    """What LocallyConnected1D and 2D share; subclasses set ``rank``.  A call using any
    Keras 1 keyword is read with the Keras 1 signature."""

    family = "locally_connected"
    rank: ClassVar[int] = 1

    def configure(self, args: Args) -> dict:
        n = self.rank
        if any(key in args.keywords for key in _KERAS1_KEYWORDS):
            raw = self.read_keras1(args)
        else:
            raw = self.read_keras2(args)
        filters = raw["filters"]
        if not is_int(filters) or filters <= 0:
            raise LayerError(f"filters must be a positive int, got {filters!r}")
        padding = raw["padding"]
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise LayerError(f"padding must be 'valid' or 'same', got {padding!r}")
        padding = padding.lower()
        implementation = args.get("implementation", 1)
        if isinstance(implementation, bool) or implementation not in (1, 2, 3):
            raise LayerError(f"implementation must be 1, 2 or 3, got {implementation!r}")
        if padding != "valid" and implementation == 1:
            raise LayerError(f"{self.name} supports padding='same' only with "
                             "implementation 2 or 3")
        return {
            "filters": filters,
            "kernel_size": int_tuple(raw["kernel_size"], n, "kernel_size"),
            "strides": int_tuple(raw["strides"], n, "strides"),
            "padding": padding,
            "data_format": raw["data_format"],
            "use_bias": bool(raw["use_bias"]),
            "implementation": implementation,
            "activation": activation_arg(args),  # for saved() only
        }

    def read_keras2(self, args: Args) -> dict:
        """``(filters, kernel_size, strides, padding, data_format, activation, use_bias)``."""
        positional = args.positional
        if (self.rank == 2 and len(positional) >= 3 and is_int(positional[1])
                and is_int(positional[2])):
            raise UnresolvedArgument(
                "kernel_size", "LocallyConnected2D(f, a, b) is a kernel of (a, b) in Keras 1 "
                "but strides=b in Keras 2; write kernel_size=... or strides=...")
        return {
            "filters": args.get("filters", pos=0),
            "kernel_size": args.get("kernel_size", pos=1),
            "strides": args.get("strides", 1, pos=2),
            "padding": args.get("padding", "valid", pos=3),
            "data_format": data_format(args, pos=4),
            "use_bias": args.get("use_bias", True, pos=6),
        }

    def read_keras1(self, args: Args) -> dict:
        """Keras 1: ``(nb_filter, filter_length)`` / ``(nb_filter, nb_row, nb_col)`` then
        ``init, activation, ...``; ``border_mode``, ``subsample(_length)``, ``bias``."""
        if self.rank == 1:
            kernel = args.get("kernel_size", pos=1, aliases=("filter_length",))
            strides = args.get("strides", 1, aliases=("subsample_length",))
        else:
            kernel = (args.get("nb_row", pos=1), args.get("nb_col", pos=2))
            strides = args.get("strides", 1, aliases=("subsample",))
        return {
            "filters": args.get("filters", pos=0, aliases=("nb_filter",)),
            "kernel_size": kernel,
            "strides": strides,
            "padding": args.get("padding", "valid", aliases=("border_mode",)),
            "data_format": data_format(args),
            "use_bias": args.get("use_bias", True, aliases=("bias",)),
        }

    def _dims(self, config, input_shape) -> tuple:
        """``(spatial input sizes, channels, spatial output sizes)``; all must be known."""
        check_rank(input_shape, self.rank + 2, self.name)
        if config["data_format"] == "channels_first":
            channels, spatial = input_shape[1], tuple(input_shape[2:])
        else:
            channels, spatial = input_shape[-1], tuple(input_shape[1:-1])
        if None in spatial or channels is None:
            raise LayerError(f"{self.name} needs fully defined spatial and channel "
                             f"dimensions, got {format_shape(input_shape)}")
        out = tuple(_output_length(length, k, config["padding"], s) for length, k, s in
                    zip(spatial, config["kernel_size"], config["strides"]))
        if any(o <= 0 for o in out):
            raise LayerError(f"{self.name} output would have a dimension <= 0 for input "
                             f"{format_shape(input_shape)}")
        return spatial, channels, out

    def output_shape(self, config, input_shape):
        _, _, out = self._dims(config, input_shape)
        if config["data_format"] == "channels_first":
            return (input_shape[0], config["filters"]) + out
        return (input_shape[0],) + out + (config["filters"],)

    def weights(self, config, input_shape):
        spatial, channels, out = self._dims(config, input_shape)
        filters, kernel = config["filters"], config["kernel_size"]
        mode = config["implementation"]
        if mode == 1:
            shape = (prod(out), prod(kernel) * channels, filters)
        elif mode == 2:
            if config["data_format"] == "channels_first":
                shape = (channels,) + spatial + (filters,) + out
            else:
                shape = spatial + (channels,) + out + (filters,)
        else:
            links = prod(_connections(length, k, config["padding"], s, o) for length, k, s, o
                         in zip(spatial, kernel, config["strides"], out))
            shape = (links * channels * filters,)
        weights = [Weight("kernel", shape)]
        if config["use_bias"]:
            weights.append(Weight("bias", out + (filters,)))
        return weights


@register
class LocallyConnected1D(_LocallyConnected):
    """``LocallyConnected1D(filters, kernel_size, strides=1, padding="valid",
    data_format=None, ..., implementation=1)`` (Keras 1: ``nb_filter``,
    ``filter_length``, ``border_mode``, ``subsample_length``)."""

    name = "LocallyConnected1D"
    rank = 1


@register
class LocallyConnected2D(_LocallyConnected):
    """``LocallyConnected2D(filters, kernel_size, strides=(1, 1), padding="valid",
    data_format=None, ..., implementation=1)`` (Keras 1: ``nb_filter, nb_row, nb_col``,
    ``border_mode``, ``subsample``, ``dim_ordering``)."""

    name = "LocallyConnected2D"
    rank = 2

