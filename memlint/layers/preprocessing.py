"""Preprocessing layers that can sit inside a model.

Rescaling, Normalization, the image layers (Resizing, CenterCrop, the Random* augmentations),
the categorical encoders (CategoryEncoding, Discretization), and the lookup and hashing
layers (StringLookup, IntegerLookup, TextVectorization, Hashing, HashedCrossing).  Only
Normalization has weights (non-trainable statistics).

Keras 3 computes the image layers' output shapes without checking the rank much: Resizing
and CenterCrop treat any input that is not rank 4 as one unbatched image (so the first
dimension, the batch, is overwritten), RandomCrop writes its size at fixed negative axes,
and the other augmentations keep the shape whatever it is.
"""

from __future__ import annotations

from typing import Optional

from memlint.ir import Weight
from memlint.layers.base import (
    Args,
    LayerError,
    LayerKind,
    Saved,
    Unknown,
    UnresolvedArgument,
    data_format,
    register,
)


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float))  # Keras accepts bools here, as Python does


@register
class Rescaling(LayerKind):
    """``Rescaling(scale, offset=0.0)``: ``x * scale + offset``; no weights, same shape."""

    name = "Rescaling"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        if not args.has("scale", pos=0):
            raise LayerError("Rescaling needs a 'scale' argument")
        config = {}
        for key, pos, default in (("scale", 0, None), ("offset", 1, 0.0)):
            try:
                value = args.get(key, default, pos=pos)
            except UnresolvedArgument:
                value = None  # e.g. a NumPy array: it changes no shape
            config[key] = list(value) if isinstance(value, tuple) else value
        return config


# ---------------------------------------------------------------- Normalization

def _nested_shape(value) -> tuple | None:
    """The NumPy shape of a scalar or nested list; None if not a regular nesting of numbers."""
    if _number(value):
        return ()
    if isinstance(value, (list, tuple)):
        if not value:
            return (0,)
        inner = {_nested_shape(v) for v in value}
        if len(inner) == 1 and None not in inner:
            return (len(value),) + inner.pop()
    return None


@register
class Normalization(LayerKind):
    """``Normalization(axis=-1, mean=None, variance=None, invert=False)``.

    Without ``mean``/``variance`` it creates non-trainable ``mean`` and ``variance`` with the
    sizes of the kept axes (which must be known) and a scalar ``count``; with them, no
    weights.  ``axis=None`` keeps no axis (scalar statistics).
    """

    name = "Normalization"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        axis = args.get("axis", -1, pos=0)
        if axis is None:
            axes = ()
        elif _int(axis):
            axes = (axis,)
        elif isinstance(axis, (list, tuple)) and all(_int(a) for a in axis):
            axes = tuple(axis)
        else:
            raise LayerError(f"Normalization axis must be an int, a list of ints or None, "
                             f"got {axis!r}")
        given = []
        shapes = []
        for key, pos in (("mean", 1), ("variance", 2)):
            try:
                value = args.get(key, None, pos=pos)
            except UnresolvedArgument:
                given.append(True)  # an array the frontend cannot see: statistics are given
                shapes.append(None)
                continue
            given.append(value is not None)
            shapes.append(None if value is None else _nested_shape(value))
        if given[0] != given[1]:
            raise LayerError("Normalization needs both mean and variance, or neither")
        if shapes[0] is not None and shapes[1] is not None:
            if shapes[0] != shapes[1]:
                raise LayerError(f"Normalization mean and variance shapes differ: "
                                 f"{shapes[0]} and {shapes[1]}")
            if len(shapes[0]) > len(axes):
                raise LayerError(f"the rank of mean ({len(shapes[0])}) exceeds the number of "
                                 f"axes ({len(axes)})")
        return {"axis": axes, "statistics_given": given[0]}

    def _kept(self, config, input_shape) -> tuple:
        rank = len(input_shape)
        if any(a < -rank or a >= rank for a in config["axis"]):
            raise LayerError(f"Normalization axis {config['axis']} is out of range for "
                             f"input rank {rank}")
        kept = sorted(a if a >= 0 else a + rank for a in config["axis"])
        for a in kept:
            if input_shape[a] is None:
                raise LayerError(f"Normalization: the kept axis {a} of input {input_shape} "
                                 "must be defined")
        return tuple(input_shape[a] for a in kept)

    def output_shape(self, config, input_shape):
        self._kept(config, input_shape)
        return input_shape

    def weights(self, config, input_shape):
        shape = self._kept(config, input_shape)
        if config["statistics_given"]:
            return []
        return [Weight("mean", shape, trainable=False),
                Weight("variance", shape, trainable=False),
                Weight("count", (), trainable=False)]


# ---------------------------------------------------------------- image layers

def _image_format(args: Args, pos=None) -> str:
    return data_format(args, pos=pos)


