"""Peak GPU memory of one model as a sum of named parts (memory model v1).

Training peak = weights + gradients + optimizer state + activations kept for the backward
pass + other (the input batch and the largest transient gradient buffer).
Inference peak = weights + the largest set of activations alive at once + the input batch.

Everything here is a pure function of the model graph and its setup; the assumptions each
part rests on are stated in :attr:`Part.note` so reports can show them.  Calibration against
measured GPU peaks comes later: keep each part separate and easy to refine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from memlint.ir import ModelGraph, TrainingSetup, as_shape_list, shape_size
from memlint.memory.dtypes import precision
from memlint.memory.optimizers import optimizer_elements, slots_per_variable

# Layers whose output is a view of their input (no new buffer is kept); "Input" and the
# ONNX op types are the ONNX frontend's graph inputs and view operators.
VIEW_LAYERS = frozenset({"InputLayer", "Flatten", "Reshape", "Input", "Squeeze", "Unsqueeze",
                         "Identity"})
INPUT_TYPES = frozenset({"InputLayer", "Input"})

# The five summary categories of the JSON ``memory`` object (plus ``peak``).
CATEGORIES = ("weights", "gradients", "optimizer", "activations", "other")


@dataclass
class Part:
    """One named part of the breakdown."""

    name: str
    category: str  # one of CATEGORIES
    bytes: int
    note: str = ""


@dataclass
class MemoryBreakdown:
    """The estimate for one model: its parts, the peak, and the assumptions used."""

    mode: str
    batch_size: int
    parts: list = field(default_factory=list)
    per_sample_bytes: int = 0  # how much the peak grows per extra sample in the batch
    fixed_bytes: int = 0  # the part that does not depend on the batch size
    largest_activation: Optional[tuple] = None  # (layer name, bytes) of the biggest single output
    unknown_activations: list = field(default_factory=list)  # layers whose size is unknown
    profile: Optional[str] = None  # the backend profile applied (memory/profiles.py), if any
    batch_known: bool = True  # False when the setup has no batch size (the estimate uses 1)

    @property
    def complete(self) -> bool:
        """Every size the peak depends on is known: no layer of unknown output size and a
        known batch size.  Otherwise :attr:`peak` counts only the known parts."""
        return self.batch_known and not self.unknown_activations

    def category(self, name: str) -> int:
        return sum(p.bytes for p in self.parts if p.category == name)

    @property
    def peak(self) -> int:
        return sum(p.bytes for p in self.parts)

    def as_dict(self) -> dict:
        out = {name: self.category(name) for name in CATEGORIES}
        out["peak"] = self.peak
        return out


def _tensor_bytes(shape, batch_size: int, element_bytes: int) -> Optional[int]:
    n = shape_size(shape, batch_size)
    return None if n is None else n * element_bytes


def output_bytes(layer, out, batch_size: int, element_bytes: int) -> list:
    """Bytes of each tensor of one call's output ``out`` (None where unknown).  A layer from
    an ONNX graph gives each output's bytes per element (``output_itemsizes``) and, for a
    leading dimension that is k times the batch, ``batch_factors``; outputs that are
    parameters or shape-only constants take no activation memory (0)."""
    config = layer.config
    itemsizes = config.get("output_itemsizes") or []
    factors = config.get("batch_factors") or []
    names = config.get("outputs") or []
    skip = set(config.get("parameter_outputs", [])) | set(config.get("shape_only_outputs", []))
    sizes = []
    for i, shape in enumerate(as_shape_list(out)):
        if i < len(names) and names[i] in skip:
            sizes.append(0)
            continue
        count = shape_size(shape, batch_size)
        if count is not None and shape and shape[0] is None and i < len(factors):
            count *= factors[i] or 1
        size = itemsizes[i] if i < len(itemsizes) and itemsizes[i] else element_bytes
        sizes.append(None if count is None else count * size)
    return sizes


def layer_activation_bytes(layer, batch_size: int, element_bytes: int) -> Optional[int]:
    """Bytes of all outputs of all calls of ``layer`` at ``batch_size``; None if unknown
    (a layer with no known output, as after a layer memlint cannot follow, included)."""
    if not layer.output_shapes or any(out is None for out in layer.output_shapes):
        return None
    total = 0
    for out in layer.output_shapes:
        for size in output_bytes(layer, out, batch_size, element_bytes):
            if size is None:
                return None
            total += size
    return total


def inner_activation_bytes(layer, batch_size: int, element_bytes: int) -> int:
    """Bytes of the tensors a layer keeps inside besides its output (attention scores, the
    layers of a nested model)."""
    return sum(_tensor_bytes(shape, batch_size, element_bytes) or 0
               for shape in layer.inner_shapes)


def _input_bytes(graph: ModelGraph, batch_size: int, element_bytes: int) -> int:
    inputs = [layer for layer in graph.layers if layer.type == "Input"]  # ONNX: own dtypes
    if inputs:
        return sum(layer_activation_bytes(layer, batch_size, element_bytes) or 0
                   for layer in inputs)
    total = 0
    for shape in graph.input_shapes:
        total += _tensor_bytes(shape, batch_size, element_bytes) or 0
    return total


def _activations(graph: ModelGraph, batch_size: int, element_bytes: int, breakdown,
                 skip=frozenset()) -> tuple:
    """(sum of kept outputs, largest single output) over the model's layers; layers of a type
    in ``skip`` (fused by the backend) keep no output of their own."""
    kept, largest = 0, None
    for layer in graph.layers:
        size = layer_activation_bytes(layer, batch_size, element_bytes)
        if size is None:
            if layer.type not in INPUT_TYPES:
                breakdown.unknown_activations.append(layer.name)
            continue
        if largest is None or size > largest[1]:
            largest = (layer.name, size)
        if layer.type not in VIEW_LAYERS and layer.type not in skip:
            kept += size
        kept += inner_activation_bytes(layer, batch_size, element_bytes)
    return kept, largest


def _inference_live_peak(graph: ModelGraph, batch_size: int, element_bytes: int) -> int:
    """Largest sum of tensors alive at once when layers run in order and free dead inputs."""
    last_use: dict = {}
    for index, layer in enumerate(graph.layers):
        for call in layer.inbound:
            for producer in call:
                last_use[producer[0]] = index
    live: dict = {}
    peak = 0
    for index, layer in enumerate(graph.layers):
        size = layer_activation_bytes(layer, batch_size, element_bytes) or 0
        if layer.type in VIEW_LAYERS and layer.type not in INPUT_TYPES and layer.inbound:
            size = 0
        live[layer.name] = size
        peak = max(peak, sum(live.values()))
        for name in [n for n, last in last_use.items() if last == index]:
            live.pop(name, None)
            last_use.pop(name)
    return peak


def _weight_bytes(graph: ModelGraph, default_bytes: int, trainable_only: bool) -> int:
    """Bytes of the weights: each in its stored dtype where the source fixes one (ONNX),
    otherwise at the policy's variable size."""
    return sum(w.size * (w.itemsize or default_bytes) for layer in graph.layers
               for w in layer.weights if w.trainable or not trainable_only)


