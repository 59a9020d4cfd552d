"""The torch-step oracle: the exact live-tensor peak of one Keras 3 train step run eagerly
with the PyTorch backend on the CPU, next to memlint's ``torch``-profile estimate of the same
model, batch, optimizer and precision.  Harness and tests only: memlint never imports this.

How a step is measured (in a child process with ``KERAS_BACKEND=torch``, one CPU thread):
the fixture's model is built (``harness.fixture_exec.load_model``), compiled with its own
optimizer (``harness.keras_step.compile_for``; ``jit_compile`` resolves to False on torch:
eager, no ``torch.compile``), fed a random batch made torch tensors beforehand, and trained
one step (``train_on_batch``: builds the optimizer's slots and the ``.grad`` tensors).  The
second ``train_on_batch`` on the same batch is the measured one.  Before it, every storage
alive in the process (found through ``gc``) is registered, sorted by what holds it (weights,
optimizer variables, the previous step's gradients, metric variables, batch, targets); other
tensors the fixture's objects hold (a base model's unused layers, a dataset's arrays) are
registered so that their views are not new, but not counted (``other_not_counted``);
during it a ``TorchDispatchMode`` registers the storage of every output of every ATen op the
first time it appears (views and in-place results share their input's storage: counted
once), and ``weakref.finalize`` on the storage subtracts its bytes when it is freed.
Python's cycle collector is off during the step except where the tracker runs it: before
every candidate maximum, over the objects made during the step (``gc.freeze``), so a maximum
counts only storages something still reaches (Keras's tree functions leave garbage cycles,
torch's recursive pytree helpers, that hold layer inputs until the collector runs) and the
figures are the same on every run.  The same step is then measured with the collector off
throughout (``collector_off``: the bound where no collection runs in the step).  The baseline
is what is alive when the step starts; the peak is the largest running total.
Buffers a kernel allocates and frees inside one op (oneDNN scratch) are not tensors and are
not counted; the CPU has no allocator rounding.  docs/torch-oracle.md has the comparison.

Commands (``python -m harness.torch_step ...``):

* ``--regenerate``: measure the whole matrix (``matrix()``) in child processes and rewrite
  ``tests/data/torch_steps.json``;
* ``--refresh-memlint``: recompute only memlint's side of the stored rows (seconds);
* ``--table``: the comparison (Markdown) from the stored data;
* ``--sample N``: measure today's rotating sample of N stored rows again and compare;
* ``--tiny``: the hand-checkable case (one Dense layer, SGD), as JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script (the child) as well as with -m
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "torch_steps.json"
REGENERATE = "python -m harness.torch_step --regenerate"
REFRESH = "python -m harness.torch_step --refresh-memlint"
BATCHES = (4, 32)
PROFILE = "torch"
ROUNDING = "allocator rounding"  # memlint's part for the caching allocator's 512 B blocks
JOB_TIMEOUT = 600  # seconds per model (both batches), in the child

# What holds a storage alive when the step starts (the baseline), and what the step makes.
BASELINE_KINDS = ("weights", "optimizer", "previous gradients", "metrics", "input batch",
                  "targets", "other")
STEP_KINDS = ("gradients", "forward", "loss", "backward", "update", "after")

MATRIX_DESCRIPTION = (
    "every fixture's largest model as the GPU-plan oracle takes them (harness.gpu_plan "
    "matrix(), its base rows), Keras 3 on PyTorch, eager, CPU: the train step with MSE loss "
    "on every output, the fixture's own optimizer (Adam where it compiles none), float32 (or "
    "the policy the fixture sets itself), batch 4 and 32")
METHOD = (
    "second train_on_batch on the same batch; storages alive before it registered through "
    "gc; every ATen op's output storages added when first seen (TorchDispatchMode), "
    "subtracted when freed (weakref.finalize); Python's cycle collector run before every "
    "candidate maximum (objects older than the step frozen), off otherwise; peak = largest "
    "running total of live storage bytes, baseline included; no allocator rounding; "
    "collector_off: a third step measured with the collector off throughout")


def today() -> _dt.date:
    return _dt.date.today()


# --- the measuring method ------------------------------------------------------------------

class _Entry:
    """One storage: its bytes, when it appeared and died (event numbers), what it is."""

    __slots__ = ("nbytes", "born", "died", "kind", "op", "shape", "dtype")

    def __init__(self, nbytes, born, kind, op, shape, dtype):
        self.nbytes, self.born, self.died = nbytes, born, None
        self.kind, self.op, self.shape, self.dtype = kind, op, shape, dtype


_MODE_CLASS = None


def live_tensors():
    """A new tracker (a ``TorchDispatchMode``; the class is made on first use so that this
    module imports without torch)."""
    global _MODE_CLASS
    if _MODE_CLASS is None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        class LiveTensors(TorchDispatchMode):
            """Live storage bytes: registered storages plus every op output's storage, each
            counted once, each subtracted when freed; the running maximum."""

            def __init__(self):
                super().__init__()
                self.alive: dict = {}  # data_ptr -> _Entry
                self.history: list = []
                self.current = self.peak = self.event = self.peak_event = 0
                self.uncounted = 0  # bytes of storages registered with counted=False
                self.phase_peaks: dict = {}
                self.marks: dict = {}  # event numbers of named moments
                self.phase = self.peak_phase = "forward"
                self.collect = False  # collect reference cycles before a new maximum

            def add(self, tensor, kind=None, op="", counted=True) -> None:
                if not isinstance(tensor, torch.Tensor) or tensor.is_sparse:
                    return
                try:
                    storage = tensor.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    return
                ptr, size = storage.data_ptr(), storage.nbytes()
                if not ptr or not size or ptr in self.alive:
                    return
                if not counted:  # known (its views are not new), but not in the total
                    self.uncounted += size
                    size = 0
                self.event += 1
                entry = _Entry(size, self.event, kind or self.phase, op,
                               list(tensor.shape), str(tensor.dtype).replace("torch.", ""))
                self.alive[ptr] = entry
                self.history.append(entry)
                self.current += size
                weakref.finalize(storage, self._freed, ptr, entry)
                if self.collect and self.current > min(
                        self.peak, self.phase_peaks.get(self.phase, 0)):
                    self.collect_cycles()  # a maximum counts only reachable storages
                if self.current > self.peak:
                    self.peak, self.peak_event = self.current, self.event
                    self.peak_phase = self.phase
                if self.current > self.phase_peaks.get(self.phase, 0):
                    self.phase_peaks[self.phase] = self.current

            def collect_cycles(self) -> None:
                if self.collect:
                    gc.collect()

            def _freed(self, ptr, entry) -> None:
                if self.alive.get(ptr) is entry:
                    del self.alive[ptr]
                    self.current -= entry.nbytes
                    self.event += 1
                    entry.died = self.event

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if self.phase == "forward+" and torch._C._current_autograd_node() is not None:
                    self.phase = "backward"
                for tensor in tree_flatten(out)[0]:
                    self.add(tensor, op=func.__name__)
                return out

            def alive_at(self, event: int) -> list:
                return [e for e in self.history
                        if e.born <= event and (e.died is None or e.died > event)]

        _MODE_CLASS = LiveTensors
    return _MODE_CLASS()


def _tensors(tree) -> list:
    import torch

    from keras import tree as ktree

    return [t for t in ktree.flatten(tree) if isinstance(t, torch.Tensor)]


def _values(variables) -> list:
    return [v.value for v in variables]


def _register_state(tracker, model, x, y) -> None:
    """Register every storage alive before the step, by what holds it."""
    import torch

    held = [
        ("weights", _values(model.variables)),
        ("optimizer", _values(model.optimizer.variables)),
        ("previous gradients", [v.value.grad for v in model.trainable_variables
                                if v.value.grad is not None]),
        ("metrics", _values(model.metrics_variables)),
        ("input batch", _tensors(x)),
        ("targets", _tensors(y)),
    ]
    for kind, tensors in held:
        for tensor in tensors:
            tracker.add(tensor, kind)
    for obj in gc.get_objects():  # the fixture's other objects: not the step's (docstring)
        if isinstance(obj, torch.Tensor):
            tracker.add(obj, "other", counted=False)


def measure_step(model, x, y, collect: bool = True) -> dict:
    """The live storages of one ``model.train_on_batch(x, y)`` (``x`` and ``y`` torch
    tensors; the model compiled and already trained one step on them).  ``collect``: Python's
    cycle collector runs before every candidate maximum (only what something still reaches
    counts); else it is off for the whole step (garbage cycles keep their tensors)."""
    tracker = live_tensors()
    gc.collect()
    _register_state(tracker, model, x, y)  # a function: no local keeps a tensor alive
    baseline = tracker.current
    parts = {k: sum(e.nbytes for e in tracker.alive.values() if e.kind == k)
             for k in BASELINE_KINDS if k != "other"}
    tracker.peak, tracker.peak_event = baseline, tracker.event

    # the step's phases: forward until zero_grad, then the loss, autograd's backward (the
    # dispatcher sees an autograd node), the optimizer's update, the metrics after it
    optimizer = model.optimizer
    zero_grad, apply = model.zero_grad, optimizer.apply

    def zero_grad_(*args, **kwargs):
        tracker.collect_cycles()
        tracker.marks.setdefault("forward returned", tracker.event)
        tracker.phase = "loss"
        out = zero_grad(*args, **kwargs)
        tracker.phase = "forward+"  # the loss: becomes "backward" at autograd's first node
        return out

    def apply_(*args, **kwargs):
        tracker.phase = "update"
        out = apply(*args, **kwargs)
        tracker.phase = "after"
        return out

    object.__setattr__(model, "zero_grad", zero_grad_)
    object.__setattr__(optimizer, "apply", apply_)
    # Python's collector runs only where the tracker asks (every candidate maximum), on the
    # objects made during the step (the rest frozen): deterministic, and each maximum counts
    # only storages something still reaches
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    tracker.collect = collect
    started = time.perf_counter()
    try:
        with tracker:
            model.train_on_batch(x, y)
        end = tracker.current
    finally:
        seconds = time.perf_counter() - started
        tracker.collect = False
        gc.unfreeze()
        if enabled:
            gc.enable()
        del model.__dict__["zero_grad"]
        del optimizer.__dict__["apply"]
    for entry in tracker.history:  # "forward+" was the loss's own part
        if entry.kind == "forward+":
            entry.kind = "loss"
    for variable in model.trainable_variables:  # this step's gradients, still in .grad
        grad = variable.value.grad
        if grad is not None:
            entry = tracker.alive.get(grad.untyped_storage().data_ptr())
            if entry is not None and entry.kind not in BASELINE_KINDS:
                entry.kind = "gradients"
    gc.collect()
    cyclic = end - tracker.current  # garbage cycles made since the last collection

    held = [e for e in tracker.alive_at(tracker.marks.get("forward returned", tracker.event))
            if e.kind == "forward"]
    after_forward = sum(e.nbytes for e in held)
    held_by_op: dict = {}
    for entry in held:
        held_by_op[entry.op] = held_by_op.get(entry.op, 0) + entry.nbytes
    held_by_op = dict(sorted(held_by_op.items(), key=lambda kv: -kv[1])[:8])
    phase_peaks: dict = {}  # "forward+" (the loss after zero_grad) is the loss's own part
    for name, value in tracker.phase_peaks.items():
        name = "loss" if name == "forward+" else name
        phase_peaks[name] = max(phase_peaks.get(name, value - baseline), value - baseline)
    at_peak = tracker.alive_at(tracker.peak_event)
    by_kind = {k: 0 for k in BASELINE_KINDS + STEP_KINDS if k != "other"}
    for entry in at_peak:
        by_kind[entry.kind] = by_kind.get(entry.kind, 0) + entry.nbytes
    phase = "start" if tracker.peak == baseline else \
        "loss" if tracker.peak_phase == "forward+" else tracker.peak_phase
    largest = sorted((e for e in at_peak if e.kind not in BASELINE_KINDS),
                     key=lambda e: -e.nbytes)[:6]
    return {
        "baseline": baseline, "extra_peak": tracker.peak - baseline, "peak": tracker.peak,
        "baseline_parts": parts, "other_not_counted": tracker.uncounted,
        "at_peak": {k: v for k, v in by_kind.items() if v and k != "other"},
        "peak_phase": phase,
        "extra_by_phase": phase_peaks,  # each phase's largest total, less the baseline
        "forward_held": after_forward,  # made by the forward, alive when it returned
        "forward_held_by_op": held_by_op,  # the same by the ATen op that made them (top 8)
        "largest_at_peak": [{"op": e.op, "shape": e.shape, "dtype": e.dtype, "kind": e.kind,
                             "bytes": e.nbytes} for e in largest],
        "end_minus_baseline": end - baseline, "cyclic_garbage": cyclic,
        "storages": len(tracker.history), "step_s": round(seconds, 2)}


def to_torch(tree):
    """numpy arrays (nested in lists) as CPU torch tensors sharing their memory."""
    import numpy as np
    import torch

    if isinstance(tree, (list, tuple)):
        return type(tree)(to_torch(t) for t in tree)
    if isinstance(tree, dict):
        return {k: to_torch(v) for k, v in tree.items()}
    return torch.from_numpy(np.ascontiguousarray(tree)) if isinstance(tree, np.ndarray) \
        else tree


def measure_model(model, batch: int, input_shapes=None) -> dict:
    """On one random batch of ``batch`` samples: a warm-up step, the measured step, and the
    same step measured with the cycle collector off (``collector_off``)."""
    from harness.keras_step import random_batch

    x, y = random_batch(model, batch, input_shapes=input_shapes)
    x, y = to_torch(x), to_torch(y)
    model.train_on_batch(x, y)
    out = measure_step(model, x, y)
    # the same step with the cycle collector off throughout: tensors that only garbage
    # cycles (torch's pytree helpers in Keras's tree functions) still hold stay to the end
    off = measure_step(model, x, y, collect=False)
    out["collector_off"] = {k: off[k] for k in ("peak", "extra_peak", "peak_phase",
                                                "forward_held", "cyclic_garbage")}
    del x, y
    gc.collect()
    return out


def tiny(batch: int = 2, features: int = 3, units: int = 4) -> dict:
    """The hand-checkable case: ``Dense(units)`` on ``features`` inputs, plain SGD, MSE."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(units)])
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    out = measure_model(model, batch)
    out["jit_compile"] = model.jit_compile
    return out


