"""MEM002 oversized-feature-map: activations at the batch size do not fit the GPU.

Two findings:

* one layer's output at the batch size takes more than ``activation-share`` of the usable
  memory (warning, at that layer), with the batch size that would bring it under the share;
* the estimated peak (parameters + activations + the rest) is over the usable memory while
  the parameters alone fit (error, at the fit/predict call or the model), with the largest
  batch size that fits and what ``mixed_float16`` would allow;
* the peak fits, but not with the margin memlint keeps for its own error (the verdict is
  too close to call: warning), with the largest batch size that fits with it.

When the parameters alone do not fit, MEM001 reports it and the peak finding stays silent.
The peak finding follows :func:`memlint.memory.verdict.verdict`: when some sizes are unknown
the peak is a lower bound, so it fires only when the known parts alone are over the usable
memory, and it names no largest batch size while layer sizes are unknown (MEM005 says what
is unknown).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from memlint.checks.base import Rule, RuleContext, register
from memlint.checks.wording import percent
from memlint.diagnostics import Diagnostic
from memlint.ir import as_shape_list
from memlint.memory.dtypes import precision
from memlint.memory.estimate import VIEW_LAYERS, estimate, layer_activation_bytes
from memlint.memory.verdict import (DOES_NOT_FIT, FITS, TOO_CLOSE, batch_text, margin_text,
                                    unknown_layers_text, verdict)
from memlint.units import format_bytes

DTYPE_NAMES = {8: "float64", 4: "float32", 2: "16-bit floats", 1: "8-bit values"}


@register
class OversizedFeatureMap(Rule):
    code = "MEM002"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        if ctx.budget is None:
            return
        share = float(ctx.options.get("activation-share", 0.25))
        max_layers = int(ctx.options.get("max-layers", 5))
        for graph, breakdown in zip(ctx.models, ctx.breakdowns):
            yield from self._large_outputs(ctx, graph, breakdown, share, max_layers)
            diag = self._peak(ctx, graph, breakdown)
            if diag is not None:
                yield diag

    # ------------------------------------------------------------ one large output

    def _large_outputs(self, ctx, graph, breakdown, share, max_layers):
        usable = ctx.budget.usable
        batch = breakdown.batch_size
        compute = _compute_bytes(graph.setup.dtype_policy)
        limit = share * usable
        found = []
        for layer in graph.layers:
            if layer.type in VIEW_LAYERS:
                continue  # an input, or a view of the previous output
            size = layer_activation_bytes(layer, batch, compute)
            if size is None or size <= limit:
                continue
            found.append((layer, size))
        if not found:
            return
        kept = {id(layer) for layer, _ in
                sorted(found, key=lambda item: -item[1])[:max(max_layers, 1)]}
        others = len(found) - len(kept)
        first = True
        for layer, size in found:
            if id(layer) not in kept:
                continue
            per_sample = layer_activation_bytes(layer, 1, compute) or 0
            fits = int(limit // per_sample) if per_sample else 0
            message = (f"output of {layer.type} '{layer.name}' is {_shapes(layer, batch)} at "
                       f"batch size {batch}: {format_bytes(size)} in "
                       f"{DTYPE_NAMES.get(compute, f'{compute}-byte values')}, "
                       f"{size / usable:.0%} of the {format_bytes(usable)} usable GPU memory "
                       f"(activation-share {share:.0%})")
            advice = []
            if fits >= 1:
                advice.append(f"batch size <= {batch_text(graph.setup, fits)} keeps it "
                              f"under {share:.0%}")
            else:
                advice.append(f"even one sample's output ({format_bytes(per_sample)}) is over "
                              f"{share:.0%}")
            if compute == 4:
                advice.append(f"{_half_precision(graph)} halves it to "
                              f"{format_bytes(size // 2)}")
            advice.append("downsampling earlier (strides or pooling) or fewer channels "
                          "shrinks it for every sample")
            if others and first:
                advice.append(f"{others} more layer(s) also exceed the share; the "
                              f"{len(kept)} largest are reported (max-layers)")
            first = False
            message += "; " + "; ".join(advice) + "."
            yield self.diagnostic(
                ctx, layer.location, message, severity="warning", model=graph.name,
                data={"layer": layer.name, "bytes": size, "batch_size": batch,
                      "per_sample": per_sample, "max_batch_under_share": fits,
                      "usable": usable})

    # ------------------------------------------------------------ the whole peak

    def _peak(self, ctx, graph, breakdown):
        usable = ctx.budget.usable
        result = verdict(breakdown, ctx.budget)
        setup = graph.setup
        batch = breakdown.batch_size
        peak = result.peak
        fits = result.largest_batch_size
        mode = "training" if breakdown.mode == "train" else "inference"
        parts = " + ".join(f"{name} {format_bytes(breakdown.category(name))}"
                           for name in ("weights", "gradients", "optimizer", "activations",
                                        "other") if breakdown.category(name))
        if result.status == TOO_CLOSE:
            return self._too_close(ctx, graph, result, batch, mode, parts)
        if result.status != DOES_NOT_FIT or breakdown.fixed_bytes > usable:
            return None
        if result.lower_bound:
            at = f"batch size {batch}" if breakdown.batch_known else \
                f"batch size 1 (the batch size is not known: {setup.batch_source})"
            message = (f"estimated {mode} peak of model '{graph.name}' at {at} is at least "
                       f"{format_bytes(peak)}, counting only the known parts"
                       f"{f' ({parts})' if breakdown.batch_known else ''}, already over the "
                       f"{format_bytes(usable)} usable GPU memory")
        else:
            message = (f"estimated {mode} peak of model '{graph.name}' at batch size {batch} "
                       f"({setup.batch_source}) is {format_bytes(peak)} ({parts}), over the "
                       f"{format_bytes(usable)} usable GPU memory")
        advice = []
        if fits is None:
            advice.append("the largest batch size that fits cannot be given: "
                          f"{unknown_layers_text(result.unknown_layers)}")
        elif fits >= 1:
            advice.append(f"batch size <= {batch_text(setup, fits)} fits" + (
                f" with the {result.margin:.0%} margin for memlint's error"
                if result.margin else ""))
        else:
            room = usable - breakdown.fixed_bytes
            advice.append(f"it does not fit even at batch size 1: one sample adds "
                          f"{format_bytes(breakdown.per_sample_bytes)} and only "
                          f"{format_bytes(room)} is left after the parameters")
        mixed = None
        if graph.kind != "ONNX" and not setup.dtype_policy.startswith("mixed_") \
                and _compute_bytes(setup.dtype_policy) == 4:
            mixed = estimate(graph, replace(setup, dtype_policy="mixed_float16"))
            text = (f"mixed_float16 halves {'the known ' if result.unknown_layers else ''}"
                    f"activations ({format_bytes(breakdown.category('activations'))} -> "
                    f"{format_bytes(mixed.category('activations'))})")
            mixed_result = verdict(mixed, ctx.budget)
            if mixed_result.status == FITS:
                text += f" and the peak ({format_bytes(mixed.peak)}) fits at batch size {batch}"
            elif mixed_result.largest_batch_size:
                text += (f", so batch size <= "
                         f"{batch_text(setup, mixed_result.largest_batch_size)} fits")
            advice.append(text)
        message += "; " + "; ".join(advice) + "."
        location = setup.location or graph.location
        return self.diagnostic(
            ctx, location, message, severity="error", model=graph.name,
            data={"peak": peak, "usable": usable, "batch_size": batch, "max_batch_size": fits,
                  "peak_is_lower_bound": result.lower_bound,
                  "mixed_float16_peak": mixed.peak if mixed else None})


    def _too_close(self, ctx, graph, result, batch, mode, parts):
        """The peak fits, but not with the margin: no "fits" is said (warning)."""
        setup = graph.setup
        message = (f"estimated {mode} peak of model '{graph.name}' at batch size {batch} "
                   f"({setup.batch_source}) is {format_bytes(result.peak)} ({parts}), "
                   f"{percent(result.share)} of the {format_bytes(result.usable)} usable GPU "
                   f"memory: "
                   f"too close to call: {margin_text(result)}")
        fits = result.largest_batch_size
        if fits:
            message += f"; batch size <= {batch_text(setup, fits)} fits with the margin"
        message += "."
        return self.diagnostic(
            ctx, setup.location or graph.location, message, severity="warning",
            model=graph.name,
            data={"peak": result.peak, "usable": result.usable,
                  "batch_size": batch, "max_batch_size": fits,
                  "margin": result.margin, "peak_is_lower_bound": False})


def _compute_bytes(policy: str) -> int:
    try:
        return precision(policy).compute_bytes
    except ValueError:
        return 4


def _shapes(layer, batch: int) -> str:
    """The layer's output shape(s) at ``batch`` (times the batches a call holds)."""
    shapes = [(s, batch * layer.batches_of(call)) for call, out in enumerate(layer.output_shapes)
              for s in as_shape_list(out)]
    texts = ["(" + ", ".join(str(rows if i == 0 and d is None else d) for i, d in enumerate(s))
             + ("," if len(s) == 1 else "") + ")" for s, rows in shapes]
    if len(texts) == 1:
        return texts[0]
    return f"{len(texts)} tensors " + ", ".join(texts[:3]) + (", ..." if len(texts) > 3 else "")


def _half_precision(graph) -> str:
    """What halves activation memory: Keras's mixed precision policy for source, a float16
    conversion of the graph for an exported ONNX file (its dtypes are fixed)."""
    return "a float16 conversion of the graph" if graph.kind == "ONNX" else "mixed_float16"