def estimate(graph: ModelGraph, setup: Optional[TrainingSetup] = None,
             profile=None) -> MemoryBreakdown:
    """The memory breakdown of ``graph`` under ``setup`` (the graph's own setup by default).

    ``profile`` (:mod:`memlint.memory.profiles`) refines the v1 model for one backend; None
    keeps v1 (TensorFlow graph mode without its allocator).
    """
    setup = setup or graph.setup
    if profile is not None:
        from memlint.memory.profiles import estimate_with_profile
        return estimate_with_profile(graph, setup, profile)
    batch = setup.batch_size or 1
    prec = precision(setup.dtype_policy)
    result = MemoryBreakdown(mode=setup.mode, batch_size=batch,
                             batch_known=batch_is_known(setup))
    parts = result.parts

    trainable = [w.shape for layer in graph.layers for w in layer.weights if w.trainable]
    weight_bytes = _weight_bytes(graph, prec.variable_bytes, trainable_only=False)
    parts.append(Part("weights", "weights", weight_bytes,
                      f"{graph.params:,} parameters x {prec.variable_bytes} bytes"
                      if weight_bytes == graph.params * prec.variable_bytes else
                      f"{graph.params:,} parameters in their stored dtypes"))

    input_bytes = _input_bytes(graph, batch, prec.compute_bytes)
    activations, largest = _activations(graph, batch, prec.compute_bytes, result)
    result.largest_activation = largest

    if setup.mode == "train":
        grad_bytes = _weight_bytes(graph, prec.variable_bytes, trainable_only=True)
        parts.append(Part("gradients", "gradients", grad_bytes,
                          "one gradient per trainable parameter"))
        opt_bytes = optimizer_elements(setup.optimizer, trainable) * prec.variable_bytes
        parts.append(Part("optimizer slots", "optimizer", opt_bytes,
                          f"{setup.optimizer.name}: {slots_per_variable(setup.optimizer)} "
                          "slot(s) per trainable parameter"))
        parts.append(Part("saved activations", "activations", activations,
                          "every layer output at the batch size is kept for the backward pass"
                          " (reshape views excluded; attention scores and nested models' inner outputs included)"))
        transient = largest[1] if largest else 0
        parts.append(Part("input batch", "other", input_bytes, "model inputs at the batch size"))
        parts.append(Part("backward transient", "other", transient,
                          "gradient of the largest activation, alive during the backward pass"))
        result.fixed_bytes = weight_bytes + grad_bytes + opt_bytes
    elif graph.kind == "ONNX":
        from memlint.frontends.onnx.liveness import inference_peak
        live, node, _ = inference_peak(graph, batch)
        parts.append(Part("live tensors", "activations", live,
                          "largest set of tensors alive at once in the graph's execution order"
                          f" (at node '{node}', graph inputs included), each freed after its "
                          "last use; elementwise nodes reuse a dying input's buffer"))
        result.fixed_bytes = weight_bytes
    else:
        live = _inference_live_peak(graph, batch, prec.compute_bytes)
        parts.append(Part("live activations", "activations", live,
                          "largest set of layer outputs alive at once, freed after last use"))
        parts.append(Part("input batch", "other", input_bytes, "model inputs at the batch size"))
        result.fixed_bytes = weight_bytes
    result.per_sample_bytes = (result.peak - result.fixed_bytes) // batch if batch else 0
    return result


def batch_is_known(setup: TrainingSetup) -> bool:
    """Whether the batch size is known (frontends leave it None when the code does not fix it:
    an ONNX graph's symbolic batch, batches from a generator); the estimate then uses 1."""
    return setup.batch_size is not None


def max_batch_size(breakdown: MemoryBreakdown, usable_bytes: int) -> int:
    """Largest batch size whose estimated peak fits in ``usable_bytes`` (0 if none does).

    Every batch-dependent part in the model is linear in the batch size, so the answer is
    the room left after the fixed part divided by the bytes one sample adds.
    """
    room = usable_bytes - breakdown.fixed_bytes
    if room <= 0:
        return 0
    if breakdown.per_sample_bytes <= 0:
        return 1 << 31
    return room // breakdown.per_sample_bytes
