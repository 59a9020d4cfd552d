"""Tensor functions on symbolic tensors: ``keras.ops.*``, ``keras.activations.*`` and, inside a
traced ``call()``, their TensorFlow spellings (``tf.nn.relu``, ``tf.reduce_mean``, ...).

Keras 3 turns each into an operation (not a layer): it takes part in the functional graph and
takes a name from the counter it shares with layers (``ops.concatenate`` makes
``concatenate``, so a later ``Concatenate`` layer is ``concatenate_1``), but is not listed in
``model.layers``.  One shape rule per operation, registered in :data:`OPERATIONS`; a rule
gets the call's arguments (tensors as their shapes) and returns the output shape, a list of
shapes for several outputs, or raises ``LayerError`` where Keras refuses the input.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

from memlint.frontends.keras.values import Array, Ref, Tensor, Unknown, flatten_structure
from memlint.frontends.keras.values import call_arg as _arg
from memlint.layers.base import LayerError, UnresolvedArgument, format_shape

Rule = Callable[[list, dict], Any]

# canonical function name -> (operation name stem, rule)
OPERATIONS: dict = {}

_PREFIXES = ("keras.ops.", "keras.ops.nn.", "keras.ops.numpy.", "keras.ops.math.")


def _register(names: str, stem: Optional[str], rule: Rule, prefixes=_PREFIXES) -> None:
    for name in names.split():
        for prefix in prefixes:
            OPERATIONS[prefix + name] = (stem or name, rule)


def _shape_of(value: Any) -> tuple:
    """The shape of an operand: a tensor's (batch first), () for a Python number."""
    if isinstance(value, tuple) and getattr(value, "is_shape", False):
        return value
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return ()
    raise UnresolvedArgument("x", "an operand is not a tensor or number known statically")


def _axis(axis: Any, rank: int) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise LayerError(f"axis {axis!r} is out of bounds for a tensor of rank {rank}")
    return axis % rank


def broadcast(*shapes: tuple) -> tuple:
    """NumPy broadcasting as Keras 3 does it for symbolic shapes (``None`` is unknown)."""
    rank = max(len(s) for s in shapes)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise LayerError(f"shapes {', '.join(format_shape(s) for s in shapes)} cannot "
                             "be broadcast together")
        if known:
            out.append(known.pop())
        else:
            out.append(None if None in dims else 1)
    return tuple(out)


# ---------------------------------------------------------------------- rules

def _same(args, kwargs):
    return _shape_of(_arg(args, kwargs, 0, "x"))


def _binary(args, kwargs):
    return broadcast(_shape_of(_arg(args, kwargs, 0, "x1")), _shape_of(_arg(args, kwargs, 1, "x2")))


def _where(args, kwargs):
    return broadcast(*(_shape_of(_arg(args, kwargs, i, key))
                       for i, key in enumerate(("condition", "x1", "x2"))))


