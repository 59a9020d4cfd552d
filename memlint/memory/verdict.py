"""The one answer to "does it fit?": fits, does not fit, too close to call, or unknown.

"Fits" needs room for memlint's own error: the peak plus the backend profile's margin (the
largest under-estimate measured against that backend's most exact oracle,
``Profile.verdict_margin``; ``--margin`` overrides it) must fit.  A peak that fits only
without the margin is too close to call: an under-estimate of the size measured would make
the job die.  The largest batch size is the one that fits with the margin.

No verdict is given on an unknown size.  When some layers' output sizes are unknown, or the
batch size is, the estimate counts only the known parts and is a lower bound: it can prove
that a model does *not* fit (the known parts alone exceed the usable memory) but never that
it fits.  Reporters and rules read :func:`verdict` rather than comparing sizes themselves.
"""

from __future__ import annotations

from typing import Optional

from memlint.memory.estimate import MemoryBreakdown, max_batch_size
from memlint.memory.profiles import DEFAULT, PROFILES
from memlint.records import record
from memlint.units import format_bytes

FITS = "fits"
DOES_NOT_FIT = "does_not_fit"
TOO_CLOSE = "too_close"
UNKNOWN = "unknown"

# Placeholders for unknown input dimensions in an ``--input-shape`` hint, by the rank of one
# sample (channels last); a first dimension that is known and a last that is not reads as
# channels first.
_DIM_NAMES = {1: ("T",), 2: ("T", "F"), 3: ("H", "W", "C"), 4: ("D", "H", "W", "C")}
_DIM_NAMES_FIRST = {3: ("C", "H", "W"), 4: ("C", "D", "H", "W")}


@record(frozen=True)
class Verdict:
    """The verdict on one breakdown against one budget.

    ``status`` is None without a budget.  ``peak`` is the estimate, or its lower bound when
    ``lower_bound`` is set (the known parts, at batch size 1 if the batch size is unknown).
    ``largest_batch_size`` is None without a budget or when layers of unknown size leave it
    open; with every layer known it is given even if the batch size itself is unknown, and
    it fits with the margin.  ``margin`` is the share of the peak kept free for memlint's
    own error, ``margin_basis`` where it comes from.
    """

    status: Optional[str]
    peak: int
    lower_bound: bool
    usable: Optional[int]
    largest_batch_size: Optional[int]
    unknown_layers: tuple
    batch_known: bool
    margin: float = 0.0
    margin_basis: str = ""
    # a training step shared with other models (memory/shared_steps.py): its upper bound,
    # which alone can say "fits" for an estimate that is a lower bound
    bound: Optional[int] = None

    @property
    def share(self) -> Optional[float]:
        """The peak (or its lower bound) as a share of the usable memory."""
        if self.usable is None:
            return None
        return self.peak / self.usable if self.usable else float("inf")


def known_peak(breakdown: MemoryBreakdown) -> int:
    """The peak counting only what is known: at batch size 1 when the batch size is not."""
    if breakdown.batch_known:
        return breakdown.peak
    return breakdown.fixed_bytes + breakdown.per_sample_bytes


def margin_for(breakdown: MemoryBreakdown, budget=None) -> tuple:
    """(margin, where it comes from): the budget's configured margin, else the profile's
    (its inference margin outside training, where it has one)."""
    configured = getattr(budget, "margin", None)
    if configured is not None:
        return configured, "configured"
    profile = PROFILES.get(breakdown.profile or "", DEFAULT)
    if breakdown.mode != "train" and profile.inference_margin is not None:
        return profile.inference_margin, profile.inference_margin_basis
    return profile.verdict_margin, profile.margin_basis


def with_margin(peak: int, margin: float) -> int:
    """The memory the verdict asks for: the peak and the margin on top of it."""
    return peak + int(peak * margin + 0.5)


def room_for_estimate(usable: int, margin: float) -> int:
    """The most an estimate may come to and fit with the margin (for the largest batch)."""
    return int(usable / (1 + margin))


def verdict(breakdown: MemoryBreakdown, budget) -> Verdict:
    """Fits, does not fit, too close to call or unknown for ``breakdown`` on ``budget`` (a
    Budget or None)."""
    peak = known_peak(breakdown)
    lower = not breakdown.complete
    unknown = tuple(breakdown.unknown_activations)
    margin, basis = margin_for(breakdown, budget)
    bound = breakdown.shared_bound
    if budget is None:
        return Verdict(None, peak, lower, None, None, unknown, breakdown.batch_known,
                       margin, basis, bound)
    usable = budget.usable
    if peak > usable:
        status = DOES_NOT_FIT
    elif lower:
        status = FITS if bound is not None and with_margin(bound, margin) <= usable \
            else UNKNOWN
    else:
        status = FITS if with_margin(peak, margin) <= usable else TOO_CLOSE
    largest = None if unknown or breakdown.not_modelled or breakdown.shared_step else \
        max_batch_size(breakdown, room_for_estimate(usable, margin))
    return Verdict(status, peak, lower, usable, largest, unknown, breakdown.batch_known,
                   margin, basis, bound)


