"""Models used as layers: their input and output shapes, the tensors they make inside, their
weights, and freezing (``trainable = False``) that reaches every layer inside."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import memlint.layers as registry
from memlint.frontends.keras.data import fed_input_shape
from memlint.frontends.keras.order import functional_nodes, functional_order
from memlint.frontends.keras.training_loops import TRAIN_CALL
from memlint.frontends.keras.values import (Array, FunctionalModel, LayerRef, ModelLayer,
                                            SequentialModel, Tensor, TensorOp, Unknown)
from memlint.ir import Weight, as_shape_list
from memlint.layers.base import LayerError, UnresolvedArgument, format_shape


def model_as_layer(model) -> ModelLayer:
    """The one layer object that stands for ``model`` inside other models."""
    if model.as_layer is None:
        kind = "Sequential" if isinstance(model, SequentialModel) else "Functional"
        model.as_layer = ModelLayer(model, model.name, kind, model.location,
                                    dtype_policy=model.dtype_policy)
    return model.as_layer


def model_input_shapes(model) -> Optional[Any]:
    """The input shape of a model (a list for several inputs), None if not known."""
    if isinstance(model, SequentialModel):
        return sequential_input(model, None)[0]
    shapes = [t.shape for t in model.inputs]
    if any(shape is None for shape in shapes):
        return None
    return shapes if len(shapes) > 1 else shapes[0]


def nested_output(model, shapes, depth: int = 0) -> Any:
    """Output shape(s) of ``model`` called on ``shapes``, without recording any call.

    Raises LayerError when Keras would refuse the input, UnresolvedArgument when a part of
    the model is not known statically."""
    if depth > 32:
        raise UnresolvedArgument("model", "models nested too deeply")
    if isinstance(model, SequentialModel):
        shape = shapes
        for layer in model.layers:
            shape = sequential_step(layer, shape, depth, trace=True)
        return shape
    declared = model_input_shapes(model)
    if declared is None:
        raise UnresolvedArgument("inputs", "the model's input shape is not known statically")
    given = shapes if isinstance(shapes, list) else [shapes]
    wanted = declared if isinstance(declared, list) else [declared]
    if len(given) != len(wanted) or any(
            len(g) != len(w) or any(a is not None and b is not None and a != b
                                    for a, b in zip(g, w))
            for g, w in zip(given, wanted)):
        raise LayerError(f"expects input {format_shape(declared)}")
    outs = [t.shape for t in model.outputs]
    if any(shape is None for shape in outs):
        raise UnresolvedArgument("outputs", "the model's output shape is not known statically")
    if [tuple(g) for g in given] != [tuple(w) for w in wanted]:
        # Keras re-runs the layers on the more specific input: Input((None,)) called on
        # Input((12,)) gives a sequence of 12, not None
        computed = rerun_functional(model, given, depth)
        outs = [_shape_of(t.producer, computed) for t in model.outputs]
    return outs if len(outs) > 1 else outs[0]


def rerun_functional(model, given: list, depth: int = 0,
                     retraced: Optional[dict] = None) -> dict:
    """The output shape of every call inside functional ``model`` run on ``given``:
    {(id(layer), call index): output shape}, each call after those that feed it.  A layer
    class's call() is traced again on its new inputs; ``retraced`` gets {(id(layer), call
    index): index of the new call}."""
    computed: dict = {}
    retraced = {} if retraced is None else retraced
    for tensor, shape in zip(model.inputs, given):
        if tensor.producer:
            computed[(id(tensor.producer[0]), tensor.producer[1])] = tuple(shape)
    for layer, index in functional_nodes(model.inputs, model.outputs):
        key = (id(layer), index)
        if key not in computed and layer.type != "InputLayer":
            computed[key] = _rerun_call(layer, index, computed, depth, retraced)
    return computed


def _shape_of(producer, computed: dict) -> Any:
    """The shape of the tensor ``producer`` made, re-derived when it was re-run."""
    layer, index, position = producer
    key = (id(layer), index)
    out = computed[key] if key in computed else layer.calls[index].output_shape
    if isinstance(out, list):
        return out[position]
    return out


def inbound_shapes(record, computed: dict) -> Any:
    """The (re-derived) input shapes of a recorded call, structured as recorded."""
    parents = _input_parents(record)
    if parents is None:
        return record.input_shapes
    inbound = [_shape_of(p, computed) for p in parents]
    return inbound if isinstance(record.input_shapes, list) else inbound[0]


def _input_parents(record) -> Optional[list]:
    """The producers of a call's inputs: the first of its inbound tensors (positional
    arguments come first, then keyword ones such as ``mask=``), None when they cannot be
    matched to the recorded input shapes."""
    recorded = record.input_shapes
    if recorded is None:
        return None
    wanted = recorded if isinstance(recorded, list) else [recorded]
    parents = record.parents[:len(wanted)]
    if len(parents) != len(wanted) or [_shape_of(p, {}) for p in parents] != list(wanted):
        return None
    return parents


def _rerun_call(layer, index: int, computed: dict, depth: int, retraced: dict) -> Any:
    """Call ``index`` of ``layer`` on the re-derived shapes of its inbound tensors (a layer
    class's new call noted in ``retraced``)."""
    record = layer.calls[index]
    if [_shape_of(p, computed) for p in record.parents] == \
            [_shape_of(p, {}) for p in record.parents]:
        return record.output_shape  # nothing it reads changed
    if isinstance(layer, TensorOp) and record.input_shapes is not None:
        return _rerun_operation(record.input_shapes,
                                [_shape_of(p, computed) for p in record.parents])
    parents = _input_parents(record)
    traced = getattr(layer, "obj", None) is not None and not record.free  # a ClassLayer
    if parents is None or not (traced or isinstance(layer, (ModelLayer, LayerRef))):
        raise UnresolvedArgument("inputs", f"layer '{layer.name}' cannot be re-run on the "
                                           "new input shape")
    shapes = inbound_shapes(record, computed)
    if traced:
        from memlint.frontends.keras.models import retrace
        new = retrace(layer, record, shapes)
        if new is None:
            raise UnresolvedArgument("inputs", f"the call() of layer '{layer.name}' gives "
                                               "no output on the new input shape")
        retraced[(id(layer), index)] = new
        return layer.calls[new].output_shape
    if isinstance(layer, ModelLayer):
        return nested_output(layer.model, shapes, depth + 1)
    out = registry.call(layer.instance, shapes)[0]
    if isinstance(record.output_shape, list) and not isinstance(out, list):
        from memlint.frontends.keras.models import _with_call_options
        out = _with_call_options(layer, shapes, out, {"return_attention_scores": True})
    return out


def _rerun_operation(recorded: list, inbound: list) -> Any:
    """``x + y`` on new shapes: the tensor operands replaced, scalars (shape ()) kept."""
    from memlint.frontends.keras.models import broadcast_shapes
    tensors = iter(inbound)
    shapes = [shape if shape == () else next(tensors, shape) for shape in recorded]
    out = shapes[0]
    for shape in shapes[1:]:
        out = broadcast_shapes(out, shape)
    return out


def sequential_step(layer, shape, depth: int = 0, trace: bool = False) -> Any:
    """The output shape of one layer of a Sequential on ``shape`` (no call recorded).  A
    layer built here for the first time gets its weights, as Keras builds it on this call;
    with ``trace``, a layer class of the file never called yet (a Sequential with no Input,
    built when a model first calls it) has its call() traced on ``shape``."""
    if isinstance(layer, ModelLayer):
        return nested_output(layer.model, shape, depth + 1)
    if isinstance(layer, LayerRef):
        if layer.trace is not None:  # a Lambda's function, run on this shape
            layer.trace(Tensor(tuple(shape)))
        out, weights = registry.call(replace(layer.instance, trainable=True), shape)
        if layer.weights is None:
            layer.weights = built_weights(layer, weights)
        return out
    if trace and getattr(layer, "obj", None) is not None and not layer.calls:
        # a layer class of the file in a Sequential first called here (no Input of its
        # own): Keras builds and runs it on this shape, so its call() is traced now
        from memlint.frontends.keras.models import apply
        apply(layer.obj.interp.state, layer, Tensor(tuple(shape)), layer.location)
    if getattr(layer, "obj", None) is not None and layer.calls:  # ClassLayer
        if layer.calls[0].output_shape is None:
            raise UnresolvedArgument("layers", f"layer '{layer.name}' is not known")
        return layer.calls[0].output_shape
    raise UnresolvedArgument("layers", f"layer '{layer.name}' is not modelled")


def nested_activation_shapes(model, shapes, depth: int = 0) -> list:
    """Shapes of the tensors made inside ``model`` when it is called on ``shapes``, its own
    outputs excluded (the calling layer counts those): what training keeps for backward."""
    if depth > 32:
        return []
    made = []
    if isinstance(model, SequentialModel):
        shape = shapes
        for layer in model.layers:
            if isinstance(layer, ModelLayer):
                made += nested_activation_shapes(layer.model, shape, depth + 1)
                shape = nested_output(layer.model, shape, depth + 1)
            elif isinstance(layer, LayerRef):
                shape, _ = registry.call(layer.instance, shape)
            else:
                return made
            made.extend(as_shape_list(shape))
        finals = as_shape_list(shape)
    else:
        computed = rerun_functional(model, shapes if isinstance(shapes, list) else [shapes],
                                    depth)
        for layer, indices in functional_order(model.inputs, model.outputs):
            if layer.type == "InputLayer":
                continue
            for index in sorted(indices):
                record = layer.calls[index]
                if isinstance(layer, ModelLayer) and record.input_shapes is not None:
                    made += nested_activation_shapes(
                        layer.model, inbound_shapes(record, computed), depth + 1)
                made.extend(as_shape_list(computed.get((id(layer), index),
                                                       record.output_shape)))
        finals = [_shape_of(t.producer, computed) if t.producer else t.shape
                  for t in model.outputs]
    for shape in finals:
        if shape in made:
            made.remove(shape)
    return made


def model_weights(model, depth: int = 0) -> list:
    """Every weight of a model, with the trainable flags Keras would report now."""
    if depth > 32:
        return []
    if isinstance(model, SequentialModel):
        members = model.layers
    else:
        members = [layer for layer, _ in functional_order(model.inputs, model.outputs)]
    weights = []
    for layer in members:
        if isinstance(layer, ModelLayer):
            weights.extend(model_weights(layer.model, depth + 1))
        elif isinstance(layer, LayerRef):
            weights.extend(layer_weights(layer))
        elif getattr(layer, "obj", None) is not None:  # a Layer subclass of the file
            from memlint.frontends.keras.classes import class_weights
            weights.extend(class_weights(layer.obj))
    return weights


def built_weights(layer: LayerRef, weights: list) -> list:
    """A layer's weights once its first call has built it: those its class's ``__init__``
    made (a subclass of a registry layer), then the ones its kind builds."""
    return list(layer.init_weights) + list(weights)


def layer_weights(layer) -> list:
    """A layer's weights with its current trainable flag applied."""
    if layer.weights is None:
        return []
    if layer.instance.trainable:
        return list(layer.weights)
    return [Weight(w.name, w.shape, trainable=False) for w in layer.weights]


def set_trainable(obj, value: bool, seen: Optional[set] = None) -> None:
    """``obj.trainable = value``: on a model it reaches every layer inside (Keras 3 does so)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, LayerRef):
        obj.instance.trainable = value
    elif getattr(obj, "obj", None) is not None:  # a Layer subclass of the file
        from memlint.frontends.keras.classes import set_attribute
        set_attribute(obj.obj, "trainable", value)
    elif isinstance(obj, ModelLayer):
        set_trainable(obj.model, value, seen)
    elif isinstance(obj, (SequentialModel, FunctionalModel)):
        obj.trainable = value
        if isinstance(obj, SequentialModel):
            members = obj.layers
        else:
            members = [layer for layer, _ in functional_order(obj.inputs, obj.outputs)]
        for layer in members:
            if layer.type != "InputLayer" and (isinstance(layer, (LayerRef, ModelLayer))
                                               or getattr(layer, "obj", None) is not None):
                set_trainable(layer, value, seen)


def model_layers(model) -> list:
    """``model.layers``: what Keras lists (InputLayers too for functional models)."""
    if isinstance(model, SequentialModel):
        return [layer for layer in model.layers]
    return [layer for layer, _ in functional_order(model.inputs, model.outputs)
            if not isinstance(layer, TensorOp)]


def sequential_input(model: SequentialModel, input_override: Optional[tuple]) -> tuple:
    """(input shape, where it came from) for a Sequential model; shape None if unknown."""
    if input_override is not None:
        return input_override, "--input-shape"
    if model.input_shape is not None:
        return model.input_shape, model.input_source
    if model.layers and model.layers[0].input_hint is not None:
        first = model.layers[0]
        return first.input_hint, f"input_shape of the first layer (line {first.location.line})"
    if model.layers and isinstance(model.layers[0], ModelLayer):
        first = model.layers[0]
        if first.model is not model:
            shape = model_input_shapes(first.model)
            if shape is not None and not isinstance(shape, list):
                return shape, f"input of model '{first.name}'"
    for method in ("train_on_batch", "fit", "predict", "predict_on_batch", "evaluate",
                   TRAIN_CALL):
        for args, kwargs, loc in model.usage.get(method, []):
            shape = fed_input_shape(args[0] if args else kwargs.get("x"))
            if shape is not None:
                return shape, (f"the batch a training loop calls it on at line {loc.line}"
                               if method == TRAIN_CALL else
                               f"data passed to {method}() at line {loc.line}")
    return None, ""


def shape_attribute(model, attr: str) -> Any:
    """``model.input_shape`` / ``model.output_shape`` of a functional model, or of a
    Sequential whose input shape is known (Keras 3 raises on one not built yet): batch-first
    tuples, a list where the model has several."""
    given = model_input_shapes(model)
    if given is None:
        return Unknown(f"Sequential model '{model.name}' has no input shape yet"
                       if isinstance(model, SequentialModel)
                       else f"the {attr} of model '{model.name}' is not known statically")
    if attr == "input_shape":
        return [tuple(s) for s in given] if isinstance(given, list) else tuple(given)
    if isinstance(model, SequentialModel):
        try:
            return nested_output(model, tuple(given))
        except (LayerError, UnresolvedArgument) as exc:
            return Unknown(f"the output shape of '{model.name}' is not known statically "
                           f"({exc})")
    if any(t.shape is None for t in model.outputs):
        return Unknown(f"the {attr} of model '{model.name}' is not known statically")
    shapes = [tuple(t.shape) for t in model.outputs]
    return shapes if len(shapes) != 1 else shapes[0]
