"""Human-readable output: ruff-style diagnostics for ``check``, tables for ``report``."""

from __future__ import annotations

from collections import Counter

from memlint.checks.wording import percent
from memlint.layers.base import format_shape
from memlint.memory.dtypes import precision
from memlint.memory.estimate import CATEGORIES, layer_activation_bytes
from memlint.memory.verdict import (DOES_NOT_FIT, FITS, TOO_CLOSE, batch_text, bound_text,
                                    margin_text, sizing_flags, unknown_layers_text, verdict)
from memlint.units import format_bytes


def diagnostic_line(diag) -> str:
    return f"{diag.where}: {diag.code} {diag.message}"


def summary_line(diagnostics: list, files: int, failed: int = 0) -> str:
    if not diagnostics and failed and not files:
        return f"No file checked ({failed} could not be analysed; see the errors below)."
    if not diagnostics:
        return f"All checks passed ({files} file{'s' if files != 1 else ''} checked)."
    counts = Counter(d.severity for d in diagnostics)
    parts = [f"{counts[s]} {s}{'s' if counts[s] != 1 else ''}"
             for s in ("error", "warning", "info") if counts[s]]
    total = len(diagnostics)
    return (f"Found {total} diagnostic{'s' if total != 1 else ''} ({', '.join(parts)}) "
            f"in {files} file{'s' if files != 1 else ''}.")


def statistics(diagnostics: list) -> list:
    counts = Counter((d.code, d.name) for d in diagnostics)
    return [f"{n:5d}  {code}  {name}" for (code, name), n in sorted(counts.items())]


def diff_lines(diff) -> list:
    """The memory diff against the base revision: changed, new and removed models, one line
    each, and how many are unchanged ([] without ``--diff``)."""
    if diff is None:
        return []
    lines = [f"Memory against {diff.title}:"]
    for change in diff.changes:
        if change.status == "unchanged":
            continue
        line = (change.head or change.base).line
        where = f"{change.path}:{line}" if line else change.path
        lines.append(f"  {where}: {change.summary}")
    same = len(diff.with_status("unchanged"))
    if same:
        lines.append(f"  {same} model{'s' if same != 1 else ''} unchanged")
    if not diff.changes:
        lines.append("  no models in the checked files at either revision")
    lines.extend(f"  not analysed at {diff.base}: {e}" for e in diff.errors)
    return lines + [""]


def render_check(reports: list, errors: list, options, body: list = None) -> str:
    """Diagnostics (``body``: their lines as another format prints them; default one line
    each), statistics, the memory diff, then the summary line."""
    diagnostics = [d for r in reports for d in r.diagnostics]
    lines = list(body) if body is not None else [diagnostic_line(d) for d in diagnostics]
    if getattr(options, "statistics", False) and diagnostics:
        lines += ["", *statistics(diagnostics)]
    diff = diff_lines(getattr(options, "memory_diff", None))
    if diff:
        lines += ([""] if lines and lines[-1] else []) + diff
    lines.append(summary_line(diagnostics, len(reports), len(errors)))
    if reports and all(r.budget is None for r in reports) and any(r.models for r in reports):
        lines.append("No GPU budget set (--gpu or `gpu` in config): budget rules MEM001 and "
                     "MEM002 were skipped.")
    lines.extend(f"error: {e}" for e in errors)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- report

def _table(rows: list, header: tuple, right: set) -> list:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row):
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    rule = "-" * len(fmt(header))
    return [fmt(header), rule, *[fmt(r) for r in rows], rule]