class _SizedImage(LayerKind):
    """Resizing and CenterCrop: ``(height, width)`` written over the spatial axes."""

    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        height = args.get("height", pos=0)
        width = args.get("width", pos=1)
        return {"height": height, "width": width, "data_format": self._format(args)}

    def _format(self, args: Args) -> str:
        return _image_format(args)

    def output_shape(self, config, input_shape):
        shape = list(input_shape)
        if len(shape) == 4:
            first = 1 if config["data_format"] == "channels_last" else 2
        else:  # Keras reads any other rank as one unbatched image
            first = 0 if config["data_format"] == "channels_last" else 1
        if first + 1 >= len(shape):
            raise LayerError(f"{self.name} cannot resize input {input_shape}")
        shape[first], shape[first + 1] = config["height"], config["width"]
        return tuple(shape)


@register
class Resizing(_SizedImage):
    """``Resizing(height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
    pad_to_aspect_ratio=False, ..., data_format=None)``; no weights."""

    name = "Resizing"

    def _format(self, args: Args) -> str:
        return _image_format(args, pos=8)


@register
class CenterCrop(_SizedImage):
    """``CenterCrop(height, width, data_format=None)``: rank 3 (unbatched) or 4 only; a
    crop larger than the image resizes up, so any size is accepted."""

    name = "CenterCrop"

    def _format(self, args: Args) -> str:
        return _image_format(args, pos=2)

    def output_shape(self, config, input_shape):
        if len(input_shape) not in (3, 4):
            raise LayerError(f"CenterCrop expects input of rank 3 or 4, got {input_shape}")
        return super().output_shape(config, input_shape)


@register
class RandomCrop(LayerKind):
    """``RandomCrop(height, width, seed=None, data_format=None)``: the size is written at
    axes -3, -2 (channels_last) or -2, -1 (channels_first), whatever the rank."""

    name = "RandomCrop"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        return {"height": args.get("height", pos=0), "width": args.get("width", pos=1),
                "data_format": _image_format(args, pos=3)}

    def output_shape(self, config, input_shape):
        axes = (-3, -2) if config["data_format"] == "channels_last" else (-2, -1)
        if len(input_shape) < -axes[0]:
            raise LayerError(f"RandomCrop cannot crop input {input_shape}")
        shape = list(input_shape)
        shape[axes[0]], shape[axes[1]] = config["height"], config["width"]
        return tuple(shape)


def _base_factor(factor, bounds: tuple, layer: str):
    """Keras's BaseImagePreprocessingLayer factor check: a number within ``bounds``, or two
    numbers not entirely outside them."""
    error = LayerError(f"{layer} factor must be a number or two numbers in "
                       f"[{bounds[0]}, {bounds[1]}], got {factor!r}")
    if isinstance(factor, (list, tuple)):
        if len(factor) != 2 or not all(_number(f) for f in factor):
            raise error
        if factor[0] > bounds[1] or factor[1] < bounds[0]:
            raise error
    elif _number(factor):
        if not bounds[0] <= factor <= bounds[1]:
            raise error
    else:
        raise error


def _range_factor(factor, name: str, layer: str, lower_open: bool) -> None:
    """RandomZoom / RandomTranslation factor check: each number in [-1, 1] ((-1, 1] for
    zoom)."""
    numbers = factor if isinstance(factor, (list, tuple)) else [factor]
    if isinstance(factor, (list, tuple)) and len(factor) != 2:
        raise LayerError(f"{layer} {name} must be a number or two numbers, got {factor!r}")
    for number in numbers:
        if not _number(number):
            raise LayerError(f"{layer} {name} must be a number or two numbers, got {factor!r}")
        if number > 1.0 or number < -1.0 or (lower_open and number == -1.0):
            raise LayerError(f"{layer} {name} is out of range: {factor!r}")


_FILL_MODES = ("reflect", "wrap", "constant", "nearest")
_INTERPOLATIONS = ("nearest", "bilinear")


def _fill_and_interpolation(args: Args, layer: str, fill_pos: int, interp_pos: int) -> None:
    fill_mode = args.get("fill_mode", "reflect", pos=fill_pos)
    if fill_mode not in _FILL_MODES:
        raise LayerError(f"{layer} fill_mode must be one of {', '.join(_FILL_MODES)}, "
                         f"got {fill_mode!r}")
    interpolation = args.get("interpolation", "bilinear", pos=interp_pos)
    if interpolation not in _INTERPOLATIONS:
        raise LayerError(f"{layer} interpolation must be 'nearest' or 'bilinear', "
                         f"got {interpolation!r}")


class _Augmentation(LayerKind):
    """A random augmentation: no weights and the same shape, whatever the rank."""

    family = "preprocessing"


@register
class RandomFlip(_Augmentation):
    """``RandomFlip(mode="horizontal_and_vertical", seed=None, data_format=None)``; Keras
    does not validate ``mode`` when building."""

    name = "RandomFlip"

    def configure(self, args: Args) -> dict:
        return {"mode": args.get("mode", "horizontal_and_vertical", pos=0),
                "data_format": _image_format(args, pos=2)}


