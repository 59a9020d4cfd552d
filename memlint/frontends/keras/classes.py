"""Classes defined in the analysed file that subclass ``keras.layers.Layer`` or ``keras.Model``.

The class body is evaluated once (its methods are remembered, defaults evaluated as Python
does); constructing the class runs ``__init__`` with ``self`` bound to a :class:`ClassObject`
whose sub-layers are tracked as Keras 3's ``Tracker`` does (``model.layers`` is the order in
which each layer was first assigned, appended or set into a list or dict attribute).  Calling
the object on tensors (one, or a list, tuple or dict of them) makes it one layer of its class
name (:class:`ClassLayer`): ``build`` runs on the first call, ``call`` is traced on the input
shapes (it may return a tensor, or a list, tuple or dict of them), ``compute_output_shape`` is
honoured when given, and its weights are its ``add_weight`` variables plus those of its
sub-layers.  A model's first call on NumPy data keeps the data's batch size, as Keras's eager
call does.  Models and layer classes of the file can be wrapped in ``TimeDistributed``
(:class:`WrappedInner`).
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, Optional

import libcst as cst
import libcst.matchers as m

from memlint.frontends.keras import layer_subclasses, operations, training_loops, variables
from memlint.frontends.keras.names import to_snake_case
from memlint.frontends.keras.data import fed_batch_shapes, fed_input_shape, resolve_fed
from memlint.frontends.keras.values import (Array, FunctionalModel, LayerRef, ModelLayer,
                                            OpaqueLayer, Optimizer, SequentialModel, Tensor,
                                            Unknown, UserFunction, flatten_structure,
                                            is_unknown)
from memlint.ir import Location, Weight
from memlint.records import record

LAYER_BASES = {"keras.layers.Layer", "keras.Layer"}
MODEL_BASES = {"keras.Model"}


@record(eq=False)
class UserClass:
    """A Layer / Model subclass defined in the analysed file."""

    name: str
    kind: str  # "layer" or "model"
    methods: dict  # name -> UserFunction (own and inherited from user classes)
    location: Location
    attrs: dict = field(default_factory=dict)  # class attributes (``units = 3``)
    properties: frozenset = frozenset()  # methods decorated with @property
    # the registry layer the class derives from (``class DepthwiseConv2D(Conv2D)``), see
    # :mod:`.layer_subclasses`; None for Layer / Model subclasses
    registry_base: Optional[str] = None


@record(eq=False)
class ClassObject:
    """An object of a :class:`UserClass` under construction or in use."""

    cls: UserClass
    location: Location
    interp: Any
    name: Optional[str] = None
    attrs: dict = field(default_factory=dict)  # in assignment order
    tracked: list = field(default_factory=list)  # sub-layers in Keras's tracking order
    own_weights: list = field(default_factory=list)  # Weight from add_weight
    built: bool = False
    trainable: bool = True
    as_layer: Optional["ClassLayer"] = None
    # a Model subclass reported as a model of its own
    usage: dict = field(default_factory=dict)
    variable: Optional[str] = None
    variable_is_global: bool = False
    dtype_policy: Optional[tuple] = None
    input_shape: Any = None  # batch first, from its first call, build() or data
    input_source: str = ""
    # the targets fit() was given with the data (batch first; "unknown" when their shape is
    # not known; None: none given): a train_step() receives (x, y) then
    fed_targets: Any = None
    # data it was given whose shape is not known: why (for the note on its input shape)
    unsized_data: str = ""
    # its own train_step() runs what fit runs without calling the model (``self(x)``): the
    # step is traced from it on the whole batch, as for a model with no call()
    step_only: bool = False
    # its traced call() or train_step() went through code that may call a layer memlint did
    # not see (FileState.hidden_calls): a sub-layer nothing was seen to call may have run
    hidden_calls: bool = False
    # a class derived from a registry layer: the parent configured by super().__init__
    base_instance: Any = None
    parent_call: Optional[tuple] = None  # (args, kwargs) given to super().__init__


@record(eq=False)
class ClassLayer:
    """A :class:`ClassObject` as a layer of a model (one layer of its class name)."""

    obj: ClassObject
    name: str
    type: str
    location: Location
    calls: list = field(default_factory=list)
    error: Optional[str] = None
    input_hint: Optional[tuple] = None
    dtype_policy: Optional[tuple] = None
    keras3_input_arg: bool = False
    input_keys: Optional[list] = None  # the call now being traced had a dict of inputs
    # the call now being traced gave call() several tensors: (positional count, keywords)
    spread: Optional[tuple] = None
    # the other keyword arguments of the call now being traced, which Keras hands call()
    # too (``encoder(x, training=training)`` for ``def call(self, inputs, training)``)
    options: Optional[dict] = None


@record
class SuperCall:
    """``super`` inside a method of a user class."""

    obj: ClassObject


@record
class SuperProxy:
    """What ``super()`` evaluates to inside a method of a class of the file."""

    obj: ClassObject


@record
class ObjMethod:
    """A method looked up on a :class:`ClassObject` (user-defined or Layer's own)."""

    obj: Any
    method: str
    fn: Optional[UserFunction] = None


# ---------------------------------------------------------------------- definition

def define_class(interp, stmt: cst.ClassDef) -> Optional[UserClass]:
    """The :class:`UserClass` for ``stmt`` when it subclasses a Keras Layer or Model."""
    from memlint.frontends.keras.values import Ref
    kind = None
    registry_base = None
    inherited: dict = {}
    inherited_attrs: dict = {}
    inherited_properties: frozenset = frozenset()
    for arg in stmt.bases:
        base = interp.eval(arg.value)
        if isinstance(base, Ref) and base.name in MODEL_BASES:
            kind = kind or "model"
        elif isinstance(base, Ref) and base.name in LAYER_BASES:
            kind = kind or "layer"
        elif layer_subclasses.registry_base(base) is not None and kind is None:
            kind, registry_base = "layer", layer_subclasses.registry_base(base)
        elif isinstance(base, UserClass):
            kind = kind or base.kind
            registry_base = registry_base or base.registry_base
            inherited = {**base.methods, **inherited}
            inherited_attrs = {**base.attrs, **inherited_attrs}
            inherited_properties = inherited_properties | base.properties
        else:
            return None
    if kind is None:
        return None
    interp.note_decorators(stmt)
    body: dict = {}
    properties: set = set()
    saved = (interp.scope, interp.outer, len(interp.state.definitions))
    # methods see the enclosing function's names (a class made inside a function), never
    # the class body's own names
    enclosing = (interp.scope,) + interp.outer if interp.scope is not interp.globals else ()
    interp.scope, interp.outer = body, enclosing
    try:
        statements = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else []
        for item in statements:
            if isinstance(item, cst.FunctionDef):
                interp.define_function(item)
                body[item.name.value] = replace(body[item.name.value], closure=enclosing)
                if any(isinstance(d.decorator, cst.Name) and d.decorator.value == "property"
                       for d in item.decorators):
                    properties.add(item.name.value)
            elif isinstance(item, cst.SimpleStatementLine):
                interp.exec_statement(item)  # class attributes: ``units = 3``
    finally:
        interp.scope, interp.outer = saved[0], saved[1]
        del interp.state.definitions[saved[2]:]
    methods = {**inherited, **{k: v for k, v in body.items() if isinstance(v, UserFunction)}}
    attrs = {**inherited_attrs,
             **{k: v for k, v in body.items() if not isinstance(v, UserFunction)}}
    return UserClass(stmt.name.value, kind, methods, interp.location(stmt), attrs,
                     frozenset(properties | inherited_properties), registry_base)


# ---------------------------------------------------------------------- objects

def construct(interp, cls: UserClass, args: list, kwargs: dict, node) -> Any:
    if cls.registry_base is not None and layer_subclasses.inherits(cls):
        return layer_subclasses.construct_inherited(interp, cls, args, kwargs, node)
    obj = ClassObject(cls, interp.location(node), interp)
    obj.dtype_policy = (interp.state.dtype_policy, interp.state.dtype_source)
    init = cls.methods.get("__init__")
    before = len(interp.state.models)
    if init is not None:
        run_method(interp, obj, init, args, kwargs, node)
    elif cls.registry_base is not None:
        layer_subclasses.init_parent(obj, args, kwargs, node)
        _name(obj, kwargs)
    else:
        _name(obj, kwargs)
    for model in interp.state.models[before:]:
        if model.variable is None:
            model.inside_class = True  # a part of this object (self.ffn = Sequential(...))
    if obj.name is None:
        _name(obj, {})
    if cls.kind == "model":
        interp.state.models.append(obj)
    return obj


def _name(obj: ClassObject, kwargs: dict) -> None:
    if obj.name is not None:
        return
    given = kwargs.get("name")
    obj.name = given if isinstance(given, str) else \
        obj.interp.state.unique_name(to_snake_case(obj.cls.name))
    if kwargs.get("trainable") is False:
        obj.trainable = False


def run_method(interp, obj: ClassObject, fn: UserFunction, args: list, kwargs: dict, node):
    bound = replace(fn, closure=({"super": SuperCall(obj)},) + fn.closure)
    return interp.call_function(bound, [obj, *args], kwargs, node)


def get_attribute(obj: Any, attr: str) -> Any:
    if isinstance(obj, SuperProxy):
        return ObjMethod(obj, attr)
    if attr in obj.attrs:
        return obj.attrs[attr]
    if attr == "name":
        return obj.name
    if attr == "trainable":
        return obj.trainable
    if attr == "layers":
        return tracked_layers(obj)
    fn = obj.cls.methods.get(attr)
    if fn is not None and attr in obj.cls.properties:
        return run_method(obj.interp, obj, fn, [], {}, LocationNode(obj.location))
    if fn is not None:
        return ObjMethod(obj, attr, fn)
    if attr in obj.cls.attrs:
        return obj.cls.attrs[attr]
    if attr in ("add_weight", "build", "compute_output_shape", "call", "summary", "compile",
                "fit", "predict", "evaluate", "train_on_batch", "stateless_call"):
        return ObjMethod(obj, attr)
    unknown = Unknown(f"attribute '{attr}' of {obj.cls.name} is not known statically")
    # what Keras's Model keeps from compile(): its loss and metrics run no layer of the model,
    # nor does its compute_loss() (the compiled loss and the layers' added losses)
    unknown.runs_no_layer = attr in ("loss", "compiled_loss", "compiled_metrics",
                                     "compute_loss")
    return unknown


def set_attribute(obj: ClassObject, attr: str, value: Any) -> None:
    """``self.attr = value``; ``trainable`` reaches every sub-layer, as in Keras 3."""
    if attr == "trainable" and isinstance(value, bool):
        from memlint.frontends.keras.nested import set_trainable
        obj.trainable = value
        for layer in tracked_layers(obj):
            set_trainable(layer, value)
        return
    obj.attrs[attr] = track(obj, value)


def call_method(interp, method: ObjMethod, args: list, kwargs: dict, node) -> Any:
    obj = method.obj
    if isinstance(obj, SuperProxy):
        registry_derived = obj.obj.cls.registry_base is not None
        if method.method == "__init__":
            if registry_derived:
                layer_subclasses.init_parent(obj.obj, args, kwargs, node)
            _name(obj.obj, kwargs)
        elif registry_derived:
            return layer_subclasses.super_method(obj.obj, method.method, args, kwargs)
        elif method.method == "compile" and obj.obj.cls.kind == "model" and (
                args or "optimizer" in kwargs or uses_compiled_optimizer(obj.obj.cls)):
            # a compile() of its own passing the optimizer on to Keras's (a distiller's), or
            # none where the step applies Keras's default; a GAN's passes none, its
            # train_step() applies optimizers of its own (:func:`_own_compile`)
            return call_method(interp, ObjMethod(obj.obj, "compile"), args, kwargs, node)
        return None
    if method.fn is not None:
        if method.method == "compile" and obj.cls.kind == "model":
            return _own_compile(interp, obj, method.fn, args, kwargs, node)
        return run_method(interp, obj, method.fn, args, kwargs, node)
    if method.method == "add_weight":
        return _add_weight(obj, args, kwargs)
    if method.method == "stateless_call":  # (trainable, non-trainable, inputs...): a call
        return (call_object(interp, obj, list(args[2:]), kwargs, node),
                Unknown("the non-trainable variables stateless_call returns"))
    if obj.cls.kind == "model" and method.method in _USAGE_METHODS:
        loc = interp.location(node)
        if method.method != "compile":
            args, kwargs = resolve_fed(interp, args, kwargs, node)
        obj.usage.setdefault(method.method, []).append((args, kwargs, loc))
        if method.method == "compile":
            from memlint.frontends.keras import compiled
            compiled.record(obj)
        fed = args[0] if args else kwargs.get("x")
        shape = fed_input_shape(fed) if not isinstance(fed, Tensor) else None
        if method.method in _TRAIN_METHODS and obj.input_shape is None \
                and step_bypasses_call(obj.cls):
            obj.step_only = True
            shape = fed_batch_shapes(fed) or shape  # train_step() gets the whole batch
        elif method.method in _TRAIN_METHODS and obj.input_shape is None and \
                "call" not in obj.cls.methods and "train_step" in obj.cls.methods:
            # no call(): its train_step() gets the whole batch too (keras.io's conditional
            # GAN unpacks the images and one-hot labels of a dataset of pairs)
            shape = fed_batch_shapes(fed) or shape
        if shape is None and isinstance(fed, Tensor) and _is_shape(fed.shape) \
                and len(fed.shape) >= 2:
            shape = (None,) + tuple(fed.shape[1:])
        if method.method != "compile" and shape is None and fed is not None \
                and not obj.unsized_data:
            obj.unsized_data = _why_unsized(fed, f"the data passed to {method.method}() at "
                                                 f"line {loc.line}")
        if method.method != "compile" and shape is not None:
            targets = args[1] if len(args) > 1 else kwargs.get("y")
            if targets is not None and obj.input_shape is None:
                obj.fed_targets = (None,) + tuple(targets.shape[1:]) \
                    if isinstance(targets, Array) and targets.shape else \
                    fed_input_shape(targets) or "unknown"
            trace_model(obj, shape, f"data passed to {method.method}() at line {loc.line}",
                        loc)
        return Unknown(f"result of {method.method}()")
    if method.method == "build":
        shape = args[0] if args else kwargs.get("input_shape")
        if obj.cls.kind == "model" and _is_shape(shape):
            # Keras 3 Model.build() of a subclassed model does not run call(): its weights
            # appear on the first call, in fit(); memlint traces call() now to count them
            loc = interp.location(node)
            trace_model(obj, tuple(shape), f"build() at line {loc.line}", loc)
        return None
    if method.method in ("summary", "save", "save_weights"):
        return None
    return Unknown(f"method {method.method}() of {obj.cls.name} is not evaluated")


def _add_weight(obj: ClassObject, args: list, kwargs: dict) -> Any:
    shape = kwargs.get("shape", args[0] if args else ())
    if shape is None:
        shape = ()
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) for d in shape):
        obj.interp.state.note_unresolved(obj.location, f"{obj.cls.name} weight",
                                         "add_weight() shape is not known statically")
        return Unknown("weight of a shape not known statically")
    trainable = kwargs.get("trainable", True)
    name = kwargs.get("name") if isinstance(kwargs.get("name"), str) else "variable"
    obj.own_weights.append(Weight(name, tuple(shape), trainable=trainable is not False))
    return Tensor((*shape,))


