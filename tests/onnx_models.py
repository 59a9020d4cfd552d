"""Small ONNX models built with onnx.helper for the ONNX frontend's tests, and the oracle
helpers: onnxruntime's shapes for every tensor, and parameter counts from the initializers.

Each builder returns ``(model, shape_only)``: the ModelProto and the names of the
initializers that are shape arguments (not parameters), as the test author knows them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, F16, I64, I8, U8, BOOL = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64,
                             TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL)
RNG = np.random.default_rng(0)


def init(name, shape, dtype=np.float32, value=None):
    """An initializer with random (or the given) data."""
    if value is None:
        if np.issubdtype(dtype, np.floating):
            value = RNG.standard_normal(shape).astype(dtype)
        else:
            value = RNG.integers(0, 5, size=shape).astype(dtype)
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


def build(nodes, inputs, outputs, inits=(), opset=17, name="g", out_type=F):
    """A model: inputs are (name, elem_type, shape), outputs are names (or (name, type))."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(*(o if isinstance(o, tuple) else (o, out_type)), None)
         for o in outputs],
        initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def N(*rest):
    """An input shape with a symbolic batch 'N' first."""
    return ["N", *rest]


# ---------------------------------------------------------------------------- operators

def conv():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], group=2, dilations=[2, 2]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Conv", ["c3", "w4"], ["c4"], kernel_shape=[1, 3], pads=[0, 1, 0, 0]),
    ]
    inits = [init("w1", [8, 3, 3, 3]), init("b1", [8]), init("w2", [6, 4, 3, 3]),
             init("w3", [5, 6, 2, 2]), init("w4", [4, 5, 1, 3])]
    return build(nodes, [("x", F, N(3, 17, 16))], ["c4"], inits), set()


def conv1d_3d():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2]),
             helper.make_node("Conv", ["v", "w3"], ["z"], pads=[1, 1, 1, 1, 1, 1])]
    inits = [init("w", [4, 2, 3]), init("w3", [2, 1, 3, 3, 3])]
    return build(nodes, [("x", F, N(2, 11)), ("v", F, N(1, 5, 6, 7))], ["y", "z"], inits), set()


def conv_transpose():
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w1"], ["t1"], strides=[2, 2],
                         output_padding=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["t1", "w2", "b2"], ["t2"], group=2),
        helper.make_node("ConvTranspose", ["t2", "w3"], ["t3"], strides=[2, 2],
                         auto_pad="SAME_UPPER"),
    ]
    inits = [init("w1", [4, 6, 3, 3]), init("w2", [6, 2, 2, 2]), init("b2", [4]),
             init("w3", [4, 3, 3, 3])]
    return build(nodes, [("x", F, N(4, 5, 7))], ["t3"], inits), set()


def gemm_matmul():
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["g1"]),
        helper.make_node("Gemm", ["g1", "w2"], ["g2"], transB=1),
        helper.make_node("MatMul", ["s", "w3"], ["m1"]),
        helper.make_node("MatMul", ["m1", "v"], ["m2"]),
        helper.make_node("MatMul", ["u", "m2"], ["m3"]),
    ]
    inits = [init("w1", [10, 6]), init("b1", [6]), init("w2", [3, 6]), init("w3", [4, 5]),
             init("v", [5]), init("u", [2])]
    return build(nodes, [("x", F, N(10)), ("s", F, N(2, 7, 4))], ["g2", "m3"], inits), set()


def attention():
    """Self-attention: projections, head split, QK^T, softmax, weighted sum, merge."""
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("Reshape", ["q", "heads"], ["qh"]),
        helper.make_node("Reshape", ["k", "heads"], ["kh"]),
        helper.make_node("Reshape", ["v", "heads"], ["vh"]),
        helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "vt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge"], ["merged"]),
        helper.make_node("MatMul", ["merged", "wo"], ["y"]),
    ]
    inits = [init("wq", [16, 16]), init("wk", [16, 16]), init("wv", [16, 16]),
             init("wo", [16, 16]), floats("scale", 2.0), ints("heads", [0, 0, 4, 4]),
             ints("merge", [0, 0, 16])]
    return build(nodes, [("x", F, N(6, 16))], ["y"], inits), {"heads", "merge"}


