"""memlint on ONNX files: speed and memory on a large file, and a memory cross-check with
onnxruntime.

``large`` (default): generate, in a temporary folder, a MatMul stack with at least 300 MB of
float32 weights, saved (1) with the weights inside the file and (2) with external data.
Time ``memlint check`` against ``onnx.load`` of the same file, each in a fresh process (start-up
and imports count, as for a user), and record each process's peak RSS; then repeat the
external-data case for several weight sizes to show memlint's RSS does not grow with them.

``crosscheck``: export the fixtures' architectures (tests/oracle/onnx_exports.py), and compare
memlint's inference live-tensor peak with onnxruntime's own arena statistics, read from its
profiler (per node: ``mem_bytes_requested_in_use``, the bytes the kernels asked for, feeds
included; ``mem_in_use_peak``, the arena chunks handed out, rounded up to its bins; CPU
provider, one thread), with no graph optimisation and with all of them.

Ratios come from one run of this script: compare ratios, not seconds.
Usage: python benchmarks/bench_onnx.py [large|crosscheck|all] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
LOAD = "import sys, onnx; onnx.load(sys.argv[1])"
LOAD_SHAPES = "import sys, onnx; onnx.load(sys.argv[1], load_external_data=False)"
MEMLINT = "import runpy; runpy.run_module('memlint', run_name='__main__', alter_sys=True)"
# Prefix of every measured child: at exit it writes its own peak RSS (VmHWM: this process
# image only; getrusage's ru_maxrss would include the benchmark's own memory at fork time).
PEAK = ("import atexit, sys\n"
        "def _peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('\\n@peak_kib ' + line.split()[1] + '\\n')\n"
        "atexit.register(_peak)\n")


def environment() -> dict:
    """A child environment that finds memlint and keeps byte-compiled modules."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def child(code: str, *args) -> list:
    """A fresh Python process running ``code`` with ``args`` that reports its peak RSS."""
    return [sys.executable, "-c", PEAK + code, *map(str, args)]


