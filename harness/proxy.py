"""The CPU proxy: XLA's memory plan of every fixture's compiled Keras train step (JAX on the
CPU, nothing run) next to memlint's XLA-profile estimate of the same model, batch and
optimizer.  Used by ``tests/test_xla_proxy.py``; ``python -m harness.proxy`` prints the table
and rewrites ``tests/data/xla_proxy.json``."""

from __future__ import annotations

import json
import re
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from harness.estimates import with_harness_loss

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
DATA = ROOT / "tests" / "data" / "xla_proxy.json"
BATCH = 4


def fixture_files() -> list:
    """Fixture scripts (package modules and fixtures/invalid excluded), as the oracle tier."""
    return sorted(p for p in FIXTURES.rglob("*.py") if "invalid" not in p.parts
                  and not (p.parent / "__init__.py").exists())


_TWIN = re.compile(r"^#\s*oracle-twin:\s*(\S+)", re.MULTILINE)


def keras_source(path: Path) -> Path:
    """The file real Keras 3 executes for a fixture: its ``# oracle-twin:`` when it names
    one (Keras 1 spellings that Keras 3 no longer runs), else the fixture itself."""
    match = _TWIN.search(Path(path).read_text(encoding="utf-8"))
    return Path(path).parent / match.group(1) if match else Path(path)


def memlint_graphs(paths, one_per_file: bool = False) -> dict:
    """``{(relative path, variable): ModelGraph}`` for the models memlint finds (with
    ``one_per_file``, only each file's model with the most parameters)."""
    from memlint.analysis import analyze_file
    from memlint.config import Settings

    graphs = {}
    for path in paths:
        report = analyze_file(str(path), Settings())
        found = [g for g in report.models if g.variable]
        if one_per_file and found:
            found = [max(found, key=lambda g: g.params)]
        for graph in found:  # sized by the data the code feeds it, as memlint estimates
            graphs[(str(Path(path).relative_to(ROOT)), graph.variable)] = graph.for_memory()
    return graphs


