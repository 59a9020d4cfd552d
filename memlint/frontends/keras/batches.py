"""Tensors of several batches: ``tf.concat([generated, real], axis=0)``.

A shape's first axis, ``None``, is the batch, and every tensor is sized at one batch; a
tensor that joins several batches along that axis would be under-counted by every layer
that reads it (a GAN's discriminator run on real and generated images together holds twice
the activations).  Such a value is a :class:`~.values.Batches`: a tensor of one batch's shape
and how many batches it holds.  What runs on it runs once, on that tensor, and its call
record says how many batches it holds (``CallRecord.batches``): the memory model sizes every
tensor of that call that many times (``LayerNode.call_batches``), the calls inside a model or
layer class called on it too.

* a layer, model or layer class called on it, an element-wise operation or Python operator:
  run on its tensor (:func:`run_on`), the result again of several batches; joining it to
  more batches (``ops.concatenate``, ``tf.concat``, a ``Concatenate(axis=0)`` layer) adds
  them up;
* a split along the batch axis into as many parts gives one-batch tensors back
  (:func:`split`);
* a reshape that folds other axes into the batch axis makes one (``(batch, 6, 16, 16, 3)
  -> (-1, 16, 16, 3)``: six batches), and one that unfolds them gives a tensor of one batch
  back (:func:`regrouped`); so does a tile or repeat of the batch axis alone
  (:func:`repeated`);
* an operation that works row by row (a reduction over other axes, ``argmin`` along one,
  ``one_hot``, a matrix product by a tensor with no batch axis: keras.io's VQ-VAE finds each
  position's nearest code so) makes one of as many batches (:func:`row_wise`);
* anything else that reads it (``tf.shape``, a reduction over the batch axis, slicing the
  batch axis, a loss function) gets an unknown value, so nothing is sized from it at one
  batch.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from memlint.frontends.keras import tensor_ops
from memlint.frontends.keras.values import (Array, Batches, Tensor, Unknown, call_arg,
                                            flatten_structure)

# the spellings of a concatenation and of a split (the operation table's names)
_JOINS = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                   if stem == "concatenate")
_SPLITS = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                    if stem == "split")
_RESHAPES = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                      if stem == "reshape")
_REPEATS = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                     if stem in ("tile", "repeat"))


def is_join(name: str) -> bool:
    return name in _JOINS


def is_split(name: str) -> bool:
    return name in _SPLITS


def is_reshape(name: str) -> bool:
    return name in _RESHAPES


def repeated(name: str, args: list, kwargs: dict) -> Optional[tuple]:
    """``(tensor, one batch's shape, batches)`` of a tile or repeat of a batch-first tensor
    along the batch axis alone (``ops.repeat(x, 4, axis=0)``, ``ops.tile(x, (4, 1, 1))``:
    several samples drawn per input), or of a repeat with no axis, which flattens the tensor
    first (keras.io's conditional GAN spreads its one-hot labels over the image so:
    ``ops.repeat(labels[:, :, None, None], repeats=[28 * 28])``, a tensor of 10 x 784
    batches of one value each), or None (the operation's own rule decides it)."""
    if name not in _REPEATS:
        return None
    tensor = call_arg(args, kwargs, 0, "x")
    if not isinstance(tensor, Tensor) or not tensor.shape or tensor.shape[0] is not None:
        return None
    if name.endswith("repeat"):
        times, axis = call_arg(args, kwargs, 1, "repeats"), call_arg(args, kwargs, 2, "axis")
        if isinstance(times, (list, tuple)) and len(times) == 1:
            times = times[0]  # one count for every element
        if axis is None and isinstance(times, int) and not isinstance(times, bool) \
                and times > 0 and None not in tensor.shape[1:]:
            count = math.prod(tensor.shape[1:]) * times
            return tensor, (None,), count
        if not isinstance(axis, int) or isinstance(axis, bool) or axis % len(tensor.shape):
            return None
    else:
        reps = call_arg(args, kwargs, 1, "repeats")
        reps = (reps,) if isinstance(reps, int) else reps
        if not isinstance(reps, (list, tuple)) or len(reps) != len(tensor.shape) or \
                any(r != 1 for r in reps[1:]):
            return None
        times = reps[0]
    if not isinstance(times, int) or isinstance(times, bool) or times < 2:
        return None
    return tensor, tuple(tensor.shape), times


def row_wise(name: str, args: list, kwargs: dict) -> bool:
    """Whether the operation ``name`` reads its tensor of several batches (the first
    operand) row by row, each row of the result made from the same row of it: a reduction
    over axes that leave the batch axis (``tf.reduce_sum(x, axis=1)``; TensorFlow's
    ``argmin`` reads axis 0 unless told), ``one_hot``, or a matrix product by a tensor of
    no batch axis (``x @ codebook``)."""
    stem = tensor_ops.OPERATIONS[name][0]
    first = call_arg(args, kwargs, 0, "x")
    rest = [v for v in flatten_structure([args, kwargs]) if v is not first]
    if not isinstance(first, Batches) or not first.tensor.shape or has_batches(rest):
        return False
    rank = len(first.tensor.shape)
    if tensor_ops.is_reduction(name):
        axis = call_arg(args, kwargs, 1, "axis")
        if axis is None and name.startswith("tensorflow.") and stem in ("argmin", "argmax"):
            return False  # TensorFlow's default: the batch axis
        axes = axis if isinstance(axis, (list, tuple)) else [axis]
        return bool(axes) and all(isinstance(a, int) and not isinstance(a, bool)
                                  and -rank <= a < rank and a % rank for a in axes)
    if stem == "one_hot":
        return True
    if stem == "matmul":
        other = call_arg(args, kwargs, 1, "x2", kwargs.get("b"))
        flags = [call_arg(args, kwargs, i, key, False) for i, key in
                 ((2, "transpose_a"), (4, "adjoint_a"))] if name.startswith("tensorflow.") \
            else []
        return rank >= 2 and not any(flags) and isinstance(other, (Tensor, Array)) and \
            bool(other.shape) and len(other.shape) <= 2 and None not in other.shape
    return False


def has_batches(values: Any) -> bool:
    return any(isinstance(v, Batches) for v in flatten_structure(values))


def join(args: list, kwargs: dict) -> Optional[tuple]:
    """``(tensors, batches)`` of a concatenation along the batch axis of tensors of one
    batch's shape (each one batch, or several), or None when ``args`` is no such
    concatenation (the operation's own rule decides it)."""
    values = call_arg(args, kwargs, 0, "xs", kwargs.get("values"))
    if not isinstance(values, (list, tuple)) or len(values) < 2:
        return None
    tensors = unwrapped(list(values))
    if not all(isinstance(t, Tensor) and t.shape for t in tensors):
        return None
    shape = tensors[0].shape
    axis = call_arg(args, kwargs, 1, "axis", 0)
    if not isinstance(axis, int) or isinstance(axis, bool) or \
            not -len(shape) <= axis < len(shape) or axis % len(shape):
        return None
    if any(t.shape[0] is not None or t.shape != shape for t in tensors):
        return None  # rows of known counts, or parts of other shapes
    return tensors, sum(v.count if isinstance(v, Batches) else 1 for v in values)


def along_batch_axis(axis: Any, inputs: Any) -> bool:
    """Whether a ``Concatenate(axis)`` layer called on ``inputs`` joins them along the batch
    axis of batch-first tensors (one batch or several)."""
    tensors = unwrapped(list(inputs)) if isinstance(inputs, (list, tuple)) else []
    return bool(tensors) and isinstance(axis, int) and not isinstance(axis, bool) and all(
        isinstance(t, Tensor) and t.shape for t in tensors) and axis % len(
        tensors[0].shape) == 0 and any(t.shape[0] is None for t in tensors)


def holding(out: Any, count: int) -> Any:
    """The result of a call on one batch's tensors that holds ``count`` batches (0: a
    number not known): its record says so, and it is a tensor of several batches."""
    if not isinstance(out, Tensor) or out.shape is None or out.producer is None:
        return out
    out.producer[0].calls[out.producer[1]].batches = count
    return Batches(out, count)


def split(args: list, kwargs: dict) -> Optional[Batches]:
    """The tensor of several batches a split along the batch axis into as many parts takes
    apart (``z1, z2 = ops.split(z, 2, axis=0)``), or None."""
    whole = call_arg(args, kwargs, 0, "x")
    sections = call_arg(args, kwargs, 1, "indices_or_sections")
    axis = call_arg(args, kwargs, 2, "axis", 0)
    if not isinstance(whole, Batches) or sections != whole.count or \
            not isinstance(axis, int) or isinstance(axis, bool) or \
            axis % len(whole.tensor.shape):
        return None
    return whole


def regrouped(args: list, kwargs: dict) -> Optional[tuple]:
    """``(tensor, new shape, batches)`` of a reshape that moves whole rows between the batch
    axis and the others: ``(batch, 6, 16, 16, 3) -> (-1, 16, 16, 3)`` folds six frames per
    sample into the batch axis (six batches: a TimeDistributed written by hand), ``(-1, 6,
    64)`` of such a tensor unfolds them again (one batch); None for any other reshape (the
    operation's own rule decides it)."""
    value = call_arg(args, kwargs, 0, "x", kwargs.get("tensor"))
    target = call_arg(args, kwargs, 1, "newshape", kwargs.get("shape"))
    tensor, before = (value.tensor, value.count) if isinstance(value, Batches) else (value, 1)
    if not isinstance(tensor, Tensor) or not tensor.shape or tensor.shape[0] is not None \
            or not isinstance(target, (list, tuple)) or not target or target[0] not in (-1, None):
        return None
    have, rest = tensor.shape[1:], tuple(target[1:])
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in have + rest):
        return None
    total, per = before * math.prod(have), math.prod(rest)
    if total % per or total // per == before == 1:
        return None
    return tensor, (None, *rest), total // per


def run_on(values: Any, run: Callable[[Any], Any], what: str) -> Any:
    """``run`` on ``values`` (a call's arguments) with each tensor of several batches
    replaced by its tensor; the records of the calls that made the result hold that many
    batches, and the result is again of several batches.  Unknown when the arguments mix
    counts, or a tensor of one batch with several (which Keras would not broadcast)."""
    leaves = flatten_structure(values)
    counts = {v.count for v in leaves if isinstance(v, Batches)}
    if len(counts) != 1 or any(isinstance(v, Tensor) and v.shape and v.shape[0] is None
                               for v in leaves):
        return Unknown(f"{what} on tensors of different numbers of batches")
    count = counts.pop()
    out = run(unwrapped(values))
    made = [t for t in flatten_structure(out) if isinstance(t, Tensor)]
    if not made or any(t.shape is None or not t.shape or t.shape[0] is not None
                       or t.producer is None for t in made):
        return Unknown(f"{what} on a tensor of several batches")
    for t in made:
        t.producer[0].calls[t.producer[1]].batches = count
    return _wrapped(out, count)


def unwrapped(value: Any) -> Any:
    """``value`` with each tensor of several batches replaced by its tensor."""
    if isinstance(value, Batches):
        return value.tensor
    if isinstance(value, (list, tuple)):
        return type(value)(unwrapped(v) for v in value)
    if isinstance(value, dict):
        return {k: unwrapped(v) for k, v in value.items()}
    return value


def _wrapped(value: Any, count: int) -> Any:
    if isinstance(value, Tensor):
        return Batches(value, count)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrapped(v, count) for v in value)
    if isinstance(value, dict):
        return {k: _wrapped(v, count) for k, v in value.items()}
    return value
