"""The trainable flags a model was compiled with.

Keras fixes what a model's train step updates when the model is compiled: the GAN recipe
compiles the discriminator with its weights trainable, then sets ``discriminator.trainable =
False`` and compiles the combined model, in which the discriminator is frozen; the
discriminator's own train step still updates its weights.  :func:`record` keeps, at each
``compile()``, the flag of every layer, layer class object and nested model inside the model;
a model compiled again after it was trained (fine-tuning: frozen backbone first, unfrozen
after, or the other way round) keeps each flag that was on in a compile it was trained
under, so its estimate bounds every phase (the analysis pairs it with the compiles' heaviest
optimizer); a compile no training call followed is replaced by the next.  :func:`as_compiled`
puts those flags back while the model's graph is made, so its trainable / non-trainable
split and its memory estimate are those of its train step.  A model never compiled keeps
the flags the file ends with.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from memlint.frontends.keras.order import functional_order
from memlint.frontends.keras.training_loops import TRAIN_CALL
from memlint.frontends.keras.values import (FunctionalModel, LayerRef, ModelLayer,
                                            SequentialModel)

_MAX_DEPTH = 32


def record(model: Any) -> None:
    """``model.compile(...)``: remember the trainable flag of everything inside it (on where
    an earlier compile the model was trained under had it on)."""
    trained = _training_calls(model)
    earlier = {}
    if trained > getattr(model, "compiled_after_calls", 0):
        earlier = {id(holder): flag for holder, flag in getattr(model, "compiled_flags", None)
                   or ()}
    model.compiled_flags = [(holder, _flag(holder) or earlier.get(id(holder), False))
                            for holder in _holders(model)]
    model.compiled_after_calls = trained


def _training_calls(model: Any) -> int:
    """How many training calls of ``model`` the file has made so far."""
    usage = getattr(model, "usage", None) or {}
    return sum(len(usage.get(method, ())) for method in
               ("fit", "fit_generator", "train_on_batch", TRAIN_CALL))


@contextmanager
def as_compiled(model: Any):
    """While the block runs, every flag inside ``model`` is as it was at its last compile
    (unchanged for a model never compiled); the flags the file ends with come back after."""
    snapshot = getattr(model, "compiled_flags", None)
    if not snapshot:
        yield
        return
    current = [(holder, _flag(holder)) for holder, _ in snapshot]
    try:
        for holder, flag in snapshot:
            _set_flag(holder, flag)
        yield
    finally:
        for holder, flag in current:
            _set_flag(holder, flag)


def _holders(model: Any) -> list:
    """Every object with a trainable flag inside ``model`` (itself first), each once."""
    from memlint.frontends.keras.classes import ClassLayer, ClassObject, tracked_layers
    out, seen = [], set()
    stack = [(model, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, ModelLayer):
            value = value.model
        elif isinstance(value, ClassLayer):
            value = value.obj
        if id(value) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(value))
        if isinstance(value, LayerRef):
            out.append(value)
            continue
        if isinstance(value, SequentialModel):
            members = value.layers
        elif isinstance(value, FunctionalModel):
            members = [layer for layer, _ in functional_order(value.inputs, value.outputs)]
        elif isinstance(value, ClassObject):
            members = tracked_layers(value)
        else:
            continue
        out.append(value)
        stack.extend((member, depth + 1) for member in reversed(members))
    return out


def _flag(holder: Any) -> bool:
    if isinstance(holder, LayerRef):
        return holder.instance.trainable
    return bool(getattr(holder, "trainable", True))


def _set_flag(holder: Any, flag: bool) -> None:
    if isinstance(holder, LayerRef):
        holder.instance.trainable = flag
    else:
        holder.trainable = flag
