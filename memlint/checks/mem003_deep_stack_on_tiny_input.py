"""MEM003 deep-stack-on-tiny-input: convolutions on maps too small for their kernels.

Two findings, each reported once per run of consecutive affected layers, at the first:

* convolutions with 'same' (or 'causal') padding whose kernel mostly reads padding: the map
  is no larger than the (dilated) kernel along some axis, or more than ``padding-share`` of
  the kernel taps fall outside the map.  A single layer is reported when its map is no
  larger than its kernel; otherwise a run needs ``min-stack`` layers;
* convolutions and pooling windows on maps already collapsed to 1x1: every tap but one
  multiplies padding, so the layer is a Dense layer with k**n times its parameters.

The share of padding taps is exact: for every axis, count the taps that land inside the map
over all output positions (TensorFlow's 'same' padding puts the smaller half before), and
multiply the in-map fractions of the axes.

Pooling or strides that would produce a size of 0 are errors the layer registry reports
(MEM901); this rule does not repeat them.
"""

from __future__ import annotations

from math import prod
from typing import Iterable, Optional

from memlint.checks.base import Rule, RuleContext, register
from memlint.diagnostics import Diagnostic
from memlint.layers.base import spatial_axes
from memlint.checks.wording import percent, source_span


@register
class DeepStackOnTinyInput(Rule):
    code = "MEM003"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        threshold = float(ctx.options.get("padding-share", 0.25))
        min_stack = int(ctx.options.get("min-stack", 2))
        for graph in ctx.models:
            for kind, run in _runs(graph, threshold):
                if kind == "padding":
                    if len(run) < min_stack and not any(f.tiny for f in run):
                        continue
                    yield self._padding(ctx, graph, run, threshold)
                else:
                    yield self._collapsed(ctx, graph, run)

    def _padding(self, ctx, graph, run, threshold) -> Diagnostic:
        shares = [f.share for f in run]
        low, high = min(shares), max(shares)
        share_text = _pct(low) if _pct(low) == _pct(high) else f"{_pct(low)}-{_pct(high)}"
        params = sum(f.layer.params for f in run)
        total = graph.params or 1
        padding = sorted({f.padding for f in run})
        single = len(run) == 1
        message = (f"{_who(run)} {'runs' if single else 'run'} "
                   f"{_join(sorted({f.kernel_text for f in run}))} "
                   f"kernel{'' if single else 's'} with {' / '.join(repr(p) for p in padding)} "
                   f"padding on {_join(_unique(f.map_text for f in run))} "
                   f"map{'' if single else 's'}: {share_text} of "
                   f"{'its' if single else 'their'} kernel taps read padding, not data")
        if any(f.tiny for f in run):
            message += ", and the kernel is at least as large as the map along some axis"
        if params:
            message += (f". {'It holds' if single else 'They hold'} {params:,} parameters "
                        f"({percent(params / total)} of the model) whose memory and compute "
                        "buy little at this resolution")
        message += (". Use fewer layers at this resolution, move them before the "
                    "downsampling that shrank the map, or feed a larger input.")
        return self.diagnostic(
            ctx, run[0].layer.location, message, severity="warning", model=graph.name,
            data={"layers": [f.layer.name for f in run], "padding_share": [low, high],
                  "params": params, "threshold": threshold})

    def _collapsed(self, ctx, graph, run) -> Diagnostic:
        taps = max(f.taps for f in run)
        params = sum(f.layer.params for f in run)
        single = len(run) == 1
        maps = _join(_unique(f.map_text for f in run))
        message = (f"{_who(run)} {'works' if single else 'work'} on {maps} maps: the "
                   f"spatial size has already collapsed, so a "
                   f"{_join(sorted({f.kernel_text for f in run}))} window sees one position "
                   f"and {taps - 1} of its {taps} taps read padding")
        if params:
            message += (f"; {'its' if single else 'their'} {params:,} parameters do the work "
                        f"of a Dense layer with up to {taps}x fewer weights")
        message += (". Replace them with Dense layers or 1x1 convolutions, or stop "
                    "downsampling earlier.")
        return self.diagnostic(
            ctx, run[0].layer.location, message, severity="warning", model=graph.name,
            data={"layers": [f.layer.name for f in run], "params": params})


# ---------------------------------------------------------------- per-layer facts

class Finding:
    """Why one layer is affected: 'padding' (kernel reads padding) or 'collapsed' (1x1 map)."""

    def __init__(self, layer, kind, spatial, kernel, share, tiny, padding):
        self.layer = layer
        self.kind = kind
        self.spatial = spatial
        self.kernel = kernel
        self.share = share
        self.tiny = tiny
        self.padding = padding

    @property
    def taps(self) -> int:
        return prod(self.kernel)

    @property
    def kernel_text(self) -> str:
        return "x".join(str(k) for k in self.kernel)

    @property
    def map_text(self) -> str:
        return "x".join(str(d) for d in self.spatial)


