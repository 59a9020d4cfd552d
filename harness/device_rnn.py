"""On a machine with an NVIDIA GPU: what cuDNN's recurrent layers hold.  On a GPU Keras 3 on
JAX hands an LSTM or GRU to cuDNN (``cudnn_rnn_ffi``), which sizes its workspace and reserve
space at run time, so the plans compiled without a device cannot show them and memlint gives
such models no "fits" (``LayerKind.not_modelled``).  This sweep compiles small LSTM and GRU
models over a grid of units, steps, batch and direction, train and predict steps, on the GPU
and (same JAX, scan loop) for the described H100, and stores each plan with the shapes every
custom call returns (the ``u8[...]`` workspace and reserve space), the data a law for them
needs.

    python -m harness.device_rnn --out-dir $OUT/p --time-budget 150     # on the GPU machine
    python -m harness.device_rnn --table data/measurements/device-rnn-*.json
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import device_plan  # noqa: E402

FEATURES = 32
GRID = {"kind": ("LSTM", "GRU"), "units": (32, 256, 1024), "steps": (16, 256),
        "bidirectional": (False, True)}
BATCHES = (8, 64)
MODES = ("train", "infer")
SOURCE = """import keras
from keras import layers

inputs = keras.Input(shape=({steps}, {features}))
rnn = layers.{kind}({units})
x = layers.Bidirectional(rnn)(inputs) if {bidirectional} else rnn(inputs)
model = keras.Model(inputs, layers.Dense(1)(x))
"""


def models() -> list:
    """Every grid point, smallest first within each kind (a time budget covers the grid's
    corners before its largest models)."""
    points = [{"kind": k, "units": u, "steps": s, "bidirectional": b}
              for k in GRID["kind"] for u in GRID["units"] for s in GRID["steps"]
              for b in GRID["bidirectional"]]
    return sorted(points, key=lambda p: (p["units"] * p["steps"], p["kind"], p["bidirectional"]))


def write_sources(points: list, folder: Path) -> list:
    """One model file per grid point in ``folder``; returns their paths."""
    paths = []
    for i, point in enumerate(points):
        path = folder / f"rnn_{i:02d}.py"
        path.write_text(SOURCE.format(features=FEATURES, **point), encoding="utf-8")
        paths.append(path)
    return paths


def jobs(paths: list, target: str) -> list:
    return [{"id": i, "file": str(path), "model": "model", "precision": "float32",
             "optimizer": None, "input_shapes": None,
             "configs": [{"target": target, "batch": b, "mode": m}
                         for b in BATCHES for m in MODES]}
            for i, path in enumerate(paths)]


def run(workers: int, budget: float, limit: int = 0) -> dict:
    points = models()[:limit] if limit else models()
    with tempfile.TemporaryDirectory(prefix="memlint-rnn-") as folder:
        paths = write_sources(points, Path(folder))
        both = device_plan.compile_both(lambda target: jobs(paths, target), workers, budget)
    rows = []
    for i, point in enumerate(points):
        found = {side: {(r["batch"], r["mode"]): r for r in both[side][0].get(i, [])}
                 for side in ("device", "deviceless")}
        for batch in BATCHES:
            for mode in MODES:
                row = {**point, "features": FEATURES, "batch": batch, "mode": mode}
                for side in ("device", "deviceless"):
                    result = found[side].get((batch, mode), {})
                    row[side] = {k: result[k] for k in ("plan", "kernels", "library_calls",
                                                        "error") if result.get(k) is not None}
                rows.append(row)
    return {"meta": {**device_plan.meta(both), "features": FEATURES, "grid": GRID,
                     "source": SOURCE}, "rows": rows}


_U8 = re.compile(r"u8\[(\d+)\]")


def rnn_scratch(side: dict) -> int:
    """The ``u8`` outputs of the cuDNN RNN calls of one compiled step, in bytes."""
    return sum(int(n) for call in side.get("library_calls", []) if "rnn" in call["target"]
               for n in _U8.findall(call["outputs"]))


def table(data: dict) -> str:
    """Markdown: per grid point and step, both plans and cuDNN's u8 outputs."""
    lines = ["| layer | units | steps | batch | step | deviceless plan | device plan | "
             "device - deviceless | cuDNN RNN u8 outputs |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    extra = []
    for r in data["rows"]:
        dev, less = r["device"].get("plan"), r["deviceless"].get("plan")
        if not dev:
            continue
        diff = dev["peak"] - less["peak"] if less else None
        if diff is not None:
            extra.append(diff)
        name = ("Bidirectional " if r["bidirectional"] else "") + r["kind"]
        lines.append(f"| {name} | {r['units']} | {r['steps']} | {r['batch']} | {r['mode']} | "
                     + (f"{less['peak']:,}" if less else "-") + f" | {dev['peak']:,} | "
                     + (f"{diff:+,}" if diff is not None else "-")
                     + f" | {rnn_scratch(r['device']):,} |")
    if extra:
        lines.append(f"\nmedian device - deviceless: {statistics.median(extra):+,.0f} B over "
                     f"{len(extra)} steps")
    return "\n".join(lines)


def main(argv=None) -> int:
    return device_plan.cli(argv, "device-rnn", __doc__,
                           lambda args: run(args.workers, args.time_budget, args.limit),
                           table, budget=150, workers=2)


if __name__ == "__main__":
    raise SystemExit(main())
