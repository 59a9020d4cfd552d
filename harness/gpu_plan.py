"""The GPU-plan oracle: XLA's own memory plan of each fixture's Keras 3 JAX train (or predict)
step, compiled for a *described* NVIDIA GPU (H100, T4, A100: ``harness/gpu_targets.yaml``)
with no GPU present, next to memlint's ``xla``-profile estimate of the same model, batch,
optimizer and precision.  Harness and tests only: memlint never imports this.

How a plan is made (in a child process, ``python harness/gpu_plan.py --child``):
``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...)`` describes
one GPU, ``topologies.make_mesh`` gives a one-device mesh on it, and the step is lowered with
``jax.ShapeDtypeStruct``\\ s sharded on that mesh and compiled by the CUDA plugin's compiler
(cuDNN convolutions, cuBLAS / Triton GEMMs, ptxas), then
``compiled.memory_analysis()`` gives the argument, output, alias and temp bytes; the peak is
argument + output - alias + temp.  The train step is ``jax.jit(model.train_step,
donate_argnums=0)`` and the predict step Keras's ``make_predict_function`` wrapper with the
same donation, as Keras's JAX trainer builds them.  JAX runs with ``JAX_PLATFORMS=cpu``
(the CUDA plugin then registers its topology without looking for a driver), so Keras traces on
CPU devices: see ``CODE_PATHS``.

Commands (``python -m harness.gpu_plan ...``):

* ``--regenerate``: compile the whole matrix (``matrix()``) in parallel child processes and
  rewrite ``tests/data/gpu_plans.json`` (about 20 minutes on 2 CPUs);
* ``--update``: compile only the rows that are new (a new fixture) or whose fixture's Keras
  source changed, keep the rest, and recompute memlint's side of every row;
* ``--refresh-memlint``: recompute only memlint's side of the stored rows (seconds; after a
  change to memlint's memory model or frontend, when the XLA side has not changed);
* ``--table``: print the comparison tables (Markdown) from the stored data;
* ``--sample N``: recompile today's rotating sample of N stored rows and compare.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script (the child) as well as with -m
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "gpu_plans.json"
REGENERATE = "python -m harness.gpu_plan --regenerate"
REFRESH = "python -m harness.gpu_plan --refresh-memlint"
UPDATE = "python -m harness.gpu_plan --update"

# --- the matrix ---------------------------------------------------------------------------

MAIN_TARGETS = ("h100", "t4")
MAIN_BATCHES = (4, 32)
EXTRA_TARGET = "a100"  # every fixture at CROSS_BATCH
CROSS_BATCH = 32
INFER_TARGET = "h100"  # the predict step of every fixture at CROSS_BATCH
# every fixture's train step at a batch size training scripts use (the base batches are small)
LARGE_BATCH = 256
LARGE_TARGETS = MAIN_TARGETS
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
CROSS_OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")
# The fixtures that get the full optimizer x precision cross (one of each kind of model).
REPRESENTATIVE = {
    "fixtures/vgg_blocks_constants.py": "CNN (VGG blocks)",
    "fixtures/cifar_resnet_mini.py": "ResNet-like",
    "fixtures/lstm_sentiment_bidirectional.py": "LSTM (bidirectional)",
    "fixtures/transformer_text_classifier.py": "transformer",
    "fixtures/mnist_mlp_sgd.py": "MLP",
    "fixtures/gan_nested_models.py": "GAN / nested models",
    "fixtures/video_conv3d.py": "Conv3D",
    "fixtures/depth_research/video_convlstm_nextframe.py": "ConvLSTM",
}
OWN = "own"  # the fixture's own optimizer (Adam where its code compiles none)
DEVICE = "device"  # a config's target: the process's own GPU, not a described one

MATRIX_DESCRIPTION = (
    "every fixture's largest model (fixtures/**/*.py as harness.proxy.fixture_files gives, "
    "the model memlint finds with the most parameters), MSE loss on every output: "
    "(base) train step, the fixture's own optimizer (Adam where it compiles none), float32 "
    "(or the policy the fixture sets itself), on h100 and t4 at batch 4 and 32, and on a100 "
    "at batch 32; (infer) the predict step on h100 at batch 32; (large) train step, own "
    "optimizer, float32, on h100 and t4 at batch 256; (cross) for the "
    f"{len(REPRESENTATIVE)} representative fixtures, train step on h100 and t4 at batch 32 "
    "with sgd, sgd_momentum, adam, adamw, rmsprop, adagrad x float32, mixed_float16, "
    "mixed_bfloat16")

# What Keras chooses when it traces the step here, and why (the figures in meta.code_paths
# are what the child process found; this is the explanation stored beside them).
CODE_PATHS = (
    "JAX runs on CPU devices (JAX_PLATFORMS=cpu; the CUDA plugin only compiles), so Keras "
    "traces its generic code paths: attention is XLA's plain dot-product attention, never "
    "cuDNN flash attention (Keras's _can_use_flash_attention needs cuDNN's version and the "
    "compute capability of jax.devices()[0], a CPU here, and nvidia-cudnn-cu12 is not "
    "installed); LSTM and GRU run Keras's lax.scan loop, never the cuDNN RNN (cudnn_ok needs "
    "jax.default_backend() == 'gpu', and the cuDNN RNN custom call cannot be sized without "
    "a device).  What the GPU compiler itself picks is in the plan: cuDNN convolutions, "
    "cuBLAS(Lt) / Triton GEMMs, XLA fusions for the target's compute capability (each row's "
    "`kernels` counts the custom calls).  Without a device XLA does not autotune, so "
    "convolution workspace is 0 in the plan (cuDNN's real workspace is not counted); "
    "cuBLASLt's fixed workspace is.")

# Compiling for a GPU runs ptxas once per kernel module (tens of times per step), and that is
# a large part of the time; the buffer assignment (what memory_analysis() reports) is made on
# the HLO before LLVM and ptxas run.  So the matrix is generated with ptxas at -O0 and LLVM's
# cheap pipeline (FAST_COMPILE) and with a stand-in ptxas that reports the real one's version
# and writes an empty cubin (PTXAS_SHIM).  Neither changes the plan: ``--regenerate`` checks a
# few rows against the real toolchain (meta.fast_compile_checked), and the CI sample
# (tests/test_gpu_plan.py) recompiles with the real ptxas and no flags.
# XLA's kernel cache (GPU_PLAN_KERNEL_CACHE, per worker and target) spares re-emitting the
# kernels earlier compilations of the same worker emitted, likewise after buffer assignment.
FAST_COMPILE = ("--xla_gpu_disable_gpuasm_optimizations=true "
                "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true")
PTXAS_SHIM = """#!/bin/sh
for a in "$@"; do [ "$a" = "--version" ] && exec '{real}' --version; done
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
[ -n "$out" ] && : > "$out"
exit 0
"""


def real_ptxas():
    """The ptxas XLA would use: on PATH, in /usr/local/cuda, or from the
    nvidia-cuda-nvcc-cu12 wheel (the gpuplan extra installs it; the CUDA plugin is built
    without libnvptxcompiler, so compiling for a GPU needs ptxas)."""
    import shutil
    import site

    found = shutil.which("ptxas")
    if found:
        return found
    candidates = [Path("/usr/local/cuda/bin/ptxas")]
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        candidates.append(Path(base) / "nvidia" / "cuda_nvcc" / "bin" / "ptxas")
    return next((str(c) for c in candidates if c.exists()), None)


def ptxas_version():
    real = real_ptxas()
    if real is None:
        return None
    try:
        text = subprocess.run([real, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return real
    release = re.search(r"release [^\n]*", text)
    return release.group(0) if release else real


def ptxas_shim_dir():
    """A folder holding the stand-in ptxas (None where there is no real one to ask for the
    version: XLA then reports the missing ptxas itself)."""
    real = real_ptxas()
    if real is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="gpu_plan_ptxas_"))
    shim = folder / "ptxas"
    shim.write_text(PTXAS_SHIM.format(real=real.replace("'", "")))
    shim.chmod(0o755)
    return folder


def today() -> _dt.date:
    return _dt.date.today()


# --- the child process ----------------------------------------------------------------------

def _mesh(target: str, cache: dict):
    from jax.experimental import topologies

    from harness.gpu_targets import target_config

    if target not in cache and target == DEVICE:  # the real GPU (harness.device_plan)
        import jax
        import numpy as np

        cache[target] = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    if target not in cache:
        topology = topologies.get_topology_desc(platform="cuda",
                                                target_config=target_config(target),
                                                topology="1x1x1")
        cache[target] = topologies.make_mesh(topology, (1,), ("x",))
    return cache[target]


def _specs(tree, mesh, batch=None):
    """ShapeDtypeStructs of ``tree`` sharded (replicated) on the target's mesh; with
    ``batch``, the leading (batch) dimension of every array replaced."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec())

    def spec(a):
        shape = tuple(a.shape)
        if batch is not None and shape:
            shape = (batch,) + shape[1:]
        return jax.ShapeDtypeStruct(shape, a.dtype, sharding=sharding)

    return jax.tree.map(spec, tree)


