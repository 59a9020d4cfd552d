"""Keras utility functions that model-building code calls to size its inputs, evaluated
statically with the semantics Keras gives them.

``obtain_input_shape`` (``keras.applications.imagenet_utils``; ``_obtain_input_shape`` in
Keras 2 and the ``keras_applications`` package) chooses an application's input shape from the
user's ``input_shape``, its default size and whether a classifier top needs a fixed size.
``correct_pad`` gives the zero padding that makes a strided convolution 'same' on an odd or
even map.  Many third-party model libraries copy the applications' pattern and call both.
"""

from __future__ import annotations

from typing import Any

from memlint.frontends.keras.values import Tensor, Unknown

_NAMES = ("obtain_input_shape", "_obtain_input_shape")
_MODULES = ("keras.applications.imagenet_utils.", "keras_applications.imagenet_utils.")


def _arg(args: list, kwargs: dict, index: int, key: str, default: Any = None) -> Any:
    return args[index] if len(args) > index else kwargs.get(key, default)


def obtain_input_shape(args: list, kwargs: dict) -> Any:
    """The input shape (no batch axis) an application builds on, or Unknown with Keras's
    reason when it would refuse the arguments."""
    shape = _arg(args, kwargs, 0, "input_shape")
    size = _arg(args, kwargs, 1, "default_size")
    min_size = _arg(args, kwargs, 2, "min_size")
    data_format = _arg(args, kwargs, 3, "data_format")
    flatten = _arg(args, kwargs, 4, "require_flatten", kwargs.get("include_top"))
    weights = _arg(args, kwargs, 5, "weights")
    first = data_format == "channels_first"
    if not isinstance(size, int) or not isinstance(min_size, int) or not isinstance(
            flatten, bool) or data_format not in ("channels_first", "channels_last") or not (
            shape is None or _is_shape(shape)):
        return Unknown("obtain_input_shape() with arguments not known statically")
    shape = tuple(shape) if shape is not None else None
    if weights != "imagenet" and shape and len(shape) == 3:
        default = (shape[0], size, size) if first else (size, size, shape[-1])
    else:
        default = (3, size, size) if first else (size, size, 3)
    if weights == "imagenet" and flatten:
        if shape is not None and shape != default:
            return Unknown(f"Keras refuses input_shape={shape} with the imagenet top: it "
                           f"must be {default}")
        return default
    if shape:
        channels, spatial = (shape[0], shape[1:]) if first else (shape[-1], shape[:2])
        if len(shape) != 3:
            return Unknown("Keras refuses an input_shape that is not three integers")
        if weights == "imagenet" and channels != 3:
            return Unknown("Keras refuses imagenet weights for inputs without 3 channels")
        if any(d is not None and d < min_size for d in spatial):
            return Unknown(f"Keras refuses inputs smaller than {min_size}x{min_size}")
    elif flatten:
        shape = default
    else:
        shape = (3, None, None) if first else (None, None, 3)
    if flatten and None in shape:
        return Unknown("Keras needs a static input_shape when include_top is True")
    return shape


def correct_pad(args: list, kwargs: dict, data_format: str) -> Any:
    """``((top, bottom), (left, right))`` zero padding for a strided 'valid' convolution."""
    inputs = _arg(args, kwargs, 0, "inputs")
    kernel = _arg(args, kwargs, 1, "kernel_size")
    if not isinstance(inputs, Tensor) or inputs.shape is None or len(inputs.shape) != 4:
        return Unknown("correct_pad() of a tensor whose shape is not known")
    if isinstance(kernel, int):
        kernel = (kernel, kernel)
    if not _is_shape(kernel) or len(kernel) != 2 or None in kernel:
        return Unknown("correct_pad() with a kernel size not known statically")
    axis = 2 if data_format == "channels_first" else 1
    size = inputs.shape[axis:axis + 2]
    adjust = (1, 1) if size[0] is None else (1 - size[0] % 2, 1 - size[1] % 2)
    half = (kernel[0] // 2, kernel[1] // 2)
    return ((half[0] - adjust[0], half[0]), (half[1] - adjust[1], half[1]))


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value)


def utility(name: str, args: list, kwargs: dict, data_format: str) -> Any:
    """The value of a Keras utility call, or None when ``name`` is not one of them."""
    for module in _MODULES:
        if name in (module + n for n in _NAMES):
            return obtain_input_shape(args, kwargs)
        if name == module + "correct_pad":
            return correct_pad(args, kwargs, data_format)
    return None
