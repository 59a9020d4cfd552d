"""Normalization layers: BatchNormalization and LayerNormalization.

Both keep the input shape.  Their weights have the size of the normalised axis (or axes),
which therefore must be known.
"""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import Args, LayerError, LayerKind, Saved, instead_of_input, register


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _axis_dim(input_shape, axis: int, layer: str):
    """The size of ``input_shape`` along ``axis`` (Python indexing); it must be known."""
    rank = len(input_shape)
    if not -rank <= axis < rank:
        raise LayerError(f"{layer}: axis {axis} is out of bounds for input shape {input_shape}")
    dim = input_shape[axis]
    if dim is None:
        raise LayerError(
            f"{layer}: the normalised axis {axis} of input {input_shape} must be defined"
        )
    return dim


@register
class BatchNormalization(LayerKind):
    """``BatchNormalization(axis=-1, center=True, scale=True, renorm=False)``.

    ``gamma`` (scale) and ``beta`` (center) are trainable; ``moving_mean`` and
    ``moving_variance`` (plus three statistics with ``renorm=True``) are not.  Keras 1's
    ``mode=`` changes no weights and is ignored.
    """

    name = "BatchNormalization"
    family = "normalization"

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if not _int(axis):
            # Keras 3 does ``int(axis)``: a list of axes is a TypeError.
            raise LayerError(f"BatchNormalization axis must be an int, got {axis!r}")
        return {
            "axis": axis,
            "center": bool(args.get("center", True)),
            "scale": bool(args.get("scale", True)),
            "renorm": bool(args.get("renorm", False)),
        }

    def output_shape(self, config, input_shape):
        _axis_dim(input_shape, config["axis"], self.name)
        return input_shape

    def weights(self, config, input_shape):
        shape = (_axis_dim(input_shape, config["axis"], self.name),)
        out = []
        if config["scale"]:
            out.append(Weight("gamma", shape))
        if config["center"]:
            out.append(Weight("beta", shape))
        out.append(Weight("moving_mean", shape, trainable=False))
        out.append(Weight("moving_variance", shape, trainable=False))
        if config["renorm"]:
            for name in ("moving_stddev", "renorm_mean", "renorm_stddev"):
                out.append(Weight(name, shape, trainable=False))
        return out

    def saved(self, config, input_shape, output_shape):
        """The input and the batch mean and variance (float32, one per channel).  XLA also
        keeps the centred input (``x - mean``, float32) where its column reduction over the
        batch is one pass (at most 4,096 reduced rows: measured on H100 plans, a ResNet's
        8x8 stage at batch 32 keeps it, its 16x16 stage does not; the walk resolves
        ``"centered input"`` against the batch and the profile).  Its backward then writes
        an input-sized product beside the reduction of the output's gradient, while the
        input, the centred input and that gradient are alive (``"centered product"``; H100
        plans of Conv2D -> BatchNormalization -> ReLU over 1,024 rows: four such buffers).
        Under torch, Keras normalises in float32 (a 16-bit input is cast up: the cast is
        what the square of the variance keeps; the walk resolves ``"float32 input"`` to the
        input itself under float32) and scales ``x - mean`` in place (``mul_``): autograd
        keeps a float32 copy of it from before (``centered copy``).  A frozen
        BatchNormalization runs in inference mode, a fixed affine map: it keeps nothing."""
        shape = (_axis_dim(input_shape, config["axis"], self.name),)
        return instead_of_input([
            Saved("input", needed_for="weights"),
            Saved("statistics", shape, "float32", needed_for="weights", per_batch=False,
                  count=2),
            Saved("centered input", tuple(input_shape), "float32", needed_for="weights",
                  profiles=("xla",)),
            Saved("centered product", tuple(input_shape), "float32", needed_for="weights",
                  when="backward", profiles=("xla",))], "torch", [
            Saved("float32 input", tuple(input_shape), "float32", needed_for="weights"),
            Saved("centered copy", tuple(input_shape), "float32", needed_for="weights")])