def keras_predict_step(model):
    """(jitted predict step, state): the function Keras's JAX ``make_predict_function``
    jits, with its donation of the state."""
    import jax

    def predict_step(state, data):
        outputs, non_trainable_variables = model.predict_step(state, data)
        return outputs, (state[0], non_trainable_variables)

    state = (tuple(v.value for v in model.trainable_variables),
             tuple(v.value for v in model.non_trainable_variables))
    return jax.jit(predict_step, donate_argnums=0), state


_CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')
_CONV_SCRATCH = re.compile(r"u8\[(\d+)\]\{0\}\) custom-call\([^\n]*custom_call_target=\"__cudnn")


def kernels(compiled) -> tuple:
    """({custom-call target: count}, cuDNN convolution scratch bytes) of the optimized HLO."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - only a description
        return {}, None
    counts: dict = {}
    for name in _CUSTOM_CALL.findall(text):
        counts[name] = counts.get(name, 0) + 1
    return counts, sum(int(n) for n in _CONV_SCRATCH.findall(text))


def rematerialised(compiled) -> Optional[int]:
    """How many instructions XLA's rematerialisation recomputed (``.remat`` in their names):
    it does so when the step's plan would not fit the described GPU's memory, and the plan
    is then of another program than the step (None when the HLO cannot be read)."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - only a description
        return None
    return len(set(_REMAT.findall(text)))


