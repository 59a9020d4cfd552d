"""Layers, Inputs, Sequential and functional models: creating them, calling them (shape
propagation through the layer registry), operators on tensors, and model methods."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import field, replace
from typing import Any, Iterator, Optional

import libcst as cst

import memlint.layers as registry
from memlint.frontends.keras import batches, classes, compiled, data, operations, tensor_ops
from memlint.frontends.keras.loop_progress import value_of
from memlint.frontends.keras.names import to_snake_case
from memlint.frontends.keras.values import (INPUT_SHAPE_UNKNOWN, Array, Batches,
                                            FunctionalModel, LayerRef,
                                            ModelLayer, OpaqueLayer, Partial, SequentialModel,
                                            Tensor, TensorOp, Unknown, UserFunction,
                                            flatten_structure, is_unknown)
from memlint.frontends.keras.nested import (built_weights, model_as_layer, model_input_shapes,
                                            model_layers, nested_output, sequential_input,
                                            sequential_step)
from memlint.ir import Location, as_shape_list
from memlint.layers.base import Args, LayerError, LayerInstance, UnresolvedArgument, format_shape
from memlint.records import record

_INPUT_KIND = registry.lookup("InputLayer")
_RECURRENT = {"SimpleRNN", "LSTM", "GRU"}

# Layers whose first build creates auto-named sub-layers, taking those names from the same
# counters as user layers (Keras 3 MultiHeadAttention._build_attention makes a Softmax and a
# Dropout): a Dropout created after the attention layer is called is "dropout_1".
_BUILD_SUBLAYER_NAMES = {"MultiHeadAttention": ("softmax", "dropout")}

# Python operators on symbolic tensors -> the Keras 3 op class KerasTensor.__add__ etc. create.
TENSOR_OPERATORS = {"+": "Add", "-": "Subtract", "*": "Multiply", "/": "TrueDivide",
                    "//": "FloorDivide", "%": "Mod", "**": "Power"}


@record
class CallRecord:
    """One call of a layer: input shapes, output shape(s), and who produced the inputs."""

    input_shapes: Any
    output_shape: Any
    parents: list = field(default_factory=list)  # (LayerRef | OpaqueLayer, call, output)
    saved: list = field(default_factory=list)  # extra tensors kept for backward (memory model)
    inner: list = field(default_factory=list)  # (layer, call index) of the calls made inside
    # shapes of the tensors it read that no layer or operation made (inside a traced call():
    # the call's own inputs), for the memory model's wiring
    free: list = field(default_factory=list)
    # a traced call(): what made each tensor it returned (None where nothing recorded did)
    returned_by: list = field(default_factory=list)
    # how many batches its tensors hold along the first axis (a discriminator run on real
    # and generated images joined: 2; frontends/keras/batches.py)
    batches: int = 1
    # a traced call(): how call() received its inputs, (dict keys, spread, options) as
    # :class:`~memlint.frontends.keras.classes.ClassLayer` holds them while it runs
    form: tuple = (None, None, None)


# ---------------------------------------------------------------------- creation

def create_layer(interp, type_name: str, args: list, kwargs: dict, node):
    """A layer object from a constructor call; :class:`OpaqueLayer` when it cannot be modelled."""
    state = interp.state
    loc = interp.location(node)
    kind = registry.lookup(type_name)
    given = kwargs.get("name")
    stem = to_snake_case(kind.class_name if kind else type_name)
    name = given if isinstance(given, str) else state.unique_name(stem)
    hint = _input_hint(type_name, args, kwargs)
    keras3_input = type_name != "InputLayer" and any(
        kwargs.get(key) is not None for key in ("input_shape", "input_dim"))
    if kind is None:
        reason = f"layer type {type_name} is not modelled by memlint"
        state.note_unresolved(loc, f"{type_name} '{name}'", reason + "; its output is unknown")
        return OpaqueLayer(type_name, name, loc, reason, hint, keras3_input_arg=keras3_input)
    try:
        instance = registry.instantiate(type_name, Args(list(args), dict(kwargs), state.context),
                                        location=loc)
    except UnresolvedArgument as exc:
        state.note_unresolved(loc, f"{kind.class_name} '{name}'", str(exc) + _dim_hint(
            interp, node, args, kwargs))
        return OpaqueLayer(kind.class_name, name, loc, str(exc), hint,
                           keras3_input_arg=keras3_input)
    except LayerError as exc:
        state.note_error(loc, f"{kind.class_name} '{name}': {exc}")
        return OpaqueLayer(kind.class_name, name, loc, str(exc), hint,
                           keras3_input_arg=keras3_input)
    except Exception as exc:  # a bug in a layer kind: keep going, but report it (exit 2)
        reason = f"memlint cannot interpret these arguments ({type(exc).__name__}: {exc})"
        state.note_unresolved(loc, f"{kind.class_name} '{name}'", reason)
        state.note_internal(loc, f"{kind.class_name} '{name}'", exc)
        return OpaqueLayer(kind.class_name, name, loc, reason, hint,
                           keras3_input_arg=keras3_input)
    ref = LayerRef(instance, kind.class_name, name, loc, hint, keras3_input_arg=keras3_input)
    ref.dtype_policy = (state.dtype_policy, state.dtype_source)
    if kind.class_name == "Lambda":
        ref.callables = _lambda_callables(args, kwargs)
        if ref.callables:
            ref.trace = lambda tensor: resolve_lambda(interp, ref, tensor,
                                                      classes.LocationNode(loc))
    return ref


def _dim_hint(interp, node, args: list = (), kwargs: Optional[dict] = None) -> str:
    """How to give a layer's unknown argument a value: where the call passes a name whose
    value is not known (``Embedding(vocab_size, 128)``), ``--dim vocab_size=SIZE``; where it
    passes an expression of such values (``Dense(len(chars) + 1)``), name it first."""
    if not isinstance(node, cst.Call):
        return ""
    names = [arg.value.value for arg in node.args if isinstance(arg.value, cst.Name)
             and isinstance(value_of(interp, arg.value.value), Unknown)]  # bound, unknown
    if names:
        return f" (--dim {names[0]}=SIZE gives {names[0]} a value)"
    position = 0
    for arg in node.args:
        if arg.star:
            return ""  # positions after a spread are not the call's
        if arg.keyword is None:
            value = args[position] if position < len(args) else None
            position += 1
        else:
            value = (kwargs or {}).get(arg.keyword.value)
        if isinstance(value, Unknown) and value.reason == INPUT_SHAPE_UNKNOWN:
            return " (--input-shape gives it)"
        if isinstance(value, Unknown) and not isinstance(arg.value, cst.Name):
            code = cst.Module([]).code_for_node(arg.value)
            length = _length_of_a_name(arg.value)
            if length is not None:
                return f" (--dim '{length}=SIZE' gives it a value)"
            if len(code) <= 60 and "\n" not in code:
                return f" (name it, e.g. `size = {code}`, then give it: --dim size=SIZE)"
    return ""


def _length_of_a_name(node) -> Optional[str]:
    """``len(NAME)`` as written, where ``node`` is such a call (``--dim`` can give it)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) \
            and node.func.value == "len" and len(node.args) == 1 and not node.args[0].keyword \
            and not node.args[0].star and isinstance(node.args[0].value, cst.Name):
        return f"len({node.args[0].value.value})"
    return None