def layer_table(graph, breakdown) -> tuple:
    """(header, rows) of the per-layer table: name (type), output shape, parameters,
    activation at the batch size, and the line (ONNX: the memory alive after the node)."""
    compute_bytes = precision(graph.setup.dtype_policy).compute_bytes
    onnx = graph.kind == "ONNX"  # one row per node, with the memory alive after it runs
    live = _live_by_node(graph, breakdown.batch_size) if onnx else {}
    rows = []
    # the table shows Keras's shapes; the activations are those of the size the model is fed
    sized = graph.for_memory().layers
    for layer, fed in zip(graph.layers, sized):
        act = layer_activation_bytes(fed, breakdown.batch_size, compute_bytes)
        shape = format_shape(layer.output_shape) if layer.output_shape is not None else "?"
        row = (f"{layer.name} ({layer.type})", shape,
               f"{layer.params:,}" if layer.unresolved is None else "?",
               format_bytes(act) if act is not None else "?")
        last = format_bytes(live[layer.name]) if layer.name in live else \
            (layer.location.line if layer.location else "")
        rows.append(row + (last,))
    header = ("Node (op type)" if onnx else "Layer (type)", "Output Shape", "Param #",
              f"Act. @{breakdown.batch_size}", "Live" if onnx else "Line")
    return header, rows


def model_report(graph, breakdown, budget) -> list:
    setup = graph.setup
    where = f"{graph.location.path}:{graph.location.line}" if graph.location else "?"
    lines = [f"Model '{graph.name}' ({graph.kind}) at {where}"]
    onnx = graph.kind == "ONNX"
    header, rows = layer_table(graph, breakdown)
    lines += _table(rows, header, right={2, 3, 4})
    lines += [
        f"Total params: {graph.params:,} ({format_bytes(breakdown.category('weights'))})",
        f"Trainable params: {graph.trainable_params:,}",
        f"Non-trainable params: {graph.non_trainable_params:,}",
        "",
        "Memory estimate (peak):",
    ]
    for category in CATEGORIES:
        parts = [p for p in breakdown.parts if p.category == category]
        notes = "; ".join(f"{p.name}: {p.note}" for p in parts if p.note)
        lines.append(f"  {category:<12}{format_bytes(breakdown.category(category)):>11}   {notes}")
    lines.append(f"  {'peak':<12}{format_bytes(breakdown.peak):>11}")
    lines += timeline_lines(breakdown)
    opts = ", ".join(f"{k}={v}" for k, v in setup.optimizer.options.items())
    lines += [
        "",
        "Assumptions:",
        f"  mode:         {setup.mode} ({setup.mode_source})",
        f"  batch size:   {breakdown.batch_size} ({setup.batch_source})" if breakdown.batch_known
        else f"  batch size:   {setup.batch_source} (the figures above are at batch size "
             f"{breakdown.batch_size})",
    ]
    if graph.sized is not None:
        fed = ", ".join(format_shape(shape) for shape in graph.sized.input_shapes)
        lines.append(f"  input size:   {fed} ({setup.data_source or 'from --input-shape'}; "
                     "the table shows Keras's own shapes)")
    elif setup.data_source:
        lines.append(f"  data:         {setup.data_source}")
    if setup.given_values:
        lines.append(f"  given:        {'; '.join(setup.given_values)}")
    if setup.mode == "train":
        lines.append(f"  optimizer:    {setup.optimizer.name}{f'({opts})' if opts else ''} "
                     f"({setup.optimizer.source})")
        if setup.loss_source:
            lines.append(f"  loss:         {setup.loss or 'not known'} ({setup.loss_source})")
    lines.append(f"  dtype policy: {setup.dtype_policy} ({setup.dtype_source})")
    if not onnx:  # an ONNX graph's inference peak comes from tensor liveness, not a profile
        lines.append(f"  profile:      {profile_line(setup, breakdown)}")
    if budget is None:
        lines.append("  GPU:          none configured (use --gpu 8GiB or a name such as t4)")
    else:
        lines.append(
            f"  GPU:          {budget.device}: total {format_bytes(budget.total)}, reserve "
            f"{format_bytes(budget.reserve)} (CUDA context {format_bytes(budget.cuda_context)}"
            f" + framework {format_bytes(budget.framework_reserve)}: "
            f"{budget.reserve_source}), usable {format_bytes(budget.usable)}"
            + (" per GPU" if setup.strategy else ""))
        if budget.cap is not None or budget.cap_source:
            cap = format_bytes(budget.cap) if budget.cap is not None else "none"
            lines.append(f"  process cap:  {cap} ({budget.cap_source})")
    if setup.strategy:
        replicas = f"{setup.replicas} replicas" if setup.replicas else \
            "one replica per GPU, how many the code does not say (pass --gpus N)"
        total = f" (global batch {setup.global_batch_size})" if setup.global_batch_size else ""
        lines.append(f"  devices:      {replicas} of {setup.strategy_source}; the estimate and "
                     f"the verdict are per GPU{total}")
    if budget is not None:
        result = verdict(breakdown, budget)
        lines.append(f"  verdict:      {verdict_text(result)}")
        shared = bound_text(result, breakdown)
        if shared:
            lines.append(f"  shared step:  {shared}")
        if result.largest_batch_size is not None:
            lines.append("  largest batch size that fits: "
                         + batch_text(setup, result.largest_batch_size)
                         + (f" (with the {percent(result.margin)} margin)"
                            if result.margin else ""))
    elif breakdown.shared_bound is not None:
        lines.append(f"  shared step:  {bound_text(verdict(breakdown, None), breakdown)}")
    flags = sizing_flags(graph, breakdown)
    if flags:
        lines.append(f"  to size it:   pass {' and '.join(flags)}")
    if onnx:
        lines.append("  parameters:   the weights stored in the graph; exporters fold "
                     "BatchNormalization into the convolution before it and drop training-only "
                     "state (optimizer slots, batch counters), so the source framework's count "
                     "can differ")
    if breakdown.unknown_activations:
        lines.append("  not counted (shape unknown): " + ", ".join(breakdown.unknown_activations))
    for name, what in breakdown.not_modelled:
        lines.append(f"  not counted ({name}): {what}")
    if breakdown.shared_step:
        lines.append(f"  not counted (the other calls): {breakdown.shared_step}")
    return lines