_REMAT = re.compile(r"%([\w.-]*\.remat[\w.-]*) = ")
_CUSTOM_CALL_LINE = re.compile(r"= (.+?) custom-call\([^\n]*custom_call_target=\"([^\"]+)\"")
_LAYOUT = re.compile(r"\{[^{}]*\}")


def library_calls(compiled) -> list:
    """Every custom call of the optimized HLO (cuDNN, cuBLAS, cuDNN's RNN) with the shapes it
    returns, layouts dropped: its workspace and reserve space are ``u8[...]`` outputs, which is
    what the memory model needs to size them."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - only a description
        return []
    return [{"target": target, "outputs": _LAYOUT.sub("", shape)[:400]}
            for shape, target in _CUSTOM_CALL_LINE.findall(text)]


def _code_paths() -> dict:
    """What Keras decides on this process's devices (see CODE_PATHS)."""
    import importlib.util

    import jax
    import jax.numpy as jnp

    try:
        cudnn = importlib.util.find_spec("nvidia.cudnn") is not None
    except ImportError:  # no nvidia namespace package at all
        cudnn = False
    out = {"jax_default_backend": jax.default_backend(),
           "jax_device_platform": jax.devices()[0].platform, "nvidia_cudnn_installed": cudnn}
    try:
        from keras.src.backend.jax import nn as jax_nn
        q = jnp.zeros((2, 128, 4, 64), "float16")
        out["keras_flash_attention"] = bool(jax_nn._can_use_flash_attention(q, q, q, None))
    except Exception as exc:  # noqa: BLE001
        out["keras_flash_attention"] = f"unknown ({type(exc).__name__})"
    try:
        from keras.src import activations
        from keras.src.backend.jax import rnn as jax_rnn
        out["keras_cudnn_lstm"] = bool(jax_rnn.cudnn_ok(activations.tanh,
                                                        activations.sigmoid, False))
    except Exception as exc:  # noqa: BLE001
        out["keras_cudnn_lstm"] = f"unknown ({type(exc).__name__})"
    return out


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin",
                 "jax-cuda13-pjrt", "keras"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _compile_options(target: str) -> dict:
    """Per-compilation XLA options: with GPU_PLAN_KERNEL_CACHE (a folder, set by the driver
    for the fast runs), XLA's kernel cache, one file per target and worker, so that kernels
    an earlier compilation of the same worker emitted are not emitted again (the cubins are
    empty anyway with the stand-in ptxas; the buffer assignment comes before)."""
    folder = os.environ.get("GPU_PLAN_KERNEL_CACHE")
    if not folder:
        return {}
    return {"xla_gpu_kernel_cache_file": str(Path(folder) / f"{target}.bin"),
            "xla_gpu_enable_llvm_module_compilation_parallelism": True}