def _lambda_callables(args: list, kwargs: dict) -> dict:
    """The functions of the analysed code a Lambda layer was given (Keras evaluates them)."""
    function = args[0] if args else kwargs.get("function")
    output_shape = kwargs.get("output_shape", args[1] if len(args) > 1 else None)
    out = {}
    arguments = kwargs.get("arguments", args[3] if len(args) > 3 else None)
    if isinstance(function, (UserFunction, Partial)):
        # Keras calls it as function(inputs, **arguments)
        out["function"] = Partial(function, (), dict(arguments)) \
            if isinstance(arguments, dict) and arguments else function
    if isinstance(output_shape, (UserFunction, Partial)):
        out["output_shape"] = output_shape
    return out


def resolve_lambda(interp, layer: LayerRef, inputs: Any, node) -> None:
    """A Lambda whose shape comes from a function: Keras 3 calls a callable ``output_shape``
    on the input shape (batch included), or else traces the function on the inputs; the
    interpreter does the same, and the layer's config gets the shape for this call."""
    tensors = inputs if isinstance(inputs, list) else [inputs]
    if not all(isinstance(t, Tensor) and t.shape is not None for t in tensors):
        return
    shapes = [t.shape for t in tensors] if isinstance(inputs, list) else tensors[0].shape
    if "output_shape" in layer.callables:
        result = calls_module().call(interp, layer.callables["output_shape"], [shapes], {},
                                     node)
        full = tuple(result) if isinstance(result, (tuple, list)) and all(
            d is None or isinstance(d, int) for d in result) else None
    elif "function" in layer.callables:
        interp.tracing = getattr(interp, "tracing", 0) + 1
        try:
            result = calls_module().call(interp, layer.callables["function"], [inputs], {},
                                         node)
        finally:
            interp.tracing -= 1
        full = tuple(result.shape) if isinstance(result, Tensor) and result.shape else None
    else:
        return
    if full:
        config = {"output_shape": full[1:], "unresolved": None}
        if "output_shape" in layer.callables and "function" in layer.callables:
            result = _quiet_trace(interp, layer.callables["function"], inputs, node)
        work = _lambda_work(result, tensors)
        if work is not None:
            config["work"] = work
        layer.instance = replace(layer.instance, config=config)


def _quiet_trace(interp, function, inputs: Any, node) -> Any:
    """``function`` traced on ``inputs`` for what it computes alone: Keras takes the shape
    from the callable ``output_shape`` and never traces it, so nothing the trace notes is
    reported."""
    state = interp.state
    interp.tracing = getattr(interp, "tracing", 0) + 1
    try:
        with _collecting_nothing(state), state.unreported():
            return calls_module().call(interp, function, [inputs], {}, node)
    finally:
        interp.tracing -= 1


@contextmanager
def _collecting_nothing(state) -> Iterator[None]:
    """No tensor made inside is the model's: an enclosing trace's collectors are set
    aside (a stand-in trace, a Lambda's function traced for its work)."""
    collectors = (getattr(state, "trace_collector", None),
                  getattr(state, "call_collector", None))
    state.trace_collector = state.call_collector = None
    try:
        yield
    finally:
        state.trace_collector, state.call_collector = collectors


def _lambda_work(result: Any, inputs: list) -> Optional[str]:
    """What a Lambda's traced function computes, from the operations the trace recorded
    between its inputs and its result (:func:`tensor_ops.work_of`): "elementwise" where each
    is element-wise and the result has the first input's shape, "layout" where each is
    element-wise or only moves or joins elements (a concatenation, a slice), else None (a
    reduction, a product, a layer called inside, a trace that found no shape)."""
    if not isinstance(result, Tensor) or result.shape is None:
        return None
    stops = {id(t.producer[0]) for t in inputs if t.producer}
    work, seen, todo = "elementwise", set(), [result.producer]
    while todo:
        producer = todo.pop()
        if producer is None or id(producer[0]) in stops or id(producer[0]) in seen:
            continue
        op = producer[0]
        seen.add(id(op))
        call = op.calls[producer[1]] if isinstance(op, TensorOp) and not op.name else None
        found = tensor_ops.work_of(op.type, call.input_shapes, call.output_shape) \
            if call is not None else None
        if found is None:
            return None
        if found == "layout":
            work = "layout"
        todo.extend(call.parents)
    if work == "elementwise" and result.shape != inputs[0].shape:
        work = "layout"
    return work


def calls_module():
    from memlint.frontends.keras import calls
    return calls


def _input_hint(type_name: str, args: list, kwargs: dict) -> Optional[tuple]:
    """The input shape a layer declares for the model it starts (batch first)."""
    batch_shape = kwargs.get("batch_input_shape", kwargs.get("batch_shape"))
    if _is_shape(batch_shape):
        return tuple(batch_shape)
    shape = kwargs.get("input_shape")
    batch = kwargs.get("batch_size")
    batch = batch if isinstance(batch, int) and not isinstance(batch, bool) else None
    if type_name == "InputLayer" and shape is None:
        # Keras 3 InputLayer(shape=None, batch_size=None, ...); Keras 2 InputLayer(input_shape)
        shape = args[0] if args else kwargs.get("shape")
        if len(args) > 1 and batch is None and isinstance(args[1], int):
            batch = args[1]
    if _is_shape(shape):
        return (batch,) + tuple(shape)
    dim = kwargs.get("input_dim")
    length = kwargs.get("input_length")
    if isinstance(dim, int) and type_name != "Embedding":
        if type_name in _RECURRENT or isinstance(length, int):
            return (batch, length if isinstance(length, int) else None, dim)
        return (batch, dim)
    if type_name == "Embedding" and isinstance(length, int):
        return (batch, length)
    return None


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value)


def create_input(interp, args: list, kwargs: dict, node) -> Any:
    """``keras.Input(shape=..., batch_size=..., batch_shape=..., name=...)``: a symbolic tensor."""
    state = interp.state
    loc = interp.location(node)
    shape = args[0] if args else kwargs.get("shape")
    batch_shape = kwargs.get("batch_shape")
    batch = kwargs.get("batch_size")
    if _is_shape(batch_shape):
        full = tuple(batch_shape)
    elif _is_shape(shape):
        full = (batch if isinstance(batch, int) else None,) + tuple(shape)
    else:
        full = None
    given = kwargs.get("name")
    name = given if isinstance(given, str) else state.unique_name("input_layer")
    ref = LayerRef(LayerInstance(_INPUT_KIND, {}), "InputLayer", name, loc)
    ref.weights = []
    if name in state.named_inputs:
        full = _named_input_shape(state, loc, name, full, batch)
    if full is None and state.input_shape_hint is not None:
        full = tuple(state.input_shape_hint)
        state.note_info(loc, f"Input '{name}': its shape is not known statically; "
                             f"--input-shape gives {full[1:]}")
    if full is None:
        state.note_unresolved(loc, f"Input '{name}'", _open_shape_note(shape, node))
        ref.calls.append(CallRecord([], None))
        return Tensor(None, (ref, 0, 0), reason=INPUT_SHAPE_UNKNOWN)
    ref.calls.append(CallRecord([], full))
    return Tensor(full, (ref, 0, 0))


