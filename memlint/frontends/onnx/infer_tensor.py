"""memlint's own shape inference for tensor operators: reshaping, joining and splitting,
slicing, resizing, gathering, elementwise operators with broadcasting, and the constant makers
(ONNX operator semantics)."""

from __future__ import annotations

import math

from memlint.frontends.onnx.dims import (BATCH, BOOL, INT64, BatchTimes, axis, broadcast,
                                         divide, is_int, is_known_dim, prod)
from memlint.frontends.onnx.registry import op
# The elementwise operator kinds are listed once, where the memory model reads them too.
from memlint.memory.liveness import BINARY, COMPARE, UNARY



@op(*UNARY)
def unary(ctx):
    return [(ctx.shape(0), ctx.type(0))]


@op(*BINARY)
def binary(ctx):
    if ctx.opset < 7 and ctx.op_type in ("Add", "Sub", "Mul", "Div", "Pow"):
        return [(ctx.shape(0), ctx.type(0))]  # legacy broadcasting: B fits into A
    shapes = [ctx.shape(i) for i in range(len(ctx.node.input)) if ctx.has_input(i)]
    return [(broadcast(shapes), ctx.type(0))]


@op(*COMPARE)
def compare(ctx):
    if ctx.opset < 7:
        return [(ctx.shape(0), BOOL)]
    return [(broadcast([ctx.shape(0), ctx.shape(1)]), BOOL)]


@op("IsNaN", "IsInf")
def is_special(ctx):
    return [(ctx.shape(0), BOOL)]


@op("Where")
def where(ctx):
    return [(broadcast([ctx.shape(0), ctx.shape(1), ctx.shape(2)]), ctx.type(1))]


@op("Dropout")
def dropout(ctx):
    return [(ctx.shape(0), ctx.type(0)), (ctx.shape(0), BOOL)][:ctx.n_outputs]


@op("Cast")
def cast(ctx):
    return [(ctx.shape(0), ctx.attr("to"))]


@op("CastLike")
def cast_like(ctx):
    return [(ctx.shape(0), ctx.type(1))]


@op("QuantizeLinear")
def quantize(ctx):
    out_type = ctx.type(2) or ctx.attr("output_dtype") or 2  # uint8 by default
    return [(ctx.shape(0), out_type)]


@op("DequantizeLinear")
def dequantize(ctx):
    return [(ctx.shape(0), ctx.type(1) or 1)]


@op("DynamicQuantizeLinear")
def dynamic_quantize(ctx):
    return [(ctx.shape(0), 2), ([], 1), ([], 2)][:ctx.n_outputs]


def _reshape_target(data, target, allowzero: bool):
    out = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(data):
                raise ValueError("Reshape copies a dimension the input does not have")
            out.append(data[i])
        else:
            out.append(t)
    if out.count(-1) > 1:
        raise ValueError("Reshape target has more than one -1")
    if -1 in out:
        i = out.index(-1)
        out[i] = _infer_missing(data, out[:i] + out[i + 1:])
    else:
        # ints, or multiples of the batch (a size fixed at export, [16, batch * 4, 16], no
        # longer holds a tensor of another sequence length)
        have, want = prod(data), prod(out)
        if have is not None and want is not None and have != want \
                and is_int(have) == is_int(want):  # (an int against the batch: its size decides)
            raise ValueError(f"cannot reshape {_dims(data)} into {_dims(out)}: they hold "
                             "different numbers of elements (a size fixed in the graph when "
                             "it was exported, such as the sequence length it was traced "
                             "with?)")
    return out


def _dims(shape) -> str:
    """A shape for a message: the batch as ``batch``, its multiples as ``batch*k``."""
    return "(" + ", ".join("batch" if d == BATCH else f"batch*{d.k}" if isinstance(
        d, BatchTimes) else "?" if d is None else str(d) for d in shape) + ")"


def _infer_missing(data, others):
    """The dimension -1 stands for: total size / the other dimensions, batch aware."""
    pool = list(data)
    rest = []
    for d in others:
        if not is_int(d) and d in pool:  # the same symbol on both sides cancels
            pool.remove(d)
        else:
            rest.append(d)
    try:
        return divide(prod(pool), prod(rest))
    except ValueError:
        raise ValueError(f"cannot reshape {list(data)} with {list(others)} and -1") from None


