"""The layer calls a model used as a layer (or a layer class of the file) runs inside one of
its calls, as :class:`~memlint.ir.InnerCalls` for the memory model: a functional model's
graph, a Sequential's chain, or the calls a traced ``call()`` made.  None wherever the
inside is not known exactly enough to replace the outer call (the memory model then keeps
its coarser account of the call)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from memlint.frontends.keras import operations
from memlint.frontends.keras.nested import inbound_shapes, rerun_functional, sequential_input
from memlint.frontends.keras.order import functional_order
from memlint.frontends.keras.values import (FunctionalModel, LayerRef, ModelLayer,
                                            OpaqueLayer, SequentialModel, TensorOp)
from memlint.ir import InnerCalls, as_shape_list
from memlint.layers.base import LayerError, UnresolvedArgument


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


def _parents(layer, index: int, names=None) -> list:
    names = names or (lambda op: op.name)
    return operations.refs(layer.calls[index].parents, names)


def _functional(model: FunctionalModel, record, node_of) -> Optional[InnerCalls]:
    declared = [t.shape for t in model.inputs]
    given = as_shape_list(record.input_shapes)
    computed, retraced = None, {}
    if not _same_but_batch(declared, given):
        # called on other sizes than it was built on (an encoder built on ``(None,)`` and
        # called on 12 and 20 tokens): each call inside is re-derived on this call's sizes
        # (a layer class's call() traced again on them: ``retraced``)
        try:
            computed = rerun_functional(model, given, retraced=retraced)
        except (LayerError, UnresolvedArgument):
            return None
    inputs = {}
    for position, tensor in enumerate(model.inputs):
        if tensor.producer:
            inputs[(tensor.producer[0].name, tensor.producer[1])] = position
    nodes, ids = [], []
    names = operations.OperationNames()
    for layer, indices in functional_order(model.inputs, model.outputs):
        if layer.type == "InputLayer":
            continue
        for index in sorted(indices):
            if isinstance(layer, TensorOp):  # an operation: a node of the memory model's
                op = operations.node(layer, index, names)
                if op is not None and computed is not None:
                    op = _resized(op, layer, index, computed)
                if op is not None:
                    nodes.append(op)
                    ids.append(index)
                continue
            again = retraced.get((id(layer), index))
            node = _one(layer, index if again is None else again, node_of,
                        _parents(layer, index, names))
            if node is not None and computed is not None and again is None:
                node = _resized(node, layer, index, computed)
            if node is None:
                return None
            nodes.append(node)
            ids.append(index)
    if any(not t.producer for t in model.outputs):
        return None
    outputs = [(names(t.producer[0]), t.producer[1], t.producer[2]) for t in model.outputs]
    return InnerCalls(nodes, ids, inputs, outputs, mapped=True)


def _resized(node, layer, index: int, computed: dict):
    """``node`` (one call of ``layer`` inside a functional model) on the sizes re-derived
    for the outer call; None when its inside would need re-deriving too (a model or a
    layer class of the file called on new sizes)."""
    record = layer.calls[index]
    ins, out = inbound_shapes(record, computed), computed.get((id(layer), index))
    if out is None:
        return None
    if ins == record.input_shapes and out == record.output_shape:
        return node
    if not isinstance(layer, (LayerRef, TensorOp)):
        return None
    if isinstance(layer, TensorOp) and isinstance(ins, list) and len(ins) == 1:
        ins = ins[0]  # one operand: a layer's single input, as operations.node gives it
    return replace(node, input_shapes=[ins], output_shapes=[out], inner_shapes=[])


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
    return InnerCalls(nodes, ids, {}, [previous[0]], mapped=True)


def _traced(record, node_of) -> Optional[InnerCalls]:
    """The calls a traced call() made, with the operations on tensors they read; each
    output is the last call inside that made a tensor of its shape (None when none did)."""
    if not record.inner:
        return None
    nodes, ids = [], []
    names = operations.OperationNames(layer.name for layer, _ in record.inner)
    collect = operations.OperationCollector(names)
    given = as_shape_list(record.input_shapes)
    inputs: dict = {}

    def wired(made, call_record):
        """A node reading both tensors made inside and the call's own inputs reads the
        input of each such operand's shape too (one of them only: all of them)."""
        free = call_record.free if made.inbound and made.inbound[0] else []
        for shape in free:
            k = given.index(shape) if shape in given else (0 if len(given) == 1 else None)
            if k is not None:
                inputs[(f"<input {k}>", 0)] = k
                made.inbound[0].append((f"<input {k}>", 0, 0))
        return made

    for layer, index in record.inner:
        if index < len(layer.calls):  # the operations it reads run before it
            for op, call, op_record in collect.before(layer.calls[index].parents):
                nodes.append(wired(op, op_record))
                ids.append(call)
        node = _one(layer, index, node_of, _parents(layer, index, names))
        if node is None:
            return None
        nodes.append(wired(node, layer.calls[index]))
        ids.append(index)
    returned = record.returned_by
    for op, call, op_record in collect.before([p for p in returned if p]):
        nodes.append(wired(op, op_record))  # operations after the last layer (x * gate)
        ids.append(call)
    made = {(node.name, index) for node, index in zip(nodes, ids)}
    if returned and all(p and (names(p[0]), p[1]) in made for p in returned):
        return InnerCalls(nodes, ids, inputs, [(names(p[0]), p[1], p[2]) for p in returned])
    outputs = []
    for shape in as_shape_list(record.output_shape):
        found = None
        for node, index in zip(reversed(nodes), reversed(ids)):
            if not node.output_shapes:
                continue
            made = as_shape_list(node.output_shapes[0])
            if shape in made:
                found = (node.name, index, made.index(shape))
                break
        if found is None:
            return None
        outputs.append(found)
    return InnerCalls(nodes, ids, inputs, outputs)
