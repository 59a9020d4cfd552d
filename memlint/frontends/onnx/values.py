"""Small constant tensors and the shape arithmetic exporters build from them.

PyTorch and TensorFlow exporters compute Reshape targets at run time
(``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``).  memlint follows such chains on small
integer tensors whose entries are ints, the batch (:data:`~memlint.frontends.onnx.dims.BATCH`)
or unknown (None), so that the shapes they produce are known.  Values live in NumPy arrays:
``int64``/``float`` when every entry is a number, ``object`` otherwise.  Nothing is read from
external-data files.
"""

from __future__ import annotations

from typing import Optional

from memlint.frontends.onnx.dims import batch_factor, batch_times, divide, is_int

LIMIT = 4096  # largest tensor (elements) memlint keeps the value of


def _np():
    import numpy
    return numpy


def array(items):
    """A 1-D value from a list of dims (ints become int64, otherwise object)."""
    np = _np()
    if all(is_int(d) for d in items):
        return np.array(items, dtype=np.int64)
    return np.array(list(items), dtype=object)


def tensor_value(tensor) -> Optional[object]:
    """The value of a TensorProto held inside the model (None if external or too large)."""
    if tensor.data_location == 1:
        return None
    size = 1
    for d in tensor.dims:
        size *= d
    if size > LIMIT or tensor.data_type in (8, 0):  # strings, undefined
        return None
    from onnx import numpy_helper
    try:
        return numpy_helper.to_array(tensor)
    except Exception:  # a malformed tensor: its value is simply unknown
        return None


def constant_attr(node) -> tuple:
    """(value or None, elem_type, dims) of a Constant node from whichever attribute it uses."""
    np = _np()
    for attr in node.attribute:
        name = attr.name
        if name == "value":
            return tensor_value(attr.t), attr.t.data_type, list(attr.t.dims)
        if name == "sparse_value":
            return None, attr.sparse_tensor.values.data_type, list(attr.sparse_tensor.dims)
        if name == "value_float":
            return np.array(attr.f, dtype=np.float32), 1, []
        if name == "value_floats":
            return np.array(list(attr.floats), dtype=np.float32), 1, [len(attr.floats)]
        if name == "value_int":
            return np.array(attr.i, dtype=np.int64), 7, []
        if name == "value_ints":
            return np.array(list(attr.ints), dtype=np.int64), 7, [len(attr.ints)]
        if name == "value_string":
            return None, 8, []
        if name == "value_strings":
            return None, 8, [len(attr.strings)]
    return None, None, None


def _dim_mul(a, b):
    if is_int(a) and is_int(b):
        return a * b
    if is_int(b):
        a, b = b, a
    factor = batch_factor(b)
    return batch_times(a * factor) if is_int(a) and factor is not None else None


def _dim_div(a, b):
    try:
        return divide(a, b) if is_int(b) or batch_factor(b) is not None else None
    except ValueError:
        return None


def _dim_add(a, b):
    if is_int(a) and is_int(b):
        return a + b
    if a == 0 or b == 0:
        return b if a == 0 else a
    fa, fb = batch_factor(a), batch_factor(b)
    return batch_times(fa + fb) if fa is not None and fb is not None and fa + fb >= 0 \
        else None


def _dim_sub(a, b):
    if is_int(b):
        return _dim_add(a, -b)
    factor = batch_factor(b)
    return _dim_add(a, batch_times(-factor)) if factor is not None else None


def _dim_extreme(a, b, larger: bool):
    """max (``larger``) or min of two dims; the batch counts as at least 1."""
    if is_int(a) and is_int(b):
        return max(a, b) if larger else min(a, b)
    if a == b:
        return a
    if is_int(b):
        a, b = b, a
    if a == 1 and batch_factor(b) is not None:
        return b if larger else 1
    return None


def _slice(ctx, value):
    """Slice of a small value along any axes (starts, ends, axes, steps as inputs, or as
    attributes before opset 10); None when they are not constant."""
    if ctx.opset < 10:
        starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
        steps = None
    else:
        starts, ends = ctx.ints(1), ctx.ints(2)
        axes = ctx.ints(3) if ctx.has_input(3) else None
        steps = ctx.ints(4) if ctx.has_input(4) else None
        if starts is None or ends is None or (ctx.has_input(3) and axes is None) \
                or (ctx.has_input(4) and steps is None):
            return None
    axes = list(axes) if axes else list(range(len(starts)))
    steps = list(steps) if steps else [1] * len(starts)
    index = [slice(None)] * value.ndim
    for start, end, a, step in zip(starts, ends, axes, steps):
        index[a] = slice(start, end, step)
    return value[tuple(index)]


# binary operators on dims that may be batch multiples
_DIM_OPS = {"Mul": _dim_mul, "Div": _dim_div, "Add": _dim_add, "Sub": _dim_sub,
            "Max": lambda a, b: _dim_extreme(a, b, True),
            "Min": lambda a, b: _dim_extreme(a, b, False)}
# ReduceSum / ReduceProd of small ints (or batch multiples): how to combine two entries
_REDUCERS = {"ReduceSum": (_dim_add, 0), "ReduceProd": (_dim_mul, 1)}


