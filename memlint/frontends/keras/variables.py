"""TensorFlow variables and initializers that layer code makes without ``add_weight``.

keras.io's VQ-VAE keeps its codebook as ``tf.Variable(initial_value=tf.random_uniform_
initializer()(shape=(dim, codes), dtype="float32"))`` on a layer.  Keras 3 tracks only its
own variables, so such a variable is none of the layer's weights (real Keras reports 0
parameters for it and does not train it); what the layer computes from it is sized as from a
constant tensor of that shape (no layer makes it).  Its own bytes are not counted, like other
constants a layer keeps.

* an initializer, ``keras.initializers.GlorotUniform()``, ``tf.random_normal_initializer()``
  (:func:`initializer`), called with a shape: a float32 array of that shape (or the dtype it
  is given);
* ``tf.Variable(initial_value)``: a constant tensor of the initial value's shape
  (:func:`variable`);
* ``keras.Variable(initializer, shape=None, dtype=None, trainable=True)``
  (:func:`keras_variable`): Keras 3 tracks it when a layer keeps it as an attribute
  (keras.io's Swin Transformer keeps its relative position index so), one of that layer's
  weights, trainable or not (:func:`memlint.frontends.keras.classes.track`).
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras import arrays
from memlint.frontends.keras.values import Array, Tensor, Unknown
from memlint.frontends.keras.values import call_arg as _arg
from memlint.ir import Weight
from memlint.records import record

_TF_INITIALIZERS = frozenset(f"tensorflow.{kind}_initializer" for kind in (
    "random_uniform", "random_normal", "truncated_normal", "zeros", "ones", "constant",
    "glorot_uniform", "glorot_normal", "orthogonal", "variance_scaling"))


@record
class Initializer:
    """An initializer object: called with a shape, it makes a tensor of that shape."""

    name: str


def initializer(name: str) -> Optional[Initializer]:
    """The initializer ``name(...)`` makes (``keras.initializers.HeNormal``, TensorFlow's
    ``tf.random_uniform_initializer``), or None when ``name`` makes none."""
    module, _, short = name.rpartition(".")
    if name in _TF_INITIALIZERS or (module in ("keras.initializers", "tensorflow.initializers")
                                    and short[:1].isupper()):
        return Initializer(name)
    return None


def initial_value(init: Initializer, args: list, kwargs: dict) -> Any:
    """``init(shape, dtype=None)``: an array of that shape, float32 unless told."""
    shape = _arg(args, kwargs, 0, "shape")
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return Unknown(f"{init.name}() of a shape not known statically")
    dtype = _arg(args, kwargs, 1, "dtype")
    return Array(tuple(shape), "float32" if dtype is None else arrays.dtype_name(dtype))


def variable(args: list, kwargs: dict) -> Any:
    """``tf.Variable(initial_value, trainable=True, ...)``: a constant tensor of the initial
    value's shape (Keras 3 does not make it a weight of the layer that holds it)."""
    value = _arg(args, kwargs, 0, "initial_value")
    if isinstance(value, (Array, Tensor)) and value.shape is not None \
            and None not in value.shape:
        return Tensor(tuple(value.shape))
    return Unknown("tf.Variable of an initial value not known statically")


@record(eq=False)
class KerasVariable:
    """A ``keras.Variable`` not yet kept by a layer: the weight it becomes there."""

    weight: Weight


def keras_variable(args: list, kwargs: dict) -> Any:
    """``keras.Variable(initializer, shape=None, dtype=None, trainable=True, ...,
    name=None)``: its shape is the initial value's (a number's: a scalar), or ``shape=``
    beside an initializer
    (a name such as ``"zeros"`` or an initializer object)."""
    init = _arg(args, kwargs, 0, "initializer")
    shape = _arg(args, kwargs, 1, "shape")
    trainable = _arg(args, kwargs, 3, "trainable", True)
    name = _arg(args, kwargs, 6, "name")
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if shape is None and isinstance(init, (Array, Tensor)) and init.shape is not None:
        shape = init.shape
    if shape is None and isinstance(init, (int, float)) and not isinstance(init, bool):
        shape = ()  # a Python number: a scalar (keras.io's LSA attention temperature)
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return Unknown("keras.Variable of a shape not known statically")
    if not isinstance(trainable, bool):
        return Unknown("keras.Variable whose trainable= is not known statically")
    return KerasVariable(Weight(name if isinstance(name, str) else "variable", tuple(shape),
                                trainable=trainable))
