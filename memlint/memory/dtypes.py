"""Bytes per element and what each Keras dtype policy stores in which precision."""

from __future__ import annotations

from memlint.records import record

BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}


@record(frozen=True)
class Precision:
    """Bytes per element for variables (weights, gradients, slots) and for activations."""

    policy: str
    variable_bytes: int
    compute_bytes: int
    loss_scaling: bool = False


def precision(policy: str) -> Precision:
    """The precision of a Keras dtype policy name (``float32``, ``mixed_float16``, ...).

    Mixed policies keep variables and optimizer slots in float32 and compute in 16 bits;
    ``mixed_float16`` also wraps the optimizer in a loss-scale optimizer.
    """
    if policy.startswith("mixed_"):
        compute = policy[len("mixed_"):]
        return Precision(policy, 4, BYTES.get(compute, 2), loss_scaling=compute == "float16")
    size = BYTES.get(policy)
    if size is None:
        raise ValueError(f"unknown dtype policy {policy!r}")
    return Precision(policy, size, size)
