"""``memlint report --html FILE``: one self-contained page (no scripts, fonts or images from
the network) per run: for each model an inline SVG chart of the memory over the step (the
memory model's timeline, phases shaded) with the usable-memory line and the peak marked, the
breakdown at the peak, the per-layer table, the diagnostics and the text report."""

from __future__ import annotations

from html import escape

from memlint import __version__
from memlint.memory.estimate import CATEGORIES
from memlint.memory.verdict import DOES_NOT_FIT, FITS, TOO_CLOSE, verdict
from memlint.reporters.text import (diagnostic_line, layer_table, model_report, part_line,
                                    verdict_text)
from memlint.units import format_bytes

# chart geometry (SVG user units) and the colours tests look for in a screenshot
WIDTH, HEIGHT = 960, 340
LEFT, RIGHT, TOP, BOTTOM = 84, 24, 28, 58
LINE_COLOUR = "#1565c0"
BUDGET_COLOUR = "#d50000"
PEAK_COLOUR = "#ff6d00"
PHASE_COLOURS = {"forward": "#e3f2fd", "backward": "#fff3e0", "update": "#e8f5e9"}
OFF_SCALE = 4  # a budget more than this many times the peak is written, not drawn to scale

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1040px;color:#1b1f24;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-top:1px solid #d0d7de;
padding-top:18px}code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
table{border-collapse:collapse;margin:10px 0}th,td{border:1px solid #d0d7de;padding:3px 8px;
vertical-align:top}th{background:#f6f8fa;text-align:left}td.n{text-align:right;
white-space:nowrap;font-variant-numeric:tabular-nums}.badge{display:inline-block;padding:2px 10px;
border-radius:12px;font-weight:600}.fits{background:#dafbe1;color:#116329}
.does_not_fit{background:#ffebe9;color:#a40e26}.too_close{background:#fff8c5;color:#7d4e00}.unknown,.none{background:#eaeef2;
color:#424a53}svg{max-width:100%;height:auto;background:#fff}pre{background:#f6f8fa;
padding:10px;overflow:auto}.note{color:#57606a}
"""


def _ticks(top: int) -> list:
    """About five round byte values from 0 to ``top``."""
    raw = top / 5 or 1
    unit = 1
    while unit * 10 <= raw:
        unit *= 10
    for step in (unit, 2 * unit, 2.5 * unit, 5 * unit, 10 * unit):
        if step >= raw:
            break
    return [int(step * i) for i in range(int(top // step) + 1)]


def chart(breakdown, budget, title: str) -> str:
    """The SVG chart of ``breakdown.timeline`` ('' when the walk recorded no moments)."""
    timeline = list(getattr(breakdown, "timeline", None) or [])
    if not timeline:
        return ""
    usable = budget.usable if budget is not None else None
    top_moment = max(range(len(timeline)), key=lambda i: timeline[i]["bytes"])
    peak = timeline[top_moment]["bytes"]
    scaled_budget = usable is not None and usable <= OFF_SCALE * max(peak, 1)
    ceiling = max(peak, usable if scaled_budget else 0, 1) * 1.18
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = len(timeline)

    def x(i: float) -> float:
        return LEFT + (plot_w * (i + 0.5) / count)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / ceiling)

    parts = [f'<svg class="memory-chart" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>']
    # the phases as shaded bands, labelled at the top
    start = 0
    for i in range(1, count + 1):
        if i == count or timeline[i]["phase"] != timeline[start]["phase"]:
            phase = timeline[start]["phase"]
            left, right = LEFT + plot_w * start / count, LEFT + plot_w * i / count
            parts.append(f'<rect class="phase {escape(phase)}" x="{left:.1f}" y="{TOP}" '
                         f'width="{right - left:.1f}" height="{plot_h}" '
                         f'fill="{PHASE_COLOURS.get(phase, "#f6f8fa")}"/>')
            if right - left > 40:
                parts.append(f'<text x="{(left + right) / 2:.1f}" y="{TOP + plot_h - 8}" '
                             f'text-anchor="middle" font-size="12" fill="#57606a">'
                             f'{escape(phase)}</text>')
            start = i
    for tick in _ticks(int(ceiling)):
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" '
                     f'y2="{y(tick):.1f}" stroke="#d0d7de" stroke-width="1"/>'
                     f'<text x="{LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end" '
                     f'font-size="11" fill="#57606a">{format_bytes(tick)}</text>')
    points = " ".join(f"{x(i):.1f},{y(m['bytes']):.1f}" for i, m in enumerate(timeline))
    base = f"{x(count - 1):.1f},{y(0):.1f} {x(0):.1f},{y(0):.1f}"
    parts.append(f'<polygon points="{points} {base}" fill="{LINE_COLOUR}" '
                 f'fill-opacity="0.12"/>')
    parts.append(f'<polyline class="memory-line" points="{points}" fill="none" '
                 f'stroke="{LINE_COLOUR}" stroke-width="3" stroke-linejoin="round"/>')
    for i, moment in enumerate(timeline):  # hover text per moment
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(moment["bytes"]):.1f}" r="6" '
                     f'fill="transparent"><title>{escape(moment["phase"])} '
                     f'{escape(str(moment["layer"]))}: {format_bytes(moment["bytes"])}'
                     f'</title></circle>')
    peak_right = x(top_moment) > LEFT + plot_w / 2
    if usable is not None:
        label = f"usable {format_bytes(usable)} ({escape(budget.label)})"
        if scaled_budget:  # its label on the side away from the peak's
            lx, side = (LEFT + 6, "start") if peak_right else (WIDTH - RIGHT - 6, "end")
            ly = y(usable) - 7 if usable >= peak or y(usable) - 7 < y(peak) - 30 else \
                y(usable) + 16
            parts.append(f'<line class="budget-line" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                         f'y1="{y(usable):.1f}" y2="{y(usable):.1f}" stroke="{BUDGET_COLOUR}"'
                         f' stroke-width="3" stroke-dasharray="10 6"/>'
                         f'<text x="{lx}" y="{ly:.1f}" text-anchor="{side}" font-size="12" '
                         f'font-weight="600" fill="{BUDGET_COLOUR}">budget: {label}</text>')
        else:
            parts.append(f'<text class="budget-line" x="{WIDTH - RIGHT - 4}" y="{TOP - 8}" '
                         f'text-anchor="end" font-size="12" fill="{BUDGET_COLOUR}">budget: '
                         f'{label}, {usable / max(peak, 1):.0f}x the peak: above the chart'
                         f'</text>')
    moment = timeline[top_moment]
    px, py = x(top_moment), y(peak)
    anchor = "end" if peak_right else "start"
    shift = -12 if peak_right else 12
    parts.append(f'<circle class="peak-marker" cx="{px:.1f}" cy="{py:.1f}" r="8" '
                 f'fill="{PEAK_COLOUR}" stroke="#fff" stroke-width="2"/>'
                 f'<text x="{px + shift:.1f}" y="{max(py - 10, TOP + 12):.1f}" '
                 f'text-anchor="{anchor}" font-size="13" font-weight="600" '
                 f'fill="#1b1f24">peak {format_bytes(peak)} ({escape(moment["phase"])}, '
                 f'{escape(str(moment["layer"]))})</text>')
    parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}" '
                 f'stroke="#57606a"/><text x="{LEFT + plot_w / 2:.1f}" '
                 f'y="{HEIGHT - 16}" text-anchor="middle" font-size="12" fill="#57606a">'
                 f'the training step, moment by moment ({count} moments: each layer forward, '
                 f'backward, then the update)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(header, rows, numeric=()) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def model_section(graph, breakdown, budget, index: int) -> str:
    result = verdict(breakdown, budget)
    status = result.status or "none"
    badge = {FITS: "fits", DOES_NOT_FIT: "does NOT fit", TOO_CLOSE: "too close to call",
             "unknown": "unknown",
             "none": "no GPU budget"}[status]
    where = f"{graph.location.path}:{graph.location.line}" if graph.location else ""
    title = f"Memory of model '{graph.name}' over one {'training' if graph.setup.mode == 'train' else 'inference'} step"
    batch = f"{breakdown.batch_size:,}" if breakdown.batch_known \
        else "unknown (pass --batch-size)"
    out = [f'<section class="model" id="model-{index}">',
           f"<h2>Model <code>{escape(graph.name)}</code> ({escape(graph.kind)}) "
           f'<span class="badge {status}">{badge}</span></h2>',
           f'<p class="note">{escape(where)} · batch size {batch} · '
           f"{graph.params:,} parameters · peak "
           f"{'at least ' if result.lower_bound else ''}{format_bytes(result.peak)}"
           + (f" · {escape(verdict_text(result))}" if budget is not None else
              " · no GPU budget (pass --gpu)") + "</p>"]
    svg = chart(breakdown, budget, title)
    out.append(f"<h3>{escape(title)}</h3>{svg}" if svg else
               '<p class="note">No memory timeline for this model.</p>')
    rows = []
    for category in CATEGORIES:
        for part in (p for p in breakdown.parts if p.category == category):
            rows.append((category, part.name, format_bytes(part.bytes), part.note))
    rows.append(("peak", "", format_bytes(breakdown.peak), ""))
    out += ["<h3>Breakdown at the peak</h3>",
            _table(("Category", "Part", "Bytes", "Assumption"), rows, numeric={2})]
    header, layer_rows = layer_table(graph, breakdown)
    out += ["<h3>Layers</h3>", _table(header, layer_rows, numeric={2, 3, 4})]
    out += ["<details><summary>Text report</summary><pre>"
            + escape("\n".join(model_report(graph, breakdown, budget))) + "</pre></details>",
            "</section>"]
    return "\n".join(out)


def page(reports: list, errors: list) -> str:
    """The whole HTML document."""
    sections, index = [], 0
    for report in reports:
        for graph, breakdown in zip(report.models, report.breakdowns):
            sections.append(model_section(graph, breakdown, report.budget, index))
            index += 1
        sections += [f'<p class="note">{escape(part_line(graph))}</p>' for graph in report.parts]
        if not report.models:
            sections.append(f'<p class="note">{escape(report.path)}: no model built at '
                            "module level</p>")
    diagnostics = [d for r in reports for d in r.diagnostics]
    if diagnostics:
        sections.append("<h2>Diagnostics</h2><pre>"
                        + escape("\n".join(map(diagnostic_line, diagnostics))) + "</pre>")
    if errors:
        sections.append("<h2>Errors</h2><pre>" + escape("\n".join(errors)) + "</pre>")
    files = ", ".join(r.path for r in reports) or "no file"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>memlint report: {escape(files)}</title><style>{_STYLE}</style></head>"
            f"<body><h1>memlint report</h1><p class=\"note\">{escape(files)} · memlint "
            f"{__version__} · estimated statically, nothing was run</p>\n"
            + "\n".join(sections) + "\n</body></html>\n")


def render_report(reports: list, errors: list, options) -> str:
    return page(reports, errors)


render_check = render_report