def _open_shape_note(shape: Any, node) -> str:
    """Why an Input's shape is not known, and the ``--input-shape`` that gives it: the
    sizes the code states, SIZE for the others (``Input((40, len(chars)))``), or the
    ``--dim`` that gives each size written ``NAME`` or ``len(NAME)``."""
    if not isinstance(shape, (tuple, list)) or not shape or not any(
            is_unknown(d) for d in shape) or not all(
            is_unknown(d) or d is None or isinstance(d, int) for d in shape):
        return "its shape is not known statically; pass --input-shape"
    sizes = ["?" if is_unknown(d) else str(d) for d in shape]
    reason = next(d.reason for d in shape if is_unknown(d))
    given = ",".join("SIZE" if d is None or is_unknown(d) else str(d) for d in shape)
    given_by = [_dim_option(element.value) for element in _shape_elements(node)]
    if len(given_by) == len(shape) and all(
            option is not None for d, option in zip(shape, given_by) if is_unknown(d)):
        named = " and ".join(option for d, option in zip(shape, given_by) if is_unknown(d))
        return (f"its shape ({', '.join(sizes)}) is not known statically ({reason}); "
                f"{named} gives it")
    return (f"its shape ({', '.join(sizes)}) is not known statically ({reason}); "
            f"pass --input-shape {given}")


def _dim_option(node) -> Optional[str]:
    """The ``--dim`` that gives a size written as ``NAME`` or ``len(NAME)``, or None."""
    if isinstance(node, cst.Name):
        return f"--dim {node.value}=SIZE"
    length = _length_of_a_name(node)
    return f"--dim '{length}=SIZE'" if length is not None else None


def _shape_elements(node) -> list:
    """The elements of the tuple or list written as ``Input``'s shape (first argument or
    ``shape=``); none where it is not written as one."""
    if not isinstance(node, cst.Call):
        return []
    arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "shape"),
               node.args[0] if node.args and node.args[0].keyword is None else None)
    if arg is None or not isinstance(arg.value, (cst.Tuple, cst.List)):
        return []
    return list(arg.value.elements)


def _named_input_shape(state, loc, name: str, full, batch) -> Optional[tuple]:
    """``--input NAME=SHAPE`` for ``keras.Input(..., name=NAME)``: the sizes of the
    dimensions the code leaves open (all of them where its shape is not known), as the
    data would give them; a shape of another rank is not used."""
    state.named_inputs_used.add(name)
    given = tuple(state.named_inputs[name])
    if full is None:
        full = (batch if isinstance(batch, int) else None,) + given
    elif len(full) - 1 != len(given):
        state.note_unresolved(loc, f"--input {name}",
                              f"{given} has {len(given)} dimension(s), the Input has "
                              f"{len(full) - 1} ({full[1:]}); not used")
        return full
    else:
        full = (full[0],) + tuple(d if d is not None else g for d, g in zip(full[1:], given))
    state.note_info(loc, f"Input '{name}': --input gives {full[1:]}")
    return full


def create_sequential(interp, args: list, kwargs: dict, node) -> SequentialModel:
    state = interp.state
    layers = args[0] if args else kwargs.get("layers")
    given = kwargs.get("name")
    if given is None and len(args) > 1 and isinstance(args[1], str):
        given = args[1]  # Keras 2: Sequential(layers, name)
    name = given if isinstance(given, str) else state.unique_name("sequential")
    model = SequentialModel(name, interp.location(node))
    model.dtype_policy = (state.dtype_policy, state.dtype_source)
    if isinstance(layers, (list, tuple)):
        for layer in layers:
            sequential_add(interp, model, layer, node, rebuild=False)
        if layers:
            _sequential_rebuild(state, model)
    elif layers is not None:
        state.note_unresolved(interp.location(node), f"Sequential '{name}'",
                              "its layer list is not known statically")
    state.models.append(model)
    return model


def create_functional(interp, args: list, kwargs: dict, node) -> Any:
    state = interp.state
    inputs = args[0] if args else kwargs.get("inputs", kwargs.get("input"))
    outputs = args[1] if len(args) > 1 else kwargs.get("outputs", kwargs.get("output"))
    given = kwargs.get("name")
    # outputs of several batches: their calls' records hold them (frontends/keras/batches.py)
    in_list, out_list = _tensor_list(inputs), _tensor_list(batches.unwrapped(outputs))
    loc = interp.location(node)
    if in_list is None or out_list is None:
        which = "inputs" if in_list is None else "outputs"
        reason = _why_not_tensors(inputs if in_list is None else outputs)
        state.note_unresolved(loc, "Model(...)", f"its {which} are not known statically "
                              f"({reason})")
        return Unknown("model whose inputs or outputs are unknown")
    name = given if isinstance(given, str) else state.unique_name("functional")
    model = FunctionalModel(name, loc, in_list, out_list)
    model.dtype_policy = (state.dtype_policy, state.dtype_source)
    state.models.append(model)
    return model


def clone_model(interp, args: list, kwargs: dict, node) -> Any:
    """``keras.models.clone_model(model)``: a model of the same layers with weights of its
    own (an EMA copy, a target network, a student trained from scratch), under the same
    name as Keras gives it.  A functional clone shares the original's graph here; a
    Sequential's clone holds the same layer list (Keras makes each layer again from its
    config, name included) and is built again as Keras builds it.  A ``clone_function``
    that may change the layers is not cloned."""
    model = args[0] if args else kwargs.get("model")
    changes = [k for k in ("input_tensors", "clone_function", "call_function")
               if kwargs.get(k) is not None] + (["input_tensors"] if len(args) > 1 else [])
    if not isinstance(model, (FunctionalModel, SequentialModel)) or changes:
        why = (f"its {changes[0]} may change the layers" if changes else
               "its model is not a Keras model known statically")
        interp.state.note_unresolved(interp.location(node), "clone_model()", why)
        return Unknown(f"clone_model(): {why}")
    if isinstance(model, SequentialModel):
        clone = SequentialModel(model.name, interp.location(node), list(model.layers),
                                model.input_shape, model.input_source,
                                has_input_layer=model.has_input_layer)
        _sequential_rebuild(interp.state, clone)
    else:
        clone = FunctionalModel(model.name, interp.location(node), model.inputs,
                                model.outputs)
    clone.dtype_policy, clone.trainable = model.dtype_policy, model.trainable
    interp.state.models.append(clone)
    return clone


def _why_not_tensors(value: Any) -> str:
    """Why a model's inputs or outputs are not symbolic tensors: the first unknown value's
    reason, or what the value is."""
    flat = flatten_structure(value)
    if not flat:
        return "nothing was given"
    for item in flat:
        if is_unknown(item):
            return item.reason
        if not isinstance(item, Tensor):
            return f"{type(item).__name__} is not a tensor of a Keras layer"
    return "not known"