def _run_job(job: dict, meshes: dict):
    """Yield one result per config of ``job``: build the model under the job's dtype
    policy, compile it with its optimizer, lower and compile each (target, batch, mode)."""
    from harness.fixture_exec import FixtureError
    from harness.keras_step import fixture_model, jax_train_step, memory_plan, random_batch
    from harness.xla_liveness import DUMP_OPTIONS, live_temp

    def failed(message, configs=None):
        for config in configs or job["configs"]:
            yield {"job": job["id"], **config, "error": message}

    try:
        model, name, options, policy, loss_scale = fixture_model(
            ROOT / job["file"], job["model"], job["precision"], job["optimizer"])
    except FixtureError as exc:
        yield from failed(str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - a model Keras cannot compile is data
        yield from failed(f"{type(exc).__name__}: {exc}")
        return
    try:
        x, y = random_batch(model, 2, input_shapes=job.get("input_shapes"))
        train = infer = None
        if any(c["mode"] == "train" for c in job["configs"]):
            train = jax_train_step(model, x, y)
        if any(c["mode"] == "infer" for c in job["configs"]):
            infer = keras_predict_step(model)
    except Exception as exc:  # noqa: BLE001
        yield from failed(f"{type(exc).__name__}: {exc}")
        return
    for config in job["configs"]:
        out = {"job": job["id"], **config, "optimizer": name, "optimizer_options": options,
               "dtype_policy": policy, "loss_scale": loss_scale}
        try:
            mesh = _mesh(config["target"], meshes)
            started = time.perf_counter()
            if config["mode"] == "train":
                step, state, _ = train
                lowered = step.lower(_specs(state, mesh), _specs((x, y, None), mesh,
                                                                 config["batch"]))
            else:
                step, state = infer
                lowered = step.lower(_specs(state, mesh), _specs((x,), mesh, config["batch"]))
            with tempfile.TemporaryDirectory(prefix="xla-dump-") as dump:
                compiled = lowered.compile(compiler_options={
                    **_compile_options(config["target"]), "xla_dump_to": dump, **DUMP_OPTIONS})
                out["compile_s"] = round(time.perf_counter() - started, 2)
                plan = memory_plan(compiled)
                plan.pop("generated_code", None)
                # the most bytes of temporaries alive at once (harness.xla_liveness)
                plan["live_temp"] = live_temp(
                    dump, "train_step" if config["mode"] == "train" else "predict_step")
            out["plan"] = plan
            out["kernels"], out["conv_scratch"] = kernels(compiled)
            out["rematerialised"] = rematerialised(compiled)
            if config["target"] == DEVICE:  # what the GPU's libraries were given
                out["library_calls"] = library_calls(compiled)
        except Exception as exc:  # noqa: BLE001
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        yield out


def child_main() -> None:
    """stdin: ``{"jobs": [{"id", "file", "model", "precision", "optimizer", "input_shapes",
    "configs": [{"target", "batch", "mode"}]}]}``; stdout: one JSON object per line, first
    ``{"meta": ...}`` then one result per config, flushed as it comes (a crash loses only
    the configuration being compiled)."""
    os.environ["KERAS_BACKEND"] = "jax"
    if os.environ.get("GPU_PLAN_ON_DEVICE") != "1":
        os.environ["JAX_PLATFORMS"] = "cpu"  # before jax: the CUDA plugin then skips its checks
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the fixtures, Keras or XLA print goes to stderr
    request = json.load(sys.stdin)

    import jax  # noqa: F401 - imported with the environment above
    import keras  # noqa: F401

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    emit({"meta": {"versions": _versions(), "code_paths": _code_paths()}})
    meshes: dict = {}
    for job in request["jobs"]:
        print(f"[gpu_plan] {job['file']}::{job['model']} {job['precision']} "
              f"{job['optimizer'] or OWN}", file=sys.stderr, flush=True)
        for result in _run_job(job, meshes):
            emit(result)


# --- the driver -----------------------------------------------------------------------------

def child_pythonpath() -> str:
    """A child process's PYTHONPATH: the repository, then the caller's (where a GPU machine's
    carried wheels are)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


def child_env(shim=None, on_device: bool = False) -> dict:
    """The child's environment; with ``shim`` (a folder from :func:`ptxas_shim_dir`),
    FAST_COMPILE and the stand-in ptxas; ``on_device``: JAX sees the machine's GPU (configs
    whose target is DEVICE), and preallocates nothing."""
    flags = (os.environ.get("XLA_FLAGS", "") + " " + (FAST_COMPILE if shim else "")).strip()
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=child_pythonpath(), XLA_FLAGS=flags)
    if on_device:
        del env["JAX_PLATFORMS"]
        env.update(GPU_PLAN_ON_DEVICE="1", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if shim is not None:
        env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_jobs(jobs: list, workers: int = 0, chunk: int = 0, log=None, fast: bool = True,
             job_timeout: int = 300, on_device: bool = False, stop_at=None) -> tuple:
    """Run ``jobs`` in child processes, ``workers`` at once (one per CPU by default), a chunk
    of jobs per child.  Returns ({job id: [results]}, child meta).  A child that dies or runs
    out of time loses only the job it was on (recorded as an error); the rest of its chunk
    goes to a new child.  ``stop_at`` (a ``time.monotonic()`` value): no child is started
    after it (the jobs left have no result)."""
    workers = workers or max(1, min(os.cpu_count() or 1, 4))
    chunk = chunk or max(1, min(25, -(-len(jobs) // (workers * 4))))
    queue = [jobs[i:i + chunk] for i in range(0, len(jobs), chunk)]
    results: dict = {}
    meta: dict = {}
    running = []
    logdir = Path(tempfile.mkdtemp(prefix="gpu_plan_"))
    count = 0
    shim = ptxas_shim_dir() if fast else None
    env = child_env(shim, on_device)
    failures = 0

    free_slots = list(range(workers))

    def start(share):
        nonlocal count
        count += 1
        slot = free_slots.pop(0)
        child = dict(env)
        if shim is not None:  # the fast runs: a kernel cache per worker slot
            child["GPU_PLAN_KERNEL_CACHE"] = str(shim / f"kernels-{slot}")
            Path(child["GPU_PLAN_KERNEL_CACHE"]).mkdir(exist_ok=True)
        errfile = (logdir / f"child-{count}.log").open("w")
        outfile = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen([sys.executable, str(ROOT / "harness" / "gpu_plan.py"),
                                 "--child"], stdin=subprocess.PIPE, stdout=outfile,
                                stderr=errfile, text=True, cwd=ROOT, env=child)
        proc.stdin.write(json.dumps({"jobs": share}))
        proc.stdin.close()
        deadline = time.monotonic() + 90 + job_timeout * len(share)
        running.append((proc, share, outfile, errfile, deadline, slot))

    def finish(proc, share, outfile, errfile, timed_out):
        errfile.close()
        outfile.seek(0)
        done = set()
        for line in outfile:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if "meta" in item:
                meta.update(item["meta"])
                continue
            results.setdefault(item["job"], []).append(item)
            done.add((item["job"], item["target"], item["batch"], item["mode"]))
        outfile.close()
        left = [j for j in share if any((j["id"], c["target"], c["batch"], c["mode"])
                                        not in done for c in j["configs"])]
        if proc.returncode == 0 and not left:
            return
        tail = Path(errfile.name).read_text(errors="replace")[-600:]
        if left:  # the job it was on failed; the ones after it get a new child
            first = left[0]
            why = "timed out" if timed_out else f"child process died (exit {proc.returncode})"
            for c in first["configs"]:
                if (first["id"], c["target"], c["batch"], c["mode"]) not in done:
                    results.setdefault(first["id"], []).append(
                        {"job": first["id"], **c, "error": f"{why}: {tail[-300:]}"})
            if left[1:]:
                queue.insert(0, left[1:])
        nonlocal failures
        failures += 1
        if log:
            log(f"child {proc.pid} exit {proc.returncode}{' (timeout)' if timed_out else ''}; "
                f"log {errfile.name}")

    total = len(jobs)
    while queue or running:
        if stop_at is not None and time.monotonic() > stop_at:
            queue.clear()
        while queue and len(running) < workers:
            start(queue.pop(0))
        time.sleep(0.5)
        for item in list(running):
            proc, share, outfile, errfile, deadline, slot = item
            timed_out = proc.poll() is None and time.monotonic() > deadline
            if timed_out:
                proc.kill()
                proc.wait()
            if proc.poll() is not None:
                running.remove(item)
                free_slots.append(slot)
                finish(proc, share, outfile, errfile, timed_out)
                if log:
                    log(f"{len(results)}/{total} jobs done")
    import shutil
    if shim is not None:
        shutil.rmtree(shim, ignore_errors=True)
    if not failures:
        shutil.rmtree(logdir, ignore_errors=True)
    return results, meta


def _graphs(paths=None) -> dict:
    from harness import proxy

    return proxy.memlint_graphs(paths or proxy.fixture_files(), one_per_file=True)


def _input_shapes(graph):
    return [list(s[1:]) for s in graph.input_shapes] if graph.input_shapes else None


def matrix(graphs: dict) -> list:
    """The configurations as rows without results: one per (fixture, model, target, batch,
    optimizer, precision, mode), each with the matrix part it belongs to."""
    rows = []
    for (fixture, model) in sorted(graphs):
        def add(part, target, batch, optimizer=OWN, precision="float32", mode="train"):
            rows.append({"part": part, "target": target, "fixture": fixture, "model": model,
                         "batch": batch, "optimizer_key": optimizer,
                         "precision_requested": precision, "mode": mode})
        for target in MAIN_TARGETS:
            for batch in MAIN_BATCHES:
                add("base", target, batch)
        add("base", EXTRA_TARGET, CROSS_BATCH)
        add("infer", INFER_TARGET, CROSS_BATCH, mode="infer")
        for target in LARGE_TARGETS:
            add("large", target, LARGE_BATCH)
        if fixture in REPRESENTATIVE:
            for precision in PRECISIONS:
                for optimizer in CROSS_OPTIMIZERS:
                    for target in MAIN_TARGETS:
                        add("cross", target, CROSS_BATCH, optimizer, precision)
    return rows


def first_fixtures(rows: list, limit: int) -> list:
    """The rows of the first ``limit`` fixtures by path (all with ``limit`` 0: ``--limit``)."""
    if not limit:
        return rows
    keep = sorted({r["fixture"] for r in rows})[:limit]
    return [r for r in rows if r["fixture"] in keep]


def row_key(row: dict) -> tuple:
    return (row["target"], row["fixture"], row["model"], row["batch"], row["optimizer_key"],
            row["precision_requested"], row["mode"])


def jobs_for(rows: list, graphs: dict) -> tuple:
    """(jobs, {job id: [row indices]}): rows grouped by the Keras source actually executed
    (a fixture's ``# oracle-twin:``), model, precision and optimizer, so that one build of a
    model serves every target, batch and mode and twins compile once."""
    from harness import proxy

    groups: dict = {}
    for index, row in enumerate(rows):
        source = str(proxy.keras_source(ROOT / row["fixture"]).relative_to(ROOT))
        key = (source, row["model"], row["precision_requested"], row["optimizer_key"])
        groups.setdefault(key, []).append(index)
    jobs, members = [], {}
    for number, (key, indices) in enumerate(sorted(groups.items())):
        source, model, precision, optimizer = key
        configs = sorted({(rows[i]["target"], rows[i]["batch"], rows[i]["mode"])
                          for i in indices})
        graph = graphs.get((rows[indices[0]]["fixture"], model))
        jobs.append({"id": number, "file": source, "model": model, "precision": precision,
                     "optimizer": None if optimizer == OWN else optimizer,
                     "input_shapes": _input_shapes(graph) if graph is not None else None,
                     "configs": [{"target": t, "batch": b, "mode": m} for t, b, m in configs]})
        members[number] = indices
    return jobs, members


def source_sha(fixture: str) -> str:
    """A hash of the Keras source a fixture's plan was compiled from (its ``# oracle-twin:``
    or itself): a row whose fixture changed since is stale (``--update`` recompiles it)."""
    import hashlib

    from harness import proxy

    source = proxy.keras_source(ROOT / fixture)
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16]


def fill(rows: list, jobs: list, members: dict, results: dict) -> None:
    """Copy each config's result into the rows it serves."""
    for job in jobs:
        by_config = {(r["target"], r["batch"], r["mode"]): r for r in results.get(job["id"], [])}
        for index in members[job["id"]]:
            row = rows[index]
            result = by_config.get((row["target"], row["batch"], row["mode"]))
            if result is None:
                row["error"] = "no result from the child process"
                continue
            row["keras_source"] = job["file"]
            row["source_sha"] = source_sha(row["fixture"])
            for key in ("optimizer", "optimizer_options", "dtype_policy", "loss_scale",
                        "plan", "compile_s", "kernels", "conv_scratch", "rematerialised",
                        "error"):
                if key in result:
                    row[key] = result[key]


