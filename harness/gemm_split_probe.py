"""How XLA splits the contracting dimension of a Dense product, read off deviceless plans: a
grid of ``Input((K,)) -> Dense(N) -> Dense(1)`` train steps at batch ``M``, compiled for a
described GPU as the GPU-plan oracle compiles them (:mod:`harness.gpu_plan`), and the forward
product's fusion read from XLA's dump (``f32[split, M, N]`` when split, ``f32[M, N]`` when
not).  The results are the data :mod:`memlint.memory.gemm_split` is checked against
(``tests/data/gemm_splits.json``, ``tests/test_gemm_split.py``).  Harness only.

``python -m harness.gemm_split_probe [--target h100]`` compiles the grid (about 10 minutes
on 2 CPUs) and rewrites the data file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "gemm_splits.json"

ROWS = (64, 96, 128, 160, 200, 256, 320, 384, 512, 640, 768, 1024, 1536, 2048)
CONTRACTING = (256, 512, 784, 1024, 2048)
COLUMNS = (64, 128, 256, 512)
# the full (K, N) grid at these row counts; the others at K 784 / 1024 and N 128 / 512
FULL_ROWS = (64, 128, 256, 512, 1024)

_PRODUCT = re.compile(r"^  %(?:gemm_fusion|cublas|triton)\S* = f32\[([0-9,]*)\]")


def grid() -> list:
    """The (M, K, N) products probed."""
    out = []
    for m in ROWS:
        for k in CONTRACTING:
            for n in COLUMNS:
                if m in FULL_ROWS or (k in (784, 1024) and n in (128, 512)):
                    out.append((m, k, n))
    return out


def split_of(dump: str) -> int:
    """The forward product's split (0: not split) in a train step's optimised HLO."""
    for path in glob.glob(f"{dump}/*train_step*after_optimizations.txt"):
        for line in Path(path).read_text().splitlines():
            found = _PRODUCT.match(line)
            if found and "jvp(probe)/dot_general" in line:
                dims = found.group(1).split(",")
                return int(dims[0]) if len(dims) == 3 else 0
    raise ValueError("no product of the probed Dense layer in the dump")


def probe(target: str, products: list) -> dict:
    """{"M,K,N": split} for ``products`` compiled for ``target`` (in this process)."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import keras

    from harness import gpu_plan
    from harness.keras_step import jax_train_step, random_batch
    from harness.xla_liveness import DUMP_OPTIONS

    mesh = gpu_plan._mesh(target, {})
    out = {}
    for m, k, n in products:
        inputs = keras.Input((k,))
        model = keras.Model(inputs, keras.layers.Dense(1)(
            keras.layers.Dense(n, name="probe")(inputs)))
        model.compile(optimizer="sgd", loss="mse")
        x, y = random_batch(model, 2)
        step, state, _ = jax_train_step(model, x, y)
        lowered = step.lower(gpu_plan._specs(state, mesh),
                             gpu_plan._specs((x, y, None), mesh, m))
        dump = tempfile.mkdtemp(prefix="xla-split-")
        try:
            lowered.compile(compiler_options={**gpu_plan._compile_options(target),
                                              "xla_dump_to": dump, **DUMP_OPTIONS})
            out[f"{m},{k},{n}"] = split_of(dump)
        finally:
            shutil.rmtree(dump, ignore_errors=True)
        print(f"[gemm_split_probe] {m} x {k} x {n}: {out[f'{m},{k},{n}']}", file=sys.stderr,
              flush=True)
    return out


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.gemm_split_probe",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="h100")
    parser.add_argument("--output", type=Path, default=DATA)
    args = parser.parse_args(argv)
    from harness.gpu_plan import _versions

    splits = probe(args.target, grid())
    data = {"meta": {"date": _dt.date.today().isoformat(), "target": args.target,
                     "versions": _versions(),
                     "what": "the forward product's split of Input((K,)) -> Dense(N) -> "
                             "Dense(1) train steps (SGD, MSE) at batch M, deviceless"},
            "splits": splits}
    args.output.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
