"""``keras.applications.<module>.preprocess_input`` on a symbolic tensor.

Transfer-learning scripts put an application's own preprocessing between ``keras.Input`` and
the pretrained backbone (``x = keras.applications.resnet50.preprocess_input(inputs)``).  On a
symbolic tensor Keras 3 runs ``imagenet_utils`` on it, which makes operations of the
functional graph (named from the counter layers share) by the module's mode:

* ``"tf"`` (MobileNet, MobileNetV2, Inception, Xception, NASNet, ResNetV2): ``x / 127.5``,
  then ``- 1``;
* ``"torch"`` (DenseNet): ``x / 255``, ``+`` the negated channel means, ``/`` the deviations;
* ``"caffe"`` (VGG, ResNet): the three channels taken in reverse order (three ``x[..., i]``
  and a ``stack``), then ``+`` the negated means (three channels out, whatever came in;
  fewer than three is an error);
* none (EfficientNet, EfficientNetV2, ConvNeXt, RegNet, MobileNetV3, ResNet-RS): the input
  itself, their models normalise inside.

The output is float32 of the input's shape.  On data (an array, or a ``tf.data`` element in
a ``map``) the function makes no operation: its result is the float32 array of that shape.
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras import models
from memlint.frontends.keras.values import Array, Tensor, Unknown

_STEMS = ("keras.applications.", "keras_applications.")
MODES = {
    "convnext": None, "efficientnet": None, "efficientnet_v2": None, "mobilenet_v3": None,
    "regnet": None, "resnet_rs": None,
    "densenet": "torch",
    "inception_resnet_v2": "tf", "inception_v3": "tf", "mobilenet": "tf", "mobilenet_v2": "tf",
    "nasnet": "tf", "resnet_v2": "tf", "xception": "tf",
    "resnet": "caffe", "resnet50": "caffe", "vgg16": "caffe", "vgg19": "caffe",
}
_GENERIC = "imagenet_utils"


def preprocessing_module(name: str) -> Optional[str]:
    """The application module whose ``preprocess_input`` a canonical name calls, or None."""
    if not name.startswith(_STEMS) or not name.endswith(".preprocess_input"):
        return None
    module = name[:-len(".preprocess_input")].rsplit(".", 1)[-1]
    return module if module in MODES or module == _GENERIC else None


def preprocess_input(interp, module: str, args: list, kwargs: dict, node) -> Any:
    """The tensor ``preprocess_input`` makes from a symbolic tensor (None: the argument is not
    one, the caller treats the call as any other)."""
    x = args[0] if args else kwargs.get("x")
    if not isinstance(x, (Tensor, Array)):
        return None
    data_format = args[1] if len(args) > 1 else kwargs.get("data_format")
    if module == _GENERIC:
        mode = args[2] if len(args) > 2 else kwargs.get("mode", "caffe")
        if mode not in ("caffe", "tf", "torch"):
            reason = f"preprocess_input's mode {mode!r} is not one of 'caffe', 'tf', 'torch'"
            interp.state.note_unresolved(interp.location(node), "preprocess_input()", reason)
            return Unknown(reason)
    else:
        mode = MODES[module]
    if mode is None:
        return x
    if data_format not in ("channels_first", "channels_last"):
        data_format = interp.state.context.data_format
    if isinstance(x, Array):
        return _on_data(x, mode, data_format)
    rank = len(x.shape) if x.shape is not None else 4

    def op(op_type: str, *operands) -> Any:
        return models.tensor_operation(interp, op_type, list(operands), node)

    if mode == "tf":
        return op("Subtract", op("TrueDivide", x, 127.5), 1.0)
    channels = _channel_constant(rank, data_format)
    if mode == "torch":
        return op("TrueDivide", op("Add", op("TrueDivide", x, 255.0), channels), channels)
    if data_format == "channels_first":
        key = (lambda i: (i, Ellipsis)) if rank == 3 else (lambda i: (slice(None), i))
        axis = 0 if rank == 3 else 1
    else:
        key, axis = (lambda i: (Ellipsis, i)), -1
    planes = [models.apply_operation(interp, "operator.getitem", [x, key(i)], {}, node)
              for i in (2, 1, 0)]
    stacked = models.apply_operation(interp, "keras.ops.stack", [planes], {"axis": axis}, node)
    return op("Add", stacked, channels)


def _on_data(x: Array, mode: str, data_format: str) -> Any:
    """The float32 array ``preprocess_input`` returns for data of ``x``'s shape (``caffe``
    keeps the first three channels, reversed)."""
    shape = tuple(x.shape)
    if mode == "caffe" and len(shape) >= 3:
        axis = (0 if len(shape) == 3 else 1) if data_format == "channels_first" else -1
        channels = shape[axis]
        if isinstance(channels, int) and channels < 3:
            return Unknown(f"preprocess_input of {channels}-channel data: Keras needs 3")
        shape = shape[:axis % len(shape)] + (3,) + shape[axis % len(shape) + 1:]
    return Array(shape, "float32")


def _channel_constant(rank: int, data_format: str) -> Array:
    """The per-channel constant Keras reshapes the means (and deviations) to."""
    if data_format == "channels_first":
        return Array((1, 3) + (1,) * (rank - 2), "float32")
    return Array((1,) * (rank - 1) + (3,), "float32")
