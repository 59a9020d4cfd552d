"""Merge layers: element-wise Add, Subtract, Multiply, Average, Maximum, Minimum, and
Concatenate; and Dot.  They take a list of inputs and have no weights.

Element-wise merges broadcast like NumPy on the non-batch dims: shorter shapes are aligned
to the right, a 1 stretches to the other size, and a dimension unknown in either input is
unknown in the output.  Known batch sizes must agree.
"""

from __future__ import annotations

from memlint.layers.base import Args, LayerError, LayerKind, Saved, format_shape, register


def _shapes(input_shapes) -> list:
    shapes = [tuple(s) for s in input_shapes]
    if not shapes:
        raise LayerError("a merge layer needs at least one input")
    return shapes


def _broadcast(a: tuple, b: tuple) -> tuple:
    """The element-wise result shape of two shapes without their batch dims (Keras rules)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return a
    out = list(a[: len(a) - len(b)])
    for i, j in zip(a[len(a) - len(b):], b):
        if i is None or j is None:
            out.append(None)
        elif i == 1 or j == 1:
            out.append(j if i == 1 else i)
        elif i != j:
            raise LayerError(
                f"inputs have incompatible shapes {format_shape(a)} and {format_shape(b)}"
            )
        else:
            out.append(i)
    return tuple(out)


class ElementwiseMerge(LayerKind):
    """What the element-wise merges share; ``inputs`` fixes the number of inputs if set."""

    family = "merging"
    multi_input = True
    inputs = None

    def configure(self, args: Args) -> dict:
        return {}

    def output_shape(self, config, input_shape):
        shapes = _shapes(input_shape)
        if self.inputs is not None and len(shapes) != self.inputs:
            raise LayerError(
                f"{self.name} must be called on exactly {self.inputs} inputs, got {len(shapes)}"
            )
        batch_sizes = {s[0] for s in shapes if s} - {None}
        if len(batch_sizes) > 1:
            raise LayerError(
                f"cannot merge tensors with different batch sizes: {format_shape(shapes)}"
            )
        out = shapes[0][1:]
        for shape in shapes[1:]:
            out = _broadcast(out, shape[1:])
        return (batch_sizes.pop() if batch_sizes else None,) + out


@register
class Add(ElementwiseMerge):
    """``Add()``: the element-wise sum of its inputs."""

    name = "Add"


@register
class Subtract(ElementwiseMerge):
    """``Subtract()``: the first input minus the second; exactly two inputs."""

    name = "Subtract"
    inputs = 2


@register
class Multiply(ElementwiseMerge):
    """``Multiply()``: the element-wise product of its inputs."""

    name = "Multiply"

    def saved(self, config, input_shape, output_shape):
        """Each input's gradient needs the other inputs (or which one won)."""
        return [Saved("input", index=i, needed_for="inputs") for i in range(len(input_shape))]


@register
class Average(ElementwiseMerge):
    """``Average()``: the element-wise mean of its inputs."""

    name = "Average"


@register
class Maximum(ElementwiseMerge):
    """``Maximum()``: the element-wise maximum of its inputs."""

    name = "Maximum"

    def saved(self, config, input_shape, output_shape):
        """Each input's gradient needs the other inputs (or which one won)."""
        return [Saved("input", index=i, needed_for="inputs") for i in range(len(input_shape))]


@register
class Minimum(ElementwiseMerge):
    """``Minimum()``: the element-wise minimum of its inputs."""

    name = "Minimum"

    def saved(self, config, input_shape, output_shape):
        """Each input's gradient needs the other inputs (or which one won)."""
        return [Saved("input", index=i, needed_for="inputs") for i in range(len(input_shape))]