_TRAIN_METHODS = frozenset({"fit", "fit_generator", "train_on_batch"})


def step_bypasses_call(cls: UserClass) -> bool:
    """Whether a Model subclass has a call() and a train_step() of its own, and no method but
    call() calls the model itself (``self(x)``, ``self.call(x)``, ``super().train_step``):
    fit then runs the layers and models train_step() calls on the batch as it comes
    (keras.io's triplet-loss siamese network hands its three images to an inner model)."""
    if cls.kind != "model" or "call" not in cls.methods or "train_step" not in cls.methods:
        return False
    itself = m.Call(func=m.Name("self") | m.Attribute(value=m.Name("self"), attr=m.Name("call"))
                    | m.Attribute(value=m.Call(func=m.Name("super")),
                                  attr=m.Name("train_step")))
    return not any(m.findall(fn.node, itself) for name, fn in cls.methods.items()
                   if name != "call" and getattr(fn, "node", None) is not None)


def uses_compiled_optimizer(cls: UserClass) -> bool:
    """Whether fit's step applies the optimizer compile() gives Keras: Keras's own
    train_step(), or one of the class's that calls ``super().train_step()`` or reads
    ``self.optimizer`` (in any method: a helper the step calls)."""
    if cls.kind != "model" or "train_step" not in cls.methods:
        return True
    used = m.Attribute(value=m.Name("self"), attr=m.Name("optimizer")) | m.Attribute(
        value=m.Call(func=m.Name("super")), attr=m.Name("train_step"))
    return any(m.findall(fn.node, used) for name, fn in cls.methods.items()
               if name != "compile" and getattr(fn, "node", None) is not None)


