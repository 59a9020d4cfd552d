"""Tensors of several batches: ``tf.concat([generated, real], axis=0)``.

A shape's first axis, ``None``, is the batch, and every tensor is sized at one batch; a
tensor that joins several batches along that axis would be under-counted by every layer
that reads it (a GAN's discriminator run on real and generated images together holds twice
the activations).  Such a value is a :class:`~.values.Batches`: a tensor of one batch's shape
and how many batches it holds.  What runs on it runs once, on that tensor, and its call
record says how many batches it holds (``CallRecord.batches``): the memory model sizes every
tensor of that call that many times (``LayerNode.call_batches``), the calls inside a model or
layer class called on it too.

* a layer, model or layer class called on it, an element-wise operation or Python operator,
  joining it to more batches: run on its tensor (:func:`run_on`), the result again of
  several batches;
* a split along the batch axis into as many parts gives one-batch tensors back
  (:func:`split`);
* anything else that reads it (``tf.shape``, a reduction, slicing the batch axis, a loss
  function) gets an unknown value, so nothing is sized from it at one batch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from memlint.frontends.keras import tensor_ops
from memlint.frontends.keras.values import (Batches, Tensor, Unknown, call_arg,
                                            flatten_structure)

# the spellings of a concatenation and of a split (the operation table's names)
_JOINS = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                   if stem == "concatenate")
_SPLITS = frozenset(name for name, (stem, _) in tensor_ops.OPERATIONS.items()
                    if stem == "split")


def is_join(name: str) -> bool:
    return name in _JOINS


def is_split(name: str) -> bool:
    return name in _SPLITS


def has_batches(values: Any) -> bool:
    return any(isinstance(v, Batches) for v in flatten_structure(values))


def join(args: list, kwargs: dict) -> Optional[tuple]:
    """``(tensors, batches)`` of a concatenation along the batch axis of tensors of one
    batch's shape (each one batch, or several), or None when ``args`` is no such
    concatenation (the operation's own rule decides it)."""
    values = call_arg(args, kwargs, 0, "xs", kwargs.get("values"))
    if not isinstance(values, (list, tuple)) or len(values) < 2:
        return None
    tensors = [v.tensor if isinstance(v, Batches) else v for v in values]
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
    out = run(_unwrapped(values))
    made = [t for t in flatten_structure(out) if isinstance(t, Tensor)]
    if not made or any(t.shape is None or not t.shape or t.shape[0] is not None
                       or t.producer is None for t in made):
        return Unknown(f"{what} on a tensor of several batches")
    for t in made:
        t.producer[0].calls[t.producer[1]].batches = count
    return _wrapped(out, count)


def _unwrapped(value: Any) -> Any:
    if isinstance(value, Batches):
        return value.tensor
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrapped(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrapped(v) for k, v in value.items()}
    return value


def _wrapped(value: Any, count: int) -> Any:
    if isinstance(value, Tensor):
        return Batches(value, count)
    if isinstance(value, (list, tuple)):
        return type(value)(_wrapped(v, count) for v in value)
    if isinstance(value, dict):
        return {k: _wrapped(v, count) for k, v in value.items()}
    return value