class _AffineAugmentation(_Augmentation):
    """An augmentation that resamples the image through a random affine transform."""

    def saved(self, config, input_shape, output_shape):
        """Nothing for the backward (no weights); while it runs in training, Keras's JAX
        backend holds the sampling coordinates of every element of the batch: three float32
        per input element (measured on H100 plans: ``f32[32, 12288, 3]`` for a batch of 32
        64x64x3 images, the same for rotation, zoom and translation; TensorFlow's projective
        transform kernel computes them on the fly)."""
        if not isinstance(input_shape, tuple) or any(
                not isinstance(d, int) for d in input_shape[1:]):
            return []
        elements = 1
        for d in input_shape[1:]:
            elements *= d
        image = (None,) + tuple(input_shape[1:])
        coordinates = Saved("sampling coordinates", (None, elements, 3), "float32",
                            when="training", profiles=("xla",))
        channels = input_shape[1] if config.get("data_format") == "channels_first" \
            else input_shape[-1]
        # before Hopper XLA materialises the bilinear gathers of a multi-channel image (T4
        # and A100 plans: eight image-sized float32 buffers besides the result; a
        # one-channel image needs no transpose and its gathers stay fused) and the A100 six
        # int32 index planes; the walk resolves these against the GPU
        gathers = [] if channels == 1 else [
            Saved("gathered corners", image, "float32", when="training", count=8,
                  profiles=("xla",))]
        return [coordinates, *gathers,
                Saved("corner indices", image, "int32", when="training", count=6,
                      profiles=("xla",))]


@register
class RandomRotation(_AffineAugmentation):
    """``RandomRotation(factor, fill_mode="reflect", interpolation="bilinear", ...)``;
    ``factor`` is a fraction of 2π in [-1, 1]."""

    name = "RandomRotation"

    def configure(self, args: Args) -> dict:
        factor = args.get("factor", pos=0)
        _base_factor(factor or 0.0, (-1, 1), self.name)
        _fill_and_interpolation(args, self.name, 1, 2)
        return {"factor": factor, "data_format": _image_format(args, pos=5)}


@register
class RandomZoom(_AffineAugmentation):
    """``RandomZoom(height_factor, width_factor=None, fill_mode, interpolation, ...)``;
    factors lie in (-1, 1]."""

    name = "RandomZoom"

    def configure(self, args: Args) -> dict:
        height = args.get("height_factor", pos=0)
        _range_factor(height, "height_factor", self.name, lower_open=True)
        width = args.get("width_factor", None, pos=1)
        if width is not None:
            _range_factor(width, "width_factor", self.name, lower_open=True)
        _fill_and_interpolation(args, self.name, 2, 3)
        return {"height_factor": height, "width_factor": width,
                "data_format": _image_format(args, pos=6)}


@register
class RandomTranslation(_AffineAugmentation):
    """``RandomTranslation(height_factor, width_factor, fill_mode, interpolation, ...)``;
    both factors are required and lie in [-1, 1]."""

    name = "RandomTranslation"

    def configure(self, args: Args) -> dict:
        height = args.get("height_factor", pos=0)
        width = args.get("width_factor", pos=1)
        _range_factor(height, "height_factor", self.name, lower_open=False)
        _range_factor(width, "width_factor", self.name, lower_open=False)
        _fill_and_interpolation(args, self.name, 2, 3)
        return {"height_factor": height, "width_factor": width,
                "data_format": _image_format(args, pos=6)}


@register
class RandomContrast(_Augmentation):
    """``RandomContrast(factor, value_range=(0, 255), seed=None)``; factor in [0, 1]."""

    name = "RandomContrast"

    def configure(self, args: Args) -> dict:
        factor = args.get("factor", pos=0)
        _base_factor(factor, (0, 1), self.name)
        return {"factor": factor, "data_format": _image_format(args)}


# ---------------------------------------------------------------- categorical encoders

@register
class CategoryEncoding(LayerKind):
    """``CategoryEncoding(num_tokens, output_mode="multi_hot", sparse=False)``.

    ``multi_hot`` (Keras 2: ``binary``) and ``count`` replace the last axis by
    ``num_tokens``; ``one_hot`` appends it, unless the last axis is 1 (and not the only one),
    which it replaces.
    """

    name = "CategoryEncoding"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        mode = args.get("output_mode", "multi_hot", pos=1)
        if mode == "binary":
            mode = "multi_hot"
        if mode not in ("count", "one_hot", "multi_hot"):
            raise LayerError(f"CategoryEncoding output_mode must be 'count', 'one_hot' or "
                             f"'multi_hot', got {mode!r}")
        tokens = args.get("num_tokens", None, pos=0)
        if tokens is None:
            raise LayerError("CategoryEncoding needs num_tokens")
        if not _int(tokens) or tokens < 1:
            raise LayerError(f"num_tokens must be an int >= 1, got {tokens!r}")
        return {"num_tokens": tokens, "output_mode": mode}

    def output_shape(self, config, input_shape):
        shape, tokens = tuple(input_shape), config["num_tokens"]
        if not shape:
            return (tokens,)
        if config["output_mode"] == "one_hot" and (shape[-1] != 1 or len(shape) == 1):
            return shape + (tokens,)
        return shape[:-1] + (tokens,)