def _own_compile(interp, obj: ClassObject, fn, args: list, kwargs: dict, node) -> Any:
    """A Model subclass's own ``compile()``.  One that hands an optimizer on to Keras's, or
    whose step applies Keras's, records it there (:func:`call_method`); a GAN's hands none
    and keeps the optimizers it is given for its ``train_step()`` (``d_optimizer``,
    ``g_optimizer``): those are the model's, recorded as this compile()'s (the analysis
    keeps the one with the most state)."""
    from memlint.frontends.keras import compiled
    before, kept = len(obj.usage.get("compile", [])), obj.attrs.get("optimizer")
    out = run_method(interp, obj, fn, args, kwargs, node)
    given = [v for v in list(args) + list(kwargs.values()) if isinstance(v, Optimizer)]
    records = obj.usage.get("compile", [])
    loc = interp.location(node)
    assigned = obj.attrs.get("optimizer")
    if isinstance(assigned, Optimizer) and assigned is not kept:
        # ``self.optimizer = Adam(...)`` after super().compile() (keras.io's Zero-DCE): the
        # optimizer Keras's step or the class's own applies is that one
        if len(records) > before:
            call_args, call_kwargs, loc = records[-1]
            records[-1] = (call_args, {**call_kwargs, "optimizer": assigned}, loc)
        else:
            obj.usage.setdefault("compile", []).append(([], {"optimizer": assigned}, loc))
        compiled.record(obj)
    elif len(records) == before and given:
        obj.usage.setdefault("compile", []).append(
            ([], {"optimizer": given[0], "optimizers_given": given[1:]}, loc))
        compiled.record(obj)
    return out


