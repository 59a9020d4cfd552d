"""Turning Sequential and functional models into :class:`~memlint.ir.ModelGraph` objects in
Keras's layer order."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Optional

from memlint.frontends.keras import classes, layer_subclasses, operations
from memlint.frontends.keras.held import only_mapped
from memlint.frontends.keras.inner import inner_calls
from memlint.frontends.keras.models import apply
from memlint.frontends.keras.nested import (inbound_shapes, layer_weights, model_weights,
                                            nested_activation_shapes, rerun_functional,
                                            sequential_input, sequential_step)
from memlint.frontends.keras.order import functional_order
from memlint.frontends.keras.values import (INPUT_SHAPE_UNKNOWN, FunctionalModel, LayerRef,
                                            ModelLayer, OpaqueLayer, SequentialModel, Tensor,
                                            TensorOp)
from memlint.ir import LayerNode, ModelGraph, ModelNode
from memlint.layers.base import LayerError, UnresolvedArgument, format_shape


def to_graph(state, model, input_override: Optional[tuple] = None) -> ModelGraph:
    """The :class:`ModelGraph` of a Sequential or functional model."""
    if isinstance(model, SequentialModel):
        return _sequential_graph(state, model, input_override)
    if isinstance(model, classes.ClassObject):
        return classes.model_graph(state, model, input_override)
    return _functional_graph(state, model)


def _sequential_graph(state, model: SequentialModel, input_override) -> ModelGraph:
    shape, source = sequential_input(model, input_override)
    graph = ModelGraph(name=model.name, location=model.location, kind="Sequential",
                       variable=model.variable)
    if shape is None and not only_mapped(model) and not (
            model.has_input_layer and model.input_source) and not (
            model.as_layer is not None and not model.usage):
        # (one only a tf.data map() runs has no GPU step to size: held.mark_parts; an
        # Input of a shape not known has a note of its own; one only another model runs,
        # as a layer, is sized by that call: its part there)
        state.note_unresolved(model.location, f"Sequential '{model.name}' input shape",
                              "no input_shape, Input or build() found; pass --input-shape")
    if shape is None:
        tensor: Any = Tensor(None, reason=INPUT_SHAPE_UNKNOWN)
    else:
        graph.input_shapes = [tuple(shape)]
        tensor = Tensor(tuple(shape), None)
    calls = []
    for layer in model.layers:
        if isinstance(layer, LayerRef) and layer.trace is not None:
            layer.trace(tensor)  # a Lambda's function: Keras runs it when it builds the model
        tensor = apply(state, layer, tensor, layer.location)
        calls.append((layer, len(layer.calls) - 1))
    graph.layers = [_node(layer, [index]) for layer, index in calls]
    _fill_inbound(graph, calls)
    return graph


def _functional_graph(state, model: FunctionalModel) -> ModelGraph:
    # operations on tensors (x + y) take part in the order but are not layers of the model
    everything = functional_order(model.inputs, model.outputs)
    order = [(layer, indices) for layer, indices in everything
             if not isinstance(layer, TensorOp)]
    graph = ModelGraph(name=model.name, location=model.location, kind="Functional",
                       variable=model.variable)
    graph.input_shapes = [t.shape for t in model.inputs if t.shape is not None]
    graph.layers = [_node(layer, sorted(indices)) for layer, indices in order]
    pairs = [(layer, index) for layer, indices in order for index in sorted(indices)]
    _fill_inbound(graph, pairs)
    graph.operations = _operations(everything, graph)
    graph.outputs = _output_keys(model.outputs, order)
    return graph


def _output_keys(outputs: list, order: list) -> tuple:
    """``ModelGraph.outputs``: each output's (layer name, call in the model, output index),
    or none where an output is not a layer's (an operation's, ``x + y``)."""
    calls = {id(layer): sorted(indices) for layer, indices in order}
    keys = []
    for tensor in outputs:
        producer = tensor.producer if isinstance(tensor, Tensor) else None
        if not producer or producer[1] not in calls.get(id(producer[0]), ()):
            return ()
        keys.append((producer[0].name, calls[id(producer[0])].index(producer[1]), producer[2]))
    return tuple(keys)


def _operations(everything: list, graph: ModelGraph, shape_of=None) -> list:
    """The operation calls of a functional model, as nodes for the memory model."""
    names = operations.OperationNames(layer.name for layer in graph.layers)
    nodes = [operations.node(op, index, names, shape_of) for op, indices in everything
             if isinstance(op, TensorOp) for index in sorted(indices)]
    return [node for node in nodes if node is not None]


def _node(layer, call_indices: list) -> LayerNode:
    records = [layer.calls[i] for i in call_indices]
    if isinstance(layer, OpaqueLayer):
        return LayerNode(name=layer.name, type=layer.type, location=layer.location,
                         input_shapes=[r.input_shapes for r in records],
                         output_shapes=[None for _ in records], unresolved=layer.reason)
    unresolved = None
    if any(r.output_shape is None for r in records):
        unresolved = layer.error or "input shape unknown"
    inner, own = [], None
    if isinstance(layer, classes.ClassLayer):
        config, weights = {"class": layer.type}, classes.class_weights(layer.obj)
        for call_record in records:
            inner += call_record.saved
    elif isinstance(layer, ModelLayer):
        config, weights = {"model": layer.model.name}, model_weights(layer.model)
        own = own_output(layer.model) if unresolved is None else None
        if unresolved is None:
            for call_record in records:
                try:
                    inner += nested_activation_shapes(layer.model, call_record.input_shapes)
                except (LayerError, UnresolvedArgument):
                    pass  # the call itself already reported why
    else:
        config, weights = dict(layer.instance.config), layer_weights(layer)
        for call_record in records:
            inner += call_record.saved
    node = LayerNode if own is None else partial(ModelNode, own_output=own)
    shown, kind = layer_subclasses.node_type(layer)
    made = node(name=layer.name, type=shown, location=layer.location,
                config=config, weights=weights, inner_shapes=inner,
                input_shapes=[r.input_shapes for r in records],
                output_shapes=[r.output_shape for r in records if r.output_shape is not None]
                if unresolved is None else [], unresolved=unresolved, kind=kind,
                call_batches=call_batches(records))
    if unresolved is None and isinstance(layer, (classes.ClassLayer, ModelLayer)):
        made.inner_calls = [inner_calls(layer, r, lambda sub, i: _node(sub, [i]))
                            for r in records]
    return made


def call_batches(records: list) -> list:
    """``LayerNode.call_batches`` of these calls: empty when each holds one batch."""
    counts = [getattr(r, "batches", 1) for r in records]
    return counts if any(c != 1 for c in counts) else []


def own_output(model) -> Any:
    """What Keras reports as a functional model's output: its outputs on its own inputs."""
    if not isinstance(model, FunctionalModel):
        return None
    outs = [t.shape for t in model.outputs]
    if any(shape is None for shape in outs):
        return None
    return outs if len(outs) > 1 else outs[0]