# --- the child process ----------------------------------------------------------------------

def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "keras", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _run_job(job: dict):
    """Yield one result per batch of ``job``: build the fixture's model under float32, compile
    it with its own optimizer, measure a train step at each batch."""
    import keras

    from harness.fixture_exec import FixtureError, load_model
    from harness.keras_step import compile_for

    def failed(message, batches=None):
        for batch in batches or job["batches"]:
            yield {"job": job["id"], "batch": batch, "error": message[:2000]}

    keras.backend.clear_session()
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    try:
        model = load_model(ROOT / job["file"], job["model"])
    except FixtureError as exc:
        yield from failed(str(exc))
        return
    try:
        name, options = compile_for(model, None)
        policy = keras.config.dtype_policy().name
        loss_scale = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        if model.jit_compile:
            raise RuntimeError("jit_compile resolved to True: the step would not be eager")
    except Exception as exc:  # noqa: BLE001
        yield from failed(f"{type(exc).__name__}: {exc}")
        return
    for batch in job["batches"]:
        out = {"job": job["id"], "batch": batch, "optimizer": name,
               "optimizer_options": options, "dtype_policy": policy,
               "loss_scale": loss_scale}
        started = time.perf_counter()
        try:
            out["oracle"] = measure_model(model, batch, job.get("input_shapes"))
        except Exception as exc:  # noqa: BLE001
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["seconds"] = round(time.perf_counter() - started, 2)
        yield out