def padding_share(lengths, kernel, strides, dilation, padding: str) -> float:
    """Fraction of kernel taps, over all output positions, that fall outside the input."""
    inside, total = 1, 1
    for length, k, s, d in zip(lengths, kernel, strides, dilation):
        n_in, n_all = axis_taps(length, k, s, d, padding)
        inside *= n_in
        total *= n_all
    return 1 - inside / total if total else 0.0


def axis_taps(length: int, kernel: int, stride: int, dilation: int, padding: str) -> tuple:
    """(taps inside the input, all taps) along one axis, summed over output positions."""
    effective = (kernel - 1) * dilation + 1
    if padding == "causal":
        out = (length - 1) // stride + 1
        before = effective - 1
    elif padding == "same":
        out = -(-length // stride)
        before = max((out - 1) * stride + effective - length, 0) // 2
    else:  # valid: every tap is inside
        out = max((length - effective) // stride + 1, 0)
        return out * kernel, out * kernel
    inside = 0
    for j in range(kernel):
        offset = j * dilation - before  # input index = o * stride + offset
        lo = max(0, -(offset // stride))  # smallest o with o * stride + offset >= 0
        hi = min(out - 1, (length - 1 - offset) // stride)
        inside += max(0, hi - lo + 1)
    return inside, out * kernel


def _window(layer) -> Optional[tuple]:
    """(spatial input lengths, window, strides, dilation, padding) of a conv/pool layer."""
    config = layer.config
    if "kernel_size" in config:
        if "Transpose" in layer.type or "Deconvolution" in layer.type:
            return None
        window = config["kernel_size"]
        dilation = config.get("dilation_rate") or (1,) * len(window)
    elif "pool_size" in config:
        window = config["pool_size"]
        dilation = (1,) * len(window)
    else:
        return None
    shape = layer.input_shape
    strides = config.get("strides") or (1,) * len(window)
    if not isinstance(window, tuple) or not isinstance(shape, tuple) \
            or len(shape) != len(window) + 2 or len(strides) != len(window):
        return None
    axes, _ = spatial_axes(len(window), config.get("data_format", "channels_last"))
    lengths = tuple(shape[a] for a in axes)
    if any(not isinstance(n, int) for n in lengths) or not layer.output_shapes:
        return None
    return lengths, tuple(window), tuple(strides), tuple(dilation), config.get("padding")


def classify(layer, threshold: float) -> Optional[Finding]:
    """The finding for one layer, or None when the layer is fine (or not a window layer)."""
    found = _window(layer)
    if found is None:
        return None
    lengths, window, strides, dilation, padding = found
    if max(window) <= 1:
        return None
    if all(n == 1 for n in lengths):
        return Finding(layer, "collapsed", lengths, window, 1 - 1 / prod(window), True,
                       padding)
    if "kernel_size" not in layer.config or padding not in ("same", "causal"):
        return None
    share = padding_share(lengths, window, strides, dilation, padding)
    tiny = any((k - 1) * d + 1 > 1 and n <= (k - 1) * d + 1
               for n, k, d in zip(lengths, window, dilation))
    if tiny or share > threshold:
        return Finding(layer, "padding", lengths, window, share, tiny, padding)
    return None


def _transparent(layer) -> bool:
    """A layer that keeps its input shape and has no window (Activation, BatchNorm, ...)."""
    return (bool(layer.output_shapes) and layer.input_shapes == layer.output_shapes
            and "kernel_size" not in layer.config and "pool_size" not in layer.config)


def _runs(graph, threshold: float) -> list:
    """[(kind, [Finding, ...]), ...]: consecutive affected layers of one kind."""
    runs: list = []
    current = None
    for layer in graph.layers:
        if layer.type == "InputLayer":
            continue
        finding = classify(layer, threshold)
        if finding is None:
            if not _transparent(layer):
                current = None
            continue
        if current is not None and current[0] == finding.kind:
            current[1].append(finding)
        else:
            current = (finding.kind, [finding])
            runs.append(current)
    return runs


# ---------------------------------------------------------------- text helpers

def _who(run) -> str:
    layers = [f.layer for f in run]
    types = _unique(layer.type for layer in layers)
    type_text = "/".join(types)
    first, last = layers[0], layers[-1]
    span = source_span(first.location, last.location)
    if len(layers) == 1:
        return f"{type_text} '{first.name}'" + (f" ({span})" if span else "")
    kind = "nodes" if first.location and first.location.node else "layers"
    return f"{len(layers)} {type_text} {kind} ({first.name}..{last.name}" + \
        (f", {span})" if span else ")")


def _unique(items) -> list:
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _join(items) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _pct(share: float) -> str:
    return f"{share:.0%}"