@register
class Concatenate(LayerKind):
    """``Concatenate(axis=-1)``: joins its inputs along ``axis``.

    All other dims (batch included) must match, where a dimension unknown in one input matches
    anything.  The output takes its other dims from the first input.
    """

    name = "Concatenate"
    family = "merging"
    multi_input = True

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise LayerError(f"Concatenate axis must be an int, got {axis!r}")
        return {"axis": axis}

    def output_shape(self, config, input_shape):
        shapes = _shapes(input_shape)
        axis = config["axis"]
        self._check_compatible(shapes, axis)
        out = list(shapes[0])
        _check_axis(out, axis)
        for shape in shapes[1:]:
            # Keras stops at the first unknown size along the axis, without looking further.
            if out[axis] is None:
                break
            _check_axis(shape, axis)
            if shape[axis] is None:
                out[axis] = None
                break
            out[axis] += shape[axis]
        return tuple(out)

    @staticmethod
    def _check_compatible(shapes: list, axis: int) -> None:
        """Keras's build-time check: the shapes without the axis must agree."""
        reduced = []
        for shape in shapes:
            dims = list(shape)
            if axis < 0:
                _check_axis(dims, axis)
                del dims[axis]
            elif axis < len(dims):
                del dims[axis]
            reduced.append(tuple(dims))
        if len(set(reduced)) == 1:
            return
        error = LayerError(
            "Concatenate needs inputs with matching shapes except along the concatenation "
            f"axis, got {format_shape(shapes)}"
        )
        if len({len(r) for r in reduced}) != 1:
            raise error
        for position in zip(*reduced):
            if len({d for d in position if d is not None}) > 1:
                raise error


def _check_axis(shape, axis: int) -> None:
    if not -len(shape) <= axis < len(shape):
        raise LayerError(f"axis {axis} is out of range for input {format_shape(tuple(shape))}")


@register
class Dot(LayerKind):
    """``Dot(axes, normalize=False)``: the dot product of two inputs along ``axes``.

    ``axes`` is an int (a negative one counts from each input's end) or a pair.  The sizes
    along the axes must be equal (``None`` matches only ``None``).  The output is the first
    shape without its axis, then the second without its axis and batch; a result of rank 1
    gets a trailing 1.
    """

    name = "Dot"
    family = "merging"
    multi_input = True

    def saved(self, config, input_shape, output_shape):
        return [Saved("input", index=i, needed_for="inputs") for i in range(len(input_shape))]

    def configure(self, args: Args) -> dict:
        axes = args.get("axes", pos=0)
        if isinstance(axes, (list, tuple)):
            if len(axes) != 2:
                raise LayerError(f"Dot axes must hold two elements, got {axes!r}")
            if not all(isinstance(a, int) for a in axes):
                raise LayerError(f"Dot axes must be ints, got {axes!r}")
            axes = tuple(axes)
        elif not isinstance(axes, int):
            raise LayerError(f"Dot axes must be an int or a pair of ints, got {axes!r}")
        return {"axes": axes, "normalize": bool(args.get("normalize", False, pos=1))}

    def output_shape(self, config, input_shape):
        shapes = [tuple(s) for s in input_shape]
        if len(shapes) != 2:
            raise LayerError(f"Dot must be called on a list of 2 inputs, got {len(shapes)}")
        first, second = list(shapes[0]), list(shapes[1])
        axes = config["axes"]
        if isinstance(axes, int):
            axes = (axes % len(first), axes % len(second)) if axes < 0 else (axes, axes)
        try:
            if first[axes[0]] != second[axes[1]]:
                raise LayerError(
                    f"Dot: incompatible sizes {first[axes[0]]} (axis {axes[0]}) and "
                    f"{second[axes[1]]} (axis {axes[1]}) in {format_shape(shapes)}"
                )
            first.pop(axes[0])
            second.pop(axes[1])
            second.pop(0)
        except IndexError as exc:
            raise LayerError(f"Dot axes {config['axes']} are out of range for "
                             f"{format_shape(shapes)}") from exc
        out = first + second
        if len(out) == 1:
            out.append(1)
        return tuple(out)