def child_env() -> dict:
    return dict(os.environ, KERAS_BACKEND="torch", CUDA_VISIBLE_DEVICES="",
                JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
                PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")


def child_main(tiny_only: bool = False) -> None:
    """stdin: one job a line, ``{"id", "file", "model", "input_shapes", "batches"}``, the next
    sent when the last is done; stdout: one JSON object a line, first ``{"meta": ...}``, then
    per job one result per batch and ``{"done": id, "exit": status}``, each flushed as it
    comes.  Each job runs in a process forked from this one once torch and Keras are imported
    (nothing run yet): every fixture starts from the same state whatever ran before it (the
    fixtures change global settings, such as ``image_data_format``), and a crash loses only
    that model."""
    if os.environ.get("KERAS_BACKEND") != "torch" or "keras" in sys.modules:
        raise SystemExit("run the child with KERAS_BACKEND=torch, before keras is imported")
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the fixtures or Keras print goes to stderr
    import torch

    torch.set_num_threads(1)
    import keras  # noqa: F401 - with the backend above

    if not tiny_only:  # a third of the fixtures import it: once here, not in every job
        import importlib
        try:
            importlib.import_module("tensorflow")
        except ImportError:
            pass

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    if tiny_only:
        for sizes in json.load(sys.stdin):
            emit(tiny(**sizes))
        return
    emit({"meta": {"versions": _versions(), "backend": keras.backend.backend(),
                   "threads": torch.get_num_threads()}})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        print(f"[torch_step] {job['file']}::{job['model']} {job['batches']}", file=sys.stderr,
              flush=True)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the job's own process
            status = 0
            try:
                for result in _run_job(job):
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


def run_tiny(sizes=({},)) -> list:
    """:func:`tiny` for each dict of ``sizes``, in one child process (Keras's backend is
    fixed when it is imported)."""
    proc = subprocess.run([sys.executable, str(Path(__file__)), "--child-tiny"],
                          input=json.dumps(list(sizes)), capture_output=True, text=True,
                          env=child_env(), cwd=ROOT, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the tiny case failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# --- the driver -----------------------------------------------------------------------------

class _Worker:
    """One child process measuring the jobs it is sent, one at a time."""

    def __init__(self, env: dict, logdir: Path, number: int):
        self.errfile = (logdir / f"child-{number}.log").open("w")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__)), "--child"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errfile, cwd=ROOT, env=env,
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


