"""The layer calls a model used as a layer (or a layer class of the file) runs inside one of
its calls, as :class:`~memlint.ir.InnerCalls` for the memory model: a functional model's
graph, a Sequential's chain, or the calls a traced ``call()`` made.  None wherever the
inside is not known exactly enough to replace the outer call (the memory model then keeps
its coarser account of the call)."""

from __future__ import annotations

from typing import Callable, Optional

from memlint.frontends.keras.nested import sequential_input
from memlint.frontends.keras.order import functional_order
from memlint.frontends.keras.values import (FunctionalModel, ModelLayer, OpaqueLayer,
                                            SequentialModel, TensorOp)
from memlint.ir import InnerCalls, as_shape_list


def inner_calls(layer, record, node_of: Callable) -> Optional[InnerCalls]:
    """What ``record`` (one call of ``layer``) ran inside; ``node_of(layer, index)`` makes
    the LayerNode of one call."""
    if record.output_shape is None:
        return None
    if isinstance(layer, ModelLayer):
        model = layer.model
        if isinstance(model, FunctionalModel):
            return _functional(model, record, node_of)
        if isinstance(model, SequentialModel):
            return _sequential(model, record, node_of)
        return None
    return _traced(record, node_of)


def _same_but_batch(declared: list, given: list) -> bool:
    if len(declared) != len(given):
        return False
    for a, b in zip(declared, given):
        if a is None or b is None or len(a) != len(b) or list(a[1:]) != list(b[1:]):
            return False
    return True


def _one(layer, index: int, node_of: Callable, inbound: list):
    if isinstance(layer, (OpaqueLayer, TensorOp)) or index >= len(layer.calls):
        return None
    node = node_of(layer, index)
    if node.unresolved is not None or not node.output_shapes:
        return None
    node.inbound = [inbound]
    return node


def _parents(layer, index: int) -> list:
    return [(p[0].name, p[1], p[2]) for p in layer.calls[index].parents]


def _functional(model: FunctionalModel, record, node_of) -> Optional[InnerCalls]:
    declared = [t.shape for t in model.inputs]
    if not _same_but_batch(declared, as_shape_list(record.input_shapes)):
        return None  # called on other sizes than it was built on: not re-derived here
    inputs = {}
    for position, tensor in enumerate(model.inputs):
        if tensor.producer:
            inputs[(tensor.producer[0].name, tensor.producer[1])] = position
    nodes, ids = [], []
    for layer, indices in functional_order(model.inputs, model.outputs):
        if isinstance(layer, TensorOp) or layer.type == "InputLayer":
            continue
        for index in sorted(indices):
            node = _one(layer, index, node_of, _parents(layer, index))
            if node is None:
                return None
            nodes.append(node)
            ids.append(index)
    if any(not t.producer for t in model.outputs):
        return None
    outputs = [(t.producer[0].name, t.producer[1], t.producer[2]) for t in model.outputs]
    return InnerCalls(nodes, ids, inputs, outputs)


def _sequential(model: SequentialModel, record, node_of) -> Optional[InnerCalls]:
    declared, _ = sequential_input(model, None)
    if declared is None or not _same_but_batch([declared], as_shape_list(record.input_shapes)):
        return None
    nodes, ids, previous = [], [], []
    for layer in model.layers:
        if isinstance(layer, tuple):
            continue  # an input marker
        node = _one(layer, 0, node_of, previous)
        if node is None:
            return None
        nodes.append(node)
        ids.append(0)
        previous = [(node.name, 0, 0)]
    if not nodes:
        return None
    return InnerCalls(nodes, ids, {}, [previous[0]])


def _traced(record, node_of) -> Optional[InnerCalls]:
    """The calls a traced call() made; each output is the last call inside that made a
    tensor of its shape (None when an operation outside the layers made it)."""
    if not record.inner:
        return None
    nodes, ids = [], []
    for layer, index in record.inner:
        node = _one(layer, index, node_of, _parents(layer, index))
        if node is None:
            return None
        nodes.append(node)
        ids.append(index)
    outputs = []
    for shape in as_shape_list(record.output_shape):
        found = None
        for node, index in zip(reversed(nodes), reversed(ids)):
            made = as_shape_list(node.output_shapes[0])
            if shape in made:
                found = (node.name, index, made.index(shape))
                break
        if found is None:
            return None
        outputs.append(found)
    return InnerCalls(nodes, ids, {}, outputs)