# --- memlint's side -------------------------------------------------------------------------

def memlint_side(graph, row: dict) -> dict:
    """memlint's ``xla``-profile breakdown for the row's batch, mode, optimizer and precision
    (the policy Keras actually used) on the row's GPU, as stored in the row's ``memlint``
    field."""
    from harness import proxy
    from harness.gpu_targets import targets

    breakdown = proxy.memlint_estimate(graph, {
        "batch": row["batch"], "mode": row["mode"], "optimizer": row["optimizer"],
        "optimizer_options": row.get("optimizer_options") or {},
        "dtype_policy": row["dtype_policy"]}, "xla",
        compute_capability=tuple(targets()[row["target"]]["compute_capability"]))
    return {"peak": breakdown.peak, "complete": breakdown.complete,
            "parts": {p.name: p.bytes for p in breakdown.parts},
            "categories": {k: v for k, v in breakdown.as_dict().items() if k != "peak"}}


def add_memlint(rows: list, graphs: dict) -> None:
    attach_memlint(rows, graphs, "plan", memlint_side)


def attach_memlint(rows: list, graphs: dict, measured: str, side) -> None:
    """memlint's side of each row (``side(graph, row)``, a dict with a ``peak``) beside what
    was measured (``row[measured]["peak"]``), and the relative error; rows without a
    measurement or with an error get neither, a model memlint no longer finds an error."""
    for row in rows:
        for key in ("memlint", "relative_error", "memlint_error"):
            row.pop(key, None)
        if measured not in row or "error" in row:
            continue
        graph = graphs.get((row["fixture"], row["model"]))
        if graph is None:
            row["memlint_error"] = "memlint finds no such model now"
            continue
        row["memlint"] = side(graph, row)
        peak = row[measured]["peak"]
        row["relative_error"] = round((row["memlint"]["peak"] - peak) / peak, 4) if peak else 0.0


