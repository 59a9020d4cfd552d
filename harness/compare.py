"""Regenerate the comparison table from recorded measurements (JSON lines).

    python -m harness.compare data/measurements/*.jsonl > docs/measurements.md

Per backend and device: runs, median absolute relative error of memlint's peak against the
measured peak (GPU runs; for CPU runs against XLA's memory plan of the same step, labelled
as such), the wrong-verdict rate and the runs memlint said fit that ran out of memory.

A verdict (xMem's definition) is wrong when memlint says the configuration fits under the
cap (its peak <= the cap) and the run ran out of memory at that cap, or memlint says it does
not fit and it ran.  Runs that failed for other reasons are counted apart, never as verdicts.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICT_KINDS = ("cap-fit", "cap-fail", "maxbatch-fit", "maxbatch-fail")


def load(paths) -> list:
    rows = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def relative_error(row: dict):
    """(error, against what) for one peak-measurement row; (None, None) when not measured."""
    if row.get("kind") or row.get("status") != "ok":
        return None, None
    if row.get("measured_peak"):
        return (row["memlint_peak"] - row["measured_peak"]) / row["measured_peak"], "measured"
    plan = (row.get("xla_plan") or {}).get("peak")
    if plan:
        return (row["memlint_peak"] - plan) / plan, "xla-plan"
    return None, None


def verdict(row: dict):
    """(memlint says fits, it ran) for a verdict row; None when the run failed otherwise."""
    if row.get("kind") not in VERDICT_KINDS or row.get("status") not in ("ok", "oom"):
        return None
    return row["memlint_peak"] <= row["cap_bytes"], row["status"] == "ok"


def summarise(rows: list) -> list:
    """One summary dict per (backend, device, basis)."""
    groups = defaultdict(lambda: {"errors": [], "verdicts": [], "failed": 0})
    for row in rows:
        device = row.get("device") or "?"
        error, basis = relative_error(row)
        if error is not None:
            groups[(row["backend"], device, basis)]["errors"].append(abs(error))
        judged = verdict(row)
        if judged is not None:
            groups[(row["backend"], device, "measured")]["verdicts"].append(judged)
        elif row.get("status") not in ("ok", "oom"):
            groups[(row["backend"], device, "measured")]["failed"] += 1
    out = []
    for (backend, device, basis), g in sorted(groups.items()):
        wrong = sum(1 for says, ran in g["verdicts"] if says != ran)
        fit_then_oom = sum(1 for says, ran in g["verdicts"] if says and not ran)
        out.append({
            "backend": backend, "device": device, "basis": basis, "runs": len(g["errors"]),
            "median_abs_error": statistics.median(g["errors"]) if g["errors"] else None,
            "verdict_runs": len(g["verdicts"]),
            "wrong_verdict_rate": wrong / len(g["verdicts"]) if g["verdicts"] else None,
            "fit_then_oom": fit_then_oom, "failed_runs": g["failed"],
        })
    return out


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def markdown(rows: list) -> str:
    lines = ["| backend | device | compared with | runs | median abs. rel. error | "
             "verdict runs | wrong verdicts | said fit, ran out | failed runs |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in summarise(rows):
        basis = "measured peak" if s["basis"] == "measured" else "XLA memory plan (CPU)"
        lines.append(f"| {s['backend']} | {s['device']} | {basis} | {s['runs']} | "
                     f"{_pct(s['median_abs_error'])} | {s['verdict_runs']} | "
                     f"{_pct(s['wrong_verdict_rate'])} | {s['fit_then_oom']} | "
                     f"{s['failed_runs']} |")
    detail = ["", "| backend | model | batch | optimizer | precision | mode | measured | "
              "memlint | error |", "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: |"]
    for row in rows:
        error, basis = relative_error(row)
        if error is None:
            continue
        measured = row.get("measured_peak") or (row.get("xla_plan") or {}).get("peak")
        detail.append(f"| {row['backend']} | {row['fixture']}::{row['model']} | {row['batch']} | "
                      f"{row['optimizer']} | {row['precision']} | {row['mode']} | "
                      f"{measured:,}{'' if basis == 'measured' else ' (plan)'} | "
                      f"{row['memlint_peak']:,} | {error:+.1%} |")
    return "\n".join(lines + detail) + "\n"


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:]) or sorted(
        (ROOT / "data" / "measurements").glob("*.jsonl"))
    sys.stdout.write(markdown(load(paths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
