"""Convolution layers: Conv1D/2D/3D, their transposes, separable and depthwise convolutions.

All of them share :class:`_Conv`, which reads the arguments, computes the output shape along
every spatial axis and checks the channel axis; the subclasses say how many output channels
there are and which variables ``build`` creates.

Keras 1 spellings (``Convolution2D(nb_filter, nb_row, nb_col, border_mode=..., subsample=...)``)
are read by the kinds registered under the old class names; see :class:`_Keras1Conv`.

This module also holds the argument helpers the pooling and reshaping families share
(:func:`int_tuple`, :func:`positive_int`, :func:`is_int`,
:func:`known`).
"""

from __future__ import annotations

from typing import ClassVar

from memlint.ir import Weight
from memlint.layers.base import (
    NOT_TORCH,
    Args,
    Saved,
    activation_arg,
    instead_of_input,
    data_format,
    LayerError,
    LayerKind,
    Unknown,
    UnresolvedArgument,
    check_rank,
    conv_output_length,
    deconv_output_length,
    format_shape,
    register,
    spatial_axes,
)



# ---------------------------------------------------------------- shared argument helpers

def is_int(value) -> bool:
    """Whether ``value`` is a plain int (bools are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def known(value, name: str):
    """``value`` unless an entry of it (at any depth) is :class:`Unknown`."""
    if isinstance(value, Unknown):
        raise UnresolvedArgument(name, value.reason)
    if isinstance(value, (tuple, list)):
        for entry in value:
            known(entry, name)
    elif isinstance(value, dict):
        for entry in value.values():
            known(entry, name)
    return value


def positive_int(value, name: str) -> int:
    """``value`` if it is an int > 0, else :class:`LayerError`."""
    if not is_int(value) or value <= 0:
        raise LayerError(f"'{name}' must be a positive int, got {value!r}")
    return value


def int_tuple(value, n: int, name: str, *, minimum: int = 1) -> tuple:
    """An int or a sequence of ``n`` ints, each >= ``minimum``, as a tuple of ``n`` ints.

    Like Keras's ``standardize_tuple``: ``minimum=1`` for sizes and strides, ``0`` for
    paddings and croppings.
    """
    known(value, name)
    if is_int(value):
        values = (value,) * n
    elif isinstance(value, (tuple, list)) and len(value) == n and all(is_int(v) for v in value):
        values = tuple(value)
    else:
        raise LayerError(f"'{name}' must be an int or a tuple of {n} ints, got {value!r}")
    if any(v < minimum for v in values):
        raise LayerError(f"every value of '{name}' must be >= {minimum}, got {value!r}")
    return values


def input_channels(input_shape, data_format: str, layer: str) -> int:
    """The channel dimension of ``input_shape``; Keras cannot build a kernel without it."""
    channels = input_shape[1] if data_format == "channels_first" else input_shape[-1]
    if channels is None:
        raise LayerError(f"the channel dimension of the input to {layer} must be defined, "
                         f"got {format_shape(input_shape)}")
    return channels


# ---------------------------------------------------------------- the shared N-d convolution

class _Conv(LayerKind):
    """What every N-d convolution shares: argument reading, spatial shapes, channel checks."""

    family = "convolutional"
    rank: ClassVar[int] = 2
    paddings: ClassVar[tuple] = ("valid", "same")
    # Keras 3 constructor arguments in positional order.
    signature: ClassVar[tuple] = (
        "filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "groups",
    )
    # Keras 3 forbids strides > 1 together with dilation_rate > 1 (not for separable and
    # depthwise convolutions, which check nothing).
    strides_or_dilation: ClassVar[bool] = True
    min_length: ClassVar[int] = 1  # the smallest output length Keras accepts
    # Whether cuDNN adds the bias and a ReLU inside the convolution (XLA's fused
    # bias-activation convolution); a depthwise convolution's are operations of their own.
    fused_bias: ClassVar[bool] = True

    # -- configure

    def configure(self, args: Args) -> dict:
        config = self.check_config(self.read(args))
        config["activation"] = activation_arg(args)  # for saved() only
        return config

    def read(self, args: Args) -> dict:
        """Raw argument values under Keras 3 names, read by keyword or Keras 3 position."""
        sig = self.signature

        def get(name, default=None, aliases=()):
            pos = sig.index(name) if name in sig else None
            return args.get(name, default, pos=pos, aliases=aliases)

        raw = {
            "filters": get("filters", aliases=("nb_filter",)),
            "kernel_size": get("kernel_size"),
            "strides": get("strides", 1, aliases=("subsample", "subsample_length")),
            "padding": get("padding", "valid", aliases=("border_mode",)),
            "data_format": data_format(args, sig.index("data_format")),
            "dilation_rate": get("dilation_rate", 1, aliases=("atrous_rate",)),
            "groups": get("groups", 1),
            "depth_multiplier": get("depth_multiplier", 1),
            "output_padding": get("output_padding"),
            "use_bias": get("use_bias", True, aliases=("bias",)),
            "lora_rank": get("lora_rank"),
        }
        for name in ("filters", "kernel_size"):
            if name in sig and raw[name] is None:
                raise UnresolvedArgument(name, "required argument is missing")
        if "groups" in sig and not args.has("groups") and not is_int(raw["groups"]):
            raw["groups"] = 1  # a Keras 2 positional `activation`, where Keras 3 has `groups`
        return raw

    def check_config(self, raw: dict) -> dict:
        """Validate raw values the way the Keras constructor does; return the config."""
        n = self.rank
        config = {
            "filters": raw["filters"],
            "kernel_size": int_tuple(raw["kernel_size"], n, "kernel_size"),
            "strides": int_tuple(raw["strides"], n, "strides"),
            "padding": self.check_padding(raw["padding"]),
            "data_format": raw["data_format"],
            "dilation_rate": int_tuple(raw["dilation_rate"], n, "dilation_rate"),
            "groups": positive_int(raw["groups"], "groups"),
            "depth_multiplier": positive_int(raw["depth_multiplier"], "depth_multiplier"),
            "output_padding": None,
            "use_bias": bool(raw["use_bias"]),
            "lora_rank": None,
            "output_size": raw.get("output_size"),
        }
        if "filters" not in self.signature:
            del config["filters"]  # depthwise: the output channels follow the input's
        else:
            positive_int(config["filters"], "filters")
            if config["filters"] % config["groups"]:
                raise LayerError(f"filters ({config['filters']}) must be divisible by "
                                 f"groups ({config['groups']})")
        if (self.strides_or_dilation and max(config["strides"]) > 1
                and max(config["dilation_rate"]) > 1):
            raise LayerError("strides > 1 cannot be combined with dilation_rate > 1, got "
                             f"strides={config['strides']}, "
                             f"dilation_rate={config['dilation_rate']}")
        return config

    def check_padding(self, value) -> str:
        if isinstance(value, str) and value.lower() == "full":
            raise UnresolvedArgument("padding", "Keras 1 border_mode='full' is not modelled")
        if not isinstance(value, str) or value.lower() not in self.paddings:
            raise LayerError(f"padding must be one of {', '.join(self.paddings)}, got {value!r}")
        return value.lower()

    # -- shapes

    def output_shape(self, config, input_shape):
        check_rank(input_shape, self.rank + 2, self.class_name)
        fmt = config["data_format"]
        channels = input_channels(input_shape, fmt, self.class_name)
        self.check_channels(config, channels)
        axes, channel_axis = spatial_axes(self.rank, fmt)
        out = list(input_shape)
        for i, axis in enumerate(axes):
            length = self.spatial_length(config, i, input_shape[axis])
            if length is not None and length < self.min_length:
                raise LayerError(
                    f"{self.class_name} output would have a dimension of size {length}: input "
                    f"{format_shape(input_shape)}, kernel_size={config['kernel_size']}, "
                    f"strides={config['strides']}, padding='{config['padding']}', "
                    f"dilation_rate={config['dilation_rate']}")
            out[axis] = length
        out[channel_axis] = self.out_channels(config, channels)
        return tuple(out)

    def spatial_length(self, config, i: int, length):
        """Output length along spatial axis ``i``."""
        return conv_output_length(length, config["kernel_size"][i], config["padding"],
                                  config["strides"][i], config["dilation_rate"][i])

    def check_channels(self, config, channels: int) -> None:
        """Raise if the input channels do not fit the layer."""

    def out_channels(self, config, channels: int) -> int:
        return config["filters"]

    def weights(self, config, input_shape):
        channels = input_channels(input_shape, config["data_format"], self.class_name)
        return self.variables(config, channels)

    def variables(self, config, channels: int) -> list:
        raise NotImplementedError

    # -- backward

    # Whether uneven padding is applied to the input before the convolution (not for
    # transposed convolutions, whose padding applies to their output).
    pads_input: ClassVar[bool] = True
    # Whether the torch backend converts a channels-first copy of a 2-D or 3-D input to the
    # channels-last memory format, a second copy (a transposed convolution convolves the
    # first: one copy)
    copies_to_channels_last: ClassVar[bool] = True

    def saved(self, config, input_shape, output_shape):
        """Its input (for the kernel's gradient) and its activation's needs.  cuDNN pads
        evenly on both sides only: where ``"same"`` padding is uneven (total padding odd)
        or ``"causal"``, XLA writes a padded copy of the input and convolves it unpadded;
        the copy is what the kernel's gradient reads (measured on H100 and T4 plans:
        ``[32, 33, 33, 16]`` for a 32x32 input, kernel 3, stride 2).  Keras's torch backend
        convolves channels-last data as a copy: the input permuted to channels-first
        (``.contiguous()``), over two or three spatial axes then converted to the
        channels-last memory format (a second copy, which autograd saves; the first is
        dropped), and the kernel likewise; padded where the padding is uneven
        (keras/src/backend/torch/nn.py ``conv``); channels-first data is convolved as it
        is, after the padding's copy where there is one (the Keras 1 MNIST CNN's strided
        ``"same"`` convolution: its [32, 32, 25, 25] padded input kept).  TensorFlow keeps
        the input itself."""
        out = list(super().saved(config, input_shape, output_shape))
        padded = self.padded_input(config, input_shape, output_shape) \
            if self.pads_input else None
        if padded is not None:
            out = instead_of_input(out, "xla", [
                Saved("padded input", padded, needed_for="weights")])
            # outside training the copy is made all the same, and dies with the call (H100
            # predict plan of a strided Conv1D on 49 frames: f32[32, 58, 40] beside the data)
            out.append(Saved("padded input", padded, when="forward", profiles=("xla",)))
        if config["data_format"] != "channels_first" and isinstance(input_shape, tuple):
            copies = [Saved("layout copy", padded or tuple(input_shape), needed_for="weights")]
            kernels = self.kernel_elements(config, input_shape) if self.rank > 1 else 0
            if kernels:
                copies.append(Saved("kernel layout copy", (kernels,), "variable",
                                    needed_for="inputs", per_batch=False))
            out = instead_of_input(out, "torch", copies)
            if self.rank > 1 and self.copies_to_channels_last:  # the first copy, until
                # the second is made (torch's CPU trace: both alive as it is written)
                out.append(Saved("contiguous copy", padded or tuple(input_shape),
                                 when="before", profiles=("torch",)))
        elif padded is not None:  # channels-first data is padded, then convolved as it is
            out = instead_of_input(out, "torch", [
                Saved("padded input", padded, needed_for="weights")])
        return out + self.unfused_product(config, output_shape)

    def unfused_product(self, config, output_shape) -> list:
        """The convolution's own result, beside the output, while a function cuDNN does not
        apply inside the convolution runs: an activation other than ReLU, or the bias or
        any activation of a depthwise convolution.  Measured on H100 plans of the predict
        step in float32 (Conv2D with tanh, GELU or relu6, Conv1D with tanh or sigmoid,
        Conv2DTranspose with tanh, DepthwiseConv1D/2D with a bias or a ReLU: the output a
        buffer of its own, -28% without it); not for Conv3D, nor in 16-bit or in the T4's
        NCHW float32 plans, where memlint was exact without it (the walk resolves it
        against the GPU and the dtype).  In training the kept pre-activation is this
        result."""
        function = config.get("activation")
        unfused = function not in (None, "relu") if self.fused_bias else \
            function is not None or bool(config.get("use_bias"))
        if self.rank > 2 or not unfused or not isinstance(output_shape, tuple):
            return []
        return [Saved("unfused product", tuple(output_shape), when="forward",
                      profiles=("xla",))]

    def kernel_elements(self, config, input_shape) -> int:
        """Elements of the kernels the torch backend copies into its layout (0: none)."""
        try:
            weights = self.weights(config, input_shape)
        except LayerError:
            return 0
        return sum(w.size for w in weights if "kernel" in w.name)

    def padded_input(self, config, input_shape, output_shape):
        """The input's shape after the explicit padding XLA adds for cuDNN (None when the
        padding is even, none or unknown)."""
        padding = config["padding"]
        if padding not in ("same", "causal") or not isinstance(input_shape, tuple) \
                or not isinstance(output_shape, tuple):
            return None
        axes, _ = spatial_axes(self.rank, config["data_format"])
        shape, uneven = list(input_shape), False
        for i, axis in enumerate(axes):
            length, out_len = input_shape[axis], output_shape[axis]
            if not isinstance(length, int) or not isinstance(out_len, int):
                return None
            reach = (config["kernel_size"][i] - 1) * config["dilation_rate"][i]
            if padding == "causal":
                total = reach
                uneven = uneven or total > 0
            else:
                total = max((out_len - 1) * config["strides"][i] + reach + 1 - length, 0)
                uneven = uneven or total % 2 == 1
            shape[axis] = length + total
        return tuple(shape) if uneven else None


class _PlainConv(_Conv):
    """``ConvND(filters, kernel_size)``: one kernel, optionally grouped, plus a bias."""

    takes_side_input = True

    def check_config(self, raw):
        config = super().check_config(raw)
        if raw["lora_rank"] is not None:
            config["lora_rank"] = positive_int(raw["lora_rank"], "lora_rank")
        return config

    def check_channels(self, config, channels):
        if channels % config["groups"]:
            raise LayerError(f"the input channels ({channels}) of {self.class_name} must be "
                             f"divisible by groups ({config['groups']})")

    def variables(self, config, channels):
        kernel = config["kernel_size"] + (channels // config["groups"], config["filters"])
        rank = config["lora_rank"]
        if rank:
            # LoRA freezes the kernel and trains two low-rank factors of it instead.
            out = [Weight("kernel", kernel, trainable=False),
                   Weight("lora_kernel_a", kernel[:-1] + (rank,)),
                   Weight("lora_kernel_b", (rank, config["filters"]))]
        else:
            out = [Weight("kernel", kernel)]
        if config["use_bias"]:
            out.append(Weight("bias", (config["filters"],)))
        return out


@register
class Conv1D(_PlainConv):
    """``Conv1D(filters, kernel_size)`` over (steps, channels); padding may be 'causal'."""

    name = "Conv1D"
    rank = 1
    paddings = ("valid", "same", "causal")


@register
class Conv2D(_PlainConv):
    """``Conv2D(filters, kernel_size)`` over (rows, cols, channels)."""

    name = "Conv2D"
    rank = 2


@register
class Conv3D(_PlainConv):
    """``Conv3D(filters, kernel_size)`` over (depth, rows, cols, channels)."""

    name = "Conv3D"
    rank = 3


# Its scratch is XLA's lowering of a strided transposed convolution (NOT_TORCH): PyTorch
# runs ``conv_transpose`` directly (measured on the CPU torch step: no such buffers).
class _ConvTranspose(_Conv):
    """``ConvNDTranspose(filters, kernel_size)``: the gradient of a convolution, upsampling."""

    signature = ("filters", "kernel_size", "strides", "padding", "output_padding", "data_format",
                 "dilation_rate")
    min_length = 0  # Keras builds zero-length outputs of transposed convolutions
    pads_input = False
    copies_to_channels_last = False

    def check_config(self, raw):
        config = super().check_config(raw)
        if raw["output_padding"] is not None:
            padding = int_tuple(raw["output_padding"], self.rank, "output_padding", minimum=0)
            if any(p >= s for p, s in zip(padding, config["strides"])):
                raise LayerError(f"output_padding {padding} must be smaller than "
                                 f"strides {config['strides']}")
            config["output_padding"] = padding
        return config

    def spatial_length(self, config, i, length):
        output_padding = config["output_padding"]
        return deconv_output_length(
            length, config["kernel_size"][i], config["padding"], config["strides"][i],
            None if output_padding is None else output_padding[i], config["dilation_rate"][i])

    def variables(self, config, channels):
        out = [Weight("kernel", config["kernel_size"] + (config["filters"], channels))]
        if config["use_bias"]:
            out.append(Weight("bias", (config["filters"],)))
        return out

    def unfused_product(self, config, output_shape) -> list:
        """As :meth:`_Conv.unfused_product`, but none for a single filter with strides, which
        XLA runs as a convolution over the zero-dilated input with the function applied
        there (H100 plan of Dense -> Reshape -> Conv2DTranspose(1, 3, strides=2,
        activation="sigmoid"): +19% with it)."""
        if config["filters"] == 1 and any(s > 1 for s in config["strides"]):
            return []
        return super().unfused_product(config, output_shape)

    def saved(self, config, input_shape, output_shape):
        """Its input, and with strides the scratch XLA on a GPU plans (measured on H100
        plans; docs/memory-model-v2.md): a single output channel runs as a convolution over
        the zero-dilated input padded to the output plus the kernel; more channels run as
        cuDNN's backward-data convolution, into an output padded by one where ``"same"``
        padding is uneven (kernel minus stride odd); the kernel's gradient is computed over
        the padded dilated input (with "valid" padding over one or two axes and several
        filters, over batch-minor copies of the input and the output's gradient; with
        "same" padding there, XLA's backward pads the output's gradient for the input
        gradient's strided convolution and writes a reversed batch-minor copy of it for
        the kernel gradient's, both at its start: keras.io's denoising autoencoder, two
        Conv2DTranspose(32, 3, strides=2, "same") at batch 128, -12% -> -1% on the H100
        and the T4)."""
        out = list(super().saved(config, input_shape, output_shape))
        if all(s == 1 for s in config["strides"]) or input_shape is None \
                or output_shape is None:
            return out
        first = config["data_format"] == "channels_first"
        spatial = slice(2, None) if first else slice(1, -1)
        ins, outs = list(input_shape), list(output_shape)
        if any(not isinstance(d, int) for d in ins[spatial] + outs[spatial]):
            return out
        channels = ins[1] if first else ins[-1]
        kernel, strides = config["kernel_size"], config["strides"]
        padded = [o + (k - 1) * d for o, k, d in zip(outs[spatial], kernel,
                                                     config["dilation_rate"])]

        def shaped(dims, depth):
            return tuple([None, depth] + dims if first else [None] + dims + [depth])
        dilated = shaped(padded, channels)
        if config["filters"] == 1:
            # the padded dilated input is the forward's operand only; the kernel's gradient
            # reads a batch-minor copy made beside it in the forward, kept instead of the
            # input: of the input dilated by the strides ("same"), of the input itself
            # ("valid") (H100 and T4 plans of Dense -> Reshape((14, 14, C)) ->
            # Conv2DTranspose(1, 3 or 5, strides=2), C = 8 to 64: f32[32, 30, 30, 8] and
            # f32[8, 27, 27, 32] both alive at the forward's end, only the second read by
            # the backward)
            minor = ins if config["padding"] == "valid" else shaped(
                [(n - 1) * st + 1 for n, st in zip(ins[spatial], strides)], channels)
            out = instead_of_input(out, "xla", [Saved("batch-minor input", tuple(minor),
                                                      needed_for="weights")])
            out.append(Saved("dilated input", dilated, when="forward", profiles=NOT_TORCH))
            return out + [Saved("dilated input", dilated, needed_for="weights",
                                when="backward", profiles=("tf-graph", "default"))]
        same = config["padding"] == "same"
        wider = shaped([o + (k - s) % 2 for o, k, s in zip(outs[spatial], kernel, strides)],
                       config["filters"])  # the output, padded by one where "same" is uneven
        if same and any((k - s) % 2 for k, s in zip(kernel, strides)):
            out.append(Saved("padded output", wider, when="forward", profiles=NOT_TORCH))
        if same and len(kernel) <= 2:
            grad, copies = wider, []
            if len(kernel) == 2 and any((k - s) % 2 and k - s >= 3
                                        for k, s in zip(kernel, strides)):
                # an uneven "same" padding of three or more (kernel 5, stride 2): XLA pads
                # the output's gradient by kernel minus stride, and the kernel's gradient
                # also reads a batch-minor copy of the input dilated by the strides (H100
                # and T4 plans of two Conv2DTranspose(C, 5 or 7, strides=2, "same") layers:
                # f32[64, 27, 27, 32] and two f32[32, 31, 31, 32] beside the output's
                # gradient; the walk orders them, Walk.transposed_backward;
                # Conv1DTranspose's plans hold neither)
                grad = shaped([o + (k - s) * ((k - s) % 2) for o, k, s in zip(
                    outs[spatial], kernel, strides)], config["filters"])
                copies = [Saved("dilated input, batch-minor", shaped(
                    [(n - 1) * st + 1 for n, st in zip(ins[spatial], strides)], channels),
                    needed_for="weights", when="backward", profiles=("xla",))]
            return out + [Saved("padded output gradient", grad, needed_for="weights",
                                when="backward", profiles=("xla",)),
                          Saved("output gradient, batch-minor", grad, needed_for="weights",
                                when="backward", profiles=("xla",))] + copies + [
                          Saved("dilated input", dilated, needed_for="weights",
                                when="backward", profiles=("tf-graph", "default"))]
        if same or len(kernel) > 2:
            return out + [Saved("dilated input", dilated, needed_for="weights",
                                when="backward", profiles=NOT_TORCH)]
        # "valid", over one or two axes, several filters: the kernel's gradient is a
        # convolution over batch-minor copies of the input and of the output's gradient,
        # the stride a dilation of the window (H100 plans of 14x14 and 32x32 inputs, 1 to 48
        # channels, 4 to 64 filters: within +25%, never under; the padded dilated input
        # was up to 140% over and 49% under there)
        return out + [Saved("input, batch-minor", tuple(input_shape), needed_for="weights",
                            when="backward", profiles=NOT_TORCH),
                      Saved("output gradient, batch-minor", tuple(output_shape),
                            needed_for="weights", when="backward", profiles=NOT_TORCH)]


@register
class Conv1DTranspose(_ConvTranspose):
    """``Conv1DTranspose(filters, kernel_size)``."""

    name = "Conv1DTranspose"
    aliases = ("Convolution1DTranspose",)
    rank = 1


@register
class Conv2DTranspose(_ConvTranspose):
    """``Conv2DTranspose(filters, kernel_size)`` (Keras 2 also called it ``Deconv2D``)."""

    name = "Conv2DTranspose"
    aliases = ("Convolution2DTranspose", "Deconv2D")
    rank = 2


@register
class Conv3DTranspose(_ConvTranspose):
    """``Conv3DTranspose(filters, kernel_size)`` (Keras 2 also called it ``Deconv3D``)."""

    name = "Conv3DTranspose"
    aliases = ("Convolution3DTranspose", "Deconv3D", "Deconvolution3D")
    rank = 3


class _SeparableConv(_Conv):
    """``SeparableConvND(filters, kernel_size)``: a depthwise kernel, then a 1x1 pointwise one."""

    signature = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
                 "depth_multiplier")
    strides_or_dilation = False
    takes_side_input = True  # its pointwise convolution

    def variables(self, config, channels):
        multiplier = config["depth_multiplier"]
        out = [
            Weight("depthwise_kernel", config["kernel_size"] + (channels, multiplier)),
            Weight("pointwise_kernel",
                   (1,) * self.rank + (channels * multiplier, config["filters"])),
        ]
        if config["use_bias"]:
            out.append(Weight("bias", (config["filters"],)))
        return out

    def saved(self, config, input_shape, output_shape):
        """Its input, and the depthwise result the pointwise kernel's gradient reads; outside
        training that result still exists while the pointwise convolution reads it (XLA on
        Hopper in float32, as :meth:`_Conv.unfused_product`: the H100 plan of the predict
        step holds the two results side by side; the T4's NCHW plan was exact without)."""
        fmt = config["data_format"]
        channels = input_channels(input_shape, fmt, self.class_name)
        middle = list(output_shape)
        middle[1 if fmt == "channels_first" else -1] = channels * config["depth_multiplier"]
        return super().saved(config, input_shape, output_shape) + [
            Saved("depthwise output", tuple(middle)),
            Saved("unfused product", tuple(middle), when="forward", profiles=("xla",))]

    def unfused_product(self, config, output_shape) -> list:
        """None of its own: the pointwise convolution takes the bias and a ReLU, and another
        function writes into the depthwise result's buffer (H100 predict plans of
        SeparableConv2D with a bias and with tanh: two image-sized buffers either way)."""
        return []


@register
class SeparableConv1D(_SeparableConv):
    """``SeparableConv1D(filters, kernel_size, depth_multiplier=1)``."""

    name = "SeparableConv1D"
    aliases = ("SeparableConvolution1D",)
    rank = 1


@register
class SeparableConv2D(_SeparableConv):
    """``SeparableConv2D(filters, kernel_size, depth_multiplier=1)``."""

    name = "SeparableConv2D"
    rank = 2


class _DepthwiseConv(_Conv):
    """``DepthwiseConvND(kernel_size, depth_multiplier=1)``: one kernel per input channel."""

    fused_bias = False

    signature = ("kernel_size", "strides", "padding", "depth_multiplier", "data_format",
                 "dilation_rate")
    strides_or_dilation = False

    def out_channels(self, config, channels):
        return channels * config["depth_multiplier"]

    def variables(self, config, channels):
        multiplier = config["depth_multiplier"]
        out = [Weight("kernel", config["kernel_size"] + (channels, multiplier))]
        if config["use_bias"]:
            out.append(Weight("bias", (channels * multiplier,)))
        return out


@register
class DepthwiseConv1D(_DepthwiseConv):
    """``DepthwiseConv1D(kernel_size, depth_multiplier=1)``."""

    name = "DepthwiseConv1D"
    rank = 1


@register
class DepthwiseConv2D(_DepthwiseConv):
    """``DepthwiseConv2D(kernel_size, depth_multiplier=1)``."""

    name = "DepthwiseConv2D"
    rank = 2


# ---------------------------------------------------------------- Keras 1 spellings

KERNEL_DIMS = {1: ("filter_length",), 2: ("nb_row", "nb_col"),
               3: ("kernel_dim1", "kernel_dim2", "kernel_dim3")}
KERAS1_KEYWORDS = frozenset({
    "nb_filter", "nb_row", "nb_col", "border_mode", "subsample", "filter_length",
    "subsample_length", "kernel_dim1", "kernel_dim2", "kernel_dim3",
})


class _Keras1Conv:
    """Mixin for the old class names, whose arguments mean different things by version.

    ``Convolution2D(64, 3, 3)`` is Keras 1 (nb_filter, nb_row, nb_col); ``Convolution2D(64,
    (3, 3))`` is the Keras 2/3 alias of ``Conv2D``.  The Keras 1 reading applies when more than
    two positional arguments are given or a Keras 1 keyword is present.  ``keras1_layout``
    gives the Keras 1 positions of the arguments that change shapes; ``keras_class`` names
    the Keras 3 class the layer is.
    """

    aliases: ClassVar[tuple] = ()  # not those of the modern kind it extends
    keras1_layout: ClassVar[dict] = {}
    keras1_keywords: ClassVar[frozenset] = KERAS1_KEYWORDS

    def read(self, args):
        if len(args.positional) > 2 or self.keras1_keywords & set(args.keywords):
            return self.read_keras1(args)
        return super().read(args)

    def read_keras1(self, args: Args) -> dict:
        at = self.keras1_layout.get
        second = args.positional[1] if len(args.positional) > 1 else None
        if args.has("kernel_size") or isinstance(second, (tuple, list)):
            # Keras 2's legacy interface: a Keras 2 kernel with Keras 1 keywords
            kernel = args.get("kernel_size", pos=1)
        else:
            kernel = tuple(args.get(name, pos=pos)
                           for name, pos in zip(KERNEL_DIMS[self.rank], at("kernel_size")))
        strides = "subsample_length" if self.rank == 1 else "subsample"
        if self.rank == 1:
            fmt = "channels_last"  # Keras 1 1D layers are always (steps, channels)
        else:
            fmt = data_format(args, at("data_format"))
        return {
            "filters": args.get("nb_filter", pos=0, aliases=("filters",)),
            "kernel_size": kernel,
            "strides": args.get(strides, 1, pos=at("strides"), aliases=("strides",)),
            "padding": args.get("border_mode", "valid", pos=at("padding"), aliases=("padding",)),
            "data_format": fmt,
            "dilation_rate": args.get("atrous_rate", 1, pos=at("dilation_rate"),
                                      aliases=("dilation_rate",)),
            "groups": 1,
            "depth_multiplier": args.get("depth_multiplier", 1, pos=at("depth_multiplier")),
            "output_padding": None,
            "output_size": self.keras1_output_size(args, at("output_shape"), fmt),
            "use_bias": args.get("bias", True, aliases=("use_bias",)),
            "lora_rank": None,
        }

    def keras1_output_size(self, args, pos, data_format):
        return None


@register
class Convolution1D(_Keras1Conv, Conv1D):
    """``Convolution1D``: Keras 1 ``(nb_filter, filter_length, border_mode=, subsample_length=)``
    or the Keras 2/3 alias of ``Conv1D``."""

    name = "Convolution1D"
    keras_class = "Conv1D"
    keras1_layout = {"kernel_size": (1,), "padding": 5, "strides": 6}


@register
class AtrousConvolution1D(_Keras1Conv, Conv1D):
    """Keras 1 ``AtrousConvolution1D(nb_filter, filter_length, atrous_rate=)``: a dilated Conv1D."""

    name = "AtrousConvolution1D"
    keras_class = "Conv1D"
    keras1_layout = {"kernel_size": (1,), "padding": 5, "strides": 6, "dilation_rate": 7}


@register
class Convolution2D(_Keras1Conv, Conv2D):
    """``Convolution2D``: Keras 1 ``(nb_filter, nb_row, nb_col, border_mode=, subsample=,
    dim_ordering=)`` or the Keras 2/3 alias of ``Conv2D``."""

    name = "Convolution2D"
    keras_class = "Conv2D"
    keras1_layout = {"kernel_size": (1, 2), "padding": 6, "strides": 7, "data_format": 8}


@register
class AtrousConvolution2D(_Keras1Conv, Conv2D):
    """Keras 1 ``AtrousConvolution2D(nb_filter, nb_row, nb_col, atrous_rate=)``: a dilated
    Conv2D."""

    name = "AtrousConvolution2D"
    keras_class = "Conv2D"
    keras1_layout = {"kernel_size": (1, 2), "padding": 6, "strides": 7, "dilation_rate": 8,
                     "data_format": 9}


@register
class Convolution3D(_Keras1Conv, Conv3D):
    """``Convolution3D``: Keras 1 ``(nb_filter, kernel_dim1, kernel_dim2, kernel_dim3, ...)`` or
    the Keras 2/3 alias of ``Conv3D``."""

    name = "Convolution3D"
    keras_class = "Conv3D"
    keras1_layout = {"kernel_size": (1, 2, 3), "padding": 7, "strides": 8, "data_format": 9}


@register
class SeparableConvolution2D(_Keras1Conv, SeparableConv2D):
    """``SeparableConvolution2D``: Keras 1 ``(nb_filter, nb_row, nb_col, depth_multiplier=)`` or
    the Keras 2/3 alias of ``SeparableConv2D``."""

    name = "SeparableConvolution2D"
    keras_class = "SeparableConv2D"
    keras1_layout = {"kernel_size": (1, 2), "padding": 6, "strides": 7, "depth_multiplier": 8,
                     "data_format": 9}


@register
class Deconvolution2D(_Keras1Conv, Conv2DTranspose):
    """``Deconvolution2D``: Keras 1 ``(nb_filter, nb_row, nb_col, output_shape, ...)`` or the
    Keras 2 alias of ``Conv2DTranspose``.

    Keras 1 takes the output size from ``output_shape`` (batch included); it must be a size
    whose convolution gives back the input size.
    """

    name = "Deconvolution2D"
    keras_class = "Conv2DTranspose"
    keras1_layout = {"kernel_size": (1, 2), "output_shape": 3, "padding": 7, "strides": 8,
                     "data_format": 9}
    keras1_keywords = KERAS1_KEYWORDS | {"output_shape"}

    def keras1_output_size(self, args, pos, data_format):
        shape = known(args.get("output_shape", None, pos=pos), "output_shape")
        if shape is None:
            return None
        if not isinstance(shape, (tuple, list)) or len(shape) not in (3, 4):
            raise LayerError(f"output_shape must be a tuple of 4 entries (batch included), "
                             f"got {shape!r}")
        shape = tuple(shape)[-3:]  # without the batch dimension
        size = shape[1:] if data_format == "channels_first" else shape[:-1]
        if not all(d is None or (is_int(d) and d > 0) for d in size):
            raise LayerError(f"output_shape must hold positive ints, got {shape!r}")
        return size

    def spatial_length(self, config, i, length):
        size = config["output_size"]
        if size is None or size[i] is None:
            return super().spatial_length(config, i, length)
        back = conv_output_length(size[i], config["kernel_size"][i], config["padding"],
                                  config["strides"][i], config["dilation_rate"][i])
        if length is not None and back != length:
            raise LayerError(f"output_shape size {size[i]} does not match an input size of "
                             f"{length} (a convolution of it gives {back})")
        return size[i]
