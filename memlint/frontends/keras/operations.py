"""Operations on symbolic tensors (``x + y``, ``keras.ops.relu(x)``) as nodes for the memory
model.

Keras does not list them in ``model.layers`` (the tables never show them), but a gradient
flows through them: a walk that stopped at an operation would skip the backward pass of every
layer before it.  Each operation call becomes a :class:`~memlint.ir.LayerNode` with no
weights whose ``kind`` names the registry layer that keeps what the operation keeps for its
backward (``Add`` passes its gradient on, ``keras.ops.relu`` keeps what a ReLU keeps, a
matrix product keeps its operands).  Operations traced inside a ``call()`` take no name in
Keras; they are named here from their class, unique within the graph.
"""

from __future__ import annotations

from typing import Callable, Optional

from memlint.frontends.keras import tensor_ops
from memlint.frontends.keras.values import TensorOp
from memlint.frontends.keras.names import to_snake_case
from memlint.ir import LayerNode
from memlint.layers.base import ACTIVATION_PRODUCTS, activation_need

# Keras op class -> (registry layer the memory model treats it as, its config)
_ACTIVATIONS = ("relu", "relu6", "leaky_relu", "sigmoid", "tanh", "softmax", "log_softmax",
                "gelu", "silu", "elu", "selu", "softplus", "softsign", "hard_sigmoid",
                "hard_silu", "log_sigmoid", "exp")
KINDS = {
    "Add": ("Add", {}), "Subtract": ("Subtract", {}), "Multiply": ("Multiply", {}),
    "Maximum": ("Maximum", {}), "Minimum": ("Minimum", {}),
    "Concatenate": ("Concatenate", {"axis": -1}), "Stack": ("Concatenate", {"axis": -1}),
    "Reshape": ("Reshape", {}), "ExpandDims": ("Reshape", {}), "Squeeze": ("Reshape", {}),
    "Matmul": ("Dot", {"axes": -1}), "Einsum": ("Dot", {"axes": -1}),
    "ReLu": ("Activation", {"activation": "relu"}),
    **{"".join(p.capitalize() for p in name.split("_")): ("Activation", {"activation": name})
       for name in _ACTIVATIONS},
}
KINDS["Exp"] = ("Activation", {"activation": "exponential"})
# no registry layer: walked under its own name, which the memory model knows (a slice)
KINDS["GetItem"] = ("GetItem", {})


class OperationNames:
    """The names of a graph's operations: Keras's own, else (an operation traced inside a
    call(), which takes no name) one made from its class, unique among ``taken``."""

    def __init__(self, taken=()):
        self.taken = set(taken)
        self.names: dict = {}

    def __call__(self, op) -> str:
        if not isinstance(op, TensorOp):
            return op.name
        name = self.names.get(id(op))
        if name is None:
            name = op.name
            if not name or name in self.taken:
                stem, k = to_snake_case(op.type), 0
                name = stem
                while name in self.taken:
                    k += 1
                    name = f"{stem}_{k}"
            self.taken.add(name)
            self.names[id(op)] = name
        return name


def refs(parents: list, names: Callable) -> list:
    """``(name, call, output)`` references of a call's parents."""
    return [(names(p[0]), p[1], p[2]) for p in parents]


class OperationCollector:
    """Collects, across calls, the operation calls the given parents read (directly or
    through other operations), each once, as nodes in an order where each comes after the
    operations it reads.  ``shape_of(op, call)`` may give an operation's output shape (a
    model sized by its data)."""

    def __init__(self, names: OperationNames, shape_of: Optional[Callable] = None):
        self.names, self.shape_of = names, shape_of
        self.found: set = set()

    def before(self, parents: list) -> list:
        """(node, call, call record) of the operations ``parents`` read that were not
        collected yet."""
        order: list = []

        def visit(op, call: int) -> None:
            key = (id(op), call)
            if key in self.found or call >= len(op.calls):
                return
            self.found.add(key)
            for parent in op.calls[call].parents:
                if isinstance(parent[0], TensorOp):
                    visit(parent[0], parent[1])
            order.append((op, call))

        for parent in parents:
            if isinstance(parent[0], TensorOp):
                visit(parent[0], parent[1])
        made = [(node(op, call, self.names, self.shape_of), call, op.calls[call])
                for op, call in order]
        return [item for item in made if item[0] is not None]