def _tensor_list(value: Any) -> Optional[list]:
    """The tensors of a model's inputs or outputs flattened as Keras 3 does (``tree.flatten``:
    nested lists, tuples and dicts, dict values by sorted key); None if any is not a tensor."""
    flat = flatten_structure(value)
    if not flat or any(not isinstance(v, Tensor) for v in flat):
        return None
    return flat


# ---------------------------------------------------------------------- calling layers

def call_layer(interp, layer, args: list, kwargs: dict, node) -> Any:
    """``layer(inputs)`` in the functional API."""
    if not args and "inputs" in kwargs:
        args = [kwargs["inputs"]]
    multi = isinstance(layer, LayerRef) and layer.instance.kind.multi_input
    if multi and len(args) == 1 and isinstance(args[0], (list, tuple)):
        inputs = list(args[0])  # merge layers: Add()([a, b])
    elif multi:
        # MultiHeadAttention(query, value, key=None): positionally or by keyword
        inputs = list(args[:3])
        for position, key in enumerate(("query", "value", "key")):
            if position == len(inputs) and key in kwargs:
                inputs.append(kwargs[key])
    else:
        inputs = args[0] if args else None
        if isinstance(inputs, (list, tuple)) and len(inputs) == 1:
            inputs = inputs[0]
    # Keras records every symbolic tensor of the call as an input of the node (positional
    # arguments first, then keyword arguments sorted by name: initial_state=, mask=, ...);
    # they decide the layer order even when they do not change the output shape
    parents = _producers(list(args)) + _producers([kwargs[k] for k in sorted(kwargs)])
    options = {k: v for k, v in kwargs.items() if k in _CALL_OPTIONS}
    if isinstance(layer, LayerRef) and layer.callables:
        resolve_lambda(interp, layer, inputs, node)
    if isinstance(layer, LayerRef) and layer.type == "Concatenate" and \
            batches.along_batch_axis(layer.instance.config.get("axis"), inputs):
        return _concatenate_batches(interp, layer, inputs, parents, node)
    return apply(interp.state, layer, inputs, interp.location(node), parents, options)


def _concatenate_batches(interp, layer, inputs: list, parents: list, node) -> Any:
    """``Concatenate(axis=0)`` of batch-first tensors: its output holds their batches
    (:mod:`.batches`); its shape is Keras's.  Rows of a known count joined to a batch are
    no number of batches: what reads them is not sized."""
    loc = interp.location(node)
    joined = batches.join([inputs, 0], {})
    tensors = joined[0] if joined else batches.unwrapped(list(inputs))
    out = apply(interp.state, layer, tensors, loc, parents)
    if joined is not None:
        return batches.holding(out, joined[1])
    interp.state.note_unresolved(loc, f"Concatenate '{layer.name}'", "a concatenation along "
                                 "the batch axis of rows of a known count and a batch: its "
                                 "size is not known")
    return batches.holding(out, 0).tensor if isinstance(out, Tensor) and out.shape else out


# Call arguments that change what a layer returns (not how it is built)
_CALL_OPTIONS = {"return_attention_scores"}


def _with_call_options(layer, shapes, out, options: dict):
    """The output of a call given call-time options such as ``return_attention_scores``."""
    if layer.type == "MultiHeadAttention" and options.get("return_attention_scores") is True:
        return [out, attention_scores_shape(layer.instance.config, shapes)]
    if layer.type in ("Attention", "AdditiveAttention") \
            and options.get("return_attention_scores") is True:
        return [out, dot_attention_scores_shape(shapes)]
    return out


def dot_attention_scores_shape(shapes: list) -> tuple:
    """Scores of Attention / AdditiveAttention: ``(*query.shape[:-1], key.shape[-2])``, the key
    being the third input or else the value (Keras 3 ``Attention.compute_output_spec``)."""
    key = shapes[2] if len(shapes) > 2 else shapes[1]
    return tuple(shapes[0][:-1]) + (key[-2],)


def attention_scores_shape(config: dict, shapes: list) -> tuple:
    """Shape of MultiHeadAttention's scores as Keras 3 reports it symbolically.

    ``MultiHeadAttention.compute_output_spec`` gives ``(batch, heads, query_len, query_len)``
    whatever the key's length (the scores really are ``(batch, heads, query_len, key_len)``
    at run time); the model summary and every later layer see Keras's symbolic shape, so
    memlint reports that one.
    """
    query = tuple(shapes[0])
    return (query[0], config["num_heads"], query[1], query[1])


def _producers(values: list) -> list:
    out = []
    for value in values:
        if isinstance(value, Tensor):
            if value.producer:
                out.append(value.producer)
        elif isinstance(value, (list, tuple)):
            out.extend(_producers(list(value)))
        elif isinstance(value, dict):
            out.extend(_producers([value[k] for k in sorted(value, key=str)]))
    return out


def _free_shapes(tensors: list) -> list:
    """The shapes of the tensors among ``tensors`` that nothing recorded made."""
    return [t.shape for t in tensors if isinstance(t, Tensor) and not t.producer
            and t.shape is not None]


def apply(state, layer, inputs: Any, loc: Location, parents: Optional[list] = None,
          options: Optional[dict] = None) -> Any:
    """Run ``layer`` on ``inputs`` (a Tensor or a list of them), recording the call.

    ``parents`` are the producers of every tensor in the call, when they are more than the
    producers of ``inputs``."""
    tensors = inputs if isinstance(inputs, list) else [inputs]
    if parents is None:
        parents = [t.producer for t in tensors if isinstance(t, Tensor) and t.producer]
    free = _free_shapes(tensors)
    unknown = next((t for t in tensors if not isinstance(t, Tensor) or t.shape is None), None)
    if unknown is not None or isinstance(layer, OpaqueLayer):
        reason = _unknown_reason(layer, unknown)
        layer.calls.append(CallRecord(None, None, parents))
        _note_call(state, layer)  # a traced step's call of unknown size: not left out
        return Tensor(None, (layer, len(layer.calls) - 1, 0), reason=reason)
    shapes = [t.shape for t in tensors] if isinstance(inputs, list) else tensors[0].shape
    if isinstance(layer, ModelLayer):
        return _apply_model(state, layer, shapes, loc, parents, free)
    if isinstance(layer, classes.ClassLayer):
        return _apply_class(state, layer, shapes, loc, parents, free)
    try:
        # weights as built, all trainable: the layer's trainable flag is read when the graph
        # is made, as Keras reads it when asked (layer.trainable = False after the call)
        out, weights = registry.call(replace(layer.instance, trainable=True), shapes)
    except Exception as exc:  # LayerError, UnresolvedArgument, or a bug in a layer kind
        reason = _note_build_failure(state, layer, shapes, loc, exc)
        layer.calls.append(CallRecord(shapes, None, parents))
        return Tensor(None, (layer, len(layer.calls) - 1, 0),
                      reason=f"{layer.type} '{layer.name}' cannot be built: {reason}")
    if options:
        out = _with_call_options(layer, shapes, out, options)
    if layer.weights is None:
        layer.weights = built_weights(layer, weights)
        for stem in _BUILD_SUBLAYER_NAMES.get(layer.type, ()):
            state.unique_name(stem)
    saved = layer.instance.kind.saved_tensors(layer.instance.config, shapes)
    _collect(state, out, saved)
    layer.calls.append(CallRecord(shapes, out, parents, saved, free=free))
    _note_call(state, layer)
    return output_tensors(layer, len(layer.calls) - 1)


