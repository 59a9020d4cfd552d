"""Backend profiles: how each execution engine schedules one step's memory.

Every profile runs the same walk (:mod:`memlint.memory.walk`); a profile decides the few things
that differ between backends (docs/memory-model-v2.md has the measurements behind them):

* ``xla`` -- XLA-compiled steps (Keras 3 on JAX, always jitted; TensorFlow with
  ``jit_compile=True``): one buffer assignment for the whole step, calibrated against XLA's
  own plan of the Keras 3 JAX train step compiled for H100 and T4 targets.  Element-wise
  layers write over a dying input and pass gradients on in place; a ReLU keeps its input
  when a convolution or matmul wrote it, else a one-byte mask; each weight gradient is
  consumed by the update as soon as its layer's backward is done (the state is donated), so
  gradients never pile up -- except under ``mixed_float16``, whose loss scaling checks every
  gradient before any update; buffers are 64-byte aligned; JAX runs with preallocation off,
  so no framework reserve applies.
* ``tf-graph`` -- TensorFlow graph mode (``tf.function``, Keras 2, Keras 3 on TensorFlow with
  ``jit_compile=False``): every gradient is materialised before the optimizer applies them;
  element-wise kernels forward a dying input's buffer (TensorFlow's ``forward_input``); a
  ReLU keeps its output (``ReluGrad`` reads it); the update's element-wise ops make
  weight-sized temporaries (measured with TensorFlow's BFC allocator on the CPU); the BFC
  allocator rounds every buffer up to 256 bytes (fragmentation not modelled).
* ``torch`` -- Keras 3 on PyTorch, eager: autograd keeps each op's saved tensors; a
  Functional or Sequential model holds every layer output until its call returns (Keras's
  tensor map); the last step's gradients stay in ``.grad`` until the forward is done
  (``zero_grad`` follows it) and the new ones until the optimizer step, whose
  ``torch._foreach_*`` ops make weight-sized temporaries; nothing is computed in place; the
  caching allocator rounds each block up to 512 bytes (its 2 MiB / 20 MiB segments are not
  added); cuBLAS holds a workspace per thread that runs matrix products (32 MiB from Hopper
  on, 8 MiB before; the forward's thread and autograd's, measured on an H200); cuDNN
  workspaces depend on the algorithm chosen at run time and are not added.

With no profile (the code does not say which backend runs it) the walk uses the TensorFlow
graph-mode schedule without an allocator.  The CUDA context is part of the budget
(``budget.py``), not of any profile.
"""

from __future__ import annotations

from typing import Optional

from memlint.records import record

# The margins measured against each backend's most exact oracle, and the largest, which the
# backends without one take.
XLA_MARGIN = 0.18
TORCH_MARGIN = 0.15
LARGEST_MARGIN = max(XLA_MARGIN, TORCH_MARGIN)
# Outside training (a predict step) XLA's allocation can exceed its own liveness by far more:
# its packing places a long-lived map above short-lived ones it outlives.
XLA_INFERENCE_MARGIN = 0.54
LARGEST_INFERENCE_MARGIN = max(XLA_INFERENCE_MARGIN, TORCH_MARGIN)


@record(frozen=True)
class Profile:
    """One backend's way of holding a step in memory (see the module docstring)."""

    name: str  # tf-graph, xla, torch (default: no backend stated)
    title: str  # one line for reports
    round_bytes: int = 0  # each buffer rounded up to a multiple of this (allocator)
    inplace_elementwise: bool = False  # element-wise layers reuse a dying input's buffer
    weight_gradients: str = "kept"  # "kept" until the update, or "consumed" as produced
    sign: str = "output"  # what a ReLU keeps: "output", or "xla" (input or 1-byte mask)
    framework_reserve: Optional[int] = None  # None: the budget's TensorFlow reserve applies
    # eager Keras: a Functional or Sequential model holds every layer output until its call
    # returns (its tensor map), whether or not the backward needs it
    forward_keeps_outputs: bool = False
    # the last step's gradients are still in .grad while the forward runs (Keras's torch
    # train step clears them after the forward)
    grads_during_forward: bool = False
    # the optimizer's update makes weight-sized temporaries: "foreach" (torch._foreach_*
    # lists), "graph" (TensorFlow's executor, each variable's element-wise ops), "" none
    update_temporaries: str = ""
    # window pooling of channels-last data returns a channels-first tensor seen
    # channels-last (Keras's torch backend): a Flatten or Reshape of it is a copy
    pooled_outputs_strided: bool = False
    # the backward runs op by op (eager autograd): the loss's output-sized temporaries, by
    # loss function (memlint/memory/losses.py), and a weight that several calls read gets
    # each call's gradient as a tensor of its own, summed in pairs
    eager_backward: bool = False
    # cuBLAS gets a workspace per thread that runs matrix products, held for the whole run
    # (PyTorch's handle pool; memory/estimate.py: torch_cublas_workspaces)
    cublas_per_thread: bool = False
    # the verdict's margin: "fits" only when the peak plus this share of it fits; the most
    # this backend's most exact oracle came out over memlint's peak (models of 1 MiB or
    # more), as a share of memlint's peak, rounded up, and what it was measured against
    # (memory/verdict.py; tests/test_verdict_margin.py keeps it covering the stored
    # comparisons); a backend no oracle measures takes LARGEST_MARGIN
    verdict_margin: float = LARGEST_MARGIN
    margin_basis: str = ""
    # the same outside training, where it differs (None: the training margin)
    inference_margin: Optional[float] = LARGEST_INFERENCE_MARGIN
    inference_margin_basis: str = ""
    notes: tuple = ()

    def describe(self) -> str:
        return f"{self.name} ({self.title})"


