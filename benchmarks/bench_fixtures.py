"""Wall time of memlint on the fixtures against (a) the floor and (b) real Keras.

(a) floor: a fresh Python process that only imports libcst and parses the same file;
(b) keras: a fresh process that builds the same model with real Keras (the oracle runner,
    training stubbed), when Keras is installed.

Every figure is a fresh process, so start-up and imports count, as they do for a user or a
pre-commit hook.  memlint's modules are byte-compiled first, as ``pip install`` does for
users (an environment with PYTHONDONTWRITEBYTECODE would otherwise recompile them each run);
memlint runs with ``--no-cache`` (every run analyses the file: the cold figure); with
``--cold-cache`` each run writes its result into a fresh, empty cache folder instead (what a
pre-commit hook pays for a changed file: hashing and storing included).  Ratios are computed
from one run of this script (the machines are noisy: compare ratios, not seconds).
Usage: python benchmarks/bench_fixtures.py [--repeat N] [--no-keras] [--folder DIR]
[--cold-cache] [--json F]
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TWIN = re.compile(r"^#\s*oracle-twin:\s*(\S+)", re.MULTILINE)
FLOOR = "import sys, libcst; libcst.parse_module(open(sys.argv[1], encoding='utf-8').read())"


def environment() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(cmd: list, stdin: str | None = None) -> float:
    env = environment()
    start = time.perf_counter()
    subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start


def cache_arguments(cold_cache: bool) -> list:
    """``--no-cache``, or a fresh empty cache folder (removed when the process ends)."""
    if not cold_cache:
        return ["--no-cache"]
    folder = tempfile.mkdtemp(prefix="memlint-bench-cache-")
    atexit.register(shutil.rmtree, folder, True)
    return ["--cache-dir", folder]


def median_time(cmd: list, repeat: int, stdin: str | None = None) -> float:
    return statistics.median(timed(cmd, stdin) for _ in range(repeat))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keras", action=argparse.BooleanOptionalAction, default=True,
                        help="also time building each model with real Keras")
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    parser.add_argument("--cold-cache", action="store_true",
                        help="run memlint with its result cache on, in a fresh empty cache "
                             "folder per run, instead of --no-cache")
    parser.add_argument("--folder", type=Path,
                        help="time every .py file under this folder instead of the fixtures "
                             "(real scripts kept outside the repository; no Keras column)")
    args = parser.parse_args()

    with_keras = args.keras and args.folder is None and \
        importlib.util.find_spec("keras") is not None
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "memlint")],
                   env=environment(), check=True)
    base = args.folder.resolve() if args.folder else ROOT / "fixtures"
    if args.folder:
        fixtures = sorted(base.rglob("*.py"))
    else:
        fixtures = sorted(p for p in base.rglob("*.py")
                          if "invalid" not in p.relative_to(base).parts
                          and not (p.parent / "__init__.py").exists())  # package modules
    rows = []
    py = sys.executable
    for path in fixtures:
        floor = median_time([py, "-c", FLOOR, str(path)], args.repeat)
        ours = statistics.median(
            timed([py, "-m", "memlint", "check", str(path), "--gpu", "8GiB",
                   *cache_arguments(args.cold_cache)]) for _ in range(args.repeat))
        keras = None
        if with_keras:
            twin = TWIN.search(path.read_text(encoding="utf-8"))
            source = path.parent / twin.group(1) if twin else path  # Keras 1 spelling: its twin
            keras = median_time([py, str(ROOT / "tests" / "oracle" / "keras_scripts.py")], 1,
                                stdin=json.dumps({"files": [str(source)]}))
        name = str(path.relative_to(base))
        rows.append({"fixture": name, "floor_s": floor, "memlint_s": ours,
                     "keras_s": keras})
        print(f"{name:<48} floor {floor:6.3f}s  memlint {ours:6.3f}s  "
              f"({ours / floor:4.2f}x floor)" +
              (f"  keras {keras:6.2f}s ({keras / ours:5.1f}x memlint)" if keras else ""),
              flush=True)

    total_floor = sum(r["floor_s"] for r in rows)
    total_ours = sum(r["memlint_s"] for r in rows)
    print(f"\n{len(rows)} files, {args.repeat} runs each (median), one process per run")
    print(f"memlint / floor: {total_ours / total_floor:.2f}x (sum of medians); per-file median "
          f"{statistics.median(r['memlint_s'] / r['floor_s'] for r in rows):.2f}x")
    slowest = max(rows, key=lambda r: r["memlint_s"])
    print(f"slowest memlint run: {slowest['memlint_s']:.3f}s ({slowest['fixture']}); "
          "the per-file budget is 2 s")
    worst = max(rows, key=lambda r: r["memlint_s"] / r["floor_s"])
    print(f"slowest against its floor: {worst['memlint_s'] / worst['floor_s']:.2f}x "
          f"({worst['fixture']})")
    if with_keras:
        total_keras = sum(r["keras_s"] for r in rows)
        print(f"keras / memlint: {total_keras / total_ours:.1f}x (sum); per-file median "
              f"{statistics.median(r['keras_s'] / r['memlint_s'] for r in rows):.1f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