_USAGE_METHODS = {"compile", "fit", "fit_generator", "train_on_batch", "predict",
                  "predict_on_batch", "predict_generator", "evaluate", "test_on_batch"}


def trace_model(obj: ClassObject, shape: Any, source: str, loc: Location,
                keys: Optional[list] = None, spread: Optional[tuple] = None,
                options: Optional[dict] = None) -> None:
    """The first call of a Model subclass on data or a shape: trace its call().  ``keys``:
    the data was a dict (``shape`` then lists its values' shapes in that key order);
    ``spread``: several arrays, spread over call()'s arguments (:func:`_spread_tensors`)."""
    from memlint.frontends.keras.models import apply
    if obj.input_shape is not None:
        return
    obj.input_shape, obj.input_source = shape, source
    inputs = [Tensor(tuple(s)) for s in shape] if isinstance(shape, list) else Tensor(shape)
    layer = as_layer(obj)
    layer.input_keys, layer.spread, layer.options = keys, spread, options
    try:
        apply(obj.interp.state, layer, inputs, loc)
    finally:
        layer.input_keys = layer.spread = layer.options = None


def call_object(interp, obj: ClassObject, args: list, kwargs: dict, node) -> Any:
    """``obj(inputs, ...)``.  On symbolic tensors (one, or a list, tuple or dict of them) it
    is a layer call.  A model's first call on NumPy data runs eagerly in Keras, which then
    records the data's real shapes, batch size included: call() is traced on those."""
    from memlint.frontends.keras.models import call_layer
    from memlint.frontends.keras.values import Array
    data = args[0] if args else kwargs.get("inputs")
    keys = _dict_keys(data)
    flat = flatten_structure(data)
    extra = flatten_structure(list(args[1:]) + list(kwargs.values()))
    if any(isinstance(t, Tensor) for t in flat + extra):
        layer = as_layer(obj)
        if keys is not None:
            args = [[data[k] for k in keys], *args[1:]] if args else [[data[k] for k in keys]]
            kwargs = {k: v for k, v in kwargs.items() if k != "inputs"}
        spread = None if keys is not None else _spread_tensors(obj, args, kwargs)
        if spread is not None:
            tensors = list(args) + [kwargs[k] for k in spread[1]]
            args, kwargs = [tensors], {k: v for k, v in kwargs.items() if k not in spread[1]}
        layer.input_keys, layer.spread = keys, spread
        layer.options = _call_options(obj, kwargs)
        try:
            return call_layer(interp, layer, args, kwargs, node)
        finally:
            layer.input_keys = layer.spread = layer.options = None
    if obj.cls.kind == "model" and flat and all(
            isinstance(a, Array) and len(a.shape) >= 1 for a in flat):
        loc = interp.location(node)
        shapes = [tuple(a.shape) for a in flat]
        single = isinstance(data, Array)
        if training_loops.trains(interp, kwargs):  # a custom training loop's step
            training_loops.record_call(interp, obj.usage, args, kwargs, node, obj.name)
        spread = _spread_data(obj, args, kwargs) if single else None
        if spread is not None:  # ``encoder(inp, hidden)``: each array one of call()'s
            shapes = [tuple(a.shape) for a in args] + [tuple(kwargs[k].shape)
                                                       for k in spread[1]]
        trace_model(obj, shapes if spread is not None else shapes[0] if single else shapes,
                    f"its call on data at line {loc.line}", loc, keys, spread,
                    _call_options(obj, {k: v for k, v in kwargs.items()
                                        if spread is None or k not in spread[1]}))
        made = _result_on_data(obj, shapes if spread is not None or not single
                               else shapes[0])
        if made is not None:
            return made
    elif obj.cls.kind == "model" and is_unknown(data) and not getattr(interp, "tracing", 0) \
            and training_loops.trains(interp, kwargs):
        # a training loop's step on data memlint cannot size: its batch is not known
        training_loops.record_call(interp, obj.usage, args, kwargs, node, obj.name)
    return Unknown(f"result of calling {obj.cls.name} on data")


def _spread_tensors(obj: ClassObject, args: list, kwargs: dict) -> Optional[tuple]:
    """Keras hands call() every argument of the layer call: where it gets several tensors
    (``CTCLayer()(labels, predictions)``, ``block(x, context=c)`` with ``context`` a
    required parameter), they are the layer's inputs, spread back over call()'s arguments
    when it is traced: (how many positional, the keyword names); None for one input.
    Keyword tensors of parameters with a default (``mask=``) are left out, as before."""
    call = obj.cls.methods.get("call")
    if call is None or not args or not all(isinstance(a, Tensor) for a in args):
        return None
    params = getattr(call.node, "params", None)
    if params is None:
        return None
    required = {p.name.value for p in [*params.posonly_params, *params.params,
                                       *params.kwonly_params] if p.default is None}
    keywords = [k for k, v in kwargs.items() if isinstance(v, Tensor) and k in required]
    if len(args) + len(keywords) < 2:
        return None
    return len(args), keywords


def _call_options(obj: ClassObject, kwargs: dict) -> Optional[dict]:
    """The keyword arguments of a call that are no tensors or data (``training=True``,
    ``mask=None``), where call() takes them by name: Keras hands them on."""
    call = obj.cls.methods.get("call")
    params = getattr(getattr(call, "node", None), "params", None)
    if params is None:
        return None
    names = {p.name.value for p in [*params.params, *params.kwonly_params]}
    anything = isinstance(params.star_kwarg, cst.Param)
    options = {k: v for k, v in kwargs.items() if (k in names or anything)
               and not any(isinstance(leaf, (Tensor, Array))
                           for leaf in flatten_structure(v))}
    return options or None


def _spread_data(obj: ClassObject, args: list, kwargs: dict) -> Optional[tuple]:
    """As :func:`_spread_tensors`, for a model called on several arrays (``decoder(x,
    hidden, enc_output)`` in a training loop), or None."""
    if len(args) + len(kwargs) < 2 or not all(
            isinstance(a, Array) and a.shape for a in args):
        return None
    arrays = {k: v for k, v in kwargs.items() if isinstance(v, Array) and v.shape}
    return _spread_tensors(obj, [Tensor(tuple(a.shape)) for a in args],
                           {k: Tensor(tuple(v.shape)) for k, v in arrays.items()})


