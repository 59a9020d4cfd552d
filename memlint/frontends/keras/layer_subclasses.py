"""Classes of the analysed file that derive from a layer of the registry: ``class
DepthwiseConv2D(Conv2D)`` (Keras 2 MobileNets shipped their own), ``class ScaledDense(Dense)``.

Keras builds such a layer with its parent's ``build`` and ``compute_output_shape`` unless the
class overrides them, and, the parent having a ``compute_output_shape`` of its own, never
traces ``call`` to learn the output shape.  So:

* a class that overrides neither ``build`` nor ``compute_output_shape`` is its parent through
  the registry (:func:`construct_inherited`): its ``__init__`` (when it has one) runs to learn
  the arguments it passes to ``super().__init__``, and a registry layer of the parent's kind is
  made from them, reported under the subclass's class name and automatic name;
* a class that overrides either is evaluated like the file's other layer classes (a
  :class:`~.classes.ClassObject`): ``super().__init__(...)`` configures the parent's kind and
  sets the attributes the parent's constructor sets (``self.kernel_size`` as a tuple,
  ``self.padding``, ``self.data_format``, ``self.activation``, ...) (:func:`init_parent`);
  the class's own ``build`` makes its weights with ``add_weight`` (else the parent's weights
  are the registry's), its own ``compute_output_shape`` gives the output shape (else the
  registry's) (:func:`output_for`); ``super().build`` / ``super().compute_output_shape``
  are the registry's (:func:`super_method`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import memlint.layers as registry
from memlint.frontends.keras.names import layer_class, to_snake_case
from memlint.frontends.keras.values import LayerRef, Ref, Tensor, Unknown
from memlint.layers.base import Args, LayerError, UnresolvedArgument

# Methods whose override makes the class a custom layer rather than its parent renamed
_OWN_SHAPE_METHODS = ("build", "compute_output_shape")


def registry_base(base: Any) -> Optional[str]:
    """The registry kind's name when ``base`` (a class the file derives from) is a Keras
    layer class memlint models (``Conv2D``), else None (``Layer`` itself is not one)."""
    if not isinstance(base, Ref):
        return None
    name = layer_class(base.name)
    if name is None or name in ("Layer", "InputLayer", "InputSpec"):
        return None
    kind = registry.lookup(name)
    return kind.name if kind is not None else None


def inherits(cls) -> bool:
    """Whether objects of ``cls`` are their registry parent under another class name."""
    return not any(method in cls.methods for method in _OWN_SHAPE_METHODS)


def construct_inherited(interp, cls, args: list, kwargs: dict, node) -> Any:
    """``Sub(...)`` of a class that only changes ``call`` or adds constructor arguments: a
    registry layer of its parent's kind, named and typed after the subclass."""
    from memlint.frontends.keras import classes, models
    init = cls.methods.get("__init__")
    own: list = []
    if init is not None:
        scratch = classes.ClassObject(cls, interp.location(node), interp)
        classes.run_method(interp, scratch, init, args, kwargs, node)
        parent_args, parent_kwargs = getattr(scratch, "parent_call", ([], {}))
        name = scratch.name
        own = list(scratch.own_weights)  # made by its __init__: Keras tracks them too
    else:
        parent_args, parent_kwargs = list(args), dict(kwargs)
        given = kwargs.get("name")
        name = given if isinstance(given, str) else None
    if name is None:
        name = interp.state.unique_name(to_snake_case(cls.name))
    layer = models.create_layer(interp, cls.registry_base, list(parent_args),
                                {**parent_kwargs, "name": name}, node)
    if isinstance(layer, LayerRef):
        layer.subclass = cls.name  # what Keras reports as the layer's class
        layer.init_weights = own
    else:
        layer.type = cls.name  # an OpaqueLayer: the class is all that is known
    return layer


def node_type(layer) -> tuple:
    """(the class the layer table shows, :attr:`~memlint.ir.LayerNode.kind`) of a layer:
    a registry layer made for a derived class shows the derived class and walks as its
    registry kind; a derived class that builds itself has no registry kind ("")."""
    derived = getattr(layer, "subclass", None)
    if derived is not None and isinstance(layer, LayerRef):
        return derived, layer.instance.kind.name
    obj = getattr(layer, "obj", None)
    if obj is not None and getattr(obj.cls, "registry_base", None) is not None:
        return layer.type, ""
    return layer.type, None


def init_parent(obj, args: list, kwargs: dict, node) -> None:
    """``super().__init__(...)`` in a class derived from a registry layer: remember the
    arguments, configure the parent's kind, and set the attributes its constructor sets."""
    obj.parent_call = (list(args), dict(kwargs))
    interp = obj.interp
    instance = _configure(obj.cls.registry_base, args, kwargs, interp.state.context)
    if inherits(obj.cls):
        # a scratch object of construct_inherited, where the registry layer is made (and
        # any note about its arguments given): the rest of its __init__ may read what the
        # parent keeps, public or private (MultiHeadAttention's ``self._key_dim``)
        if not isinstance(instance, str):
            for key, value in instance.config.items():
                obj.attrs[key] = obj.attrs[f"_{key}"] = _attribute(key, value)
        return
    if isinstance(instance, str):
        loc = node.loc if hasattr(node, "loc") else interp.location(node)
        interp.state.note_unresolved(loc, f"{obj.cls.name} parent {obj.cls.registry_base}",
                                     instance)
        return
    obj.base_instance = instance
    for key, value in instance.config.items():
        obj.attrs[key] = _attribute(key, value)


