"""Wall time of memlint over the installed Keras package's own source, file by file.

The same sweep as ``tests/test_robustness_sweep.py`` (memlint.analysis.analyze_file with
``Settings(gpu="8GiB")`` on every .py file under the ``keras`` package, read only, never
imported), in one process: total time, per-file median and maximum, the files over 1 s,
and the share of layers whose output shape memlint resolved.  Files that raise or report
internal errors are listed too.  Files that build nothing but define argument-free model
factories also run each factory (as ``--entry NAME`` would); their layers count in the share.
Usage: python benchmarks/bench_sweep.py [--every N] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.test_robustness_sweep import keras_root, run_sweep  # noqa: E402

SLOW_SECONDS = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=1,
                        help="analyse every Nth file (sorted by path); default: all")
    parser.add_argument("--json", type=Path, help="write per-file times here")
    args = parser.parse_args()

    root = keras_root()
    if root is None or not root.is_dir():
        print("keras is not installed: nothing to sweep", file=sys.stderr)
        return 1
    result = run_sweep(root, max(args.every, 1))
    times = [o.seconds for o in result.outcomes]
    slow = sorted((o for o in result.outcomes if o.seconds > SLOW_SECONDS),
                  key=lambda o: -o.seconds)
    print(f"keras source: {root}")
    print(f"files:        {len(result.outcomes)} of {result.total_files} .py files"
          + ("" if result.every == 1 else f" (every {result.every}th)"))
    print(f"total:        {result.seconds:.1f} s")
    print(f"per file:     median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times):.2f} s ({max(result.outcomes, key=lambda o: o.seconds).path})")
    print(f"over {SLOW_SECONDS:g} s:     {len(slow)}")
    for outcome in slow:
        print(f"  {outcome.seconds:6.2f} s  {Path(outcome.path).relative_to(root)}")
    print(result.share_text())
    entries = sum(o.entries for o in result.outcomes)
    slowest = max(result.outcomes, key=lambda o: o.slowest_entry)
    print(f"factories run with --entry defaults: {entries} (slowest {slowest.slowest_entry:.2f} s,"
          f" {Path(slowest.path).relative_to(root)})")
    gaps = sorted((o for o in result.outcomes if o.layers > o.resolved),
                  key=lambda o: o.resolved - o.layers)[:10]
    for outcome in gaps:
        print(f"  unresolved {outcome.layers - outcome.resolved:4d} of {outcome.layers:5d} layers"
              f"  {Path(outcome.path).relative_to(root)}")
    problems = [(o.path, o.exception) for o in result.outcomes if o.exception]
    problems += [(o.path, e) for o in result.outcomes for e in o.internal_errors]
    for path, problem in problems:
        print(f"PROBLEM {path}: {problem}")
    if args.json:
        args.json.write_text(json.dumps({
            "root": str(root), "every": result.every, "total_s": result.seconds,
            "layers": result.layers, "resolved": result.resolved, "models": result.models,
            "files": [{"path": str(Path(o.path).relative_to(root)), "seconds": o.seconds,
                       "exception": o.exception, "internal_errors": o.internal_errors,
                       "models": o.models, "layers": o.layers, "resolved": o.resolved,
                       "entries": o.entries, "slowest_entry_s": o.slowest_entry}
                      for o in result.outcomes],
        }, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