def pooling():
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1),
        helper.make_node("AveragePool", ["p2"], ["p3"], kernel_shape=[2, 2],
                         auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("AveragePool", ["x"], ["a1"], kernel_shape=[3, 2], ceil_mode=1,
                         strides=[2, 3]),
        helper.make_node("GlobalAveragePool", ["p3"], ["g1"]),
        helper.make_node("GlobalMaxPool", ["a1"], ["g2"]),
        helper.make_node("MaxPool", ["x"], ["p4", "idx"], kernel_shape=[2, 2], dilations=[2, 2]),
    ]
    return build(nodes, [("x", F, N(3, 19, 20))], ["g1", "g2", "p4", ("idx", I64)]), set()


def reshape_flatten():
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["r1"]),
        helper.make_node("Reshape", ["r1", "s2"], ["r2"]),
        helper.make_node("Flatten", ["x"], ["f1"]),
        helper.make_node("Flatten", ["x"], ["f2"], axis=3),
        helper.make_node("Reshape", ["f1", "s3"], ["r3"]),
    ]
    inits = [ints("s1", [0, -1, 4]), ints("s2", [0, 3, 0, -1]), ints("s3", [-1, 5, 3])]
    return (build(nodes, [("x", F, N(3, 4, 5))], ["r2", "f2", "r3"], inits),
            {"s1", "s2", "s3"})


def concat_split():
    nodes = [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Split", ["c", "sizes"], ["s1", "s2", "s3"], axis=1),
        helper.make_node("Split", ["c"], ["e1", "e2"], axis=2),
        helper.make_node("Concat", ["s1", "s3"], ["d"], axis=-2),
        helper.make_node("Concat", ["e1", "e2", "e1"], ["f"], axis=-1),
    ]
    inits = [ints("sizes", [2, 3, 4])]
    return (build(nodes, [("a", F, N(4, 6)), ("b", F, N(5, 6))], ["s2", "f", "d"], inits,
                  opset=13), {"sizes"})


def split_num_outputs():
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)]
    return build(nodes, [("x", F, N(10, 2))], ["a", "b", "c"], opset=18), set()


def split_old():
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[3, 7])]
    return build(nodes, [("x", F, N(10))], ["a", "b"], opset=11), set()


def transpose_squeeze():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t1"], perm=[0, 3, 1, 2]),
        helper.make_node("Transpose", ["t1"], ["t2"]),
        helper.make_node("Unsqueeze", ["t1", "ax"], ["u1"]),
        helper.make_node("Squeeze", ["u1", "ax"], ["q1"]),
        helper.make_node("Squeeze", ["x", "ax2"], ["q2"]),
        helper.make_node("Unsqueeze", ["q2", "ax3"], ["u2"]),
    ]
    inits = [ints("ax", [1, -1]), ints("ax2", [2]), ints("ax3", [0, 3])]
    return (build(nodes, [("x", F, N(2, 1, 5))], ["t2", "q1", "u2"], inits, opset=13),
            {"ax", "ax2", "ax3"})


def squeeze_old():
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
             helper.make_node("Squeeze", ["u"], ["s"], axes=[0]),
             helper.make_node("Squeeze", ["s"], ["t"])]
    return build(nodes, [("x", F, [2, 1, 5])], ["t"], opset=11), set()


def slicing():
    nodes = [
        helper.make_node("Slice", ["x", "st", "en"], ["s1"]),
        helper.make_node("Slice", ["x", "st2", "en2", "ax2", "sp2"], ["s2"]),
        helper.make_node("Slice", ["x", "st3", "en3", "ax3"], ["s3"]),
    ]
    inits = [ints("st", [0, 1, 2]), ints("en", [9_223_372_036_854_775_807, -1, 100]),
             ints("st2", [-1, 0]), ints("en2", [-100, 10]), ints("ax2", [2, 3]),
             ints("sp2", [-2, 3]), ints("st3", [2]), ints("en3", [-2]), ints("ax3", [-1])]
    return (build(nodes, [("x", F, N(6, 7, 11))], ["s1", "s2", "s3"], inits),
            {t.name for t in inits})


def slice_old():
    nodes = [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 100], axes=[1, 2])]
    return build(nodes, [("x", F, N(5, 6))], ["y"], opset=9), set()


