"""The step oracles' common driver: for each fixture's largest model (the GPU-plan matrix's
base rows) at two batch sizes, a Keras 3 train step is run with a backend on the CPU and its
memory measured by that backend's method (a :class:`Spec`: ``harness/torch_step.py``, the
live tensors of an eager PyTorch step; ``harness/tf_step.py``, the BFC allocator's peak of a
TensorFlow graph-mode step), stored beside memlint's estimate under the matching profile.
Harness and tests only: memlint never imports this.

Each model runs in a process forked from a child that imported Keras with the backend (and
nothing run yet): every fixture starts from the same state whatever ran before it (fixtures
change global settings such as ``image_data_format``), and a crash loses only that model.

Commands (``python -m harness.torch_step ...`` / ``python -m harness.tf_step ...``):

* ``--regenerate``: measure the whole matrix in child processes and rewrite the data file;
* ``--refresh-memlint``: recompute only memlint's side of the stored rows (seconds);
* ``--update``: measure only the rows new to the matrix (a new fixture, or another model
  now a fixture's largest), drop the rows no longer in it, keep the others;
* ``--retry-failed``: measure the stored rows that failed again, keep the others;
* ``--table``: the comparison (Markdown) from the stored data;
* ``--sample N``: measure today's rotating sample of N stored rows again and compare;
* ``--tiny``: the backend's hand-checkable case, as JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script (the child) as well as with -m
    sys.path.insert(0, str(ROOT))

from memlint.memory.estimate import TORCH_CUBLAS_WORKSPACES  # noqa: E402

BATCHES = (4, 32)
ROUNDING = "allocator rounding"  # memlint's part for the allocator's rounding
# memlint's parts a CPU run cannot hold: the GPU allocator's rounding, cuBLAS's workspaces
NOT_ON_CPU = (ROUNDING, TORCH_CUBLAS_WORKSPACES)
JOB_TIMEOUT = 600  # seconds per model (both batches), in the child
BEYOND = 0.20


@dataclass(frozen=True)
class Spec:
    """One backend's oracle: where its data lives, how its child runs, what it compares."""

    name: str  # the backend, as KERAS_BACKEND names it
    module: str  # the module with ``child_setup``, ``measure_model`` and ``tiny``
    data: Path
    profile: str  # memlint's profile compared with it
    exact: bool  # compare memlint's parts without the allocator's rounding (no allocator)
    env: dict  # environment of the child, besides KERAS_BACKEND
    matrix: str  # what is measured, in words
    method: str  # how, in words
    versions: tuple = ("keras", "numpy")  # packages whose versions are stored
    parts_header: str = ""  # the table's column of the oracle's parts at its peak
    parts: Callable = field(default=lambda row: {})  # the oracle's parts at its peak
    job_timeout: int = JOB_TIMEOUT  # seconds per model (both batches)

    @property
    def regenerate(self) -> str:
        return f"python -m {self.module} --regenerate"

    @property
    def update(self) -> str:
        return f"python -m {self.module} --update"

    @property
    def refresh(self) -> str:
        return f"python -m {self.module} --refresh-memlint"


def today() -> _dt.date:
    return _dt.date.today()


# --- the child process ----------------------------------------------------------------------

def _versions(spec: Spec) -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in spec.versions:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _run_job(spec: Spec, job: dict):
    """Yield one result per batch of ``job``: build the fixture's model under float32, compile
    it with its own optimizer, measure a train step at each batch."""
    from harness.fixture_exec import FixtureError
    from harness.keras_step import fixture_model

    measure = importlib.import_module(spec.module).measure_model

    def failed(message, batches=None):
        for batch in batches or job["batches"]:
            yield {"job": job["id"], "batch": batch, "error": message[:2000]}

    try:
        model, name, options, policy, loss_scale = fixture_model(
            ROOT / job["file"], job["model"], "float32", None)
    except FixtureError as exc:
        yield from failed(str(exc))
        return
    except Exception as exc:  # noqa: BLE001
        yield from failed(f"{type(exc).__name__}: {exc}")
        return
    try:
        if model.jit_compile:
            raise RuntimeError("jit_compile resolved to True: the step would be XLA's")
    except Exception as exc:  # noqa: BLE001
        yield from failed(f"{type(exc).__name__}: {exc}")
        return
    for batch in job["batches"]:
        out = {"job": job["id"], "batch": batch, "optimizer": name,
               "optimizer_options": options, "dtype_policy": policy,
               "loss_scale": loss_scale}
        started = time.perf_counter()
        try:
            out["oracle"] = measure(model, batch, job.get("input_shapes"))
        except Exception as exc:  # noqa: BLE001
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["seconds"] = round(time.perf_counter() - started, 2)
        yield out


