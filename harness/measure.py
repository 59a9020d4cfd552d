"""Run a matrix of configurations unattended, each in a fresh ``run_one.py`` process, and
append one JSON line per run (measured peak next to memlint's estimate and its parts) to
``data/measurements/<device>-<date>.jsonl``.

    python -m harness.measure --backends jax,torch --matrix full            # on a GPU
    python -m harness.measure --backends jax --matrix tiny --cpu            # anywhere

Runs already in the output file are skipped, so a stopped run resumes (``--time-budget``
stops starting new runs after that many seconds; repeat the command to continue).
``--verdicts`` adds the OOM-verdict runs (cap at memlint's peak plus its margin: must fit;
cap 10% under memlint's peak: must fail) and the largest-batch runs (memlint's largest batch
for the cap fits, 10% more does not).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "data" / "measurements"
UNDER = 0.90  # the "must fail" cap: 10% under memlint's peak

# (fixture, model variable, batch sizes): small to >100M parameters; CNN, RNN, transformer,
# Conv3D, a pretrained-size backbone.  None of them imports TensorFlow (GPU images without it
# build them; a Keras 1 fixture is built from its ``# oracle-twin:``).
MODELS = {
    "tiny": [("fixtures/mnist_mlp_sgd.py", "model", (16,)),
             ("fixtures/keras1_mnist_cnn.py", "model", (8,))],
    "full": [("fixtures/mnist_mlp_sgd.py", "model", (8192,)),
             ("fixtures/keras1_mnist_cnn.py", "model", (2048,)),
             ("fixtures/cifar_resnet_mini.py", "resnet", (512,)),
             ("fixtures/keras2_mobilenet_own_depthwise.py", "model", (256,)),
             ("fixtures/unet_small.py", "unet", (64,)),
             ("fixtures/lstm_sentiment_bidirectional.py", "model", (512,)),
             ("fixtures/transformer_text_classifier.py", "model", (256,)),
             ("fixtures/video_conv3d.py", "c3d", (64,)),
             ("fixtures/transfer_vgg16_partial_unfreeze.py", "model", (64,)),
             ("fixtures/seed_gtx960.py", "model", (256,))],
}
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")


def matrix(name: str, backends: list) -> list:
    """The configurations: every optimizer in float32 training at each batch, plus Adam in
    mixed_float16 and inference in float32 (tiny: Adam and SGD only).  The backends take
    turns model by model, so a run stopped by its time budget has covered each alike."""
    configs = []
    optimizers = OPTIMIZERS if name != "tiny" else ("adam", "sgd")
    for fixture, model, batches in MODELS[name]:
        for backend in backends:
            for batch in batches:
                base = {"backend": backend, "fixture": fixture, "model": model, "batch": batch}
                for opt in optimizers:
                    configs.append({**base, "optimizer": opt, "precision": "float32",
                                    "mode": "train"})
                if name != "tiny":
                    configs.append({**base, "optimizer": "adam", "precision": "mixed_float16",
                                    "mode": "train"})
                configs.append({**base, "optimizer": "adam", "precision": "float32",
                                "mode": "infer"})
    return configs


def config_key(config: dict) -> str:
    keys = ("backend", "fixture", "model", "batch", "optimizer", "precision", "mode", "kind",
            "cap_bytes")
    return json.dumps([config.get(k) for k in keys])


_REPORTS: dict = {}


def memlint_breakdown(config: dict):
    """memlint's estimate for one configuration (the graph from the fixture's source), under
    the profile of the configuration's backend."""
    from memlint.analysis import analyze_file
    from memlint.config import Settings
    from harness.estimates import setup_for
    from memlint.memory import estimate
    from memlint.memory.profiles import get_profile

    if config["fixture"] not in _REPORTS:  # one analysis per fixture, not per run
        _REPORTS[config["fixture"]] = analyze_file(str(ROOT / config["fixture"]), Settings())
    report = _REPORTS[config["fixture"]]
    graph = next(g for g in report.models if g.variable == config["model"])
    setup = setup_for(graph.setup, config)
    backend = "tf" if config["backend"] == "tensorflow" else config["backend"]
    return graph, estimate(graph, setup, profile=get_profile(backend))


