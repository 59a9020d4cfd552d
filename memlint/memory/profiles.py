"""Backend profiles: how each execution engine holds a training or inference step in memory.

The v1 memory model (``estimate(graph)`` with no profile) is TensorFlow graph mode without
its allocator; the profiles below refine it per backend.  Each profile states its
assumptions; they are hypotheses until measured (``harness/``, docs/gpu-verification.md):

* ``tf-graph`` -- TensorFlow graph mode (``tf.function``, Keras 2, Keras 3 on TensorFlow with
  ``jit_compile=False``): the v1 parts unchanged, plus the BFC allocator rounding every buffer
  up to 256 bytes.  Its bins and chunk splitting cost no more than that per live buffer when
  nothing fragments; fragmentation is not modelled.
* ``xla`` -- XLA-compiled steps (Keras 3 on JAX, always jitted; TensorFlow with
  ``jit_compile=True``): one buffer assignment for the whole step.  Elementwise layers
  (activations, dropout, noise, rescaling) fuse into the producing kernel and keep no buffer
  of their own; inputs *and* targets are step arguments; gradients are consumed by the
  optimizer update as they are produced, so only a share of them is alive at the peak; JAX
  runs with preallocation off (``XLA_PYTHON_CLIENT_PREALLOCATE=false``) so no framework
  reserve applies; buffers are 64-byte aligned.
* ``torch`` -- Keras 3 on PyTorch, eager: autograd keeps each op's saved tensors (layer
  outputs; an in-layer activation keeps its output, not the pre-activation), every gradient
  lives in ``.grad`` until the optimizer step, and the caching allocator rounds each block up
  to 512 bytes (``max_memory_allocated`` counts the rounded blocks; the 2 MiB / 20 MiB
  segments it reserves on top are reported by the harness, not added here).  During backward
  the gradients of a layer's output and of its input are alive together (two transient
  buffers).  cuDNN workspaces depend on the algorithm chosen at run time and are not added.

The CUDA context is part of the budget (``budget.py``), not of any profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# Layers that compute one elementwise function of one input: XLA fuses them into the kernel
# that produced their input, so their output replaces (not adds to) the producer's buffer.
ELEMENTWISE_LAYERS = frozenset({
    "Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax", "ThresholdedReLU",
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Rescaling", "Identity",
})


@dataclass(frozen=True)
class Profile:
    """One backend's way of holding a step in memory (see the module docstring)."""

    name: str  # tf-graph, xla, torch
    title: str  # one line for reports
    round_bytes: int = 0  # each buffer rounded up to a multiple of this (allocator)
    fuse_elementwise: bool = False  # elementwise layers keep no buffer of their own
    targets_in_step: bool = False  # the targets are a step argument held on the device
    gradient_share: float = 1.0  # share of the gradients alive at the training peak
    transient_buffers: int = 1  # largest-activation-sized gradients alive during backward
    framework_reserve: Optional[int] = None  # None: the budget's TensorFlow reserve applies
    notes: tuple = ()

    def describe(self) -> str:
        return f"{self.name} ({self.title})"


TF_GRAPH = Profile(
    name="tf-graph", title="TensorFlow graph mode, BFC allocator", round_bytes=256,
    notes=("v1 parts unchanged", "each buffer rounded up to 256 B by the BFC allocator",
           "fragmentation not modelled"))

XLA = Profile(
    name="xla", title="XLA-compiled step (Keras 3 on JAX, or TensorFlow with jit_compile)",
    round_bytes=64, fuse_elementwise=True, targets_in_step=True, gradient_share=1.0,
    transient_buffers=1, framework_reserve=0,
    notes=("elementwise layers fused into their producer (no own buffer)",
           "inputs and targets are step arguments",
           "JAX preallocation off: no framework reserve",
           "buffers aligned to 64 B"))

TORCH = Profile(
    name="torch", title="Keras 3 on PyTorch, eager, caching allocator", round_bytes=512,
    targets_in_step=True, gradient_share=1.0, transient_buffers=2, framework_reserve=0,
    notes=("autograd keeps every layer output it needs for backward",
           "all gradients live in .grad until the optimizer step",
           "caching allocator blocks rounded up to 512 B (segments of 2/20 MiB not added)",
           "cuDNN workspaces not added"))

PROFILES = {p.name: p for p in (TF_GRAPH, XLA, TORCH)}

# --backend / KERAS_BACKEND values -> profile names.
BACKEND_PROFILES = {
    "tf": "tf-graph", "tensorflow": "tf-graph", "tf-graph": "tf-graph",
    "tf-xla": "xla", "xla": "xla", "jax": "xla",
    "torch": "torch", "pytorch": "torch",
}
BACKENDS = ("tf", "jax", "torch")