def child_env(spec: Spec) -> dict:
    return dict(os.environ, KERAS_BACKEND=spec.name, CUDA_VISIBLE_DEVICES="",
                JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
                PYTHONPATH=str(ROOT), PYTHONHASHSEED="0", **spec.env)


def child_main(spec: Spec, tiny_only: bool = False) -> None:
    """stdin: one job a line, ``{"id", "file", "model", "input_shapes", "batches"}``, the next
    sent when the last is done; stdout: one JSON object a line, first ``{"meta": ...}``, then
    per job one result per batch and ``{"done": id, "exit": status}``, each flushed as it
    comes.  Each job runs in a process forked from this one (module docstring)."""
    if os.environ.get("KERAS_BACKEND") != spec.name or "keras" in sys.modules:
        raise SystemExit(f"run the child with KERAS_BACKEND={spec.name}, before keras is "
                         "imported")
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the fixtures or Keras print goes to stderr
    backend = importlib.import_module(spec.module)
    meta = backend.child_setup()
    import keras  # with the backend above

    if not tiny_only:  # a third of the fixtures import it: once here, not in every job
        try:
            importlib.import_module("tensorflow")
        except ImportError:
            pass

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    if tiny_only:
        for sizes in json.load(sys.stdin):
            emit(backend.tiny(**sizes))
        return
    emit({"meta": {"versions": _versions(spec), "backend": keras.backend.backend(), **meta}})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        print(f"[{spec.module}] {job['file']}::{job['model']} {job['batches']}",
              file=sys.stderr, flush=True)
        pid = os.fork()
        if pid == 0:  # the job's own process
            status = 0
            try:
                for result in _run_job(spec, job):
                    emit(result)
            except BaseException:  # noqa: BLE001 - reported through the exit status
                import traceback
                traceback.print_exc()
                status = 1
            finally:
                sys.stderr.flush()
                out.flush()
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        emit({"done": job["id"], "exit": os.waitstatus_to_exitcode(status)})


def run_tiny(spec: Spec, sizes=({},)) -> list:
    """The backend's ``tiny`` case for each dict of ``sizes``, in one child process (Keras's
    backend is fixed when it is imported)."""
    proc = subprocess.run([sys.executable, "-m", spec.module, "--child-tiny"],
                          input=json.dumps(list(sizes)), capture_output=True, text=True,
                          env=child_env(spec), cwd=ROOT, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the tiny case failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]

# --- the driver -----------------------------------------------------------------------------

