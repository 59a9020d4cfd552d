"""The multi-device plan oracle: XLA's per-device memory plan of Keras 3 JAX train steps
distributed over several *described* GPUs (``1x1xN`` H100 and T4 topologies, no GPU present),
next to memlint's per-device estimate of the same configuration, and the same model on one
device at the per-device batch (its *twin*), so that each row shows what distribution adds per
device.  Harness and tests only: memlint never imports this.  Data:
``tests/data/multi_device_plans.json``; tests: ``tests/test_multi_device_plan.py``; the
tables: docs/gpu-verification.md, "Several GPUs without GPUs".

How a plan is made (a child process per target, ``python harness/multi_device_plan.py
--child``, ``JAX_PLATFORMS=cpu`` before JAX is imported): the model is built and compiled with
real Keras on the CPU, its state (trainable, non-trainable, optimizer and metrics variables)
taken as Keras's JAX trainer takes it, and ``jax.jit(model.train_step, donate_argnums=0)`` is
lowered with ``jax.ShapeDtypeStruct``\\ s placed on a mesh of
``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...,
topology="1x1xN")`` and compiled by the CUDA plugin; ``compiled.memory_analysis()`` is per
device.  Data parallelism: the state replicated (``P()``), the data split on its batch
dimension (``P("batch")``).  Model parallelism: Keras itself decides each variable's layout
(the model is built under the source's ``ModelParallel`` on 8 CPU devices,
``--xla_force_host_platform_device_count=8``), and those partition specs are put on a
``(batch, model)`` mesh of the described GPUs; the data is split over ``batch``.

Rows (``configurations()``):

* strategy fixtures (``fixtures/devices/``): their Keras source is the one-device twin (a
  ``tf.distribute`` strategy or ``DataParallel(devices=[gpu:...])`` cannot be built here);
  memlint reads the fixture itself, with ``--gpus N`` where the code does not say N;
* data parallelism constructed from other fixtures at global batch 256 over 2, 4, 8 devices:
  memlint reads the fixture with ``set_distribution(DataParallel())`` put before it, ``--gpus
  N`` and ``--batch-size 256``;
* model parallelism: a Dense-heavy model whose kernels and biases a ``LayoutMap`` shards 4
  ways on a (2, 4) mesh; and the same with the pattern Keras's docstring shows
  (``"dense.*kernel"``), which Keras 3.15 matches with ``re.fullmatch`` against
  ``sequential/dense/kernel`` and so does not apply;
* the overhead sweep: MLPs of 0.3M to 20M parameters and the fixture's CNN over batches and
  device counts, to measure how the distribution overhead scales.

Commands (``python -m harness.multi_device_plan [...]``):

* no argument: compile everything (5 to 11 minutes on 2 CPUs) and rewrite the data file;
* ``--refresh-memlint``: recompute memlint's side of the stored rows only (seconds);
* ``--table``: print the Markdown tables from the stored data;
* ``--sample N``: recompile today's rotating sample of N rows and compare with the stored plans.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script (the child) as well as with -m
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "multi_device_plans.json"
REGENERATE = "python -m harness.multi_device_plan"
REFRESH = "python -m harness.multi_device_plan --refresh-memlint"
TARGETS = ("h100", "t4")
CPU_DEVICES = 8  # Keras builds the ModelParallel model on this many CPU devices
CHILD_FLAGS = f"--xla_force_host_platform_device_count={CPU_DEVICES}"

# The groups whose rows make the headline figures (the sweep is for the overhead).
TABLE_GROUPS = ("strategy fixture", "data parallel", "model parallel")
SWEEP = "overhead sweep"

# What memlint reads for a constructed data-parallel row: the fixture with this before it
# (no device count: --gpus N gives it, as for code that does not say how many GPUs).
DP_PREFIX = ("import keras as _harness_keras\n"
             "_harness_keras.distribution.set_distribution("
             "_harness_keras.distribution.DataParallel())\n")

# The model-parallel model (memlint reads it as it is; Keras builds it under the
# distribution the text sets, on 8 CPU devices).  Its body alone is the one-device twin.
MP_HEAD = '''import keras
import numpy as np
from keras import layers

mesh = keras.distribution.DeviceMesh(shape=(2, 4), axis_names=("batch", "model"))
layout_map = keras.distribution.LayoutMap(mesh)
layout_map["{kernel}"] = (None, "model")
layout_map["{bias}"] = ("model",)
keras.distribution.set_distribution(
    keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch"))
'''
MP_BODY = '''import keras
import numpy as np
from keras import layers

model = keras.Sequential([
    keras.Input(shape=(1024,)),
    layers.Dense(4096, activation="relu"),
    layers.Dense(4096, activation="relu"),
    layers.Dense(1024),
])
model.compile(optimizer="adam", loss="mse")
model.fit(np.zeros((4096, 1024), "float32"), np.zeros((4096, 1024), "float32"), batch_size=256)
'''
SOURCES = {
    # patterns that match both Keras 3.15's re.fullmatch on "sequential/dense/kernel" and
    # memlint's re.search on "dense/kernel"
    "model_parallel": MP_HEAD.format(kernel=".*dense.*kernel", bias=".*dense.*bias")
    + "\n" + MP_BODY.split("\n", 4)[4],
    # the LayoutMap docstring's patterns: Keras 3.15 applies them to functional models only
    "model_parallel_docs_pattern": MP_HEAD.format(kernel="dense.*kernel", bias="dense.*bias")
    + "\n" + MP_BODY.split("\n", 4)[4],
    "model_parallel_twin": MP_BODY,
}
SWEEP_MLP = '''import keras
import numpy as np
from keras import layers

model = keras.Sequential([
    keras.Input(shape=(784,)),
    layers.Dense({width}, activation="relu"),
    layers.Dense({width}, activation="relu"),
    layers.Dense(10),
])
model.compile(optimizer="{optimizer}", loss="mse")
model.fit(np.zeros((8192, 784), "float32"), np.zeros((8192, 10), "float32"), batch_size={batch})
'''
# (width, optimizer, global batch, devices): parameters 0.27M, 1.9M, 5.8M, 20M at batch 512
# over 8; the 1.9M one at batch 64 and 4096 and over 2 devices; Adam beside SGD.
SWEEP_POINTS = ((256, "sgd", 512, 8), (1024, "sgd", 512, 8), (2048, "sgd", 512, 8),
                (4096, "sgd", 512, 8), (2048, "adam", 512, 8), (1024, "sgd", 64, 8),
                (1024, "sgd", 4096, 8), (1024, "sgd", 512, 2))
SWEEP_CNN = "fixtures/devices/keras3_data_parallel.py"  # activation-heavy, 19.7K parameters
SWEEP_CNN_BATCHES = (128, 2048)  # (512 is the strategy-fixture row)

# MLP, ResNet-like (batch normalization), VGG-like CNN, transformer (which XLA 0.10.2 does
# not compile for the H100 even on one device: a Triton GEMM fusion of the attention's value
# projection finds no tile sizes; those rows keep the error)
DP_FIXTURES = {"fixtures/mnist_mlp_sgd.py": "model", "fixtures/cifar_resnet_mini.py": "resnet",
               "fixtures/vgg_blocks_constants.py": "vgg",
               "fixtures/transformer_text_classifier.py": "model"}
DP_GLOBAL_BATCH = 256
DP_DEVICES = (2, 4, 8)


def _sweep_source(width: int, optimizer: str, batch: int) -> str:
    return SWEEP_MLP.format(width=width, optimizer=optimizer, batch=batch)


def source_text(key: str) -> str:
    """A constructed model's source: ``SOURCES`` or ``sweep_mlp:WIDTH:OPTIMIZER:BATCH``."""
    if key.startswith("sweep_mlp:"):
        _, width, optimizer, batch = key.split(":")
        return _sweep_source(int(width), optimizer, int(batch))
    return SOURCES[key]


