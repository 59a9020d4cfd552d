"""Optimizer state: how many weight-sized slots each Keras optimizer keeps per variable.

Counts follow Keras 3 (keras/src/optimizers): e.g. Adam keeps two moments, three with
``amsgrad``; SGD keeps none, one with momentum.  ``use_ema`` and gradient accumulation add one
full copy each.
"""

from __future__ import annotations

from math import prod

from memlint.ir import OptimizerSpec

# optimizer -> (base slots, {option: extra slots when the option is truthy})
_SLOTS = {
    "sgd": (0, {"momentum": 1}),
    "rmsprop": (1, {"momentum": 1, "centered": 1}),
    "adagrad": (1, {}),
    "adadelta": (2, {}),
    "adam": (2, {"amsgrad": 1}),
    "adamw": (2, {"amsgrad": 1}),
    "nadam": (2, {}),
    "adamax": (2, {}),
    "ftrl": (2, {}),
    "lion": (1, {}),
    "lamb": (2, {}),
    "adafactor": (0, {}),  # factored: counted per variable below
    # TensorFlow Addons (tfa.optimizers): AdamW, LazyAdam, RectifiedAdam and AdaBelief keep
    # Adam's two moments (a third with amsgrad), Yogi and LAMB two, SGDW a momentum,
    # NovoGrad one first moment per weight (its second moments are one number per variable)
    "lazyadam": (2, {"amsgrad": 1}),
    "rectifiedadam": (2, {"amsgrad": 1}),
    "adabelief": (2, {"amsgrad": 1}),
    "yogi": (2, {}),
    "sgdw": (0, {"momentum": 1}),
    "novograd": (1, {}),
}

KNOWN = tuple(sorted(_SLOTS))


def slots_per_variable(spec: OptimizerSpec) -> int:
    """Full weight-sized slots per trainable variable (Adafactor's factored state excluded)."""
    base, extras = _SLOTS.get(spec.name, (2, {}))
    slots = base + sum(n for opt, n in extras.items() if spec.options.get(opt))
    if spec.options.get("use_ema"):
        slots += 1
    if (spec.options.get("gradient_accumulation_steps") or 0) > 1:
        slots += 1
    return slots


def heaviest(first: OptimizerSpec, later: list) -> OptimizerSpec:
    """Of a model's optimizers (a recompile for fine-tuning, a GAN's compile() of its own
    given one per network), the one with the most state per parameter (the first on a tie;
    unchanged when all keep as much), its source naming the others: the estimate pairs it
    with the layers trainable in any trained phase (frontends/keras/compiled.py), so no
    phase is under-counted."""
    if not later or all(slots_per_variable(spec) == slots_per_variable(first)
                        for spec in later):
        return first
    chosen = max([first, *later], key=slots_per_variable)  # the first of the most
    names = ", ".join(spec.name for spec in [first, *later])
    return OptimizerSpec(chosen.name, dict(chosen.options),
                         f"{chosen.source}; the most state of the {len(later) + 1} "
                         f"optimizers the model is compiled with ({names})")


def optimizer_elements(spec: OptimizerSpec, trainable_shapes: list) -> int:
    """Elements of optimizer state for the given trainable variable shapes."""
    total = slots_per_variable(spec) * sum(prod(s) if s else 1 for s in trainable_shapes)
    if spec.name == "adafactor":
        for shape in trainable_shapes:
            if len(shape) >= 2:  # factored second moment: one row and one column vector
                total += prod(shape[:-1]) + prod(shape[:-2] + shape[-1:])
            else:
                total += prod(shape) if shape else 1
            total += prod(shape) if shape else 1  # the full update buffer (velocity)
    return total


def is_known(name: str) -> bool:
    return name in _SLOTS


# The weight-sized temporaries of an update, by how the backend runs it:
# * "foreach": Keras's torch backend updates all variables at once with ``torch._foreach_*``
#   ops that return new lists; the count is how many lists are alive at the deepest point of
#   each optimizer's update (keras/src/backend/torch/optimizers; Adam's ``m * alpha``,
#   ``sqrt(v)``, ``sqrt(v) + eps`` while the quotient is made); SGD updates in place;
# * "graph": TensorFlow's graph executor runs each variable's update as element-wise ops with
#   no order between variables (Keras's optimizers in graph mode); the count is per trainable
#   element, the larger of what one and two Dense variables measured (docs/tf-oracle.md).
_TEMPORARIES = {
    "foreach": {"sgd": 0, "adam": 3, "adamw": 3, "rmsprop": 3, "adagrad": 3, "adadelta": 3,
                "adamax": 3, "nadam": 5, "lion": 2},
    "graph": {"sgd": 0, "adam": 1, "adamw": 2, "rmsprop": 2, "adagrad": 1},
}
# Optimizers not listed: under "foreach", Keras updates them one variable at a time with
# element-wise ops (a few temporaries of the largest variable); under "graph", two per
# element.
_PER_VARIABLE_TEMPORARIES = 3
_GRAPH_OTHERS = 2


def update_temporary_elements(spec: OptimizerSpec, trainable_shapes: list,
                              schedule: str = "foreach", loss_scaled: bool = False) -> int:
    """Elements of the temporaries an update run as ``schedule`` makes at its deepest.

    ``loss_scaled``: Keras's LossScaleOptimizer divides every gradient by the scale before
    the inner optimizer runs; under "foreach" that list of unscaled gradients is alive
    through the inner update (the torch step of a mixed_float16 CNN under RMSprop: four
    weight-sized lists at the update's peak, the division's among them)."""
    sizes = [prod(s) if s else 1 for s in trainable_shapes]
    if not sizes:
        return 0
    if loss_scaled and schedule == "foreach":
        return sum(sizes) + update_temporary_elements(spec, trainable_shapes, schedule)
    lists = _TEMPORARIES[schedule].get(spec.name)
    if schedule == "graph":
        if spec.name == "sgd" and spec.options.get("momentum"):
            lists = 1  # the velocity's products
        return (_GRAPH_OTHERS if lists is None else lists) * sum(sizes)
    if lists is not None:
        return lists * sum(sizes)
    return _PER_VARIABLE_TEMPORARIES * max(sizes)
