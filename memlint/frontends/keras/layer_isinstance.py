"""``isinstance(layer, keras.layers.X)`` for the layers the registry models.

Fine-tuning code walks a model's layers and decides by class which to unfreeze
(``if not isinstance(layer, layers.BatchNormalization): layer.trainable = True``): the
answer changes what trains, so it is decided where Keras's class hierarchy decides it the
same way in Keras 2 and 3, and left unknown where it does not (``Conv2DTranspose`` is a
``Conv2D`` in Keras 2 and not in Keras 3), for Keras 1 spellings (Keras 2 made
``Convolution2D`` the ``Conv2D`` class) and for classes the registry does not know.
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras.names import layer_class
from memlint.frontends.keras.values import LayerRef, Ref, Unknown
from memlint.layers.base import REGISTRY

# (class, base) where the class subclasses the base in Keras 2 and Keras 3
_ALWAYS = frozenset({("LSTM", "RNN"), ("GRU", "RNN"), ("SimpleRNN", "RNN")})
# ... in one of them only (or not in every release of Keras 2)
_SOMETIMES = frozenset({
    ("Conv1DTranspose", "Conv1D"), ("Conv2DTranspose", "Conv2D"),
    ("Conv3DTranspose", "Conv3D"), ("DepthwiseConv1D", "Conv1D"),
    ("DepthwiseConv2D", "Conv2D"), ("SeparableConv1D", "Conv1D"),
    ("SeparableConv2D", "Conv2D"), ("ConvLSTM1D", "RNN"), ("ConvLSTM2D", "RNN"),
    ("ConvLSTM3D", "RNN"), ("AdditiveAttention", "Attention")})
_KERAS1 = frozenset({"Convolution1D", "Convolution2D", "Convolution3D",
                     "AtrousConvolution1D", "AtrousConvolution2D",
                     "SeparableConvolution2D", "Deconvolution2D"})


def layer_isinstance(value: Any, wanted: tuple) -> Optional[Any]:
    """True / False / Unknown for a layer of the registry against keras.layers classes;
    None when ``value`` is not such a layer (the caller decides plain values)."""
    kind = REGISTRY.get(value.type) if isinstance(value, LayerRef) else None
    if kind is None:
        return None
    own = kind.name
    answers = [_one(own, t) for t in wanted]
    if True in answers:
        return True
    if all(a is False for a in answers):
        return False
    return Unknown("isinstance() of a layer against a class whose subclasses memlint "
                   "does not know in every Keras version")


def _one(own: str, wanted: Any) -> Any:
    """One class of the tuple: True, False, or None (not decided)."""
    if not isinstance(wanted, Ref):
        return None
    if wanted.name.startswith("builtins."):
        return False  # a layer is no int, list, dict...
    name = layer_class(wanted.name)
    if name == "Layer":
        return True
    kind = REGISTRY.get(name) if name else None
    if kind is None or own in _KERAS1 or kind.name in _KERAS1:
        return None
    base = kind.name
    if own == base or (own, base) in _ALWAYS:
        return True
    return None if (own, base) in _SOMETIMES else False
