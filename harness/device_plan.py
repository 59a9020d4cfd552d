"""On a machine with an NVIDIA GPU: compile the GPU-plan oracle's H100 steps with that
machine's JAX twice, for the real GPU (XLA autotunes: cuDNN picks its convolution algorithms
and their workspaces, Keras takes its GPU code paths) and for the described H100 without the
device (as the oracle tier does), and store the two plans side by side.

    python -m harness.device_plan --out-dir $OUT/p --time-budget 300     # on the GPU machine
    python -m harness.device_plan --table data/measurements/device-plans-*.json
    python -m harness.device_plan --refresh-memlint data/measurements/device-plans-*.json

The configurations are the H100 rows of ``tests/data/gpu_plans.json`` with each fixture's own
optimizer in float32 (train at batch 32, then predict at 32, then train at 4), so the same
JAX version on the same machine separates what the device adds (autotuning, workspaces, the
GPU code paths) from the deviceless plan, and the stored oracle row (older JAX) sits beside.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import gpu_plan  # noqa: E402
from harness.measure import output_path  # noqa: E402
from harness.run_one import gpu_info  # noqa: E402

ORDER = ((32, "train"), (32, "infer"), (4, "train"))
DESCRIBED = "h100"


def oracle_rows(data: dict) -> list:
    """The stored H100 rows this tool recompiles, in ORDER, each (fixture, model, batch,
    mode) once."""
    chosen, seen = [], set()
    for batch, mode in ORDER:
        for row in data["rows"]:
            key = (row["fixture"], row["model"], row["batch"], row["mode"])
            if (row["target"] == DESCRIBED and row["batch"] == batch and row["mode"] == mode
                    and row["optimizer_key"] == gpu_plan.OWN and not row.get("error")
                    and row["precision_requested"] == "float32" and key not in seen):
                seen.add(key)
                chosen.append(row)
    return chosen


def jobs(rows: list, target: str) -> list:
    """One job per stored row (its Keras source, model and input shapes), compiled for
    ``target`` (gpu_plan.DEVICE or a described GPU)."""
    return [{"id": i, "file": row["keras_source"], "model": row["model"],
             "precision": "float32", "optimizer": None,
             "input_shapes": row.get("input_shapes"),
             "configs": [{"target": target, "batch": row["batch"], "mode": row["mode"]}]}
            for i, row in enumerate(rows)]


def _plan(results: dict, index: int) -> dict:
    found = (results.get(index) or [{}])[0]
    return {k: found.get(k) for k in ("plan", "kernels", "conv_scratch", "library_calls",
                                      "compile_s", "error") if found.get(k) is not None}


def compile_both(make_jobs, workers: int, budget: float) -> dict:
    """``make_jobs(target)`` compiled on this machine's GPU and for the described H100 with
    the same JAX, side by side, until ``budget`` seconds have passed (jobs not reached have
    no result).  Both with the real toolchain and XLA's default flags: the oracle tier's
    fast-compile flags and kernel cache are options of its own JAX version.  Returns
    ``{"device": (results, meta), "deviceless": (results, meta)}``."""
    stop_at = time.monotonic() + budget
    out: dict = {}

    def side(name, target, on_device):
        out[name] = gpu_plan.run_jobs(make_jobs(target), workers=workers, chunk=3,
                                      fast=False, job_timeout=120,
                                      on_device=on_device, stop_at=stop_at,
                                      log=lambda m: print(f"[device_plan {name}] {m}",
                                                          flush=True))

    threads = [threading.Thread(target=side, args=("device", gpu_plan.DEVICE, True)),
               threading.Thread(target=side, args=("deviceless", DESCRIBED, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def meta(both: dict) -> dict:
    """What the two sides ran with, and the GPU."""
    return {"date": _dt.date.today().isoformat(), "gpu": gpu_info(),
            "described_target": DESCRIBED, "device_side": both["device"][1],
            "deviceless_side": both["deviceless"][1]}


def measure(rows: list, workers: int, budget: float) -> dict:
    """Both compilations of every stored oracle row (see :func:`compile_both`)."""
    both = compile_both(lambda target: jobs(rows, target), workers, budget)
    (device, _), (deviceless, _) = both["device"], both["deviceless"]
    result_rows = []
    for i, row in enumerate(rows):
        result_rows.append({
            "fixture": row["fixture"], "model": row["model"], "batch": row["batch"],
            "mode": row["mode"], "optimizer": row.get("optimizer"), "params": row.get("params"),
            "device": _plan(device, i), "deviceless": _plan(deviceless, i),
            "oracle_peak": row["plan"]["peak"], "memlint_peak": row["memlint"]["peak"]})
    return {"meta": {**meta(both),
                     "oracle_versions": gpu_plan.load()["meta"].get("versions")},
            "rows": result_rows}


def refresh_memlint(data: dict, stored: dict) -> int:
    """Set each row's ``memlint_peak`` to the stored oracle row's memlint side (refreshed by
    ``python -m harness.gpu_plan --refresh-memlint``), keeping the peak memlint gave when the
    plans were made as ``memlint_peak_at_run``.  Returns how many rows changed."""
    today = {(r["fixture"], r["model"], r["batch"], r["mode"]): r for r in oracle_rows(stored)}
    changed = 0
    for row in data["rows"]:
        now = today.get((row["fixture"], row["model"], row["batch"], row["mode"]))
        peak = ((now or {}).get("memlint") or {}).get("peak")
        if peak is None:
            continue
        row.setdefault("memlint_peak_at_run", row.get("memlint_peak"))
        if row.get("memlint_peak") != peak:
            row["memlint_peak"] = peak
            changed += 1
    return changed


def save(data: dict, prefix: str, folder: Path) -> Path:
    """``<folder>/<prefix>-<device>-<date>.json``, without local paths."""
    path = output_path(data["meta"]["gpu"]["device"], False, folder)
    path = path.with_name(f"{prefix}-" + path.name.replace(".jsonl", ".json"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(gpu_plan.without_local_paths(json.dumps(data, indent=1)) + "\n")
    return path


def _median(values, fmt="{:+.1%}") -> str:
    return fmt.format(statistics.median(values)) if values else "-"


def table(data: dict) -> str:
    """Markdown: per row kind, the device's plans against the deviceless ones (same JAX), the
    stored oracle's (its JAX) and memlint; then each row whose device plan differs by more
    than 1% from the stored oracle, with the cuDNN kernels it runs."""
    gpu, side = data["meta"]["gpu"], data["meta"]["device_side"]
    lines = [f"Device: {gpu.get('device')}, driver {gpu.get('driver')}; JAX "
             f"{(side.get('versions') or {}).get('jax')}, Keras "
             f"{(side.get('versions') or {}).get('keras')}; code paths "
             f"{side.get('code_paths')}; stored oracle: JAX "
             f"{(data['meta'].get('oracle_versions') or {}).get('jax')}, described "
             f"{data['meta']['described_target']}.", "",
             "| rows | compiled on the device | vs deviceless, same JAX (median) | vs stored "
             "oracle: median | max | larger by >1% | memlint vs device plan: median abs. | "
             "under by >5% |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    detail = []
    for batch, mode in ORDER:
        rows = [r for r in data["rows"] if r["batch"] == batch and r["mode"] == mode]
        done = [r for r in rows if "plan" in r["device"]]
        same = [(r["device"]["plan"]["peak"] - r["deviceless"]["plan"]["peak"])
                / r["deviceless"]["plan"]["peak"] for r in done if "plan" in r["deviceless"]]
        oracle = [(r["device"]["plan"]["peak"] - r["oracle_peak"]) / r["oracle_peak"]
                  for r in done]
        ours = [(r["memlint_peak"] - r["device"]["plan"]["peak"]) / r["device"]["plan"]["peak"]
                for r in done]
        lines.append(f"| {mode} b{batch} ({len(rows)}) | {len(done)} | {_median(same)} | "
                     f"{_median(oracle)} | "
                     + (f"{max(oracle, key=abs):+.1%}" if oracle else "-")
                     + f" | {sum(d > 0.01 for d in oracle)} | "
                     f"{_median([abs(e) for e in ours], '{:.1%}')} | "
                     f"{sum(e < -0.05 for e in ours)} |")
        for r, d, e in zip(done, oracle, ours):
            if abs(d) > 0.01:
                cudnn = sorted(k.replace("__cudnn$", "") for k in r["device"].get("kernels", {})
                               if "cudnn" in k)
                detail.append(f"| {r['fixture'].removeprefix('fixtures/')}::{r['model']} | "
                              f"{mode} b{batch} | {r['oracle_peak']:,} | "
                              f"{r['device']['plan']['peak']:,} | {d:+.1%} | "
                              f"{r['device'].get('conv_scratch') or 0:,} | "
                              f"{', '.join(cudnn) or '-'} | {e:+.1%} |")
    if detail:
        lines += ["", "| model | step | stored oracle plan | device plan | device vs oracle | "
                  "cuDNN scratch in the device plan | cuDNN kernels | memlint vs device |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |"] + detail
    return "\n".join(lines)


def cli(argv, name: str, doc: str, run, render, budget: float, workers: int,
        refresh=None) -> int:
    """The command line both GPU-side tools share: ``--table FILE`` prints a stored file's
    table (``render``); ``--refresh-memlint FILE`` (where ``refresh(data)`` is given) sets a
    stored file's memlint side to today's; otherwise, on a GPU, ``run(args)`` makes the
    data, which is saved as ``<name>-<device>-<date>.json`` in ``--out-dir`` and printed."""
    parser = argparse.ArgumentParser(prog=f"python -m harness.{name.replace('-', '_')}",
                                     description=doc.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "data" / "measurements")
    parser.add_argument("--time-budget", type=float, default=budget)
    parser.add_argument("--workers", type=int, default=workers, help="per side")
    parser.add_argument("--limit", type=int, default=0, help="only the first N configurations")
    parser.add_argument("--table", type=Path, help="print the table of a stored file")
    if refresh is not None:
        parser.add_argument("--refresh-memlint", type=Path, metavar="FILE",
                            help="set a stored file's memlint side to today's")
    args = parser.parse_args(argv)
    if args.table:
        print(render(json.loads(args.table.read_text())))
        return 0
    if getattr(args, "refresh_memlint", None):
        data = json.loads(args.refresh_memlint.read_text())
        changed = refresh(data)
        args.refresh_memlint.write_text(json.dumps(data, indent=1) + "\n")
        print(f"[{name}] {args.refresh_memlint}: {changed} rows changed")
        return 0
    if not gpu_info():
        print(f"{parser.prog}: no NVIDIA GPU here (nvidia-smi found none)", file=sys.stderr)
        return 2
    data = run(args)
    path = save(data, name, args.out_dir)
    print(render(data))
    print(f"[{name}] {path}")
    return 0


def main(argv=None) -> int:
    def run(args):
        rows = oracle_rows(gpu_plan.load())
        return measure(rows[:args.limit] if args.limit else rows, args.workers,
                       args.time_budget)

    return cli(argv, "device-plans", __doc__, run, table, budget=300, workers=4,
               refresh=lambda data: refresh_memlint(data, gpu_plan.load()))


if __name__ == "__main__":
    raise SystemExit(main())
