"""A tensor's static shape read through the spellings of older Keras and TensorFlow.

Model code of the Keras 2 / TensorFlow 1 era does shape arithmetic on private or TF1
attributes: ``x._keras_shape`` (Keras 1-2.2: the batch-first tuple), ``getattr(t,
"_shape_val")`` and ``x.get_shape()`` (a ``TensorShape``), ``.as_list()`` of it,
``.ndims`` / ``.rank``, and ``x.shape[i].value`` (TF 1's ``Dimension``).  Here every
spelling gives memlint's own shape value: a batch-first tuple of ints and None (the same
value ``x.shape`` and ``K.int_shape(x)`` give), a list for ``as_list()``, and a dimension's
``.value`` is the dimension itself.
"""

from __future__ import annotations

from typing import Any

from memlint.frontends.keras.values import BoundMethod, Tensor, Unknown

NOT_SHAPE = object()  # the attribute or method is not one of these spellings

# private attributes that hold a symbolic tensor's static shape
_SHAPE_ATTRIBUTES = frozenset({"_keras_shape", "_shape_val", "_shape_tuple",
                               "_static_shape"})
_SHAPE_METHODS = frozenset({"get_shape"})
_LIST_METHODS = frozenset({"as_list"})


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in value)


def _shape_of(tensor: Tensor) -> Any:
    if tensor.shape is None:
        return Unknown(tensor.reason or "tensor shape not known statically")
    return tuple(tensor.shape)


def get_attribute(base: Any, attr: str) -> Any:
    """``base.attr`` for a shape spelling, or :data:`NOT_SHAPE`."""
    if isinstance(base, Tensor):
        if attr in _SHAPE_ATTRIBUTES:
            return _shape_of(base)
        if attr in _SHAPE_METHODS:
            return BoundMethod(base, attr)
        return NOT_SHAPE
    if _is_shape(base):
        if attr in _LIST_METHODS:
            return BoundMethod(base, attr)
        if attr in ("ndims", "rank"):
            return len(base)
        if attr == "dims":
            return list(base)
        return NOT_SHAPE
    if attr == "value" and (base is None or (isinstance(base, int)
                                             and not isinstance(base, bool))):
        return base  # TF 1: ``x.shape[-1].value``, a Dimension's size (None when unknown)
    return NOT_SHAPE


def call_method(obj: Any, method: str, args: list, kwargs: dict) -> Any:
    """``x.get_shape()``, ``shape.as_list()``, or :data:`NOT_SHAPE`."""
    if args or kwargs:
        return NOT_SHAPE
    if isinstance(obj, Tensor) and method in _SHAPE_METHODS:
        return _shape_of(obj)
    if _is_shape(obj) and method in _LIST_METHODS:
        return list(obj)
    return NOT_SHAPE