@register
class LayerNormalization(LayerKind):
    """``LayerNormalization(axis=-1, center=True, scale=True)``; ``axis`` may be a list.

    ``gamma`` and ``beta`` span every normalised axis.  The deprecated ``rms_scaling=True``
    keeps ``gamma`` and drops ``beta``.
    """

    name = "LayerNormalization"
    family = "normalization"

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if isinstance(axis, (list, tuple)):
            if not all(_int(a) for a in axis):
                raise LayerError(f"LayerNormalization axis must be ints, got {axis!r}")
            axes = sorted(axis)
        elif _int(axis):
            axes = [axis]
        else:
            raise LayerError(f"LayerNormalization axis must be an int or a list, got {axis!r}")
        return {
            "axis": axes,
            "center": bool(args.get("center", True)),
            "scale": bool(args.get("scale", True)),
            "rms_scaling": bool(args.get("rms_scaling", False)),
        }

    def output_shape(self, config, input_shape):
        self._param_shape(config, input_shape)
        return input_shape

    def _param_shape(self, config, input_shape) -> tuple:
        return tuple(_axis_dim(input_shape, a, self.name) for a in config["axis"])

    def weights(self, config, input_shape):
        shape = self._param_shape(config, input_shape)
        out = []
        if config["scale"] or config["rms_scaling"]:
            out.append(Weight("gamma", shape))
        if config["center"] and not config["rms_scaling"]:
            out.append(Weight("beta", shape))
        return out

    def saved(self, config, input_shape, output_shape):
        """The input and one mean and variance (float32) per normalised row."""
        rank = len(input_shape)
        axes = {a % rank for a in config["axis"]}
        rows = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        return [Saved("input"), Saved("statistics", rows, "float32", count=2)]



@register
class GroupNormalization(LayerKind):
    """``GroupNormalization(groups=32, axis=-1, center=True, scale=True)``.

    ``groups`` must be a positive int or -1 (one group per channel) and divide the size of
    ``axis``, which must be known.  ``gamma`` and ``beta`` have that size.
    """

    name = "GroupNormalization"
    family = "normalization"

    def configure(self, args: Args) -> dict:
        groups = args.get("groups", 32, pos=0)
        if not _int(groups) or (groups <= 0 and groups != -1):
            raise LayerError(f"groups must be a positive int or -1, got {groups!r}")
        axis = args.get("axis", -1, pos=1)
        if not _int(axis):
            raise LayerError(f"GroupNormalization axis must be an int, got {axis!r}")
        return {
            "groups": groups,
            "axis": axis,
            "center": bool(args.get("center", True)),
            "scale": bool(args.get("scale", True)),
        }

    def _dim(self, config, input_shape) -> int:
        dim = _axis_dim(input_shape, config["axis"], self.name)
        groups = dim if config["groups"] == -1 else config["groups"]
        if dim < groups:
            raise LayerError(f"number of groups ({groups}) exceeds the channels ({dim})")
        if dim % groups:
            raise LayerError(f"number of groups ({groups}) must divide the channels ({dim})")
        return dim

    def output_shape(self, config, input_shape):
        self._dim(config, input_shape)
        return input_shape

    def weights(self, config, input_shape):
        shape = (self._dim(config, input_shape),)
        out = []
        if config["scale"]:
            out.append(Weight("gamma", shape))
        if config["center"]:
            out.append(Weight("beta", shape))
        return out

    def saved(self, config, input_shape, output_shape):
        """The input and one mean and variance (float32) per sample and group.  Keras
        computes the variance with general operations (``ops.moments``); eager torch runs
        its backward op by op: the mean's expanded gradient and the square's
        ``pow_backward`` products, input-sized float32 buffers alive at once while the
        layer's backward runs (a torch step of Conv3D -> GroupNormalization(2) -> ReLU at
        batch 32: five such buffers at the peak, two of them the walk's own gradients;
        memlint -22.7% without these three, -1.5% with them).  XLA keeps the centred
        input (``x - mean``, float32) where a ReLU reads the output (the walk resolves
        ``"centered input"``)."""
        dim = self._dim(config, input_shape)
        groups = dim if config["groups"] == -1 else config["groups"]
        out = [Saved("input"), Saved("statistics", (input_shape[0], groups), "float32",
                                     count=2)]
        if isinstance(input_shape, tuple):
            out.append(Saved("centered input", tuple(input_shape), "float32",
                             needed_for="weights", profiles=("xla",)))
            out.append(Saved("variance gradients", tuple(input_shape), "float32",
                             needed_for="inputs", when="backward",
                             count=3, profiles=("torch",)))
        return out


@register
class UnitNormalization(LayerKind):
    """``UnitNormalization(axis=-1)``: L2-normalises along ``axis`` (int or list); no
    weights, same shape.  Every axis must lie within the input's rank."""

    name = "UnitNormalization"
    family = "normalization"

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if isinstance(axis, (list, tuple)):
            axes = list(axis)
        elif _int(axis):
            axes = [axis]
        else:
            raise LayerError(f"UnitNormalization axis must be an int or a list, got {axis!r}")
        return {"axis": axes}

    def output_shape(self, config, input_shape):
        rank = len(input_shape)
        for axis in config["axis"]:
            if not _int(axis) or not -rank <= axis < rank:
                raise LayerError(f"UnitNormalization: axis {axis!r} is out of bounds for "
                                 f"input shape {input_shape}")
        return input_shape

    def saved(self, config, input_shape, output_shape):
        return [Saved("input", needed_for="inputs")]