def part_line(graph) -> str:
    """One line for a model that only runs inside other models (as a layer, or with its
    tensors building them)."""
    where = f" at {graph.location.path}:{graph.location.line}" if graph.location else ""
    if graph.setup.pipeline and not graph.setup.part_of:
        return (f"Model '{graph.name}' ({graph.kind}){where}: runs in the tf.data input "
                f"pipeline ({graph.setup.pipeline}), which runs on the host; nothing compiles "
                "or fits it, so it has no training step of its own on the GPU")
    users = ", ".join(f"'{name}'" for name in graph.setup.part_of)
    estimates = 'their estimates' if len(graph.setup.part_of) > 1 else 'its estimate'
    if graph.setup.part_idle:  # (a masked autoencoder's test-time augmentation)
        return (f"Model '{graph.name}' ({graph.kind}){where}: held by {users}, whose training "
                "step never runs it (nothing compiles, fits or calls it on its own): its "
                f"weights are in {estimates}")
    if graph.setup.part_shares:  # (a seq2seq's inference encoder, of the trained layers)
        return (f"Model '{graph.name}' ({graph.kind}){where}: its layers run in {users} "
                "(nothing compiles, fits or calls it on its own): their weights and memory "
                f"are in {estimates}")
    return (f"Model '{graph.name}' ({graph.kind}){where}: runs only inside {users} "
            "(nothing compiles, fits or calls it on its own): its layers and memory "
            f"are in {estimates}")


def verdict_text(result) -> str:
    """The verdict line: fits (with the margin), too close to call or does NOT fit on a
    complete estimate; on a partial one a lower bound that can only prove the model does not
    fit, and what is unknown."""
    share = percent(result.share)
    if not result.lower_bound:
        if result.status == TOO_CLOSE:
            return f"peak is {share} of usable memory: too close to call: " + margin_text(result)
        with_room = f" (with the {percent(result.margin)} margin)" \
            if result.status == FITS and result.margin else ""
        return f"peak is {share} of usable memory: " \
               f"{'fits' + with_room if result.status == FITS else 'does NOT fit'}"
    at_one = "" if result.batch_known else " at batch size 1"
    if result.status == DOES_NOT_FIT:
        head = f"does NOT fit: the known parts{at_one} alone are {format_bytes(result.peak)} " \
               f"({share} of usable memory)"
    elif result.status == FITS:  # on the upper bound of a step shared with other models
        with_room = f" (with the {percent(result.margin)} margin)" if result.margin else ""
        return f"the training step it shares with other calls fits{with_room}: see " \
               f"'shared step' (this call alone: at least {format_bytes(result.peak)}, " \
               f"{share} of usable memory)"
    else:
        head = f"unknown: at least {format_bytes(result.peak)} (the known parts{at_one}, " \
               f"{share} of usable memory)"
    why = []
    if result.unknown_layers:
        why.append(unknown_layers_text(result.unknown_layers))
    if not result.batch_known:
        why.append("the batch size is not known")
    return "; ".join([head, *why])