def _note_build_failure(state, layer, shapes, loc: Location, exc: Exception) -> str:
    """Report why ``layer`` could not be built on ``shapes``: an error when Keras would refuse
    it, a note when a value is unknown, an internal error (exit 2) for a bug in memlint.
    Returns the reason, which is also kept on the layer."""
    if isinstance(exc, LayerError):
        state.note_error(loc, f"{layer.type} '{layer.name}' on input {format_shape(shapes)}: "
                              f"{exc}")
        reason = str(exc)
    else:
        reason = exc.reason if isinstance(exc, UnresolvedArgument) else \
            f"memlint cannot build it ({type(exc).__name__}: {exc})"
        state.note_unresolved(loc, f"{layer.type} '{layer.name}'", reason)
        if not isinstance(exc, UnresolvedArgument):
            state.note_internal(loc, f"{layer.type} '{layer.name}'", exc)
    layer.error = reason
    return reason


def _apply_model(state, layer: ModelLayer, shapes, loc: Location, parents: list,
                 free: list) -> Any:
    """A model called as a layer: its outputs for these inputs (weights are read later)."""
    model = layer.model
    if isinstance(model, SequentialModel) and not model.built:
        if model.input_shape is None and not isinstance(shapes, list):
            model.input_shape, model.input_source = shapes, f"its call at line {loc.line}"
        _sequential_build(state, model)  # Keras builds it on the first call
    try:
        out = nested_output(model, shapes)
    except Exception as exc:  # LayerError, UnresolvedArgument, or a bug in a layer kind
        _note_build_failure(state, layer, shapes, loc, exc)
        out = None
    layer.calls.append(CallRecord(shapes, out, parents, free=free))
    _collect(state, out, [])
    _note_call(state, layer)
    if out is None:
        return Tensor(None, (layer, len(layer.calls) - 1, 0),
                      reason=f"output of model '{layer.name}' not known statically")
    return output_tensors(layer, len(layer.calls) - 1)


def _apply_class(state, layer, shapes, loc: Location, parents: list, free: list) -> Any:
    """A Layer / Model subclass of the file called as a layer: ``call`` traced on ``shapes``."""
    interp = layer.obj.interp
    marks = (len(state.diagnostics), len(state.unresolved), layer.error)
    interp.tracing = getattr(interp, "tracing", 0) + 1
    outer = getattr(state, "trace_collector", None)
    state.trace_collector = []  # tensors made inside: kept for backward like a model's
    outer_calls = getattr(state, "call_collector", None)
    state.call_collector = []  # the layer calls made inside, for the memory model
    outer_ops = (getattr(state, "trace_made", {}), getattr(state, "trace_read", set()),
                 getattr(state, "trace_records", {}))
    # the operations' outputs (position in trace_collector -> key), the tensors read back,
    # the call record of each position an operation made (how many batches it holds)
    state.trace_made, state.trace_read, state.trace_records = {}, set(), {}
    state.returned_by = []
    try:
        out = classes.output_for(layer, shapes, loc)
    except LayerError as exc:
        _note_build_failure(state, layer, shapes, loc, exc)
        out = None
    except classes.ClassUnresolved as exc:
        _note_build_failure(state, layer, shapes, loc, UnresolvedArgument("call", str(exc)))
        out = None
    finally:
        interp.tracing -= 1
        made, state.trace_collector = state.trace_collector, outer
        inner, state.call_collector = state.call_collector, outer_calls
        (op_made, read, records), (state.trace_made, state.trace_read, state.trace_records) \
            = (state.trace_made, state.trace_read, state.trace_records), outer_ops
    if out is None and _open_sizes(shapes):
        out = _stand_in_output(state, layer, shapes, parents)
        if out is not None:  # Keras's shape on open sizes: what the code noted is moot
            del state.diagnostics[marks[0]:], state.unresolved[marks[1]:]
            layer.error = marks[2]
            made, inner, op_made, state.returned_by = [], [], {}, []
    # an operation's output is kept only when a backward reads it; the layer's own output
    # is counted as its output (an operation's dropped here, a layer call's by its shape);
    # one on a tensor of several batches (a VQ-VAE's distances to every code, per position)
    # is as large as that many batches
    returned = [_key(p) if p else None for p in state.returned_by]
    made = [_of_batches(shape, records[i].batches if i in records else 1)
            for i, shape in enumerate(made) if i not in op_made
            or (op_made[i] in read and op_made[i] not in returned)]
    ops_made = set(op_made.values())
    out_shapes = as_shape_list(out)
    for k, shape in enumerate(out_shapes):
        by_operation = len(returned) == len(out_shapes) and returned[k] in ops_made
        if shape in made and not by_operation:
            made.remove(shape)
    if outer is not None:
        outer.extend(made + out_shapes)
    returned, state.returned_by = state.returned_by, []
    layer.calls.append(CallRecord(shapes, out, parents, made if out is not None else [],
                                  inner if out is not None else [], free,
                                  returned if out is not None else [],
                                  form=(layer.input_keys, layer.spread, layer.options)))
    _note_call(state, layer)
    if out is None:
        return Tensor(None, (layer, len(layer.calls) - 1, 0),
                      reason=f"output of {layer.type} '{layer.name}' not known statically")
    return output_tensors(layer, len(layer.calls) - 1)


# Keras gives a call() on open sizes (``Input((None, None, 1))``) a stand-in for them (its
# JAX backend one symbolic size for every open axis; earlier versions two numbers) and
# leaves open each output axis that depends on it
_STAND_INS = (83, 89)


def _open_sizes(shapes: Any) -> bool:
    """Whether an input shape leaves an axis other than the batch open."""
    listed = shapes if isinstance(shapes, list) else [shapes]
    return any(isinstance(s, tuple) and None in s[1:] for s in listed)


def _stand_in_output(state, layer, shapes: Any, parents: list) -> Any:
    """The output shape(s) of a layer class's call() whose trace on open sizes found no
    output (``h * 3`` with ``h`` open): traced on two stand-in sizes for every open axis,
    batch included, the output axes that agree; None when a trace gives nothing."""
    def filled(shape, size):
        return tuple(size if d is None else d for d in shape) if isinstance(shape, tuple) \
            else shape
    outs = []
    with _collecting_nothing(state):  # nothing of it is the model's
        for size in _STAND_INS:
            given = [filled(s, size) for s in shapes] if isinstance(shapes, list) \
                else filled(shapes, size)
            made = len(layer.calls)
            try:
                index = retrace(layer, CallRecord(given, None, parents, form=(
                    layer.input_keys, layer.spread, layer.options)), given)
            except LayerError:
                return None
            if index is None:
                return None
            outs.append(layer.calls[index].output_shape)
            del layer.calls[made:]  # the stand-in's call is no call of the model's
    first, second = (as_shape_list(o) for o in outs)
    if len(first) != len(second) or any(len(a) != len(b) for a, b in zip(first, second)):
        return None
    merged = [tuple(x if x == y else None for x, y in zip(a, b))
              for a, b in zip(first, second)]
    return merged if isinstance(outs[0], list) else merged[0]


