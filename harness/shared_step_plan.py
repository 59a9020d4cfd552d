"""The shared-step oracle: XLA's plan of a training step that runs several models (a GAN's
generator once and its critic twice under one ``jax.value_and_grad``), compiled for
described GPUs with no GPU present, next to memlint's upper bound of that step
(``memlint/memory/shared_steps.py``).  Harness and tests only: memlint never imports this.

The step is the script's own (``harness/shared_steps/*.py``, which memlint reads as a user's
file); a child process executes the script up to its loop (our own code, with real Keras on
the JAX backend), lowers its jitted ``train_step`` with ``jax.ShapeDtypeStruct``\\ s on a
described GPU's mesh (as ``harness/gpu_plan.py`` does) and reads ``memory_analysis()``.
Each script's ``BATCH = ...`` line sets the batch of a row.

Commands (``python -m harness.shared_step_plan [...]``): no argument compiles every row
(about a minute on 2 CPUs) and rewrites ``tests/data/shared_step_plans.json``;
``--refresh-memlint`` recomputes memlint's side of the stored rows; ``--check SCRIPT TARGET
BATCH`` compiles one row and prints it.  Tests: ``tests/test_shared_steps.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "harness" / "shared_steps"
DATA = ROOT / "tests" / "data" / "shared_step_plans.json"
# (script, target, batch): a GAN's step several models share, and one model's step whose
# jit donates nothing beside its twin that donates the state
ROWS = [(script, target, batch) for script, batches in (
    ("gan_critic_jax.py", (64, 512)), ("jax_loop_mlp.py", (48, 512)),
    ("jax_loop_mlp.py+donated", (48, 512))) for target in ("h100", "t4") for batch in batches]
_BATCH = re.compile(r"^BATCH = \d+$", re.MULTILINE)


def source_at(script: str, batch: int) -> str:
    """The script with its batch set to ``batch``; ``NAME+donated``: the script ``NAME``
    with its bare ``@jax.jit`` donating the state (as Keras's own trainer jits its step)."""
    name, _, variant = script.partition("+")
    text = (SCRIPTS / name).read_text(encoding="utf-8")
    if not _BATCH.search(text):
        raise ValueError(f"{name} has no 'BATCH = N' line")
    if variant == "donated":
        text = text.replace("\n@jax.jit\n", "\n@partial(jax.jit, donate_argnums=0)\n").replace(
            "\nimport jax\n", "\nfrom functools import partial\n\nimport jax\n")
    return _BATCH.sub(f"BATCH = {batch}", text, count=1)


def child_main(script: str, target: str, batch: int) -> None:
    """In the child: build the script's models and step, compile it for ``target``."""
    import numpy as np

    from harness import gpu_plan
    from harness.keras_step import memory_plan

    source = source_at(script, batch).split("\nfor start in range")[0]
    namespace = {"__name__": "shared_step"}
    exec(compile(source, script, "exec"), namespace)  # noqa: S102 - our own step script
    mesh = gpu_plan._mesh(target, {})
    arguments = [gpu_plan._specs(np.asarray(a), mesh)
                 for a in namespace["step_arguments"](batch)]
    lowered = namespace["train_step"].lower(gpu_plan._specs(namespace["state"], mesh),
                                            *arguments)
    plan = memory_plan(lowered.compile())
    plan.pop("generated_code", None)
    print(json.dumps(plan))


def compile_row(script: str, target: str, batch: int, timeout: int = 600) -> dict:
    """XLA's plan of one row, compiled in a child process (JAX on the CPU)."""
    from harness import gpu_plan

    shim = gpu_plan.ptxas_shim_dir()
    done = subprocess.run([sys.executable, "-m", "harness.shared_step_plan", "--child", script,
                           target, str(batch)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=gpu_plan.child_env(shim))
    if done.returncode != 0:
        raise RuntimeError(f"{script} {target} {batch}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def memlint_side(script: str, target: str, batch: int) -> dict:
    """memlint's estimate of the script at ``batch`` for the card ``target`` names: each
    model's own peak and the bound of the step they share."""
    from memlint.analysis import analyze_text
    from memlint.config import Settings

    report = analyze_text(source_at(script, batch), f"harness/shared_steps/{script}",
                          Settings(gpu=target))
    models = {graph.name: breakdown for graph, breakdown in
              zip(report.models, report.breakdowns)}
    bounds = {b.shared_bound for b in models.values()}
    return {"peaks": {name: b.peak for name, b in models.items()},
            "bound": bounds.pop() if len(bounds) == 1 else None}


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def save(data: dict, path: Path = DATA) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def generate() -> dict:
    from harness.gpu_plan import _versions

    rows = []
    for script, target, batch in ROWS:
        plan = compile_row(script, target, batch)
        rows.append({"script": script, "target": target, "batch": batch, "plan": plan,
                     "memlint": memlint_side(script, target, batch)})
        print(script, target, batch, plan["peak"], rows[-1]["memlint"]["bound"], flush=True)
    return {"versions": _versions(), "rows": rows}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.shared_step_plan")
    parser.add_argument("--child", nargs=3, metavar=("SCRIPT", "TARGET", "BATCH"))
    parser.add_argument("--check", nargs=3, metavar=("SCRIPT", "TARGET", "BATCH"))
    parser.add_argument("--refresh-memlint", action="store_true",
                        help="recompute memlint's side of the stored rows only")
    args = parser.parse_args(argv)
    if args.refresh_memlint:
        data = load()
        for row in data["rows"]:
            row["memlint"] = memlint_side(row["script"], row["target"], row["batch"])
        save(data)
        return
    if args.child:
        child_main(args.child[0], args.child[1], int(args.child[2]))
        return
    if args.check:
        print(compile_row(args.check[0], args.check[1], int(args.check[2])))
        return
    save(generate())


if __name__ == "__main__":
    main()
