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

from memlint.frontends.keras.values import TensorOp
from memlint.frontends.keras.names import to_snake_case
from memlint.ir import LayerNode

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
    ins = record.input_shapes
    if isinstance(ins, list) and len(ins) == 1:
        ins = ins[0]  # one operand: a layer's single input
    return LayerNode(name=names(op), type=op.type, location=op.location, config=dict(config),
                     input_shapes=[ins],
                     output_shapes=[out], inbound=[refs(record.parents, names)], kind=kind)