@op("Reshape")
def reshape(ctx):
    data = ctx.shape(0)
    if ctx.opset < 5:
        target = list(ctx.attr("shape") or [])
    else:
        value = ctx.value(1)
        if value is None:
            rank = ctx.shape(1)
            length = rank[0] if rank and is_int(rank[0]) else None
            return [(None if length is None else [None] * length, ctx.type(0))]
        target = [d if is_known_dim(d) else None for d in value.reshape(-1).tolist()]
    if data is None:
        if any(t in (0, -1) for t in target):
            return [([None if t in (0, -1) else t for t in target], ctx.type(0))]
        return [(target, ctx.type(0))]
    return [(_reshape_target(data, target, bool(ctx.attr("allowzero", 0))), ctx.type(0))]


@op("Flatten")
def flatten(ctx):
    x = ctx.shape(0)
    if x is None:
        return [([None, None], ctx.type(0))]
    cut = axis(ctx.attr("axis", 1), len(x) + 1) if x else 0
    return [([prod(x[:cut]), prod(x[cut:])], ctx.type(0))]


@op("Concat")
def concat(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.node.input)) if ctx.has_input(i)]
    if any(s is None for s in shapes) or not shapes:
        return [(None, ctx.type(0))]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise ValueError("Concat of inputs with different ranks")
    k = axis(ctx.attr("axis"), rank)
    out = []
    for i in range(rank):
        column = [s[i] for s in shapes]
        if i == k:
            total = 0
            for d in column:
                total = total + d if is_int(d) and total is not None else None
            out.append(total)
        else:
            known = [d for d in column if is_known_dim(d)]
            if len(set(known)) > 1 and all(is_int(d) for d in known):
                raise ValueError(f"Concat inputs differ in dimension {i}: {column}")
            out.append(known[0] if known else column[0])
    return [(out, ctx.type(0))]