@register
class Discretization(LayerKind):
    """``Discretization(bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int",
    sparse=False)``.

    ``int`` keeps the shape; the others encode ``len(bin_boundaries) + 1`` (or ``num_bins``)
    bins: ``one_hot`` like CategoryEncoding, ``multi_hot``/``count`` fold axis 1 away, as
    Keras 3 computes it: ``(batch, *shape[2:], depth)``.  Keras 3 takes no generic layer
    keywords (``trainable``) here.
    """

    name = "Discretization"
    family = "preprocessing"
    _ACCEPTED = ("bin_boundaries", "num_bins", "epsilon", "output_mode", "sparse", "dtype",
                 "name")

    def configure(self, args: Args) -> dict:
        for key in args.keywords:
            if key not in self._ACCEPTED:
                raise LayerError(f"Discretization does not accept the argument '{key}'")
        if len(args.positional) > 7:
            raise LayerError("Discretization takes at most 7 positional arguments")
        sparse = args.get("sparse", False, pos=4)
        mode = args.get("output_mode", "int", pos=3)
        if sparse and mode == "int":
            raise LayerError("Discretization sparse=True needs a one_hot, multi_hot or count "
                             "output_mode")
        if mode not in ("int", "one_hot", "multi_hot", "count"):
            raise LayerError(f"Discretization output_mode must be 'int', 'one_hot', "
                             f"'multi_hot' or 'count', got {mode!r}")
        num_bins = args.get("num_bins", None, pos=1)
        if num_bins is not None and (not _number(num_bins) or num_bins < 0):
            raise LayerError(f"num_bins must be >= 0, got {num_bins!r}")
        try:
            boundaries = args.get("bin_boundaries", None, pos=0)
            depth = None if boundaries is None else len(boundaries) + 1
        except UnresolvedArgument:
            boundaries, depth = Ellipsis, None  # given, but its length is unknown
        except TypeError as exc:
            raise LayerError(f"bin_boundaries must be a list, got {boundaries!r}") from exc
        if num_bins is not None and boundaries is not None:
            raise LayerError("Discretization takes num_bins or bin_boundaries, not both")
        if num_bins is None and boundaries is None:
            raise LayerError("Discretization needs num_bins or bin_boundaries")
        if num_bins is not None:
            depth = num_bins
        if depth is None and mode != "int":
            raise UnresolvedArgument("bin_boundaries", "its length is not known statically")
        return {"output_mode": mode, "depth": depth}

    def output_shape(self, config, input_shape):
        shape, mode, depth = tuple(input_shape), config["output_mode"], config["depth"]
        if mode == "int":
            return shape
        if mode == "one_hot":
            if shape and shape[-1] == 1 and len(shape) > 1:
                return shape[:-1] + (depth,)
            return shape + (depth,)
        if len(shape) >= 2:
            return (shape[0],) + shape[2:] + (depth,)
        return (depth,)




# ---------------------------------------------------------------- lookup and hashing layers
#
# StringLookup, IntegerLookup and TextVectorization share Keras's IndexLookup
# (keras/src/layers/preprocessing/index_lookup.py).  None of them has weights that Keras
# counts: the lookup table is a TF resource, and even the tf_idf ``idf_weights`` are a raw
# ``tf.Variable`` that the layer does not track.  Output shapes:
#
# * ``int``: the input shape (TextVectorization: ``(batch, output_sequence_length)``);
# * ``one_hot``: the last axis replaced by ``depth`` when it is 1 (and not the only one),
#   else ``depth`` appended;
# * ``multi_hot`` / ``count`` / ``tf_idf``: the last axis replaced by ``depth`` (a rank-1
#   input therefore loses its batch axis: ``(depth,)``).
#
# ``depth`` is ``max_tokens`` with ``pad_to_max_tokens=True``, else the vocabulary size:
# ``num_oov_indices`` + the tokens (the mask token takes an index in ``int`` mode only).

_LOOKUP_MODES = ("int", "one_hot", "multi_hot", "count", "tf_idf")
_MODE_ALIASES = {"binary": "multi_hot", "tf-idf": "tf_idf"}
_ADAPT_HINT = ("the vocabulary comes from adapt() at run time, so the width of the encoded "
               "output is unknown; pass a literal vocabulary=[...] or max_tokens=N with "
               "pad_to_max_tokens=True")


def _mode(value, layer: str, allowed: tuple = _LOOKUP_MODES) -> str:
    """``output_mode`` validated against ``allowed``; the IndexLookup layers (all five modes
    allowed) also take the deprecated spellings ``binary`` and ``tf-idf``."""
    if isinstance(value, str) and allowed == _LOOKUP_MODES:
        value = _MODE_ALIASES.get(value, value)
    if value not in allowed:
        raise LayerError(f"{layer} output_mode must be one of {', '.join(allowed)}, "
                         f"got {value!r}")
    return value


def _encoded(shape: tuple, mode: str, depth) -> tuple:
    """IndexLookup.compute_output_shape for an encoding ``mode`` (not ``int``)."""
    if mode == "one_hot":
        if len(shape) > 1 and shape[-1] == 1:
            return shape[:-1] + (depth,)
        return shape + (depth,)
    return shape[:-1] + (depth,)