class _Worker:
    """One child process measuring the jobs it is sent, one at a time."""

    def __init__(self, spec: Spec, logdir: Path, number: int):
        self.errfile = (logdir / f"child-{number}.log").open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", spec.module, "--child"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errfile, cwd=ROOT, env=child_env(spec),
                                     start_new_session=True)  # killed with its job's process
        self.pending = b""
        self.job = None
        self.since = time.monotonic()

    def send(self, job) -> None:
        self.job, self.since = job, time.monotonic()
        if job is None:
            self.proc.stdin.close()
            return
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self) -> list:
        """Complete lines the child wrote since the last call ([] at none; None at EOF)."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.pending += chunk
        *done, self.pending = self.pending.split(b"\n")
        return [json.loads(d) for d in done if d.strip()]

    def kill(self) -> None:
        """The child and the job process it forked."""
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def tail(self) -> str:
        self.errfile.flush()
        return Path(self.errfile.name).read_text(errors="replace")[-300:]


def run_jobs(spec: Spec, jobs: list, workers: int = 2, log=None) -> tuple:
    """Run ``jobs`` in ``workers`` child processes, each sent the next job (largest first)
    when it finishes one.  Returns ({job id: [results]}, child meta).  A child that dies or
    runs out of time (``spec.job_timeout`` per job) loses only the job it was on (an error)
    and is replaced."""
    import selectors

    queue = sorted(jobs, key=lambda j: -j.get("cost", 0))
    results: dict = {}
    meta: dict = {}
    logdir = Path(tempfile.mkdtemp(prefix=f"{spec.name}_step_"))
    selector = selectors.DefaultSelector()
    count = failures = finished = 0

    def start():
        nonlocal count
        count += 1
        worker = _Worker(spec, logdir, count)
        selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
        worker.send(queue.pop(0) if queue else None)

    def missing(job, why, tail):
        """The job's batches with no result become errors."""
        have = {r["batch"] for r in results.get(job["id"], [])}
        for batch in job["batches"]:
            if batch not in have:
                results.setdefault(job["id"], []).append(
                    {"job": job["id"], "batch": batch, "error": f"{why}: {tail}"})

    def lose(worker, why):
        """The child is gone: its job's missing batches become errors."""
        nonlocal failures, finished
        failures += 1
        selector.unregister(worker.proc.stdout)
        worker.proc.wait()
        job, tail = worker.job, worker.tail()
        worker.errfile.close()
        if job is not None:
            missing(job, why, tail)
            finished += 1
        if log:
            log(f"child {worker.proc.pid} {why}; log {worker.errfile.name}")
        if queue:
            start()

    for _ in range(min(workers, len(queue))):
        start()
    while selector.get_map():
        for key, _ in selector.select(timeout=5):
            worker = key.data
            lines = worker.lines()
            if lines is None:  # EOF: done (stdin closed) or died
                if worker.job is None and worker.proc.wait() == 0:
                    selector.unregister(worker.proc.stdout)
                    worker.errfile.close()
                else:
                    lose(worker, f"child process died (exit {worker.proc.wait()})")
                continue
            for item in lines:
                if "meta" in item:
                    meta.update(item["meta"])
                elif "job" in item:
                    results.setdefault(item["job"], []).append(item)
                elif "done" in item:
                    finished += 1
                    if item.get("exit"):
                        failures += 1
                        missing(worker.job, f"the job's process died (exit {item['exit']})",
                                worker.tail())
                    if log:
                        log(f"{finished}/{len(jobs)} models done")
                    worker.send(queue.pop(0) if queue else None)
        for key in list(selector.get_map().values()):
            worker = key.data
            if worker.job is not None and time.monotonic() - worker.since > spec.job_timeout:
                worker.kill()
                lose(worker, f"timed out after {spec.job_timeout} s")
    if not failures:
        import shutil
        shutil.rmtree(logdir, ignore_errors=True)
    return results, meta


# --- the matrix -----------------------------------------------------------------------------

def _graphs(paths=None) -> dict:
    from harness import gpu_plan

    return gpu_plan._graphs(paths)


def matrix(graphs: dict) -> list:
    """Rows without results: the GPU-plan oracle's base configurations (each fixture's
    largest model, own optimizer, float32) at :data:`BATCHES`, once each (no target)."""
    from harness import gpu_plan

    rows, seen = [], set()
    for row in gpu_plan.matrix(graphs):
        key = (row["fixture"], row["model"], row["batch"])
        if row["part"] != "base" or row["mode"] != "train" or row["batch"] not in BATCHES \
                or key in seen:
            continue
        seen.add(key)
        rows.append({"fixture": row["fixture"], "model": row["model"], "batch": row["batch"],
                     "optimizer_key": row["optimizer_key"],
                     "precision_requested": row["precision_requested"]})
    return rows


