"""Which tensors of an ONNX model are parameters, and which node owns each.

Parameters are the initializers (also those an older exporter lists as graph inputs), the
outputs of ``Constant`` nodes and of ``ConstantOfShape`` nodes with a constant shape, in the
main graph and in every subgraph (If branches, Loop and Scan bodies).  A tensor is *not* a
parameter when it is shape-only: every consumer reads it as a shape, axes, index or size
argument (Reshape's target, Slice's starts, Resize's scales, ...), directly or through
small shape arithmetic (Concat, Gather, Cast, Transpose, ...); constants that only decide a
Loop or If condition through boolean and comparison operators are shape-only the same way.
A shared parameter belongs to its first consumer in execution order; a subgraph's parameters
belong to the node that holds it.
"""

from __future__ import annotations

from dataclasses import field

from memlint.frontends.onnx.dims import FLOAT_TYPES, itemsize
from memlint.frontends.onnx.graphutil import node_reads, subgraphs, topological
from memlint.frontends.onnx.values import constant_attr, tensor_value
from memlint.ir import Weight
from memlint.records import record

_REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# op_type -> input positions read as shapes, axes, sizes, indices or flags (not data)
SHAPE_INPUTS = {
    "Reshape": {1}, "Slice": {1, 2, 3, 4}, "Resize": {1, 2, 3}, "Upsample": {1},
    "Unsqueeze": {1}, "Squeeze": {1}, "Expand": {1}, "Tile": {1}, "ConstantOfShape": {0},
    "Pad": {1, 3}, "TopK": {1}, "Split": {1}, "OneHot": {1}, "Range": {0, 1, 2},
    "Gather": {1}, "GatherElements": {1}, "GatherND": {1}, "ScatterND": {1},
    "ScatterElements": {1}, "CumSum": {1}, "Shape": {0}, "Size": {0}, "Trilu": {1},
    "Dropout": {1, 2}, "LSTM": {4}, "GRU": {4}, "RNN": {4}, "Loop": {0, 1}, "If": {0},
    "NonMaxSuppression": {2, 3, 4}, "ReverseSequence": {1}, "CenterCropPad": {1},
    "Compress": {1}, "RoiAlign": {2},
    **{name: {1} for name in _REDUCE},
}
# ops whose output is shape-only when their inputs are shape arithmetic
PASS_THROUGH = frozenset({
    "Concat", "Gather", "Cast", "Unsqueeze", "Squeeze", "Slice", "Mul", "Add", "Sub", "Div",
    "Equal", "Where", "Identity", "Max", "Min", "Neg", "Abs", "Reshape", "Floor", "Ceil",
    "Sqrt", "Mod", "Range", "Less", "Greater", "Not", "Flatten", "ReduceProd", "Expand",
    "Transpose", "ReduceSum", "And", "Or", "Xor", "LessOrEqual", "GreaterOrEqual",
})


@record
class Parameters:
    """The parameters of the main graph, grouped by owning node."""

    owned: dict = field(default_factory=dict)  # id(NodeProto) -> list[Weight]
    tensors: set = field(default_factory=set)  # names of main-graph tensors that are weights
    shape_only: set = field(default_factory=set)  # names of constants read only as shapes
    unused: list = field(default_factory=list)  # initializers nothing reads


def _weight(name: str, dims, elem_type) -> Weight:
    return Weight(name, tuple(int(d) for d in dims), trainable=elem_type in FLOAT_TYPES,
                  itemsize=itemsize(elem_type))