def retrace(layer, record: CallRecord, shapes: Any) -> Optional[int]:
    """A layer class's call() traced again, quietly, as ``record``'s call on new input
    ``shapes`` (the sizes data gives an ``Input((None, None, 1))``): the index of the new
    call in ``layer.calls``, None when the trace gives no output.  Nothing it notes is
    reported (the first trace reported what the code leaves open), but what Keras would
    refuse on these shapes raises :class:`LayerError`."""
    for index, done in enumerate(layer.calls):  # traced on these shapes already
        if done.input_shapes == shapes and done.parents == record.parents \
                and done.form == record.form and done.output_shape is not None:
            return index
    state = layer.obj.interp.state
    marks = (len(state.diagnostics), len(state.unresolved), len(layer.calls))
    state.quiet += 1
    form = (layer.input_keys, layer.spread, layer.options)
    layer.input_keys, layer.spread, layer.options = record.form
    try:
        _apply_class(state, layer, shapes, layer.location, record.parents, [])
    finally:
        state.quiet -= 1
        layer.input_keys, layer.spread, layer.options = form
        refused = [d.message for d in state.diagnostics[marks[0]:] if d.code == "MEM901"]
        del state.diagnostics[marks[0]:], state.unresolved[marks[1]:]
    if refused or layer.calls[-1].output_shape is None:
        del layer.calls[marks[2]:]  # no call of the model's
        if refused:
            raise LayerError(f"layer '{layer.name}' on {format_shape(shapes)}: {refused[0]}")
        return None
    return len(layer.calls) - 1


def _of_batches(shape: Any, count: int) -> Any:
    """A shape made inside a traced call, as one batch's tensor of its bytes: a tensor of
    ``count`` batches ``(None, 64)`` is ``(None, 64 * count)``."""
    if count <= 1 or not isinstance(shape, tuple) or not shape or shape[0] is not None \
            or not all(isinstance(d, int) for d in shape[1:]):
        return shape
    return (None, count * math.prod(shape[1:]))


def tensor_operation(interp, op_type: str, operands: list, node) -> Tensor:
    """``x + y`` (or ``-x``, ``2 * x`` ...) where an operand is a symbolic tensor.

    Keras 3 creates an op (``keras.ops.Add``) named from the shared counter (``add_2``), and
    records it in the graph; the result has the operands' broadcast shape.
    """
    state = interp.state
    loc = interp.location(node)
    # inside a traced call() the backend runs the operation: no Keras op, no name taken
    tracing = getattr(interp, "tracing", 0)
    tensors = [v for v in operands if isinstance(v, Tensor)]
    parents = [t.producer for t in tensors if t.producer]
    shapes = []
    for value in operands:
        if isinstance(value, Tensor):
            shapes.append(value.shape)
        elif isinstance(value, Array):  # a NumPy constant (a positional encoding)
            shapes.append(tuple(value.shape))
        elif isinstance(value, (int, float)):
            shapes.append(())
        else:
            shapes.append(None)
    if _on_constants(interp, tensors) and None not in shapes:
        constant = _broadcast_all(shapes)
        if constant is not None:  # run at once on constants: no op in any graph, no name
            return Tensor(constant)
    op = TensorOp(op_type, "" if tracing else state.unique_name(to_snake_case(op_type)), loc)
    if any(shape is None for shape in shapes):
        op.calls.append(CallRecord(None, None, parents))
        unknown = next((t for t in tensors if t.shape is None), None)
        reason = unknown.reason if unknown is not None else \
            f"'{op.name or op_type}' combines a tensor with a value not known statically"
        return Tensor(None, (op, 0, 0), reason=reason or "input shape unknown")
    try:
        out = shapes[0]
        for shape in shapes[1:]:
            out = broadcast_shapes(out, shape)
    except LayerError as exc:
        state.note_error(loc, f"{op_type} '{op.name}' on inputs "
                              f"{', '.join(format_shape(sh) for sh in shapes)}: {exc}")
        op.calls.append(CallRecord(shapes, None, parents))
        return Tensor(None, (op, 0, 0), reason=f"'{op.name}' cannot be computed")
    op.calls.append(CallRecord(shapes, out, parents, free=_free_shapes(tensors)))
    _collect_operation(state, op, out, operands)
    return Tensor(out, (op, 0, 0))


def apply_operation(interp, name: str, args: list, kwargs: dict, node) -> Any:
    """``keras.ops.relu(x)``, ``ops.mean(x, axis=1)`` ... on symbolic tensors: an operation
    of the graph (named from the shared counter outside a traced call), not a layer."""
    state = interp.state
    loc = interp.location(node)
    if batches.is_join(name):
        joined = batches.join(args, kwargs)
        if joined is not None:
            return _batches_op(interp, "ConcatenateBatches", "concatenate", *joined, loc)
    if batches.is_split(name):
        whole = batches.split(args, kwargs)
        if whole is not None:  # back into its batches: ``z1, z2 = ops.split(z, 2, axis=0)``
            return _batches_op(interp, "Split", "split", [whole.tensor], whole.count, loc)
    if batches.is_reshape(name):
        moved = batches.regrouped(args, kwargs)
        if moved is not None:  # rows into the batch axis (a TimeDistributed by hand), or back
            return _regroup(interp, "Reshape", "reshape", *moved, loc)
    drawn = batches.repeated(name, args, kwargs)
    if drawn is not None:  # several samples drawn per input: ops.repeat(x, 4, axis=0)
        stem = tensor_ops.OPERATIONS[name][0]
        return _regroup(interp, stem.capitalize(), stem, *drawn, loc)
    if batches.has_batches([args, kwargs]):
        if not (tensor_ops.is_elementwise(name) or batches.row_wise(name, args, kwargs)):
            return Unknown(f"{name}() of a tensor of several batches")
        return batches.run_on([args, kwargs], lambda both: apply_operation(
            interp, name, both[0], both[1], node), f"{name}()")
    tensors = [t for t in flatten_structure([args, kwargs]) if isinstance(t, Tensor)]
    if _on_constants(interp, tensors):
        made = tensor_ops.constant(name, args, kwargs)
        if made is not None:
            return made
    parents = [t.producer for t in tensors if t.producer]
    try:
        stem, out = tensor_ops.operation_shape(name, args, kwargs)
    except (LayerError, UnresolvedArgument) as exc:
        stem, out = tensor_ops.OPERATIONS[name][0], None
        if isinstance(exc, LayerError):
            state.note_error(loc, f"{name.rsplit('.', 1)[-1]}() on "
                                  f"{', '.join(format_shape(t.shape) for t in tensors)}: {exc}")
        elif not any(t.shape is None for t in tensors):  # an unknown input was noted already
            state.note_unresolved(loc, f"{name}()", exc.reason)
    tracing = getattr(interp, "tracing", 0)
    op_type = "".join(part.capitalize() for part in stem.split("_"))
    op = TensorOp(op_type, "" if tracing else state.unique_name(stem), loc)
    op.calls.append(CallRecord(None if out is None else [t.shape for t in tensors], out, parents,
                               free=_free_shapes(tensors)))
    if out is None:
        return Tensor(None, (op, 0, 0), reason=f"output of {name}() not known statically")
    _collect_operation(state, op, out, list(args) + list(kwargs.values()))
    if isinstance(out, list):
        return [Tensor(shape, (op, 0, i)) for i, shape in enumerate(out)]
    return Tensor(out, (op, 0, 0))


