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

The driver, the matrix, the stored data and the commands (``python -m harness.torch_step
--regenerate`` / ``--refresh-memlint`` / ``--table`` / ``--sample N`` / ``--tiny``) are the
step oracles' common ones (``harness/step_oracle.py``); this module is the measuring method.
"""

from __future__ import annotations

import gc
import sys
import time
import weakref

from harness import step_oracle

# What holds a storage alive when the step starts (the baseline), and what the step makes.
BASELINE_KINDS = ("weights", "optimizer", "previous gradients", "metrics", "input batch",
                  "targets", "other")
STEP_KINDS = ("gradients", "forward", "loss", "backward", "update", "after")


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


def child_setup() -> dict:
    """Before Keras is imported in the child: torch on one thread."""
    import torch

    torch.set_num_threads(1)
    return {"threads": torch.get_num_threads()}


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


SPEC = step_oracle.Spec(
    name="torch", module="harness.torch_step",
    data=step_oracle.ROOT / "tests" / "data" / "torch_steps.json", profile="torch",
    exact=True, env={},
    matrix=("every fixture's largest model as the GPU-plan oracle takes them (harness.gpu_plan "
            "matrix(), its base rows), Keras 3 on PyTorch, eager, CPU: the train step with MSE "
            "loss on every output, the fixture's own optimizer (Adam where it compiles none), "
            "float32 (or the policy the fixture sets itself), batch 4 and 32"),
    method=("second train_on_batch on the same batch; storages alive before it registered "
            "through gc; every ATen op's output storages added when first seen "
            "(TorchDispatchMode), subtracted when freed (weakref.finalize); Python's cycle "
            "collector run before every candidate maximum (objects older than the step "
            "frozen), off otherwise; peak = largest running total of live storage bytes, "
            "baseline included; no allocator rounding; collector_off: a third step measured "
            "with the collector off throughout"),
    versions=("torch", "keras", "numpy"),
    parts_header=("oracle: weights, optimizer, gradients, batch+targets, forward, loss, "
                  "backward, update, other"),
    parts=oracle_parts)


if __name__ == "__main__":
    step_oracle.main(SPEC, sys.argv[1:])
