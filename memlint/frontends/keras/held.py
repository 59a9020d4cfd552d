"""Which of the models a file builds are reported, and the names of models that plain
objects hold.

Keras 2-era code keeps its models on plain classes: a GAN builds ``self.discriminator``,
``self.generator`` and ``self.combined`` and compiles each, a classifier builds
``self.model`` in ``build_model``.  A model kept on an attribute is named after the object's
holder: ``gan.discriminator`` for ``gan = GAN()`` at module level, ``GAN.discriminator`` for
``--entry GAN()`` or an object no module-level name holds (:func:`name_held_models`).

A model is reported (:func:`is_reported`) unless it is part of another one: made inside a
Layer / Model subclass of the file, or used as a layer of another model without a name of
its own at module level.  A compiled model is always its own: it has a train step of its
own on the GPU, even when it is also a part of another model (a GAN's discriminator).  A
model that nothing runs on its own and that other reported models run as a layer, or whose
layers are all in a model that runs, is marked as their part (:func:`mark_parts`): the
analysis leaves it out of the estimates.  So is a model that only a tf.data ``map()``
function runs (a ``data_augmentation`` Sequential mapped over the batches): the input
pipeline runs on the host, not in a GPU step.
"""

from __future__ import annotations

from typing import Any

from memlint.frontends.keras.nested import model_layers
from memlint.frontends.keras.plain_objects import PlainObject
from memlint.frontends.keras.values import FunctionalModel, SequentialModel

_MAX_DEPTH = 8  # objects holding objects holding models


def name_held_models(models: list, roots: dict) -> None:
    """Name each model held on an attribute of a plain object (``roots``: module-level and
    ``--entry`` names to their values) unless a module-level variable names it already."""
    owners: dict = {}
    for name, value in roots.items():
        if isinstance(value, PlainObject) and id(value) not in owners:
            owners[id(value)] = name
    for model in models:
        held = getattr(model, "held_by", None)
        if held is None or getattr(model, "variable_is_global", False):
            continue
        model.variable = _path(held, owners)
        model.held = True


def _path(held: tuple, owners: dict) -> str:
    parts = []
    obj, attr = held
    for _ in range(_MAX_DEPTH):
        parts.append(attr)
        if id(obj) in owners:
            parts.append(owners[id(obj)])
            break
        outer = getattr(obj, "held_by", None)
        if outer is None:
            parts.append(obj.cls.name if obj.cls is not None else "namespace")
            break
        obj, attr = outer
    return ".".join(reversed(parts))


def is_reported(model: Any) -> bool:
    """Whether ``model`` is a model of its own in the report (see the module's docstring)."""
    if getattr(model, "undecided_branch", None) is not None:
        return False  # built in one branch of an if memlint cannot decide (a note says so)
    if getattr(model, "inside_class", False) and model.variable is None:
        return False  # made inside a Layer / Model subclass of the file: a part of it
    if "compile" in model.usage or getattr(model, "held", False) and model.as_layer is None:
        return True
    if model.variable is None and (getattr(model, "cls", None) is not None
                                   and model.as_layer is not None):
        return False  # a Model subclass made inline as a layer of another model
    if model.as_layer is not None and not getattr(model, "variable_is_global", False):
        # made inside a function and used there as a layer of another model (a backbone
        # from a factory): part of that model, as for Keras; a module-level name for it
        # would make it a model of its own
        return False
    return True


def mark_parts(models: list, graphs: list) -> None:
    """Mark each reported model that other reported models run as a layer while nothing
    runs it on its own (a module-level ``conv_base`` given to ``Sequential([conv_base,
    ...])`` and never compiled, fitted or called on data), or whose layers are all in a
    model that is compiled, fitted or called (``Model(base.input, head(base.output))``), or
    some of them (DeepLabV3+ on ``resnet50.get_layer("conv4_block6_2_relu").output``: the
    layers after it never run): ``setup.part_of`` names them.  Its layers that run and their
    weights are in those steps, at their batch; the report leaves it out rather than
    estimate a step of its own on assumed settings."""
    used = [(_layer_ids(m), g) for m, g in zip(models, graphs) if m.usage]
    marked = True
    while marked:  # a part of a part runs too (a backbone of an embedding a siamese runs)
        marked = False
        for model, graph in zip(models, graphs):
            if model.usage or graph.setup.part_of:
                continue
            _mark_part(model, graph, used, graphs)
            if graph.setup.part_of:
                used.append((_layer_ids(model), graph))
                marked = True
    for model, graph in zip(models, graphs):
        if only_mapped(model) and not graph.setup.part_of:
            graph.setup.pipeline = _map_calls(model.mapped_by)


def only_mapped(model) -> bool:
    """Whether only tf.data ``map()`` functions run ``model`` (nothing compiles, fits or
    calls it on its own; a subclassed model is never taken so)."""
    return bool(getattr(model, "mapped_by", None)) and not model.usage


def _map_calls(locations: list) -> str:
    """``map() at line 35`` (``at lines 35 and 41``) for the map() calls that run a model."""
    lines = sorted({loc.line for loc in locations})
    if len(lines) == 1:
        return f"map() at line {lines[0]}"
    return "map() at lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"


def _mark_part(model, graph, used: list, graphs: list) -> None:
    """``graph.setup.part_of``: the models that run ``model``'s layers (see mark_parts)."""
    if model.as_layer is None:
        # ``Model(base.input, head(base.output))``: a model that runs holds its layers, the
        # same layer objects, every one (a pretrained backbone's Keras 2 fine-tuning; an
        # encoder of a trained autoencoder) or those up to an inner layer's output (a
        # segmentation model's backbone)
        own = _layer_ids(model)
        outer = [other.name for ids, other in used if other is not graph and own & ids]
        graph.setup.part_shares = bool(outer)
    else:
        # a call of it whose size is not known (on a tensor of unknown shape) is a call all
        # the same: the other model's estimate is incomplete, and one of this model alone,
        # on assumed settings, no better
        outer = [other.name for other in graphs if other is not graph and any(
            layer.name == graph.name and (layer.inner_calls or layer.input_shapes)
            for layer in other.layers)]
    if not outer:  # held by a model subclass whose traced step never runs it (idle there)
        outer = [other.name for other in graphs if other is not graph and any(
            layer.name == graph.name and getattr(layer, "idle", False)
            for layer in other.layers)]
        graph.setup.part_idle = bool(outer)
    graph.setup.part_of = list(dict.fromkeys(outer))


def _layer_ids(model) -> set:
    """The identities of the layers a Sequential or functional ``model`` runs (its
    InputLayers left out); none for a subclassed model, whose layers its ``call()`` makes."""
    if not isinstance(model, (SequentialModel, FunctionalModel)):
        return set()
    return {id(layer.instance) for layer in model_layers(model)
            if getattr(layer, "instance", None) is not None}
