"""Regenerate the comparison table from recorded measurements (JSON lines).

    python -m harness.compare data/measurements/*.jsonl > docs/measurements.md

Per backend and device: runs, median absolute relative error of memlint's peak against the
measured peak (GPU runs; for CPU runs against XLA's memory plan of the same step, labelled
as such), the wrong-verdict rate and the runs memlint said fit that ran out of memory.

A verdict (xMem's definition) is wrong when memlint says the configuration fits under the
cap (its peak with the verdict's margin <= the cap: memory/verdict.py) and the run ran out of
memory at that cap, or memlint says it does not fit (its peak > the cap) and it ran.  Between
the two memlint calls it too close to call: no verdict, counted apart.  The margin is today's
(the row's profile's, as memlint's peak is today's).  Runs that failed for other reasons are
counted apart, never as verdicts,
and so are runs that cannot have been held to their cap (they ran although XLA's own plan of
the step was larger than the cap, ran on a GPU without peak counters to show it, or report
an allocator limit above the cap).  JAX runs on a GPU are also compared with XLA's plan of
the same step compiled on that GPU (the executable's buffers alone: the process's peak counter
also holds what compilation and autotuning allocated).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICT_KINDS = ("cap-fit", "cap-fail", "maxbatch-fit", "maxbatch-fail")


def load(paths) -> list:
    """Every row of every file; a row without a device (a run whose process failed before it
    looked) takes the device its file's other rows name."""
    rows = []
    for path in paths:
        found = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        devices = Counter(r["device"] for r in found if r.get("device"))
        for row in found:
            if not row.get("device") and devices:
                row["device"] = devices.most_common(1)[0][0]
        rows.extend(found)
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


def plan_error(row: dict):
    """memlint against XLA's plan of the step compiled on the GPU the row ran on (None for
    CPU rows, whose plan is their primary comparison, and where there is no plan)."""
    plan = (row.get("xla_plan") or {}).get("peak")
    if row.get("kind") or row.get("status") != "ok" or not plan or not row.get("measured_peak"):
        return None
    return (row["memlint_peak"] - plan) / plan


def cap_not_enforced(row: dict) -> bool:
    """A verdict run that ran although its own step's plan needs more than its cap, or that
    ran on a GPU without the peak counters that would show what it held."""
    if row.get("kind") not in VERDICT_KINDS or row.get("status") != "ok":
        return False
    plan = (row.get("xla_plan") or {}).get("peak")
    on_gpu = not (row.get("device") or "cpu").lower().startswith("cpu")
    limit = row.get("bytes_limit")  # the JAX allocator's own limit, where recorded
    return (bool(plan and plan > row["cap_bytes"]) or (on_gpu and not row.get("measured_peak"))
            or bool(limit and limit > row["cap_bytes"] * 1.01))


def margin(row: dict) -> float:
    """The verdict's margin today for the row's memory profile (its backend's when the row
    names none)."""
    from memlint.memory.profiles import DEFAULT, get_profile
    return (get_profile(row.get("memlint_profile") or row.get("backend")) or DEFAULT
            ).verdict_margin


def too_close(row: dict) -> bool:
    """A verdict row whose cap lies between memlint's peak and the peak with the margin:
    memlint calls it too close (no verdict)."""
    if row.get("kind") not in VERDICT_KINDS or row.get("memlint_peak") is None:
        return False
    from memlint.memory.verdict import with_margin
    peak = row["memlint_peak"]
    return peak <= row["cap_bytes"] < with_margin(peak, margin(row))


def verdict(row: dict):
    """(memlint says fits, it ran) for a verdict row; None when the run failed otherwise, was
    not held to its cap, or memlint called it too close."""
    if row.get("kind") not in VERDICT_KINDS or row.get("status") not in ("ok", "oom") \
            or cap_not_enforced(row) or too_close(row):
        return None
    return row["memlint_peak"] <= row["cap_bytes"], row["status"] == "ok"


def summarise(rows: list) -> list:
    """One summary dict per (backend, device, basis)."""
    groups = defaultdict(lambda: {"errors": [], "verdicts": [], "failed": 0, "uncapped": 0,
                                  "too_close": 0})
    for row in rows:
        device = row.get("device") or "?"
        error, basis = relative_error(row)
        if error is not None:
            groups[(row["backend"], device, basis)]["errors"].append(abs(error))
        if plan_error(row) is not None:
            groups[(row["backend"], device, "xla-plan")]["errors"].append(abs(plan_error(row)))
        judged = verdict(row)
        if judged is not None:
            groups[(row["backend"], device, "measured")]["verdicts"].append(judged)
        elif cap_not_enforced(row):
            groups[(row["backend"], device, "measured")]["uncapped"] += 1
        elif too_close(row) and row.get("status") in ("ok", "oom"):
            groups[(row["backend"], device, "measured")]["too_close"] += 1
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
            "fit_then_oom": fit_then_oom, "too_close": g["too_close"],
            "failed_runs": g["failed"],
            "cap_not_enforced": g["uncapped"],
        })
    return out


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _plan_cells(row: dict) -> str:
    error = plan_error(row)
    if error is None:
        return "| |"
    return f"{row['xla_plan']['peak']:,} | {error:+.1%} |"


def markdown(rows: list) -> str:
    lines = ["| backend | device | compared with | runs | median abs. rel. error | "
             "verdict runs | wrong verdicts | said fit, ran out | too close to call | "
             "failed runs |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in summarise(rows):
        cpu = s["device"].lower().startswith("cpu")
        basis = ("measured peak" if s["basis"] == "measured" else
                 "XLA memory plan (CPU)" if cpu else "XLA plan of the step on this GPU")
        failed = str(s["failed_runs"]) + (f" (+{s['cap_not_enforced']} not held to the cap)"
                                          if s["cap_not_enforced"] else "")
        lines.append(f"| {s['backend']} | {s['device']} | {basis} | {s['runs']} | "
                     f"{_pct(s['median_abs_error'])} | {s['verdict_runs']} | "
                     f"{_pct(s['wrong_verdict_rate'])} | {s['fit_then_oom']} | "
                     f"{s['too_close']} | {failed} |")
    detail = ["", "| backend | model | batch | optimizer | precision | mode | measured | "
              "memlint | error | XLA plan on the GPU | error vs plan |",
              "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        error, basis = relative_error(row)
        if error is None:
            continue
        measured = row.get("measured_peak") or (row.get("xla_plan") or {}).get("peak")
        detail.append(f"| {row['backend']} | {row['fixture']}::{row['model']} | {row['batch']} | "
                      f"{row['optimizer']} | {row['precision']} | {row['mode']} | "
                      f"{measured:,}{'' if basis == 'measured' else ' (plan)'} | "
                      f"{row['memlint_peak']:,} | {error:+.1%} | " + _plan_cells(row))
    return "\n".join(lines + detail) + "\n"


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:]) or sorted(
        (ROOT / "data" / "measurements").glob("*.jsonl"))
    sys.stdout.write(markdown(load(paths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
