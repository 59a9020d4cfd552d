"""Peak GPU memory of one model: the breakdown at the peak of a walk through one step.

:func:`estimate` walks the step (:mod:`memlint.memory.walk`: forward, backward, update, or the
forward alone for inference) under the backend profile and reports what is alive at the peak
as named parts in the five JSON categories (weights, gradients, optimizer, activations,
other), with the memory over the step (:attr:`MemoryBreakdown.timeline`) and the place of the
peak (:attr:`MemoryBreakdown.peak_at`).  Everything here is a pure function of the model graph
and its setup; each part's note states its assumption so reports can show it.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

from memlint.ir import ModelGraph, TrainingSetup, recorded_batch, with_open_batch
from memlint.memory.dtypes import precision
from memlint.memory.nesting import as_registry_kinds, opened
from memlint.memory.optimizers import slots_per_variable
from memlint.memory.tensors import (INPUT_TYPES, VIEW_LAYERS, layer_activation_bytes,
                                    output_bytes, tensor_bytes)
from memlint.records import record

__all__ = ["CATEGORIES", "INPUT_TYPES", "VIEW_LAYERS", "MemoryBreakdown", "Part",
           "batch_is_known", "estimate", "layer_activation_bytes", "max_batch_size",
           "output_bytes", "tensor_bytes"]

# The five summary categories of the JSON ``memory`` object (plus ``peak``).
CATEGORIES = ("weights", "gradients", "optimizer", "activations", "other")

# How many of the largest tensors alive at the peak a breakdown names.
PEAK_TENSORS = 5


@record
class Part:
    """One named part of the breakdown."""

    name: str
    category: str  # one of CATEGORIES
    bytes: int
    note: str = ""


@record
class MemoryBreakdown:
    """The estimate for one model: what is alive at the peak, by part, and the walk."""

    mode: str
    batch_size: int
    parts: list = field(default_factory=list)
    per_sample_bytes: int = 0  # how much the peak grows per extra sample in the batch
    fixed_bytes: int = 0  # the part of the peak that does not depend on the batch size
    largest_activation: Optional[tuple] = None  # (layer name, bytes) of the biggest single output
    unknown_activations: list = field(default_factory=list)  # layers whose size is unknown
    # (layer name, what): memory a GPU library holds for the layer that the model does not
    # count (LayerKind.not_modelled): the peak is a lower bound
    not_modelled: list = field(default_factory=list)
    profile: Optional[str] = None  # the backend profile applied (memory/profiles.py), if any
    batch_known: bool = True  # False when the setup has no batch size (the estimate uses 1)
    # a training loop's step that runs other models, or this one again, with this call
    # (TrainingSetup.shared_step): the peak, of this call alone, is a lower bound
    shared_step: str = ""
    # an upper bound of that step, where every model it runs has a complete estimate of its
    # own (memory/shared_steps.py), and what it sums
    shared_bound: Optional[int] = None
    shared_bound_source: str = ""
    # the memory over the step: {"phase": forward|backward|update, "layer", "bytes"} per moment
    timeline: list = field(default_factory=list)
    # where the peak is: {"phase", "layer", "bytes", "tensors": [{"name", "layer", "kind",
    # "category", "bytes"}, ...]} (the largest tensors alive there)
    peak_at: dict = field(default_factory=dict)
    # every moment of the walk as [bytes per sample, fixed bytes] (an upper bound with the
    # allocator's rounding): the peak is piecewise linear in the batch size
    curve: list = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every size the peak depends on is known: no layer of unknown output size, none
        whose library memory is not modelled, a known batch size, and a step that runs
        this model alone.  Otherwise :attr:`peak` counts only the known parts."""
        return self.batch_known and not self.unknown_activations and not self.not_modelled \
            and not self.shared_step

    def category(self, name: str) -> int:
        return sum(p.bytes for p in self.parts if p.category == name)

    @property
    def peak(self) -> int:
        return sum(p.bytes for p in self.parts)

    def as_dict(self) -> dict:
        out = {name: self.category(name) for name in CATEGORIES}
        out["peak"] = self.peak
        return out