def _reduce(ctx, value):
    """ReduceSum/ReduceProd of a small value whose entries may be batch multiples (a Reshape
    target ``batch * heads`` is ``ReduceProd(Shape(x)[0:2])``)."""
    np = _np()
    if ctx.has_input(1):
        axes = ctx.ints(1)
        if axes is None:
            return None
    else:
        axes = list(ctx.attr("axes") or [])
    if not axes and ctx.attr("noop_with_empty_axes", 0):
        return value
    axes = tuple(a % value.ndim for a in axes) if axes else tuple(range(value.ndim))
    keep = bool(ctx.attr("keepdims", 1))
    if _numeric(value):
        fn = np.sum if ctx.op_type == "ReduceSum" else np.prod
        return np.asarray(fn(value, axis=axes, keepdims=keep), dtype=value.dtype)
    combine, start = _REDUCERS[ctx.op_type]
    moved = np.moveaxis(value.astype(object), axes, tuple(range(len(axes))))
    flat = moved.reshape((-1,) + moved.shape[len(axes):])
    out = np.empty(flat.shape[1:], dtype=object)
    for index in np.ndindex(*out.shape):
        total = start
        for item in flat[(slice(None),) + index]:
            total = None if total is None or item is None else combine(total, item)
        out[index] = total
    if keep:
        out = out.reshape([1 if i in axes else d for i, d in enumerate(value.shape)])
    return out.astype(np.int64) if all(is_int(x) for x in out.reshape(-1)) else out


def _numeric(value) -> bool:
    return value is not None and value.dtype != object


def propagate(ctx, outputs) -> list:
    """Values of the node's outputs where they can be computed (None elsewhere)."""
    return [_wrap(v) for v in _propagate(ctx, outputs)]


def _wrap(value):
    """A NumPy array for a computed value (an entry taken out of an object array is a bare
    ``str``, ``int`` or ``None``)."""
    np = _np()
    if value is None or isinstance(value, np.ndarray):
        return value
    if isinstance(value, str):
        return np.array(value, dtype=object)
    return np.asarray(value)


def _propagate(ctx, outputs) -> list:
    np = _np()
    kind = ctx.op_type
    v = ctx.values
    none = [None] * ctx.n_outputs
    try:
        if kind == "Shape":
            x = ctx.shape(0)
            if x is None:
                return none
            start, end = ctx.attr("start", 0), ctx.attr("end", len(x))
            return [array(x[slice(start, end)])]
        if kind == "Size":
            x = ctx.shape(0)
            from memlint.frontends.onnx.dims import prod
            total = prod(x) if x is not None else None
            return [np.array(total, dtype=np.int64) if is_int(total) else None]
        if kind in ("Identity", "Cast", "Squeeze", "Unsqueeze", "Reshape", "Flatten") \
                and v and v[0] is not None:
            shape = outputs[0][0]
            if shape is None or not all(is_int(d) for d in shape):
                return none
            value = v[0].reshape(shape)
            if kind == "Cast" and _numeric(value):
                from onnx import helper
                value = value.astype(helper.tensor_dtype_to_np_dtype(ctx.attr("to")))
            return [value]
        if kind == "Gather" and v[0] is not None and _numeric(v[1]):
            return [np.take(v[0], v[1].astype(np.int64), axis=ctx.attr("axis", 0))]
        if kind == "Concat" and all(x is not None for x in v):
            return [np.concatenate([x.reshape(-1) if x.ndim == 0 else x for x in v],
                                   axis=ctx.attr("axis", 0))]
        if kind == "Slice" and v and v[0] is not None:
            return [_slice(ctx, v[0])]
        if kind == "Transpose" and v and v[0] is not None:
            return [np.transpose(v[0], ctx.attr("perm"))]
        if kind in _REDUCERS and v and v[0] is not None:
            return [_reduce(ctx, v[0])]
        if kind in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Where", "Mod",
                    "Less", "Greater", "Neg", "Abs", "Not", "Ceil", "Floor", "Sqrt") \
                and all(_numeric(x) for x in v) and v:
            fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                  "Max": np.maximum, "Min": np.minimum, "Equal": np.equal,
                  "Where": np.where, "Mod": np.mod, "Less": np.less,
                  "Greater": np.greater, "Neg": np.negative, "Abs": np.abs,
                  "Not": np.logical_not, "Ceil": np.ceil, "Floor": np.floor,
                  "Sqrt": np.sqrt}.get(kind)
            if kind == "Div":
                if np.issubdtype(v[0].dtype, np.integer):
                    return [np.trunc(v[0] / v[1]).astype(v[0].dtype)]
                return [v[0] / v[1]]
            return [np.asarray(fn(*v))]
        if kind in _DIM_OPS and len(v) == 2 and all(x is not None for x in v):
            a, b = np.broadcast_arrays(v[0].astype(object), v[1].astype(object))
            fn = _DIM_OPS[kind]
            items = [fn(x, y) for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())]
            out = np.array(items + [None], dtype=object)[:-1].reshape(a.shape)
            return [out.astype(np.int64) if all(is_int(x) for x in items) else out]
        if kind == "Where" and v and _numeric(v[0]) and all(x is not None for x in v):
            return [np.where(v[0], v[1], v[2])]
        if kind == "ConstantOfShape" and _numeric(v[0]):
            shape = [int(d) for d in v[0].reshape(-1)]
            total = 1
            for d in shape:
                total *= d
            if total <= LIMIT:
                fill = ctx.attrs.get("__fill__")
                return [np.full(shape, 0 if fill is None else fill.reshape(-1)[0])]
        if kind == "Range" and all(_numeric(x) for x in v) and len(v) == 3:
            value = np.arange(v[0].item(), v[1].item(), v[2].item())
            return [value if value.size <= LIMIT else None]
    except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError):
        return none
    return none