def resizing():
    nodes = [
        helper.make_node("Resize", ["x", "", "scales"], ["r1"], mode="nearest"),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["r2"], mode="linear"),
        helper.make_node("Resize", ["x", "", "scales2"], ["r3"], mode="nearest"),
    ]
    inits = [floats("scales", [1, 1, 2, 2]), ints("sizes", [2, 3, 7, 9]),
             floats("scales2", [1, 1, 0.5, 1.5])]
    return (build(nodes, [("x", F, [2, 3, 5, 6])], ["r1", "r2", "r3"], inits, opset=13),
            {"scales", "sizes", "scales2"})


def upsample():
    nodes = [helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")]
    inits = [floats("scales", [1, 1, 2, 3])]
    return build(nodes, [("x", F, N(2, 3, 4))], ["y"], inits, opset=9), {"scales"}


def elementwise():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a1"]),
        helper.make_node("Mul", ["a1", "m"], ["a2"]),
        helper.make_node("Sub", ["a2", "y"], ["a3"]),
        helper.make_node("Div", ["a3", "d"], ["a4"]),
        helper.make_node("Relu", ["a4"], ["a5"]),
        helper.make_node("Sigmoid", ["a5"], ["a6"]),
        helper.make_node("Tanh", ["a6"], ["a7"]),
        helper.make_node("Pow", ["a7", "two"], ["a8"]),
        helper.make_node("Greater", ["a8", "zero"], ["mask"]),
        helper.make_node("Where", ["mask", "a8", "y"], ["a9"]),
        helper.make_node("Max", ["a9", "a1", "m"], ["a10"]),
        helper.make_node("LeakyRelu", ["a10"], ["a11"], alpha=0.1),
        helper.make_node("Clip", ["a11", "lo", "hi"], ["a12"]),
        helper.make_node("Exp", ["a12"], ["a13"]),
        helper.make_node("Erf", ["a13"], ["a14"]),
    ]
    inits = [init("b", [5]), init("m", [3, 1, 5]), init("d", [1]), floats("two", 2.0),
             floats("zero", 0.0), floats("lo", -1.0), floats("hi", 1.0)]
    return build(nodes, [("x", F, N(3, 4, 5)), ("y", F, [4, 1])], ["a14"], inits), set()


def normalization():
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "bb", "mu", "var"], ["n1"]),
        helper.make_node("InstanceNormalization", ["n1", "g", "bb"], ["n2"]),
        helper.make_node("Reshape", ["n2", "flat"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "lg", "lb"], ["n3"], axis=-1),
        helper.make_node("LayerNormalization", ["r", "lg2", "lb2"], ["n4", "mean", "inv"],
                         axis=1),
        helper.make_node("Softmax", ["n3"], ["s1"], axis=1),
        helper.make_node("LogSoftmax", ["n4"], ["s2"]),
    ]
    inits = [init("g", [4]), init("bb", [4]), init("mu", [4]),
             init("var", [4], value=np.ones(4)), ints("flat", [0, 4, 30]), init("lg", [30]),
             init("lb", [30]), init("lg2", [4, 30]), init("lb2", [4, 30])]
    return (build(nodes, [("x", F, N(4, 5, 6))], ["s1", "s2", "mean", "inv"], inits),
            {"flat"})


def gather_embedding():
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("Gather", ["emb", "pick"], ["g2"], axis=1),
        helper.make_node("Gather", ["emb", "one"], ["g3"], axis=2),
    ]
    inits = [init("table", [50, 8]), ints("pick", [[0, 1], [2, 3], [4, 0]]), ints("one", 3)]
    return (build(nodes, [("ids", I64, N(5))], ["g2", "g3"], inits), {"pick", "one"})


def recurrent():
    nodes = [
        helper.make_node("LSTM", ["x", "lw", "lr", "lb"], ["y", "yh", "yc"], hidden_size=6),
        helper.make_node("GRU", ["x", "gw", "gr"], ["gy", "gh"], hidden_size=5,
                         direction="bidirectional"),
        helper.make_node("RNN", ["xb", "rw", "rr"], ["ry", "rh"], hidden_size=3),
    ]
    inits = [init("lw", [1, 24, 8]), init("lr", [1, 24, 6]), init("lb", [1, 48]),
             init("gw", [2, 15, 8]), init("gr", [2, 15, 5]), init("rw", [1, 3, 8]),
             init("rr", [1, 3, 3])]
    inputs = [("x", F, [7, "B", 8]), ("xb", F, N(4, 8))]
    return build(nodes, inputs, ["y", "yh", "yc", "gy", "gh", "ry", "rh"], inits), set()


