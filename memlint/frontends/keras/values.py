"""Abstract values the Keras frontend computes with.

Plain Python values (int, float, str, bool, None, tuple, list, dict) stand for themselves.
Everything else the analysed code can produce is one of the classes below, or
:class:`~memlint.layers.base.Unknown` when it cannot be determined statically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from memlint.ir import Location, OptimizerSpec
from memlint.layers.base import LayerInstance, Unknown

__all__ = ["Ref", "Tensor", "Array", "LayerRef", "OpaqueLayer", "SequentialModel",
           "FunctionalModel", "Optimizer", "BoundMethod", "Policy", "Unknown", "is_unknown"]


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


@dataclass(frozen=True)
class Ref:
    """A module, class or function of a library, by canonical dotted name."""

    name: str

    def attr(self, attribute: str) -> "Ref":
        return Ref(f"{self.name}.{attribute}")


@dataclass
class Tensor:
    """A symbolic tensor of the functional API: its shape and the layer call that produced it."""

    shape: Optional[tuple]  # batch first; None when unknown
    producer: Optional[tuple] = None  # (LayerRef, call index, output index)
    reason: str = ""  # why the shape is unknown


@dataclass
class Array:
    """A NumPy array whose shape is known (``np.random.rand(1, 16, 16, 1)``)."""

    shape: tuple


@dataclass(eq=False)
class LayerRef:
    """A layer created in the analysed code, with everything the graph needs about it."""

    instance: LayerInstance
    type: str
    name: str
    location: Location
    input_hint: Optional[tuple] = None  # from input_shape= / batch_input_shape= / input_dim=
    calls: list = field(default_factory=list)  # list of (input shapes, output shapes, inbound)
    weights: Optional[list] = None  # set when first built
    error: Optional[str] = None  # LayerError message from building it


@dataclass(eq=False)
class OpaqueLayer:
    """A layer memlint cannot model (unregistered type or unresolved argument)."""

    type: str
    name: str
    location: Location
    reason: str
    input_hint: Optional[tuple] = None
    calls: list = field(default_factory=list)


@dataclass(eq=False)
class SequentialModel:
    """``Sequential`` under construction: its layers, name and any input shape given."""

    name: str
    location: Location
    layers: list = field(default_factory=list)  # LayerRef | OpaqueLayer | input marker tuples
    input_shape: Optional[tuple] = None  # batch first
    input_source: str = ""
    usage: dict = field(default_factory=dict)  # compile/fit/predict facts
    variable: Optional[str] = None


@dataclass(eq=False)
class FunctionalModel:
    """``Model(inputs, outputs)``."""

    name: str
    location: Location
    inputs: list
    outputs: list
    usage: dict = field(default_factory=dict)
    variable: Optional[str] = None


@dataclass
class Optimizer:
    """An optimizer object created in the code."""

    spec: OptimizerSpec


@dataclass
class Policy:
    """A mixed-precision policy object."""

    name: str


@dataclass
class BoundMethod:
    """``obj.method`` looked up on an abstract value, waiting to be called."""

    obj: Any
    method: str