def _reduce(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    axis = _arg(args, kwargs, 1, "axis")
    keepdims = _arg(args, kwargs, 2, "keepdims", False)
    if axis is None:
        axes = set(range(len(shape)))
    else:
        axes = {_axis(a, len(shape)) for a in (axis if isinstance(axis, (list, tuple)) else [axis])}
    if keepdims is True:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _tf_arg_extreme(args, kwargs):
    """``tf.argmin(input, axis=None)``: TensorFlow's default axis is 0, not the flattened
    tensor (Keras's)."""
    axis = _arg(args, kwargs, 1, "axis")
    return _reduce([_arg(args, kwargs, 0, "input"), 0 if axis is None else axis], {})


def _cumulative(args, kwargs):
    """``cumsum(x, axis=None)``: along one axis the shape stays, with no axis the running
    total of the flattened tensor (of a batch of several values a sample: not sized, its
    one axis would hold the batch and the rest)."""
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    if _arg(args, kwargs, 1, "axis") is not None:
        _axis(_arg(args, kwargs, 1, "axis"), len(shape))
        return shape
    if None in shape and len(shape) > 1:
        raise UnresolvedArgument("axis", "a running total over a flattened batch is not sized")
    return (None if None in shape else math.prod(shape),)


def _linspace(args, kwargs):
    """``linspace(start, stop, num=50)`` of scalar ends: ``num`` values."""
    ends = [_shape_of(_arg(args, kwargs, i, key)) for i, key in enumerate(("start", "stop"))]
    num = _arg(args, kwargs, 2, "num", 50)
    if any(ends) or _arg(args, kwargs, 6, "axis", 0) != 0:
        raise UnresolvedArgument("start", "linspace() of ends that are not scalars")
    if not isinstance(num, int) or isinstance(num, bool) or num < 0:
        raise UnresolvedArgument("num", "the number of values is not known statically")
    return (num,)


def _dims(value: Any, name: str) -> tuple:
    """A shape given as an argument: ints, and None for the batch (``ops.shape(x)``)."""
    if isinstance(value, (tuple, list)) and all(
            d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
            for d in value):
        return tuple(value)
    raise UnresolvedArgument(name, f"{name} is not known statically")


def _broadcast_to(args, kwargs):
    """``broadcast_to(x, shape)``: ``shape``, where ``x`` broadcasts to it."""
    shape = _dims(_arg(args, kwargs, 1, "shape"), "shape")
    x = _shape_of(_arg(args, kwargs, 0, "x"))
    if len(x) > len(shape) or broadcast(x, shape) != shape:
        raise LayerError(f"a tensor of shape {format_shape(x)} cannot be broadcast to "
                         f"{format_shape(shape)}")
    return shape


def _slice(args, kwargs):
    """``slice(inputs, start_indices, shape)``: a block of ``shape``."""
    x = _shape_of(_arg(args, kwargs, 0, "inputs"))
    shape = _dims(_arg(args, kwargs, 2, "shape"), "shape")
    if len(shape) != len(x):
        raise LayerError(f"slice of shape {format_shape(shape)} from a tensor of rank {len(x)}")
    return shape


def _fourier(args, kwargs):
    """``fft((real, imag))`` and its kin: the real and imaginary parts, each of the
    operands' shape."""
    parts = _arg(args, kwargs, 0, "x")
    if not isinstance(parts, (tuple, list)) or len(parts) != 2:
        raise UnresolvedArgument("x", "not a (real, imaginary) pair known statically")
    real, imag = (_shape_of(_as_operand(p)) for p in parts)
    if real != imag:
        raise LayerError(f"the real and imaginary parts differ: {format_shape(real)}, "
                         f"{format_shape(imag)}")
    return [real, imag]


def _unstack(args, kwargs):
    """``unstack(x, num=None, axis=0)``: the slices along ``axis``, one tensor each (their
    number is the axis's length, or ``num``)."""
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    axis = _axis(_arg(args, kwargs, 2, "axis", 0), len(shape))
    count = shape[axis] if shape[axis] is not None else _arg(args, kwargs, 1, "num")
    if not isinstance(count, int) or isinstance(count, bool):
        raise UnresolvedArgument("num", "the number of slices is not known statically")
    if axis == 0 and shape[0] is None:
        raise UnresolvedArgument("axis", "a tensor unstacked along the batch axis is not "
                                         "sized")
    return [shape[:axis] + shape[axis + 1:]] * count


def _top_k(args, kwargs):
    """``top_k(x, k=1, sorted=True)``: the ``k`` largest values along the last axis and
    their indices."""
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    k = _arg(args, kwargs, 1, "k", 1)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise UnresolvedArgument("k", "k is not known statically")
    if not shape or (shape[-1] is not None and shape[-1] < k):
        raise LayerError(f"top_k with k={k} of a tensor of shape {format_shape(shape)}")
    out = shape[:-1] + (k,)
    return [out, out]


def _matmul(args, kwargs):
    return _product(_shape_of(_arg(args, kwargs, 0, "x1")), _shape_of(_arg(args, kwargs, 1, "x2")))


def _tf_matmul(args, kwargs):
    """``tf.matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False,
    adjoint_b=False)``: a transposed operand's last two axes swapped (the attention scores
    ``tf.matmul(q, k, transpose_b=True)``)."""
    def operand(index, name):
        shape = _shape_of(_arg(args, kwargs, index, name))
        flags = [_arg(args, kwargs, 2 + index, f"transpose_{name}", False),
                 _arg(args, kwargs, 4 + index, f"adjoint_{name}", False)]
        if any(not isinstance(flag, bool) for flag in flags):
            raise UnresolvedArgument(f"transpose_{name}",
                                     f"transpose_{name} is not known statically")
        if any(flags):
            if len(shape) < 2:
                raise LayerError(f"transpose_{name} of a tensor of rank {len(shape)}")
            shape = _ShapeOperand(shape[:-2] + (shape[-1], shape[-2]))
        return shape
    return _product(operand(0, "a"), operand(1, "b"))


def _product(a: tuple, b: tuple) -> tuple:
    """The shape of the matrix product of operands of shapes ``a`` and ``b`` (NumPy's
    rules: a vector is a row on the left, a column on the right, leading axes broadcast)."""
    if not a or not b:
        raise LayerError("matmul of a scalar")
    a1, b1 = len(a) == 1, len(b) == 1
    a, b = ((1,) + a if a1 else a), (b + (1,) if b1 else b)
    if a[-1] is not None and b[-2] is not None and a[-1] != b[-2]:
        raise LayerError(f"matmul of {format_shape(a)} and {format_shape(b)}: inner "
                         "dimensions differ")
    out = broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])
    if a1:
        out = out[:-2] + out[-1:]
    if b1:
        out = out[:-1]
    return out


