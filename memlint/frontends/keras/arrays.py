"""NumPy data as model scripts prepare it: the shape and dtype of every array through the
usual preprocessing, as NumPy (and TensorFlow, for its eager functions) would compute them.

``keras.datasets.<name>.load_data()`` gives the real arrays (``memlint/data/
keras_datasets.yaml``, read from the Keras source); arithmetic (``x / 255.0``), casts
(``.astype("float32")``), reshapes, subscripts (``x[..., np.newaxis]``, ``x[idx]``),
``np.expand_dims`` / ``concatenate`` / ``stack``, ``to_categorical``, ``pad_sequences``,
``tf.cast`` / ``tf.one_hot`` / ``tf.image.resize`` ... keep both.  Nothing is computed on
data: an :class:`Array` is a shape (``None`` for a dimension not known statically) and a
dtype name (``None`` when not known).

dtype rules are NumPy 2's (NEP 50): a Python number does not widen an array
(``uint8 + 1`` is uint8, ``float32 * 2.0`` float32), but an int array with a Python float
becomes float64 and true division of integers is float64 (``uint8 / 255.0``: float64).
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from memlint.frontends.keras.values import (Array, Batches, BoundMethod, LoopIndex, Ref, Rows,
                                            Tensor, Unknown, flatten_structure, is_unknown)
from memlint.frontends.keras.values import call_arg as _arg

__all__ = ["ITEMSIZE", "dtype_name", "itemsize", "element_count", "array_bytes", "promote",
           "broadcast", "binary", "unary", "compare", "getitem", "reshape", "get_attribute",
           "call_method", "length", "handles", "call", "numpy_function", "like", "load_dataset",
           "dataset_catalog", "from_python"]

_DATASETS = Path(__file__).resolve().parents[2] / "data" / "keras_datasets.yaml"

# bytes per element; None: not a fixed size (object arrays hold pointers to Python objects)
ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1,
    "bool": 1, "complex64": 8, "complex128": 16, "object": None,
}
_ALIASES = {
    "float": "float64", "double": "float64", "float_": "float64", "single": "float32",
    "half": "float16", "int": "int64", "int_": "int64", "intp": "int64", "long": "int64",
    "longlong": "int64", "uint": "uint64", "uintp": "uint64", "bool_": "bool",
    "bool8": "bool", "byte": "int8", "ubyte": "uint8", "short": "int16", "ushort": "uint16",
    "intc": "int32", "uintc": "uint32", "cfloat": "complex128", "complex": "complex128",
    "csingle": "complex64", "cdouble": "complex128", "object_": "object", "O": "object",
    "f8": "float64", "f4": "float32", "f2": "float16", "i8": "int64", "i4": "int32",
    "i2": "int16", "i1": "int8", "u8": "uint64", "u4": "uint32", "u2": "uint16",
    "u1": "uint8", "b1": "bool", "?": "bool", "d": "float64", "f": "float32", "e": "float16",
}
# modules whose attributes name dtypes (np.float32, tf.float32, tf.dtypes.float32, ...)
_DTYPE_MODULES = frozenset({"numpy", "tensorflow", "tensorflow.dtypes",
                            "tensorflow.experimental.numpy", "keras.ops", "jax.numpy", "torch"})
_BUILTIN_DTYPES = {"builtins.float": "float64", "builtins.int": "int64",
                   "builtins.bool": "bool", "builtins.complex": "complex128",
                   "builtins.object": "object"}
_KIND_ORDER = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4}


# ---------------------------------------------------------------------- dtypes and sizes

def dtype_name(value: Any) -> Optional[str]:
    """NumPy's name for a dtype however the code spells it (``"float32"``, ``np.float32``,
    ``tf.float32``, ``float``, ``"f4"``), or None when it is not a dtype memlint knows."""
    if isinstance(value, Ref):
        if value.name in _BUILTIN_DTYPES:
            return _BUILTIN_DTYPES[value.name]
        module, _, attr = value.name.rpartition(".")
        # np.float32, tf.uint8 (not one-letter codes: np.e is Euler's number)
        return dtype_name(attr) if module in _DTYPE_MODULES and len(attr) > 2 else None
    if isinstance(value, str):
        name = value.strip()
        if name.startswith(("<", ">", "=", "|")):
            name = name[1:]
        name = _ALIASES.get(name, name)
        return name if name in ITEMSIZE else None
    return None


def _kind(dtype: Optional[str]) -> Optional[str]:
    if dtype is None:
        return None
    if dtype == "bool":
        return "b"
    if dtype == "object":
        return "O"
    return {"u": "u", "i": "i", "f": "f", "c": "c", "b": "f"}.get(dtype[0])  # bfloat16: f


def itemsize(dtype: Optional[str]) -> Optional[int]:
    """Bytes per element of a dtype name; None when not known or not fixed (object)."""
    return ITEMSIZE.get(dtype) if dtype is not None else None


def element_count(shape: tuple) -> Optional[int]:
    """The number of elements, or None when a dimension is not known."""
    if any(not isinstance(d, int) or isinstance(d, bool) for d in shape):
        return None
    return math.prod(shape)


def array_bytes(array: Array) -> Optional[int]:
    """Bytes the array's data takes in host memory; None when a dimension or the element
    size is not known (object arrays: their rows are Python lists of any length)."""
    count = element_count(tuple(array.shape))
    size = itemsize(array.dtype)
    return None if count is None or size is None else count * size


def promote(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """``np.result_type`` of two array dtypes (None when either is not known)."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    if "object" in (a, b):
        return "object"
    ka, kb = _kind(a), _kind(b)
    if ka is None or kb is None:
        return None
    if ka == "b":
        return b
    if kb == "b":
        return a
    if "bfloat16" in (a, b):  # not a NumPy type: only with itself or smaller ints
        return None
    sa, sb = ITEMSIZE[a], ITEMSIZE[b]
    if ka == kb:
        return a if sa >= sb else b
    if {ka, kb} == {"u", "i"}:
        (us, _), (si, ss) = ((a, sa), (b, sb)) if ka == "u" else ((b, sb), (a, sa))
        unsigned = ITEMSIZE[us]
        if ss > unsigned:
            return si
        return {1: "int16", 2: "int32", 4: "int64"}.get(unsigned, "float64")
    (hk, hs), (lk, ls) = sorted([(ka, sa), (kb, sb)], key=lambda t: _KIND_ORDER.get(t[0], 9),
                                reverse=True)
    if hk == "f":
        # an integer with a float: a float wide enough for it (int8 + float16: float16,
        # int16 + float16: float32, int32 + float32: float64)
        return {2: "float16", 4: "float32"}.get(max(hs, min(2 * ls, 8)), "float64")
    if hk == "c":
        need = ls if lk == "f" else min(2 * ls, 8)  # the size each complex part needs
        return "complex64" if max(hs // 2, need) <= 4 else "complex128"
    return None


def _with_scalar(dtype: Optional[str], scalar: Any) -> Optional[str]:
    """The dtype of ``array <op> python_number`` (NEP 50: the number is 'weak')."""
    kind = _kind(dtype)
    if kind is None:
        return None
    if isinstance(scalar, bool):
        return dtype
    if isinstance(scalar, int):
        return "int64" if kind == "b" else dtype
    if isinstance(scalar, float):
        return "float64" if kind in ("b", "u", "i") else dtype
    if isinstance(scalar, complex):
        if kind == "c":
            return dtype
        return "complex64" if dtype in ("float16", "float32") else "complex128"
    return None


def _can_cast_same_kind(source: Optional[str], target: Optional[str]) -> bool:
    ks, kt = _kind(source), _kind(target)
    if ks is None or kt is None:
        return False
    if ks == "b" or ks == kt:
        return True
    return ks in _KIND_ORDER and kt in _KIND_ORDER and _KIND_ORDER[ks] < _KIND_ORDER[kt] \
        and not (ks == "i" and kt == "u")


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


def _python_dtype(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return None


# ---------------------------------------------------------------------- shapes

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def broadcast(*shapes: tuple) -> Optional[tuple]:
    """NumPy broadcasting (``None``: a dimension not known; it takes the other operand's
    size, as code that runs does); None when the shapes cannot be broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            return None
        out.append(known.pop() if known else (None if None in dims else 1))
    return tuple(out)


def _axis(axis: Any, rank: int) -> Optional[int]:
    if not _is_int(axis) or not -rank <= axis < rank:
        return None
    return axis % rank


def _axes(axis: Any, rank: int) -> Optional[list]:
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = [_axis(a, rank) for a in items]
    if any(a is None for a in out) or len(set(out)) != len(out):
        return None
    return out


def _dims(value: Any) -> Optional[tuple]:
    """A shape argument: an int or a sequence of ints (NumPy also takes a 1-D int array,
    which is not followed here)."""
    if _is_int(value):
        return (value,)
    if isinstance(value, (tuple, list)) and all(_is_int(v) for v in value):
        return tuple(value)
    return None


def _add(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return None if a is None or b is None else a + b


# ---------------------------------------------------------------------- operands

def _operand(value: Any) -> Optional[Array]:
    """An operand of an array operation as an Array: arrays, Python numbers (shape ())
    and nested lists of numbers (``np.asarray``); None otherwise."""
    if isinstance(value, Array):
        return value
    if isinstance(value, (bool, int, float)):
        return Array((), _python_dtype(value))
    if isinstance(value, (list, tuple)):
        made = from_python(value)
        return made if isinstance(made, Array) else None
    return None


def stacked_rows(rows: Rows, dtype: Any = None) -> Any:
    """``np.array(rows)`` of a list a loop of unknown length filled: open rows of its
    element's shape (a number: one value a row)."""
    element = rows.element
    if isinstance(element, Array):
        return Array((None,) + tuple(element.shape),
                     dtype_name(dtype) if dtype is not None else element.dtype)
    kind = "float64" if isinstance(element, float) else "int64"
    return Array((None,), dtype_name(dtype) if dtype is not None else kind)


def from_python(value: Any, dtype: Any = None) -> Any:
    """``np.array(value)`` of nested lists/tuples of numbers (or of arrays of one shape):
    its shape and NumPy's dtype for them."""
    shape, kinds = _nested_shape(value, 0)
    if shape is None:
        return Unknown("an array made from values not known statically")
    wanted = dtype_name(dtype) if dtype is not None else None
    if dtype is None and "?" in kinds:  # an array of a dtype not known
        return Array(shape, None)
    if wanted is None:
        found = None
        for k in kinds:
            found = k if found is None else promote(found, k)
        wanted = found if found is not None else "float64"  # np.array([]) is float64
    return Array(shape, wanted)


def _nested_shape(value: Any, depth: int):
    if depth > 32:
        return None, []
    if isinstance(value, Array):
        return tuple(value.shape), [value.dtype] if value.dtype else ["?"]
    if isinstance(value, (bool, int, float)):
        return (), [_python_dtype(value)]
    if isinstance(value, (list, tuple)):
        if not value:
            return (0,), []
        parts = [_nested_shape(v, depth + 1) for v in value]
        shapes = {p[0] for p in parts}
        if None in shapes or len(shapes) != 1:
            return None, []  # ragged (an object array) or not known
        kinds = [k for p in parts for k in p[1]]
        return (len(value),) + shapes.pop(), sorted(set(kinds))
    return None, []


# ---------------------------------------------------------------------- arithmetic

_BINARY_OPS = {"Add", "Subtract", "Multiply", "TrueDivide", "FloorDivide", "Mod", "Power"}


def binary(op: Optional[str], left: Any, right: Any, inplace: bool = False) -> Any:
    """``left <op> right`` where one side is an Array (op: Add, Subtract, Multiply,
    TrueDivide, FloorDivide, Mod, Power); ``inplace`` for ``x /= 255``."""
    if op not in _BINARY_OPS:
        return Unknown("operator on arrays not evaluated")
    a, b = _operand(left), _operand(right)
    if a is None or b is None:
        return Unknown("arithmetic of an array with a value not known statically")
    shape = broadcast(tuple(a.shape), tuple(b.shape))
    if shape is None:
        return Unknown(f"NumPy cannot broadcast shapes {tuple(a.shape)} and {tuple(b.shape)}")
    weak_left, weak_right = _is_number(left), _is_number(right)
    if weak_right and not weak_left:
        dtype = _with_scalar(a.dtype, right)
    elif weak_left and not weak_right:
        dtype = _with_scalar(b.dtype, left)
    else:
        dtype = promote(a.dtype, b.dtype)
    if op == "TrueDivide" and _kind(dtype) in ("b", "u", "i"):
        dtype = "float64"
    elif op in ("FloorDivide", "Mod", "Power") and (dtype == "bool" or (
            op == "Power" and a.dtype == "bool" and weak_right and not weak_left
            and not isinstance(right, (bool, float)))):
        dtype = "int8"  # NumPy has no bool loops for these: int8 (bool ** 2 too)
    if inplace and isinstance(left, Array):
        target = tuple(left.shape)
        if len(shape) > len(target) or any(
                t == 1 and d not in (1, None) for t, d in zip(target, shape[-len(target):])):
            return Unknown("NumPy refuses an in-place operation that changes the shape")
        if dtype is not None and left.dtype is not None and not _can_cast_same_kind(
                dtype, left.dtype):
            return Unknown(f"NumPy refuses to store {dtype} results in place in a "
                           f"{left.dtype} array")
        return Array(tuple(left.shape), left.dtype)
    return Array(shape, dtype)


def unary(op: str, value: Array) -> Any:
    """``-x``, ``+x``, ``~x`` on an array: same shape and dtype."""
    if op == "BitInvert" and _kind(value.dtype) not in (None, "b", "u", "i"):
        return Unknown("~ of a float array: NumPy refuses it")
    return Array(tuple(value.shape), value.dtype)


def compare(left: Any, right: Any) -> Any:
    """``x > 0.5``, ``y == 3``: a bool array of the broadcast shape."""
    a, b = _operand(left), _operand(right)
    if a is None or b is None:
        return Unknown("comparison of an array with a value not known statically")
    shape = broadcast(tuple(a.shape), tuple(b.shape))
    if shape is None:
        return Unknown("comparison of arrays that cannot be broadcast")
    return Array(shape, "bool")


# ---------------------------------------------------------------------- indexing

def _index_item(key: Any) -> Any:
    if isinstance(key, Ref) and key.name in ("numpy.newaxis", "tensorflow.newaxis"):
        return None
    return key


def getitem(array: Array, key: Any) -> Any:
    """``array[key]``: ints drop a dimension, slices keep it (sized), ``None`` /
    ``np.newaxis`` add one, ``...`` stands for the rest; int or bool arrays (or lists) as
    indices select rows (NumPy's advanced indexing, with its placement of the selected
    dimensions)."""
    if is_unknown(key):
        return Unknown("index not known statically")
    keys = key if isinstance(key, tuple) else (key,)
    items = []
    for k in keys:
        k = _index_item(k)
        if k is None:
            items.append(("new", None))
        elif k is Ellipsis:
            items.append(("ellipsis", None))
        elif isinstance(k, slice) and isinstance(k.start, LoopIndex) \
                and isinstance(k.stop, LoopIndex) and k.step is None \
                and k.stop.offset >= k.start.offset:
            # ``x[i - 60:i]`` in a loop of unknown length: 60 rows wherever it cuts
            items.append(("sized", k.stop.offset - k.start.offset))
        elif isinstance(k, slice) and any(is_unknown(b) or isinstance(b, LoopIndex)
                                          for b in (k.start, k.stop)) and k.step is None:
            items.append(("open", None))  # ``x[:split]``: that axis's length is open
        elif isinstance(k, LoopIndex):
            items.append(("int", None))  # ``x[i]``: one row, which is not known
        elif isinstance(k, slice):
            if not all(b is None or _is_int(b) for b in (k.start, k.stop, k.step)):
                return Unknown("slice bounds not known statically")
            if k.step == 0:
                return Unknown("slice step cannot be zero")
            items.append(("slice", k))
        elif _is_int(k):
            items.append(("int", k))
        else:
            index = _advanced_index(k)
            if index is None:
                return Unknown("index of an array not known statically")
            items.append(("fancy", index))
    shape = tuple(array.shape)
    used = sum(data[1] if kind == "fancy" else 1 for kind, data in items
               if kind in ("slice", "int", "fancy", "open", "sized"))
    ellipses = sum(1 for kind, _ in items if kind == "ellipsis")
    if ellipses > 1 or used > len(shape):
        return Unknown(f"too many indices for an array of rank {len(shape)}")
    fill = [("slice", slice(None))] * (len(shape) - used)
    if ellipses:
        at = next(i for i, (kind, _) in enumerate(items) if kind == "ellipsis")
        items = items[:at] + fill + items[at + 1:]
    else:
        items = items + fill
    has_fancy = any(kind == "fancy" for kind, _ in items)
    out: list = []
    fancy_shapes, positions = [], []
    fancy_at = None
    axis = 0
    for position, (kind, data) in enumerate(items):
        if kind == "new":
            out.append(1)
            continue
        if kind == "fancy" or (kind == "int" and has_fancy):
            if kind == "int":
                dim = shape[axis]
                if dim is not None and data is not None and not -dim <= data < dim:
                    return Unknown(f"index {data} is out of bounds for an axis of size {dim}")
                index_shape, consumed = (), 1
            else:
                index_shape, consumed, selected = data
                if selected is not None:  # a bool list: as many rows as it has True values
                    index_shape = (selected,)
            fancy_shapes.append(index_shape)
            positions.append(position)
            if fancy_at is None:
                fancy_at = len(out)
            axis += consumed
            continue
        dim = shape[axis]
        axis += 1
        if kind in ("open", "sized"):
            out.append(data)
            continue
        if kind == "int":
            if dim is not None and data is not None and not -dim <= data < dim:
                return Unknown(f"index {data} is out of bounds for an axis of size {dim}")
            continue
        out.append(None if dim is None else len(range(*data.indices(dim))))
    if fancy_shapes:
        joined = broadcast(*fancy_shapes)
        if joined is None:
            return Unknown("index arrays that cannot be broadcast together")
        adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
        at = fancy_at if adjacent else 0  # apart: NumPy puts the selected dimensions first
        out[at:at] = list(joined)
    return Array(tuple(out), array.dtype)


def _advanced_index(key: Any) -> Optional[tuple]:
    """(index shape, dimensions it consumes, rows selected by a bool list) of an index
    array or list; None when it is not one."""
    if isinstance(key, Array):
        if key.dtype == "bool":
            return ((None,), max(len(key.shape), 1), None)
        if _kind(key.dtype) in ("u", "i") or key.dtype is None:
            return (tuple(key.shape), 1, None)
        return None
    if isinstance(key, list):
        if all(isinstance(v, bool) for v in key) and key:
            return ((len(key),), 1, sum(key))
        if all(_is_int(v) for v in key):
            return ((len(key),), 1, None)
    return None


# ---------------------------------------------------------------------- reshaping

def reshape(array: Array, shape: Any) -> Any:
    """``array.reshape(shape)`` with at most one -1 (which NumPy works out); a size read
    off an open axis (``x.reshape(x.shape[0], 60, 1)`` of open rows) stays open."""
    if isinstance(shape, (tuple, list)) and shape.count(None) == 1 \
            and array.shape.count(None) == 1 \
            and all(d is None or _is_int(d) and d > 0 for d in shape):
        # the open size stands for the array's: the known sizes must hold the same
        known = math.prod(d for d in array.shape if d is not None)
        if math.prod(d for d in shape if d is not None) != known:
            return Unknown("reshape of data to a shape not known statically")
        return Array(tuple(shape), array.dtype)
    dims = _dims(shape)
    if dims is None or dims.count(-1) > 1 or any(d < -1 for d in dims):
        return Unknown("reshape of data to a shape not known statically")
    total = element_count(tuple(array.shape))
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if total is None:
            return Array(tuple(None if d == -1 else d for d in dims), array.dtype)
        if known == 0 or total % known:
            return Unknown(f"NumPy cannot reshape an array of size {total} into {dims}")
        dims = tuple(total // known if d == -1 else d for d in dims)
    elif total is not None and known != total:
        return Unknown(f"NumPy cannot reshape an array of size {total} into {dims}")
    return Array(dims, array.dtype)


def transpose(array: Array, axes: Any = None) -> Any:
    shape = tuple(array.shape)
    if axes is None or axes == ():
        return Array(tuple(reversed(shape)), array.dtype)
    order = _axes(axes, len(shape))
    if order is None or len(order) != len(shape):
        return Unknown("transpose axes that are not a permutation of the array's axes")
    return Array(tuple(shape[a] for a in order), array.dtype)


def expand_dims(array: Array, axis: Any) -> Any:
    shape = list(array.shape)
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    positions = _axes(items, len(shape) + len(items))
    if positions is None:
        return Unknown(f"expand_dims axis {axis!r} is out of bounds")
    for position in sorted(positions):
        shape.insert(position, 1)
    return Array(tuple(shape), array.dtype)


def squeeze(array: Array, axis: Any = None) -> Any:
    shape = tuple(array.shape)
    if axis is None:
        if None in shape:
            return Unknown("squeeze of an array with dimensions not known statically")
        return Array(tuple(d for d in shape if d != 1), array.dtype)
    axes = _axes(axis, len(shape))
    if axes is None or any(shape[a] not in (1, None) for a in axes):
        return Unknown("squeeze of an axis whose size is not 1")
    return Array(tuple(d for i, d in enumerate(shape) if i not in axes), array.dtype)


def _flattened(array: Array) -> Array:
    return Array((element_count(tuple(array.shape)),), array.dtype)


def _reduce_dtype(method: str, dtype: Optional[str]) -> Optional[str]:
    kind = _kind(dtype)
    if method in ("argmax", "argmin"):
        return "int64"
    if method in ("mean", "std", "var", "average"):
        return "float64" if kind in ("b", "u", "i") else dtype
    if method in ("sum", "prod", "cumsum"):
        if kind == "b" or (kind == "i" and ITEMSIZE[dtype] < 8):
            return "int64"
        if kind == "u" and ITEMSIZE[dtype] < 8:
            return "uint64"
        return dtype
    return dtype  # max, min, ptp


def reduce(array: Array, method: str, axis: Any = None, keepdims: Any = False,
           dtype: Any = None) -> Any:
    """``x.mean(axis=0)``, ``np.max(x)``, ...: the reduced shape (a 0-d array for all axes,
    which NumPy gives as a NumPy scalar of that dtype)."""
    shape = tuple(array.shape)
    axes = list(range(len(shape))) if axis is None else _axes(axis, len(shape))
    if axes is None or not isinstance(keepdims, bool):
        return Unknown(f"{method}() over axes not known statically")
    result = dtype_name(dtype) if dtype is not None else _reduce_dtype(method, array.dtype)
    if method in ("argmax", "argmin") and axis is not None and len(axes) != 1:
        return Unknown(f"{method}() takes one axis")
    if keepdims:
        return Array(tuple(1 if i in axes else d for i, d in enumerate(shape)), result)
    return Array(tuple(d for i, d in enumerate(shape) if i not in axes), result)


_REARRANGING = {"reshape": reshape, "transpose": transpose, "expand_dims": expand_dims,
                "squeeze": squeeze}


def keras_op(stem: str, args: list, kwargs: dict) -> Any:
    """A ``keras.ops`` function called on NumPy data and no symbolic tensor (a Swin layer's
    shifted-window mask built in ``build()``): Keras runs it at once, a value of its NumPy
    counterpart's shape (the dtype the data's, or the one asked for); Unknown for others."""
    first = _arg(args, kwargs, 0, "x")
    if stem == "where":
        operands = [_operand(_arg(args, kwargs, i, key))
                    for i, key in enumerate(("condition", "x1", "x2"))]
        if any(a is None for a in operands):
            return Unknown("where() of values not known statically")
        shape = broadcast(*(tuple(a.shape) for a in operands))
        return Array(shape, promote(operands[1].dtype, operands[2].dtype)) \
            if shape is not None else Unknown("where() of shapes that do not broadcast")
    array = _operand(first)
    if array is None:
        return Unknown(f"keras.ops.{stem} of data not known statically")
    if stem in ("convert_to_tensor", "cast"):
        dtype = _arg(args, kwargs, 1, "dtype")
        return Array(tuple(array.shape), array.dtype if dtype is None else dtype_name(dtype))
    if stem in _REARRANGING:
        return _rearranged(array, stem, args, kwargs, {"reshape": "newshape",
                                                       "transpose": "axes"})
    return Unknown(f"keras.ops.{stem} of data is not evaluated")


def _rearranged(array: Array, stem: str, args: list, kwargs: dict, keys: dict) -> Any:
    """``reshape`` / ``transpose`` / ``expand_dims`` / ``squeeze`` of ``array`` by its second
    argument (its keyword ``keys[stem]``, else ``axis``; a tuple: the keyword, then the
    others it may go by, as NumPy's reshape takes ``newshape`` or ``shape``)."""
    names = keys.get(stem, "axis")
    names = names if isinstance(names, tuple) else (names,)
    given = next((kwargs[n] for n in names[1:] if n in kwargs), None)
    return _REARRANGING[stem](array, _arg(args, kwargs, 1, names[0], given))


def _meshgrid(args: list, kwargs: dict) -> Any:
    """``np.meshgrid(*xs, indexing="xy", sparse=False)``: one array per input, each of the
    inputs' sizes in order ("ij"), the first two swapped ("xy"); sparse, 1 on the axes
    that are not its own."""
    arrays = [_operand(x) for x in args]
    indexing, sparse = kwargs.get("indexing", "xy"), kwargs.get("sparse", False)
    if not arrays or any(a is None for a in arrays) or indexing not in ("xy", "ij") \
            or not isinstance(sparse, bool) or set(kwargs) - {"indexing", "sparse", "copy"}:
        return Unknown("meshgrid of arrays not known statically")
    sizes = [element_count(tuple(a.shape)) for a in arrays]
    if any(not _is_int(n) for n in sizes):
        return Unknown("meshgrid of arrays not known statically")
    axes = list(range(len(sizes)))
    if indexing == "xy" and len(sizes) > 1:
        axes[0], axes[1] = 1, 0  # where each input's values run
    shape = [0] * len(sizes)
    for i, axis in enumerate(axes):
        shape[axis] = sizes[i]
    if sparse:  # (each keeps its input's dtype)
        return [Array(tuple(sizes[i] if k == axis else 1 for k in range(len(sizes))),
                      arrays[i].dtype) for i, axis in enumerate(axes)]
    return [Array(tuple(shape), a.dtype) for a in arrays]


def concatenate(values: Any, axis: Any = 0) -> Any:
    arrays = _operands(values)
    if arrays is None:
        return Unknown("concatenate of arrays not known statically")
    dtype = _result_type(arrays)
    if axis is None:
        total = 0
        for a in arrays:
            total = _add(total, element_count(tuple(a.shape)))
        return Array((total,), dtype)
    rank = len(arrays[0].shape)
    a = _axis(axis, rank)
    if a is None or any(len(x.shape) != rank for x in arrays):
        return Unknown("concatenate of arrays of different ranks or along a missing axis")
    size: Optional[int] = 0
    for x in arrays:
        size = _add(size, x.shape[a])
    rest = _same_dims([tuple(x.shape[:a]) + tuple(x.shape[a + 1:]) for x in arrays])
    if rest is None:
        return Unknown("concatenate of arrays whose other dimensions differ")
    return Array(rest[:a] + (size,) + rest[a:], dtype)


def stack(values: Any, axis: Any = 0) -> Any:
    arrays = _operands(values)
    if arrays is None:
        return Unknown("stack of arrays not known statically")
    base = _same_dims([tuple(x.shape) for x in arrays])
    if base is None:
        return Unknown("stack of arrays of different shapes")
    a = _axis(axis, len(base) + 1)
    if a is None:
        return Unknown(f"stack axis {axis!r} is out of bounds")
    return Array(base[:a] + (len(arrays),) + base[a:], _result_type(arrays))


def _atleast(array: Array, rank: int) -> Array:
    shape = tuple(array.shape)
    if len(shape) >= rank:
        return array
    if rank == 2:
        shape = (1,) * (2 - len(shape)) + shape if len(shape) == 0 else (1,) + shape
    else:
        shape = (1,) * (rank - len(shape)) + shape
    return Array(shape, array.dtype)


def vstack(values: Any) -> Any:
    arrays = _operands(values)
    if arrays is None:
        return Unknown("vstack of arrays not known statically")
    return concatenate([_atleast(a, 2) for a in arrays], 0)


def hstack(values: Any) -> Any:
    arrays = _operands(values)
    if arrays is None:
        return Unknown("hstack of arrays not known statically")
    arrays = [_atleast(a, 1) for a in arrays]
    return concatenate(arrays, 0 if len(arrays[0].shape) == 1 else 1)


def _operands(values: Any) -> Optional[list]:
    if isinstance(values, Array):  # concatenating the rows of one array
        return None
    if not isinstance(values, (list, tuple)) or not values:
        return None
    out = [_operand(v) for v in values]
    return None if any(o is None for o in out) else out


def _same_dims(shapes: list) -> Optional[tuple]:
    """The common shape of arrays that must match (None dims take the known size)."""
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return None
    out = []
    for dims in zip(*shapes):
        known = {d for d in dims if d is not None}
        if len(known) > 1:
            return None
        out.append(known.pop() if known else None)
    return tuple(out)


def _result_type(arrays: list) -> Optional[str]:
    dtype = arrays[0].dtype
    for a in arrays[1:]:
        dtype = promote(dtype, a.dtype)
    return dtype


# ---------------------------------------------------------------------- attributes, methods

def length(array: Array) -> Any:
    """``len(x)``: the rows."""
    if not array.shape:
        return Unknown("len() of a 0-d array: NumPy refuses it")
    rows = array.shape[0]
    return rows if _is_int(rows) else Unknown("number of rows not known statically")


def get_attribute(array: Array, attr: str) -> Any:
    """``x.shape``, ``x.ndim``, ``x.dtype``, ``x.size``, ``x.nbytes``, ``x.T``; anything
    else is a method (see :func:`call_method`)."""
    if attr == "shape":
        return tuple(array.shape)
    if attr == "ndim":
        return len(array.shape)
    if attr == "dtype":
        return array.dtype if array.dtype is not None else Unknown("dtype not known statically")
    if attr == "size":
        count = element_count(tuple(array.shape))
        return count if count is not None else Unknown("array size not known statically")
    if attr == "nbytes":
        size = array_bytes(array)
        return size if size is not None else Unknown("array size not known statically")
    if attr == "itemsize":
        size = itemsize(array.dtype)
        return size if size is not None else Unknown("element size not known statically")
    if attr == "T":
        return transpose(array)
    return BoundMethod(array, attr)


_REDUCTIONS = {"mean", "sum", "prod", "std", "var", "max", "min", "argmax", "argmin", "ptp"}
# (``numpy()``: a TensorFlow tensor of data, a batch from a tf.data loop, as a NumPy array)
_SAME = {"copy", "clip", "round", "cumsum", "conj", "numpy"}


def call_method(array: Array, method: str, args: list, kwargs: dict) -> Any:
    """``x.astype(...)``, ``x.reshape(...)``, ``x.mean(axis=0)`` and the like."""
    if any(is_unknown(v) for v in flatten_structure([args, kwargs])) and method != "astype":
        return Unknown(f"{method}() of an array with arguments not known statically")
    if method == "astype":
        dtype = _arg(args, kwargs, 0, "dtype")
        return Array(tuple(array.shape), dtype_name(dtype))
    if method in _SAME:
        if method == "cumsum" and _arg(args, kwargs, 0, "axis") is None:
            return _flattened(array)
        return Array(tuple(array.shape), array.dtype)
    if method == "reshape":
        shape = args[0] if len(args) == 1 else tuple(args) if args else kwargs.get("shape")
        return reshape(array, shape)
    if method in ("flatten", "ravel"):
        return _flattened(array)
    if method == "transpose":
        axes = args[0] if len(args) == 1 else tuple(args) if args else kwargs.get("axes")
        return transpose(array, axes)
    if method == "squeeze":
        return squeeze(array, _arg(args, kwargs, 0, "axis"))
    if method == "swapaxes" and len(args) == 2:
        rank = len(array.shape)
        a, b = _axis(args[0], rank), _axis(args[1], rank)
        if a is None or b is None:
            return Unknown("swapaxes of axes out of bounds")
        order = list(range(rank))
        order[a], order[b] = order[b], order[a]
        return transpose(array, order)
    if method in _REDUCTIONS:
        return reduce(array, method, _arg(args, kwargs, 0, "axis"),
                      kwargs.get("keepdims", False), kwargs.get("dtype"))
    if method in ("fill", "sort"):
        return None  # in place
    if method == "repeat":
        return _repeat(array, _arg(args, kwargs, 0, "repeats"), _arg(args, kwargs, 1, "axis"))
    return Unknown(f"array method {method}() is not evaluated")


def _repeat(array: Array, repeats: Any, axis: Any) -> Any:
    if not _is_int(repeats) or repeats < 0:
        return Unknown("repeat counts not known statically")
    if axis is None:
        total = element_count(tuple(array.shape))
        return Array((None if total is None else total * repeats,), array.dtype)
    a = _axis(axis, len(array.shape))
    if a is None:
        return Unknown("repeat along an axis out of bounds")
    shape = list(array.shape)
    shape[a] = None if shape[a] is None else shape[a] * repeats
    return Array(tuple(shape), array.dtype)


# ---------------------------------------------------------------------- NumPy functions

_NUMPY_CASTS = {f"numpy.{name}" for name in (
    "float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32",
    "uint16", "uint8", "bool_", "double", "single", "half", "float_", "int_", "complex64",
    "complex128")}
_NUMPY_UNARY_FLOAT = {"numpy.exp", "numpy.log", "numpy.log1p", "numpy.sqrt", "numpy.sin",
                      "numpy.cos", "numpy.tanh", "numpy.expm1", "numpy.log2", "numpy.log10"}
_NUMPY_UNARY_SAME = {"numpy.abs", "numpy.absolute", "numpy.square", "numpy.negative",
                     "numpy.copy", "numpy.fliplr", "numpy.flipud", "numpy.flip",
                     "numpy.round", "numpy.around", "numpy.floor", "numpy.ceil", "numpy.sign",
                     "numpy.nan_to_num"}


def numpy_function(name: str, args: list, kwargs: dict) -> Any:
    """The NumPy functions that shape or cast data; Unknown for any other."""
    first = _arg(args, kwargs, 0, "a")
    if name in ("numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"):
        dtype = _arg(args, kwargs, 1, "dtype")
        if isinstance(first, Array):
            return Array(tuple(first.shape), dtype_name(dtype) if dtype is not None
                         else first.dtype)
        if isinstance(first, Rows):
            return stacked_rows(first, dtype)
        return from_python(first, dtype)
    if name in _NUMPY_CASTS:
        if isinstance(first, Array):
            return Array(tuple(first.shape), dtype_name(Ref(name)))
        if isinstance(first, (int, float)) and not isinstance(first, bool) and len(args) == 1:
            kind = _kind(dtype_name(Ref(name)))
            return float(first) if kind == "f" else int(first) if kind in ("u", "i") else \
                Unknown(f"{name} of a number")
        return Unknown(f"{name} of a value not known statically")
    if name == "numpy.dtype":
        dtype = dtype_name(first)
        return dtype if dtype is not None else Unknown("numpy.dtype not known statically")
    if name == "numpy.prod" or name == "numpy.product":
        if isinstance(first, (list, tuple)) and first and all(_is_int(d) for d in first) \
                and len(args) <= 1 and not kwargs:
            return math.prod(first)
    if name in ("numpy.sum", "numpy.max", "numpy.min", "numpy.amax", "numpy.amin") and \
            isinstance(first, (list, tuple)) and first and len(args) <= 1 and not kwargs \
            and all(isinstance(d, (int, float)) and not isinstance(d, bool) for d in first):
        return {"numpy.sum": sum, "numpy.max": max, "numpy.min": min, "numpy.amax": max,
                "numpy.amin": min}[name](first)
    if name == "numpy.arange":
        return _arange(args, kwargs)
    if name == "numpy.random.permutation":
        if _is_int(first):
            return Array((first,), "int64")
        if isinstance(first, Array):
            return Array(tuple(first.shape), first.dtype)
        return Unknown("permutation of a value not known statically")
    if name == "numpy.random.shuffle":
        return None  # in place
    if name == "numpy.random.choice":
        size = _arg(args, kwargs, 1, "size")
        dims = _dims(size) if size is not None else ()
        source = first
        dtype = "int64" if _is_int(source) else source.dtype if isinstance(source, Array) \
            else None
        return Array(dims, dtype) if dims is not None else Unknown("choice size not known")
    if name == "numpy.meshgrid":
        return _meshgrid(args, kwargs)
    if name == "numpy.concatenate":
        return concatenate(_arg(args, kwargs, 0, "arrays"), _arg(args, kwargs, 1, "axis", 0))
    if name == "numpy.stack":
        return stack(_arg(args, kwargs, 0, "arrays"), _arg(args, kwargs, 1, "axis", 0))
    if name in ("numpy.vstack", "numpy.row_stack"):
        return vstack(_arg(args, kwargs, 0, "tup"))
    if name == "numpy.hstack":
        return hstack(_arg(args, kwargs, 0, "tup"))
    array = _operand(first)
    if array is None:
        return Unknown(f"{name} is not evaluated")
    if name.removeprefix("numpy.") in _REARRANGING:
        return _rearranged(array, name.removeprefix("numpy."), args, kwargs,
                           {"reshape": ("newshape", "shape"), "transpose": "axes"})
    if name == "numpy.tile":
        return _tile(array, _arg(args, kwargs, 1, "reps"))
    if name in ("numpy.ravel", "numpy.ndarray.flatten"):
        return _flattened(array)
    if name == "numpy.moveaxis":
        rank = len(array.shape)
        source, target = _axis(_arg(args, kwargs, 1, "source"), rank), \
            _axis(_arg(args, kwargs, 2, "destination"), rank)
        if source is None or target is None:
            return Unknown("moveaxis of axes not known statically")
        order = [a for a in range(rank) if a != source]
        order.insert(target, source)
        return transpose(array, order)
    short = name[len("numpy."):]
    if short in _REDUCTIONS or short in ("average", "amax", "amin", "nanmean"):
        method = {"amax": "max", "amin": "min", "average": "mean", "nanmean": "mean"}.get(
            short, short)
        return reduce(array, method, _arg(args, kwargs, 1, "axis"),
                      kwargs.get("keepdims", False), kwargs.get("dtype"))
    if name == "numpy.clip" or name in _NUMPY_UNARY_SAME:
        return Array(tuple(array.shape), array.dtype)
    if name in _NUMPY_UNARY_FLOAT:
        return Array(tuple(array.shape), _float_for(array.dtype))
    return Unknown(f"{name} is not evaluated")


def _tile(array: Array, reps: Any) -> Any:
    """``np.tile``: the array and the repetitions padded to one length with leading 1s,
    multiplied dimension by dimension."""
    counts = _dims(reps)
    if counts is None or any(c < 0 for c in counts):
        return Unknown("tile repetitions not known statically")
    shape = tuple(array.shape)
    rank = max(len(shape), len(counts))
    shape = (1,) * (rank - len(shape)) + shape
    counts = (1,) * (rank - len(counts)) + counts
    return Array(tuple(None if d is None else d * c for d, c in zip(shape, counts)),
                 array.dtype)


def _float_for(dtype: Optional[str]) -> Optional[str]:
    """The float a NumPy math function (``np.sqrt``) computes in for a dtype: the smallest
    that holds the integers exactly (uint8: float16, int16: float32, int32: float64)."""
    kind = _kind(dtype)
    if kind == "b":
        return "float16"
    if kind in ("u", "i"):
        return {1: "float16", 2: "float32"}.get(ITEMSIZE[dtype], "float64")
    return dtype


def _arange(args: list, kwargs: dict) -> Any:
    values = list(args[:3])
    if not values and "stop" in kwargs:
        values = [kwargs.get("start", 0), kwargs["stop"], kwargs.get("step", 1)]
    if len(values) == 1:
        values = [0, values[0]]
    if len(values) == 2:
        values.append(kwargs.get("step", 1))
    if len(values) != 3 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                   for v in values) or values[2] == 0:
        return Unknown("arange of bounds not known statically")
    start, stop, step = values
    count = max(math.ceil((stop - start) / step), 0)
    dtype = kwargs.get("dtype")
    name = dtype_name(dtype) if dtype is not None else (
        "int64" if all(_is_int(v) for v in values) else "float64")
    return Array((count,), name)


# where the dtype goes among the positional arguments of the constructors
_DTYPE_POSITION = {"numpy.zeros": 1, "numpy.ones": 1, "numpy.empty": 1, "numpy.full": 2,
                   "tensorflow.zeros": 1, "tensorflow.ones": 1, "tensorflow.random.normal": 3,
                   "tensorflow.random.uniform": 3, "tensorflow.random.truncated_normal": 3}


def constructor_dtype(name: str, kwargs: dict, args: Optional[list] = None) -> Optional[str]:
    """The dtype of an array NumPy or TensorFlow makes from a shape (``np.zeros``: float64
    unless ``dtype=``; ``np.random.randint``: int64; ``tf.zeros``, ``tf.random.*``:
    float32)."""
    dtype = kwargs.get("dtype")
    position = _DTYPE_POSITION.get(name)
    if dtype is None and args and position is not None and len(args) > position:
        dtype = args[position]
    if dtype is not None:
        return dtype_name(dtype)
    if name == "numpy.full":
        fill = args[1] if args and len(args) > 1 else kwargs.get("fill_value")
        return _python_dtype(fill)
    if name == "numpy.random.randint":
        return "int64"
    if name == "tensorflow.fill":
        value = args[1] if args and len(args) > 1 else kwargs.get("value")
        return {"int64": "int32", "float64": "float32"}.get(_python_dtype(value),
                                                            _python_dtype(value))
    if name.startswith("tensorflow."):
        return "float32"
    return "float64"


def like(name: str, args: list, kwargs: dict) -> Any:
    """``np.zeros_like(x)``, ``np.asarray(x, dtype=)``, ``tf.convert_to_tensor(x)``,
    ``tf.constant(x)``, ``tf.cast(x, dtype)``, ``keras.ops.convert_to_numpy(x)``,
    ``keras.ops.cast(x, dtype)`` of an array: its shape, its dtype unless another is
    given."""
    first = args[0]
    dtype = kwargs.get("dtype")
    if dtype is None and len(args) > 1 and name in (
            "numpy.zeros_like", "numpy.ones_like", "numpy.empty_like", "numpy.asarray",
            "numpy.array", "tensorflow.cast", "tensorflow.constant",
            "tensorflow.convert_to_tensor", "keras.ops.cast", "keras.ops.convert_to_tensor"):
        dtype = args[1]
    if dtype is None and name == "numpy.full_like" and len(args) > 2:
        dtype = args[2]
    return Array(tuple(first.shape), dtype_name(dtype) if dtype is not None else first.dtype)


# ---------------------------------------------------------------------- Keras and TF functions

_PAD_SEQUENCES = {"keras.preprocessing.sequence.pad_sequences", "keras.utils.pad_sequences",
                  "keras.utils.sequence_utils.pad_sequences",
                  "keras_preprocessing.sequence.pad_sequences"}
_IMAGE_SAME = {"flip_left_right", "flip_up_down", "random_flip_left_right",
               "random_flip_up_down", "random_brightness", "random_contrast",
               "random_saturation", "random_hue", "adjust_brightness", "adjust_contrast",
               "adjust_saturation", "adjust_hue", "adjust_gamma", "rot90", "transpose",
               "rgb_to_yuv", "yuv_to_rgb", "rgb_to_hsv", "hsv_to_rgb", "rgb_to_yiq",
               "yiq_to_rgb"}
_LOAD_IMG = ("keras.utils.load_img", "keras.preprocessing.image.load_img")
_IMG_TO_ARRAY = ("keras.utils.img_to_array", "keras.preprocessing.image.img_to_array")
_COLOR_CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}

# tf.reduce_sum(codebook ** 2, axis=0) of a constant: NumPy's reduction of that name
_TF_REDUCTIONS = {f"tensorflow.{module}reduce_{stem}": stem for module in ("", "math.")
                  for stem in ("sum", "mean", "max", "min", "prod")}
_FUNCTIONS = {
    "keras.utils.to_categorical", "keras.utils.normalize", *_PAD_SEQUENCES,
    "tensorflow.cast", "tensorflow.reshape", "tensorflow.expand_dims", "tensorflow.squeeze",
    "tensorflow.transpose", "tensorflow.one_hot", "tensorflow.concat", "tensorflow.stack",
    "tensorflow.split", *_TF_REDUCTIONS,
    "tensorflow.image.resize", "tensorflow.image.resize_with_pad",
    "tensorflow.image.random_crop", "tensorflow.image.central_crop",
    "tensorflow.image.convert_image_dtype", "tensorflow.image.rgb_to_grayscale",
    "tensorflow.image.grayscale_to_rgb", "tensorflow.image.per_image_standardization",
    "tensorflow.io.decode_jpeg", "tensorflow.io.decode_png", "tensorflow.io.decode_image",
    "tensorflow.image.decode_jpeg", "tensorflow.image.decode_png",
    "tensorflow.image.decode_image",
    "sklearn.model_selection.train_test_split",
    *(f"tensorflow.image.{n}" for n in _IMAGE_SAME),
    *_LOAD_IMG, *_IMG_TO_ARRAY,
}
_DATASET_PREFIX = "keras.datasets."
# the keyword of the data argument of the TensorFlow functions above
_DATA_KEYWORDS = ("x", "tensor", "input", "a", "image", "images", "value")


def handles(name: str, args: list, kwargs: dict) -> bool:
    """Whether :func:`call` evaluates ``name(*args, **kwargs)``: the data functions above
    and ``keras.datasets.*.load_data`` (never on symbolic tensors: those are operations of
    the model, see ``tensor_ops``)."""
    if name not in _FUNCTIONS and _dataset_of(name) is None:
        return False
    return not any(isinstance(v, (Tensor, Batches)) for v in flatten_structure([args, kwargs]))


def call(state, name: str, args: list, kwargs: dict) -> Any:
    """The value of one of the functions :func:`handles` accepts."""
    dataset = _dataset_of(name)
    if dataset is not None:
        return load_dataset(dataset, args, kwargs, state.context.data_format)
    if name == "keras.utils.to_categorical":
        return to_categorical(args, kwargs)
    if name in _PAD_SEQUENCES:
        return pad_sequences(args, kwargs)
    if name == "sklearn.model_selection.train_test_split":
        return train_test_split(args, kwargs)
    if name.startswith(("tensorflow.io.decode_", "tensorflow.image.decode_")):
        return _decode_image(name, args, kwargs)
    if name in _LOAD_IMG:
        return _load_img(args, kwargs)
    if name in _IMG_TO_ARRAY:
        image = _arg(args, kwargs, 0, "img")
        dtype = kwargs.get("dtype", "float32")
        if isinstance(image, Array) and isinstance(dtype, str):
            return Array(image.shape, dtype)
        return Unknown("img_to_array of an image whose size is not known statically")
    first = _arg(args, kwargs, 0, "x")
    if name == "keras.utils.normalize":
        return _normalize(first)
    if name in ("tensorflow.concat", "tensorflow.stack"):
        values = _arg(args, kwargs, 0, "values")
        axis = _arg(args, kwargs, 1, "axis", 0)
        return concatenate(values, axis) if name == "tensorflow.concat" else stack(values, axis)
    if name == "tensorflow.one_hot":
        return _one_hot(args, kwargs)
    data = args[0] if args else next((kwargs[k] for k in _DATA_KEYWORDS if k in kwargs), None)
    array = _operand(data)
    size = _dims(_arg(args, kwargs, 1, "size")) if name == "tensorflow.image.random_crop" \
        else None
    if array is None and size is not None and all(_is_int(d) and d > 0 for d in size):
        # a crop of an image of a size not known (a catalogue's): of the size asked for
        return Array(size)
    if array is None or (tuple(array.shape) == () and name != "tensorflow.cast"):
        return Unknown(f"{name} of data not known statically")
    if name == "tensorflow.cast":
        return Array(tuple(array.shape), dtype_name(_arg(args, kwargs, 1, "dtype")))
    if name.removeprefix("tensorflow.") in _REARRANGING:
        return _rearranged(array, name.removeprefix("tensorflow."), args, kwargs,
                           {"reshape": "shape", "transpose": "perm"})
    if name in _TF_REDUCTIONS:
        return reduce(array, _TF_REDUCTIONS[name], _arg(args, kwargs, 1, "axis"),
                      _arg(args, kwargs, 2, "keepdims", False))
    if name == "tensorflow.split":
        return _split(array, _arg(args, kwargs, 1, "num_or_size_splits"),
                      _arg(args, kwargs, 2, "axis", 0))
    if name.startswith("tensorflow.image."):
        return _image(name[len("tensorflow.image."):], array, args, kwargs)
    return Unknown(f"{name} is not evaluated")


def _split(array: Array, parts: Any, axis: Any) -> Any:
    """``tf.split(value, num_or_size_splits, axis)``: equal parts, or the sizes given (one
    of them -1: the rest)."""
    shape = tuple(array.shape)
    if not _is_int(axis) or not -len(shape) <= axis < len(shape):
        return Unknown("tf.split along an axis not known statically")
    axis %= len(shape)
    size = shape[axis]
    if _is_int(parts):
        if parts <= 0 or not _is_int(size) or size % parts:
            return Unknown("tf.split into parts that do not divide the axis")
        sizes = [size // parts] * parts
    elif isinstance(parts, (list, tuple)) and parts and all(_is_int(p) for p in parts):
        sizes = list(parts)
        if sizes.count(-1) == 1 and _is_int(size):
            sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
        if any(p < 0 for p in sizes) or not _is_int(size) or sum(sizes) != size:
            return Unknown("tf.split into sizes that do not add up to the axis")
    else:
        return Unknown("tf.split into parts not known statically")
    return [Array(shape[:axis] + (p,) + shape[axis + 1:], array.dtype) for p in sizes]


def to_categorical(args: list, kwargs: dict) -> Any:
    """``to_categorical(y, num_classes)``: y's shape (without a last dimension of 1) plus
    the classes; Keras 3 builds it with ``np.zeros`` (float64), Keras 2 took ``dtype=``
    (float32 by default)."""
    y = _arg(args, kwargs, 0, "x", kwargs.get("y"))
    classes = _arg(args, kwargs, 1, "num_classes", kwargs.get("nb_classes"))
    y = _operand(y) if not isinstance(y, (list, tuple)) else from_python(y)
    if not isinstance(y, Array):
        return Unknown("to_categorical of data not known statically")
    if classes is not None and not _is_int(classes):
        return Unknown("to_categorical with a number of classes not known statically")
    shape = tuple(y.shape)
    if len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    dtype = _arg(args, kwargs, 2, "dtype")
    return Array(shape + (classes,), dtype_name(dtype) if dtype is not None else "float64")


def pad_sequences(args: list, kwargs: dict) -> Any:
    """``pad_sequences(sequences, maxlen=N)``: (samples, maxlen) of ``dtype`` (int32); the
    longest sequence's length when ``maxlen`` is not given."""
    sequences = _arg(args, kwargs, 0, "sequences")
    maxlen = _arg(args, kwargs, 1, "maxlen")
    dtype = dtype_name(_arg(args, kwargs, 2, "dtype", "int32"))
    if maxlen is not None and (not _is_int(maxlen) or maxlen < 0):
        return Unknown("pad_sequences with a maxlen not known statically")
    sample_shape: tuple = ()
    if isinstance(sequences, Array):
        shape = tuple(sequences.shape)
        if not shape:
            return Unknown("pad_sequences of a 0-d array")
        rows = shape[0]
        if sequences.dtype != "object" and len(shape) >= 2:
            sample_shape = shape[2:]
            if maxlen is None:
                maxlen = shape[1]
    elif isinstance(sequences, (list, tuple)):
        rows = len(sequences)
        if maxlen is None:
            lengths = [len(s) if isinstance(s, (list, tuple)) else
                       s.shape[0] if isinstance(s, Array) and s.shape else None
                       for s in sequences]
            maxlen = max(lengths) if lengths and None not in lengths else None
    else:
        return Unknown("pad_sequences of sequences not known statically")
    return Array((rows, maxlen) + sample_shape, dtype)


def train_test_split(args: list, kwargs: dict) -> Any:
    """scikit-learn's ``train_test_split(*arrays, test_size=, train_size=)``: the train and
    test part of each array, in that order (sizes as ``_validate_shuffle_split`` works
    them out)."""
    arrays = [_operand(a) if not isinstance(a, (list, tuple)) else from_python(a)
              for a in args]
    if not arrays or any(not isinstance(a, Array) or not a.shape for a in arrays):
        return Unknown("train_test_split of data not known statically")
    rows = arrays[0].shape[0]
    test, train = kwargs.get("test_size"), kwargs.get("train_size")
    if test is None and train is None:
        test = 0.25
    sizes = _split_sizes(rows, test, train)
    if sizes is None:
        return Unknown("train_test_split sizes not known statically")
    out = []
    for a in arrays:
        rest = tuple(a.shape[1:])
        out += [Array((sizes[0],) + rest, a.dtype), Array((sizes[1],) + rest, a.dtype)]
    return out


def _split_sizes(rows: Optional[int], test: Any, train: Any) -> Optional[tuple]:
    for value in (test, train):
        if value is not None and not (isinstance(value, (int, float))
                                      and not isinstance(value, bool)):
            return None
    if rows is None:
        return (None, None)
    n_test = math.ceil(test * rows) if isinstance(test, float) else test
    n_train = math.floor(train * rows) if isinstance(train, float) else train
    if n_train is None:
        n_train = rows - n_test
    elif n_test is None:
        n_test = rows - n_train
    if n_train < 0 or n_test < 0 or n_train + n_test > rows or n_train == 0:
        return None  # scikit-learn refuses these
    return (int(n_train), int(n_test))


def _normalize(value: Any) -> Any:
    array = _operand(value)
    if array is None or not isinstance(value, Array):
        return Unknown("normalize of data not known statically")
    kind = _kind(array.dtype)
    dtype = "float64" if kind in ("b", "u", "i") else array.dtype
    return Array(tuple(array.shape), dtype)


def _one_hot(args: list, kwargs: dict) -> Any:
    indices = _arg(args, kwargs, 0, "indices")
    depth = _arg(args, kwargs, 1, "depth")
    array = _operand(indices)
    if array is None or not _is_int(depth):
        return Unknown("tf.one_hot of indices or a depth not known statically")
    axis = _arg(args, kwargs, 4, "axis", -1)
    shape = list(array.shape)
    position = _axis(axis if axis is not None else -1, len(shape) + 1)
    if position is None:
        return Unknown("tf.one_hot axis out of bounds")
    shape.insert(position, depth)
    dtype = _arg(args, kwargs, 5, "dtype")
    return Array(tuple(shape), dtype_name(dtype) if dtype is not None else "float32")


def _decode_image(name: str, args: list, kwargs: dict) -> Any:
    """``tf.io.decode_jpeg(contents, channels=3)``: an image of unknown height and width;
    ``decode_image`` (which may give a 4-D animation) only with ``expand_animations=False``."""
    short = name.rsplit(".", 1)[1]
    channels = _arg(args, kwargs, 1, "channels", 0)
    if not _is_int(channels):
        return Unknown(f"{short} with channels not known statically")
    dtype = "uint8"
    if short in ("decode_png", "decode_image"):
        dtype = dtype_name(_arg(args, kwargs, 2, "dtype", "uint8"))
    if short == "decode_image" and kwargs.get("expand_animations", True) is not False:
        return Unknown("decode_image may give 3-D or 4-D (animated) images: pass "
                       "expand_animations=False")
    return Array((None, None, channels or None), dtype)


def _load_img(args: list, kwargs: dict) -> Any:
    """``keras.utils.load_img(path, target_size=(224, 224))``: an image of that size (its
    pixels as a uint8 array; the file is never read), channels by ``color_mode``; without a
    ``target_size`` the file's own size, not known."""
    if len(args) > 1:  # Keras 2 took grayscale= second, Keras 3 takes color_mode=
        return Unknown("load_img's positional arguments differ between Keras versions")
    size = kwargs.get("target_size")
    channels = _COLOR_CHANNELS.get(kwargs.get("color_mode", "rgb"))
    if kwargs.get("grayscale") is True:  # Keras 2's spelling
        channels = 1
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(_is_int(d) for d in size) \
            and channels is not None:
        return Array((size[0], size[1], channels), "uint8")
    return Unknown("load_img without a target_size: the image's own size is not known")


def _f32(value: float) -> float:
    """A float rounded to float32, as TensorFlow computes sizes in float32."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _resize_dtype(method: Any, dtype: Optional[str]) -> Optional[str]:
    if method is None:
        return "float32"
    name = method.name.rsplit(".", 1)[1].lower() if isinstance(method, Ref) else method
    if not isinstance(name, str):
        return None
    return dtype if name in ("nearest", "nearest_neighbor") else "float32"


def _image(short: str, array: Array, args: list, kwargs: dict) -> Any:
    shape = tuple(array.shape)
    if short in _IMAGE_SAME:
        if short in ("rot90", "transpose") and len(shape) in (3, 4):
            hw = shape[-3:-1]
            turns = _arg(args, kwargs, 1, "k", 1)
            if short == "transpose" or (_is_int(turns) and turns % 2):
                hw = hw[::-1]
            elif not _is_int(turns):
                return Unknown("rot90 turns not known statically")
            return Array(shape[:-3] + hw + shape[-1:], array.dtype)
        return Array(shape, array.dtype)
    if short == "per_image_standardization":
        return Array(shape, "float32" if _kind(array.dtype) in ("u", "i", "b")
                     else array.dtype)
    if short in ("rgb_to_grayscale", "grayscale_to_rgb"):
        if not shape:
            return Unknown(f"{short} of a 0-d array")
        return Array(shape[:-1] + ((1,) if short == "rgb_to_grayscale" else (3,)),
                     array.dtype)
    if short == "convert_image_dtype":
        return Array(shape, dtype_name(_arg(args, kwargs, 1, "dtype")))
    if short == "random_crop":
        size = _dims(_arg(args, kwargs, 1, "size"))
        if size is None or len(size) != len(shape):
            return Unknown("random_crop to a size not known statically")
        if any(d is not None and s > d for s, d in zip(size, shape)):
            return Unknown("random_crop larger than the data: TensorFlow refuses it")
        return Array(size, array.dtype)
    if len(shape) not in (3, 4):
        return Unknown(f"tf.image.{short} of an array that is not 3-D or 4-D")
    if short == "central_crop":
        return _central_crop(array, _arg(args, kwargs, 1, "central_fraction"))
    if short == "resize":
        return _resize(array, args, kwargs)
    if short == "resize_with_pad":
        height = _arg(args, kwargs, 1, "target_height")
        width = _arg(args, kwargs, 2, "target_width")
        if not (_is_int(height) and _is_int(width)) or height <= 0 or width <= 0:
            return Unknown("resize_with_pad to a size not known statically")
        return Array(shape[:-3] + (height, width) + shape[-1:],
                     _resize_dtype(_arg(args, kwargs, 3, "method"), array.dtype))
    return Unknown(f"tf.image.{short} is not evaluated")


def _resize(array: Array, args: list, kwargs: dict) -> Any:
    """``tf.image.resize(images, size)``: the two spatial dimensions replaced; float32
    unless the method is nearest neighbour; ``preserve_aspect_ratio`` scales both by the
    smaller factor, in float32 as TensorFlow does."""
    shape = tuple(array.shape)
    size = _dims(_arg(args, kwargs, 1, "size"))
    if size is None or len(size) != 2:
        return Unknown("tf.image.resize to a size not known statically")
    height, width = size
    if _arg(args, kwargs, 3, "preserve_aspect_ratio", False) is True:
        h, w = shape[-3], shape[-2]
        if h is None or w is None or h == 0 or w == 0:
            height = width = None
        else:
            scale = min(_f32(_f32(height) / _f32(h)), _f32(_f32(width) / _f32(w)))
            height = int(round(_f32(scale * _f32(h))))
            width = int(round(_f32(scale * _f32(w))))
    dtype = _resize_dtype(_arg(args, kwargs, 2, "method"), array.dtype)
    return Array(shape[:-3] + (height, width) + shape[-1:], dtype)


def _central_crop(array: Array, fraction: Any) -> Any:
    """``tf.image.central_crop``: TensorFlow's own arithmetic,
    ``start = int((d - d * fraction) / 2)``, size ``d - 2 * start``."""
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        return Unknown("central_crop fraction not known statically")
    if not 0.0 < fraction <= 1.0:
        return Unknown("central_fraction must be within (0, 1]: TensorFlow refuses it")
    shape = tuple(array.shape)
    if fraction == 1.0:
        return Array(shape, array.dtype)
    out = list(shape)
    for i in (len(shape) - 3, len(shape) - 2):
        d = shape[i]
        if d is not None:
            start = int((float(d) - float(d) * fraction) / 2)
            out[i] = d - start * 2
    return Array(tuple(out), array.dtype)


# ---------------------------------------------------------------------- keras.datasets

@lru_cache(maxsize=1)
def dataset_catalog() -> dict:
    """The facts of ``memlint/data/keras_datasets.yaml``, keyed by dataset name."""
    from memlint.catalog import data_yaml
    return data_yaml("keras-datasets", _DATASETS)


def _dataset_of(name: str) -> Optional[str]:
    if not name.startswith(_DATASET_PREFIX) or not name.endswith(".load_data"):
        return None
    short = name[len(_DATASET_PREFIX):-len(".load_data")]
    return short if short in dataset_catalog() else None


def load_dataset(dataset: str, args: list, kwargs: dict,
                 data_format: str = "channels_last") -> Any:
    """``keras.datasets.<dataset>.load_data(...)``: ``((x_train, y_train), (x_test,
    y_test))`` as Arrays of the real shapes and dtypes."""
    facts = dataset_catalog()[dataset]
    params = list(facts.get("params", []))
    if len(args) > len(params):
        return Unknown(f"{dataset}.load_data() with more arguments than it takes")
    given = dict(zip(params, args))
    given.update(kwargs)
    values = {**facts.get("defaults", {}), **given}
    if any(is_unknown(values.get(p)) for p in ("test_split", "version", "maxlen",
                                                "label_mode")):
        return Unknown(f"{dataset}.load_data() arguments not known statically")
    if "label_modes" in facts and values.get("label_mode", "fine") not in facts["label_modes"]:
        return Unknown(f"{dataset}.load_data() refuses label_mode={values.get('label_mode')!r}")
    dropped = any(values.get(p) for p in facts.get("drops", []))
    if "samples" in facts:
        train, test = facts["samples"]["train"], facts["samples"]["test"]
    else:
        total = facts.get("total")
        if "versions" in facts:
            total = facts["versions"].get(values.get("version"))
            if total is None:
                return Unknown(f"{dataset}.load_data() refuses version="
                               f"{values.get('version')!r}")
        split = values.get("test_split")
        if not isinstance(split, (int, float)) or isinstance(split, bool):
            return Unknown(f"{dataset}.load_data() test_split not known statically")
        if facts.get("checked_split") and not 0 <= split < 1:
            return Unknown(f"{dataset}.load_data() refuses test_split={split!r}")
        index = int(total * (1 - split))
        train = len(range(total)[:index])
        test = total - train
    if dropped:
        train = test = None
    x, y = facts["x"], facts["y"]
    sample = tuple(x.get("channels_first", x["shape"]) if data_format == "channels_first"
                   else x["shape"])
    y_sample = tuple(y["shape"])
    return ((Array((train,) + sample, x["dtype"]), Array((train,) + y_sample, y["dtype"])),
            (Array((test,) + sample, x["dtype"]), Array((test,) + y_sample, y["dtype"])))