def _shape_only(graph, order, graph_outputs: set) -> set:
    """Names in ``graph`` read only as shapes (decided consumers first)."""
    consumers: dict = {}
    for node in order:
        for index, name in enumerate(node.input):
            if name:
                consumers.setdefault(name, []).append((node, index))
        for name in node_reads(node)[len([n for n in node.input if n]):]:
            consumers.setdefault(name, []).append((node, -1))  # read inside a subgraph
    result: set = set()
    node_shape_only: dict = {}

    def decide(name: str) -> bool:
        uses = consumers.get(name)
        if not uses or name in graph_outputs:
            return False
        for node, index in uses:
            if index in SHAPE_INPUTS.get(node.op_type, ()):
                continue
            if index >= 0 and node.op_type in PASS_THROUGH and node_shape_only.get(id(node)):
                continue
            return False
        return True

    for node in reversed(order):
        outs = [n for n in node.output if n]
        flags = [decide(n) for n in outs]
        node_shape_only[id(node)] = bool(outs) and all(flags)
        result.update(n for n, flag in zip(outs, flags) if flag)
    for tensor in graph.initializer:
        if decide(tensor.name):
            result.add(tensor.name)
    return result, consumers


def _graph_weights(graph, order, values: dict) -> tuple:
    """(weights by owning node id, weight tensor names, shape-only names, unused names) for
    one graph, not descending into subgraphs."""
    outputs = {v.name for v in graph.output}
    shape_only, consumers = _shape_only(graph, order, outputs)
    position = {id(n): i for i, n in enumerate(order)}
    owned: dict = {}
    names: set = set()
    unused: list = []

    def give(name: str, weight: Weight, producer=None) -> None:
        uses = [n for n, _ in consumers.get(name, []) if n is not producer]
        if not uses:
            if name in outputs and producer is not None:
                owned.setdefault(id(producer), []).append(weight)
                names.add(name)
            else:
                unused.append(name)
            return
        first = min(uses, key=lambda n: position[id(n)])
        owned.setdefault(id(first), []).append(weight)
        names.add(name)

    for tensor in graph.initializer:
        if tensor.name in shape_only or tensor.data_type in (0, 8):
            continue
        give(tensor.name, _weight(tensor.name, tensor.dims, tensor.data_type))
    for sparse in graph.sparse_initializer:
        values_tensor = sparse.values
        if values_tensor.name not in shape_only:
            give(values_tensor.name,
                 _weight(values_tensor.name, values_tensor.dims, values_tensor.data_type))
    for node in order:
        if node.domain not in ("", "ai.onnx") or not node.output or not node.output[0]:
            continue
        name = node.output[0]
        if name in shape_only:
            continue
        if node.op_type == "Constant":
            _, elem, dims = constant_attr(node)
            if dims is not None and elem not in (None, 8):
                give(name, _weight(name, dims, elem))
        elif node.op_type == "ConstantOfShape" and node.input:
            shape = values.get(node.input[0])
            if shape is None or shape.dtype == object:
                continue  # its shape is computed at run time: an activation
            elem = 1
            for attr in node.attribute:
                if attr.name == "value":
                    elem = attr.t.data_type
            give(name, _weight(name, [int(d) for d in shape.reshape(-1)], elem))
    return owned, names, shape_only, unused


def _subgraph_weights(graph) -> list:
    """Every parameter inside ``graph`` and its nested subgraphs."""
    order, rest = topological(graph)
    order = order + rest
    values = {t.name: v for t in graph.initializer
              if (v := tensor_value(t)) is not None}
    owned, _, _, unused = _graph_weights(graph, order, values)
    found = [w for weights in owned.values() for w in weights]
    by_name = {t.name: t for t in graph.initializer}
    for name in unused:  # a subgraph's initializer may feed an outer node's output only
        tensor = by_name.get(name)
        if tensor is not None:
            found.append(_weight(name, tensor.dims, tensor.data_type))
    for node in order:
        for sub in subgraphs(node):
            found.extend(_subgraph_weights(sub))
    return found


def collect_parameters(model, order, values: dict) -> Parameters:
    """The parameters of ``model``: ``order`` is the main graph's execution order and
    ``values`` the constant values known for its tensors (for ConstantOfShape)."""
    graph = model.graph
    owned, names, shape_only, unused = _graph_weights(graph, order, values)
    for node in order:
        inner = []
        for sub in subgraphs(node):
            inner.extend(_subgraph_weights(sub))
        if inner:
            owned.setdefault(id(node), []).extend(inner)
    return Parameters(owned=owned, tensors=names, shape_only=shape_only, unused=unused)