def _result_on_data(obj: ClassObject, shapes: Any) -> Any:
    """What a Model subclass called eagerly on arrays of ``shapes`` returns: arrays of the
    shapes its traced call gave for those inputs (an encoder's outputs and state, handed to
    its decoder in the same step), or None where no traced call had them."""
    layer = obj.as_layer
    for record in (layer.calls if layer is not None else []):
        if record.input_shapes == shapes and record.output_shape is not None:
            return _as_data(record.output_shape)
    return None


def _as_data(shapes: Any) -> Any:
    if isinstance(shapes, tuple) and all(d is None or isinstance(d, int) for d in shapes):
        return Array(shapes)  # (the dtype: the policy's, not kept)
    if isinstance(shapes, (list, tuple)):
        return type(shapes)(_as_data(s) for s in shapes)
    if isinstance(shapes, dict):
        return {k: _as_data(v) for k, v in shapes.items()}
    return Unknown("an output of a model called on data, not known statically")


def _why_unsized(fed: Any, what: str) -> str:
    """Why the shape of data a model was given is not known: ``what`` and the first unknown
    value in it (a dataset's element: ``from_tensor_slices`` of ids read from a file)."""
    from memlint.frontends.keras.data import Dataset
    leaves = flatten_structure(fed.element if isinstance(fed, Dataset) else fed)
    unknown = next((leaf for leaf in leaves if isinstance(leaf, Unknown)), None)
    return f"{what} has no shape known statically" + (
        f" ({unknown.reason})" if unknown is not None and unknown.reason else "")


def _dict_keys(data: Any) -> Optional[list]:
    """The keys of a dict of inputs in Keras's flattening order (sorted), else None."""
    if not isinstance(data, dict):
        return None
    try:
        return sorted(data)
    except TypeError:
        return list(data)


def model_graph(state, obj: ClassObject, input_override=None):
    """The ModelGraph of a Model subclass: its tracked layers, each with its first call."""
    from memlint.frontends.keras.graphs import _node
    from memlint.ir import LayerNode, ModelGraph
    if obj.input_shape is None and input_override is not None:
        trace_model(obj, tuple(input_override), "--input-shape", obj.location)
    graph = ModelGraph(name=obj.name, location=obj.location, kind=obj.cls.name,
                       variable=obj.variable)
    if obj.input_shape is None:
        state.note_unresolved(obj.location, f"{obj.cls.name} '{obj.name}' input shape",
                              (obj.unsized_data or "the model is never called, built or "
                               "fitted on a known shape") + "; pass --input-shape")
    else:
        graph.input_shapes = [obj.input_shape] if not isinstance(obj.input_shape, list) \
            else list(obj.input_shape)
    # the calls the traced call() made, each layer's in order (a layer called twice, as a
    # pooling layer after each block, has two); the table shows each layer's first
    traced: dict = {}
    own = obj.as_layer.calls[0].inner if obj.as_layer is not None and obj.as_layer.calls \
        else []
    for layer, index in own:
        traced.setdefault(id(layer), []).append(index)
    pairs, called = [], []
    for layer in tracked_layers(obj):
        if isinstance(layer, ModelLayer):
            _build_sequential(state, layer.model)
        if layer.calls:
            indices = traced.get(id(layer)) or [0]
            graph.layers.append(_node(layer, indices))
            pairs.append((layer, indices))
            called.append(graph.layers[-1])
        else:
            graph.layers.append(_idle_node(obj, layer))
    names = operations.OperationNames(node.name for node in graph.layers)
    collect = operations.OperationCollector(names)
    for (layer, indices), node in zip(pairs, called):
        for index in indices:
            record = layer.calls[index]
            graph.operations += [op for op, _, _ in collect.before(record.parents)]
            node.inbound.append(operations.refs(record.parents, names))
    if obj.as_layer is not None and obj.as_layer.calls:  # operations after the last layer
        returned = [p for p in obj.as_layer.calls[0].returned_by if p]
        graph.operations += [op for op, _, _ in collect.before(returned)]
        if obj.as_layer.calls[0].output_shape is None:
            # what its call() returns is not known (an operation memlint does not evaluate
            # after the last layer): the step's tensors from there on are not counted
            graph.operations.append(LayerNode(
                name=f"{obj.cls.name}.call() result", type="Unknown", location=obj.location,
                unresolved=obj.as_layer.error or "not known statically"))
    return graph


def _idle_node(obj: ClassObject, layer) -> "LayerNode":
    """A sub-layer the traced step never called.  Where nothing in the trace could have
    called it unseen, it is what Keras shows: a built functional model (an EMA copy, a
    target network) with its weights and own output, run by nothing in the step; a plain
    layer with the weights it was built with (none, unbuilt); a Sequential of no Input with
    none.  Otherwise (the step was not traced, or may have called it unseen) its size is
    not known."""
    from memlint.frontends.keras.graphs import own_output
    from memlint.frontends.keras.nested import layer_weights, model_weights
    from memlint.frontends.keras.values import SequentialModel
    from memlint.ir import LayerNode, ModelNode
    own = own_output(layer.model) if isinstance(layer, ModelLayer) else None
    # a Sequential built on its Input holds its weights (Keras gives it no output of its
    # own until it is called)
    built = isinstance(layer, ModelLayer) and isinstance(layer.model, SequentialModel) \
        and layer.model.input_shape is not None
    # the trace followed the step fit runs: a train_step() of its own beside call() is not
    # traced (its calls of other layers, a distiller's teacher, are not seen)
    step_traced = "train_step" not in obj.cls.methods or "call" not in obj.cls.methods \
        or obj.step_only
    seen_all = not obj.hidden_calls and step_traced and obj.as_layer is not None \
        and bool(obj.as_layer.calls)
    if seen_all and own is not None:
        return ModelNode(name=layer.name, type=layer.type, location=layer.location,
                         config={"model": layer.model.name}, weights=model_weights(layer.model),
                         own_output=own, idle=True)
    if seen_all and built:
        return LayerNode(name=layer.name, type=layer.type, location=layer.location,
                         config={"model": layer.model.name}, weights=model_weights(layer.model),
                         idle=True)
    if seen_all and isinstance(layer, ModelLayer) and isinstance(layer.model, SequentialModel):
        # a Sequential of no Input, never called (a masked autoencoder's test-time
        # augmentation): Keras never builds it, and it holds nothing
        return LayerNode(name=layer.name, type=layer.type, location=layer.location,
                         config={"model": layer.model.name}, idle=True)
    if seen_all and isinstance(layer, LayerRef):
        return LayerNode(name=layer.name, type=layer.type, location=layer.location,
                         config=dict(layer.instance.config), weights=layer_weights(layer),
                         idle=True)
    traced = obj.as_layer is not None and bool(obj.as_layer.calls)
    return LayerNode(name=layer.name, type=layer.type, location=layer.location,
                     unresolved="never called in call()" if traced else
                     "call() not traced: the model is never called on an input of a known "
                     "shape")