def configurations() -> list:
    """Every configuration (target-independent): what Keras builds, how it is distributed,
    and what memlint reads."""
    out = []

    def add(ident, group, keras_file, memlint, devices, global_batch, replicas,
            mesh=None, axes=("batch",), model="model", keras_text=None, optimizer=None,
            twin=None, note=""):
        out.append({"id": ident, "group": group, "keras_file": keras_file,
                    "keras_text": keras_text, "model": model, "optimizer_key": optimizer,
                    "devices": devices, "mesh": list(mesh or (devices,)), "axes": list(axes),
                    "replicas": replicas, "global_batch": global_batch,
                    "per_device_batch": global_batch // replicas, "memlint_input": memlint,
                    "memlint_twin_input": twin, "note": note})

    dev = "fixtures/devices/"
    add("mirrored_strategy_four_gpus x4", "strategy fixture",
        dev + "mirrored_strategy_four_gpus_one_device.py",
        {"path": dev + "mirrored_strategy_four_gpus.py"}, 4, 1024, 4,
        twin={"path": dev + "mirrored_strategy_four_gpus_one_device.py"},
        note="tf.distribute.MirroredStrategy(devices=4 GPUs), fit(batch_size=1024)")
    add("keras3_data_parallel x8", "strategy fixture", dev + "keras3_data_parallel_one_device.py",
        {"path": dev + "keras3_data_parallel.py"}, 8, 512, 8,
        twin={"path": dev + "keras3_data_parallel_one_device.py"},
        note="keras.distribution.DataParallel(devices=8 GPUs), fit(batch_size=512)")
    for n in (2, 8):
        add(f"mirrored_replicas_in_sync x{n}", "strategy fixture",
            dev + "mirrored_replicas_in_sync_one_device.py",
            {"path": dev + "mirrored_replicas_in_sync.py", "gpus": n}, n, 64 * n, n,
            twin={"path": dev + "mirrored_replicas_in_sync_one_device.py"},
            note="MirroredStrategy(), batch(64 * num_replicas_in_sync), --gpus N")
    for fixture, model in DP_FIXTURES.items():
        from harness import proxy
        keras_file = str(proxy.keras_source(ROOT / fixture).relative_to(ROOT))
        for n in DP_DEVICES:
            add(f"{Path(fixture).stem} x{n}", "data parallel", keras_file,
                {"path": fixture, "prefix": "data_parallel", "gpus": n,
                 "batch_size": DP_GLOBAL_BATCH}, n, DP_GLOBAL_BATCH, n, model=model,
                twin={"path": fixture, "batch_size": DP_GLOBAL_BATCH // n},
                note=f"DataParallel over {n}, global batch {DP_GLOBAL_BATCH}")
    for key, note in (("model_parallel", "LayoutMap '.*dense.*kernel' (None, 'model'), "
                                         "'.*dense.*bias' ('model',)"),
                      ("model_parallel_docs_pattern",
                       "LayoutMap 'dense.*kernel' / 'dense.*bias' (the Keras docstring's "
                       "patterns): Keras 3.15 fullmatches them against "
                       "'sequential/dense/kernel' and shards nothing")):
        add(f"{key} 2x4", "model parallel", None,
            {"text": key}, 8, 256, 2, mesh=(2, 4), axes=("batch", "model"), keras_text=key,
            twin={"text": "model_parallel_twin", "batch_size": 128}, note=note)
    for width, optimizer, batch, n in SWEEP_POINTS:
        key = f"sweep_mlp:{width}:{optimizer}:{batch}"
        add(f"mlp{width} {optimizer} b{batch} x{n}", SWEEP, None,
            {"text": key, "prefix": "data_parallel", "gpus": n}, n, batch, n,
            keras_text=key, twin={"text": key, "batch_size": batch // n},
            note=f"MLP 784-{width}-{width}-10, {optimizer}")
    for batch in SWEEP_CNN_BATCHES:
        add(f"keras3_data_parallel b{batch} x8", SWEEP, dev + "keras3_data_parallel_one_device.py",
            {"path": SWEEP_CNN, "batch_size": batch}, 8, batch, 8,
            twin={"path": dev + "keras3_data_parallel_one_device.py", "batch_size": batch // 8},
            note="the fixture's CNN at another global batch")
    return out


# --- the child process ----------------------------------------------------------------------

_COLLECTIVE = re.compile(r"= (?P<type>\(?[^=]*?) (?P<op>all-reduce-start|all-reduce|"
                         r"all-gather-start|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute-start|collective-permute)\(")
_ARRAY = re.compile(r"\b(pred|[sufc]\d+|bf16)\[([\d,]*)\]")
_ITEMSIZE = {"pred": 1, "bf16": 2}


def _bytes(dtype: str, dims: str) -> int:
    size = _ITEMSIZE.get(dtype) or max(1, int(re.sub(r"\D", "", dtype)) // 8)
    for d in filter(None, dims.split(",")):
        size *= int(d)
    return size


def collectives(hlo: str) -> dict:
    """``{op: {"count", "bytes": [result bytes of each]}}`` for the collectives of an
    optimized HLO module (an async ``-start`` op's result is its type's last array)."""
    out: dict = {}
    for match in _COLLECTIVE.finditer(hlo):
        op = match.group("op").replace("-start", "")
        arrays = _ARRAY.findall(match.group("type"))
        if not arrays:
            continue
        if match.group("op") == "all-reduce-start" or not match.group("op").endswith("-start"):
            size = sum(_bytes(d, s) for d, s in arrays)  # a tuple of reduced operands
        else:
            size = _bytes(*arrays[-1])
        entry = out.setdefault(op, {"count": 0, "bytes": []})
        entry["count"] += 1
        entry["bytes"].append(size)
    return out


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "keras",
                 "tensorflow-cpu", "tensorflow", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _build(config: dict, workdir: Path):
    """(model, state, x, y, optimizer name, options, dtype policy) for a configuration: the
    model built (under its own distribution, for the model-parallel sources), compiled with
    its own optimizer (or the sweep's) and an MSE loss, its variables and optimizer built."""
    import keras

    from harness.fixture_exec import load_models
    from harness.keras_step import compile_for, random_batch

    keras.backend.clear_session()
    keras.config.set_dtype_policy("float32")
    keras.config.set_image_data_format("channels_last")  # whatever the last fixture set
    keras.distribution.set_distribution(None)
    if config["keras_text"]:
        path = workdir / (re.sub(r"\W", "_", config["keras_text"]) + ".py")
        path.write_text(source_text(config["keras_text"]), encoding="utf-8")
    else:
        path = ROOT / config["keras_file"]
    models = load_models(str(path))
    model = models.get(config["model"])
    if model is None:
        raise LookupError(f"Keras built no module-level model {config['model']!r}")
    name, options = compile_for(model, config["optimizer_key"])
    x, y = random_batch(model, 2)
    model._symbolic_build(data_batch=(x, y, None))
    model.optimizer.build(model.trainable_variables)
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True)
    keras.distribution.set_distribution(None)  # the step is traced without Keras's CPU mesh
    return model, state, x, y, name, options, keras.config.dtype_policy().name


def _mesh(target: str, shape: tuple, axes: tuple, cache: dict):
    from jax.experimental import topologies

    from harness.gpu_targets import target_config

    key = (target, shape, axes)
    if key not in cache:
        count = 1
        for d in shape:
            count *= d
        topology = topologies.get_topology_desc(platform="cuda",
                                                target_config=target_config(target),
                                                topology=f"1x1x{count}")
        cache[key] = topologies.make_mesh(topology, shape, axes)
    return cache[key]


def _plan(model, state, x, y, mesh, batch: int, keep_specs: bool) -> tuple:
    """(memory plan per device, collectives, per-device trainable bytes) of the train step
    with the state on ``mesh`` (its Keras partition specs with ``keep_specs``, else
    replicated) and the data at ``batch`` split over the mesh's ``batch`` axis."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from harness.keras_step import memory_plan

    def state_spec(a):
        spec = getattr(getattr(a, "sharding", None), "spec", None) if keep_specs else None
        return jax.ShapeDtypeStruct(a.shape, a.dtype,
                                    sharding=NamedSharding(mesh, spec or PartitionSpec()))

    data_sharding = NamedSharding(mesh, PartitionSpec("batch"))
    specs = jax.tree.map(state_spec, state)
    data = jax.tree.map(lambda a: jax.ShapeDtypeStruct((batch,) + tuple(a.shape[1:]), a.dtype,
                                                       sharding=data_sharding), (x, y, None))
    compiled = jax.jit(model.train_step, donate_argnums=0).lower(specs, data).compile()
    plan = memory_plan(compiled)
    plan.pop("generated_code", None)
    trainable = sum(int(np.dtype(s.dtype).itemsize) * _count(
        s.sharding.shard_shape(s.shape)) for s in specs[0])
    return plan, collectives(compiled.as_text()), trainable


def _count(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def child_main() -> None:
    """stdin: ``{"target", "configs": [...]}``; stdout: one JSON line per configuration (the
    first ``{"meta": ...}``), flushed as it comes."""
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["JAX_PLATFORMS"] = "cpu"  # before jax: the CUDA plugin then skips its checks
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the fixtures, Keras or XLA print goes to stderr
    request = json.load(sys.stdin)
    target = request["target"]

    import jax  # noqa: F401 - imported with the environment above

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    emit({"meta": {"versions": _versions(), "cpu_devices": len(jax.devices())}})
    meshes: dict = {}
    built: dict = {}
    twins: dict = {}
    workdir = Path(tempfile.mkdtemp(prefix="multi_device_plan_"))
    for config in sorted(request["configs"], key=_build_key):
        print(f"[multi_device_plan] {target} {config['id']}", file=sys.stderr, flush=True)
        result = {"id": config["id"], "target": target}
        key = _build_key(config)
        try:
            if key not in built:
                built.clear()
                twins.clear()
                built[key] = _build(config, workdir)
            model, state, x, y, name, options, policy = built[key]
            result.update(optimizer=name, optimizer_options=options, dtype_policy=policy)
            mesh = _mesh(target, tuple(config["mesh"]), tuple(config["axes"]), meshes)
            started = time.perf_counter()
            plan, coll, trainable = _plan(model, state, x, y, mesh, config["global_batch"],
                                          keep_specs=len(config["mesh"]) > 1)
            result.update(plan=plan, collectives=coll, trainable_bytes_per_device=trainable)
            batch = config["per_device_batch"]
            if batch not in twins:
                one = _mesh(target, (1,), ("batch",), meshes)
                twins[batch] = _plan(model, state, x, y, one, batch, keep_specs=False)
            twin, _, twin_trainable = twins[batch]
            result.update(twin_plan=twin, trainable_bytes=twin_trainable,
                          compile_s=round(time.perf_counter() - started, 2))
        except Exception as exc:  # noqa: BLE001 - one configuration's failure is data
            result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        emit(result)


def _build_key(config: dict) -> tuple:
    return (config["keras_file"] or "", config["keras_text"] or "", config["model"],
            config["optimizer_key"] or "")


# --- the driver -----------------------------------------------------------------------------

def child_env() -> dict:
    flags = (os.environ.get("XLA_FLAGS", "") + " " + CHILD_FLAGS).strip()
    return dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
                PYTHONPATH=str(ROOT), XLA_FLAGS=flags)


def run_children(jobs: dict, timeout: int = 1800, log=None) -> tuple:
    """Compile ``{target: configs}``, one child process per target, all at once.
    Returns ({(id, target): result}, child meta)."""
    procs = []
    for target, configs in jobs.items():
        errfile = tempfile.NamedTemporaryFile("w+", prefix=f"multi_device_{target}_",
                                              suffix=".log", delete=False)
        outfile = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen([sys.executable, str(ROOT / "harness" / "multi_device_plan.py"),
                                 "--child"], stdin=subprocess.PIPE, stdout=outfile,
                                stderr=errfile, text=True, cwd=ROOT, env=child_env())
        proc.stdin.write(json.dumps({"target": target, "configs": configs}))
        proc.stdin.close()
        procs.append((target, proc, outfile, errfile))
    results, meta = {}, {}
    deadline = time.monotonic() + timeout
    for target, proc, outfile, errfile in procs:
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        outfile.seek(0)
        for line in outfile:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if "meta" in item:
                meta.update(item["meta"])
            else:
                results[(item["id"], item["target"])] = item
        errfile.close()
        tail = Path(errfile.name).read_text(errors="replace")[-1500:]
        if proc.returncode == 0:
            os.unlink(errfile.name)
        elif log:
            log(f"{target}: child exit {proc.returncode}; log {errfile.name}\n{tail}")
        for config in jobs[target]:  # what a dead child did not answer
            results.setdefault((config["id"], target), {
                "id": config["id"], "target": target,
                "error": f"no result: the child exited {proc.returncode}: {tail[-300:]}"})
    return results, meta


# --- memlint's side -------------------------------------------------------------------------

def _memlint_graph(spec: dict, variable: str):
    """(ModelGraph after placement, memory graph) memlint makes of ``spec``: a file (with
    the data-parallel prefix when asked) or a harness source, under ``--gpus`` /
    ``--batch-size`` when given."""
    from memlint.analysis import analyze_text, memory_graph
    from memlint.config import Settings

    if "path" in spec:
        name = spec["path"]
        text = (ROOT / name).read_text(encoding="utf-8")
    else:
        name = f"harness/multi_device_plan.py::{spec['text']}"
        text = source_text(spec["text"])
    if spec.get("prefix") == "data_parallel":
        text = DP_PREFIX + text
    settings = Settings(gpus=spec.get("gpus"), batch_size=spec.get("batch_size"))
    report = analyze_text(text, str(ROOT / name) if "path" in spec else name, settings)
    found = [g for g in report.models if g.variable == variable]
    if not found:
        raise LookupError(f"memlint finds no model {variable!r} in {name}")
    return found[0], memory_graph(found[0])


def memlint_side(row: dict) -> dict:
    """memlint's per-device estimate (``xla`` profile) of a row's configuration, with the
    optimizer Keras compiled, and its estimate of the one-device twin."""
    from harness import proxy
    from harness.gpu_targets import targets

    capability = tuple(targets()[row["target"]]["compute_capability"])
    graph, per_device = _memlint_graph(row["memlint_input"], row["model"])
    setup = graph.setup
    config = {"mode": "train", "optimizer": row["optimizer"],
              "optimizer_options": row.get("optimizer_options") or {},
              "dtype_policy": row.get("dtype_policy", "float32")}
    out = {"strategy": setup.strategy, "replicas": setup.replicas,
           "global_batch": setup.global_batch_size, "per_device_batch": setup.batch_size,
           "batch_source": setup.batch_source, "shards": [list(s) for s in setup.shards],
           "params_per_device": per_device.params}
    if setup.batch_size is None:
        out["error"] = "memlint gives no per-device batch"
        return out
    breakdown = proxy.memlint_estimate(per_device, {**config, "batch": setup.batch_size},
                                       compute_capability=capability)
    categories = {k: v for k, v in breakdown.as_dict().items() if k != "peak"}
    out.update(peak=breakdown.peak, parts={p.name: p.bytes for p in breakdown.parts},
               categories=categories)
    gradients = per_device.trainable_params * 4  # float32 variables, float32 gradients
    out["with_all_reduce"] = all_reduce_term(breakdown.peak, categories, gradients)
    twin_graph, twin_memory = _memlint_graph(row["memlint_twin_input"], row["model"])
    twin = proxy.memlint_estimate(twin_memory, {**config, "batch": twin_graph.setup.batch_size},
                                  compute_capability=capability)
    out.update(twin_batch=twin_graph.setup.batch_size, twin_peak=twin.peak)
    return out


# XLA's GPU all-reduce combiner: gradients are concatenated into one buffer per group of up
# to this many bytes (xla_gpu_all_reduce_combine_threshold_bytes' default), reduced in place
# and sliced back; a gradient larger than that is reduced in place on its own.
COMBINE_THRESHOLD = 30 * 2**20


def all_reduce_term(peak: int, categories: dict, gradients: int) -> dict:
    """What memlint's per-device peak would be if it modelled the data-parallel gradient
    all-reduce as the plans show it (a proposal, from memlint's own figures only): while
    the gradients are reduced every one of them is alive (G) beside the combined copy
    (min(G, 30 MiB)), with the weights, optimizer slots and the step's arguments
    ("other": data, targets, ...), the activations gone; the peak is the larger of that
    moment and memlint's own peak."""
    during = (categories.get("weights", 0) + categories.get("optimizer", 0)
              + categories.get("other", 0) + gradients + min(gradients, COMBINE_THRESHOLD))
    return {"gradient_bytes": gradients, "during_all_reduce": during,
            "peak": max(peak, during)}


def add_memlint(rows: list) -> None:
    for row in rows:
        for key in ("memlint", "relative_error", "twin_relative_error", "with_all_reduce_error",
                    "memlint_error"):
            row.pop(key, None)
        if "plan" not in row:
            continue
        try:
            row["memlint"] = memlint_side(row)
        except Exception as exc:  # noqa: BLE001 - recorded, the test reports it
            row["memlint_error"] = f"{type(exc).__name__}: {exc}"
            continue
        side = row["memlint"]
        if "peak" in side:
            row["relative_error"] = round((side["peak"] - row["plan"]["peak"])
                                          / row["plan"]["peak"], 4)
            row["twin_relative_error"] = round((side["twin_peak"] - row["twin_plan"]["peak"])
                                               / row["twin_plan"]["peak"], 4)
            row["with_all_reduce_error"] = round((side["with_all_reduce"]["peak"]
                                                  - row["plan"]["peak"]) / row["plan"]["peak"], 4)


def add_overhead(row: dict) -> None:
    """What distribution adds per device (the row's plan minus its one-device twin's), and
    the gradient all-reduce that explains it: G (the trainable bytes a device holds, what is
    all-reduced), the all-reduces and C, the bytes XLA's combiner copies them into."""
    plan, twin = row["plan"], row["twin_plan"]
    reduced = (row.get("collectives") or {}).get("all-reduce", {"count": 0, "bytes": []})
    row["overhead"] = {
        "peak": plan["peak"] - twin["peak"],
        "argument": plan["argument"] - twin["argument"],
        "temp": plan["temp"] - twin["temp"],
        "gradient_bytes": row["trainable_bytes_per_device"],
        "all_reduce_count": reduced["count"],
        "all_reduce_bytes": sum(reduced["bytes"]),
        "largest_all_reduce": max(reduced["bytes"], default=0),
        # C: what XLA copies into combined buffers (a single gradient above the threshold
        # is reduced in place)
        "combined_bytes": sum(b for b in reduced["bytes"] if b <= COMBINE_THRESHOLD)}


# --- the data file --------------------------------------------------------------------------

def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def memlint_state() -> dict:
    """The memlint the figures were computed with: the commit, and whether memlint/ had
    uncommitted changes then (with a hash of its files, to tell one working tree from
    another)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "memlint").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".yaml"):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    changed = _git("status", "--porcelain", "--", "memlint")
    return {"commit": _git("rev-parse", "--short", "HEAD"),
            "commit_date": _git("log", "-1", "--format=%cd", "--date=short"),
            "uncommitted_changes_in_memlint": bool(changed),
            "memlint_files_sha256": digest.hexdigest()[:16],
            "computed": _dt.date.today().isoformat()}


def figures(rows: list, groups=TABLE_GROUPS, key: str = "relative_error") -> dict:
    """Per target and over all targets: rows, median |error|, max |error|, rows beyond 20%
    (``key``: memlint's error, its twin's, or with the all-reduce term)."""
    out = {}
    for target in (*TARGETS, "all"):
        errors = [abs(r[key]) for r in rows if key in r
                  and r["group"] in groups and (target == "all" or r["target"] == target)]
        out[target] = {"n": len(errors),
                       "median": round(statistics.median(errors), 4) if errors else None,
                       "max": round(max(errors), 4) if errors else None,
                       "beyond_20": sum(e > 0.20 for e in errors)}
    return out


_ROW_ORDER = ("id", "target", "group", "note", "keras_file", "keras_text", "model",
              "optimizer_key", "optimizer", "optimizer_options", "dtype_policy", "devices",
              "mesh", "axes", "replicas", "global_batch", "per_device_batch", "plan",
              "twin_plan", "overhead", "collectives", "trainable_bytes",
              "trainable_bytes_per_device", "compile_s", "memlint", "relative_error",
              "twin_relative_error", "with_all_reduce_error", "memlint_input",
              "memlint_twin_input", "error", "memlint_error")


def save(data: dict, path: Path = DATA) -> None:
    """One row per line (readable diffs), meta first; no local paths in what is stored."""
    from harness import gpu_plan

    rows = [{**{k: r[k] for k in _ROW_ORDER if k in r},
             **{k: v for k, v in r.items() if k not in _ROW_ORDER}} for r in data["rows"]]
    lines = ["{", f' "meta": {json.dumps(data["meta"], indent=1)},', ' "rows": [']
    lines += [" " + json.dumps(r) + ("," if i < len(rows) - 1 else "") for i, r in enumerate(rows)]
    lines += [" ]", "}"]
    path.write_text(gpu_plan.without_local_paths("\n".join(lines) + "\n"),
                    encoding="utf-8")


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _summary(meta: dict, rows: list) -> None:
    meta["figures"] = figures(rows)
    meta["twin_figures"] = figures(rows, key="twin_relative_error")
    meta["with_all_reduce_figures"] = figures(rows, key="with_all_reduce_error")
    meta["sweep_figures"] = figures(rows, (SWEEP,))
    meta["memlint"] = memlint_state()


def generate(log=print) -> dict:
    started = time.monotonic()
    configs = configurations()
    log(f"{len(configs)} configurations x {len(TARGETS)} targets, one child per target")
    results, child_meta = run_children({t: configs for t in TARGETS}, log=log)
    rows = []
    for target in TARGETS:
        for config in configs:
            row = {**config, "target": target}
            result = results[(config["id"], target)]
            row.update({k: v for k, v in result.items() if k not in ("id", "target")})
            if "plan" in row:
                add_overhead(row)
            rows.append(row)
    add_memlint(rows)
    from harness import gpu_plan
    from harness.gpu_targets import targets
    meta = {
        "date": _dt.date.today().isoformat(),
        "seconds": round(time.monotonic() - started, 1), "cpus": os.cpu_count(),
        "versions": child_meta.get("versions"), "ptxas": gpu_plan.ptxas_version(),
        "targets": {k: targets()[k] for k in TARGETS},
        "how": "jax.jit(model.train_step, donate_argnums=0) lowered with ShapeDtypeStructs "
               "on a mesh of topologies.get_topology_desc(platform='cuda', target_config=..., "
               "topology='1x1xN'); data parallel: state P(), data P('batch'); model parallel: "
               "Keras's own variable layouts on a ('batch', 'model') mesh, data P('batch'); "
               "XLA_FLAGS=" + CHILD_FLAGS + " (CPU devices for Keras only; the GPU plans do "
               "not depend on it); the real ptxas, no fast-compile flags",
        "per_device": "compiled.memory_analysis() is per device; peak = argument + output - "
                      "alias + temp",
        "twin": "the same Keras model and state compiled for one device at the per-device "
                "batch (global batch / replicas)",
        "overhead": "plan peak - twin peak (per device); gradient_bytes is what each device "
                    "all-reduces (its trainable variables, float32)",
        "relative_error": "(memlint peak - XLA per-device peak) / XLA per-device peak; "
                          "memlint's xla profile through harness.proxy.memlint_estimate with "
                          "memlint's own per-device batch and sharded graph",
        "memlint_profile": "xla",
        "regenerate": REGENERATE, "refresh_memlint": REFRESH,
        "rows": len(rows), "compiled": sum("plan" in r for r in rows)}
    _summary(meta, rows)
    return {"meta": meta, "rows": rows}


def refresh_memlint(path: Path = DATA) -> dict:
    data = load(path)
    for row in data["rows"]:
        if "plan" in row:
            add_overhead(row)
    add_memlint(data["rows"])
    _summary(data["meta"], data["rows"])
    data["meta"]["memlint_refreshed"] = _dt.date.today().isoformat()
    return data


# --- the rotating sample --------------------------------------------------------------------

def sample(rows: list, count: int, day: _dt.date | None = None) -> list:
    """``count`` compiled rows, a different window each day (the same all day) over a fixed
    shuffle of the rows, so the stored table is recompiled over the weeks."""
    import random

    day = day or _dt.date.today()
    ok = sorted((r for r in rows if "plan" in r), key=lambda r: (r["id"], r["target"]))
    random.Random(0).shuffle(ok)
    if len(ok) <= count:
        return ok
    start = (day.toordinal() * count) % len(ok)
    return [ok[(start + i) % len(ok)] for i in range(count)]


def recompile(rows: list) -> dict:
    """XLA's figures for ``rows`` compiled again: {(id, target): result}."""
    configs = {}
    for row in rows:
        configs.setdefault(row["target"], []).append(
            {k: row[k] for k in ("id", "group", "keras_file", "keras_text", "model",
                                 "optimizer_key", "devices", "mesh", "axes", "replicas",
                                 "global_batch", "per_device_batch")})
    return run_children(configs, timeout=600)


# --- tables ---------------------------------------------------------------------------------

def _mb(n) -> str:
    return "" if n is None else f"{n / 1e6:,.2f}"


def _pct(row: dict, key: str) -> str:
    return f"{row[key]:+.1%}" if key in row else "n/a"


def markdown(data: dict) -> str:
    """The per-device table (memlint vs XLA per device, the one-device twin, what
    distribution adds and memlint with the all-reduce term) and the overhead sweep's table
    (XLA's temporaries against G + C)."""
    rows = data["rows"]
    head = ["| target | configuration | devices (mesh) | global / per-device batch | XLA per "
            "device | memlint per device | error | twin: XLA one device | twin: memlint | "
            "twin error | overhead (XLA) | G | memlint + all-reduce term | error |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: |"]
    lines = ["MB = 10^6 bytes, per device.", ""] + head
    for row in rows:
        if row["group"] not in TABLE_GROUPS:
            continue
        mesh = "x".join(str(d) for d in row["mesh"])
        if "plan" not in row:
            lines.append(f"| {row['target']} | {row['id']} | {row['devices']} ({mesh}) | "
                         f"{row['global_batch']} / {row['per_device_batch']} | not compiled: "
                         f"{row.get('error', '')[:70]}... |" + " |" * 9)
            continue
        side = row.get("memlint") or {}
        over = row["overhead"]
        lines.append(
            f"| {row['target']} | {row['id']} | {row['devices']} ({mesh}) | "
            f"{row['global_batch']} / {row['per_device_batch']} | {_mb(row['plan']['peak'])} | "
            f"{_mb(side.get('peak'))} | {_pct(row, 'relative_error')} | "
            f"{_mb(row['twin_plan']['peak'])} | {_mb(side.get('twin_peak'))} | "
            f"{_pct(row, 'twin_relative_error')} | {over['peak'] / 1e6:+,.2f} | "
            f"{_mb(over['gradient_bytes'])} | "
            f"{_mb((side.get('with_all_reduce') or {}).get('peak'))} | "
            f"{_pct(row, 'with_all_reduce_error')} |")
    lines.append("")
    for name, key in (("memlint", "relative_error"), ("its twin", "twin_relative_error"),
                      ("memlint + all-reduce term", "with_all_reduce_error")):
        for target, s in figures(rows, key=key).items():
            if s["n"]:
                lines.append(f"* {name}, {target}: {s['n']} rows, median |error| "
                             f"{s['median']:.1%}, max {s['max']:.1%}, beyond 20%: "
                             f"{s['beyond_20']}")
    lines += ["", "| target | configuration | params | per-device batch | XLA temp, N devices "
                  "| XLA temp, twin | G | G + C | all-reduces | overhead (peak) | memlint error "
                  "| + all-reduce term |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        if row["group"] != SWEEP or "plan" not in row:
            continue
        over = row["overhead"]
        lines.append(
            f"| {row['target']} | {row['id']} | {row['trainable_bytes'] // 4:,} | "
            f"{row['per_device_batch']} | {_mb(row['plan']['temp'])} | "
            f"{_mb(row['twin_plan']['temp'])} | {_mb(over['gradient_bytes'])} | "
            f"{_mb(over['gradient_bytes'] + over['combined_bytes'])} | "
            f"{over['all_reduce_count']} | {over['peak'] / 1e6:+,.2f} | "
            f"{_pct(row, 'relative_error')} | {_pct(row, 'with_all_reduce_error')} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.multi_device_plan",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--refresh-memlint", action="store_true",
                       help="recompute memlint's side of the stored rows only")
    group.add_argument("--table", action="store_true", help="print the tables (Markdown)")
    group.add_argument("--sample", type=int, metavar="N",
                       help="recompile today's rotating sample of N rows and compare")
    parser.add_argument("--output", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if args.child:
        child_main()
        return
    if args.table:
        print(markdown(load(args.output)))
        return
    if args.sample:
        stored = sample(load(args.output)["rows"], args.sample)
        fresh, _ = recompile(stored)
        for old in stored:
            new = fresh[(old["id"], old["target"])]
            print(f"{old['target']} {old['id']}: stored {old['plan']['peak']:,} now "
                  f"{(new.get('plan') or {}).get('peak')} {new.get('error', '')[:200]}")
        return
    started = time.monotonic()
    stamp = lambda m: print(f"[{time.monotonic() - started:7.1f}s] {m}", flush=True)  # noqa: E731
    data = refresh_memlint(args.output) if args.refresh_memlint else generate(stamp)
    save(data, args.output)
    stamp(f"wrote {args.output}")
    print(markdown(data))


if __name__ == "__main__":
    main(sys.argv[1:])
