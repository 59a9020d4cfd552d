"""The TensorFlow-step oracle: the peak of TensorFlow's BFC allocator during one Keras 3 train
step run in graph mode (``tf.function``, no XLA) on the CPU, next to memlint's ``tf-graph``
profile estimate of the same model, batch, optimizer and precision.  Harness and tests only:
memlint never imports this.

How a step is measured (in a child process with ``KERAS_BACKEND=tensorflow``): TensorFlow's
CPU allocator keeps no statistics, but with ``TF_CPU_ALLOCATOR_USE_BFC=true`` it is a BFC
allocator, the same kind TensorFlow uses on a GPU, whose ``get_memory_info`` reports the bytes
in use (each allocation rounded up to 256 B) and their peak.  oneDNN's kernels are turned off
(``TF_ENABLE_ONEDNN_OPTS=0``: their scratch and weight reorders exist on the CPU only),
TensorFlow runs one op at a time (``inter_op`` and ``intra_op`` parallelism 1), and Grappler's
meta optimizer is off: it rewrites the traced graph under a time budget, so on a busy machine
the same step's peak moved by up to a quarter from one process to the next (44.4 vs 56.3 MiB
for ``transformer_text_classifier`` at batch 32, two processes at once); without it the graph
is the one Keras traced.  It is still not exact: 12 stored steps measured again in another
process moved by a median 5.0% and at most 26.6% (the state is exact; the cause, the
allocator's chunks or the order of independent ops, was not isolated), so one figure is
good to about a tenth.  The fixture's model is compiled as the other oracles compile it;
Keras resolves ``jit_compile`` to False on a CPU, so the step is a graph without XLA.  The
batch and targets are made tensors first; a first ``train_on_batch`` traces the step and
builds the optimizer's slots; the allocator's peak is reset and the second is measured.
A model whose two steps at both batch sizes take more than five minutes on one CPU thread
is recorded as not measured.

The state the step starts from (the model's variables, the optimizer's, the metrics', the
batch and the targets) is summed from those tensors, each rounded up to 256 B as the
allocator rounds it; the oracle's peak is that state plus the allocator's peak above what was
in use when the step started (other objects of the fixture, such as a second model, are not
counted).  docs/tf-oracle.md has the comparison.
"""

from __future__ import annotations

import sys

from harness import step_oracle

ALIGN = 256  # the BFC allocator's smallest unit: every allocation is a multiple of it
DEVICE = "CPU:0"


def _rounded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN if n > 0 else 0


def _bytes(tensors) -> int:
    total = 0
    for t in tensors:
        value = getattr(t, "value", t)  # a Keras variable's tf.Variable, or a tensor
        total += _rounded(int(value.shape.num_elements() or 0) * value.dtype.size)
    return total


def state_parts(model, x, y) -> dict:
    """The bytes of what the step starts from, each tensor rounded as the allocator does."""
    import tensorflow as tf

    return {"weights": _bytes(model.variables),
            "optimizer": _bytes(model.optimizer.variables),
            "metrics": _bytes(model.metrics_variables),
            "input batch": _bytes(tf.nest.flatten(x)),
            "targets": _bytes(tf.nest.flatten(y))}


def measure_step(model, x, y) -> dict:
    """The allocator's figures over one ``model.train_on_batch(x, y)`` (``x`` and ``y``
    tensors; the model compiled and already trained on them)."""
    import tensorflow as tf

    memory = tf.config.experimental
    parts = state_parts(model, x, y)
    step = int(model.optimizer.iterations.numpy())
    before = memory.get_memory_info(DEVICE)["current"]
    memory.reset_memory_stats(DEVICE)
    model.train_on_batch(x, y)
    info = memory.get_memory_info(DEVICE)
    if int(model.optimizer.iterations.numpy()) != step + 1:  # a step that did not run
        raise RuntimeError("the measured train step did not update the model")
    state = sum(parts.values())
    extra = info["peak"] - before
    return {"state": state, "state_parts": parts, "extra_peak": extra,
            "peak": state + extra, "in_use_before": before,
            "end_minus_baseline": info["current"] - before}


def measure_model(model, batch: int, input_shapes=None) -> dict:
    """On one random batch of ``batch`` samples: a warm-up step (the trace, the slots), then
    the measured one."""
    import tensorflow as tf

    from harness.keras_step import random_batch

    x, y = random_batch(model, batch, input_shapes=input_shapes)
    x, y = tf.nest.map_structure(tf.constant, (x, y))
    model.train_on_batch(x, y)
    return measure_step(model, x, y)


def tiny(batch: int = 2, features: int = 3, units: int = 4) -> dict:
    """A small case: ``Dense(units)`` on ``features`` inputs, plain SGD, MSE, measured twice
    (the figures must be equal)."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(units)])
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    first = measure_model(model, batch)
    again = measure_model(model, batch)
    return {**first, "again": again, "jit_compile": model.jit_compile}


def child_setup() -> dict:
    """Before Keras is imported in the child: TensorFlow one op at a time."""
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    # Grappler rewrites the traced graph under a time budget: on a busy machine it ends
    # elsewhere, and the same step then peaks up to a quarter higher or lower (module
    # docstring); off, the graph is the one Keras traced
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    return {"allocator": "BFC (TF_CPU_ALLOCATOR_USE_BFC=true)", "onednn": "off",
            "grappler": "off", "tensorflow": tf.__version__}


def oracle_parts(row: dict) -> dict:
    """The oracle's state (variables, slots, metrics, batch, targets) and the step's own
    bytes at its peak."""
    o = row["oracle"]
    return {"state": o["state"], "step": o["extra_peak"]}


SPEC = step_oracle.Spec(
    name="tensorflow", module="harness.tf_step",
    data=step_oracle.ROOT / "tests" / "data" / "tf_steps.json", profile="tf-graph",
    exact=False, env={"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_ENABLE_ONEDNN_OPTS": "0"},
    matrix=("every fixture's largest model as the GPU-plan oracle takes them (harness.gpu_plan "
            "matrix(), its base rows), Keras 3 on TensorFlow, graph mode without XLA, CPU: the "
            "train step with MSE loss on every output, the fixture's own optimizer (Adam where "
            "it compiles none), float32 (or the policy the fixture sets itself), batch 4 and 32"),
    method=("second train_on_batch on the same batch (tensors); TensorFlow's CPU allocator as "
            "a BFC allocator (TF_CPU_ALLOCATOR_USE_BFC=true), oneDNN off, Grappler's meta "
            "optimizer off, one op at a time; "
            "peak = the state (variables, slots, metrics, batch, targets, each rounded to "
            "256 B) + the allocator's peak above its use when the step started"),
    versions=("tensorflow-cpu", "keras", "numpy"),
    parts_header="oracle: state, step", job_timeout=300,
    parts=oracle_parts)


if __name__ == "__main__":
    step_oracle.main(SPEC, sys.argv[1:])