# ---------------------------------------------------------------------- as a layer

def as_layer(obj: ClassObject) -> ClassLayer:
    if obj.as_layer is None:
        state = obj.interp.state
        obj.as_layer = ClassLayer(obj, obj.name, obj.cls.name, obj.location,
                                  dtype_policy=(state.dtype_policy, state.dtype_source))
    return obj.as_layer


def output_for(layer: ClassLayer, shapes: Any, node_loc: Location) -> Any:
    """Build (first call) and trace ``call`` on ``shapes``; the output shape(s)."""
    obj = layer.obj
    interp = obj.interp
    node = LocationNode(node_loc)
    if obj.cls.kind == "model" and obj.input_shape is None:
        obj.input_shape, obj.input_source = shapes, f"its first call at line {node_loc.line}"
    if obj.cls.registry_base is not None:
        return layer_subclasses.output_for(layer, shapes, node)
    _build_once(obj, shapes[0] if layer.spread is not None else shapes, node)
    call = obj.cls.methods.get("call")
    step = obj.cls.methods.get("train_step") if obj.cls.kind == "model" else None
    if call is None and step is None:
        raise ClassUnresolved(f"{obj.cls.name} has no call() method")
    hidden = interp.state.hidden_calls
    try:
        if call is None or obj.step_only:
            out = _train_step_output(layer, step, shapes, node)
        else:
            args, kwargs = _call_arguments(layer, shapes)
            out = run_method(interp, obj, call, args, kwargs, node)
            loss = obj.cls.methods.get("compute_loss") if obj.cls.kind == "model" else None
            if loss is not None and layer.spread is None:
                _trace_compute_loss(obj, loss, args[0], out, node)
    finally:
        obj.hidden_calls |= interp.state.hidden_calls > hidden
    # what made each tensor call() returned (for the memory model's wiring of the inside)
    interp.state.returned_by = [t.producer if isinstance(t, Tensor) else None
                                for t in flatten_structure(out)]
    given = obj.cls.methods.get("compute_output_shape")
    if given is not None:
        declared = run_method(interp, obj, given, [_shape_arg(shapes)], {}, node)
        if _is_shape(declared):
            return tuple(declared)
    return _shape_of(out, obj)


def _train_step_output(layer: ClassLayer, step, shapes: Any, node) -> Any:
    """A Model subclass with no ``call()`` whose ``train_step(data)`` runs its models and
    layers itself (keras.io's VAE): what ``fit`` runs is that step, traced on the input data;
    the output of its last layer or model call is the step's output."""
    from memlint.frontends.keras.models import output_tensors
    obj = layer.obj
    data = _call_inputs(layer, shapes)
    if obj.fed_targets is not None:  # fit(x, y): the step gets (x, y)
        targets = obj.fed_targets
        data = (data, Tensor(targets) if _is_shape(targets) else
                Tensor(None, reason="the shape of the targets fit() was given is not known"))
    run_method(obj.interp, obj, step, [data], {}, node)
    calls = getattr(obj.interp.state, "call_collector", None) or []
    if not calls:
        raise ClassUnresolved(f"{obj.cls.name} has no call() method, and its train_step() "
                              "calls no layer or model")
    why = ": its train_step() never calls the model itself" if obj.step_only \
        else " has no call()"
    obj.interp.state.note_info(
        obj.location, f"{obj.cls.name} '{obj.name}'{why}: memlint reads the step fit "
        "runs from its train_step(), as one forward and backward pass over every layer and "
        "model call it makes (calls outside a GradientTape, or under a second one, are counted "
        "as if trained together: an over-estimate)")
    last, index = calls[-1]
    if last.calls[index].output_shape is None:
        return Tensor(None, reason=f"the last call its train_step() makes, of {last.name}, "
                                   "is of a size not known statically")
    return output_tensors(last, index)


def _trace_compute_loss(obj: ClassObject, loss, inputs: Any, out: Any, node) -> None:
    """A Model subclass's own ``compute_loss(x, y, y_pred)`` runs in the step fit runs, on
    the data and call()'s output: the layers and models it calls (a distiller's teacher,
    keras.io's knowledge distillation) run there too, and are traced as call()'s are.  It
    is called as Keras's trainer calls it: by keyword, ``training`` only where accepted."""
    targets = obj.fed_targets
    y = Tensor(targets) if _is_shape(targets) else Tensor(
        None, reason="the shape of the targets fit() was given is not known")
    kwargs = {"x": inputs, "y": y, "y_pred": out, "sample_weight": None}
    params = getattr(loss.node, "params", None)
    if params is not None and "training" in [p.name.value for p in [
            *params.posonly_params, *params.params, *params.kwonly_params]]:
        kwargs["training"] = True
    run_method(obj.interp, obj, loss, [], kwargs, node)


def _call_arguments(layer: ClassLayer, shapes: Any) -> tuple:
    """call()'s positional and keyword arguments: the inputs, or the tensors the layer call
    spread over several arguments."""
    options = dict(layer.options or {})
    if layer.spread is None:
        return [_call_inputs(layer, shapes)], options
    count, keywords = layer.spread
    tensors = [Tensor(s) for s in shapes]
    return tensors[:count], {**options, **dict(zip(keywords, tensors[count:]))}


def _call_inputs(layer: ClassLayer, shapes: Any) -> Any:
    """What call() receives: a tensor, a list of them, or the dict it was called on."""
    if layer.input_keys is not None:
        listed = shapes if isinstance(shapes, list) else [shapes]
        return {k: Tensor(s) for k, s in zip(layer.input_keys, listed)}
    return [Tensor(s) for s in shapes] if isinstance(shapes, list) else Tensor(shapes)