def row_key(row: dict) -> tuple:
    return row["fixture"], row["model"], row["batch"]


def jobs_for(rows: list, graphs: dict) -> tuple:
    """(jobs, {job id: [row indices]}): one job per Keras source actually executed (a
    fixture's ``# oracle-twin:``) and model, measuring every batch its rows need."""
    from harness import gpu_plan, proxy

    groups: dict = {}
    for index, row in enumerate(rows):
        source = str(proxy.keras_source(ROOT / row["fixture"]).relative_to(ROOT))
        groups.setdefault((source, row["model"]), []).append(index)
    jobs, members = [], {}
    for number, ((source, model), indices) in enumerate(sorted(groups.items())):
        graph = graphs.get((rows[indices[0]]["fixture"], model))
        jobs.append({"id": number, "file": source, "model": model,
                     "input_shapes": gpu_plan._input_shapes(graph) if graph else None,
                     "batches": sorted({rows[i]["batch"] for i in indices}),
                     # the driver starts the largest first (the run's tail is then short)
                     "cost": graph.params if graph else rows[indices[0]].get("params", 0)})
        members[number] = indices
    return jobs, members


def fill(rows: list, jobs: list, members: dict, results: dict) -> None:
    """Copy each batch's result into the rows it serves."""
    from harness import gpu_plan

    for job in jobs:
        by_batch = {r["batch"]: r for r in results.get(job["id"], [])}
        for index in members[job["id"]]:
            row = rows[index]
            result = by_batch.get(row["batch"])
            if result is None:
                row["error"] = "no result from the child process"
                continue
            row["keras_source"] = job["file"]
            row["source_sha"] = gpu_plan.source_sha(row["fixture"])
            for key in ("optimizer", "optimizer_options", "dtype_policy", "loss_scale",
                        "oracle", "seconds", "error"):
                if key in result:
                    row[key] = result[key]


def measure_rows(spec: Spec, rows: list, graphs: dict, workers: int = 2, log=None) -> tuple:
    """Measure ``rows`` (filled in place); returns the children's meta."""
    jobs, members = jobs_for(rows, graphs)
    for job in jobs:  # stored rows carry their input shapes (no memlint needed to re-measure)
        first = rows[members[job["id"]][0]]
        if first.get("input_shapes") is not None:
            job["input_shapes"] = first["input_shapes"]
    if log:
        log(f"{len(rows)} rows, {len(jobs)} model builds")
    results, meta = run_jobs(spec, jobs, workers=workers, log=log)
    fill(rows, jobs, members, results)
    return meta


# --- memlint's side -------------------------------------------------------------------------

def memlint_side(spec: Spec, graph, row: dict) -> dict:
    """memlint's breakdown under the spec's profile for the row's batch, optimizer and
    precision: ``peak``, what the oracle is compared with (with ``spec.exact``, its parts
    without the allocator's rounding: a CPU run has no such allocator), and the rounded peak
    memlint reports."""
    from harness import proxy

    breakdown = proxy.memlint_estimate(graph, {
        "batch": row["batch"], "mode": "train", "optimizer": row["optimizer"],
        "optimizer_options": row.get("optimizer_options") or {},
        "dtype_policy": row["dtype_policy"]}, spec.profile)
    parts = {p.name: p.bytes for p in breakdown.parts}
    peak = breakdown.peak - sum(parts.get(k, 0) for k in NOT_ON_CPU) if spec.exact \
        else breakdown.peak
    return {"peak": peak, "peak_rounded": breakdown.peak,
            "complete": breakdown.complete, "phase": breakdown.peak_at.get("phase"),
            "layer": breakdown.peak_at.get("layer"), "parts": parts}


def add_memlint(spec: Spec, rows: list, graphs: dict) -> None:
    from harness import gpu_plan

    gpu_plan.attach_memlint(rows, graphs, "oracle",
                            lambda graph, row: memlint_side(spec, graph, row))