def _fill_inbound(graph: ModelGraph, pairs: list) -> None:
    by_layer = {id(layer): node for (layer, _), node in zip(_unique(pairs), graph.layers)}
    for layer, index in pairs:
        node = by_layer[id(layer)]
        record = layer.calls[index]
        node.inbound.append([(p[0].name, p[1], p[2]) for p in record.parents])


def _unique(pairs: list) -> list:
    seen, out = set(), []
    for layer, index in pairs:
        if id(layer) not in seen:
            seen.add(id(layer))
            out.append((layer, index))
    return out



def sized_graph(model, graph: ModelGraph, data_shapes: Optional[list]) -> Optional[ModelGraph]:
    """``graph`` with the input dimensions it leaves open (``Input((None, None, 3))``) taken
    from the data it is fed, every layer's output re-derived on them as Keras does when the
    first batch arrives; None when the data fixes nothing more.  Raises
    :class:`UnresolvedArgument` (with the reason) when the sizes cannot be carried through
    the model."""
    merged = _fed_inputs(graph.input_shapes, data_shapes)
    if merged is None or not isinstance(model, (SequentialModel, FunctionalModel)):
        return None
    ops, retraced = graph.operations, {}
    try:
        if isinstance(model, SequentialModel):
            if len(graph.layers) != len(model.layers):
                return None
            shape, outputs, inputs, order = merged[0], [], [], []
            for layer in model.layers:
                inputs.append([shape])
                shape = sequential_step(layer, shape)
                outputs.append([shape])
                order.append((layer, [0]))
        else:
            order = [(layer, sorted(indices)) for layer, indices
                     in functional_order(model.inputs, model.outputs)
                     if not isinstance(layer, TensorOp)]
            if len(order) != len(graph.layers):
                return None
            computed = rerun_functional(model, merged, retraced=retraced)
            outputs = [[computed.get((id(layer), i), layer.calls[i].output_shape)
                        for i in indices] for layer, indices in order]
            inputs = [[inbound_shapes(layer.calls[i], computed) for i in indices]
                      for layer, indices in order]
            ops = _operations(functional_order(model.inputs, model.outputs), graph,
                              lambda op, i: computed.get((id(op), i),
                                                         op.calls[i].output_shape))
    except LayerError as exc:
        raise UnresolvedArgument("inputs", str(exc)) from None
    layers = [_retraced_node(node, layer, indices, retraced)
              if any((id(layer), i) in retraced for i in indices)
              else _sized_node(node, layer, indices, ins, outs) if node.unresolved is None
              else node for node, (layer, indices), ins, outs
              in zip(graph.layers, order, inputs, outputs)]
    return replace(graph, layers=layers, input_shapes=merged, sized=None, operations=ops)