BASELINE_KEY = "memlint_v1"


def memlint_at(ref: str, rows: list) -> list:
    """memlint's side of ``rows`` as memlint at git ``ref`` computes it: that commit's
    ``memlint/`` and ``rules/`` (``git archive``, nothing in the work tree touched) run in a
    subprocess with this harness.  Returns one ``memlint`` dict (or None) per row."""
    import io
    import tarfile

    folder = Path(tempfile.mkdtemp(prefix="gpu_plan_memlint_"))
    archive = subprocess.run(["git", "archive", ref, "memlint", "rules"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder)  # noqa: S202 - our own repository
    fields = ("target", "fixture", "model", "batch", "mode", "optimizer", "optimizer_options",
              "dtype_policy")
    request = [{k: r.get(k) for k in fields} if "plan" in r else None for r in rows]
    env = dict(os.environ, PYTHONPATH=f"{folder}{os.pathsep}{ROOT}")
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from harness.gpu_plan import memlint_child; "
                           "memlint_child()"], input=json.dumps(request), text=True,
                          capture_output=True, cwd=folder, env=env)
    import shutil
    shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"memlint at {ref} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def memlint_child() -> None:
    """stdin: a list of rows (or nulls); stdout: memlint's side of each with the memlint
    this process imports."""
    import memlint

    request = json.load(sys.stdin)
    print(f"memlint from {Path(memlint.__file__).parent}", file=sys.stderr)
    paths = sorted({ROOT / r["fixture"] for r in request if r})
    graphs = _graphs(paths)
    out = []
    for row in request:
        graph = graphs.get((row["fixture"], row["model"])) if row else None
        out.append(memlint_side(graph, row) if graph is not None else None)
    json.dump(out, sys.stdout)


def add_baseline(rows: list, ref: str, meta: dict) -> None:
    """Store memlint at ``ref`` (memory model v1: the figures before the rewrite) beside the
    current memlint, once: later refreshes keep it."""
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, text=True,
                            capture_output=True, check=True).stdout.strip()
    for row, side in zip(rows, memlint_at(ref, rows)):
        row.pop(BASELINE_KEY, None)
        if side is not None:
            side["relative_error"] = round((side["peak"] - row["plan"]["peak"])
                                           / row["plan"]["peak"], 4)
            row[BASELINE_KEY] = side
    meta[BASELINE_KEY] = {"ref": ref, "commit": commit, "computed": today().isoformat(),
                          "what": "memlint's xla profile as committed before the memory-model "
                                  "rewrite (memory model v1), kept as the baseline"}


def add_cpu_plans(rows: list) -> None:
    """The CPU plan (tests/data/xla_proxy.json: batch 4, own optimizer, float32, train)
    beside the rows of the same configuration."""
    from harness import proxy

    stored = {(r["fixture"], r["model"]): r for r in
              json.loads(proxy.DATA.read_text())["rows"] if "xla_peak" in r}
    for row in rows:
        cpu = stored.get((row["fixture"], row["model"]))
        if (cpu and row["mode"] == "train" and row["optimizer_key"] == OWN
                and row["precision_requested"] == "float32" and row["batch"] == cpu["batch"]):
            row["cpu_plan"] = {"peak": cpu["xla_peak"], **cpu["xla_plan"]}


# --- storing --------------------------------------------------------------------------------

_ROW_ORDER = ("part", "target", "fixture", "model", "keras_source", "source_sha", "params",
              "input_shapes",
              "batch", "mode",
              "optimizer_key", "optimizer", "optimizer_options", "precision_requested",
              "dtype_policy", "loss_scale", "plan", "compile_s", "kernels", "conv_scratch",
              "rematerialised", "memlint", "relative_error", BASELINE_KEY, "cpu_plan", "error",
              "memlint_error")


