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
