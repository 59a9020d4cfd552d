"""MEM005 unknown-activation-size: the peak memory cannot be estimated, so no verdict is given.

One warning per model with layers whose output size is unknown (with or without a GPU
budget: the per-layer figures are incomplete either way), or, when a budget asks for a
verdict, with layers whose GPU library memory memlint does not count (cuDNN's recurrent
layers under Keras 3 on JAX) or with an unknown batch size (an ONNX graph's symbolic batch
without ``--batch-size``, batches from a generator of unknown size), or where a custom
training loop's step runs it with other models or several times under one GradientTape.
It sits at the first unknown layer (else at the fit/predict call, else the model) and says
which layers are unknown and why (the layer's own reason, or the input dimensions the code
leaves open), what the known parts come to, and which option fills the gap
(``--input-shape H,W,3``, ``--batch-size``).
"""

from __future__ import annotations

from typing import Iterable

from memlint.checks.base import Rule, RuleContext, register
from memlint.checks.wording import percent
from memlint.diagnostics import Diagnostic
from memlint.layers.base import format_shape
from memlint.memory.verdict import (DOES_NOT_FIT, FITS, batch_text, bound_text,
                                    input_shape_hint, memory_graph, name_list, sizing_flags,
                                    unknown_layers_text, verdict)
from memlint.units import format_bytes

MAX_REASONS = 2  # distinct reasons quoted in the message


@register
class UnknownActivationSize(Rule):
    code = "MEM005"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        for graph, breakdown in zip(ctx.models, ctx.breakdowns):
            # an unknown layer size leaves the per-layer figures incomplete, budget or not; an
            # unknown batch size or library memory only withholds the verdict a budget asks for
            if not breakdown.unknown_activations and (
                    ctx.budget is None or (breakdown.batch_known and not breakdown.not_modelled
                                           and not breakdown.shared_step)):
                continue
            result = verdict(breakdown, ctx.budget)
            if result.status == FITS:  # a shared step whose upper bound fits
                continue
            graph = memory_graph(graph)
            by_name = {layer.name: layer for layer in graph.layers}
            unknown = [by_name[n] for n in breakdown.unknown_activations if n in by_name]
            first = (unknown or [by_name[n] for n, _ in breakdown.not_modelled
                                 if n in by_name] or [None])[0]
            parts = [self._what(graph, breakdown, unknown)]
            parts.append(self._bound(result, breakdown, graph.setup))
            shared = bound_text(result, breakdown)
            if shared:
                parts.append(f"The step it shares comes to {shared}")
            flags = sizing_flags(graph, breakdown)
            if flags:
                parts.append(f"Pass {' and '.join(flags)} with the sizes of the data the "
                             "model is fed")
            location = (first.location if first is not None and first.location else
                        graph.setup.location or graph.location)
            yield self.diagnostic(
                ctx, location, ". ".join(parts) + ".", model=graph.name,
                data={"unknown_layers": list(breakdown.unknown_activations),
                      "not_modelled": [name for name, _ in breakdown.not_modelled],
                      "batch_known": breakdown.batch_known, "known_peak": result.peak,
                      "verdict": result.status, "flags": flags})

    @staticmethod
    def _what(graph, breakdown, unknown) -> str:
        """Which sizes are unknown, and why."""
        source = graph.setup.batch_source
        source = source[len("unknown: "):] if source.startswith("unknown: ") else source
        batch = f"the batch size is not known ({source})"
        if breakdown.shared_step and not breakdown.unknown_activations \
                and not breakdown.not_modelled:
            text = (f"the memory of model '{graph.name}' cannot be fully estimated: "
                    f"{breakdown.shared_step}, and holds what each call keeps for the backward "
                    "pass at once, where memlint estimates one call of this model alone")
            return text if breakdown.batch_known else f"{text}, and {batch}"
        if breakdown.not_modelled and not breakdown.unknown_activations:
            first, what = breakdown.not_modelled[0]
            others = [name for name, _ in breakdown.not_modelled[1:]]
            text = (f"the memory of model '{graph.name}' cannot be fully estimated: "
                    f"{len(breakdown.not_modelled)} layer(s) hold GPU memory memlint does not "
                    f"count; '{first}': {what}"
                    + (f"; also {name_list(others)}" if others else ""))
            return text if breakdown.batch_known else f"{text}, and {batch}"
        if not breakdown.unknown_activations:
            return f"the memory of model '{graph.name}' cannot be estimated: {batch}"
        causes = _layer_causes(graph, unknown)
        text = (f"the memory of model '{graph.name}' cannot be estimated: "
                f"{unknown_layers_text(breakdown.unknown_activations)}"
                + (" (" + "; ".join(causes) + ")" if causes else ""))
        return text if breakdown.batch_known else f"{text}, and {batch}"

    @staticmethod
    def _bound(result, breakdown, setup) -> str:
        """What the known parts come to, and the verdict they allow."""
        at_one = "" if breakdown.batch_known else " at batch size 1"
        text = f"The known parts{at_one} come to at least {format_bytes(result.peak)}"
        if result.status is None:
            return text
        usable = format_bytes(result.usable)
        if result.status == DOES_NOT_FIT:
            return text + f", already over the {usable} usable GPU memory: it does not fit"
        text += f" ({percent(result.share)} of the {usable} usable)"
        if result.largest_batch_size is not None:  # only the batch size is unknown
            return text + (": whether it fits depends on the batch size, and batch size <= "
                           f"{batch_text(setup, result.largest_batch_size)} fits")
        return text + ", so whether it fits is unknown and no largest batch size can be given"


def _layer_causes(graph, unknown) -> list:
    """Why the layers' sizes are unknown: their own reasons, or the open input dimensions."""
    causes = [graph.unsized_because] if getattr(graph, "unsized_because", "") else []
    first_by_reason: dict = {}  # each distinct reason with the first layer that gives it
    for layer in unknown:
        if layer.unresolved and layer.unresolved not in first_by_reason:
            first_by_reason[layer.unresolved] = layer
    for reason, layer in list(first_by_reason.items())[:MAX_REASONS]:
        causes.append(f"{layer.type} '{layer.name}': {reason}")
    open_inputs: dict = {}  # each distinct input shape with open dimensions: how many inputs
    for shape in graph.input_shapes if graph.kind != "ONNX" else ():  # (symbols: --dim)
        if input_shape_hint(shape):
            open_inputs[shape] = open_inputs.get(shape, 0) + 1
    for shape, count in open_inputs.items():
        hint = input_shape_hint(shape)
        dims = [d for d, s in zip(hint.split(","), shape[1:]) if s is None]
        which = f"{count} model inputs" if count > 1 else "the model input"
        causes.append(f"{which} {format_shape(shape)} leave{'' if count > 1 else 's'} "
                      f"{name_list(dims)} open: Keras takes them from the data at run time")
    if not causes and unknown:
        first = unknown[0]
        shape = format_shape(first.output_shape) if first.output_shape is not None else "?"
        causes.append(f"the output of '{first.name}' is {shape}")
    return causes