def run_jobs(jobs: list, workers: int = 2, log=None) -> tuple:
    """Run ``jobs`` in ``workers`` child processes, each sent the next job (largest first)
    when it finishes one.  Returns ({job id: [results]}, child meta).  A child that dies or
    runs out of time (:data:`JOB_TIMEOUT` per job) loses only the job it was on (an error)
    and is replaced."""
    import selectors

    queue = sorted(jobs, key=lambda j: -j.get("cost", 0))
    results: dict = {}
    meta: dict = {}
    logdir = Path(tempfile.mkdtemp(prefix="torch_step_"))
    env = child_env()
    selector = selectors.DefaultSelector()
    count = failures = finished = 0

    def start():
        nonlocal count
        count += 1
        worker = _Worker(env, logdir, count)
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
            if worker.job is not None and time.monotonic() - worker.since > JOB_TIMEOUT:
                worker.kill()
                lose(worker, f"timed out after {JOB_TIMEOUT} s")
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


def measure_rows(rows: list, graphs: dict, workers: int = 2, log=None) -> tuple:
    """Measure ``rows`` (filled in place); returns the children's meta."""
    jobs, members = jobs_for(rows, graphs)
    for job in jobs:  # stored rows carry their input shapes (no memlint needed to re-measure)
        first = rows[members[job["id"]][0]]
        if first.get("input_shapes") is not None:
            job["input_shapes"] = first["input_shapes"]
    if log:
        log(f"{len(rows)} rows, {len(jobs)} model builds")
    results, meta = run_jobs(jobs, workers=workers, log=log)
    fill(rows, jobs, members, results)
    return meta