# XLA's LLVM back end is what takes the time on a CPU; buffer assignment (the memory plan)
# happens before it, on the HLO, and does not depend on these flags.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def run_plans(paths, batch: int = BATCH, mode: str = "train", input_shapes=None,
              timeout: int = 900, workers: int = 0) -> dict:
    """Run ``harness/xla_plan.py`` over ``paths`` in ``workers`` subprocesses at once (one
    per CPU by default), each compiling its share of the fixtures, and merge the answers."""
    workers = workers or min(os.cpu_count() or 1, 4)
    shares = [[str(p) for p in paths][i::workers] for i in range(workers)]
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(ROOT), XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " +
                                               FAST_COMPILE).strip())
    procs = []
    for share in (s for s in shares if s):
        request = {"files": share, "batch": batch, "mode": mode,
                   "input_shapes": input_shapes or {}}
        proc = subprocess.Popen([sys.executable, str(ROOT / "harness" / "xla_plan.py")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        procs.append((proc, json.dumps(request)))
    merged: dict = {"results": {}}
    for proc, request in procs:
        out, err = proc.communicate(request, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"xla_plan.py failed:\n{err[-4000:]}")
        answer = json.loads(out)
        merged["results"].update(answer.pop("results"))
        merged.update(answer)
    return merged


def memlint_estimate(graph, plan: dict, profile_name: str = "xla", compute_capability=None):
    """memlint's breakdown for the configuration XLA planned (batch, mode, optimizer), for a
    GPU of ``compute_capability`` where one is named."""
    from memlint.ir import OptimizerSpec
    from memlint.memory import estimate
    from memlint.memory.profiles import get_profile

    setup = replace(graph.setup, batch_size=plan["batch"], mode=plan["mode"],
                    optimizer=OptimizerSpec(plan["optimizer"], plan["optimizer_options"],
                                            "harness"),
                    dtype_policy=plan.get("dtype_policy", graph.setup.dtype_policy))
    import inspect

    setup = with_harness_loss(setup)

    # memlint before v2 (the stored baseline, run from its commit) takes no GPU
    parameters = inspect.signature(estimate).parameters
    extra = {} if compute_capability is None or "compute_capability" not in parameters \
        else {"compute_capability": compute_capability}
    if "gpu_code_paths" in parameters:  # plans compiled without a device: Keras's generic
        extra["gpu_code_paths"] = False  # paths (the scan loop, not cuDNN's recurrences)
    return estimate(graph, setup, profile=get_profile(profile_name), **extra)


def rows(batch: int = BATCH, paths=None, one_per_file: bool = True) -> tuple:
    """(rows, run metadata): one row per model (each fixture's largest, by default), with
    XLA's planned peak, memlint's and the relative error, or the reason it did not build."""
    paths = paths or fixture_files()
    graphs = memlint_graphs(paths, one_per_file)
    twins = {p: keras_source(ROOT / p) for p in {p for p, _ in graphs}}
    shapes = {f"{twins[p]}::{v}": [list(s[1:]) for s in g.input_shapes]
              for (p, v), g in graphs.items() if g.input_shapes}
    answer = run_plans(sorted(set(twins.values())), batch, input_shapes=shapes)
    out = []
    for (path, variable), graph in sorted(graphs.items()):
        built = answer["results"].get(str(twins[path]), {})
        plan = built.get(variable)
        if not plan or "error" in plan:
            reason = (plan or {}).get("error") or built.get("__error__") or \
                "not built by Keras (no module-level model of that name)"
            out.append({"fixture": path, "model": variable, "error": reason})
            continue
        breakdown = memlint_estimate(graph, plan)
        error = (breakdown.peak - plan["peak"]) / plan["peak"] if plan["peak"] else 0.0
        out.append({"fixture": path, "model": variable, "params": graph.params,
                    "batch": plan["batch"], "optimizer": plan["optimizer"],
                    "optimizer_options": plan["optimizer_options"], "mode": plan["mode"],
                    "dtype_policy": plan.get("dtype_policy", "float32"),
                    "xla_peak": plan["peak"], "xla_plan": {k: plan[k] for k in (
                        "argument", "output", "alias", "temp")},
                    "memlint_peak": breakdown.peak, "relative_error": round(error, 4),
                    "parts": {p.name: p.bytes for p in breakdown.parts}})
    meta = {k: answer[k] for k in ("jax_version", "keras_version", "platform")}
    return out, meta


def rotating_sample(paths: list, size: int, day: int) -> list:
    """``size`` of ``paths``, a different window each day (deterministic for a date), so the
    whole stored table is recompiled over the weeks while each CI run compiles a few."""
    paths = sorted(paths)
    if len(paths) <= size:
        return paths
    start = (day * size) % len(paths)
    return [paths[(start + i) % len(paths)] for i in range(size)]


def median_error(table: list) -> float:
    errors = [abs(r["relative_error"]) for r in table if "relative_error" in r]
    return statistics.median(errors) if errors else float("nan")


def row_plan(row: dict, graph) -> dict:
    """The configuration a stored row's plan was compiled for, as :func:`memlint_estimate`
    takes it (rows stored before the options were recorded use the model's own)."""
    return {"batch": row["batch"], "mode": row.get("mode", "train"),
            "optimizer": row["optimizer"],
            "optimizer_options": row.get("optimizer_options",
                                         dict(graph.setup.optimizer.options)),
            "dtype_policy": row.get("dtype_policy", "float32")}


def refresh_memlint_side() -> None:
    """Recompute memlint's figures of the stored rows (no compilation): after a change of the
    memory model, when XLA's side has not moved."""
    stored = json.loads(DATA.read_text())
    paths = sorted({ROOT / r["fixture"] for r in stored["rows"]})
    graphs = memlint_graphs(paths, one_per_file=True)
    for row in stored["rows"]:
        graph = graphs.get((row["fixture"], row["model"]))
        if "xla_peak" not in row or graph is None:
            continue
        breakdown = memlint_estimate(graph, row_plan(row, graph))
        row["memlint_peak"] = breakdown.peak
        row["relative_error"] = round((breakdown.peak - row["xla_peak"]) / row["xla_peak"], 4) \
            if row["xla_peak"] else 0.0
        row["parts"] = {p.name: p.bytes for p in breakdown.parts}
    print(f"median |error| {median_error(stored['rows']):.1%} (memlint side refreshed)")
    DATA.write_text(json.dumps(stored, indent=1) + "\n")


def main() -> None:
    if "--memlint-only" in sys.argv[1:]:
        refresh_memlint_side()
        return
    started = time.monotonic()
    table, meta = rows()
    meta["seconds"] = round(time.monotonic() - started, 1)
    meta["cpus"] = os.cpu_count()
    for r in table:
        if "error" in r:
            print(f"{r['fixture']}::{r['model']}: {r['error'][:100]}")
        else:
            print(f"{r['fixture']}::{r['model']}: xla {r['xla_peak']:,} memlint "
                  f"{r['memlint_peak']:,} ({r['relative_error']:+.1%})")
    print(f"median |error| {median_error(table):.1%} over "
          f"{sum('relative_error' in r for r in table)} models in {meta['seconds']} s")
    DATA.write_text(json.dumps({"batch": BATCH, **meta, "rows": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