def _ordered(row: dict) -> dict:
    out = {k: row[k] for k in _ROW_ORDER if k in row}
    out.update({k: v for k, v in row.items() if k not in out})
    return out


def without_local_paths(text: str) -> str:
    """``text`` with this checkout's folder and the interpreter's package folders written as
    placeholders: stored errors name files the way any checkout would."""
    import site
    import sysconfig

    folders = {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib"),
               *site.getsitepackages()}
    for folder in sorted((f for f in folders if f), key=len, reverse=True):
        text = text.replace(folder.rstrip("/") + "/", "<site-packages>/")
    return text.replace(str(ROOT) + "/", "")


def save(data: dict, path: Path = DATA) -> None:
    """One row per line (readable diffs), meta first; no local paths in what is stored."""
    rows = [_ordered(r) for r in data["rows"]]
    lines = ["{", f' "meta": {json.dumps(data["meta"], indent=1)},', ' "rows": [']
    lines += [" " + json.dumps(r, sort_keys=False) + ("," if i < len(rows) - 1 else "")
              for i, r in enumerate(rows)]
    lines += [" ]", "}"]
    path.write_text(without_local_paths("\n".join(lines) + "\n"), encoding="utf-8")


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# --- the rotating sample --------------------------------------------------------------------

def sample(rows: list, count: int, day: _dt.date | None = None) -> list:
    """``count`` compiled rows chosen by the date (the same rows all day, others tomorrow),
    at most one per fixture, spread over the targets and the parts of the matrix."""
    day = day or today()
    rng = random.Random(day.toordinal())
    ok = [r for r in rows if "plan" in r and "error" not in r]
    rng.shuffle(ok)
    chosen, fixtures, seen = [], set(), {}
    for spread in (True, False):  # first a new (target, part) each time where possible
        for row in ok:
            key = (row["target"], row["part"])
            if row["fixture"] in fixtures or (spread and seen.get(key, 0) >= 1):
                continue
            chosen.append(row)
            fixtures.add(row["fixture"])
            seen[key] = seen.get(key, 0) + 1
            if len(chosen) == count:
                return chosen
    return chosen