def _check_keywords(args: Args, layer: str, accepted: tuple, max_positional: int) -> None:
    for key in args.keywords:
        if key not in accepted:
            raise LayerError(f"{layer} does not accept the argument '{key}'")
    if len(args.positional) > max_positional:
        raise LayerError(f"{layer} takes at most {max_positional} positional arguments")


def _salt(salt, layer: str) -> None:
    if salt is None or _int(salt) or isinstance(salt, bool):
        return
    if not (isinstance(salt, (list, tuple)) and len(salt) == 2):
        raise LayerError(f"{layer} salt must be an int or a tuple of 2 ints, got {salt!r}")


def _vocabulary(args: Args, pos: int):
    """The ``vocabulary`` argument: None, a file path, a list, or Ellipsis when unknown."""
    try:
        return args.get("vocabulary", None, pos=pos)
    except UnresolvedArgument:
        return Ellipsis


def _index_lookup(layer: str, *, tokens_type: tuple, max_tokens, num_oov, mask_token,
                  oov_token, vocabulary, idf_weights, invert, mode, sparse, pad,
                  frozen_size=None) -> dict:
    """IndexLookup's checks (``__init__`` and ``set_vocabulary``); the config with ``depth``
    (the encoded width, None in ``int`` mode)."""
    if max_tokens is not None:
        if not _number(max_tokens):
            raise LayerError(f"{layer} max_tokens must be an int, got {max_tokens!r}")
        if max_tokens <= 1:
            raise LayerError(f"{layer} max_tokens must be greater than 1, got {max_tokens}")
    if pad and max_tokens is None:
        raise LayerError(f"{layer} pad_to_max_tokens=True needs max_tokens")
    if not _int(num_oov) or num_oov < 0:
        raise LayerError(f"{layer} num_oov_indices must be an int >= 0, got {num_oov!r}")
    if invert and mode != "int":
        raise LayerError(f"{layer} invert=True needs output_mode='int', got {mode!r}")
    if sparse and mode == "int":
        raise LayerError(f"{layer} sparse=True needs an output_mode other than 'int'")
    if idf_weights is not None and mode != "tf_idf":
        raise LayerError(f"{layer} idf_weights is only valid with output_mode='tf_idf'")
    if mode == "tf_idf" and vocabulary is not None and idf_weights is None:
        raise LayerError(f"{layer} with a vocabulary and output_mode='tf_idf' needs "
                         "idf_weights")
    if mask_token is not None and not isinstance(mask_token, tokens_type):
        raise LayerError(f"{layer} mask_token {mask_token!r} does not match the vocabulary "
                         "dtype")
    config = {"output_mode": mode, "depth": None}
    size = _vocabulary_size(layer, tokens_type, vocabulary, mode, num_oov, mask_token,
                            oov_token, invert, idf_weights, max_tokens)
    if size is not None:  # what get_vocabulary() returns, special tokens first
        listed = _listed_vocabulary(vocabulary, mode, num_oov, mask_token, oov_token)
        if listed is not None:
            config["vocabulary"] = listed
    if mode == "int":
        return config
    if pad:
        config["depth"] = max_tokens
    elif size is not None:
        if frozen_size is not None and frozen_size != size:
            raise LayerError(f"{layer} vocabulary_size={frozen_size} differs from the "
                             f"vocabulary's size {size}")
        config["depth"] = size
    elif vocabulary is None and frozen_size is not None:
        config["depth"] = frozen_size  # vocabulary_size= from a saved config
    elif vocabulary is None and max_tokens is not None:
        raise UnresolvedArgument("vocabulary", f"the vocabulary comes from adapt() at run "
                                 f"time, so the encoded width is unknown; pass "
                                 f"pad_to_max_tokens=True to make it max_tokens="
                                 f"{max_tokens}, or a literal vocabulary=[...]")
    elif vocabulary is None:
        raise UnresolvedArgument("vocabulary", _ADAPT_HINT)
    elif isinstance(vocabulary, str):
        raise UnresolvedArgument("vocabulary", f"it is read from the file {vocabulary!r} at "
                                 "run time; pass max_tokens=N with pad_to_max_tokens=True "
                                 "to fix the width")
    else:
        raise UnresolvedArgument("vocabulary", "its length is not known statically; pass a "
                                 "literal list, or max_tokens=N with pad_to_max_tokens=True")
    return config


def _listed_vocabulary(vocabulary, mode, num_oov, mask_token, oov_token) -> Optional[tuple]:
    """``get_vocabulary()`` of a layer given a literal vocabulary of known tokens: the mask
    token (``int`` mode), the OOV tokens, then the tokens (those special tokens the given
    list already starts with are not repeated); None where a token is not known."""
    if any(isinstance(v, Unknown) for v in vocabulary):
        return None
    special, tokens = _special_and_tokens(list(vocabulary), mode, num_oov, mask_token,
                                          oov_token)
    return tuple(special + tokens)