def _notes(setup: TrainingSetup, prec, profile) -> dict:
    """The assumption behind each part (by walk buffer kind)."""
    opt = setup.optimizer
    xla = profile.sign == "xla"
    return {
        "weights": f"every variable ({prec.variable_bytes} bytes per parameter unless stored "
                   "otherwise)" + (f"; at the update the new variables and slots too "
                                   f"({setup.state_kept})" if xla and setup.state_kept
                                   and setup.mode == "train" else ""),
        "gradients": ("the weight gradients alive at the peak: "
                      + ("each is consumed by the update when its layer's backward is done"
                         if profile.weight_gradients == "consumed" and not (
                             xla and prec.loss_scaling) else
                         "all wait for the update" if profile.weight_gradients == "kept" else
                         "loss scaling keeps them all, in 16 bits, until they are checked")),
        "optimizer": f"{opt.name}: " + (
            f"factored second moments, and {slots_per_variable(opt) + 1} full slot(s) (the "
            "velocity) per trainable parameter" if opt.name == "adafactor" else
            f"{slots_per_variable(opt)} slot(s) per trainable parameter"),
        "saved": "tensors kept for the backward pass (each layer kind's declaration: inputs "
                 "of weighted layers, masks, statistics, recurrent gates, attention "
                 "probabilities)",
        "live": "layer outputs alive at that moment and not kept for backward",
        "data": "the model inputs at the batch size (in the variables' dtype)",
        "targets": "the targets at the batch size, shaped like the model outputs (class "
                   "ids for a sparse categorical cross-entropy; none for an output "
                   "compile() gives no loss, nor where fit() is given no targets)",
        "predictions": "the predict step's results, in buffers of their own from the "
                       "step's start (XLA's output buffers)",
        "grad": "gradients of activations alive at that moment",
        "scratch": "buffers a layer's backward needs while it runs (pooling indices, "
                   "attention score gradients, embedding table gradients)",
        "casts": "the weights cast to the compute dtype for the layers' calls",
        "work": "what a matrix product holds while it runs under XLA without autotuning "
                "(split-K partial sums, operands padded for the split)",
        "relayouts": "a convolution kernel copied into cuDNN's layout (in training kept "
                     "from the layer's forward to its backward); the input batch as the "
                     "first convolution reads "
                     "it: transposed to NCHW before Hopper (NCDHW for a 3-D one), cast to "
                     "16 bits under a mixed policy",
        "tables": "XLA's pointer tables of kernels that return several buffers (an "
                  "update writing a variable and its slots, a cuDNN convolution): 256 "
                  "bytes each, kept for the whole step",
    }


# What XLA does differently on GPUs before Ampere (compute capability < 8): its matrix
# products go to cuBLAS, whose workspace (4 MiB) is in the step's plan while one runs, and
# bfloat16 has no arithmetic there, so a mixed_bfloat16 step computes in float32 (measured on
# a T4 target, except inside recurrences: docs/memory-model-v2.md).
PRE_AMPERE_GEMM_WORKSPACE = 4 * 1024 * 1024

# PyTorch gives every (thread, stream) that runs a cuBLAS product a workspace of its own from
# the caching allocator, kept for the whole run: 32 MiB from Hopper on (compute capability 9),
# 8 MiB + 128 KiB before (its default ":4096:2:16:8").  A training step runs products in two
# threads, the forward's and autograd's backward thread; inference in one.  Measured on an
# H200 (torch 2.11): every training step 64 MiB above the model's tensors (an MLP and a
# ResNet, all six optimizers, float32 and mixed_float16), which without this part made every
# cap of memlint's peak + 5% run out of memory.  An unknown GPU gets Hopper's size.
TORCH_CUBLAS_WORKSPACE = {"hopper": 32 * 1024 * 1024, "older": 8 * 1024 * 1024 + 128 * 1024}
TORCH_CUBLAS_WORKSPACES = "cuBLAS workspaces"