def _broadcast_all(shapes: list) -> Optional[tuple]:
    """The broadcast shape of ``shapes``; None where they do not broadcast."""
    try:
        return tensor_ops.broadcast(*shapes)
    except LayerError:
        return None


def _on_constants(interp, tensors: list) -> bool:
    """Whether an operation outside any traced call() reads only tensors no layer made
    (``ops.exp(ops.linspace(0.0, 4.0, 16))``, ``keras.random.normal((8, 100)) * 2``): Keras
    runs it at once, on constants, with no graph node and no name taken."""
    return not getattr(interp, "tracing", 0) and all(
        t.producer is None and t.shape is not None for t in tensors)


def _batches_op(interp, op_type: str, stem: str, tensors: list, count: int,
                loc: Location) -> Any:
    """A concatenation along the batch axis of ``tensors`` (one batch's shape) into one of
    ``count`` batches, or (``Split``) a tensor of ``count`` batches back into as many one-
    batch tensors: one operation whose call holds ``count`` batches (:mod:`.batches`)."""
    state = interp.state
    op = TensorOp(op_type, "" if getattr(interp, "tracing", 0) else state.unique_name(stem),
                  loc)
    shape = tuple(tensors[0].shape)
    out = [shape] * count if op_type == "Split" else shape
    op.calls.append(CallRecord([tuple(t.shape) for t in tensors], out,
                               [t.producer for t in tensors if t.producer],
                               free=_free_shapes(tensors), batches=count))
    _collect_operation(state, op, out, tensors)
    if op_type == "Split":  # each output sized as the call's: an over-estimate of them
        return [Tensor(shape, (op, 0, i)) for i in range(count)]
    return Batches(Tensor(shape, (op, 0, 0)), count)


def _regroup(interp, op_type: str, stem: str, tensor: Tensor, shape: tuple, count: int,
             loc: Location) -> Any:
    """A reshape that moves whole rows between the batch axis and the others, or a tile or
    repeat of the batch axis: a tensor of ``count`` batches of ``shape`` (one batch: a plain
    tensor)."""
    state = interp.state
    op = TensorOp(op_type, "" if getattr(interp, "tracing", 0) else state.unique_name(stem),
                  loc)
    op.calls.append(CallRecord(tuple(tensor.shape), shape,
                               [tensor.producer] if tensor.producer else [],
                               free=_free_shapes([tensor]), batches=count))
    _collect_operation(state, op, shape, [tensor])
    out = Tensor(shape, (op, 0, 0))
    return Batches(out, count) if count > 1 else out


def _note_call(state, layer) -> None:
    """Inside a traced call() of a custom layer: remember the layer call just made (and that
    the tensors it reads are read: a layer's backward may need them)."""
    collector = getattr(state, "call_collector", None)
    if collector is not None:
        collector.append((layer, len(layer.calls) - 1))
        state.trace_read.update(_key(p) for p in layer.calls[-1].parents if p)


def _key(producer: tuple) -> tuple:
    return (id(producer[0]), producer[1], producer[2])


def _collect_operation(state, op, out: Any, operands: list) -> None:
    """Inside a traced call() of a custom layer: remember the tensors an operation makes,
    and those its backward reads (the others are not kept for the backward pass)."""
    collector = getattr(state, "trace_collector", None)
    if collector is None:
        return
    reads, reads_output, products = operations.backward_reads(
        op.type, [isinstance(v, Tensor) for v in operands])
    state.trace_read.update(_key(operands[i].producer) for i in reads if operands[i].producer)
    first = len(collector)
    for i, shape in enumerate(as_shape_list(out)):
        key = (id(op), len(op.calls) - 1, i)
        state.trace_made[len(collector)] = key
        collector.append(shape)
        if reads_output:
            state.trace_read.add(key)
        collector.extend([shape] * products)  # a gelu's factors, kept for its backward
    for position in range(first, len(collector)):  # its batches are set once it returns
        state.trace_records[position] = op.calls[-1]


def _collect(state, out: Any, saved: list) -> None:
    """Inside a traced call() of a custom layer: remember the tensors it makes."""
    collector = getattr(state, "trace_collector", None)
    if collector is not None:
        collector.extend(as_shape_list(out) + list(saved))


def broadcast_shapes(first: tuple, second: tuple) -> tuple:
    """NumPy broadcasting as Keras 3 does it for symbolic shapes (``None`` is unknown)."""
    a, b = list(first), list(second)
    a = [1] * (len(b) - len(a)) + a
    b = [1] * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif x is None:
            out.append(None if y == 1 else y)
        elif y == 1 or y is None or y == x:
            out.append(x)
        else:
            raise LayerError(f"shapes {format_shape(first)} and {format_shape(second)} "
                             "cannot be broadcast together")
    return tuple(out)


def _unknown_reason(layer, tensor) -> str:
    """Why a call's output is not known: its model's input shape where that is not known
    (giving it may settle the layer's own arguments too: ``Conv1D(inputs.shape[-1])``),
    else the layer's own reason, else its input's."""
    if isinstance(tensor, Tensor) and tensor.reason == INPUT_SHAPE_UNKNOWN:
        return INPUT_SHAPE_UNKNOWN
    if isinstance(layer, OpaqueLayer):
        return f"output of {layer.type} '{layer.name}' ({layer.reason})"
    if isinstance(tensor, Tensor):
        return tensor.reason or "input shape unknown"
    if is_unknown(tensor):
        return tensor.reason
    return f"{layer.type} '{layer.name}' was called on something that is not a tensor"


def output_tensors(layer, call_index: int) -> Any:
    """The tensor(s) a recorded call produced."""
    out = layer.calls[call_index].output_shape
    if isinstance(out, list):
        return [Tensor(shape, (layer, call_index, i)) for i, shape in enumerate(out)]
    return Tensor(out, (layer, call_index, 0))


# ---------------------------------------------------------------------- model methods

_USAGE_METHODS = {"compile", "fit", "fit_generator", "train_on_batch", "predict",
                  "predict_on_batch", "predict_generator", "evaluate", "test_on_batch"}