def _build_once(obj: ClassObject, shapes: Any, node) -> None:
    """Keras builds a layer once: its ``build`` (when it has one) on the first input shape."""
    if not obj.built:
        obj.built = True
        build = obj.cls.methods.get("build")
        if build is not None:
            run_method(obj.interp, obj, build, [_shape_arg(shapes)], {}, node)


class ClassUnresolved(Exception):
    pass


def _shape_arg(shapes: Any) -> Any:
    return [tuple(s) for s in shapes] if isinstance(shapes, list) else tuple(shapes)


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value)


def _shape_of(out: Any, obj: ClassObject) -> Any:
    """The shape(s) ``call`` returned: one tensor, or a list, tuple or dict of them (flattened
    as Keras's ``tree.flatten`` does: dict values in sorted key order)."""
    if isinstance(out, Tensor) and out.shape is not None:
        return tuple(out.shape)
    flat = flatten_structure(out)
    if flat and all(isinstance(t, Tensor) and t.shape is not None for t in flat):
        return [tuple(t.shape) for t in flat]
    bad = next((t for t in flat if not isinstance(t, Tensor) or t.shape is None), out)
    reason = getattr(bad, "reason", "") or "its call() result is not known statically"
    raise ClassUnresolved(f"{obj.cls.name}.call(): {reason}")


class LocationNode:
    """Stands for a call site when tracing outside the statement being evaluated."""

    def __init__(self, loc: Location):
        self.loc = loc


def tracked_layers(obj: ClassObject) -> list:
    """``model.layers``: direct sub-layers in the order Keras tracked them, each once."""
    seen, unique = set(), []
    for value in obj.tracked:
        layer = _layer_form(value)
        if id(layer) not in seen:
            seen.add(id(layer))
            unique.append(layer)
    return unique


def _layer_form(value: Any) -> Any:
    if isinstance(value, ClassObject):
        return as_layer(value)
    if isinstance(value, (SequentialModel, FunctionalModel)):
        from memlint.frontends.keras.nested import model_as_layer
        return model_as_layer(value)
    return value


def _is_layer(value: Any) -> bool:
    return isinstance(value, (ClassObject, LayerRef, OpaqueLayer, ModelLayer, SequentialModel,
                              FunctionalModel))


def track(obj: ClassObject, value: Any, depth: int = 0) -> Any:
    """Keras 3 ``Tracker.track`` on ``self.attr = value``: a layer is tracked the first time
    it is seen; a list or dict becomes a tracking copy (what is appended or set in it later
    is tracked then, what is added through another name is neither tracked nor seen); a
    tuple's items are tracked.  Returns the value to store."""
    if depth > 8:
        return value
    if _is_layer(value):
        if not any(value is seen for seen in obj.tracked):
            obj.tracked.append(value)
        return value
    if isinstance(value, variables.KerasVariable):  # one of its weights, a tensor to use
        if not any(value.weight is seen for seen in obj.own_weights):
            obj.own_weights.append(value.weight)
        return Tensor(tuple(value.weight.shape))
    if isinstance(value, tuple):
        return tuple(track(obj, item, depth + 1) for item in value)
    if isinstance(value, list):
        return TrackedList([track(obj, item, depth + 1) for item in value], owner=obj)
    if isinstance(value, dict):
        return TrackedDict({k: track(obj, v, depth + 1) for k, v in value.items()}, owner=obj)
    return value


class TrackedList(list):
    """A list kept on a custom layer or model: items appended to it are tracked, a popped
    one is no longer (``list[i] = layer`` is not tracked, as in Keras)."""

    def __init__(self, items=(), owner: Optional[ClassObject] = None):
        super().__init__(items)
        self.owner = owner

    def append(self, value):
        track(self.owner, value, 1)
        super().append(value)

    def extend(self, values):
        values = list(values)
        for value in values:
            track(self.owner, value, 1)
        super().extend(values)

    def insert(self, index, value):
        track(self.owner, value, 1)
        super().insert(index, value)

    def pop(self, index=-1):
        value = super().pop(index)
        self.owner.tracked[:] = [v for v in self.owner.tracked if v is not value]
        return value


class TrackedDict(dict):
    """A dict kept on a custom layer or model: values set in it are tracked (not those of
    ``setdefault``, as in Keras's ``TrackedDict``)."""

    def __init__(self, items=(), owner: Optional[ClassObject] = None):
        super().__init__(items)
        self.owner = owner

    def __setitem__(self, key, value):
        track(self.owner, value, 1)
        super().__setitem__(key, value)

    def update(self, *args, **kwargs):
        items = dict(*args, **kwargs)
        for value in items.values():
            track(self.owner, value, 1)
        super().update(items)


def _build_sequential(state, model) -> None:
    """A Sequential kept inside a custom layer is never reported as a model of its own: build
    its layers' weights (once) from the input shape its first call gave it."""
    from memlint.frontends.keras.graphs import to_graph
    from memlint.frontends.keras.values import SequentialModel
    if isinstance(model, SequentialModel) and not getattr(model, "weights_built", False) \
            and model.input_shape is not None:
        model.weights_built = True
        to_graph(state, model)


def class_weights(obj: ClassObject, depth: int = 0) -> list:
    """Every weight of the object: its own, then its sub-layers', with trainable flags."""
    from memlint.frontends.keras.nested import layer_weights, model_weights
    if depth > 16:
        return []
    weights = list(obj.own_weights)
    for layer in tracked_layers(obj):
        if isinstance(layer, ClassLayer):
            weights.extend(class_weights(layer.obj, depth + 1))
        elif isinstance(layer, ModelLayer):
            _build_sequential(obj.interp.state, layer.model)
            weights.extend(model_weights(layer.model))
        elif isinstance(layer, LayerRef):
            weights.extend(layer_weights(layer))
    if not obj.trainable:
        weights = [Weight(w.name, w.shape, trainable=False) for w in weights]
    return weights


TENSOR_FUNCTIONS = {"keras.ops.shape", "tensorflow.shape", "keras.ops.arange",
                    "tensorflow.range"}