def torch_cublas_workspaces(mode: str, capability) -> int:
    """The bytes PyTorch's cuBLAS workspaces hold through a step on this GPU."""
    size = TORCH_CUBLAS_WORKSPACE["older" if capability is not None and capability[0] < 9
                                  else "hopper"]
    return size * (2 if mode == "train" else 1)


def _capability(value) -> Optional[tuple]:
    """``(major, minor)`` from "7.5", 7.5 or (7, 5); None when not given or not readable."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)) and value:
        return tuple(int(v) for v in value[:2])
    try:
        major, _, minor = str(value).partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None


def estimate(graph: ModelGraph, setup: Optional[TrainingSetup] = None,
             profile=None, compute_capability=None,
             gpu_code_paths: bool = True) -> MemoryBreakdown:
    """The memory breakdown of ``graph`` under ``setup`` (the graph's own setup by default).

    ``profile`` (:mod:`memlint.memory.profiles`) is the backend whose schedule the walk
    follows; None (no backend stated) uses the TensorFlow graph-mode schedule without an
    allocator model.  ``compute_capability`` ("7.5", (9, 0)) is the GPU's, when known: under
    XLA a GPU before Ampere adds cuBLAS's workspace and computes bfloat16 in float32, and one
    before Hopper runs float32 convolutions in NCHW.  ``gpu_code_paths``: Keras runs on a
    GPU and takes its GPU code paths (cuDNN recurrent layers: not modelled, so the estimate
    is a lower bound); False for XLA plans compiled without a device, where Keras takes its
    generic ones.
    """
    from memlint.memory.profiles import DEFAULT
    from memlint.memory.walk import KINDS, Walk

    setup = setup or graph.setup
    batch = setup.batch_size or recorded_batch(graph) or 1
    graph = with_open_batch(graph)
    prec = precision(setup.dtype_policy)
    schedule = profile or DEFAULT
    if graph.kind == "ONNX" and setup.mode != "train":
        return _onnx_inference(graph, setup, batch, profile)
    workspace, upcast = 0, False
    capability = _capability(compute_capability)
    if schedule.sign == "xla" and capability is not None and capability[0] < 8:
        workspace = PRE_AMPERE_GEMM_WORKSPACE
        upcast = prec.policy == "mixed_bfloat16"
    walked = as_registry_kinds(opened(graph))  # nested models run their layers' calls
    # XLA lays float32 convolutions out as NCHW before Hopper (measured: T4 and A100 plans;
    # H100 plans are NHWC)
    nchw = schedule.sign == "xla" and capability is not None and capability[0] < 9
    first = Walk(walked, setup, schedule, prec, batch, gemm_workspace=workspace,
                 upcast_bfloat16=upcast, nchw_float32=nchw).run()
    freeing = False
    if schedule.sign == "xla":
        # XLA schedules a program with several heuristics and keeps the one whose peak is
        # lowest: the graph's order, and a list scheduler's that runs the call freeing the
        # most first (H100 predict plans: siamese towers, branches ending in a pooling)
        other = Walk(walked, setup, schedule, prec, batch, gemm_workspace=workspace,
                     upcast_bfloat16=upcast, nchw_float32=nchw, freeing_order=True).run()
        if other.peak < first.peak:
            first, freeing = other, True
    second = Walk(walked, setup, schedule, prec, batch, stop_at=first.peak_index,
                  gemm_workspace=workspace, upcast_bfloat16=upcast, nchw_float32=nchw,
                  freeing_order=freeing)
    second.run()
    alive = second.snapshot or []

    result = MemoryBreakdown(mode=setup.mode, batch_size=batch,
                             batch_known=batch_is_known(setup),
                             profile=profile.name if profile is not None else None)
    result.unknown_activations = first.unknown
    result.shared_step = setup.shared_step
    # a GPU library's own memory where Keras takes its GPU code paths; what a layer runs that
    # the walk does not trace, everywhere
    result.not_modelled = not_modelled(
        walked, profile.name if gpu_code_paths and profile is not None else None)
    result.timeline = first.timeline
    result.curve = _frontier(first.curve)
    result.per_sample_bytes, result.fixed_bytes = first.peak_linear
    round_to = schedule.round_bytes

    by_kind: dict = {}
    for buf, kind in alive:
        by_kind[kind] = by_kind.get(kind, 0) + buf.at(batch, 0)
    notes = _notes(setup, prec, schedule)
    train = setup.mode == "train"
    always = ["weights", "gradients", "optimizer", "saved", "live", "data", "targets"] \
        if train else ["weights", "live", "data"]
    for kind in list(KINDS):
        if kind not in always and not by_kind.get(kind):
            continue
        name, category = KINDS[kind]
        if not train and kind == "live":
            name = "live activations"
        result.parts.append(Part(name, category, by_kind.get(kind, 0), notes.get(kind, "")))
    exact = sum(buf.at(batch, 0) for buf, _ in alive)
    if first.peak > exact:
        result.parts.append(Part("allocator rounding", "other", first.peak - exact,
                                 f"each buffer rounded up to {round_to} B"))
    if schedule.cublas_per_thread:  # PyTorch: cuBLAS's workspaces, held through the step
        held = torch_cublas_workspaces(setup.mode, capability)
        threads = "the forward's and autograd's thread" if train else "one thread"
        result.parts.append(Part(TORCH_CUBLAS_WORKSPACES, "other", held,
                                 f"{held / 2**20:g} MiB: one workspace per thread running "
                                 f"matrix products ({threads}), kept by PyTorch"))
        result.fixed_bytes += held
        result.curve = [(per_sample, fixed + held) for per_sample, fixed in result.curve]
        result.timeline = [{**moment, "bytes": moment["bytes"] + held}
                           for moment in result.timeline]

    top = sorted(alive, key=lambda item: -item[0].at(batch, 0))[:PEAK_TENSORS]
    result.peak_at = {
        **second.result.peak_at, "bytes": result.peak,
        "tensors": [{"name": b.label, "layer": b.layer, "kind": kind,
                     "category": KINDS[kind][1], "bytes": b.at(batch, 0)} for b, kind in top]}
    result.largest_activation = _largest_output(graph, batch, prec.compute_bytes)
    return result


def not_modelled(graph: ModelGraph, profile: Optional[str]) -> list:
    """(layer name, what) for each layer holding memory the model does not count: a GPU
    library's under ``profile`` (None where Keras takes no GPU code path), or what the layer
    runs untraced (each kind says: LayerKind.not_modelled)."""
    from memlint.layers.base import REGISTRY

    out = []
    for layer in graph.layers:
        kind = REGISTRY.get(layer.type)
        what = kind.not_modelled(layer.config, profile) if kind is not None and \
            isinstance(layer.config, dict) else None
        if what:
            out.append((layer.name, what))
    return out


def _onnx_inference(graph: ModelGraph, setup: TrainingSetup, batch: int,
                    profile) -> MemoryBreakdown:
    """An exported graph's inference step: its tensors' liveness in the graph's order, each
    in its own dtype, elementwise nodes reusing a dying input (:mod:`memlint.memory.liveness`),
    the graph inputs included; the weights in their stored dtypes."""
    from memlint.memory.liveness import inference_peak
    from memlint.memory.walk import KINDS

    prec = precision(setup.dtype_policy)
    weights = sum(w.size * (w.itemsize or prec.variable_bytes)
                  for layer in graph.layers for w in layer.weights)
    result = MemoryBreakdown(mode=setup.mode, batch_size=batch,
                             batch_known=batch_is_known(setup),
                             profile=profile.name if profile is not None else None)
    unknown: list = []
    alive: list = []
    live, node, per_node = inference_peak(graph, batch, unknown, alive)
    _, _, at_one = inference_peak(graph, 1)
    _, _, at_two = inference_peak(graph, 2)
    result.parts = [
        Part("weights", "weights", weights, f"{graph.params:,} parameters in their stored "
             "dtypes"),
        Part("live tensors", "activations", live,
             "largest set of tensors alive at once in the graph's execution order"
             f" (at node '{node}', graph inputs included), each freed after its last use; "
             "elementwise nodes reuse a dying input's buffer")]
    result.timeline = [{"phase": "forward", "layer": name, "bytes": weights + size}
                       for name, size in per_node]
    curve = [(two - one, weights + 2 * one - two) for (_, one), (_, two)
             in zip(at_one, at_two)] or [(0, weights)]
    result.curve = _frontier(curve)
    peak_index = max(range(len(per_node)), key=lambda i: per_node[i][1]) if per_node else -1
    if peak_index >= 0:
        result.per_sample_bytes = curve[peak_index][0]
    result.fixed_bytes = result.peak - result.per_sample_bytes * batch
    result.peak_at = {"phase": "forward", "layer": node, "bytes": result.peak, "tensors": [
        {"name": name, "layer": node, "kind": "live", "category": KINDS["live"][1],
         "bytes": size} for name, size in alive[:PEAK_TENSORS]]}
    result.unknown_activations = [
        layer.name for layer in graph.layers if layer.type not in INPUT_TYPES
        and layer_activation_bytes(layer, batch, prec.compute_bytes) is None]
    return result


def _largest_output(graph: ModelGraph, batch: int, element_bytes: int) -> Optional[tuple]:
    largest = None
    for layer in graph.layers:
        size = layer_activation_bytes(layer, batch, element_bytes)
        if size is not None and (largest is None or size > largest[1]):
            largest = (layer.name, size)
    return largest


def _frontier(curve: list) -> list:
    """The moments no other moment dominates (more per sample and more fixed bytes): enough
    to find the largest batch that fits."""
    best: dict = {}
    for a, c in curve:
        if c > best.get(a, -1):
            best[a] = c
    out, top = [], -1
    for a in sorted(best, reverse=True):
        if best[a] > top:
            out.append([a, best[a]])
            top = best[a]
    return out


def batch_is_known(setup: TrainingSetup) -> bool:
    """Whether the batch size is known (frontends leave it None when the code does not fix it:
    an ONNX graph's symbolic batch, batches from a generator); the estimate then uses 1."""
    return setup.batch_size is not None


def max_batch_size(breakdown: MemoryBreakdown, usable_bytes: int) -> int:
    """Largest batch size whose estimated peak fits in ``usable_bytes`` (0 if none does).

    Each moment of the walk is linear in the batch size (bytes per sample x batch + fixed
    bytes), so the peak is their maximum and the answer is exact: the smallest, over the
    moments, of the room each leaves divided by its bytes per sample.  The allocator's
    rounding is counted at its most, so the answer never over-claims; the batch the estimate
    was made at counts when its peak fits.
    """
    curve = breakdown.curve or [[breakdown.per_sample_bytes, breakdown.fixed_bytes]]
    best = None
    for per_sample, fixed in curve:
        room = usable_bytes - fixed
        if room < 0 or (room == 0 and per_sample > 0):
            best = 0
            break
        if per_sample > 0:
            fits = room // per_sample
            best = fits if best is None else min(best, fits)
    if best is None:
        best = 1 << 31
    if breakdown.batch_known and breakdown.curve and 0 < breakdown.peak <= usable_bytes:
        best = max(best, breakdown.batch_size)
    return best
