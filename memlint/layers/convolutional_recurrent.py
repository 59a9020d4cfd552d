"""Convolutional recurrent layers: ConvLSTM1D, ConvLSTM2D and ConvLSTM3D.

An LSTM whose input and recurrent transformations are convolutions.  The input is
``(batch, steps, *spatial, channels)`` (channels first: ``(batch, steps, channels,
*spatial)``); every time step is convolved like a ConvND with ``filters`` outputs.  The
spatial dims and the channels must be known.

Weights: ``kernel`` ``kernel_size + (channels, 4 * filters)``, ``recurrent_kernel``
``kernel_size + (filters, 4 * filters)`` and ``bias`` ``(4 * filters,)``.
"""

from __future__ import annotations

from typing import ClassVar

from memlint.ir import Weight
from memlint.layers.base import (
    NOT_TORCH,
    Args,
    Saved,
    LayerError,
    LayerKind,
    check_rank,
    data_format,
    format_shape,
    register,
)
from memlint.layers.convolutional import int_tuple, is_int

_FLAGS = ("return_sequences", "return_state", "go_backwards", "stateful")


class _ConvLSTM(LayerKind):
    """What ConvLSTM1D/2D/3D share; subclasses set ``rank``."""

    family = "convolutional_recurrent"
    rank: ClassVar[int] = 2

    def configure(self, args: Args) -> dict:
        n = self.rank
        filters = args.get("filters", pos=0)
        if not is_int(filters):
            raise LayerError(f"filters must be an int, got {filters!r}")
        strides = int_tuple(args.get("strides", 1, pos=2), n, "strides", minimum=1)
        padding = args.get("padding", "valid", pos=3)
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise LayerError(f"padding must be 'valid' or 'same', got {padding!r}")
        config = {
            "filters": filters,
            "kernel_size": int_tuple(args.get("kernel_size", pos=1), n, "kernel_size"),
            "strides": strides,
            "padding": padding.lower(),
            "data_format": data_format(args, pos=4),
            "dilation_rate": int_tuple(args.get("dilation_rate", 1, pos=5), n, "dilation_rate"),
            "use_bias": bool(args.get("use_bias", True)),
        }
        if max(config["strides"]) > 1 and max(config["dilation_rate"]) > 1:
            raise LayerError("strides > 1 cannot be combined with dilation_rate > 1")
        for flag in _FLAGS:
            config[flag] = bool(args.get(flag, False))
        return config

    def _state_shape(self, config, input_shape) -> tuple:
        """The per-step output (and state) shape without batch; checks the input."""
        check_rank(input_shape, self.rank + 3, self.name)
        step = tuple(input_shape[2:])
        if config["data_format"] == "channels_first":
            channels, spatial = step[0], step[1:]
        else:
            channels, spatial = step[-1], step[:-1]
        if None in spatial:
            raise LayerError(f"{self.name} needs static spatial dimensions, got "
                             f"{format_shape(input_shape)}")
        if channels is None:
            raise LayerError(f"the channel dimension of the input to {self.name} must be "
                             f"defined, got {format_shape(input_shape)}")
        out = []
        for length, k, s, d in zip(spatial, config["kernel_size"], config["strides"],
                                   config["dilation_rate"]):
            if config["padding"] == "valid":
                size = (length - d * (k - 1) - 1) // s + 1
                if size <= 0:
                    raise LayerError(f"{self.name} output would have a dimension of size "
                                     f"{size} for input {format_shape(input_shape)}")
            else:
                size = (length - 1) // s + 1
            out.append(size)
        if config["data_format"] == "channels_first":
            return (config["filters"],) + tuple(out)
        return tuple(out) + (config["filters"],)

    def output_shape(self, config, input_shape):
        state = self._state_shape(config, input_shape)
        batch, steps = input_shape[0], input_shape[1]
        if config["stateful"] and batch is None:
            raise LayerError(f"a stateful {self.name} needs a fixed batch size, got "
                             f"{format_shape(input_shape)}")
        output = (batch, steps) + state if config["return_sequences"] else (batch,) + state
        if config["return_state"]:
            return [output, (batch,) + state, (batch,) + state]
        return output

    def weights(self, config, input_shape):
        self._state_shape(config, input_shape)
        fmt = config["data_format"]
        channels = input_shape[2] if fmt == "channels_first" else input_shape[-1]
        kernel, filters = config["kernel_size"], config["filters"]
        out = [Weight("kernel", kernel + (channels, 4 * filters)),
               Weight("recurrent_kernel", kernel + (filters, 4 * filters))]
        if config["use_bias"]:
            out.append(Weight("bias", (4 * filters,)))
        return out

    def saved(self, config, input_shape, output_shape):
        """Like an LSTM under ``lax.scan``: thirteen buffers of every step's output size
        (gates before and after their activations, cell states) and a time-major copy of the
        input (measured: harness/probe_saved.py); while it runs, in inference too, the copy
        and, when it returns its last step only, every step's output stacked.

        Under eager torch the cell runs each gate's input and recurrent convolution apart:
        every step keeps four channels-first copies of its input slice, copies of the state
        and the gates' sums, three sigmoids and two tanh: fourteen state-sized tensors a
        step over two spatial axes, twelve over one (whose convolutions keep fewer
        copies), and no time-major copy (torch steps over 6 steps at batch 32, held when
        the forward returned: ConvLSTM2D(8, 5) on 24x24x4, 95.9 state-sized buffers, memlint
        -20.7% -> -8.6% at the peak; ConvLSTM1D(8, 5) on 64x4, 80.8)."""
        state = self._state_shape(config, input_shape)
        batch, steps = input_shape[0], input_shape[1]
        out = [Saved("steps' states and gates", (batch, steps) + state, count=13,
                     profiles=NOT_TORCH),
               Saved("time-major input", tuple(input_shape), profiles=NOT_TORCH),
               Saved("time-major input", tuple(input_shape), when="forward",
                     profiles=NOT_TORCH),
               Saved("steps' states and gates", (batch, steps) + state,
                     count=14 if self.rank > 1 else 12, profiles=("torch",)),
               Saved("steps' input copies", tuple(input_shape), count=4,
                     profiles=("torch",))]
        if not config.get("return_sequences"):  # every step's output stacked (as an LSTM)
            out.append(Saved("steps' states and gates", (batch, steps) + state,
                             when="forward", profiles=NOT_TORCH))
        # one step's working set while the loop runs: the step's input slice and the carried
        # states, the gates' convolutions and the new states, 7 state-sized buffers (6 when
        # it returns its last step only)
        out += [Saved("step input", (batch,) + tuple(input_shape[2:]), when="forward",
                      profiles=("xla",)),
                Saved("step working set", (batch,) + state, when="forward", profiles=("xla",),
                      count=7 if config.get("return_sequences") else 6)]
        return out


@register
class ConvLSTM1D(_ConvLSTM):
    """``ConvLSTM1D(filters, kernel_size, ...)`` on ``(batch, steps, length, channels)``."""

    name = "ConvLSTM1D"
    rank = 1


@register
class ConvLSTM2D(_ConvLSTM):
    """``ConvLSTM2D(filters, kernel_size, ...)`` on ``(batch, steps, rows, cols, channels)``."""

    name = "ConvLSTM2D"
    rank = 2


@register
class ConvLSTM3D(_ConvLSTM):
    """``ConvLSTM3D(filters, kernel_size, ...)`` on 6D inputs."""

    name = "ConvLSTM3D"
    rank = 3