# --- memlint's side -------------------------------------------------------------------------

def memlint_side(graph, row: dict) -> dict:
    """memlint's ``torch``-profile breakdown for the row's batch, optimizer and precision:
    the exact sum (its parts without the allocator's rounding, what a CPU run compares with)
    and the rounded peak memlint reports."""
    from harness import proxy

    breakdown = proxy.memlint_estimate(graph, {
        "batch": row["batch"], "mode": "train", "optimizer": row["optimizer"],
        "optimizer_options": row.get("optimizer_options") or {},
        "dtype_policy": row["dtype_policy"]}, PROFILE)
    parts = {p.name: p.bytes for p in breakdown.parts}
    return {"peak": breakdown.peak - parts.get(ROUNDING, 0), "peak_rounded": breakdown.peak,
            "complete": breakdown.complete, "phase": breakdown.peak_at.get("phase"),
            "layer": breakdown.peak_at.get("layer"), "parts": parts}


def add_memlint(rows: list, graphs: dict) -> None:
    for row in rows:
        for key in ("memlint", "relative_error", "memlint_error"):
            row.pop(key, None)
        if "oracle" not in row or "error" in row:
            continue
        graph = graphs.get((row["fixture"], row["model"]))
        if graph is None:
            row["memlint_error"] = "memlint finds no such model now"
            continue
        row["memlint"] = memlint_side(graph, row)
        peak = row["oracle"]["peak"]
        row["relative_error"] = round((row["memlint"]["peak"] - peak) / peak, 4)


