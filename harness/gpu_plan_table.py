"""Figures and Markdown tables of the GPU-plan oracle (``tests/data/gpu_plans.json``):
memlint's ``xla`` profile against XLA's plan of the same step for a described GPU.  Pure
Python on the stored data (no JAX): ``python -m harness.gpu_plan --table`` prints them, the
tests read :func:`figures`.

Part by part, with the state donated (as Keras's JAX trainer does):

* ``arguments``: XLA's argument bytes (trainable, non-trainable, optimizer and metric
  variables, and the batch) against memlint's weights + optimizer slots + input batch +
  targets;
* ``rest``: XLA's output - alias + temp (what the step allocates besides its donated
  arguments: gradients, saved activations, temporaries) against the rest of memlint's parts
  (gradients, saved or live activations, the backward transient, allocator rounding).

Both differences are given as a share of XLA's peak, so they add up to the total error.

XLA's temporaries are one allocation into which it packs its buffers best-fit; where the
packing leaves holes, the allocation is larger than the most bytes ever alive at once
(``plan.live_temp``, :mod:`harness.xla_liveness`).  ``packing`` is that difference as a share
of the peak, and the *liveness peak* (arguments + output - alias + live temporaries) is what a
walk through the step in XLA's order adds up: memlint's error against it tells a miss of the
walk (what is alive, and when) from one of the packing, which memlint does not model.
"""

from __future__ import annotations

import functools
import math
import statistics

from harness import gpu_targets

CURRENT = "memlint"  # the rows' memlint side as memlint computes it now
BASELINE = "memlint_v1"  # memlint before the memory-model rewrite (harness.gpu_plan.BASELINE_KEY)

# memlint parts that correspond to XLA's (donated) arguments
ARGUMENT_PARTS = frozenset({"weights", "optimizer slots", "input batch", "targets"})
UNDER = -0.05  # "under-estimated by more than 5%"
LARGE = 64 << 20  # models whose plan is at least this big, where fixed buffers weigh less


def error(row: dict, key: str = CURRENT):
    if key == CURRENT:
        return row.get("relative_error")
    return (row.get(key) or {}).get("relative_error")


@functools.lru_cache(maxsize=None)
def _device_memory(target: str) -> int:
    """The memory of a described GPU (``harness/gpu_targets.yaml``), 0 when not described."""
    return int((gpu_targets.targets().get(target) or {}).get("device_memory_size") or 0)


def over_the_card(row: dict) -> bool:
    """Whether XLA's plan is larger than the described GPU's memory, or rematerialised
    toward it (``rematerialised``: values recomputed to fit): a plan of another program than
    the step memlint walks, which fits on that GPU only that way or not at all.  Such rows
    are left out of the figures and listed apart."""
    size = _device_memory(row["target"])
    return "plan" in row and (bool(row.get("rematerialised")) or (
        bool(size) and row["plan"]["peak"] > size))


def ok_rows(rows: list, key: str = CURRENT) -> list:
    return [r for r in rows if "plan" in r and error(r, key) is not None
            and not over_the_card(r)]


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def part_differences(row: dict, key: str = CURRENT) -> tuple:
    """(arguments difference, rest difference), each (memlint - XLA) / XLA peak."""
    plan, parts = row["plan"], row[key]["parts"]
    peak = plan["peak"] or 1
    memlint_args = sum(v for k, v in parts.items() if k in ARGUMENT_PARTS)
    memlint_rest = row[key]["peak"] - memlint_args
    xla_rest = plan["output"] - plan["alias"] + plan["temp"]
    return (memlint_args - plan["argument"]) / peak, (memlint_rest - xla_rest) / peak


def live_peak(row: dict):
    """XLA's peak without its packing's holes (None for rows compiled before it was kept)."""
    plan = row["plan"]
    if plan.get("live_temp") is None:
        return None
    return plan["argument"] + plan["output"] - plan["alias"] + plan["live_temp"]


def packing(row: dict):
    """The holes XLA's packing leaves in its temporaries, as a share of its peak."""
    live = live_peak(row)
    return None if live is None else (row["plan"]["peak"] - live) / (row["plan"]["peak"] or 1)