def memlint_side(breakdown, measured) -> dict:
    """The fields a measurement row holds of memlint's estimate."""
    return {"memlint_profile": breakdown.profile, "memlint_peak": breakdown.peak,
            "memlint_parts": {p.name: p.bytes for p in breakdown.parts},
            "relative_error": (breakdown.peak - measured) / measured if measured else None}


def run_child(config: dict, timeout: int) -> dict:
    """One configuration in a fresh process.  JAX on a GPU runs twice, sharing a persistent
    compilation cache: JAX's peak counter also holds what compiling and autotuning the step
    allocated (1.3x to 4x the step's own plan on an H200), so the first process compiles and
    the second, which loads the executables from the cache, is the one measured."""
    if config["backend"] == "jax" and not config.get("cpu") and "compilation_cache" not in config:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="memlint-jax-cache-") as cache:
            started = time.monotonic()
            # the first process also compiles the plan's step, so the second loads both
            warm = run_child({**config, "compilation_cache": cache, "cap_bytes": None,
                              "steps": 1}, timeout)
            if warm.get("status") not in ("ok", "oom"):
                return warm
            left = max(1, int(timeout - (time.monotonic() - started)))
            return dict(run_child({**config, "compilation_cache": cache}, left),
                        compile_cache_warmed=True)
    from harness.gpu_plan import child_pythonpath

    env = dict(os.environ, PYTHONPATH=child_pythonpath(), PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "harness" / "run_one.py"),
                               json.dumps(config)], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        text = proc.stderr[-800:]
        oom = any(m in text for m in ("RESOURCE_EXHAUSTED", "out of memory", "OutOfMemory"))
        return {"status": "oom" if oom else "crash", "returncode": proc.returncode,
                "error": text}
    return json.loads(lines[-1])


def record(config: dict, result: dict, graph, breakdown) -> dict:
    measured = result.get("peak_bytes")
    row = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           **{k: config.get(k) for k in ("backend", "fixture", "model", "batch", "optimizer",
                                         "precision", "mode", "kind", "cap_bytes")},
           "params": graph.params, **result,
           "measured_peak": measured, **memlint_side(breakdown, measured)}
    return row


def output_path(device: str, cpu: bool, folder: Path = OUT_DIR) -> Path:
    """``<folder>/<device slug>-<date>.jsonl``; CPU runs are named ``cpu-...``."""
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "unknown"
    if cpu and not slug.startswith("cpu"):
        slug = f"cpu-{slug}"
    return folder / f"{slug}-{datetime.date.today().isoformat()}.jsonl"


def verdict_configs(row: dict) -> list:
    """OOM-verdict runs derived from one measured training run: at memlint's peak with the
    verdict's margin (where memlint first says "fits") it must fit; under the peak it must
    fail."""
    from harness.compare import margin
    from memlint.memory.verdict import with_margin

    peak = row["memlint_peak"]
    base = {k: row[k] for k in ("backend", "fixture", "model", "batch", "optimizer",
                                "precision", "mode")}
    return [{**base, "kind": "cap-fit", "cap_bytes": with_margin(peak, margin(row))},
            {**base, "kind": "cap-fail", "cap_bytes": int(peak * UNDER)}]


def max_batch_configs(row: dict, breakdown) -> list:
    """At the cap memlint's peak with the margin gives, memlint's largest batch (the one
    that fits with the margin) must fit, and 10% more, or the first batch whose peak is over
    the cap where that is more (memlint's first "does not fit"), must not."""
    from harness.compare import margin
    from memlint.memory import max_batch_size
    from memlint.memory.verdict import room_for_estimate, with_margin

    share = margin(row)
    cap = with_margin(row["memlint_peak"], share)
    best = max_batch_size(breakdown, room_for_estimate(cap, share))
    base = {k: row[k] for k in ("backend", "fixture", "model", "optimizer", "precision",
                                "mode")}
    bigger = max(best + 1, int(best * 1.1 + 0.999), max_batch_size(breakdown, cap) + 1)
    return [{**base, "batch": best, "kind": "maxbatch-fit", "cap_bytes": cap},
            {**base, "batch": bigger, "kind": "maxbatch-fail", "cap_bytes": cap}]