def _special_and_tokens(vocabulary: list, mode, num_oov, mask_token, oov_token) -> tuple:
    """(the special tokens Keras puts first: the mask token in ``int`` mode, then the OOV
    tokens; the vocabulary's tokens after them, the special tokens the list starts with
    left out)."""
    special = [mask_token] * (mask_token is not None and mode == "int") + [oov_token] * num_oov
    head = vocabulary[:len(special)]
    found = len(head) == len(special) and all(
        not isinstance(a, Unknown) and a == b for a, b in zip(head, special))
    return special, vocabulary[len(special):] if found else vocabulary


def _vocabulary_size(layer, tokens_type, vocabulary, mode, num_oov, mask_token, oov_token,
                     invert, idf_weights, max_tokens):
    """The vocabulary size Keras records for a literal ``vocabulary`` (None otherwise),
    after IndexLookup.set_vocabulary's checks."""
    if vocabulary is None or vocabulary is Ellipsis:
        return None
    if isinstance(vocabulary, str):
        if mode == "tf_idf":
            raise LayerError(f"{layer} output_mode='tf_idf' cannot load a vocabulary file")
        return None
    if not isinstance(vocabulary, (list, tuple)):
        raise LayerError(f"{layer} vocabulary must be a list of tokens or a file path, "
                         f"got {vocabulary!r}")
    vocabulary = list(vocabulary)
    if not vocabulary:
        raise LayerError(f"{layer} cannot set an empty vocabulary")
    known = [v for v in vocabulary if not isinstance(v, Unknown)]
    for token in known:
        if not isinstance(token, tokens_type):
            raise LayerError(f"{layer} vocabulary holds {token!r}, not of the vocabulary "
                             "dtype")
    special, tokens = _special_and_tokens(vocabulary, mode, num_oov, mask_token, oov_token)
    plain = [t for t in tokens if not isinstance(t, Unknown)]
    if len(set(plain)) != len(plain):
        raise LayerError(f"{layer} vocabulary has repeated tokens")
    if mask_token is not None and mask_token in plain:
        raise LayerError(f"{layer} vocabulary holds the mask token {mask_token!r} after the "
                         "special tokens")
    if invert and oov_token is not None and oov_token in plain:
        raise LayerError(f"{layer} vocabulary holds the OOV token {oov_token!r} after the "
                         "special tokens")
    size = len(special) + len(tokens)
    if max_tokens is not None and size > max_tokens:
        raise LayerError(f"{layer} vocabulary size {size} exceeds max_tokens={max_tokens}")
    if mode == "tf_idf" and isinstance(idf_weights, (list, tuple)):
        if len(idf_weights) != len(vocabulary):
            raise LayerError(f"{layer} idf_weights has {len(idf_weights)} entries for a "
                             f"vocabulary of {len(vocabulary)}")
        if any(isinstance(w, (list, tuple)) for w in idf_weights):
            raise LayerError(f"{layer} idf_weights must be one-dimensional")
    # in the encoding modes the mask takes no index
    return num_oov + len(tokens) if mode != "int" else size


_INDEX_LOOKUP_EXTRA = ("trainable", "dtype", "vocabulary_size", "has_input_vocabulary")


class _Lookup(LayerKind):
    """StringLookup and IntegerLookup: no weights; the shape follows ``output_mode``."""

    family = "preprocessing"
    _POSITIONS: dict = {}
    _TOKENS: tuple = ()
    _OOV_TOKEN = None

    def _get(self, args: Args, key: str, default):
        return args.get(key, default, pos=self._POSITIONS.get(key))

    def configure(self, args: Args) -> dict:
        _check_keywords(args, self.name, tuple(self._POSITIONS) + _INDEX_LOOKUP_EXTRA,
                        sum(p is not None for p in self._POSITIONS.values()))
        mode = _mode(self._get(args, "output_mode", "int"), self.name)
        oov_method = self._get(args, "oov_method", "floormod")
        if oov_method not in ("floormod", "farmhash"):
            raise LayerError(f"{self.name} oov_method must be 'floormod' or 'farmhash', "
                             f"got {oov_method!r}")
        self._check_salt(self._get(args, "salt", None), oov_method)
        try:
            idf_weights = self._get(args, "idf_weights", None)
        except UnresolvedArgument:
            idf_weights = Ellipsis  # an array: given, length unknown
        try:
            frozen = args.get("vocabulary_size", None)
        except UnresolvedArgument:
            frozen = None
        return _index_lookup(
            self.name, tokens_type=self._TOKENS,
            max_tokens=self._get(args, "max_tokens", None),
            num_oov=self._get(args, "num_oov_indices", 1),
            mask_token=self._get(args, "mask_token", None),
            oov_token=self._get(args, "oov_token", self._OOV_TOKEN),
            vocabulary=_vocabulary(args, self._POSITIONS["vocabulary"]),
            idf_weights=idf_weights, invert=self._get(args, "invert", False), mode=mode,
            sparse=self._get(args, "sparse", False),
            pad=self._get(args, "pad_to_max_tokens", False), frozen_size=frozen)

    def _check_salt(self, salt, oov_method) -> None:
        _salt(salt, self.name)

    def output_shape(self, config, input_shape):
        if config["output_mode"] == "int":
            return input_shape
        return _encoded(tuple(input_shape), config["output_mode"], config["depth"])