_BUILDING_METHODS = {"fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
                     "test_on_batch"}
# the usage methods that take data (all but compile)
DATA_USES = frozenset(_USAGE_METHODS - {"compile"})


def model_method(interp, model, method: str, args: list, kwargs: dict, node) -> Any:
    loc = interp.location(node)
    if method == "add" and isinstance(model, SequentialModel):
        sequential_add(interp, model, args[0] if args else kwargs.get("layer"), node)
        return None
    if method == "pop" and isinstance(model, SequentialModel):
        layer = model.layers.pop() if model.layers else None
        _sequential_rebuild(interp.state, model)
        return layer
    if method == "build":
        shape = args[0] if args else kwargs.get("input_shape")
        if isinstance(model, SequentialModel) and _is_shape(shape):
            if not model.has_input_layer:
                model.input_shape = tuple(shape)
                model.input_source = f"build() at line {loc.line}"
            _sequential_build(interp.state, model)
        return None
    if method in _USAGE_METHODS:
        if method != "compile":
            args, kwargs = data.resolve_fed(interp, args, kwargs, node)
        model.usage.setdefault(method, []).append((args, kwargs, loc))
        if method == "compile":
            compiled.record(model)  # what its train step updates (compiled.py)
        fed = args[0] if args else kwargs.get("x")
        if (isinstance(model, SequentialModel) and method in _BUILDING_METHODS
                and not model.built and data.fed_input_shape(fed) is not None
                and model.layers):
            _sequential_build(interp.state, model)  # Keras builds it on the first batch
        return Unknown(f"result of {method}()")
    if method == "summary":
        return None
    if method == "get_layer":
        wanted = args[0] if args else kwargs.get("name")
        index = args[1] if len(args) > 1 else kwargs.get("index")
        members = model_layers(model)
        if isinstance(wanted, str):
            found = next((layer for layer in members if layer.name == wanted), None)
            if found is not None:
                return found
        elif isinstance(index, int) and -len(members) <= index < len(members):
            return members[index]
        return Unknown("get_layer() of a layer not found statically")
    return Unknown(f"model method {method}() is not evaluated")


def sequential_add(interp, model: SequentialModel, layer: Any, node, rebuild: bool = True,
                    ) -> None:
    loc = interp.location(node)
    state = interp.state
    if isinstance(layer, Tensor) and layer.producer and layer.producer[0].type == "InputLayer":
        model.input_shape = layer.shape
        model.input_source = f"Input at line {layer.producer[0].location.line}"
        model.has_input_layer = True
        return
    if isinstance(layer, LayerRef) and layer.type == "InputLayer":
        hint = layer.input_hint
        if hint is not None:
            model.input_shape = hint
            model.input_source = f"InputLayer at line {layer.location.line}"
        model.has_input_layer = True
        return
    if is_unknown(layer) and getattr(layer, "constructed", None):
        layer = opaque_layer_from(interp, layer)
    if isinstance(layer, classes.ClassObject):
        layer = classes.as_layer(layer)
    if isinstance(layer, (SequentialModel, FunctionalModel)):
        if layer is model:
            state.note_error(loc, f"Sequential '{model.name}' cannot contain itself")
            return
        layer = model_as_layer(layer)
    if isinstance(layer, (LayerRef, OpaqueLayer, ModelLayer, classes.ClassLayer)):
        if not model.layers and not model.has_input_layer and layer.keras3_input_arg:
            # Keras 3 Sequential.add: the first layer's input_shape= becomes an InputLayer,
            # named then (it takes the next "input_layer" name)
            state.unique_name("input_layer")
            model.has_input_layer = True
        if not model.layers and getattr(layer, "dtype_policy", None) is not None:
            model.dtype_policy = layer.dtype_policy  # layers compute in the policy they were made in
        model.layers.append(layer)
        if rebuild:
            _sequential_rebuild(state, model)
        return
    why = f" ({layer.reason})" if is_unknown(layer) else ""
    interp.state.note_unresolved(loc, f"Sequential '{model.name}' layer",
                                 f"a layer that is not known statically was added{why}; "
                                 "later shapes are unknown")
    model.layers.append(OpaqueLayer("?", "?", loc, "layer not known statically"))


def opaque_layer_from(interp, value) -> OpaqueLayer:
    """The layer an object of an unknown class stands for, once it is used as a layer
    (added to a Sequential, or called on tensors).  Keras names custom layers from their
    class name like any other."""
    existing = getattr(value, "as_layer", None)
    if existing is not None:
        return existing
    class_name, loc, origin = value.constructed
    name = interp.state.unique_name(to_snake_case(class_name))
    reason = f"{class_name} is {origin}" if origin.startswith("a class") else origin
    interp.state.note_unresolved(loc, f"{class_name} '{name}'",
                                 reason + "; its output shape and weights are unknown")
    layer = OpaqueLayer(class_name, name, loc, reason)
    value.as_layer = layer
    return layer


def _sequential_rebuild(state, model: SequentialModel) -> None:
    """Keras 3 ``Sequential._maybe_rebuild``: with an InputLayer and at least one layer, the
    model is built again, and each build creates an internal Functional that takes the next
    ``functional`` name (so it changes the default names of functional models made later)."""
    model.built = False
    if model.layers and (model.has_input_layer or _starts_with_built_model(model)):
        _sequential_build(state, model)


def _starts_with_built_model(model: SequentialModel) -> bool:
    """Keras builds a Sequential whose first layer is a model with a known input shape."""
    first = model.layers[0]
    return (isinstance(first, ModelLayer) and len(model.layers) > 1 and first.model.built
            and model_input_shapes(first.model) is not None)


def _sequential_build(state, model: SequentialModel) -> None:
    """Keras 3 ``Sequential.build``: an InputLayer is put first if there is none yet."""
    if not model.layers:
        return
    if not model.has_input_layer:
        state.unique_name("input_layer")
        model.has_input_layer = True
        first = model.layers[0]
        if model.input_shape is None and isinstance(first, ModelLayer):
            shape = model_input_shapes(first.model)
            if shape is not None and not isinstance(shape, list):
                model.input_shape = shape
                model.input_source = f"input of model '{first.name}'"
    _build_nested_sequentials(state, model)
    state.unique_name("functional")
    model.built = True


def _build_nested_sequentials(state, model: SequentialModel) -> None:
    """Building a Sequential calls its layers: a Sequential inside it that has no input
    shape of its own is built on the shape that reaches it, as Keras does."""
    shape = sequential_input(model, None)[0]
    for layer in model.layers:
        if shape is None:
            return
        inner = layer.model if isinstance(layer, ModelLayer) else None
        if isinstance(inner, SequentialModel) and inner is not model and not inner.built \
                and inner.input_shape is None and not isinstance(shape, list):
            inner.input_shape = shape
            inner.input_source = f"its place in Sequential '{model.name}'"
            _sequential_build(state, inner)
        try:
            shape = sequential_step(layer, shape)
        except Exception:  # noqa: BLE001 - the graph reports it; nothing more to build here
            return