def tensor_function(name: str, args: list, kwargs: dict) -> Any:
    """The few tensor functions custom layers use to size things: ``ops.shape``, ``arange``."""
    if name in ("keras.ops.shape", "tensorflow.shape"):
        x = args[0] if args else kwargs.get("x", kwargs.get("input"))
        if isinstance(x, Tensor) and x.shape is not None:
            return tuple(x.shape)
        return Unknown(f"{name} of a tensor not known statically")
    start = args[0] if args else kwargs.get("start", 0)
    given = len(args) > 1 or "stop" in kwargs or "limit" in kwargs
    stop = args[1] if len(args) > 1 else kwargs.get("stop", kwargs.get("limit"))
    step = args[2] if len(args) > 2 else kwargs.get("step", kwargs.get("delta", 1))
    if not given:  # arange(n); a stop given as None is a symbolic size: the length is too
        start, stop = 0, start
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step)) \
            and step != 0:
        return Tensor((len(range(start, stop, step)),))
    return Tensor((None,))


# ---------------------------------------------------------------------- inside a wrapper

class WrappedInner:
    """A model, or a layer class of the file, applied by a wrapper (``TimeDistributed``):
    its output shape, weights and inner tensors on the per-step shape (worked out once per
    shape)."""

    def __init__(self, value: Any):
        self.value = value
        self.class_name = value.cls.name if isinstance(value, ClassObject) else \
            "Sequential" if isinstance(value, SequentialModel) else "Functional"
        self.traced: dict = {}  # shape -> (output, tensors made inside)

    def _trace(self, shape) -> tuple:
        from memlint.frontends.keras import nested
        key = repr(shape)
        if key not in self.traced:
            if isinstance(self.value, ClassObject):
                self.traced[key] = (self._declared_shape(shape), [])
            else:
                self.traced[key] = (nested.nested_output(self.value, shape),
                                    nested.nested_activation_shapes(self.value, shape))
        return self.traced[key]

    def _declared_shape(self, shape) -> Any:
        """Keras's Wrapper builds the inner layer with its ``build`` alone (sub-layers made in
        ``__init__`` stay unbuilt, with no weights) and TimeDistributed takes the output shape
        from its ``compute_output_shape``, which it must have: ``call`` is not traced."""
        from memlint.layers.base import LayerError, UnresolvedArgument
        obj = self.value
        given = obj.cls.methods.get("compute_output_shape")
        if given is None:
            raise LayerError(f"{obj.cls.name} '{obj.name}' has no compute_output_shape(), "
                             "which TimeDistributed needs (Keras raises NotImplementedError)")
        node = LocationNode(obj.location)
        _build_once(obj, shape, node)
        declared = run_method(obj.interp, obj, given, [_shape_arg(shape)], {}, node)
        if not _is_shape(declared):
            raise UnresolvedArgument("layer", f"{obj.cls.name}.compute_output_shape() is not "
                                              "known statically")
        return tuple(declared)

    def output_shape(self, shape):
        return self._trace(shape)[0]

    def weights(self, shape):
        from memlint.frontends.keras.nested import model_weights
        self._trace(shape)
        if isinstance(self.value, ClassObject):
            return class_weights(self.value)
        return model_weights(self.value)

    def saved_tensors(self, shape):
        return list(self._trace(shape)[1])

    # as the cell of an RNN (a layer class of the file with ``state_size``)

    def _built_cell(self, step) -> ClassObject:
        """The layer class as an RNN builds its cell: ``build()`` on one step's shape; its
        sub-layers would be built by ``call()``, which is not traced (their weights are
        not known)."""
        from memlint.layers.base import LayerError, UnresolvedArgument
        obj = self.value
        if not isinstance(obj, ClassObject) or obj.cls.kind != "layer":
            raise LayerError(f"an RNN cell must be a layer, got {self.class_name}")
        if tracked_layers(obj):
            raise UnresolvedArgument("cell", f"{obj.cls.name}'s sub-layers are built by its "
                                             "call(), which memlint does not trace in a cell")
        _build_once(obj, step, LocationNode(obj.location))
        return obj

    def cell_state_size(self, step) -> Any:
        """The cell's ``state_size`` (an int, or a list of them)."""
        from memlint.layers.base import LayerError, UnresolvedArgument
        obj = self._built_cell(step)
        if "state_size" not in obj.attrs:
            raise LayerError(f"{obj.cls.name} has no state_size, which an RNN cell needs")
        size = obj.attrs["state_size"]
        sizes = size if isinstance(size, (list, tuple)) else [size]
        if not sizes or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                for n in sizes):
            raise UnresolvedArgument("cell", f"{obj.cls.name}.state_size is not known "
                                             "statically")
        return list(size) if isinstance(size, (list, tuple)) else size

    def cell_output_size(self, step) -> int:
        """The cell's ``output_size``, else the first entry of its state size (as the RNN
        layer reads them)."""
        from memlint.layers.base import UnresolvedArgument
        state = self.cell_state_size(step)
        size = self.value.attrs.get("output_size", state[0] if isinstance(state, list)
                                    else state)
        if not isinstance(size, int) or isinstance(size, bool):
            raise UnresolvedArgument("cell", f"{self.class_name}.output_size is not known "
                                             "statically")
        return size

    def cell_weights(self, step) -> list:
        return class_weights(self._built_cell(step))

    def untraced_cell(self) -> str:
        return (f"it runs {self.class_name}.call() on every time step, which memlint does "
                "not trace: the tensors that call makes are not counted")

    def untraced(self) -> Optional[str]:
        """What the wrapper runs that memlint does not trace (a sentence), or None: a layer
        class's ``call()``, which Keras runs on every step while the shapes come from
        ``compute_output_shape()``."""
        if not isinstance(self.value, ClassObject) or "call" not in self.value.cls.methods:
            return None
        return (f"it runs {self.class_name}.call() on every step, which memlint does not "
                "trace (Keras takes the step's shape from compute_output_shape()): the "
                "tensors that call makes are not counted")


def _wrapped_inner(value: Any) -> Optional[WrappedInner]:
    if isinstance(value, ClassLayer):
        value = value.obj
    if isinstance(value, ModelLayer):
        value = value.model
    if isinstance(value, (ClassObject, SequentialModel, FunctionalModel)):
        return WrappedInner(value)
    return None


def _register_wrapped_inner() -> None:
    from memlint.layers.base import NESTED_ADAPTERS
    if _wrapped_inner not in NESTED_ADAPTERS:
        NESTED_ADAPTERS.append(_wrapped_inner)


_register_wrapped_inner()
