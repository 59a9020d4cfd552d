"""Dimensions during ONNX shape inference: ints, the batch, named symbols, or unknown.

A dimension is an ``int``; :data:`BATCH` (the batch symbol, whatever the model calls it);
a :class:`BatchTimes` (``k`` times the batch, as in ``[batch * heads, seq, dim]``); another
``str`` (a symbol nothing bound, such as ``seq_len``); or ``None`` (unknown).  A
shape is a list of dimensions, or ``None`` when even the rank is unknown.
"""

from __future__ import annotations

from typing import Optional

from memlint.records import record

BATCH = "<batch>"


@record(frozen=True)
class BatchTimes:
    """A dimension equal to ``k`` times the batch (``k`` > 1)."""

    k: int

    def __repr__(self) -> str:
        return f"<batch>*{self.k}"


def batch_times(k: int):
    """``k`` times the batch as a dimension (BATCH itself for 1, 0 for 0)."""
    return BATCH if k == 1 else (0 if k == 0 else BatchTimes(k))


def batch_factor(dim) -> Optional[int]:
    """``k`` when ``dim`` is ``k`` times the batch, else None."""
    if dim == BATCH:
        return 1
    return dim.k if isinstance(dim, BatchTimes) else None


def is_known_dim(dim) -> bool:
    """An int or a multiple of the batch."""
    return is_int(dim) or batch_factor(dim) is not None

TENSOR_ITEMSIZE = {
    1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
    14: 8, 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1,
}  # TensorProto.DataType -> bytes per element (4-bit types rounded up to one byte)
FLOAT_TYPES = frozenset({1, 10, 11, 16, 17, 18, 19, 20, 23})
DTYPE_NAMES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
INT64, BOOL, INT32, FLOAT = 7, 9, 6, 1


def itemsize(elem_type: Optional[int]) -> Optional[int]:
    """Bytes per element of an ONNX element type (None if unknown or variable, e.g. strings)."""
    return TENSOR_ITEMSIZE.get(elem_type) if elem_type else None


def is_int(dim) -> bool:
    return isinstance(dim, int) and not isinstance(dim, bool)


def known(shape) -> bool:
    """True when every dimension is an int or the batch."""
    return shape is not None and all(is_known_dim(d) for d in shape)


def score(shape) -> int:
    """How much of ``shape`` is known (for choosing between two inferences)."""
    if shape is None:
        return -1
    return sum(1 for d in shape if is_known_dim(d))


def merge(first, second):
    """``first`` with its unknown dimensions filled from ``second`` (same rank), else the
    better known of the two."""
    if first is None:
        return second
    if second is None:
        return first
    if len(first) != len(second):
        return second if score(second) == len(second) and not known(first) else first
    return [a if is_known_dim(a) else b for a, b in zip(first, second)]


def prod(dims):
    """Product of dimensions: an int, a multiple of the batch, or None."""
    total, batches = 1, 0
    for d in dims:
        if is_int(d):
            total *= d
        elif batch_factor(d) is not None:
            batches += 1
            total *= batch_factor(d)
        else:
            return None
    if total == 0:
        return 0
    if batches == 0:
        return total
    return batch_times(total) if batches == 1 else None


def divide(total, part):
    """``total / part`` for dimensions (ints or batch multiples); None if not exact."""
    if total is None or part is None:
        return None
    t, p = batch_factor(total), batch_factor(part)
    if is_int(total) and is_int(part):
        if part == 0 or total % part:
            raise ValueError(f"{total} is not divisible by {part}")
        return total // part
    if t is not None and is_int(part):
        return batch_times(t // part) if part and t % part == 0 else None
    if t is not None and p is not None:
        return t // p if t % p == 0 else None
    return None


def broadcast_dim(a, b):
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if is_int(a) and is_int(b):
        raise ValueError(f"cannot broadcast {a} with {b}")
    if is_int(a):
        return a
    if is_int(b):
        return b
    if a is None or b is None:
        return None
    return None


def broadcast(shapes):
    """NumPy broadcasting of several shapes (None if any rank is unknown)."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j >= 0:
                dim = broadcast_dim(dim, s[j])
        out.append(dim)
    return out


def axis(value: int, rank: int) -> int:
    """A possibly negative axis as an index in ``range(rank)``."""
    if not -rank <= value < max(rank, 1):
        raise ValueError(f"axis {value} out of range for rank {rank}")
    return value + rank if value < 0 else value


def arith(fn, *dims):
    """``fn`` applied to int dims; None when any is not an int."""
    if all(is_int(d) for d in dims):
        return fn(*dims)
    return None
