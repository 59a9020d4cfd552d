"""Child process: one configuration, real Keras 3, a few real steps, the true peak.

Usage: ``python harness/run_one.py '<config JSON>'``; prints one JSON line (the result) last
on stdout.  The config names the fixture and model variable, the backend (jax, torch,
tensorflow), batch, optimizer (harness/keras_step.py), precision (float32, mixed_float16),
mode (train, infer), steps, and optionally ``cap_bytes`` (a hard limit on the framework's GPU
memory) and ``input_shapes`` (for subclassed models).  memlint is never imported here.

Measured: JAX ``memory_stats()['peak_bytes_in_use']`` with preallocation off; torch
``max_memory_allocated`` and ``max_memory_reserved``; TensorFlow
``get_memory_info('GPU:0')['peak']``.  On a CPU those are null; XLA's memory plan of the step
(JAX) and the process's peak RSS are recorded instead.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OOM_MARKERS = ("RESOURCE_EXHAUSTED", "out of memory", "OutOfMemoryError", "OOM when",
               "Out of memory", "CUDA_ERROR_OUT_OF_MEMORY")


def gpu_info() -> dict:
    """Name, total memory and driver of GPU 0 from nvidia-smi (empty without one)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if not out:
        return {}
    name, total, driver = [x.strip() for x in out[0].split(",")[:3]]
    return {"device": name, "total_bytes": int(float(total)) * 2**20, "driver": driver}


def configure_env(config: dict, gpu: dict) -> None:
    """Environment that must be set before the backend is imported."""
    backend = config["backend"]
    os.environ["KERAS_BACKEND"] = backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cap, total = config.get("cap_bytes"), gpu.get("total_bytes")
    if backend == "jax":
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        if cap and total:
            # A cap is a preallocated pool of that size: with preallocation off, the memory
            # fraction was not applied on a GPU (jaxlib 0.11.2: runs needing more than their
            # cap ran, without peak counters).
            fraction = f"{cap / total:.6f}"
            os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
            os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
            os.environ["XLA_CLIENT_MEM_FRACTION"] = fraction
        if not gpu:
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        if config.get("compilation_cache"):  # every executable stored and loaded there
            os.environ["JAX_COMPILATION_CACHE_DIR"] = config["compilation_cache"]
            os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    if backend == "tensorflow" and not gpu:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def apply_cap(config: dict, gpu: dict) -> None:
    """torch and TensorFlow caps, which are set after import but before any allocation."""
    cap, total = config.get("cap_bytes"), gpu.get("total_bytes")
    if not cap or not total:
        return
    if config["backend"] == "torch":
        import torch
        torch.cuda.set_per_process_memory_fraction(min(cap / total, 1.0), 0)
    elif config["backend"] == "tensorflow":
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.set_logical_device_configuration(
                gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=cap // 2**20)])


def versions(backend: str) -> dict:
    out = {"python": platform.python_version()}
    import keras
    out["keras"] = keras.__version__
    for name in ({"jax": ("jax", "jaxlib"), "torch": ("torch",),
                  "tensorflow": ("tensorflow",)}[backend]):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


def cuda_version(backend: str):
    try:
        if backend == "torch":
            import torch
            return torch.version.cuda
        if backend == "jax":
            import jax
            return getattr(jax.devices()[0].client, "platform_version", None)
        if backend == "tensorflow":
            import tensorflow as tf
            return tf.sysconfig.get_build_info().get("cuda_version")
    except Exception:  # noqa: BLE001
        return None
    return None


def peaks(backend: str, on_gpu: bool) -> dict:
    """The framework's own peak counters (null where there is no GPU)."""
    out = {"peak_bytes": None, "reserved_bytes": None}
    if not on_gpu:
        return out
    if backend == "jax":
        import jax
        stats = jax.devices()[0].memory_stats() or {}
        out["peak_bytes"] = stats.get("peak_bytes_in_use")
        out["reserved_bytes"] = stats.get("bytes_reserved") or stats.get("pool_bytes")
        out["bytes_limit"] = stats.get("bytes_limit")  # the cap in force, if any
    elif backend == "torch":
        import torch
        out["peak_bytes"] = torch.cuda.max_memory_allocated()
        out["reserved_bytes"] = torch.cuda.max_memory_reserved()
    elif backend == "tensorflow":
        import tensorflow as tf
        out["peak_bytes"] = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    return out


def run(config: dict) -> dict:
    gpu = gpu_info() if not config.get("cpu") else {}
    configure_env(config, gpu)
    sys.path.insert(0, ROOT)
    import keras

    apply_cap(config, gpu)
    from harness.fixture_exec import load_models
    from harness.keras_step import (compile_for, jax_predict_step, jax_train_step,
                                    memory_plan, random_batch)

    result = {"device": gpu.get("device", f"cpu ({platform.processor() or platform.machine()})"),
              "gpu_total_bytes": gpu.get("total_bytes"), "driver": gpu.get("driver"),
              "backend": config["backend"], "versions": versions(config["backend"]),
              "cuda": cuda_version(config["backend"]) if gpu else None, "status": "ok"}
    keras.config.set_dtype_policy(config.get("precision", "float32"))
    from harness.proxy import keras_source
    model = load_models(str(keras_source(os.path.join(ROOT, config["fixture"]))))[config["model"]]
    result["dtype_policy"] = keras.config.dtype_policy().name
    name, options = compile_for(model, config["optimizer"])
    result["optimizer_memlint"] = {"name": name, "options": options}
    x, y = random_batch(model, config["batch"], seed=1, input_shapes=config.get("input_shapes"))
    started = time.perf_counter()
    try:
        for step in range(config.get("steps", 3)):
            if config["mode"] == "train":
                model.train_on_batch(x, y)
            else:
                model.predict_on_batch(x)
    except Exception as exc:  # noqa: BLE001 - an OOM is a result
        text = f"{type(exc).__name__}: {exc}"
        result["status"] = "oom" if any(m in text for m in OOM_MARKERS) else "error"
        result["error"] = text[-800:]
    result["step_s"] = round(time.perf_counter() - started, 3)
    result.update(peaks(config["backend"], bool(gpu)))
    result["cpu_max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["xla_plan"] = None
    if config["backend"] == "jax" and result["status"] == "ok" and config.get("xla_plan", True):
        step_fn, state, data = (jax_train_step(model, x, y) if config["mode"] == "train"
                                else jax_predict_step(model, x))
        result["xla_plan"] = memory_plan(step_fn.lower(state, data).compile())
    return result


def main() -> None:
    config = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    try:
        result = run(config)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as data
        text = f"{type(exc).__name__}: {exc}"
        result = {"status": "oom" if any(m in text for m in OOM_MARKERS) else "error",
                  "error": text[-800:], "traceback": traceback.format_exc()[-2000:]}
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