def live_error(row: dict, key: str = CURRENT):
    """(memlint - liveness peak) / liveness peak."""
    live = live_peak(row)
    return None if not live else (row[key]["peak"] - live) / live


def summary(rows: list, key: str = CURRENT) -> dict:
    """The figures over ``rows`` (those with both sides)."""
    rows = ok_rows(rows, key)
    errors = [error(r, key) for r in rows]
    absolute = [abs(e) for e in errors]
    out = {"n": len(rows)}
    if not rows:
        return out
    args, rest = zip(*(part_differences(r, key) for r in rows))
    out.update(median=statistics.median(absolute), p90=percentile(absolute, 0.9),
               max=max(absolute), signed_median=statistics.median(errors),
               under5=sum(e < UNDER for e in errors), over5=sum(e > -UNDER for e in errors),
               within5=sum(a <= 0.05 for a in absolute),
               args_median=statistics.median(args), rest_median=statistics.median(rest),
               args_abs_median=statistics.median(abs(a) for a in args),
               rest_abs_median=statistics.median(abs(a) for a in rest))
    live = [r for r in rows if live_peak(r)]
    if live:
        versus = [live_error(r, key) for r in live]
        holes = [packing(r) for r in live]
        out.update(live_n=len(live), live_median=statistics.median(abs(e) for e in versus),
                   live_p90=percentile([abs(e) for e in versus], 0.9),
                   live_under5=sum(e < UNDER for e in versus),
                   live_beyond20=sum(abs(e) > 0.2 for e in versus),
                   packing_median=statistics.median(holes), packing_max=max(holes),
                   packing_over5=sum(h > 0.05 for h in holes))
    cpu = [r for r in rows if "cpu_plan" in r]
    if cpu:
        out["cpu_n"] = len(cpu)
        out["cpu_memlint_median"] = statistics.median(
            abs(r[key]["peak"] - r["cpu_plan"]["peak"]) / r["cpu_plan"]["peak"]
            for r in cpu)
        out["cpu_gpu_median"] = statistics.median(
            abs(r["plan"]["peak"] - r["cpu_plan"]["peak"]) / r["cpu_plan"]["peak"]
            for r in cpu)
        out["gpu_memlint_median_same_rows"] = statistics.median(
            abs(error(r, key)) for r in cpu)
    return out


def select(rows: list, **where) -> list:
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def figures(data: dict, key: str = CURRENT) -> dict:
    """``{target: summary}`` over each target's base rows (train, own optimizer, float32,
    every fixture that compiles, batches 4 and 32 where the target has them)."""
    rows = data["rows"]
    targets = sorted({r["target"] for r in rows}, key=lambda t: ("h100", "t4", "a100").index(t)
                     if t in ("h100", "t4", "a100") else 9)
    return {t: summary(select(rows, target=t, part="base"), key) for t in targets}


def _pct(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:+.1%}" if value < 0 else f"{value:.1%}"


def _signed(value) -> str:
    return f"{value:+.1%}"


def _line(label: str, s: dict, cpu: bool = False) -> str:
    if not s.get("n"):
        return f"| {label} | 0 |" + " |" * (8 + cpu)
    cells = [label, str(s["n"]), _pct(s["median"]), _pct(s["p90"]), _pct(s["max"]),
             str(s["under5"]), str(s["within5"]), _signed(s["signed_median"]),
             _signed(s["args_median"]), _signed(s["rest_median"])]
    if cpu:
        cells.append(f"{_pct(s['cpu_memlint_median'])} / {_pct(s['gpu_memlint_median_same_rows'])}"
                     f" ({s['cpu_n']})" if s.get("cpu_n") else "")
    return "| " + " | ".join(cells) + " |"


HEADER = ("| {first} | rows | median abs. error | 90th pct | max | under by >5% | within 5% | "
          "signed median | arguments diff | rest diff |")
RULE = "| --- " + "| ---: " * 9 + "|"


def describe(data: dict, key: str) -> str:
    meta = data["meta"]
    if key == BASELINE:
        base = meta.get(BASELINE) or {}
        return (f"memlint at commit {base.get('commit')} (memory model v1, before the "
                "rewrite)")
    when = meta.get("memlint_refreshed") or meta.get("updated") or meta.get("date")
    return f"memlint as of {when} (the work tree the data was generated or refreshed in)"