def _retraced_node(node: LayerNode, layer, indices: list, retraced: dict) -> LayerNode:
    """``node``, a layer class's, built from its calls traced again on the data's sizes
    (what it makes inside as well as its output), wired as before."""
    return replace(_node(layer, [retraced.get((id(layer), i), i) for i in indices]),
                   inbound=node.inbound)


def _sized_node(node: LayerNode, layer, indices: list, inputs: list,
                outputs: list) -> LayerNode:
    """``node`` on the sizes the data gives: its outputs, and for a model used as a layer
    whose input changed, the calls it runs inside re-derived on them (a backbone built on
    ``(None, None, 3)`` and fed 224x224 images), so the memory model sizes its inside."""
    sized = replace(node, output_shapes=outputs)
    if not isinstance(layer, ModelLayer) or not node.inner_calls \
            or [layer.calls[i].input_shapes for i in indices] == inputs:
        return sized
    calls = [inner_calls(layer, replace(layer.calls[i], input_shapes=ins, output_shape=out),
                         lambda sub, j: _node(sub, [j]))
             for i, ins, out in zip(indices, inputs, outputs)]
    if any(call is None for call in calls):
        return sized
    return replace(sized, input_shapes=inputs, inner_calls=calls)


def aligned_data_shapes(model, graph: ModelGraph, setup) -> Optional[list]:
    """The data's element shapes in the order of the model's inputs (dict data is matched
    by input name, as Keras matches it), with the sizes the data leaves open taken from the
    model; ``setup.data_shapes`` is completed in place (in the data's own order)."""
    shapes, names = setup.data_shapes, setup.data_names
    if not shapes:
        return shapes
    order = list(range(len(shapes)))
    wanted = _input_names(model)
    if names and wanted and sorted(wanted) == sorted(names) and len(names) == len(shapes):
        order = [names.index(name) for name in wanted]
    aligned = completed_data_shapes(graph.input_shapes, [shapes[i] for i in order])
    if aligned is not None and len(aligned) == len(order):
        completed = list(shapes)
        for position, index in enumerate(order):
            completed[index] = aligned[position]
        setup.data_shapes = completed
    return aligned


def _input_names(model) -> Optional[list]:
    """The names of a functional model's inputs (what dict data is matched by)."""
    if not isinstance(model, FunctionalModel):
        return None
    names = [t.producer[0].name if isinstance(t, Tensor) and t.producer else None
             for t in model.inputs]
    return names if all(names) else None


def completed_data_shapes(declared: list, data_shapes: Optional[list]) -> Optional[list]:
    """The data's element shapes with the sizes it leaves open (an audio file's channels)
    taken from the model's inputs, which Keras requires the data to match."""
    if not declared or not data_shapes or len(declared) != len(data_shapes):
        return data_shapes
    out = []
    for shape, fed in zip(declared, data_shapes):
        if shape is None or fed is None or len(shape) != len(fed) + 1:
            out.append(fed)
            continue
        out.append(tuple(theirs if theirs is not None else mine
                         for mine, theirs in zip(shape[1:], fed)))
    return out


def _fed_inputs(declared: list, data_shapes: Optional[list]) -> Optional[list]:
    """The model's input shapes with their open dimensions filled from the data's element
    shapes; None when nothing is filled.  Raises :class:`UnresolvedArgument` where a known
    dimension disagrees (Keras would refuse the data)."""
    if not declared or not data_shapes or len(declared) != len(data_shapes):
        return None
    merged, changed = [], False
    for shape, fed in zip(declared, data_shapes):
        if shape is None or fed is None or len(shape) != len(fed) + 1:
            return None
        dims = [shape[0]]
        for mine, theirs in zip(shape[1:], fed):
            if mine is not None and theirs is not None and mine != theirs:
                raise UnresolvedArgument("inputs", f"{format_shape((None, *fed))} does not "
                                         f"match the model input {format_shape(shape)}")
            dims.append(mine if mine is not None else theirs)
        changed |= tuple(dims) != tuple(shape)
        merged.append(tuple(dims))
    return merged if changed else None