# --- storing --------------------------------------------------------------------------------

def save(data: dict, path: Path = DATA) -> None:
    """One row per line, meta first, no local paths (as the GPU-plan data)."""
    from harness import gpu_plan

    gpu_plan.save(data, path)


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def ok_rows(rows: list) -> list:
    return [r for r in rows if "oracle" in r and r.get("relative_error") is not None]


def sample(rows: list, count: int, day: _dt.date | None = None,
           max_seconds: float | None = None) -> list:
    """``count`` measured rows chosen by the date (the same rows all day), at most one per
    fixture; with ``max_seconds``, only rows whose measurement took at most that long."""
    rng = random.Random((day or today()).toordinal())
    ok = [r for r in rows if "oracle" in r and "error" not in r
          and (max_seconds is None or r.get("seconds", 0) <= max_seconds)]
    rng.shuffle(ok)
    chosen, fixtures = [], set()
    for row in ok:
        if row["fixture"] not in fixtures:
            chosen.append(row)
            fixtures.add(row["fixture"])
        if len(chosen) == count:
            break
    return chosen


def remeasure(rows: list, workers: int = 2) -> list:
    """``rows`` measured again (fresh copies; memlint not needed)."""
    fresh = [{k: r[k] for k in ("fixture", "model", "batch", "optimizer_key",
                                "precision_requested", "input_shapes") if k in r}
             for r in rows]
    measure_rows(fresh, {}, workers=workers)
    return fresh


# --- the table ------------------------------------------------------------------------------

BEYOND = 0.20


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


def oracle_parts(row: dict) -> dict:
    """The oracle's bytes at its peak in memlint's terms: weights, optimizer slots, weight
    gradients (the previous step's still in .grad, and this step's), batch, targets, and the
    step's other tensors by the phase that made them."""
    at = row["oracle"]["at_peak"]
    return {"weights": at.get("weights", 0), "optimizer": at.get("optimizer", 0),
            "gradients": at.get("previous gradients", 0) + at.get("gradients", 0),
            "batch+targets": at.get("input batch", 0) + at.get("targets", 0),
            "forward": at.get("forward", 0), "loss": at.get("loss", 0),
            "backward": at.get("backward", 0), "update": at.get("update", 0),
            "other": at.get("metrics", 0) + at.get("after", 0)}


def _pct(value) -> str:
    return f"{value:+.1%}" if value < 0 else f"{value:.1%}"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f}"


def markdown(data: dict) -> str:
    meta, rows = data["meta"], data["rows"]
    v = meta.get("versions") or {}
    out = [f"Torch-step oracle of {meta.get('date')} (torch {v.get('torch')}, keras "
           f"{v.get('keras')}, CPU, eager) against memlint's `{PROFILE}` profile (exact sum: "
           f"its parts without the {ROUNDING}) as of "
           f"{meta.get('memlint_refreshed') or meta.get('date')}.", "",
           "Error = (memlint exact - oracle peak) / oracle peak.", "",
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
            "| fixture::model | batch | oracle peak | phase | memlint exact | error | "
            "oracle: weights, optimizer, gradients, batch+targets, forward, loss, backward, "
            "update, other | memlint parts |",
            "| --- | ---: | ---: | --- | ---: | ---: | --- | --- |"]
    worst = sorted(ok_rows(rows), key=lambda r: -abs(r["relative_error"]))[:10]
    for r in worst:
        o = oracle_parts(r)
        parts = ", ".join(f"{k} {_mib(b)}" for k, b in r["memlint"]["parts"].items()
                          if b and k != ROUNDING)
        out.append(f"| {r['fixture'].removeprefix('fixtures/')}::{r['model']} | {r['batch']} | "
                   f"{_mib(r['oracle']['peak'])} | {r['oracle']['peak_phase']} | "
                   f"{_mib(r['memlint']['peak'])} | {_pct(r['relative_error'])} | "
                   f"{', '.join(_mib(b) for b in o.values())} | {parts} |")
    failed = [r for r in rows if "error" in r]
    if failed:
        reasons: dict = {}
        for r in failed:
            reasons.setdefault((r["fixture"], r["model"]), r["error"].splitlines()[0][:140])
        out += ["", f"{len(failed)} rows ({len(reasons)} models) did not run under the torch "
                "backend (first line of the error, per model):", ""]
        for (fixture, model), reason in sorted(reasons.items()):
            out.append(f"* `{fixture.removeprefix('fixtures/')}::{model}`: {reason}")
    return "\n".join(out)


