"""Where a model runs: the memory its process may use on each GPU, and the share of the batch
and of the weights each GPU holds.

* The budget follows the backend and the caps the code sets (:class:`~memlint.ir.MemoryCap`):
  TensorFlow keeps a reserve for the system unless ``per_process_gpu_memory_fraction`` (then
  it takes that share of the card) or a logical device's ``memory_limit`` decides; JAX
  preallocates ``XLA_PYTHON_CLIENT_MEM_FRACTION`` of the card (75% by default, also the limit
  of its allocator when preallocation is off) unless ``XLA_PYTHON_CLIENT_ALLOCATOR=platform``;
  PyTorch takes what it needs, up to ``set_per_process_memory_fraction``.  The CUDA context
  is outside all of them.
* A distribution strategy splits the global batch over its replicas (``--gpus`` or the code
  says how many); ``64 * strategy.num_replicas_in_sync`` is already per replica.  Variables a
  layout map shards are split over the devices of the mesh axes it names.
"""

from __future__ import annotations

import re
from dataclasses import replace
from math import ceil
from typing import Optional

from memlint.budget import Budget
from memlint.ir import ModelGraph, TrainingSetup

JAX_DEFAULT_FRACTION = 0.75


def backend_family(backend: Optional[str]) -> str:
    """tf, jax or torch (code that names no backend is TensorFlow/Keras 2, and an exported
    ONNX graph keeps TensorFlow's reserve: its runtime is not known)."""
    if backend in ("jax", "torch"):
        return backend
    return "tf"


def process_budget(budget: Budget, caps: list, backend: Optional[str],
                   configured_reserve: bool = False) -> Budget:
    """``budget`` for one process of ``backend`` under the caps the code sets."""
    family = backend_family(backend)
    found = {cap.kind: cap for cap in caps}  # the last setting of each kind wins
    cap, source = None, ""
    reserve, reserve_source = budget.framework_reserve, budget.reserve_source
    if family == "tf":
        if backend == "onnx" and not configured_reserve:
            reserve_source = "TensorFlow's default, kept: the runtime an exported graph runs " \
                             "under is not known (--reserve sets yours)"
        if "tf-limit" in found:
            cap, source = int(found["tf-limit"].value), found["tf-limit"].source
        elif "tf-fraction" in found:
            fraction = float(found["tf-fraction"].value)
            cap, source = int(budget.total * fraction), found["tf-fraction"].source
        if cap is not None and not configured_reserve:
            reserve, reserve_source = 0, "none: the code's own limit replaces TensorFlow's"
    else:
        if not configured_reserve:
            reserve = 0
            reserve_source = f"none ({'JAX' if family == 'jax' else 'PyTorch'} keeps no " \
                             "system reserve)"
        if family == "jax":
            allocator = found.get("jax-allocator")
            if allocator is not None and allocator.value == "platform":
                source = f"no cap ({allocator.source}: allocations on demand)"
            else:
                fraction_cap = found.get("jax-fraction")
                fraction = float(fraction_cap.value) if fraction_cap else JAX_DEFAULT_FRACTION
                cap = int(budget.total * fraction)
                source = fraction_cap.source if fraction_cap else \
                    "JAX's default: its allocator takes 75% of the card " \
                    "(XLA_PYTHON_CLIENT_MEM_FRACTION)"
                if "jax-preallocate" in found and not found["jax-preallocate"].value:
                    source += f"; {found['jax-preallocate'].source} (allocated on demand, " \
                              "up to the same limit)"
        elif "torch-fraction" in found:
            fraction = float(found["torch-fraction"].value)
            cap, source = int(budget.total * fraction), found["torch-fraction"].source
    return replace(budget, cap=cap, cap_source=source, framework_reserve=reserve,
                   reserve_source=reserve_source)


def visible_gpus(caps: list) -> Optional[tuple]:
    """(count, where) of the GPUs the process sees when the code sets CUDA_VISIBLE_DEVICES."""
    found = [cap for cap in caps if cap.kind == "visible-devices"]
    return (int(found[-1].value), found[-1].source) if found else None


def place(setup: TrainingSetup, gpus: Optional[int], caps: list) -> None:
    """Turn the global batch into the batch one device holds (in place): replicas from the
    strategy, else ``--gpus``, else CUDA_VISIBLE_DEVICES; unknown when none says."""
    if setup.strategy is None:
        return
    replicas, where = setup.replicas, "the strategy"
    if replicas is None and gpus:
        replicas, where = gpus, "--gpus"
    if replicas is None:
        visible = visible_gpus(caps)
        if visible:
            replicas, where = visible[0], visible[1]
    setup.replicas = replicas
    if setup.batch_size is None:
        return
    if setup.batch_per_replica:
        setup.global_batch_size = setup.batch_size * replicas if replicas else None
        return
    setup.global_batch_size = setup.batch_size
    if not replicas:
        setup.batch_size = None
        setup.batch_source = f"unknown per GPU: the global batch {setup.global_batch_size} " \
                             f"({setup.batch_source}) is split over the GPUs of " \
                             f"{setup.strategy}, whose number the code does not state; " \
                             "pass --gpus N"
        return
    setup.batch_size = ceil(setup.global_batch_size / replicas)
    setup.batch_source = f"{setup.batch_size} per GPU: the global batch " \
                         f"{setup.global_batch_size} ({setup.batch_source}) over {replicas} " \
                         f"replicas ({where})"


def sharded(graph: ModelGraph) -> ModelGraph:
    """The part of ``graph``'s variables one device holds under the setup's layout map
    (a variable whose path ``layer/weight`` matches a pattern is split over that many
    devices; the rest are replicated)."""
    shards = graph.setup.shards
    if not shards:
        return graph
    layers = []
    for layer in graph.layers:
        weights = []
        for weight in layer.weights:
            factor = _factor(shards, _variable_path(graph, layer.name, weight.name))
            if factor > 1:
                weight = replace(weight, shape=(ceil(weight.size / factor),))
            weights.append(weight)
        layers.append(replace(layer, weights=weights))
    return replace(graph, layers=layers)


def _variable_path(graph: ModelGraph, layer: str, weight: str) -> str:
    """A variable's path as Keras 3 matches layout maps against it: Sequential and
    subclassed models put their own name first."""
    if graph.kind == "Functional":
        return f"{layer}/{weight}"
    return f"{graph.name}/{layer}/{weight}"


def _factor(shards: list, path: str) -> int:
    for pattern, factor in shards:
        try:
            if re.fullmatch(pattern, path):  # as Keras's LayoutMap matches
                return factor
        except re.error:
            continue
    return 1
