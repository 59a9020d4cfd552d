"""Whole-process wall time of ``memlint check`` on a folder of scripts: one worker against
two (``--jobs``), and a cold result cache against a warm one.

Each variant runs ``python -m memlint check FOLDER --output-format json`` in a fresh process
(start-up included, as a pre-commit hook or CI pays it), ``--repeat`` times; the medians and
their ratios are printed, and whether every variant printed the same output.  Nothing is
asserted.  The folder is ``fixtures/`` by default (about 150 scripts).

    jobs=1, no cache      every file analysed in the memlint process
    jobs=2, no cache      the same files in a pool of two workers
    jobs=N, no cache      (--max-jobs) one worker per CPU
    cold cache, jobs=1    an empty cache folder: analysed and stored
    warm cache, jobs=1    the same folder again: every cacheable file read from the cache

Usage: python benchmarks/bench_parallel_cache.py [FOLDER] [--repeat N] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(folder: Path, *args: str) -> tuple:
    """(seconds, exit code, stdout) of one memlint process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GITHUB_ACTIONS", None)
    env.pop("MEMLINT_DEBUG", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "memlint", "check", str(folder),
                           "--output-format", "json", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    return time.perf_counter() - start, proc.returncode, proc.stdout


def _load() -> str:
    try:
        return "/".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "fixtures")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant (median)")
    parser.add_argument("--max-jobs", type=int, default=os.cpu_count() or 1,
                        help="also time this many workers (default: the CPUs)")
    parser.add_argument("--json", type=Path, help="write the timings here")
    args = parser.parse_args()

    scripts = sorted(p for p in args.folder.rglob("*.py")
                     if not any(part.startswith(".") for part in p.parts))
    print(f"folder: {args.folder} ({len(scripts)} .py files), CPUs: {os.cpu_count()}, "
          f"repeat: {args.repeat}, python {sys.version.split()[0]}, load average "
          f"{_load()} (a load near or above the CPUs means shared CPUs: the jobs ratio "
          "then says little)")
    variants = [("jobs=1, no cache", ["--jobs", "1", "--no-cache"]),
                ("jobs=2, no cache", ["--jobs", "2", "--no-cache"])]
    if args.max_jobs > 2:
        variants.append((f"jobs={args.max_jobs}, no cache",
                         ["--jobs", str(args.max_jobs), "--no-cache"]))
    times: dict = {name: [] for name, _ in variants}
    times["cold cache, jobs=1"] = []
    times["warm cache, jobs=1"] = []
    outputs: dict = {}
    for _ in range(max(args.repeat, 1)):
        for name, extra in variants:
            seconds, code, out = run(args.folder, *extra)
            times[name].append(seconds)
            outputs.setdefault(name, (code, out))
        where = Path(tempfile.mkdtemp(prefix="memlint-bench-cache-"))
        try:
            for name in ("cold cache, jobs=1", "warm cache, jobs=1"):
                seconds, code, out = run(args.folder, "--jobs", "1", "--cache-dir", str(where))
                times[name].append(seconds)
                outputs.setdefault(name, (code, out))
            entries = len(list(where.rglob("*.json")))
        finally:
            shutil.rmtree(where, ignore_errors=True)

    medians = {name: statistics.median(values) for name, values in times.items()}
    width = max(map(len, medians))
    for name, value in medians.items():
        runs = ", ".join(f"{v:.2f}" for v in times[name])
        print(f"  {name:<{width}}  {value:7.2f} s   (runs: {runs})")
    base = medians["jobs=1, no cache"]
    ratios = {"jobs=1 / jobs=2": base / medians["jobs=2, no cache"],
              "cold / warm cache": medians["cold cache, jobs=1"] / medians["warm cache, jobs=1"]}
    if args.max_jobs > 2:
        ratios[f"jobs=1 / jobs={args.max_jobs}"] = \
            base / medians[f"jobs={args.max_jobs}, no cache"]
    for name, value in ratios.items():
        print(f"  {name:<{width}}  {value:7.2f}x")
    print(f"  cache entries written: {entries} of {len(scripts)} files (the rest hold values "
          "the cache does not carry and are analysed every time)")
    print(f"  load average at the end: {_load()}")
    same = len({value for value in outputs.values()}) == 1
    print(f"  identical output (exit code and JSON) in every variant: {'yes' if same else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps({"folder": str(args.folder), "files": len(scripts),
                                         "cpus": os.cpu_count(), "times": times,
                                         "medians": medians, "ratios": ratios,
                                         "identical_output": same}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