TF_GRAPH = Profile(
    name="tf-graph", title="TensorFlow graph mode, BFC allocator", round_bytes=256,
    inplace_elementwise=True, weight_gradients="kept", sign="output",
    update_temporaries="graph",
    margin_basis="no oracle measures TensorFlow graph mode's GPU peak exactly: the largest "
                 "margin of the other backends",
    inference_margin_basis="no oracle measures TensorFlow graph mode's GPU peak exactly: the "
                           "largest margin of the other backends",
    notes=("every gradient materialised before the update",
           "the update's element-wise temporaries: one or two weight-sized copies",
           "each buffer rounded up to 256 B by the BFC allocator",
           "fragmentation not modelled"))

XLA = Profile(
    name="xla", title="XLA-compiled step (Keras 3 on JAX, or TensorFlow with jit_compile)",
    round_bytes=256, inplace_elementwise=True, weight_gradients="consumed", sign="xla",
    framework_reserve=0, verdict_margin=XLA_MARGIN,
    margin_basis="XLA's own plans of the step for H100, T4 and A100 GPUs (batches 4 to 256) "
                 "came out at most 17.1% over its estimate",
    inference_margin=XLA_INFERENCE_MARGIN,
    inference_margin_basis="XLA's own plans of the predict step for an H100 (batch 32) came "
                           "out at most 53.4% over its estimate (its packing: a long-lived map "
                           "placed above short-lived ones it outlives)",
    notes=("element-wise layers in place; ReLU keeps a 1-byte mask or a kernel's output",
           "each weight gradient consumed by the update once its layer is done",
           "inputs and targets are step arguments",
           "JAX preallocation off: no framework reserve",
           "buffers aligned to 256 B"))

TORCH = Profile(
    name="torch", title="Keras 3 on PyTorch, eager, caching allocator", round_bytes=512,
    inplace_elementwise=False, weight_gradients="kept", sign="output", framework_reserve=0,
    forward_keeps_outputs=True, grads_during_forward=True, update_temporaries="foreach",
    pooled_outputs_strided=True, eager_backward=True, cublas_per_thread=True,
    verdict_margin=TORCH_MARGIN, inference_margin=None,
    margin_basis="the torch step's allocation trace came out at most 14.2% over its "
                 "estimate; on an H200 a cap 0.8% over an exact estimate still ran out",
    notes=("autograd keeps every tensor a backward function needs",
           "a Functional or Sequential model holds every layer output until its call returns",
           "the last step's gradients live until the forward is done (zero_grad after it)",
           "all gradients live in .grad until the optimizer step",
           "the update's torch._foreach_* temporaries: up to five weight-sized lists",
           "a Flatten or Reshape of a pooling's output is a copy",
           "the loss's backward: several output-sized temporaries, by loss function",
           "a weight several calls read: each call's gradient, summed in pairs",
           "caching allocator blocks rounded up to 512 B (segments of 2/20 MiB not added)",
           "cuBLAS workspaces: 32 MiB (8 MiB before Hopper) per thread running products, "
           "two threads in training",
           "cuDNN workspaces not added"))

# The schedule used when the code names no backend: TensorFlow graph mode (Keras's default
# backend), without an allocator model.
DEFAULT = Profile(
    name="default", title="TensorFlow graph-mode schedule, no allocator model",
    inplace_elementwise=True, weight_gradients="kept", sign="output",
    margin_basis="the backend is not known: the largest margin of the backends",
    inference_margin_basis="the backend is not known: the largest margin of the backends",
    notes=("every gradient materialised before the update", "no allocator rounding"))

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