_PHASES = {"forward": "forward", "backward": "backward", "update": "update"}
_KIND_NAMES = {"saved": "kept for backward", "live": "live", "grad": "activation gradient",
               "gradients": "weight gradients", "weights": "weights", "optimizer": "slots",
               "data": "input", "targets": "targets", "predictions": "predictions",
               "scratch": "backward scratch",
               "casts": "16-bit weights", "work": "matrix-product scratch"}


def timeline_lines(breakdown) -> list:
    """Memory over the step, one line per phase (where it starts, its largest moment and
    where it ends), then the peak's place and the largest tensors alive there."""
    timeline = getattr(breakdown, "timeline", None) or []
    if not timeline:
        return []
    lines = ["", "Memory over the step (the walk):"]
    for phase in _PHASES:
        moments = [m for m in timeline if m["phase"] == phase]
        if not moments:
            continue
        top = max(moments, key=lambda m: m["bytes"])
        if phase == "update":
            lines.append(f"  {phase:<10}{format_bytes(top['bytes']):>11}")
            continue
        where = "" if top["layer"] in ("loss", "end") else f" at {top['layer']}"
        lines.append(f"  {phase:<10}{format_bytes(moments[0]['bytes']):>11} -> "
                     f"{format_bytes(moments[-1]['bytes'])}, largest "
                     f"{format_bytes(top['bytes'])}{where}")
    at = getattr(breakdown, "peak_at", None) or {}
    if at.get("phase"):
        layer = at.get("layer")
        place = {"loss": "at the loss, as the backward pass starts",
                 "end": "at the end of the forward pass",
                 "optimizer": "during the update"}.get(layer)
        if place is None:
            place = f"in the {at['phase']} pass of {layer}"
        lines.append(f"  peak is {place}; largest tensors alive there:")
        for tensor in at.get("tensors", []):
            kind = _KIND_NAMES.get(tensor.get("kind"), tensor.get("kind", ""))
            lines.append(f"    {format_bytes(tensor['bytes']):>11}  {tensor['name']} ({kind})")
    return lines


def profile_line(setup, breakdown) -> str:
    """Which memory profile was used and why (the backend and where it came from)."""
    backend = getattr(setup, "backend", None)
    profile = getattr(breakdown, "profile", None)
    if profile is None:
        return f"default (TensorFlow graph-mode schedule, no allocator model; backend " \
               f"{getattr(setup, 'backend_source', 'not stated in the code')})"
    jit = " with jit_compile=True" if backend == "tf" and profile == "xla" else ""
    return f"{profile} (backend {backend}{jit}: {setup.backend_source})"


def _live_by_node(graph, batch_size: int) -> dict:
    """Bytes of tensors alive once each node of an ONNX graph has run (inference)."""
    from memlint.memory.liveness import inference_peak
    return dict(inference_peak(graph, batch_size)[2])


def render_report(reports: list, errors: list, options) -> str:
    out = []
    for report in reports:
        if not report.models:
            names = ", ".join(n for _, n, _ in report.definitions)
            extra = f" (definitions not evaluated: {names})" if names else ""
            out.append(f"{report.path}: no Keras model built at module level{extra}")
        for graph, breakdown in zip(report.models, report.breakdowns):
            out += model_report(graph, breakdown, report.budget)
            out.append("")
        for graph in report.parts:
            out.append(part_line(graph))
        if report.parts:
            out.append("")
        for diag in report.diagnostics:
            out.append(diagnostic_line(diag))
        out.append("")
    out.extend(f"error: {e}" for e in errors)
    return "\n".join(out).rstrip() + "\n"
