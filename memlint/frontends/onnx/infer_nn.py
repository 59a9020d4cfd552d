"""memlint's own shape inference for the network operators: convolutions, matrix products,
pooling, normalisations, softmax and the recurrent layers (ONNX operator semantics)."""

from __future__ import annotations

from memlint.frontends.onnx.dims import INT32, broadcast, is_int
from memlint.frontends.onnx.registry import op


def _spatial_args(ctx, rank: int, kernel):
    strides = list(ctx.attr("strides") or [1] * rank)
    dilations = list(ctx.attr("dilations") or [1] * rank)
    pads = list(ctx.attr("pads") or [0] * (2 * rank))
    auto_pad = ctx.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ValueError("strides, dilations or pads do not match the kernel rank")
    return strides, dilations, pads, auto_pad


def _window_out(size, k, s, d, pad_total, auto_pad, ceil_mode=False, pad_head=0):
    if not is_int(size) or not is_int(k):
        return None
    effective = d * (k - 1) + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return -(-size // s)
    if auto_pad == "VALID":
        pad_total, pad_head = 0, 0
    span = size + pad_total - effective
    if span < 0:
        raise ValueError(f"window {effective} larger than the padded input {size + pad_total}")
    if ceil_mode:
        out = -(-span // s) + 1
        if (out - 1) * s >= size + pad_head:  # the last window would start in the padding
            out -= 1
        return out
    return span // s + 1


def _conv_like(ctx, x_index: int, w_index: int, out_type):
    x, w = ctx.shape(x_index), ctx.shape(w_index)
    if x is None:
        return [(None, out_type)]
    rank = len(x) - 2
    kernel = list(ctx.attr("kernel_shape") or (w[2:] if w is not None else [None] * rank))
    if len(kernel) != rank:
        raise ValueError(f"kernel of rank {len(kernel)} for an input of rank {len(x)}")
    strides, dilations, pads, auto_pad = _spatial_args(ctx, rank, kernel)
    group = ctx.attr("group", 1)
    if w is not None and is_int(x[1]) and is_int(w[1]) and x[1] != w[1] * group:
        raise ValueError(f"input has {x[1]} channels, weights expect {w[1] * group}")
    spatial = [_window_out(x[2 + i], kernel[i], strides[i], dilations[i],
                           pads[i] + pads[i + rank], auto_pad) for i in range(rank)]
    channels = w[0] if w is not None else None
    return [([x[0], channels] + spatial, out_type)]


@op("Conv")
def conv(ctx):
    return _conv_like(ctx, 0, 1, ctx.type(0))


@op("ConvInteger")
def conv_integer(ctx):
    return _conv_like(ctx, 0, 1, INT32)


@op("QLinearConv")
def qlinear_conv(ctx):
    return _conv_like(ctx, 0, 3, ctx.type(7) or ctx.type(0))


@op("ConvTranspose")
def conv_transpose(ctx):
    x, w = ctx.shape(0), ctx.shape(1)
    if x is None:
        return [(None, ctx.type(0))]
    rank = len(x) - 2
    kernel = list(ctx.attr("kernel_shape") or (w[2:] if w is not None else [None] * rank))
    strides, dilations, pads, auto_pad = _spatial_args(ctx, rank, kernel)
    group = ctx.attr("group", 1)
    channels = w[1] * group if w is not None and is_int(w[1]) else None
    output_shape = ctx.attr("output_shape")
    out_pad = list(ctx.attr("output_padding") or [0] * rank)
    if output_shape:
        spatial = list(output_shape)[-rank:]
    else:
        spatial = []
        for i in range(rank):
            size, k = x[2 + i], kernel[i]
            if not is_int(size):
                spatial.append(None)
            elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                spatial.append(size * strides[i])
            elif not is_int(k):
                spatial.append(None)
            else:
                pad = 0 if auto_pad == "VALID" else pads[i] + pads[i + rank]
                spatial.append(strides[i] * (size - 1) + out_pad[i]
                               + (k - 1) * dilations[i] + 1 - pad)
    return [([x[0], channels] + spatial, ctx.type(0))]


@op("Gemm")
def gemm(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is None or b is None:
        m = None if a is None else a[1 if ctx.attr("transA", 0) else 0]
        n = None if b is None else b[0 if ctx.attr("transB", 0) else 1]
        return [([m, n], ctx.type(0))]
    if len(a) != 2 or len(b) != 2:
        raise ValueError("Gemm needs 2-D inputs")
    m, k = (a[1], a[0]) if ctx.attr("transA", 0) else (a[0], a[1])
    k2, n = (b[1], b[0]) if ctx.attr("transB", 0) else (b[0], b[1])
    if is_int(k) and is_int(k2) and k != k2:
        raise ValueError(f"Gemm inner dimensions differ: {k} and {k2}")
    return [([m, n], ctx.type(0))]


def _matmul(a, b):
    if a is None or b is None:
        return None
    if not a or not b:
        raise ValueError("MatMul of a scalar")
    a1, b1 = len(a) == 1, len(b) == 1
    a = [1] + list(a) if a1 else list(a)
    b = list(b) + [1] if b1 else list(b)
    if is_int(a[-1]) and is_int(b[-2]) and a[-1] != b[-2]:
        raise ValueError(f"MatMul inner dimensions differ: {a[-1]} and {b[-2]}")
    batch = broadcast([a[:-2], b[:-2]])
    out = batch + ([] if a1 else [a[-2]]) + ([] if b1 else [b[-1]])
    return out


@op("MatMul")
def matmul(ctx):
    return [(_matmul(ctx.shape(0), ctx.shape(1)), ctx.type(0))]


@op("MatMulInteger")
def matmul_integer(ctx):
    return [(_matmul(ctx.shape(0), ctx.shape(1)), INT32)]


@op("QLinearMatMul")
def qlinear_matmul(ctx):
    return [(_matmul(ctx.shape(0), ctx.shape(3)), ctx.type(7) or ctx.type(0))]


@op("MaxPool", "AveragePool", "LpPool")
def pool(ctx):
    x = ctx.shape(0)
    if x is None:
        return [(None, ctx.type(0))] + [(None, 7)] * (ctx.n_outputs - 1)
    kernel = list(ctx.attr("kernel_shape") or [])
    rank = len(kernel)
    if rank != len(x) - 2:
        raise ValueError(f"pool kernel of rank {rank} for an input of rank {len(x)}")
    strides, dilations, pads, auto_pad = _spatial_args(ctx, rank, kernel)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    spatial = [_window_out(x[2 + i], kernel[i], strides[i], dilations[i],
                           pads[i] + pads[i + rank], auto_pad, ceil_mode, pads[i])
               for i in range(rank)]
    shape = list(x[:2]) + spatial
    return [(shape, ctx.type(0))] + [(shape, 7)] * (ctx.n_outputs - 1)


@op("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(ctx):
    x = ctx.shape(0)
    return [(None if x is None else list(x[:2]) + [1] * (len(x) - 2), ctx.type(0))]


@op("BatchNormalization")
def batch_norm(ctx):
    x = ctx.shape(0)
    channels = [x[1]] if x is not None and len(x) > 1 else None
    outs = [(x, ctx.type(0))]
    for index in range(1, ctx.n_outputs):
        outs.append((channels, ctx.type(3) or ctx.type(0)))
    return outs


@op("InstanceNormalization", "LpNormalization", "MeanVarianceNormalization", "LRN",
    "GroupNormalization", "RMSNormalization", "Softmax", "LogSoftmax", "Hardmax")
def same_shape(ctx):
    return [(ctx.shape(0), ctx.type(0))]


@op("LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization")
def layer_norm(ctx):
    x = ctx.shape(0)
    outs = [(x, ctx.type(0))]
    if ctx.n_outputs > 1:
        stats = None
        if x is not None:
            start = ctx.attr("axis", -1)
            start = start + len(x) if start < 0 else start
            stats = list(x[:start]) + [1] * (len(x) - start)
        outs += [(stats, ctx.attr("stash_type", 1))] * (ctx.n_outputs - 1)
    return outs


@op("LSTM", "GRU", "RNN")
def recurrent(ctx):
    x, w = ctx.shape(0), ctx.shape(1)
    hidden = ctx.attr("hidden_size")
    direction = ctx.attr("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    if w is not None and is_int(w[0]) and w[0] != dirs:
        raise ValueError(f"weights for {w[0]} directions, direction is {direction}")
    if hidden is None and w is not None and is_int(w[1]):
        hidden = w[1] // {"LSTM": 4, "GRU": 3, "RNN": 1}[ctx.op_type]
    layout = ctx.attr("layout", 0)
    if x is None or len(x) != 3:
        seq = batch = None
    else:
        seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    if layout:
        y, state = [batch, seq, dirs, hidden], [batch, dirs, hidden]
    else:
        y, state = [seq, dirs, batch, hidden], [dirs, batch, hidden]
    outs = [(y, ctx.type(0)), (state, ctx.type(0)), (state, ctx.type(0))]
    return outs[:ctx.n_outputs]