def bound_text(result: Verdict, breakdown: MemoryBreakdown) -> str:
    """The upper bound of a step shared with other models, what it sums, and (where it
    allows none) why there is no verdict; ``""`` where there is no bound."""
    if result.bound is None:
        return ""
    text = f"at most {format_bytes(result.bound)}"
    if result.usable:
        share = result.bound / result.usable
        text += f" ({'under 1%' if share < 0.01 else f'{share * 100:.0f}%'} of usable memory)"
    text += f", {breakdown.shared_bound_source}"
    if result.status != FITS and result.usable is not None:
        text += "; that does not fit with the margin, so whether the step fits is unknown"
    return text


def margin_text(result: Verdict) -> str:
    """Why a peak under the usable memory is no "fits": the margin and its basis."""
    basis = "as configured" if result.margin_basis == "configured" else \
        f"({result.margin_basis})"
    return (f"it fits only without the {result.margin * 100:.0f}% margin memlint keeps for its "
            f"own error {basis}")


def name_list(names, limit: int = 5) -> str:
    """``a, b, c`` or ``a, b, c, ... (12 in all)`` for a long list."""
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... ({len(names)} in all)"


def unknown_layers_text(names) -> str:
    """``3 layer(s) have unknown output size: conv2d, conv2d_1, conv2d_2``."""
    names = list(names)
    return f"{len(names)} layer(s) have unknown output size: {name_list(names)}"


def input_shape_hint(shape) -> Optional[str]:
    """``H,W,3`` for a model input ``(None, None, None, 3)``: the value to pass as
    ``--input-shape`` with placeholders for the unknown dimensions (None when none is
    unknown or the shape is not a plain tuple)."""
    if not isinstance(shape, tuple) or len(shape) < 2:
        return None
    dims = shape[1:]
    if all(isinstance(d, int) for d in dims):
        return None
    names = _DIM_NAMES.get(len(dims))
    if len(dims) in _DIM_NAMES_FIRST and isinstance(dims[0], int) and dims[-1] is None:
        names = _DIM_NAMES_FIRST[len(dims)]
    names = names or tuple(f"D{i + 1}" for i in range(len(dims)))
    return ",".join(str(d) if isinstance(d, int) else names[i] for i, d in enumerate(dims))


def memory_graph(graph):
    """The graph the memory model reads (the model sized by its data when the frontend could
    size it), for finding the layers named in a breakdown."""
    sized = getattr(graph, "for_memory", None)
    return sized() if callable(sized) else graph


def sizing_flags(graph, breakdown: MemoryBreakdown) -> list:
    """The options that would complete the estimate: ``--input-shape`` (one input) or
    ``--input NAME=...`` (several) with placeholders for the unknown input dimensions
    (``--dim`` for an ONNX graph's symbols), ``--batch-size`` when the batch size is
    unknown."""
    flags = []
    if breakdown.unknown_activations and graph.kind == "ONNX":
        flags += [f"--dim {name}=SIZE" for name in getattr(graph, "open_dims", ())]
    elif breakdown.unknown_activations and not getattr(graph, "unsized_because", ""):
        sized = memory_graph(graph)
        hints = [h for h in map(input_shape_hint, sized.input_shapes) if h]
        if len(hints) == 1 and len(sized.input_shapes) == 1:
            flags.append(f"--input-shape {hints[0]}")
        elif hints:  # several inputs: each open one by its name
            named = [(layer.name, input_shape_hint(layer.output_shape))
                     for layer in sized.layers if layer.type == "InputLayer"]
            flags += [f"--input {name}={hint}" for name, hint in named if hint]
    if not breakdown.batch_known:
        flags.append("--batch-size N")
    return flags


def batch_text(setup, size: int) -> str:
    """A batch size as the code would set it: under a distribution strategy each GPU's
    share, with the global batch it makes over the replicas where their number is known."""
    if not setup.strategy:
        return f"{size:,}"
    total = largest_global_batch(setup, size)
    return f"{size:,} per GPU" + (f" (a global batch of {total:,} over {setup.replicas} "
                                  "replicas)" if total else "")


def largest_global_batch(setup, per_gpu: Optional[int]) -> Optional[int]:
    """Under a distribution strategy, the global batch (what ``fit(batch_size=)`` or the
    dataset's batch states) whose per-GPU share is ``per_gpu``; None where the replicas are
    not known or there is no strategy."""
    if per_gpu is None or not setup.strategy or not setup.replicas:
        return None
    return per_gpu * setup.replicas