# --- storing --------------------------------------------------------------------------------

def save(data: dict, path: Path) -> None:
    """One row per line, meta first, no local paths (as the GPU-plan data)."""
    from harness import gpu_plan

    gpu_plan.save(data, path)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def ok_rows(rows: list) -> list:
    return [r for r in rows if "oracle" in r and r.get("relative_error") is not None]


def sample(rows: list, count: int, day: _dt.date | None = None,
           max_peak: int | None = None) -> list:
    """``count`` measured rows chosen by the date (the same rows all day), at most one per
    fixture; with ``max_peak``, only rows whose oracle peak is at most that many bytes (the
    work of measuring a step again grows with what it holds)."""
    rng = random.Random((day or today()).toordinal())
    ok = [r for r in rows if "oracle" in r and "error" not in r
          and (max_peak is None or r["oracle"]["peak"] <= max_peak)]
    rng.shuffle(ok)
    chosen, fixtures = [], set()
    for row in ok:
        if row["fixture"] not in fixtures:
            chosen.append(row)
            fixtures.add(row["fixture"])
        if len(chosen) == count:
            break
    return chosen


def configuration(row: dict) -> dict:
    """A fresh copy of what ``row`` was measured under (no result, no memlint side)."""
    return {k: row[k] for k in ("fixture", "model", "params", "batch", "optimizer_key",
                                "precision_requested", "input_shapes") if k in row}


def remeasure(spec: Spec, rows: list, workers: int = 2) -> list:
    """``rows`` measured again (fresh copies; memlint not needed)."""
    fresh = [configuration(r) for r in rows]
    measure_rows(spec, fresh, {}, workers=workers)
    return fresh


# --- the table ------------------------------------------------------------------------------


def summary(rows: list) -> dict:
    from harness.gpu_plan_table import UNDER, percentile

    rows = ok_rows(rows)
    errors = [r["relative_error"] for r in rows]
    absolute = [abs(e) for e in errors]
    if not rows:
        return {"n": 0}
    return {"n": len(rows), "median": statistics.median(absolute),
            "p90": percentile(absolute, 0.9), "max": max(absolute),
            "signed_median": statistics.median(errors),
            "within5": sum(a <= 0.05 for a in absolute),
            "under5": sum(e < UNDER for e in errors),
            "beyond20": sum(a > BEYOND for a in absolute)}


def figures(data: dict) -> dict:
    """``{"all": summary, "batch 4": ..., "batch 32": ...}`` over the measured rows."""
    rows = data["rows"]
    out = {"all": summary(rows)}
    for batch in sorted({r["batch"] for r in rows}):
        out[f"batch {batch}"] = summary([r for r in rows if r["batch"] == batch])
    return out


def _pct(value) -> str:
    return f"{value:+.1%}" if value < 0 else f"{value:.1%}"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f}"


