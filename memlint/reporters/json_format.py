"""Machine-readable output.  The shape is a contract: extend it, never break it."""

from __future__ import annotations

import json

from memlint import __version__


def _shape(shape):
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_shape(s) for s in shape]
    return list(shape)


def model_dict(graph, breakdown, path: str, budget) -> dict:
    setup = graph.setup
    loc = graph.location
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
        "optimizer": setup.optimizer.name,
        "optimizer_options": setup.optimizer.options,
        "optimizer_source": setup.optimizer.source,
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


def document(reports: list, errors: list) -> dict:
    return {
        "memlint_version": __version__,
        "diagnostics": [d.as_dict() for r in reports for d in r.diagnostics],
        "models": [model_dict(g, b, r.path, r.budget) for r in reports
                   for g, b in zip(r.models, r.breakdowns)],
        "errors": list(errors),
    }


def render_check(reports: list, errors: list, options) -> str:
    return json.dumps(document(reports, errors), indent=2) + "\n"


render_report = render_check