def _reshape(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    target = _arg(args, kwargs, 1, "newshape")
    if isinstance(target, int):
        target = (target,)
    if not isinstance(target, (list, tuple)) or not all(
            d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in target):
        raise UnresolvedArgument("newshape", "the new shape is not known statically")
    dims = [-1 if d is None else d for d in target]
    if dims.count(-1) > 1:
        if dims[0] == -1 and dims[1:].count(-1) == 1 and shape and shape[0] is None:
            dims[0] = None  # (batch, ..., -1): the batch stays the batch
        elif list(target).count(-1) > 1:
            raise UnresolvedArgument("newshape", "more than one dimension is inferred")
        else:
            # sizes known only at run time (ops.shape() of a tensor's open axes): open in
            # the output too, as Keras leaves them; the batch stays the batch
            return tuple(None if d == -1 else d for d in dims)
    total = math.prod(d for d in shape if d is not None) if None not in shape[1:] else None
    known = math.prod(d for d in dims if d not in (-1, None))
    if -1 in dims:
        i = dims.index(-1)
        if None not in shape and None not in dims:  # a tensor of known size: a constant's
            if known == 0 or math.prod(shape) % known:
                raise LayerError(f"cannot reshape a tensor of shape {format_shape(shape)} "
                                 f"into {format_shape(tuple(target))}")
            dims[i] = math.prod(shape) // known
        elif None in dims or (shape and shape[0] is None and i != 0):
            if total is None or known == 0 or total % known:
                raise UnresolvedArgument("newshape", "the inferred dimension is not known")
            dims[i] = total // known
        else:
            if shape and shape[0] is None and (total is None or known % total):
                # more rows than samples, not a whole number of batches per sample
                # (frontends/keras/batches.py takes those): memlint would size one batch
                raise UnresolvedArgument("newshape", "the reshape folds axes into the batch "
                                                     "axis, which memlint does not size")
            dims[i] = None  # the batch dimension
    return tuple(dims)


def _transpose(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    axes = _arg(args, kwargs, 1, "axes")
    if axes is None:
        return tuple(reversed(shape))
    if sorted(_axis(a, len(shape)) for a in axes) != list(range(len(shape))):
        raise LayerError(f"axes {axes!r} are not a permutation of the tensor's axes")
    return tuple(shape[_axis(a, len(shape))] for a in axes)


def _expand_dims(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    axis = _arg(args, kwargs, 1, "axis")
    out = list(shape)
    for a in sorted(_axis(a, len(shape) + 1) for a in (axis if isinstance(axis, (list, tuple))
                                                       else [axis])):
        out.insert(a, 1)
    return tuple(out)


def _squeeze(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    axis = _arg(args, kwargs, 1, "axis")
    if axis is None:
        return tuple(d for d in shape if d != 1)
    axes = {_axis(a, len(shape)) for a in (axis if isinstance(axis, (list, tuple)) else [axis])}
    if any(shape[a] not in (1, None) for a in axes):
        raise LayerError(f"cannot squeeze an axis of size other than 1 in {format_shape(shape)}")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _operands(args, kwargs, key="xs") -> list:
    values = _arg(args, kwargs, 0, key)
    if not isinstance(values, (list, tuple)) or not values:
        raise UnresolvedArgument(key, "the list of tensors is not known statically")
    return [_shape_of(v) for v in values]


def _refuse_batch_concatenation(shapes: list, axis: int) -> None:
    """Raise :class:`UnresolvedArgument` for a concatenation of batched tensors along the
    batch axis that :mod:`.batches` does not take (rows of a known count joined to a batch):
    the result's rows are not a number of batches, and memlint sizes every tensor by them."""
    if len(shapes) > 1 and axis % len(shapes[0]) == 0 and any(s[0] is None for s in shapes):
        raise UnresolvedArgument("axis", "a concatenation along the batch axis of rows of a "
                                         "known count and a batch, which memlint does not size")


def _concatenate(args, kwargs):
    shapes = _operands(args, kwargs)
    axis = _axis(_arg(args, kwargs, 1, "axis", 0), len(shapes[0]))
    if any(len(s) != len(shapes[0]) for s in shapes):
        raise LayerError("tensors of different ranks cannot be concatenated")
    size = 0
    for s in shapes:
        size = None if size is None or s[axis] is None else size + s[axis]
    rest = broadcast(*[s[:axis] + (1,) + s[axis + 1:] for s in shapes])
    _refuse_batch_concatenation(shapes, axis)
    return rest[:axis] + (size,) + rest[axis + 1:]


def _stack(args, kwargs):
    shapes = _operands(args, kwargs, "x")
    base = broadcast(*shapes)
    axis = _axis(_arg(args, kwargs, 1, "axis", 0), len(base) + 1)
    return base[:axis] + (len(shapes),) + base[axis:]


def _split(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    sections = _arg(args, kwargs, 1, "indices_or_sections")
    axis = _axis(_arg(args, kwargs, 2, "axis", 0), len(shape))
    size = shape[axis]
    if isinstance(sections, int) and not isinstance(sections, bool):
        if size is not None and (sections <= 0 or size % sections):
            raise LayerError(f"axis of size {size} cannot be split into {sections} equal parts")
        part = None if size is None else size // sections
        return [shape[:axis] + (part,) + shape[axis + 1:]] * sections
    if isinstance(sections, (list, tuple)) and size is not None:
        bounds = [0, *sections, size]
        return [shape[:axis] + (max(min(b, size) - min(a, size), 0),) + shape[axis + 1:]
                for a, b in zip(bounds, bounds[1:])]
    raise UnresolvedArgument("indices_or_sections", "the split is not known statically")


def _einsum(args, kwargs):
    equation = args[0] if args else None
    if not isinstance(equation, str) or "->" not in equation or "." in equation:
        raise UnresolvedArgument("subscripts", "only explicit equations ('ij,jk->ik') are "
                                               "evaluated")
    inputs, output = equation.replace(" ", "").split("->")
    terms = inputs.split(",")
    shapes = [_shape_of(v) for v in args[1:]]
    if len(terms) != len(shapes):
        raise LayerError(f"the equation names {len(terms)} operands, {len(shapes)} given")
    sizes: dict = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape):
            raise LayerError(f"'{term}' does not match an operand of rank {len(shape)}")
        for letter, dim in zip(term, shape):
            if dim is not None and sizes.get(letter) not in (None, dim, 1) and dim != 1:
                raise LayerError(f"dimension '{letter}' has sizes {sizes[letter]} and {dim}")
            if dim is not None and sizes.get(letter) in (None, 1):
                sizes[letter] = dim
            sizes.setdefault(letter, None)
    return tuple(sizes.get(letter) for letter in output)


def _one_hot(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    classes = _arg(args, kwargs, 1, "num_classes")
    axis = _arg(args, kwargs, 2, "axis", -1)
    if not isinstance(classes, int):
        raise UnresolvedArgument("num_classes", "not known statically")
    out = list(shape)
    out.insert(_axis(axis, len(shape) + 1), classes)
    return tuple(out)


def _take(args, kwargs):
    """``take(x, indices, axis=None)``: the indices' shape in place of the axis taken from
    (of the flattened tensor without one)."""
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    indices = _shape_of(_arg(args, kwargs, 1, "indices"))
    axis = _arg(args, kwargs, 2, "axis")
    if axis is None:
        if None in shape and len(shape) > 1:
            raise UnresolvedArgument("axis", "taking from a flattened batch is not sized")
        return tuple(indices)
    axis = _axis(axis, len(shape))
    return tuple(shape[:axis]) + tuple(indices) + tuple(shape[axis + 1:])


def _tf_gather(args, kwargs):
    """``tf.gather(params, indices, axis=None, batch_dims=0)``: ``take`` along axis 0 unless
    told; with ``batch_dims`` the indices' first axes are the params' own."""
    batch_dims = _arg(args, kwargs, 4, "batch_dims", 0)
    axis = _arg(args, kwargs, 3, "axis")
    if batch_dims == 0:
        return _take([_arg(args, kwargs, 0, "params"), _arg(args, kwargs, 1, "indices"),
                      0 if axis is None else axis], {})
    # per sample (``batch_dims=1``: a masked autoencoder's kept patches): the indices'
    # leading axes are the params' own
    params = _shape_of(_arg(args, kwargs, 0, "params"))
    indices = _shape_of(_arg(args, kwargs, 1, "indices"))
    axis = batch_dims if axis is None else axis
    if not isinstance(batch_dims, int) or isinstance(batch_dims, bool) or batch_dims < 0 \
            or batch_dims > len(indices) or not isinstance(axis, int):
        raise UnresolvedArgument("batch_dims", "tf.gather's batch_dims is not known statically")
    axis = _axis(axis, len(params))
    if axis < batch_dims:
        raise LayerError("tf.gather needs batch_dims <= axis")
    broadcast(params[:batch_dims], indices[:batch_dims])
    return tuple(params[:axis]) + tuple(indices[batch_dims:]) + tuple(params[axis + 1:])


def _tf_one_hot(args, kwargs):
    """``tf.one_hot(indices, depth, on_value=None, off_value=None, axis=None)``."""
    axis = _arg(args, kwargs, 4, "axis")
    return _one_hot([_arg(args, kwargs, 0, "indices"), _arg(args, kwargs, 1, "depth"),
                     -1 if axis is None else axis], {})


def _tile(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    reps = _arg(args, kwargs, 1, "repeats")
    reps = (reps,) if isinstance(reps, int) else reps
    if isinstance(reps, (list, tuple)) and len(reps) == len(shape) and reps and \
            reps[0] is None and shape[0] == 1 and all(isinstance(r, int) for r in reps[1:]):
        # ``tf.tile(pos, [tf.shape(x)[0], 1, 1])``: one row repeated for every sample
        return (None,) + _tile([_ShapeOperand(shape[1:]), reps[1:]], {})
    if not isinstance(reps, (list, tuple)) or not all(isinstance(r, int) for r in reps):
        raise UnresolvedArgument("repeats", "not known statically")
    rank = max(len(shape), len(reps))
    shape = (1,) * (rank - len(shape)) + tuple(shape)
    reps = (1,) * (rank - len(reps)) + tuple(reps)
    _refuse_batch_growth(any(d is None and r > 1 for d, r in zip(shape, reps)), "tile")
    return tuple(None if d is None else d * r for d, r in zip(shape, reps))


def _refuse_batch_growth(grows: bool, what: str) -> None:
    """A tile or repeat of the batch axis (or of another axis of unknown size) makes a
    tensor of several batches, which memlint would size at one."""
    if grows:
        raise UnresolvedArgument("repeats", f"{what}() repeats the batch axis (or another "
                                            "of unknown size), which memlint does not size")


def _repeat(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    times = _arg(args, kwargs, 1, "repeats")
    axis = _arg(args, kwargs, 2, "axis")
    if times is None and isinstance(axis, int) and shape and _axis(axis, len(shape)) == 0 \
            and shape[0] == 1:  # ``repeat(row, tf.shape(x)[0], axis=0)``: one per sample
        return (None,) + tuple(shape[1:])
    if not isinstance(times, int) or axis is None:
        raise UnresolvedArgument("repeats", "only an int repeat along one axis is evaluated")
    a = _axis(axis, len(shape))
    _refuse_batch_growth(shape[a] is None and times > 1, "repeat")
    return shape[:a] + (None if shape[a] is None else shape[a] * times,) + shape[a + 1:]


def _pad(args, kwargs):
    shape = _shape_of(_arg(args, kwargs, 0, "x"))
    widths = _arg(args, kwargs, 1, "pad_width")
    if isinstance(widths, (list, tuple)) and len(widths) == len(shape) and all(
            isinstance(w, (list, tuple)) and len(w) == 2 and all(isinstance(v, int) for v in w)
            for w in widths):
        return tuple(None if d is None else d + w[0] + w[1] for d, w in zip(shape, widths))
    raise UnresolvedArgument("pad_width", "only ((before, after), ...) per axis is evaluated")


def _pair(value: Any, name: str) -> tuple:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    ints = isinstance(value, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)
    if ints and len(value) == 2:
        return tuple(value)
    if ints:  # TensorFlow's [1, rows, cols, 1]: Keras 3's convolution refuses it
        raise LayerError(f"{name} {list(value)} has {len(value)} values; Keras takes an int "
                         "or (height, width)")
    raise UnresolvedArgument(name, f"{name} is not an int or a pair of ints known statically")


def _resized(args, kwargs, tf: bool) -> tuple:
    """``keras.ops.image.resize(images, size, ...)`` (channels-last) and
    ``tf.image.resize(images, size, method, preserve_aspect_ratio=False)``: the spatial
    axes of a 3-D or 4-D image tensor become ``size``."""
    if tf and _arg(args, kwargs, 3, "preserve_aspect_ratio", False) is not False:
        raise UnresolvedArgument("preserve_aspect_ratio", "a size kept to the image's aspect "
                                 "ratio depends on the image")
    if not tf and _arg(args, kwargs, 8, "data_format") not in (None, "channels_last"):
        raise UnresolvedArgument("data_format", "only channels-last images are evaluated")
    shape = _shape_of(_arg(args, kwargs, 0, "images"))
    size = _arg(args, kwargs, 1, "size")
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in size):
        raise UnresolvedArgument("size", "size is not (height, width) known statically")
    if len(shape) not in (3, 4):
        raise LayerError(f"images of shape {format_shape(shape)}: expected 3 or 4 axes")
    return shape[:-3] + tuple(size) + shape[-1:]


def _cropped_or_padded(args, kwargs, pad: bool) -> tuple:
    """``keras.ops.image.crop_images`` / ``pad_images(images, top_..., left_...,
    bottom_..., right_..., target_height=None, target_width=None)`` (channels-last): the
    target size where given, else the image's less (or plus) the two margins."""
    if _arg(args, kwargs, 7, "data_format") not in (None, "channels_last"):
        raise UnresolvedArgument("data_format", "only channels-last images are evaluated")
    shape = _shape_of(_arg(args, kwargs, 0, "images"))
    if len(shape) not in (3, 4):
        raise LayerError(f"images of shape {format_shape(shape)}: expected 3 or 4 axes")
    word = "padding" if pad else "cropping"
    out = list(shape)
    # (axis, then each argument's position and name)
    for axis, first, last, target in ((-3, (1, "top"), (3, "bottom"), (5, "target_height")),
                                      (-2, (2, "left"), (4, "right"), (6, "target_width"))):
        a = _arg(args, kwargs, first[0], f"{first[1]}_{word}")
        b = _arg(args, kwargs, last[0], f"{last[1]}_{word}")
        size = _arg(args, kwargs, *target)
        values = [v for v in (a, b, size) if v is not None]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise UnresolvedArgument(word, f"the {word} is not known statically")
        if size is not None:
            out[axis] = size
        elif shape[axis] is not None:
            margins = (a or 0) + (b or 0)
            out[axis] = shape[axis] + margins if pad else shape[axis] - margins
    return tuple(out)


def _patches(shape: tuple, size: tuple, strides: tuple, rates: tuple, padding: Any) -> tuple:
    """Patches of ``size`` taken ``strides`` apart (``rates`` between a patch's samples) from
    channels-last images, each flattened into the last axis."""
    if len(shape) not in (3, 4):
        raise LayerError(f"extract_patches needs 3-D or 4-D images, got rank {len(shape)}")
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise UnresolvedArgument("padding", "padding is not 'valid' or 'same'")
    *lead, rows, cols, channels = shape
    out = []
    for length, k, s, d in zip((rows, cols), size, strides, rates):
        if length is None:
            out.append(None)
        elif padding.lower() == "same":
            out.append(-(-length // s))
        else:
            n = (length - d * (k - 1) - 1) // s + 1
            if n <= 0:
                raise LayerError(f"patches of {k} do not fit in {length}")
            out.append(n)
    depth = None if channels is None else size[0] * size[1] * channels
    return tuple(lead) + tuple(out) + (depth,)


def _extract_patches(args, kwargs):
    """``keras.ops.image.extract_patches(images, size, strides=None, dilation_rate=1,
    padding="valid")`` (channels-last)."""
    if _arg(args, kwargs, 5, "data_format") not in (None, "channels_last"):
        raise UnresolvedArgument("data_format", "only channels-last patches are evaluated")
    size = _pair(_arg(args, kwargs, 1, "size"), "size")
    strides = _arg(args, kwargs, 2, "strides")
    return _patches(_shape_of(_arg(args, kwargs, 0, "images")), size,
                    size if strides is None else _pair(strides, "strides"),
                    _pair(_arg(args, kwargs, 3, "dilation_rate", 1), "dilation_rate"),
                    _arg(args, kwargs, 4, "padding", "valid"))


def _tf_extract_patches(args, kwargs):
    """``tf.image.extract_patches(images, sizes, strides, rates, padding)``: sizes, strides
    and rates as ``[1, rows, cols, 1]``."""
    def middle(value, name):
        if not isinstance(value, (list, tuple)) or len(value) != 4:
            raise UnresolvedArgument(name, f"{name} is not [1, rows, cols, 1] known statically")
        return _pair(tuple(value[1:3]), name)
    return _patches(_shape_of(_arg(args, kwargs, 0, "images")),
                    middle(_arg(args, kwargs, 1, "sizes"), "sizes"),
                    middle(_arg(args, kwargs, 2, "strides"), "strides"),
                    middle(_arg(args, kwargs, 3, "rates"), "rates"),
                    _arg(args, kwargs, 4, "padding"))


def _rearranged(args: list, kwargs: dict, to_space: bool, tf: bool) -> tuple:
    """``depth_to_space`` (``to_space``) and ``space_to_depth`` of a 4-D tensor: the block's
    pixels moved between the channels and the two spatial axes.  ``tf``: TensorFlow's
    spelling (``input``, ``data_format="NHWC"`` / ``"NCHW"``, blocks of 2 or more)."""
    shape = _shape_of(_arg(args, kwargs, 0, "input" if tf else "x"))
    block = _arg(args, kwargs, 1, "block_size")
    layout = _arg(args, kwargs, 2, "data_format", "NHWC" if tf else None)
    name = "depth_to_space" if to_space else "space_to_depth"
    if not isinstance(block, int) or isinstance(block, bool):
        raise UnresolvedArgument("block_size", "block_size is not an int known statically")
    if layout not in ("NHWC", "NCHW") if tf else layout not in (None, "channels_last",
                                                                "channels_first"):
        raise UnresolvedArgument("data_format", f"data_format {layout!r} is not evaluated")
    if len(shape) != 4:
        raise LayerError(f"{name} needs a 4-D input, got {format_shape(shape)}")
    if block < (2 if tf else 1):
        raise LayerError(f"block_size {block} is less than {2 if tf else 1}")
    first = layout in ("NCHW", "channels_first")
    channels, rows, cols = (shape[1], shape[2], shape[3]) if first else \
        (shape[3], shape[1], shape[2])
    if to_space:
        if channels is not None and channels % (block * block):
            raise LayerError(f"{channels} channels are not divisible by block_size**2 "
                             f"({block * block})")
        rows, cols, channels = [None if d is None else d * block for d in (rows, cols)] + [
            None if channels is None else channels // (block * block)]
    else:
        for what, d in (("height", rows), ("width", cols)):
            if d is not None and d % block:
                raise LayerError(f"{what} {d} is not divisible by block_size {block}")
        rows, cols, channels = [None if d is None else d // block for d in (rows, cols)] + [
            None if channels is None else channels * block * block]
    return (shape[0], channels, rows, cols) if first else (shape[0], rows, cols, channels)


_NEWAXIS = ("numpy.newaxis", "tensorflow.newaxis")


def _getitem(args, kwargs):
    """``x[:, 1:3]``, ``x[..., 0]``, ``x[:, None]``: NumPy basic indexing."""
    shape, key = _shape_of(args[0]), args[1]
    key = key if isinstance(key, tuple) and not getattr(key, "is_shape", False) else (key,)
    key = tuple(None if isinstance(k, Ref) and k.name in _NEWAXIS else k for k in key)
    if not all(k is None or k is Ellipsis or isinstance(k, slice) or
               (isinstance(k, int) and not isinstance(k, bool)) for k in key):
        raise UnresolvedArgument("index", "only ints, slices, None and ... are evaluated")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if key.count(Ellipsis) > 1 or used > len(shape):
        raise LayerError(f"too many indices for a tensor of rank {len(shape)}")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - used)
    out, axis = [], 0
    for k in key:
        if k is None:
            out.append(1)
            continue
        if axis >= len(shape):
            break
        dim = shape[axis]
        axis += 1
        if isinstance(k, int):
            if dim is not None and not -dim <= k < dim:
                raise LayerError(f"index {k} is out of bounds for an axis of size {dim}")
            continue
        if k.step == 0:
            raise LayerError("slice step cannot be zero")
        if dim is None:
            out.append(None)
        else:
            out.append(len(range(*k.indices(dim))))
    return tuple(out) + tuple(shape[axis:])


_UNARY = ("relu relu6 sigmoid tanh gelu silu elu selu softplus softsign leaky_relu "
          "hard_sigmoid hard_silu log_sigmoid exp log sqrt rsqrt square negative erf softmax "
          "log_softmax cast stop_gradient clip normalize sign floor ceil round sin cos "
          "reciprocal zeros_like ones_like flip sort roll "
          "arccos arccosh arcsin arcsinh arctan arctanh tan sinh cosh log1p log2 log10 expm1 "
          "exp2 cbrt erfc erfinv trunc deg2rad rad2deg nan_to_num signbit isnan isinf "
          "isfinite logical_not sinc fabs celu hard_tanh hard_shrink soft_shrink tanh_shrink "
          "squareplus sparse_plus sparse_sigmoid threshold bitwise_not bitwise_invert")
_register(_UNARY, None, _same)
_register("conj conjugate", "conjugate", _same)
_register("cumsum cumprod", None, _cumulative)
_register("linspace", None, _linspace)
_register("convert_to_tensor", None, _same)
_register("broadcast_to", None, _broadcast_to)
_register("slice", None, _slice)
_register("fft fft2 ifft2", None, _fourier)
_register("top_k", None, _top_k)
_register("take", None, _take)
_register("argsort", None, _same, _PREFIXES + ("tensorflow.",))
_register("repeat", None, _repeat, ("tensorflow.",))
_register("tile", None, lambda a, k: _tile([_arg(a, k, 0, "input"), _arg(a, k, 1, "multiples")],
                                           {}), ("tensorflow.",))
_register("unstack", None, _unstack)
_register("swish", "silu", _same)
_register("hard_swish", "hard_silu", _same)
_register("abs absolute", "absolute", _same)
_register("add subtract multiply divide true_divide maximum minimum power arctan2 "
          "floor_divide mod equal not_equal greater greater_equal less less_equal "
          "logical_and logical_or logical_xor divide_no_nan hypot logaddexp heaviside "
          "bitwise_and bitwise_or bitwise_xor", None, _binary)
_register("where", None, _where)
_register("mean sum max min prod std var logsumexp argmax argmin amax amin any all median",
          None, _reduce)
_register("matmul", None, _matmul)
_register("reshape", None, _reshape)
_register("transpose", None, _transpose)
_register("expand_dims", None, _expand_dims)
_register("squeeze", None, _squeeze)
_register("concatenate", None, _concatenate)
_register("stack", None, _stack)
_register("split", None, _split)
_register("einsum", None, _einsum)
_register("one_hot", None, _one_hot)
_register("tile", None, _tile)
_register("repeat", None, _repeat)
_register("pad", None, _pad)
# keras.activations.X(tensor): relu is its own operation (ReLU -> 're_lu'), the others call
# the keras.ops function of the same name
_ACTIVATIONS = ("keras.activations.",)
_register("relu", "re_lu", _same, _ACTIVATIONS)
_register("gelu silu elu selu softplus softsign tanh sigmoid softmax hard_sigmoid log_softmax "
          "relu6 leaky_relu hard_silu log_sigmoid", None, _same, _ACTIVATIONS)
_register("swish", "silu", _same, _ACTIVATIONS)
_register("exponential", "exp", _same, _ACTIVATIONS)
# TensorFlow spellings (valid only on real tensors, i.e. inside a traced call())
_TF = ("tensorflow.nn.", "tensorflow.math.", "tensorflow.")
_register("relu relu6 sigmoid tanh gelu elu selu softplus softsign softmax log_softmax exp "
          "sqrt rsqrt square erf sign floor ceil round sin cos", None, _same, _TF)
_register("abs", "absolute", _same, _TF)
_register("cast log log1p expm1 reciprocal negative tan sinh cosh stop_gradient zeros_like "
          "ones_like", None, _same, _TF)
_register("asin acos atan", None, _same, ("tensorflow.math.", "tensorflow."))
_register("identity", None, _same, ("tensorflow.",))
_register("clip_by_value", "clip", _same, ("tensorflow.",))
_register("l2_normalize", "normalize", _same, ("tensorflow.math.", "tensorflow.nn."))
_register("add subtract multiply divide maximum minimum equal not_equal greater "
          "greater_equal less less_equal logical_and logical_or", None, _binary, _TF)
_register("pow", "power", _binary, _TF)
_register("argmin argmax", None, _tf_arg_extreme, ("tensorflow.math.", "tensorflow."))
_register("one_hot", None, _tf_one_hot, ("tensorflow.",))
_register("gather", None, _tf_gather, ("tensorflow.",))
_register("reshape", None, _reshape, ("tensorflow.",))
_register("matmul", None, _tf_matmul, ("tensorflow.", "tensorflow.linalg."))
_register("einsum", None, _einsum, ("tensorflow.", "tensorflow.linalg."))
_register("transpose", None, _transpose, ("tensorflow.",))
_register("expand_dims", None, _expand_dims, ("tensorflow.",))
_register("squeeze", None, _squeeze, ("tensorflow.",))
_register("stack", None, _stack, ("tensorflow.",))
for _tf_name, _stem in (("reduce_mean", "mean"), ("reduce_sum", "sum"), ("reduce_max", "max"),
                        ("reduce_min", "min"), ("reduce_prod", "prod"),
                        ("reduce_logsumexp", "logsumexp")):
    OPERATIONS["tensorflow." + _tf_name] = OPERATIONS["tensorflow.math." + _tf_name] = \
        (_stem, _reduce)
OPERATIONS["tensorflow.concat"] = ("concatenate", _concatenate)
OPERATIONS["keras.ops.image.extract_patches"] = ("extract_patches", _extract_patches)
OPERATIONS["tensorflow.image.extract_patches"] = ("extract_patches", _tf_extract_patches)
OPERATIONS["keras.ops.image.resize"] = ("resize", lambda a, k: _resized(a, k, tf=False))
OPERATIONS["tensorflow.image.resize"] = ("resize", lambda a, k: _resized(a, k, tf=True))
OPERATIONS["keras.ops.image.crop_images"] = (
    "crop_images", lambda a, k: _cropped_or_padded(a, k, pad=False))
OPERATIONS["keras.ops.image.pad_images"] = (
    "pad_images", lambda a, k: _cropped_or_padded(a, k, pad=True))
OPERATIONS["operator.getitem"] = ("get_item", _getitem)  # tensor[...]
for _name, _to_space in (("depth_to_space", True), ("space_to_depth", False)):
    _register(_name, None, lambda a, k, t=_to_space: _rearranged(a, k, t, False))
    _register(_name, None, lambda a, k, t=_to_space: _rearranged(a, k, t, True),
              ("tensorflow.nn.", "tensorflow.", "tensorflow.compat.v1.",
               "tensorflow.compat.v1.nn."))


def is_operation(name: str) -> bool:
    return name in OPERATIONS


def is_reduction(name: str) -> bool:
    """Whether the operation reduces the axes it is given (``mean``, ``tf.reduce_sum``,
    ``argmin``)."""
    return name in OPERATIONS and OPERATIONS[name][1] in (_reduce, _tf_arg_extreme)


def is_elementwise(name: str) -> bool:
    """Whether the operation works element by element, keeping its operands' shape (an
    activation, ``x * y``): on a tensor of several batches it makes one of as many."""
    return name in OPERATIONS and OPERATIONS[name][1] in (_same, _binary)


# element-wise by shape but not by work: each output element reads a whole row or axis
_ROW_WISE = frozenset({"softmax", "log_softmax", "normalize", "sort", "argsort"})
# moves or joins elements without computing: a loop fusion writes them as it reads
_LAYOUT = frozenset({"concatenate", "get_item", "reshape", "expand_dims", "squeeze", "slice",
                     "transpose", "flip", "roll", "broadcast_to", "tile", "repeat", "stack",
                     "split", "unstack", "crop_images"})


def work_of(op_type: str, input_shapes=None, output_shape=None) -> Optional[str]:
    """What an operation recorded as ``op_type`` (``Absolute``, ``TrueDivide``,
    ``GetItem``) computes: "elementwise" (each output element from the elements at its own
    place), "layout" (elements moved or joined, nothing computed; a reduction over axes of
    size 1 too, given its shapes) or None (anything else: a reduction, a product, a
    row-wise normalisation)."""
    stems, rules = _recorded_as(op_type)
    if stems & _LAYOUT:
        return "layout"
    if rules and rules <= {_reduce} \
            and isinstance(input_shapes, list) and len(input_shapes) == 1 \
            and isinstance(input_shapes[0], tuple) and isinstance(output_shape, tuple) \
            and [d for d in input_shapes[0] if d != 1] == [d for d in output_shape if d != 1]:
        return "layout"
    if rules and not stems & _ROW_WISE and rules <= {_same, _binary, _where}:
        return "elementwise"
    return None


@functools.lru_cache(maxsize=None)
def _recorded_as(op_type: str) -> tuple:
    """(the operation stems recorded as ``op_type``, the shape rules they have)."""
    stems = frozenset(stem for stem, rule in OPERATIONS.values()
                      if "".join(part.capitalize() for part in stem.split("_")) == op_type)
    return stems, frozenset(rule for stem, rule in OPERATIONS.values() if stem in stems)


def operation_shape(name: str, args: list, kwargs: dict) -> tuple:
    """(operation name stem, output shape or list of shapes) for ``name(*args, **kwargs)``;
    raises UnresolvedArgument / LayerError.  Tensors are given as :class:`Tensor`."""
    stem, rule = OPERATIONS[name]
    return stem, rule([_as_operand(a) for a in args],
                      {k: _as_operand(v) for k, v in kwargs.items()})


def constant(name: str, args: list, kwargs: dict) -> Optional[Tensor]:
    """``name(*args, **kwargs)`` on scalars alone (``ops.cast(ops.arccos(0.95), "float32")``,
    ``tf.math.sqrt(tf.cast(64, tf.float32))``): Keras runs it at once on a constant, which
    takes no part in any graph; the tensor it makes (no producer), or None when its shape is
    not known or an operand is an array of data."""
    if any(isinstance(v, Array) and v.shape for v in flatten_structure([args, kwargs])):
        return None
    try:
        shape = operation_shape(name, args, kwargs)[1]
    except (LayerError, UnresolvedArgument):
        return None
    return Tensor(shape) if isinstance(shape, tuple) else None


class _ShapeOperand(tuple):
    """A tensor's shape standing for the tensor in a rule (plain tuples are arguments)."""

    is_shape = True


def _as_operand(value: Any) -> Any:
    if isinstance(value, Tensor):
        if value.shape is None:
            raise UnresolvedArgument("x", value.reason or "an input's shape is not known")
        return _ShapeOperand(value.shape)
    if isinstance(value, Array):  # a NumPy constant, broadcast as it is
        return _ShapeOperand(value.shape)
    if isinstance(value, list):
        return [_as_operand(v) for v in value]
    if isinstance(value, tuple) and not getattr(value, "is_shape", False) and any(
            isinstance(v, (Tensor, Array)) for v in value):  # ops.concatenate((x0, x1))
        return [_as_operand(v) for v in value]
    if isinstance(value, Unknown):
        raise UnresolvedArgument("argument", value.reason)
    return value