def markdown(spec: Spec, data: dict) -> str:
    from harness.gpu_plan_table import failure_lines

    meta, rows = data["meta"], data["rows"]
    v = meta.get("versions") or {}
    compared = (f"its parts without the {' and the '.join(NOT_ON_CPU)}" if spec.exact
                else "its peak as reported")
    out = [f"{spec.name} step oracle of {meta.get('date')} ({spec.name} "
           f"{v.get(spec.versions[0])}, keras {v.get('keras')}, CPU) against memlint's "
           f"`{spec.profile}` profile ({compared}) as of "
           f"{meta.get('memlint_refreshed') or meta.get('date')}.", "",
           "Error = (memlint - oracle peak) / oracle peak.", "",
           "| rows | n | median abs. error | 90th pct | max | within 5% | under by >5% | "
           "beyond 20% | signed median |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, s in figures(data).items():
        if not s.get("n"):
            continue
        out.append(f"| {label} | {s['n']} | {_pct(s['median'])} | {_pct(s['p90'])} | "
                   f"{_pct(s['max'])} | {s['within5']} | {s['under5']} | {s['beyond20']} | "
                   f"{_pct(s['signed_median'])} |")
    out += ["", "#### The 10 largest errors (MiB; oracle at its peak / memlint's parts)", "",
            "| fixture::model | batch | oracle peak | phase | memlint | error | "
            f"{spec.parts_header} | memlint parts |",
            "| --- | ---: | ---: | --- | ---: | ---: | --- | --- |"]
    worst = sorted(ok_rows(rows), key=lambda r: -abs(r["relative_error"]))[:10]
    for r in worst:
        o = spec.parts(r)
        parts = ", ".join(f"{k} {_mib(b)}" for k, b in r["memlint"]["parts"].items()
                          if b and (k not in NOT_ON_CPU or not spec.exact))
        out.append(f"| {r['fixture'].removeprefix('fixtures/')}::{r['model']} | {r['batch']} | "
                   f"{_mib(r['oracle']['peak'])} | {r['oracle'].get('peak_phase', '')} | "
                   f"{_mib(r['memlint']['peak'])} | {_pct(r['relative_error'])} | "
                   f"{', '.join(_mib(b) for b in o.values())} | {parts} |")
    out += failure_lines(rows, f"did not run under the {spec.name} backend (first line of the "
                               "error, per model)")
    return "\n".join(out)


# --- commands -------------------------------------------------------------------------------

def _describe(rows: list, graphs: dict) -> None:
    """Each new row's parameter count and input shapes, from memlint's graph."""
    from harness import gpu_plan

    for row in rows:
        graph = graphs[(row["fixture"], row["model"])]
        row["params"] = graph.params
        if gpu_plan._input_shapes(graph):
            row["input_shapes"] = gpu_plan._input_shapes(graph)


def generate(spec: Spec, workers: int = 2, limit: int = 0, log=print) -> dict:
    started = time.monotonic()
    graphs = _graphs()
    from harness import gpu_plan

    rows = gpu_plan.first_fixtures(matrix(graphs), limit)
    _describe(rows, graphs)
    child_meta = measure_rows(spec, rows, graphs, workers=workers, log=log)
    add_memlint(spec, rows, graphs)
    compared = (f"memlint's parts without {' and '.join(repr(k) for k in NOT_ON_CPU)}"
                if spec.exact else "memlint's peak")
    meta = {"date": today().isoformat(), "seconds": round(time.monotonic() - started, 1),
            "workers": workers, "cpus": os.cpu_count(),
            "versions": child_meta.get("versions"), "backend": child_meta.get("backend"),
            "child": {k: v for k, v in child_meta.items() if k not in ("versions", "backend")},
            "matrix": spec.matrix, "method": spec.method, "memlint_profile": spec.profile,
            "relative_error": f"(memlint - oracle peak) / oracle peak; memlint = {compared}",
            "rows": len(rows), "measured": sum("oracle" in r for r in rows),
            "failed": sum("error" in r for r in rows),
            "regenerate": spec.regenerate, "refresh_memlint": spec.refresh}
    data = {"meta": meta, "rows": rows}
    meta["figures"] = figures(data)
    return data


def retry_failed(spec: Spec, path: Path | None = None, workers: int = 2,
                 log=print) -> dict:
    """The stored data with the rows that failed measured again (after a change to the
    harness); the others are kept as they are, and so is a failed row that fails again
    (its stored reason stays: a broken environment does not overwrite it)."""
    data = load(path or spec.data)
    graphs = _graphs()
    failed = [i for i, r in enumerate(data["rows"]) if "error" in r]
    fresh = [configuration(data["rows"][i]) for i in failed]
    if fresh:
        measure_rows(spec, fresh, graphs, workers=workers, log=log)
        for i, row in zip(failed, fresh):
            if "oracle" in row:
                data["rows"][i] = row
    add_memlint(spec, data["rows"], graphs)
    meta = data["meta"]
    meta["retried"] = {"date": today().isoformat(), "rows": len(fresh),
                       "now_measured": sum("oracle" in r for r in fresh)}
    meta["measured"] = sum("oracle" in r for r in data["rows"])
    meta["failed"] = sum("error" in r for r in data["rows"])
    meta["figures"] = figures(data)
    return data


def update(spec: Spec, path: Path | None = None, workers: int = 2, log=print) -> dict:
    """The stored data brought to today's matrix: rows new to it (a new fixture, or another
    model now a fixture's largest) measured, rows no longer in it dropped, the rest kept."""
    data = load(path or spec.data)
    graphs = _graphs()
    stored = {row_key(r): r for r in data["rows"]}
    wanted = matrix(graphs)
    fresh = [row for row in wanted if row_key(row) not in stored]
    _describe(fresh, graphs)
    if fresh:
        measure_rows(spec, fresh, graphs, workers=workers, log=log)
    new = {row_key(r): r for r in fresh}
    rows = [stored.get(row_key(row)) or new[row_key(row)] for row in wanted]
    add_memlint(spec, rows, graphs)
    data["rows"] = rows
    meta = data["meta"]
    meta["updated"] = {"date": today().isoformat(), "new_rows": len(fresh),
                       "dropped_rows": len(set(stored) - {row_key(r) for r in wanted})}
    meta["rows"] = len(rows)
    meta["measured"] = sum("oracle" in r for r in rows)
    meta["failed"] = sum("error" in r for r in rows)
    meta["figures"] = figures(data)
    return data


def refresh_memlint(spec: Spec, path: Path | None = None) -> dict:
    data = load(path or spec.data)
    add_memlint(spec, data["rows"], _graphs())
    data["meta"]["memlint_refreshed"] = today().isoformat()
    data["meta"]["figures"] = figures(data)
    return data


def main(spec: Spec, argv=None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {spec.module}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--child-tiny", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--regenerate", action="store_true",
                       help="measure the whole matrix and rewrite the data file")
    group.add_argument("--refresh-memlint", action="store_true",
                       help="recompute memlint's side of the stored rows only")
    group.add_argument("--update", action="store_true",
                       help="measure the rows new to the matrix, drop those no longer in it, "
                            "keep the others")
    group.add_argument("--retry-failed", action="store_true",
                       help="measure the stored rows that failed again (after a harness "
                            "change), keep the others")
    group.add_argument("--table", action="store_true", help="print the comparison (Markdown)")
    group.add_argument("--sample", type=int, metavar="N",
                       help="measure today's rotating sample of N rows again and compare")
    group.add_argument("--tiny", action="store_true",
                       help="measure the hand-checkable case and print it")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="only the first N fixtures")
    parser.add_argument("--output", type=Path, default=spec.data)
    args = parser.parse_args(argv)
    if args.child or args.child_tiny:
        child_main(spec, tiny_only=args.child_tiny)
        return
    if args.table:
        print(markdown(spec, load(args.output)))
        return
    if args.tiny:
        print(json.dumps(run_tiny(spec), indent=1))
        return
    if args.sample:
        stored = sample(load(args.output)["rows"], args.sample)
        fresh = remeasure(spec, stored, workers=args.workers)
        for old, new in zip(stored, fresh):
            a, b = old["oracle"]["peak"], (new.get("oracle") or {}).get("peak")
            print(f"{old['fixture']}::{old['model']} b{old['batch']}: stored {a:,} now "
                  f"{b if b is None else format(b, ',')} {'same' if a == b else 'DIFFERENT'} "
                  f"{new.get('error', '')[:200]}")
        return
    started = time.monotonic()
    stamp = lambda m: print(f"[{time.monotonic() - started:7.1f}s] {m}", flush=True)  # noqa: E731
    if args.retry_failed:
        data = retry_failed(spec, args.output, args.workers, stamp)
    elif args.refresh_memlint:
        data = refresh_memlint(spec, args.output)
    elif args.update:
        data = update(spec, args.output, args.workers, stamp)
    else:
        data = generate(spec, args.workers, args.limit, stamp)
    save(data, args.output)
    stamp(f"wrote {args.output}")
    print(markdown(spec, data))
