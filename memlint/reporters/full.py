"""Diagnostics with their source: the ``path:line:col: CODE message`` line (as ``concise``
prints it), then the lines it points at with a marker under the span, like Ruff's ``full``.

The sources come from ``options.sources`` (path -> text, read by the CLI); a diagnostic on
a file not there, or on a graph node, is printed as its one line.
"""

from __future__ import annotations

from memlint.reporters import text

CONTEXT = 1  # lines shown before and after the span
MAX_SPAN_LINES = 6  # longer spans show their first and last lines


def snippet(diag, source: str) -> list:
    """The framed source lines of ``diag`` with ``^`` under its span ([] without lines)."""
    if diag.node is not None or not source:
        return []
    lines = source.splitlines()
    first = min(max(diag.line, 1), len(lines))
    if not lines or diag.line > len(lines):
        return []
    last = min(max(diag.end_line or first, first), len(lines))
    span = list(range(first, last + 1))
    if len(span) > MAX_SPAN_LINES:
        half = MAX_SPAN_LINES // 2
        span = span[:half] + [None] + span[-half:]
    shown = [n for n in range(max(first - CONTEXT, 1), first)] + span + \
        [n for n in range(last + 1, min(last + CONTEXT, len(lines)) + 1)]
    width = len(str(max(n for n in shown if n is not None)))
    gutter = " " * width
    out = [f"{gutter} |"]
    for number in shown:
        if number is None:
            out.append(f"{'.' * width} |")
            continue
        raw = lines[number - 1]
        out.append(f"{number:>{width}} | {raw.expandtabs()}".rstrip())
        if first <= number <= last:
            start, end = _columns(raw, number, diag, first, last)
            marker = " " * start + "^" * max(end - start, 1)
            if number == last:
                marker += f" {diag.code}"
            out.append(f"{gutter} | {marker}")
    out.append(f"{gutter} |")
    return out


def _columns(raw: str, number: int, diag, first: int, last: int) -> tuple:
    """Start and end (0-based, tabs expanded) of the span on one line of it."""
    stripped = len(raw) - len(raw.lstrip())
    start = max(diag.column, 1) - 1 if number == first else stripped
    if number == last and diag.end_column and (diag.end_line or first) == number:
        end = max(diag.end_column - 1, start + 1)
    elif number == last and number == first and not diag.end_column:
        end = start + 1
    else:
        end = len(raw.rstrip())
    start, end = min(start, len(raw)), min(end, max(len(raw), start + 1))
    return len(raw[:start].expandtabs()), len(raw[:end].expandtabs())


def render_check(reports: list, errors: list, options) -> str:
    sources = getattr(options, "sources", None) or {}
    lines = []
    for report in reports:
        for diag in report.diagnostics:
            lines.append(text.diagnostic_line(diag))
            lines += snippet(diag, sources.get(diag.path, ""))
            lines.append("")
    return text.render_check(reports, errors, options, body=lines)


render_report = text.render_report