def passthrough():
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d", "dm"]),
        helper.make_node("Cast", ["d"], ["c"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["c"], ["c2"], to=TensorProto.INT64),
    ]
    return (build(nodes, [("x", F, N(3, 2))], [("c2", I64), ("dm", BOOL)]), set())


def shape_chain():
    """PyTorch-style: the Reshape target computed from Shape at run time."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w", "b"], ["y"], transB=1),
        helper.make_node("Constant", [], ["cst"], value=numpy_helper.from_array(
            np.ones((1, 7), np.float32), "cst")),
        helper.make_node("Add", ["y", "cst"], ["z"]),
        helper.make_node("ConstantOfShape", ["zshape"], ["zeros"],
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
        helper.make_node("Add", ["z", "zeros"], ["out"]),
    ]
    inits = [ints("zero", 0), ints("axes0", [0]), ints("minus1", [-1]), init("w", [7, 60]),
             init("b", [7]), ints("zshape", [1, 7])]
    return (build(nodes, [("x", F, N(3, 4, 5))], ["out"], inits),
            {"zero", "axes0", "minus1", "zshape"})


def batch_heads():
    """PyTorch MultiheadAttention style: [batch * heads, seq, head_dim] from Shape and Mul."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["b"], axis=0),
        helper.make_node("Mul", ["b", "heads"], ["bh"]),
        helper.make_node("Unsqueeze", ["bh", "axes0"], ["bh1"]),
        helper.make_node("Concat", ["bh1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Transpose", ["split"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["split", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "split"], ["o"]),
        helper.make_node("Reshape", ["o", "back"], ["y"]),
    ]
    inits = [ints("zero", 0), ints("heads", 4), ints("axes0", [0]), ints("rest", [-1, 2]),
             ints("back", [-1, 6, 8])]
    return (build(nodes, [("x", F, N(6, 8))], ["y"], inits),
            {"zero", "heads", "axes0", "rest", "back"})


def misc_tensor_ops():
    """Expand, Tile, Range, reductions, ArgMax, Pad, TopK, OneHot, depth/space, Einsum,
    GatherElements, CumSum, Size, Shape with start/end."""
    nodes = [
        helper.make_node("Expand", ["x", "eshape"], ["e"]),
        helper.make_node("Tile", ["x", "reps"], ["t"]),
        helper.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
        helper.make_node("ReduceSum", ["e", "rax"], ["rs"], keepdims=0),
        helper.make_node("ReduceMean", ["t", "rmax"], ["rm"]),
        helper.make_node("ReduceMax", ["t"], ["rx"], keepdims=0),
        helper.make_node("ArgMax", ["t"], ["am"], axis=2, keepdims=0),
        helper.make_node("Pad", ["x", "pads"], ["p"]),
        helper.make_node("TopK", ["t", "k"], ["tv", "ti"], axis=-1),
        helper.make_node("OneHot", ["am", "depth", "onoff"], ["oh"], axis=1),
        helper.make_node("DepthToSpace", ["img", ], ["d2s"], blocksize=2),
        helper.make_node("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2),
        helper.make_node("Einsum", ["x", "ew"], ["ein"], equation="bij,jk->bik"),
        helper.make_node("GatherElements", ["t", "gidx"], ["ge"], axis=1),
        helper.make_node("CumSum", ["t", "cax"], ["cs"]),
        helper.make_node("Size", ["t"], ["sz"]),
        helper.make_node("Shape", ["t"], ["shp"], start=1, end=-1),
        helper.make_node("Where", ["wc", "x", "ew2"], ["wh"]),
        helper.make_node("ReduceL2", ["img", "rax2"], ["rl2"]),
    ]
    inits = [ints("eshape", [2, 1, 1, 1]), ints("reps", [1, 2, 3]), floats("r0", 1.0),
             floats("r1", 7.5), floats("r2", 2.0), ints("rax", [0, 2]),
             ints("pads", [0, 1, 0, 0, 2, 3]), ints("k", [2]), ints("depth", 5),
             floats("onoff", [0.0, 1.0]), init("ew", [3, 6]),
             ints("gidx", np.zeros((1, 2, 9), np.int64)), ints("cax", 1),
             numpy_helper.from_array(np.array([True, False, True]), "wc"), init("ew2", [3]),
             ints("rax2", [1]), ints("rmax", [1, -1])]
    shape_only = {"eshape", "reps", "r0", "r1", "r2", "rax", "pads", "k", "depth", "gidx",
                  "cax", "rax2", "rmax"}
    inputs = [("x", F, N(4, 3)), ("img", F, N(8, 3, 4))]
    outputs = ["e", "rg", "rs", "rm", "rx", ("am", I64), "p", "tv", ("ti", I64), "oh",
               "s2d", "ein", "ge", "cs", ("sz", I64), ("shp", I64), "wh", "rl2"]
    return build(nodes, inputs, outputs, inits, opset=18), shape_only


OPERATOR_MODELS = {
    "misc_tensor_ops": misc_tensor_ops,
    "batch_heads": batch_heads,
    "conv": conv, "conv1d_3d": conv1d_3d, "conv_transpose": conv_transpose,
    "gemm_matmul": gemm_matmul, "attention": attention, "pooling": pooling,
    "reshape_flatten": reshape_flatten, "concat_split": concat_split,
    "split_num_outputs": split_num_outputs, "split_old": split_old,
    "transpose_squeeze": transpose_squeeze, "squeeze_old": squeeze_old, "slicing": slicing,
    "slice_old": slice_old, "resizing": resizing, "upsample": upsample,
    "elementwise": elementwise, "normalization": normalization,
    "gather_embedding": gather_embedding, "recurrent": recurrent, "passthrough": passthrough,
    "shape_chain": shape_chain,
}
# symbols other than the batch that some models need bound
MODEL_DIMS = {"recurrent": {"B": 3}}


# ------------------------------------------------------------------------------ awkward

def dynamic_dims():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=[0, 2, 1]),
             helper.make_node("ReduceMean", ["t"], ["r"], axes=[2], keepdims=0)]
    return build(nodes, [("x", F, ["batch_size", "seq", 16])], ["r"], [init("w", [16, 4])],
                 opset=13), set()


