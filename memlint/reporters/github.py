"""GitHub Actions workflow commands (``::error file=...,line=...::message``).

Annotations are ranked errors first, then warnings, then notices, because GitHub shows only
the first ten of each level per step.
"""

from __future__ import annotations

from memlint.diagnostics import severity_rank

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """Escape a message: ``%``, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value: as messages, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(diag) -> str:
    """One workflow command for a diagnostic."""
    props = [f"file={escape_property(diag.path)}"]
    if diag.node is not None:  # a graph file: the annotation is on the file, titled by node
        props.append(f"title={escape_property(f'{diag.code} {diag.name} (node {diag.node})')}")
        return f"::{_LEVEL[diag.severity]} {','.join(props)}::{escape_data(diag.message)}"
    props.append(f"line={max(diag.line, 1)}")
    end_line = diag.end_line or diag.line
    if end_line != diag.line:
        props.append(f"endLine={end_line}")
    else:  # columns only make sense on single-line spans
        props.append(f"col={max(diag.column, 1)}")
        if diag.end_column and diag.end_column > diag.column:
            props.append(f"endColumn={diag.end_column}")
    props.append(f"title={escape_property(f'{diag.code} {diag.name}')}")
    return f"::{_LEVEL[diag.severity]} {','.join(props)}::{escape_data(diag.message)}"


# Within one level, the findings that decide whether a job runs at all come first.
_PRIORITY = ("MEM001", "MEM002", "MEM901", "MEM902", "MEM003", "MEM004")


def ranked(diagnostics: list) -> list:
    """Errors, then warnings, then notices; within a level, memory verdicts before style."""
    def key(d):
        priority = _PRIORITY.index(d.code) if d.code in _PRIORITY else len(_PRIORITY)
        return (-severity_rank(d.severity), priority, d.path, d.line, d.column, d.code)

    return sorted(diagnostics, key=key)


def diff_notice(diff) -> list:
    """One notice with the memory diff's lines (first: GitHub shows ten notices a step)."""
    from memlint.reporters.text import diff_lines

    lines = diff_lines(diff)
    if not lines:
        return []
    title = escape_property(lines[0].rstrip(":"))
    body = "\n".join(line.strip() for line in lines[1:] if line.strip())
    return [f"::notice title={title}::{escape_data(body)}"]


def render_check(reports: list, errors: list, options) -> str:
    diagnostics = [d for r in reports for d in r.diagnostics]
    lines = diff_notice(getattr(options, "memory_diff", None))
    lines += [annotation(d) for d in ranked(diagnostics)]
    for message in errors:
        lines.append(f"::error::{escape_data(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


render_report = render_check