@register
class StringLookup(_Lookup):
    """``StringLookup(max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]",
    vocabulary=None, idf_weights=None, invert=False, output_mode="int", ...)``."""

    name = "StringLookup"
    _POSITIONS = {"max_tokens": 0, "num_oov_indices": 1, "mask_token": 2, "oov_token": 3,
                  "vocabulary": 4, "idf_weights": 5, "invert": 6, "output_mode": 7,
                  "pad_to_max_tokens": 8, "sparse": 9, "encoding": 10, "name": 11,
                  "salt": 12, "oov_method": None}
    _TOKENS = (str,)
    _OOV_TOKEN = "[UNK]"


@register
class IntegerLookup(_Lookup):
    """``IntegerLookup(max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1,
    vocabulary=None, vocabulary_dtype="int64", idf_weights=None, invert=False,
    output_mode="int", ...)``; ``salt`` needs ``oov_method="farmhash"``."""

    name = "IntegerLookup"
    _POSITIONS = {"max_tokens": 0, "num_oov_indices": 1, "mask_token": 2, "oov_token": 3,
                  "vocabulary": 4, "vocabulary_dtype": 5, "idf_weights": 6, "invert": 7,
                  "output_mode": 8, "sparse": 9, "pad_to_max_tokens": 10, "oov_method": 11,
                  "salt": 12, "name": 13}
    _TOKENS = (int, float)
    _OOV_TOKEN = -1

    def configure(self, args: Args) -> dict:
        dtype = self._get(args, "vocabulary_dtype", "int64")
        if dtype != "int64":
            raise LayerError(f"IntegerLookup supports only vocabulary_dtype='int64', "
                             f"got {dtype!r}")
        return super().configure(args)

    def _check_salt(self, salt, oov_method) -> None:
        if salt is not None and oov_method != "farmhash":
            raise LayerError("IntegerLookup salt needs oov_method='farmhash'")
        _salt(salt, self.name)


def _check_trainable(args: Args) -> None:
    """Keras's base Layer takes only a bool ``trainable``."""
    trainable = args.get("trainable", True)
    if not isinstance(trainable, bool):
        raise LayerError(f"trainable must be a bool, got {trainable!r}")


_LAYER_KEYWORDS = ("name", "dtype", "trainable", "autocast", "activity_regularizer",
                   "input_shape", "input_dim")


@register
class TextVectorization(LayerKind):
    """``TextVectorization(max_tokens=None, standardize=..., split="whitespace", ngrams=None,
    output_mode="int", output_sequence_length=None, pad_to_max_tokens=False,
    vocabulary=None, idf_weights=None, sparse=False, ragged=False, ...)``.

    A StringLookup with ``mask_token=""`` inside; no weights.  ``int`` gives
    ``(batch, output_sequence_length)`` whatever the input rank.  The encodings see the input
    with an unknown token axis appended (``split`` set), or with an axis of 1 appended to a
    rank-1 input (``split=None``), then encode it as StringLookup does.
    """

    name = "TextVectorization"
    family = "preprocessing"
    _POSITIONS = {"max_tokens": 0, "standardize": 1, "split": 2, "ngrams": 3,
                  "output_mode": 4, "output_sequence_length": 5, "pad_to_max_tokens": 6,
                  "vocabulary": 7, "idf_weights": 8, "sparse": 9, "ragged": 10,
                  "encoding": 11, "name": 12}

    def configure(self, args: Args) -> dict:
        _check_keywords(args, self.name, tuple(self._POSITIONS) + _LAYER_KEYWORDS
                        + ("vocabulary_size", "has_input_vocabulary"), len(self._POSITIONS))
        pos = self._POSITIONS
        try:
            standardize = args.get("standardize", "lower_and_strip_punctuation",
                                   pos=pos["standardize"])
        except UnresolvedArgument:
            standardize = None  # a callable the frontend cannot see: fine
        if isinstance(standardize, str) and standardize not in (
                "lower_and_strip_punctuation", "lower", "strip_punctuation"):
            raise LayerError(f"TextVectorization standardize {standardize!r} is not a known "
                             "option")
        try:
            split = args.get("split", "whitespace", pos=pos["split"])
        except UnresolvedArgument:
            split = Ellipsis  # a callable (or unknown): splits, unless it is None
        if isinstance(split, str) and split not in ("whitespace", "character"):
            raise LayerError(f"TextVectorization split {split!r} is not a known option")
        ngrams = args.get("ngrams", None, pos=pos["ngrams"])
        if not (ngrams is None or isinstance(ngrams, int) or (
                isinstance(ngrams, tuple) and all(isinstance(n, int) for n in ngrams))):
            raise LayerError(f"TextVectorization ngrams must be None, an int or a tuple of "
                             f"ints, got {ngrams!r}")
        mode = _mode(args.get("output_mode", "int", pos=pos["output_mode"]), self.name)
        _check_trainable(args)
        length = args.get("output_sequence_length", None, pos=pos["output_sequence_length"])
        if mode == "int":
            if not (length is None or isinstance(length, int)):
                raise LayerError(f"TextVectorization output_sequence_length must be None or "
                                 f"an int, got {length!r}")
            if length is not None and length < 0:
                raise LayerError(f"TextVectorization output_sequence_length must be >= 0, "
                                 f"got {length}")
        elif length is not None:
            raise LayerError("TextVectorization output_sequence_length needs "
                             "output_mode='int'")
        if args.get("ragged", False, pos=pos["ragged"]) and mode != "int":
            raise LayerError("TextVectorization ragged=True needs output_mode='int'")
        try:
            idf_weights = args.get("idf_weights", None, pos=pos["idf_weights"])
        except UnresolvedArgument:
            idf_weights = Ellipsis
        try:
            frozen = args.get("vocabulary_size", None)
        except UnresolvedArgument:
            frozen = None
        if split is Ellipsis and mode != "int":
            raise UnresolvedArgument("split", "whether it is None decides the output rank")
        config = _index_lookup(
            self.name, tokens_type=(str,),
            max_tokens=args.get("max_tokens", None, pos=pos["max_tokens"]), num_oov=1,
            mask_token="", oov_token="[UNK]", vocabulary=_vocabulary(args, pos["vocabulary"]),
            idf_weights=idf_weights, invert=False, mode=mode,
            sparse=args.get("sparse", False, pos=pos["sparse"]),
            pad=args.get("pad_to_max_tokens", False, pos=pos["pad_to_max_tokens"]),
            frozen_size=frozen)
        config["split"] = split is not None
        config["output_sequence_length"] = None if length is None else int(length)
        return config

    def output_shape(self, config, input_shape):
        shape = tuple(input_shape)
        if config["output_mode"] == "int":
            return (shape[0] if shape else None, config["output_sequence_length"])
        if config["split"]:
            shape = shape + (None,)
        elif len(shape) <= 1:
            shape = shape + (1,)
        return _encoded(shape, config["output_mode"], config["depth"])


