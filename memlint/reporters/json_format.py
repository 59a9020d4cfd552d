"""Machine-readable output.  The shape is a contract: extend it, never break it."""

from __future__ import annotations

import json

from memlint import __version__
from memlint.memory.verdict import largest_global_batch, verdict


def _shape(shape):
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_shape(s) for s in shape]
    return list(shape)


def model_dict(graph, breakdown, path: str, budget) -> dict:
    setup = graph.setup
    loc = graph.location
    result = verdict(breakdown, budget)
    return {
        "name": graph.name,
        "variable": graph.variable,
        "kind": graph.kind,
        "path": path,
        "line": loc.line if loc else None,
        "mode": setup.mode,
        "mode_source": setup.mode_source,
        "batch_size": breakdown.batch_size,
        "batch_source": setup.batch_source,
        # several GPUs: the strategy, its replicas (null: not known), the global batch; the
        # batch, memory and verdict above are per GPU
        "strategy": setup.strategy,
        "strategy_source": setup.strategy_source or None,
        "replicas": setup.replicas,
        "global_batch_size": setup.global_batch_size,
        # what the model is fed: element shapes per input (no batch dimension) and where they
        # came from; the input shapes the estimate used when the data sized open dimensions
        "data_shapes": [_shape(s) for s in setup.data_shapes] if setup.data_shapes else None,
        "data_source": setup.data_source or None,
        "sized_input_shapes": [_shape(s) for s in graph.sized.input_shapes]
        if graph.sized is not None else None,
        "host_data": [{"what": h.what, "bytes": h.bytes, "shape": list(h.shape),
                       "dtype": h.dtype, "line": h.location.line if h.location else None}
                      for h in setup.host_data],
        # values the code leaves unknown that --dim gave ("vocab_size = 20000 (--dim, line
        # 15)")
        "given_values": list(setup.given_values),
        "optimizer": setup.optimizer.name,
        "optimizer_options": setup.optimizer.options,
        "optimizer_source": setup.optimizer.source,
        "loss": setup.loss,
        "loss_source": setup.loss_source or None,
        "output_losses": setup.output_losses,
        "dtype_policy": setup.dtype_policy,
        "backend": setup.backend,
        "backend_source": setup.backend_source,
        "memory_profile": breakdown.profile,
        "params": {"total": graph.params, "trainable": graph.trainable_params,
                   "non_trainable": graph.non_trainable_params},
        "memory": breakdown.as_dict(),
        "memory_parts": [{"name": p.name, "category": p.category, "bytes": p.bytes,
                          "note": p.note} for p in breakdown.parts],
        "budget": budget.as_dict() if budget else None,
        # fits / does_not_fit / too_close / unknown (None without a budget); on an incomplete
        # estimate ``memory.peak`` counts only the known parts and no largest batch size is
        # claimed; "fits" and the largest batch size keep ``verdict_margin`` (a share of the
        # peak) free for memlint's own error, too_close fits only without it
        "verdict": result.status,
        "verdict_margin": result.margin,
        "verdict_margin_basis": result.margin_basis,
        "peak_is_lower_bound": result.lower_bound,
        "largest_batch_size": result.largest_batch_size,  # per GPU under a strategy
        "largest_global_batch_size": largest_global_batch(setup, result.largest_batch_size),
        "unknown_activations": list(breakdown.unknown_activations),
        "not_modelled": [{"layer": name, "what": what} for name, what in breakdown.not_modelled],
        "batch_size_known": breakdown.batch_known,
        # a custom training loop's step that runs other models, or this one again, under one
        # GradientTape: the peak, of one call alone, is a lower bound ("" when none)
        "shared_step": breakdown.shared_step,
        # an upper bound of that step where every model it runs has a complete estimate of
        # its own (null otherwise): a "fits" verdict on such a step rests on it
        "shared_step_bound": breakdown.shared_bound,
        "shared_step_bound_source": breakdown.shared_bound_source,
        # memory model v2: the memory over the step ({"phase": forward | backward | update,
        # "layer", "bytes"} per moment of the walk) and where the peak is, with the largest
        # tensors alive there ({"phase", "layer", "bytes", "tensors": [{"name", "layer",
        # "kind", "category", "bytes"}]})
        "timeline": list(getattr(breakdown, "timeline", None) or []),
        "peak_at": dict(getattr(breakdown, "peak_at", None) or {}) or None,
        "layers": [{
            "name": layer.name,
            "type": layer.type,
            "output_shape": _shape(layer.output_shape),
            "params": layer.params,
            "trainable_params": layer.trainable_params,
            "non_trainable_params": layer.non_trainable_params,
            "line": layer.location.line if layer.location else None,
            "unresolved": layer.unresolved,
        } for layer in graph.layers],
        "unresolved": [u.as_dict() for u in graph.unresolved],
    }


def document(reports: list, errors: list, diff=None) -> dict:
    out = {
        "memlint_version": __version__,
        "diagnostics": [d.as_dict() for r in reports for d in r.diagnostics],
        "models": [model_dict(g, b, r.path, r.budget) for r in reports
                   for g, b in zip(r.models, r.breakdowns)],
        # models that only run inside other models: in those models' estimates
        "parts": [{"path": r.path, "name": g.name, "variable": g.variable,
                   "line": g.location.line if g.location else None,
                   "part_of": list(g.setup.part_of), "part_idle": g.setup.part_idle,
                   "part_shares": g.setup.part_shares,
                   "pipeline": g.setup.pipeline,
                   "params": g.params}
                  for r in reports for g in r.parts],
        "errors": list(errors),
    }
    if diff is not None:  # check --diff BASE: memlint.diff.MemoryDiff.as_dict()
        out["diff"] = diff.as_dict()
    return out


def render_check(reports: list, errors: list, options) -> str:
    return dumps(document(reports, errors, getattr(options, "memory_diff", None))) + "\n"


def dumps(doc: dict) -> str:
    """The document with one line per top-level key and per element of a top-level list (a
    diagnostic, a model): readable and line-diffable, and written by ``json``'s C encoder
    (``indent`` falls back to its pure-Python encoder: most of a cached run's time)."""
    compact = json.JSONEncoder(separators=(", ", ": ")).encode
    lines = ["{"]
    for index, (key, value) in enumerate(doc.items()):
        comma = "," if index < len(doc) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f"  {compact(key)}: [")
            lines.extend(f"    {compact(item)}," for item in value[:-1])
            lines.append(f"    {compact(value[-1])}")
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {compact(key)}: {compact(value)}{comma}")
    lines.append("}")
    return "\n".join(lines)


render_report = render_check