def unnamed_batch():
    graph_input = helper.make_tensor_value_info("x", F, [None, 6])
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "u", [graph_input],
                              [helper.make_tensor_value_info("y", F, None)], [init("w", [6, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, set()


def if_subgraph(typed=True):
    """An If whose branches each hold an initializer; untyped: the branch outputs declare
    no shape (memlint must infer inside the branches)."""
    shape = ["N", 4] if typed else None
    then_graph = helper.make_graph(
        [helper.make_node("Add", ["x", "ta"], ["then_out"])], "then", [],
        [helper.make_tensor_value_info("then_out", F, shape)], [init("ta", [4])])
    else_graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "eb"], ["else_mul"]),
         helper.make_node("Relu", ["else_mul"], ["else_out"])], "else", [],
        [helper.make_tensor_value_info("else_out", F, shape)], [init("eb", [4])])
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                              else_branch=else_graph),
             helper.make_node("Gemm", ["y", "w"], ["z"])]
    model = build(nodes, [("x0", F, N(4)), ("cond", BOOL, [])], ["z"], [init("w", [4, 2])])
    return model, set()


def loop_subgraph():
    """A Loop whose body holds an initializer and a Constant: both are parameters."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Constant", [], ["bias"], value=numpy_helper.from_array(
             np.ones(4, np.float32))),
         helper.make_node("Add", ["acc_in", "bw"], ["acc_mid"]),
         helper.make_node("Add", ["acc_mid", "bias"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond_in", BOOL, []),
         helper.make_tensor_value_info("acc_in", F, None)],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("acc_out", F, None)], [init("bw", [4])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)]
    return (build(nodes, [("x", F, N(4))], ["y"], [ints("trips", 3)]), {"trips"})


def fp16_model():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"])]
    inits = [init("w", [8, 3, 3, 3], np.float16), init("b", [8], np.float16),
             init("fc", [8, 10], np.float16), init("fb", [10], np.float16)]
    return build(nodes, [("x", F16, N(3, 8, 8))], ["y"], inits, out_type=F16), set()


def int8_model():
    """Quantised weights: int8 storage, DequantizeLinear, MatMul; and MatMulInteger."""
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["q"]),
        helper.make_node("MatMulInteger", ["q", "w2", "yz", "w2z"], ["mi"]),
    ]
    inits = [init("wq", [16, 8], np.int8), numpy_helper.from_array(
        np.float32(0.05), "ws"), numpy_helper.from_array(np.int8(0), "wz"),
        numpy_helper.from_array(np.float32(0.1), "ys"),
        numpy_helper.from_array(np.uint8(128), "yz"), init("w2", [8, 4], np.uint8),
        numpy_helper.from_array(np.uint8(3), "w2z")]
    return (build(nodes, [("x", F, N(16))], [("mi", TensorProto.INT32)], inits, opset=13),
            set())


def qlinear_model():
    """QLinearConv, ConvInteger and QLinearMatMul on uint8 tensors."""
    scalar = numpy_helper.from_array
    nodes = [
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("ConvInteger", ["c", "w2", "yz", "w2z"], ["ci"]),
        helper.make_node("Reshape", ["c", "flat"], ["cf"]),
        helper.make_node("QLinearMatMul", ["cf", "ys", "yz", "m", "ws", "mz", "ys", "yz"],
                         ["mm"]),
    ]
    inits = [scalar(np.float32(0.1), "xs"), scalar(np.uint8(10), "xz"),
             init("w", [4, 2, 3, 3], np.uint8), scalar(np.float32(0.2), "ws"),
             scalar(np.uint8(1), "wz"), scalar(np.float32(0.3), "ys"),
             scalar(np.uint8(5), "yz"), init("w2", [3, 4, 2, 2], np.uint8),
             scalar(np.uint8(2), "w2z"), ints("flat", [0, 0, -1]),
             init("m", [16, 5], np.uint8), scalar(np.uint8(3), "mz")]
    outputs = [("ci", TensorProto.INT32), ("mm", U8)]
    return build(nodes, [("x", U8, N(2, 8, 8))], outputs, inits, opset=13), {"flat"}


OPERATOR_MODELS["qlinear"] = qlinear_model


# --------------------------------------------------------------------------------- oracles

def strip_value_info(model):
    """A copy without value_info and with untyped-shape outputs (memlint must infer them)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.value_info[:]
    for out in copy.graph.output:
        if out.type.tensor_type.HasField("shape"):
            out.type.tensor_type.ClearField("shape")
    return copy