def refresh_memlint(path: Path) -> int:
    """Recompute memlint's side of every row of a measurement file with this checkout's
    memlint (after a change to the memory model); the peak memlint reported when the run was
    made stays as ``memlint_peak_at_run``.  Returns the rows whose peak changed."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    changed = 0
    for row in rows:
        _, breakdown = memlint_breakdown(row)
        row.setdefault("memlint_peak_at_run", row["memlint_peak"])
        changed += breakdown.peak != row["memlint_peak"]
        row.update(memlint_side(breakdown, row.get("measured_peak")))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return changed


def _line(row: dict) -> str:
    err = row["relative_error"]
    return (f"[measure] {row['backend']} {row['fixture']} b={row['batch']} {row['optimizer']} "
            f"{row['precision']} {row['mode']} {row.get('kind') or ''} {row['status']} "
            f"measured={row['measured_peak']} memlint={row['memlint_peak']}"
            + (f" err={err:+.1%}" if err is not None else ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="jax", help="comma list: jax,torch,tensorflow")
    parser.add_argument("--matrix", default="full", choices=sorted(MODELS))
    parser.add_argument("--cpu", action="store_true", help="no GPU: record CPU-side figures")
    parser.add_argument("--verdicts", action="store_true",
                        help="add cap and max-batch runs (after each Adam float32 training run)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once (each is its own process with its own peak "
                             "counters and cap; the GPU must hold them together)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    parser.add_argument("--time-budget", type=float, default=0,
                        help="start no new run after this many seconds (rerun to resume)")
    parser.add_argument("--out", help="the JSON-lines file (default: by device and date)")
    parser.add_argument("--out-dir", default=str(OUT_DIR),
                        help="folder for the default file name (e.g. $OUT/m on the device)")
    parser.add_argument("--limit", type=int, default=0, help="run at most this many")
    parser.add_argument("--refresh-memlint", nargs="+", type=Path, metavar="FILE",
                        help="recompute memlint's side of these measurement files, run nothing")
    args = parser.parse_args(argv)
    if args.refresh_memlint:
        for path in args.refresh_memlint:
            print(f"[measure] {path}: {refresh_memlint(path)} rows changed")
        return 0

    sys.path.insert(0, str(ROOT))
    from harness.gpu_plan import without_local_paths
    from harness.run_one import gpu_info

    device = "cpu" if args.cpu else gpu_info().get("device", "cpu")
    cpu = args.cpu or device == "cpu"
    out = Path(args.out) if args.out else output_path(device, cpu, Path(args.out_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {config_key(json.loads(line)) for line in out.read_text().splitlines() if line}
    started = time.monotonic()
    queue = [dict(c, steps=args.steps, cpu=cpu) for c in matrix(args.matrix,
                                                                args.backends.split(","))]
    ran, running = 0, {}
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        while queue or running:
            budget_left = not args.time_budget or time.monotonic() - started < args.time_budget
            while queue and len(running) < max(args.jobs, 1) and budget_left and not (
                    args.limit and ran + len(running) >= args.limit):
                config = queue.pop(0)
                if config_key(config) in done:
                    continue
                graph, breakdown = memlint_breakdown(config)
                if graph.input_shapes and not all(s is None for s in graph.input_shapes):
                    config["input_shapes"] = [list(s[1:]) for s in graph.input_shapes]
                future = pool.submit(run_child, config, args.timeout)
                running[future] = (config, graph, breakdown)
            if not running:
                if queue and not budget_left:
                    print(f"[measure] time budget spent; {len(queue)} runs left "
                          "(run the same command again to resume)")
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in finished:
                config, graph, breakdown = running.pop(future)
                row = record(config, future.result(), graph, breakdown)
                with out.open("a") as handle:
                    handle.write(without_local_paths(json.dumps(row)) + "\n")
                done.add(config_key(config))
                ran += 1
                print(_line(row), flush=True)
                if args.verdicts and not cpu and not config.get("kind") \
                        and row["status"] == "ok" and row["mode"] == "train" \
                        and config["optimizer"] == "adam" and config["precision"] == "float32":
                    extra = verdict_configs(row) + max_batch_configs(row, breakdown)
                    queue[:0] = [dict(c, steps=args.steps, cpu=cpu) for c in extra]
    print(f"[measure] {ran} runs recorded in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