def markdown(data: dict, key: str = CURRENT) -> str:
    """The comparison tables for memlint's side ``key`` (``memlint`` or ``memlint_v1``)."""
    rows = data["rows"]
    meta = data["meta"]
    v = meta.get("versions") or {}
    out = [f"GPU plans of {meta.get('date')} (jax {v.get('jax')}, jaxlib {v.get('jaxlib')}, "
           f"jax-cuda12-plugin {v.get('jax-cuda12-plugin')}, keras {v.get('keras')}) against "
           f"{describe(data, key)}, `{meta.get('memlint_profile', 'xla')}` profile.", ""]
    out.append("Error = (memlint - XLA) / XLA peak. Arguments diff / rest diff: medians of "
               "(memlint - XLA) / XLA peak for the donated arguments (weights, optimizer state, "
               "batch) and for the rest (output - alias + temp: gradients, saved activations, "
               "temporaries); per row they add up to the error.")
    out.append("")
    out.append("#### Train step, each fixture's own optimizer, float32 (batches 4 and 32; "
               "A100: 32)")
    out.append("")
    out.append(HEADER.format(first="target") + " CPU plan column: median abs. error vs the "
               "CPU plan / vs this target, same rows (batch 4) |")
    out.append(RULE + " --- |")
    keys = [key] + ([BASELINE] if key == CURRENT and any(BASELINE in r for r in rows) else [])
    for k in keys:
        for target, s in figures(data, k).items():
            label = target + (" (v1)" if k == BASELINE and key != BASELINE else "")
            out.append(_line(label, s, cpu=True))
    for target in ("h100", "t4", "a100"):  # fixed buffers (cuBLAS workspace) matter less
        big = [r for r in select(rows, target=target, part="base")
               if "plan" in r and r["plan"]["peak"] >= LARGE]
        out.append(_line(f"{target}, XLA peak >= 64 MiB", summary(big, key), cpu=True))
    out.append("")
    out.append("#### By batch size (train, own optimizer, float32)")
    out.append("")
    out.append(HEADER.format(first="target, batch"))
    out.append(RULE)
    for target in ("h100", "t4", "a100"):
        for batch in sorted({r["batch"] for r in select(rows, target=target, part="base")}):
            out.append(_line(f"{target}, {batch}", summary(
                select(rows, target=target, part="base", batch=batch), key)))
    large = select(rows, part="large")
    if large:
        out.append("")
        out.append(f"#### Large batch (train, own optimizer, float32, batch "
                   f"{', '.join(str(b) for b in sorted({r['batch'] for r in large}))})")
        out.append("")
        out.append(HEADER.format(first="target"))
        out.append(RULE)
        for target in ("h100", "t4", "a100"):
            rows_of = select(large, target=target)
            if rows_of:
                big = [r for r in rows_of if "plan" in r and r["plan"]["peak"] >= LARGE]
                out.append(_line(target, summary(rows_of, key)))
                out.append(_line(f"{target}, XLA peak >= 64 MiB", summary(big, key)))
    cross = select(rows, part="cross")
    if cross:
        out.append("")
        out.append(f"#### Optimizers x precisions ({len({r['fixture'] for r in cross})} "
                   "representative fixtures, batch 32)")
        out.append("")
        out.append(HEADER.format(first="target, precision / optimizer"))
        out.append(RULE)
        for target in ("h100", "t4"):
            for precision in ("float32", "mixed_float16", "mixed_bfloat16"):
                out.append(_line(f"{target}, {precision}", summary(
                    select(cross, target=target, precision_requested=precision), key)))
            for optimizer in ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad"):
                out.append(_line(f"{target}, {optimizer}", summary(
                    select(cross, target=target, optimizer_key=optimizer), key)))
    infer = select(rows, part="infer")
    if infer:
        out.append("")
        out.append("#### Predict step (batch 32, float32)")
        out.append("")
        out.append(HEADER.format(first="target"))
        out.append(RULE)
        for target in sorted({r["target"] for r in infer}):
            out.append(_line(target, summary(select(infer, target=target), key)))
    liveness = liveness_lines(data, key)
    if liveness:
        out += [""] + liveness
    out.append("")
    out.append("#### Largest errors (H100 and T4, train, own optimizer, float32, batch 32)")
    out.append("")
    out.append("| target | fixture::model | params | XLA peak | arguments | temp | memlint | "
               "error | arguments diff | rest diff | packing | error vs liveness |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
               "| ---: |")
    worst = sorted(ok_rows(select(rows, part="base", batch=32), key),
                   key=lambda r: -abs(error(r, key)))
    worst = [r for r in worst if r["target"] in ("h100", "t4")][:16]
    for r in worst:
        a, b = part_differences(r, key)
        out.append(f"| {r['target']} | {r['fixture'].removeprefix('fixtures/')}::{r['model']} | "
                   f"{r.get('params', 0):,} | {r['plan']['peak']:,} | {r['plan']['argument']:,} | "
                   f"{r['plan']['temp']:,} | {r[key]['peak']:,} | "
                   f"{_signed(error(r, key))} | {_signed(a)} | {_signed(b)} | "
                   f"{_pct(packing(r))} | {_pct(live_error(r, key))} |")
    over = [r for r in rows if over_the_card(r)]
    if over:
        out.append("")
        out.append("Left out of the figures: plans larger than the described GPU's memory, "
                   "or that XLA rematerialised toward its limit (recomputing values to fit: "
                   "a plan of another program than the step):")
        out.append("")
        for r in over:
            remat = f", {r['rematerialised']} values rematerialised" \
                if r.get("rematerialised") else ""
            out.append(f"* {r['target']} `{r['fixture'].removeprefix('fixtures/')}::"
                       f"{r['model']}` batch {r['batch']}: XLA {r['plan']['peak']:,} (memory "
                       f"{_device_memory(r['target']):,}{remat}), memlint {r[key]['peak']:,}")
    out += failure_lines(rows, "did not compile; the reasons (first line, per model)", 160)
    return "\n".join(out)