@register
class Hashing(LayerKind):
    """``Hashing(num_bins, mask_value=None, salt=None, output_mode="int", sparse=False)``.

    No weights.  ``int`` keeps the shape; ``one_hot``, ``multi_hot`` and ``count`` all
    replace the last axis by ``num_bins`` (unlike CategoryEncoding, ``one_hot`` never
    appends).  ``int`` output needs an integer ``dtype`` (default int64).
    """

    name = "Hashing"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        _check_keywords(args, self.name, ("num_bins", "mask_value", "salt", "output_mode",
                                          "sparse") + _LAYER_KEYWORDS, 5)
        mode = _mode(args.get("output_mode", "int", pos=3), self.name,
                     ("int", "one_hot", "multi_hot", "count"))
        _check_trainable(args)
        num_bins = args.get("num_bins", None, pos=0)
        if not _int(num_bins) or num_bins <= 0:
            raise LayerError(f"Hashing num_bins must be a positive int, got {num_bins!r}")
        dtype = args.get("dtype", None)
        if mode == "int" and dtype not in (None, "int32", "int64"):
            raise LayerError(f"Hashing output_mode='int' needs an integer dtype, got {dtype!r}")
        if args.get("sparse", False, pos=4) and mode == "int":
            raise LayerError("Hashing sparse=True needs an output_mode other than 'int'")
        _salt(args.get("salt", None, pos=2), self.name)
        return {"num_bins": num_bins, "output_mode": mode}

    def output_shape(self, config, input_shape):
        shape = tuple(input_shape)
        if config["output_mode"] == "int":
            return shape
        return shape[:-1] + (config["num_bins"],)


@register
class HashedCrossing(LayerKind):
    """``HashedCrossing(num_bins, output_mode="int", sparse=False)`` on a list of exactly
    two tensors whose last axes agree.  No weights; ``int`` keeps the first input's shape,
    ``one_hot`` encodes it like CategoryEncoding (an axis of 1 is replaced).  Keras ignores
    unknown keywords here."""

    name = "HashedCrossing"
    family = "preprocessing"
    multi_input = True

    def configure(self, args: Args) -> dict:
        mode = _mode(args.get("output_mode", "int", pos=1), self.name, ("int", "one_hot"))
        return {"num_bins": args.get("num_bins", pos=0), "output_mode": mode}

    def output_shape(self, config, input_shape):
        if len(input_shape) != 2:
            raise LayerError(f"HashedCrossing must be called on exactly 2 inputs, "
                             f"got {len(input_shape)}")
        first, second = (tuple(s) for s in input_shape)
        if first[-1:] != second[-1:]:
            raise LayerError(f"HashedCrossing inputs must have the same last axis: "
                             f"{first} and {second}")
        if config["output_mode"] == "int":
            return first
        if first[-1:] != (1,):
            return first + (config["num_bins"],)
        return first[:-1] + (config["num_bins"],)