def get_profile(name: Optional[str]) -> Optional[Profile]:
    """The profile for a profile or backend name (None for None); ValueError if unknown."""
    if name is None:
        return None
    key = BACKEND_PROFILES.get(str(name).lower())
    if key is None:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    return PROFILES[key]


def profile_for(backend: Optional[str], jit_compile: Optional[bool] = None) -> Optional[Profile]:
    """The profile a backend runs under: TensorFlow with ``jit_compile=True`` is XLA."""
    if backend is None:
        return None
    if backend in ("tf", "tensorflow") and jit_compile:
        return XLA
    return get_profile(backend)


def rounded(size: int, multiple: int) -> int:
    """``size`` rounded up to a multiple of ``multiple`` (unchanged for 0 or 1)."""
    if multiple <= 1 or size <= 0:
        return max(size, 0)
    return -(-size // multiple) * multiple


def rounding_overhead(sizes, multiple: int) -> int:
    """Bytes an allocator adds by rounding each of ``sizes`` up to ``multiple``."""
    return sum(rounded(s, multiple) - s for s in sizes if s)


def _output_layers(graph) -> list:
    """Layers whose output nothing in the graph consumes (the model outputs)."""
    consumed = {p[0] for layer in graph.layers for call in layer.inbound for p in call}
    if not consumed:
        return graph.layers[-1:]
    return [layer for layer in graph.layers if layer.name not in consumed
            and layer.type not in ("InputLayer", "Input")]


def _buffer_sizes(graph, setup, prec, batch: int) -> list:
    """Sizes of the separate buffers a step allocates (weights, gradients, slots, layer
    outputs), for the allocator's rounding."""
    from memlint.memory.estimate import layer_activation_bytes
    from memlint.memory.optimizers import slots_per_variable

    sizes = []
    train = setup.mode == "train"
    slots = slots_per_variable(setup.optimizer) if train else 0
    for layer in graph.layers:
        for w in layer.weights:
            size = w.size * (w.itemsize or prec.variable_bytes)
            copies = 1 + ((1 + slots) if train and w.trainable else 0)
            sizes += [size] * copies
        act = layer_activation_bytes(layer, batch, prec.compute_bytes)
        if act:
            sizes.append(act)
    return sizes


def estimate_with_profile(graph, setup, profile: Profile):
    """The v1 breakdown of ``graph`` re-shaped by ``profile`` (each change its own part)."""
    from memlint.memory.dtypes import precision
    from memlint.memory.estimate import (Part, _activations, estimate,
                                         layer_activation_bytes)

    result = estimate(graph, setup)
    prec = precision(setup.dtype_policy)
    batch = result.batch_size
    train = setup.mode == "train"
    if profile.fuse_elementwise and graph.kind != "ONNX":
        probe = type(result)(mode=result.mode, batch_size=batch)
        kept, _ = _activations(graph, batch, prec.compute_bytes, probe,
                               skip=ELEMENTWISE_LAYERS)
        for part in result.parts:
            if part.name == "saved activations":
                part.bytes = kept
                part.note += "; elementwise layers fused into their producer (no own buffer)"
    if train and profile.gradient_share != 1.0:
        for part in result.parts:
            if part.category == "gradients":
                part.bytes = int(part.bytes * profile.gradient_share)
                part.note += f"; {profile.gradient_share:.0%} alive at the peak (the " \
                             "optimizer consumes them as they are produced)"
    if train and profile.transient_buffers > 1 and result.largest_activation:
        extra = (profile.transient_buffers - 1) * result.largest_activation[1]
        result.parts.append(Part("backward transient (input side)", "other", extra,
                                 "gradient of the largest activation's input, alive "
                                 "together with its output's gradient"))
    if profile.targets_in_step and train:
        targets = sum(layer_activation_bytes(layer, batch, prec.compute_bytes) or 0
                      for layer in _output_layers(graph))
        result.parts.append(Part("targets", "other", targets,
                                 "targets at the batch size, shaped like the model outputs"))
    if profile.round_bytes > 1:
        overhead = rounding_overhead(_buffer_sizes(graph, setup, prec, batch),
                                     profile.round_bytes)
        result.parts.append(Part("allocator rounding", "other", overhead,
                                 f"each buffer rounded up to {profile.round_bytes} B"))
        result.fixed_bytes += overhead
    result.profile = profile.name
    result.per_sample_bytes = (result.peak - result.fixed_bytes) // batch if batch else 0
    return result