def recompile(rows: list, workers: int = 0, fast: bool = True) -> tuple:
    """Compile ``rows`` again (no memlint needed); returns (rows with fresh results, meta)."""
    fresh = [{k: r[k] for k in ("part", "target", "fixture", "model", "batch",
                                "optimizer_key", "precision_requested", "mode")} for r in rows]
    graphs = {}
    input_shapes = {(r["fixture"], r["model"]): r.get("input_shapes") for r in rows}
    jobs, members = jobs_for(fresh, graphs)
    for job in jobs:
        first = fresh[members[job["id"]][0]]
        job["input_shapes"] = input_shapes.get((first["fixture"], first["model"]))
    workers = workers or max(1, min(os.cpu_count() or 1, 4))
    results, meta = run_jobs(jobs, workers=workers, chunk=max(1, -(-len(jobs) // workers)),
                             fast=fast)
    fill(fresh, jobs, members, results)
    return fresh, meta


# --- commands -------------------------------------------------------------------------------

def _installed(versions: dict) -> dict:
    """The packages of a versions record that are installed (a package the record names as
    absent, None, is left out: records made before it was listed do not name it)."""
    return {name: version for name, version in versions.items() if version is not None}


def generate(previous: dict | None = None, workers: int = 0, limit: int = 0,
             log=print, retry_failed: bool = False) -> dict:
    """The data file's content: every row of the matrix for the fixtures memlint finds now.
    With ``previous`` (``--update``), rows whose configuration and Keras source are unchanged
    are kept as they are and only the others compiled (with ``retry_failed``, the rows that
    failed are compiled again too: after a change to the harness); without it, everything
    is."""
    from harness.gpu_targets import targets

    started = time.monotonic()
    graphs = _graphs()
    rows = first_fixtures(matrix(graphs), limit)
    stored = {row_key(r): r for r in (previous or {}).get("rows", [])}
    kept = set()
    for index, row in enumerate(rows):
        graph = graphs[(row["fixture"], row["model"])]
        old = stored.get(row_key(row))
        if old is not None and old.get("source_sha") == source_sha(row["fixture"]) \
                and not (retry_failed and "error" in old):
            rows[index] = old  # compiled or failed before, from the same source
            kept.add(index)
            continue
        row["params"] = graph.params
        if _input_shapes(graph):  # used only where Keras's model has no inputs of its own
            row["input_shapes"] = _input_shapes(graph)
    todo = [r for i, r in enumerate(rows) if i not in kept]
    jobs, members = jobs_for(todo, graphs)
    log(f"{len(rows)} rows ({len(kept)} kept), {len(jobs)} model builds, "
        f"{sum(len(j['configs']) for j in jobs)} compilations")
    results, child_meta = run_jobs(jobs, workers=workers, log=log) if jobs else ({}, {})
    fill(todo, jobs, members, results)
    for row in rows:
        row["params"] = graphs[(row["fixture"], row["model"])].params
    add_memlint(rows, graphs)
    add_cpu_plans(rows)
    seconds = round(time.monotonic() - started, 1)
    meta = dict((previous or {}).get("meta", {}))
    if jobs and not previous:
        meta["fast_compile_checked"] = check_fast_compile(rows, log=log)
    if previous:
        versions = child_meta.get("versions")
        if versions and meta.get("versions") and _installed(versions) != _installed(
                meta["versions"]):
            raise SystemExit(f"the installed versions {versions} differ from the stored "
                             f"{meta['versions']}: run {REGENERATE}")
        meta["updated"] = today().isoformat()
        meta["update_seconds"] = seconds
        meta["update_compiled_rows"] = len(todo)
    else:
        meta.update({"date": today().isoformat(), "seconds": seconds})
    meta.update({
        "versions": child_meta.get("versions") or meta.get("versions"),
        "code_paths": child_meta.get("code_paths") or meta.get("code_paths"),
        "code_paths_note": CODE_PATHS,
        "matrix": MATRIX_DESCRIPTION,
        "representative": REPRESENTATIVE,
        "targets": {k: targets()[k] for k in (*MAIN_TARGETS, EXTRA_TARGET)},
        "fast_compile": f"XLA_FLAGS={FAST_COMPILE!r}, a stand-in ptxas (PTXAS_SHIM) and "
                        "XLA's kernel cache per worker and target",
        "ptxas": ptxas_version(),
        "memlint_profile": "xla",
        "peak": "argument + output - alias + temp (XLA's memory_analysis of the compiled step)",
        "relative_error": "(memlint peak - plan peak) / plan peak",
        "rows": len(rows), "compiled": sum("plan" in r for r in rows),
        "failed": sum("error" in r for r in rows),
        "cpus": os.cpu_count(),
        "regenerate": REGENERATE, "update": UPDATE, "refresh_memlint": REFRESH})
    meta.pop("memlint_refreshed", None)
    return {"meta": meta, "rows": rows}


def check_fast_compile(rows: list, count: int = 4, log=print) -> list:
    """Recompile a few rows with the real ptxas and without ``FAST_COMPILE``, and record
    whether the plans are the same (they must be: both act after buffer assignment)."""
    chosen = sample(rows, count, today() + _dt.timedelta(days=1000))
    if not chosen:
        return []
    fresh, _ = recompile(chosen, fast=False)
    out = []
    for old, new in zip(chosen, fresh):
        out.append({"row": f"{old['target']} {old['fixture']}::{old['model']} "
                           f"b{old['batch']} {old['optimizer_key']} "
                           f"{old['precision_requested']} {old['mode']}",
                    "same": new.get("plan") == old.get("plan")})
    log(f"plans with the real ptxas, without FAST_COMPILE: {out}")
    return out


def refresh_memlint(path: Path = DATA) -> dict:
    data = load(path)
    graphs = _graphs()
    add_memlint(data["rows"], graphs)
    data["meta"]["memlint_refreshed"] = today().isoformat()
    return data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.gpu_plan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--regenerate", action="store_true",
                       help="compile the whole matrix and rewrite the data file")
    group.add_argument("--update", action="store_true",
                       help="compile only the rows that are new or whose fixture changed")
    group.add_argument("--refresh-memlint", action="store_true",
                       help="recompute memlint's side of the stored rows only")
    group.add_argument("--table", nargs="?", const="memlint", choices=("memlint", "memlint_v1"),
                       help="print the comparison tables (memlint now, or memlint_v1: the "
                            "stored baseline before the memory-model rewrite)")
    group.add_argument("--sample", type=int, metavar="N",
                       help="recompile today's rotating sample of N rows and compare")
    parser.add_argument("--baseline", metavar="GIT_REF",
                        help="with --regenerate/--update/--refresh-memlint: also store memlint "
                             f"at GIT_REF as the rows' {BASELINE_KEY} (the v1 baseline)")
    parser.add_argument("--retry-failed", action="store_true",
                        help="with --update: compile the rows that failed again as well")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="only the first N fixtures")
    parser.add_argument("--output", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if args.child:
        child_main()
        return
    if args.table:
        from harness.gpu_plan_table import markdown
        print(markdown(load(args.output), args.table))
        return
    if args.sample:
        stored = sample(load(args.output)["rows"], args.sample)
        fresh, _ = recompile(stored, workers=args.workers)
        for old, new in zip(stored, fresh):
            a, b = old["plan"]["peak"], (new.get("plan") or {}).get("peak")
            print(f"{old['target']} {old['fixture']}::{old['model']} b{old['batch']} "
                  f"{old['optimizer_key']} {old['precision_requested']} {old['mode']}: "
                  f"stored {a:,} now {b if b is None else format(b, ',')} "
                  f"{new.get('error', '')[:200]}")
        return
    started = time.monotonic()
    stamp = lambda m: print(f"[{time.monotonic() - started:7.1f}s] {m}", flush=True)  # noqa: E731
    if args.refresh_memlint:
        data = refresh_memlint(args.output)
    else:
        previous = load(args.output) if args.update else None
        data = generate(previous, args.workers, args.limit, stamp,
                        retry_failed=args.retry_failed)
    if args.baseline:
        add_baseline(data["rows"], args.baseline, data["meta"])
        stamp(f"memlint at {args.baseline} stored as {BASELINE_KEY}")
    save(data, args.output)
    stamp(f"wrote {args.output}")
    from harness.gpu_plan_table import markdown
    print(markdown(data))


if __name__ == "__main__":
    main(sys.argv[1:])
