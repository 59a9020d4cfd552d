"""The GitHub job summary: Markdown for ``$GITHUB_STEP_SUMMARY``, one table row per model
(parameters, peak, share of the usable memory, verdict, largest batch size, change against
the ``--diff`` base), the models removed since the base, and the findings."""

from __future__ import annotations

from collections import Counter

from memlint.checks.wording import percent
from memlint.diff import CHANGED, NEW, REMOVED, signed_percent
from memlint.memory.verdict import DOES_NOT_FIT, FITS, TOO_CLOSE, verdict
from memlint.reporters.github import ranked
from memlint.reporters.text import summary_line
from memlint.units import format_bytes

MAX_FINDINGS = 20  # findings listed under the table (errors first)
_VERDICT = {FITS: "✅ fits", DOES_NOT_FIT: "❌ does not fit", TOO_CLOSE: "⚠️ too close to call",
            "unknown": "❔ unknown",
            None: "no GPU budget"}


def cell(value) -> str:
    """A table cell: pipes escaped, on one line."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _change(diff, path: str, name: str) -> str:
    if diff is None:
        return ""
    for change in diff.changes:
        if (change.path, change.name) != (path, name):
            continue
        if change.status == NEW:
            return "new"
        if change.status != CHANGED:
            return "no change"
        share = change.peak_share
        delta = f"{signed_percent(share)} " if share is not None and change.peak_change else ""
        flip = " (stopped fitting)" if change.stopped_fitting else ""
        return f"{delta}({format_bytes(change.base.peak)} → " \
               f"{format_bytes(change.head.peak)}){flip}"
    return ""


def rows(reports: list, diff) -> list:
    """One list of cells per model."""
    out = []
    for report in reports:
        for graph, breakdown in zip(report.models, report.breakdowns):
            result = verdict(breakdown, report.budget)
            line = f":{graph.location.line}" if graph.location and graph.location.node is None \
                else ""
            peak = ("≥ " if result.lower_bound else "") + format_bytes(result.peak)
            share = f"{percent(result.share)} of {format_bytes(result.usable)}" \
                if result.share is not None else "—"
            largest = f"{result.largest_batch_size:,}" if result.largest_batch_size is not None \
                else "—"
            if result.largest_batch_size is not None and graph.setup.strategy:
                largest += " per GPU"
            batch = f"{breakdown.batch_size:,}" if breakdown.batch_known else "?"
            row = [f"`{graph.name}`", f"`{report.path}{line}`", f"{graph.params:,}", peak,
                   batch, share, _VERDICT.get(result.status, result.status), largest]
            if diff is not None:
                row.append(_change(diff, report.path, graph.name))
            out.append([cell(c) for c in row])
    return out


def markdown(reports: list, errors: list, diff=None) -> str:
    """The whole summary."""
    header = ["Model", "File", "Params", "Peak", "Batch", "Share of usable memory",
              "Verdict", "Largest batch"]
    if diff is not None:
        header.append(f"Against {diff.title}")
    lines = ["## memlint: GPU memory", ""]
    table = rows(reports, diff)
    if table:
        lines += ["| " + " | ".join(header) + " |",
                  "|" + "|".join("---:" if h in ("Params", "Peak", "Batch", "Largest batch")
                                 else "---" for h in header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in table]
    else:
        lines.append("No Keras or ONNX model found in the checked files.")
    if diff is not None:
        for change in diff.with_status(REMOVED):
            lines += ["", f"- removed since {cell(diff.title)}: `{cell(change.path)}`: "
                          f"{cell(change.summary)}"]
        lines += [""] + [f"- not analysed at {cell(diff.base)}: {cell(e)}" for e in diff.errors]
    diagnostics = [d for r in reports for d in r.diagnostics]
    lines += ["", f"**{summary_line(diagnostics, len(reports), len(errors))}**"]
    if diagnostics:
        counts = Counter(d.code for d in diagnostics)
        lines += ["", ", ".join(f"{code} × {n}" for code, n in sorted(counts.items())), ""]
        for diag in ranked(diagnostics)[:MAX_FINDINGS]:
            lines.append(f"- **{diag.severity}** `{cell(diag.where)}` {diag.code} "
                         f"{cell(diag.message)}")
        if len(diagnostics) > MAX_FINDINGS:
            lines.append(f"- ... and {len(diagnostics) - MAX_FINDINGS} more")
    lines += [f"- error: {cell(e)}" for e in errors]
    return "\n".join(line for line in _squeeze(lines)) + "\n\n"


def _squeeze(lines: list) -> list:
    """No two blank lines in a row."""
    out = []
    for line in lines:
        if line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return out