@op("Split")
def split(ctx):
    x = ctx.shape(0)
    n = ctx.n_outputs
    if x is None:
        return [(None, ctx.type(0))] * n
    k = axis(ctx.attr("axis", 0), len(x))
    sizes = ctx.ints(1) if ctx.opset >= 13 and ctx.has_input(1) else ctx.attr("split")
    size = x[k]
    if not sizes:
        if not is_int(size):
            sizes = [None] * n
        elif ctx.attr("num_outputs") is not None:
            chunk = -(-size // n)
            sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
        else:
            if size % n:
                raise ValueError(f"cannot split {size} into {n} equal parts")
            sizes = [size // n] * n
    sizes = list(sizes)
    if len(sizes) != n:
        raise ValueError(f"Split gives {len(sizes)} sizes for {n} outputs")
    return [(x[:k] + [s] + x[k + 1:], ctx.type(0)) for s in sizes]


@op("Transpose")
def transpose(ctx):
    x = ctx.shape(0)
    if x is None:
        return [(None, ctx.type(0))]
    perm = list(ctx.attr("perm") or reversed(range(len(x))))
    if sorted(perm) != list(range(len(x))):
        raise ValueError(f"perm {perm} does not fit rank {len(x)}")
    return [([x[p] for p in perm], ctx.type(0))]


def _axes(ctx, index: int = 1):
    """Axes from the input (opset 13+ for most operators) or the attribute; None: unknown."""
    if ctx.has_input(index):
        return ctx.ints(index)
    return list(ctx.attr("axes") or [])


@op("Squeeze")
def squeeze(ctx):
    x = ctx.shape(0)
    axes = _axes(ctx)
    if x is None or axes is None:
        return [(None, ctx.type(0))]
    if not axes:
        if any(not is_int(d) for d in x):
            return [(None, ctx.type(0))]
        return [([d for d in x if d != 1], ctx.type(0))]
    drop = {axis(a, len(x)) for a in axes}
    for a in drop:
        if is_int(x[a]) and x[a] != 1:
            raise ValueError(f"Squeeze of dimension {a} of size {x[a]}")
    return [([d for i, d in enumerate(x) if i not in drop], ctx.type(0))]


@op("Unsqueeze")
def unsqueeze(ctx):
    x = ctx.shape(0)
    axes = _axes(ctx)
    if x is None or axes is None:
        return [(None, ctx.type(0))]
    rank = len(x) + len(axes)
    new = {axis(a, rank) for a in axes}
    rest = iter(x)
    return [([1 if i in new else next(rest) for i in range(rank)], ctx.type(0))]


def _slice_len(size, start, end, step):
    if step == 0:
        raise ValueError("Slice step 0")
    if not is_int(size):
        if step == 1 and start == 0 and end >= 2 ** 31 - 1:
            return size
        return None
    if step > 0:
        start = min(max(start + size if start < 0 else start, 0), size)
        end = min(max(end + size if end < 0 else end, 0), size)
        return max(0, -(-(end - start) // step))
    start = min(max(start + size if start < 0 else start, 0), size - 1)
    end = min(max(end + size if end < 0 else end, -1), size - 1)
    return max(0, -(-(start - end) // -step))


@op("Slice")
def slice_(ctx):
    x = ctx.shape(0)
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes, steps = ctx.attr("axes"), None
    else:
        starts, ends = ctx.ints(1), ctx.ints(2)
        axes = ctx.ints(3) if ctx.has_input(3) else None
        steps = ctx.ints(4) if ctx.has_input(4) else None
        if (ctx.has_input(3) and axes is None) or (ctx.has_input(4) and steps is None):
            starts = None
    if x is None:
        return [(None, ctx.type(0))]
    if starts is None or ends is None:
        return [([None] * len(x), ctx.type(0))]
    axes = list(axes) if axes else list(range(len(starts)))
    steps = list(steps) if steps else [1] * len(starts)
    out = list(x)
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = axis(a, len(x))
        out[a] = _slice_len(x[a], s, e, st)
    return [(out, ctx.type(0))]


def _scaled(x, scales):
    if len(scales) != len(x):
        raise ValueError(f"{len(scales)} scales for rank {len(x)}")
    out = []
    for d, s in zip(x, scales):
        if s == 1.0:
            out.append(d)
        elif is_int(d):
            out.append(int(math.floor(d * s + 1e-9)) if s != int(s) else d * int(s))
        else:
            out.append(None)
    return out


@op("Resize", "Upsample")
def resize(ctx):
    x = ctx.shape(0)
    if x is None:
        return [(None, ctx.type(0))]
    if ctx.op_type == "Upsample" and ctx.opset < 9:
        scales = ctx.attr("scales")
        return [(_scaled(x, scales), ctx.type(0))]
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        scales = ctx.floats(1)
        return [(None if scales is None else _scaled(x, scales), ctx.type(0))]
    axes = ctx.attr("axes")
    axes = [axis(a, len(x)) for a in axes] if axes else list(range(len(x)))
    sizes = ctx.ints(3) if ctx.has_input(3) else None
    scales = ctx.floats(2) if ctx.has_input(2) else None
    if sizes:
        policy = ctx.attr("keep_aspect_ratio_policy", b"stretch")
        policy = policy.decode() if isinstance(policy, bytes) else policy
        out = list(x)
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a] = s
            return [(out, ctx.type(0))]
        if any(not is_int(x[a]) for a in axes):
            return [([None] * len(x), ctx.type(0))]
        ratios = [s / x[a] for a, s in zip(axes, sizes)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        for a in axes:
            out[a] = int(math.floor(scale * x[a] + 0.5))
        return [(out, ctx.type(0))]
    if scales:
        full = [1.0] * len(x)
        for a, s in zip(axes, scales):
            full[a] = s
        return [(_scaled(x, full), ctx.type(0))]
    return [([None] * len(x), ctx.type(0))]


@op("Gather")
def gather(ctx):
    data, indices = ctx.shape(0), ctx.shape(1)
    if data is None or indices is None:
        return [(None, ctx.type(0))]
    k = axis(ctx.attr("axis", 0), len(data))
    return [(data[:k] + list(indices) + data[k + 1:], ctx.type(0))]


@op("GatherElements")
def gather_elements(ctx):
    return [(ctx.shape(1), ctx.type(0))]


@op("Shape")
def shape_op(ctx):
    x = ctx.shape(0)
    if x is None:
        return [([None], INT64)]
    start, end = ctx.attr("start", 0), ctx.attr("end", len(x))
    start = min(max(start + len(x) if start < 0 else start, 0), len(x))
    end = min(max(end + len(x) if end < 0 else end, 0), len(x))
    return [([max(end - start, 0)], INT64)]


@op("SequenceLength")
def sequence_length(ctx):
    return [([], INT64)]


@op("Size")
def size_op(ctx):
    return [([], INT64)]


@op("Constant")
def constant(ctx):
    value = ctx.attrs.get("__value__")
    if value is None:
        return [(None, None)]
    return [(list(value.shape), ctx.attrs.get("__type__"))]


@op("ConstantOfShape")
def constant_of_shape(ctx):
    value = ctx.value(0)
    tensor_type = ctx.attrs.get("__type__") or 1
    if value is None:
        length = ctx.shape(0)
        length = length[0] if length and is_int(length[0]) else None
        return [(None if length is None else [None] * length, tensor_type)]
    return [([d if is_known_dim(d) else None for d in value.reshape(-1).tolist()],
             tensor_type)]


@op("Expand")
def expand(ctx):
    x, target = ctx.shape(0), ctx.value(1)
    if target is None:
        length = ctx.shape(1)
        if x is None or not length or not is_int(length[0]):
            return [(None, ctx.type(0))]
        return [([None] * max(len(x), length[0]), ctx.type(0))]
    target = [d if is_known_dim(d) else None for d in target.reshape(-1).tolist()]
    return [(broadcast([x, target]), ctx.type(0))]


@op("Tile")
def tile(ctx):
    x, repeats = ctx.shape(0), ctx.ints(1)
    if x is None or repeats is None:
        return [(None if x is None else [None] * len(x), ctx.type(0))]
    return [([d * r if is_int(d) else (d if r == 1 else None) for d, r in zip(x, repeats)],
             ctx.type(0))]


@op("Range")
def range_op(ctx):
    start, limit, delta = ctx.floats(0), ctx.floats(1), ctx.floats(2)
    if start is None or limit is None or delta is None:
        return [([None], ctx.type(0))]
    return [([max(int(math.ceil((limit[0] - start[0]) / delta[0])), 0)], ctx.type(0))]


REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin")


@op(*REDUCE)
def reduce(ctx):
    x = ctx.shape(0)
    out_type = INT64 if ctx.op_type in ("ArgMax", "ArgMin") else ctx.type(0)
    if x is None:
        return [(None, out_type)]
    keep = ctx.attr("keepdims", 1)
    if ctx.op_type in ("ArgMax", "ArgMin"):
        axes = [ctx.attr("axis", 0)]
    elif ctx.has_input(1):
        axes = ctx.ints(1)
        if axes is None:
            return [(None, out_type)]
    else:
        axes = list(ctx.attr("axes") or [])
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return [(list(x), out_type)]
        axes = list(range(len(x)))
    axes = {axis(a, len(x)) for a in axes}
    if keep:
        return [([1 if i in axes else d for i, d in enumerate(x)], out_type)]
    return [([d for i, d in enumerate(x) if i not in axes], out_type)]


@op("Pad")
def pad(ctx):
    x = ctx.shape(0)
    pads = ctx.ints(1) if ctx.opset >= 11 else ctx.attr("pads")
    if x is None or pads is None:
        return [(None if x is None else [None] * len(x), ctx.type(0))]
    axes = ctx.ints(3) if ctx.has_input(3) else list(range(len(x)))
    out = list(x)
    for j, a in enumerate(axes):
        a = axis(a, len(x))
        extra = pads[j] + pads[j + len(axes)]
        out[a] = x[a] + extra if is_int(x[a]) else (x[a] if extra == 0 else None)
    return [(out, ctx.type(0))]


@op("TopK")
def topk(ctx):
    x, k = ctx.shape(0), ctx.ints(1) if ctx.opset >= 10 else [ctx.attr("k")]
    if x is None:
        return [(None, ctx.type(0)), (None, INT64)]
    a = axis(ctx.attr("axis", -1), len(x))
    out = list(x)
    out[a] = k[0] if k else None
    return [(out, ctx.type(0)), (out, INT64)]


@op("OneHot")
def one_hot(ctx):
    indices, depth = ctx.shape(0), ctx.ints(1)
    if indices is None:
        return [(None, ctx.type(2))]
    rank = len(indices) + 1
    a = axis(ctx.attr("axis", -1), rank)
    out = list(indices)
    out.insert(a, depth[0] if depth else None)
    return [(out, ctx.type(2))]


@op("DepthToSpace", "SpaceToDepth")
def depth_space(ctx):
    x = ctx.shape(0)
    b = ctx.attr("blocksize")
    if x is None or len(x) != 4:
        return [(None, ctx.type(0))]
    n, c, h, w = x
    if ctx.op_type == "DepthToSpace":
        out = [n, c // (b * b) if is_int(c) else None,
               h * b if is_int(h) else None, w * b if is_int(w) else None]
    else:
        out = [n, c * b * b if is_int(c) else None,
               h // b if is_int(h) else None, w // b if is_int(w) else None]
    return [(out, ctx.type(0))]


@op("Einsum")
def einsum(ctx):
    equation = ctx.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    shapes = [ctx.shape(i) for i in range(len(ctx.node.input))]
    if equation is None or "..." in equation or "->" not in equation \
            or any(s is None for s in shapes):
        return [(None, ctx.type(0))]
    lhs, rhs = equation.replace(" ", "").split("->")
    sizes: dict = {}
    for term, shape in zip(lhs.split(","), shapes):
        if len(term) != len(shape):
            raise ValueError(f"Einsum term {term} for rank {len(shape)}")
        for letter, d in zip(term, shape):
            if letter not in sizes or sizes[letter] in (1, None):
                sizes[letter] = d
    return [([sizes.get(letter) for letter in rhs], ctx.type(0))]