def measured(cmd: list) -> tuple:
    """(wall seconds, peak RSS in MiB, exit status) of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=environment())
    wall = time.perf_counter() - start
    peaks = [line.split()[1] for line in proc.stderr.splitlines()
             if line.startswith("@peak_kib ")]
    return wall, int(peaks[-1]) / 1024 if peaks else float("nan"), proc.returncode


def median_run(cmd: list, repeat: int) -> tuple:
    """(median wall seconds, largest peak RSS MiB) over ``repeat`` runs; fails loudly."""
    runs = [measured(cmd) for _ in range(repeat)]
    bad = [code for _, _, code in runs if code not in (0, 1)]
    if bad:
        raise RuntimeError(f"{cmd} exited with {bad[0]}")
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


# ------------------------------------------------------------------------------- large

def matmul_stack(weight_mb: int, width: int = 2048):
    """A model: x -> MatMul(W_i) -> Relu ... with about ``weight_mb`` MiB of float32."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    layers = max(1, round(weight_mb * MB / (width * width * 4)))
    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(
            rng.random((width, width), dtype=np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"]))
        current = f"r{i}"
    graph = helper.make_graph(
        nodes, "matmul_stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["N", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, layers * width * width * 4


def save(model, path: Path, external: bool) -> None:
    """Write ``model`` with its weights inside the file or in ``<name>.data`` beside it."""
    import onnx
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=path.name + ".data")
    else:
        onnx.save_model(model, str(path))


def memlint_cmd(path: Path) -> list:
    """``python -m memlint check <path> --batch-size 32`` (with the peak RSS report)."""
    return child(MEMLINT, "check", path, "--batch-size", "32")


def bench_large(folder: Path, repeat: int) -> None:
    """memlint check vs onnx.load on >= 300 MB of weights; RSS against the weight size."""
    model, weight_bytes = matmul_stack(320)
    inside, outside = folder / "big.onnx", folder / "big_external.onnx"
    save(model, inside, external=False)
    save(model, outside, external=True)
    del model
    print(f"weights: {weight_bytes / MB:.0f} MiB float32; file {inside.stat().st_size / MB:.0f}"
          f" MiB (inside), {outside.stat().st_size / 1024:.1f} KiB + data (external)")
    rows = [("weights inside the file", inside, child(LOAD, inside)),
            ("external data, onnx.load with data", outside, child(LOAD, outside)),
            ("external data, onnx.load shapes only", outside, child(LOAD_SHAPES, outside))]
    for label, path, load_cmd in rows:
        load_s, load_rss = median_run(load_cmd, repeat)
        ours_s, ours_rss = median_run(memlint_cmd(path), repeat)
        print(f"{label:<38} onnx.load {load_s:6.2f}s {load_rss:7.0f} MiB | memlint "
              f"{ours_s:6.2f}s {ours_rss:7.0f} MiB | time ratio {ours_s / load_s:4.2f}x",
              flush=True)
    print("\nmemlint peak RSS, external data, against the weight size:")
    for size in (80, 320, 960):
        model, weight_bytes = matmul_stack(size)
        path = folder / f"ext_{size}.onnx"
        save(model, path, external=True)
        del model
        ours_s, ours_rss = median_run(memlint_cmd(path), repeat)
        print(f"  weights {weight_bytes / MB:6.0f} MiB: memlint {ours_s:5.2f}s, peak RSS "
              f"{ours_rss:5.0f} MiB", flush=True)
        for leftover in folder.glob(f"ext_{size}.onnx*"):
            leftover.unlink()


# -------------------------------------------------------------------------- crosscheck

ORT_CHILD = r"""
import json, sys
import numpy as np, onnx, onnxruntime as ort
path, batch, level = sys.argv[1], int(sys.argv[2]), sys.argv[3]
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.enable_profiling = True
options.profile_file_prefix = sys.argv[4]
options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
rng, feeds = np.random.default_rng(0), {}
for value in session.get_inputs():
    shape = [d if isinstance(d, int) else batch for d in value.shape]
    if "float" in value.type:
        feeds[value.name] = rng.random(shape).astype(np.float32)
    else:
        kind = np.int64 if "int64" in value.type else np.int32
        feeds[value.name] = rng.integers(0, 200, size=shape).astype(kind)
session.run(None, feeds)
events = [e for e in json.load(open(session.end_profiling())) if e.get("cat") == "Node"
          and "mem_in_use_peak" in e.get("args", {})]
peak = lambda key: max(int(e["args"][key]) for e in events)
json.dump({"requested": peak("mem_bytes_requested_in_use"), "in_use": peak("mem_in_use_peak"),
           "held": peak("mem_arena_held"), "nodes": len(events)}, sys.stdout)
"""


def ort_arena_peak(path: str, batch: int, level: str, folder: Path) -> dict:
    """onnxruntime's arena figures for one run: peaks of requested and in-use bytes."""
    proc = subprocess.run([sys.executable, "-c", ORT_CHILD, path, str(batch), level,
                           str(folder / "profile")], capture_output=True, text=True,
                          env=environment(), check=True)
    return json.loads(proc.stdout)


def memlint_peak(path: str, batch: int) -> tuple:
    """(live-tensor activation peak in bytes, graph input bytes, unresolved tensors)."""
    sys.path.insert(0, str(ROOT))
    from memlint.frontends.onnx import analyze_onnx
    from memlint.memory.estimate import estimate
    result = analyze_onnx(path, batch_size=batch)
    graph = result.models[0]
    breakdown = estimate(graph)
    inputs = sum(layer.config["output_itemsizes"][0] * _count(layer.output_shapes[0], batch)
                 for layer in graph.layers if layer.type == "Input")
    return breakdown.category("activations"), inputs, len(result.unresolved)


def _count(shape, batch: int) -> int:
    """Elements of an IR shape, None as the batch."""
    total = 1
    for d in shape:
        total *= batch if d is None else d
    return total


def export_fixtures(folder: Path, exporters: list) -> list:
    """Run the exporter oracle; return its records."""
    request = json.dumps({"out": str(folder), "exporters": exporters,
                          "models": ["small_cnn", "mnist_mlp", "lstm_bidirectional",
                                     "transformer", "unet", "resnet_mini"]})
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "oracle" / "onnx_exports.py")],
                          input=request, capture_output=True, text=True, check=True,
                          env=dict(environment(), KERAS_BACKEND="tensorflow"))
    return [r for r in json.loads(proc.stdout)["exports"] if "error" not in r]


def bench_crosscheck(folder: Path, batches: list) -> None:
    """Table: memlint's activation peak against onnxruntime's arena statistics."""
    records = export_fixtures(folder, ["torch-legacy", "keras"])
    print(f"{'model':<19} {'exporter':<12} {'batch':>5} {'memlint':>9} | {'ORT req':>8} "
          f"{'ratio':>5} {'in-use':>8} | {'ORT req':>8} {'ratio':>5} {'in-use':>8} | unresolved")
    print(f"{'':<19} {'':<12} {'':>5} {'':>9} | {'no graph optimisation':^24} | "
          f"{'all graph optimisations':^24} |")
    for record in records:
        for batch in batches:
            ours, _, unresolved = memlint_peak(record["path"], batch)
            cells = ""
            for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
                ort = ort_arena_peak(record["path"], batch, level, folder)
                cells += (f"{ort['requested'] / MB:7.2f}M {ours / ort['requested']:5.2f} "
                          f"{ort['in_use'] / MB:7.2f}M | ")
            print(f"{record['model']:<19} {record['exporter']:<12} {batch:>5} {ours / MB:8.2f}M"
                  f" | {cells}{unresolved}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="large", choices=["large", "crosscheck", "all"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, action="append", help="crosscheck batch sizes")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memlint")],
                   env=environment(), check=True)
    with tempfile.TemporaryDirectory(prefix="memlint-bench-onnx-") as tmp:
        if args.what in ("large", "all"):
            bench_large(Path(tmp), args.repeat)
        if args.what in ("crosscheck", "all"):
            bench_crosscheck(Path(tmp), args.batch or [32, 128])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