def node(op: TensorOp, call: int, names: Callable, shape_of: Optional[Callable] = None
         ) -> Optional[LayerNode]:
    """One operation call as a weightless node (one call); None when its output shape is
    unknown (the memory model then sizes what reads it from the reader's input)."""
    record = op.calls[call]
    out = shape_of(op, call) if shape_of is not None else record.output_shape
    if out is None:
        return None
    kind, config = KINDS.get(op.type, ("", {}))
    if not kind:  # no registry layer: what it computes, as a traced Lambda's (element-wise,
        # or only moving elements: a transpose, a split)
        work = tensor_ops.work_of(op.type, record.input_shapes if isinstance(
            record.input_shapes, list) else [record.input_shapes], record.output_shape)
        config = {**config, **({"work": work} if work else {})}
    ins = record.input_shapes
    if isinstance(ins, list) and len(ins) == 1:
        ins = ins[0]  # one operand: a layer's single input
    return LayerNode(name=names(op), type=op.type, location=op.location, config=dict(config),
                     input_shapes=[ins],
                     output_shapes=[out], inbound=[refs(record.parents, names)], kind=kind,
                     call_batches=[record.batches] if record.batches != 1 else [])


# What an operation's backward reads of its forward, beside the kinds above (the gradient of
# a transpose, a slice or a sum is the output gradient moved about).  Activations read what
# the registry's ACTIVATION_NEEDS says, softmax its input as well: Keras's softmax on JAX is
# exp(x - max) / sum, whose backward XLA recomputes from the input (H100 plan of a traced
# self-attention: the scaled scores and the probabilities both kept).
_READS_NOTHING = frozenset((
    "Add", "Subtract", "Negative", "Reshape", "ExpandDims", "Squeeze", "Transpose",
    "Concatenate", "Stack", "Split", "GetItem", "Pad", "Tile", "Repeat", "Flip", "Sum",
    "Mean", "Cast", "StopGradient", "ZerosLike", "OnesLike", "Cumsum", "DepthToSpace",
    "SpaceToDepth", "ConcatenateBatches", "Identity", "Conjugate", "Deg2rad", "Rad2deg",
    # no gradient at all
    "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd",
    "LogicalOr", "LogicalXor", "LogicalNot", "Isnan", "Isinf", "Isfinite", "Signbit", "Trunc",
    "Any", "All", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitwiseInvert",
    "FloorDivide", "Heaviside"))
_READS_INPUT = frozenset((
    "Log", "Square", "Erf", "Absolute", "Sin", "Cos", "Clip", "Normalize", "Max", "Min",
    "Prod", "Std", "Var", "Logsumexp", "Arccos", "Arcsin", "Arctan", "Arccosh", "Arcsinh",
    "Arctanh", "Asin", "Acos", "Atan", "Tan", "Sinh", "Cosh", "Log1p", "Log2", "Log10", "Erfc",
    "Sinc", "Fabs", "NanToNum", "Celu", "HardTanh", "HardShrink", "SoftShrink", "TanhShrink",
    "Squareplus", "SparsePlus", "SparseSigmoid", "Threshold", "Amax", "Amin", "Median",
    "Cumprod"))
_READS_ALL = frozenset(("Multiply", "Maximum", "Minimum", "Matmul", "Einsum"))


def backward_reads(op_type: str, is_tensor: list) -> tuple:
    """(the indices of the operands whose values the operation's backward reads, whether it
    reads the operation's output, how many more buffers of the output's size it keeps);
    ``is_tensor`` says, for each argument in order, whether it is a tensor: a Python number
    is a constant (``x / 8`` or ``2 * x`` reads nothing)."""
    tensors = [i for i, value in enumerate(is_tensor) if value]
    kind, config = KINDS.get(op_type, ("", {}))
    if kind == "Activation":
        name = config["activation"]
        if name in ("softmax", "log_softmax"):
            return tensors[:1], True, 0
        if activation_need(name) == "input":
            return tensors[:1], False, ACTIVATION_PRODUCTS.get(name, 0)
        return [], True, 0  # its output (or a ReLU's sign)
    if op_type in _READS_NOTHING:
        return [], False, 0
    if op_type in _READS_INPUT:
        return tensors[:1], False, 0
    if op_type in _READS_ALL:  # each operand's gradient needs the others
        return (tensors if len(tensors) > 1 else []), False, 0
    if op_type in ("Divide", "TrueDivide", "DivideNoNan"):  # x / y: y for both gradients, x for y's
        return (tensors if len(is_tensor) > 1 and is_tensor[1] else []), False, 0
    return [], True, 0
