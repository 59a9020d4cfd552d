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
        if kind == "Slice" and v and v[0] is not None and v[0].ndim == 1:
            starts, ends = ctx.ints(1), ctx.ints(2)
            steps = ctx.ints(4) if ctx.has_input(4) else [1]
            if starts is None or ends is None or steps is None:
                return none
            return [v[0][slice(starts[0], ends[0], steps[0])]]
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
        if kind in ("Mul", "Div") and len(v) == 2 and all(x is not None for x in v):
            a, b = np.broadcast_arrays(v[0].astype(object), v[1].astype(object))
            fn = _dim_mul if kind == "Mul" else _dim_div
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