def liveness_lines(data: dict, key: str = CURRENT) -> list:
    """The table against XLA's liveness peak (empty when no row has it): for each target's
    base and large-batch rows and the predict step, memlint's error against the liveness
    peak, and how much of XLA's peak its packing adds."""
    rows = data["rows"]
    groups = [(f"{t}, train", select(rows, target=t, part="base")) for t in ("h100", "t4", "a100")]
    groups += [(f"{t}, train, large batch", select(rows, target=t, part="large"))
               for t in ("h100", "t4", "a100")]
    groups += [(f"{t}, predict", select(rows, target=t, part="infer"))
               for t in sorted({r["target"] for r in select(rows, part="infer")})]
    lines = []
    for label, group in groups:
        s = summary(group, key)
        if not s.get("live_n"):
            continue
        lines.append(f"| {label} | {s['live_n']} | {_pct(s['live_median'])} | "
                     f"{_pct(s['live_p90'])} | {s['live_under5']} | {s['live_beyond20']} | "
                     f"{_pct(s['packing_median'])} | {_pct(s['packing_max'])} | "
                     f"{s['packing_over5']} |")
    if not lines:
        return []
    return ["#### Against XLA's liveness (its peak without the packing's holes)", "",
            "Liveness peak = arguments + output - alias + the most bytes of temporaries alive "
            "at once (XLA's buffer assignment and live ranges, harness.xla_liveness); packing = "
            "(XLA peak - liveness peak) / XLA peak, what placing the buffers in one allocation "
            "adds, which memlint does not model.", "",
            "| rows | n | median abs. error vs liveness | 90th pct | under by >5% | beyond 20% "
            "| packing, median | packing, max | packing > 5% |",
            "| --- " + "| ---: " * 8 + "|"] + lines


def failure_lines(rows: list, what: str, width: int = 140) -> list:
    """Markdown lines for the rows with an error: a count, then the first line of the error
    of each model (none when every row has a result)."""
    failed = [r for r in rows if "error" in r]
    if not failed:
        return []
    reasons: dict = {}
    for r in failed:
        reasons.setdefault((r["fixture"], r["model"]), r["error"].splitlines()[0][:width])
    out = ["", f"{len(failed)} rows ({len(reasons)} models) {what}:", ""]
    for (fixture, model), reason in sorted(reasons.items()):
        out.append(f"* `{fixture.removeprefix('fixtures/')}::{model}`: {reason}")
    return out
