"""Core layers: Dense and InputLayer."""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import Args, LayerError, LayerKind, register


@register
class Dense(LayerKind):
    """``Dense(units)``: a kernel over the last axis plus an optional bias."""

    name = "Dense"
    family = "core"

    def configure(self, args: Args) -> dict:
        units = args.get("units", pos=0, aliases=("output_dim",))
        if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
            raise LayerError(f"units must be a positive int, got {units!r}")
        return {"units": units, "use_bias": bool(args.get("use_bias", True, aliases=("bias",)))}

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


@register
class InputLayer(LayerKind):
    """The placeholder a model starts from; it has no weights and passes its shape through."""

    name = "InputLayer"
    family = "core"
