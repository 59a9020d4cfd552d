"""Keras utility functions that model-building code calls to size its inputs, evaluated
statically with the semantics Keras gives them.

``obtain_input_shape`` (``keras.applications.imagenet_utils``; ``_obtain_input_shape`` in
Keras 2 and the ``keras_applications`` package) chooses an application's input shape from the
user's ``input_shape``, its default size and whether a classifier top needs a fixed size.
``correct_pad`` gives the zero padding that makes a strided convolution 'same' on an odd or
even map.  Many third-party model libraries copy the applications' pattern and call both.

``_obtain_input_shape`` had three signatures: Keras 1.2's ``(input_shape, default_size,
min_size, dim_ordering, include_top)`` ('th' / 'tf'), Keras 2.0's with ``data_format`` in its
place, both requiring the default shape with a top and three channels without one, and the
later ``(..., require_flatten, weights=None)`` of Keras 2.0.7+, ``keras_applications`` and
tf.keras, where only ImageNet weights fix the shape.  A call names which one it was written
for by its ``include_top=`` keyword or a 'th' / 'tf' ordering; other calls get the later one.

The applications' other helpers: ``get_source_inputs`` (the ``Input`` tensors a tensor was
computed from), ``get_file`` (a download: its path, never read), ``decode_predictions`` and
``convert_all_kernels_in_model`` (nothing memlint models).
"""

from __future__ import annotations

from typing import Any

from memlint.frontends.keras import models
from memlint.frontends.keras.values import Tensor, Unknown
from memlint.frontends.keras.values import call_arg as _arg

_NAMES = ("obtain_input_shape", "_obtain_input_shape")
_MODULES = ("keras.applications.imagenet_utils.", "keras_applications.imagenet_utils.")
# where Keras 2 code took the helpers from (any module of these packages re-exported them)
_STEMS = ("keras.", "keras_applications.")
_ORDERINGS = {"th": "channels_first", "tf": "channels_last"}
MAX_SOURCE_WALK = 100_000  # layer calls get_source_inputs walks back through


def obtain_input_shape(args: list, kwargs: dict) -> Any:
    """The input shape (no batch axis) an application builds on, or Unknown with Keras's
    reason when it would refuse the arguments."""
    shape = _arg(args, kwargs, 0, "input_shape")
    size = _arg(args, kwargs, 1, "default_size")
    min_size = _arg(args, kwargs, 2, "min_size")
    data_format = _arg(args, kwargs, 3, "data_format", kwargs.get("dim_ordering"))
    flatten = _arg(args, kwargs, 4, "require_flatten", kwargs.get("include_top"))
    weights = _arg(args, kwargs, 5, "weights")
    old = "include_top" in kwargs or data_format in _ORDERINGS
    data_format = _ORDERINGS.get(data_format, data_format)
    first = data_format == "channels_first"
    if not isinstance(size, int) or not isinstance(min_size, int) or not isinstance(
            flatten, bool) or data_format not in ("channels_first", "channels_last") or not (
            shape is None or _is_shape(shape)):
        return Unknown("obtain_input_shape() with arguments not known statically")
    if old:
        return _keras2_0_input_shape(shape, size, min_size, first, flatten)
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


def _keras2_0_input_shape(shape, size: int, min_size: int, first: bool, top: bool) -> Any:
    """Keras 1.2 - 2.0.6's ``_obtain_input_shape``: a top needs exactly the default shape;
    without one the input must have 3 channels and at least ``min_size`` pixels."""
    default = (3, size, size) if first else (size, size, 3)
    if top:
        if shape is not None and shape != default:  # a list is never equal to the tuple
            return Unknown(f"Keras refuses input_shape={shape} with include_top=True: it "
                           f"must be {default}")
        return default
    if shape is None:
        return (3, None, None) if first else (None, None, 3)
    if len(shape) != 3:
        return Unknown("Keras refuses an input_shape that is not three integers")
    channels, spatial = (shape[0], shape[1:]) if first else (shape[-1], shape[:2])
    if channels != 3:
        return Unknown(f"Keras refuses input_shape={shape}: the input must have 3 channels")
    if any(d is not None and d < min_size for d in spatial):
        return Unknown(f"Keras refuses inputs smaller than {min_size}x{min_size}")
    return shape


def source_inputs(tensor: Any) -> Any:
    """``get_source_inputs(tensor)``: the list of ``Input`` tensors it was computed from, in
    the order Keras finds them (depth first through each layer call's inputs)."""
    if not isinstance(tensor, Tensor):
        return Unknown("get_source_inputs() of a value that is not a tensor")
    if tensor.producer is None:
        return Unknown("get_source_inputs() of a tensor whose history is not known")
    found, seen, stack, steps = [], set(), [tensor.producer], 0
    while stack:
        steps += 1
        if steps > MAX_SOURCE_WALK:
            return Unknown("get_source_inputs() through too many layers")
        layer, call, index = stack.pop()
        calls = getattr(layer, "calls", None) or []
        record = calls[call] if call < len(calls) else None
        parents = getattr(record, "parents", None) or []
        if not parents:  # an Input (or a layer called on no tensor): a source
            key = (id(layer), call, index)
            if key not in seen:
                seen.add(key)
                out = models.output_tensors(layer, call) if record is not None else None
                found.append(out[index] if isinstance(out, list) else (out or Unknown(
                    "an input of the model whose shape is not known")))
            continue
        stack.extend(reversed(parents))
    return found


def _get_file(args: list, kwargs: dict) -> Any:
    """``get_file(fname, origin, cache_subdir='datasets')``: where the download would be
    kept (the file itself is never read)."""
    fname = _arg(args, kwargs, 0, "fname")
    subdir = _arg(args, kwargs, 6, "cache_subdir", "datasets")
    if isinstance(fname, str) and isinstance(subdir, str):
        return f"~/.keras/{subdir}/{fname}"
    return Unknown("the path of a file get_file() downloads")


def is_refusal(value: Any) -> bool:
    """Whether a helper's unknown result is Keras refusing its arguments (an error in the
    analysed code), not a value memlint cannot know."""
    return isinstance(value, Unknown) and value.reason.startswith(("Keras refuses",
                                                                  "Keras needs"))


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
    if not name.startswith(_STEMS):
        return None
    short = name.rsplit(".", 1)[-1]
    if short == "_obtain_input_shape" and name.startswith(("keras.applications.",
                                                           "keras_applications.")):
        return obtain_input_shape(args, kwargs)  # keras.applications.resnet50._obtain_...
    if short == "get_source_inputs":
        tensor = _arg(args, kwargs, 0, "tensor")
        return source_inputs(tensor)
    if short == "get_file":
        return _get_file(args, kwargs)
    if short == "decode_predictions":
        return Unknown("decode_predictions() reads predictions; it builds nothing")
    if short == "convert_all_kernels_in_model":
        # flips convolution kernels for Theano weights: shapes and weights unchanged
        return Unknown("convert_all_kernels_in_model() changes no shape")
    return None