def expected_params(model, shape_only=()) -> int:
    """Parameter count from the initializers themselves (subgraphs included), except the
    named shape arguments, plus Constant tensors and ConstantOfShape outputs of constant
    shape; numpy sizes of the decoded arrays."""
    total = 0

    def walk(graph):
        nonlocal total
        arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        for name, array in arrays.items():
            if name not in shape_only:
                total += array.size
        for node in graph.node:
            if node.op_type == "ConstantOfShape" and node.input[0] in arrays:
                total += int(np.prod(arrays[node.input[0]]))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                if attr.type == onnx.AttributeProto.TENSOR and node.op_type == "Constant":
                    total += numpy_helper.to_array(attr.t).size
    walk(model.graph)
    return total


def random_feeds(model, bind: dict) -> dict:
    """Random input arrays for the graph inputs, symbolic dims taken from ``bind``."""
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        shape = []
        for i, dim in enumerate(tensor.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(dim.dim_value)
            else:
                shape.append(bind[dim.dim_param if dim.dim_param else f"#{i}"])
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = RNG.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[value.name] = np.array(True) if not shape else RNG.random(shape) > 0.5
        else:
            feeds[value.name] = RNG.integers(0, 3, size=shape).astype(dtype)
    return feeds


def ort_shapes(model, feeds) -> dict:
    """Shape of every node output of the main graph as onnxruntime computes it."""
    import onnxruntime

    typed = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(typed.graph.value_info) + list(typed.graph.output)}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    existing = {o.name for o in copy.graph.output}
    names = [n for node in copy.graph.node for n in node.output if n]
    for name in names:
        if name not in existing:
            copy.graph.output.append(helper.make_tensor_value_info(name, types.get(name, F),
                                                                   None))
    session = onnxruntime.InferenceSession(copy.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    outs = [o.name for o in session.get_outputs()]
    results = session.run(outs, feeds)
    return {name: tuple(np.asarray(value).shape) for name, value in zip(outs, results)}
