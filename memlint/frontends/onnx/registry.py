"""The table of memlint's own per-operator shape inference, and what each function is given.

An inference function takes a :class:`NodeContext` and returns one ``(shape, elem_type)`` per
output (``shape`` None where it cannot tell).  It raises ``ValueError`` when the inputs cannot
be valid for the operator.  Functions register with :func:`op`, like ONNX's own table of
inference functions.
"""

from __future__ import annotations

from dataclasses import field
from typing import Callable, Optional

from memlint.records import record

REGISTRY: dict = {}  # op_type -> function(NodeContext) -> list[(shape, elem_type)]


def op(*names: str) -> Callable:
    """Register the decorated function as the inference of the ONNX operators ``names``."""
    def wrap(fn):
        for name in names:
            REGISTRY[name] = fn
        return fn
    return wrap


@record
class NodeContext:
    """One node with what is known about its inputs."""

    node: object  # onnx NodeProto
    opset: int
    shapes: list  # per input: list of dims or None
    types: list  # per input: ONNX elem_type or None
    values: list  # per input: numpy array (constant or propagated) or None
    attrs: dict = field(default_factory=dict)

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def n_outputs(self) -> int:
        return len(self.node.output)

    def shape(self, index: int) -> Optional[list]:
        return self.shapes[index] if index < len(self.shapes) else None

    def type(self, index: int = 0) -> Optional[int]:
        return self.types[index] if index < len(self.types) else None

    def value(self, index: int):
        return self.values[index] if index < len(self.values) else None

    def has_input(self, index: int) -> bool:
        return index < len(self.node.input) and bool(self.node.input[index])

    def ints(self, index: int) -> Optional[list]:
        """A constant input as a list of Python ints (None when not constant)."""
        value = self.value(index)
        if value is None or value.dtype == object:
            return None
        return [int(v) for v in value.reshape(-1)]

    def floats(self, index: int) -> Optional[list]:
        value = self.value(index)
        if value is None or value.dtype == object:
            return None
        return [float(v) for v in value.reshape(-1)]

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def same(self, index: int = 0) -> list:
        """Every output with the shape and type of input ``index``."""
        return [(self.shape(index), self.type(index))] * self.n_outputs