def _configure(base: str, args: list, kwargs: dict, context) -> Any:
    """The parent's :class:`LayerInstance`, or why it cannot be made.  A subclass may pass
    ``None`` for an argument the parent requires but the subclass does not use
    (``filters=None`` in a depthwise convolution): the parent is configured with 1 there and
    the attribute keeps the ``None`` it was given."""
    attempt, stood_in = dict(kwargs), []
    for _ in range(4):
        try:
            instance = registry.instantiate(base, Args(list(args), dict(attempt), context))
        except UnresolvedArgument as exc:
            if kwargs.get(exc.name, 0) is None and exc.name not in stood_in:
                attempt[exc.name] = 1
                stood_in.append(exc.name)
                continue
            return exc.reason
        except LayerError as exc:
            return str(exc)
        config = dict(instance.config)
        config.update({key: None for key in stood_in})
        return replace(instance, config=config)
    return f"the arguments of {base} are not known statically"


def _attribute(key: str, value: Any) -> Any:
    """What the parent's constructor keeps on ``self`` for one config entry: an activation
    is a function (``keras.activations.linear`` for none), the rest as configured."""
    if key == "activation":
        if isinstance(value, str) and value != "unknown":
            return Ref(f"keras.activations.{value}")
        if value is None:
            return Ref("keras.activations.linear")
        return Unknown("the activation function of the parent layer")
    return value


def output_for(layer, shapes: Any, node) -> Any:
    """Build (the class's own ``build``, else the parent's weights) and the output shape (its
    own ``compute_output_shape``, else the parent's) of a custom subclass object; ``call``
    is not traced, as Keras does not trace it."""
    from memlint.frontends.keras import classes
    obj = layer.obj
    if not obj.built:
        obj.built = True
        build = obj.cls.methods.get("build")
        if build is not None:
            classes.run_method(obj.interp, obj, build, [classes._shape_arg(shapes)], {}, node)
        else:
            _parent_weights(obj, shapes)
    given = obj.cls.methods.get("compute_output_shape")
    if given is not None:
        declared = classes.run_method(obj.interp, obj, given, [classes._shape_arg(shapes)],
                                      {}, node)
        if classes._is_shape(declared):
            return tuple(declared)
        if isinstance(declared, list) and declared and all(
                classes._is_shape(s) and isinstance(s, tuple) for s in declared):
            return [tuple(s) for s in declared]
        raise classes.ClassUnresolved(f"{obj.cls.name}.compute_output_shape() is not known "
                                      "statically")
    return _parent_output(obj, shapes)


def _parent_weights(obj, shapes: Any) -> None:
    instance = getattr(obj, "base_instance", None)
    if instance is None:
        return
    try:
        _, weights = registry.call(replace(instance, trainable=True), shapes)
    except UnresolvedArgument as exc:
        from memlint.frontends.keras.classes import ClassUnresolved
        raise ClassUnresolved(exc.reason) from None
    obj.own_weights.extend(weights)


def _parent_output(obj, shapes: Any) -> Any:
    from memlint.frontends.keras.classes import ClassUnresolved
    instance = getattr(obj, "base_instance", None)
    if instance is None:
        raise ClassUnresolved(f"{obj.cls.name} never configured its parent "
                              f"{obj.cls.registry_base} (super().__init__)")
    try:
        out, _ = registry.call(instance, shapes)
    except UnresolvedArgument as exc:
        raise ClassUnresolved(exc.reason) from None
    return out


def super_method(obj, method: str, args: list, kwargs: dict) -> Any:
    """``super().build(shape)`` (the parent's weights) and ``super().compute_output_shape(
    shape)`` (the parent's output shape) inside a subclass of a registry layer; None when the
    method is something else (``super().call(x)`` is not traced)."""
    shape = args[0] if args else kwargs.get("input_shape")
    if method == "build" and shape is not None:
        _parent_weights(obj, _as_shapes(shape))
        return None
    if method == "compute_output_shape" and shape is not None:
        return _parent_output(obj, _as_shapes(shape))
    if method == "call":
        return Tensor(None, reason=f"{obj.cls.name}: super().call() is not traced")
    return None


def _as_shapes(shape: Any) -> Any:
    if isinstance(shape, list) and shape and all(isinstance(s, (tuple, list)) for s in shape):
        return [tuple(s) for s in shape]
    return tuple(shape) if isinstance(shape, (tuple, list)) else shape