# --- commands -------------------------------------------------------------------------------

def generate(workers: int = 2, limit: int = 0, log=print) -> dict:
    started = time.monotonic()
    graphs = _graphs()
    rows = matrix(graphs)
    if limit:
        keep = sorted({r["fixture"] for r in rows})[:limit]
        rows = [r for r in rows if r["fixture"] in keep]
    from harness import gpu_plan

    for row in rows:
        graph = graphs[(row["fixture"], row["model"])]
        row["params"] = graph.params
        if gpu_plan._input_shapes(graph):
            row["input_shapes"] = gpu_plan._input_shapes(graph)
    child_meta = measure_rows(rows, graphs, workers=workers, log=log)
    add_memlint(rows, graphs)
    meta = {"date": today().isoformat(), "seconds": round(time.monotonic() - started, 1),
            "workers": workers, "cpus": os.cpu_count(),
            "versions": child_meta.get("versions"), "backend": child_meta.get("backend"),
            "torch_threads": child_meta.get("threads"), "matrix": MATRIX_DESCRIPTION,
            "method": METHOD, "memlint_profile": PROFILE,
            "relative_error": "(memlint exact - oracle peak) / oracle peak; memlint exact = "
                              f"memlint's parts without '{ROUNDING}'",
            "rows": len(rows), "measured": sum("oracle" in r for r in rows),
            "failed": sum("error" in r for r in rows),
            "regenerate": REGENERATE, "refresh_memlint": REFRESH}
    data = {"meta": meta, "rows": rows}
    meta["figures"] = figures(data)
    return data


def refresh_memlint(path: Path = DATA) -> dict:
    data = load(path)
    add_memlint(data["rows"], _graphs())
    data["meta"]["memlint_refreshed"] = today().isoformat()
    data["meta"]["figures"] = figures(data)
    return data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.torch_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--child-tiny", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--regenerate", action="store_true",
                       help="measure the whole matrix and rewrite the data file")
    group.add_argument("--refresh-memlint", action="store_true",
                       help="recompute memlint's side of the stored rows only")
    group.add_argument("--table", action="store_true", help="print the comparison (Markdown)")
    group.add_argument("--sample", type=int, metavar="N",
                       help="measure today's rotating sample of N rows again and compare")
    group.add_argument("--tiny", action="store_true",
                       help="measure the hand-checkable Dense/SGD case and print it")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="only the first N fixtures")
    parser.add_argument("--output", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if args.child or args.child_tiny:
        child_main(tiny_only=args.child_tiny)
        return
    if args.table:
        print(markdown(load(args.output)))
        return
    if args.tiny:
        print(json.dumps(run_tiny(), indent=1))
        return
    if args.sample:
        stored = sample(load(args.output)["rows"], args.sample)
        fresh = remeasure(stored, workers=args.workers)
        for old, new in zip(stored, fresh):
            a, b = old["oracle"]["peak"], (new.get("oracle") or {}).get("peak")
            print(f"{old['fixture']}::{old['model']} b{old['batch']}: stored {a:,} now "
                  f"{b if b is None else format(b, ',')} {'same' if a == b else 'DIFFERENT'} "
                  f"{new.get('error', '')[:200]}")
        return
    started = time.monotonic()
    stamp = lambda m: print(f"[{time.monotonic() - started:7.1f}s] {m}", flush=True)  # noqa: E731
    data = refresh_memlint(args.output) if args.refresh_memlint else \
        generate(args.workers, args.limit, stamp)
    save(data, args.output)
    stamp(f"wrote {args.output}")
    print(markdown(data))


if __name__ == "__main__":
    main(sys.argv[1:])
