"""Robustness sweep: memlint over every .py file of the installed Keras package's own source.

Keras's source is a large body of real, varied Python that memlint was never written for
(backends, tests, utilities, classes with dynamic tricks).  Every file must come back with
results or diagnostics: no exception, no internal error (``report.internal_errors``, which
makes the CLI exit 2), and every analysis (the file's, and each ``--entry`` run) within its
deterministic work bounds (``report.work`` against ``work_bounds()``: interpreter steps,
bulk allocations, tokens parsed, call depth, loop iterations, project modules), with MEM903
reported where the step budget ran out.  No clock is asserted: the per-file times are
printed as information (run with ``pytest -s``), and ``benchmarks/bench_sweep.py`` measures
them.  The files are only read, never imported.  The share of layers whose output shape
memlint resolved is printed too, not asserted: Keras's source builds almost no models at
module level.

The sweep runs in this one process.  The whole tree takes about 6 minutes on a 2-core
machine, so the test analyses a rotating third of it: every 3rd file (sorted by path),
starting at an offset chosen by the date, so that three consecutive days cover every file.
``MEMLINT_SWEEP_EVERY=N`` sets the step (1: every file); ``benchmarks/bench_sweep.py`` times
the whole sweep.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings


@dataclass
class FileOutcome:
    path: str
    seconds: float
    exception: Optional[str] = None  # "Type: message" when analyze_file raised
    internal_errors: list = field(default_factory=list)
    models: int = 0
    layers: int = 0
    resolved: int = 0  # layers whose output shape is known
    entries: int = 0  # model factories run with their defaults (the file built nothing)
    slowest_entry: float = 0.0  # seconds of the slowest of those runs
    # per analysis (the file's, then each --entry run's): (label, report.work, whether MEM903
    # was reported)
    work: list = field(default_factory=list)


@dataclass
class SweepResult:
    root: Path
    total_files: int  # .py files under the package
    every: int  # every Nth file was analysed
    outcomes: list  # list[FileOutcome]
    seconds: float  # wall time of the whole sweep

    @property
    def layers(self) -> int:
        return sum(o.layers for o in self.outcomes)

    @property
    def resolved(self) -> int:
        return sum(o.resolved for o in self.outcomes)

    @property
    def models(self) -> int:
        return sum(o.models for o in self.outcomes)

    def share_text(self) -> str:
        if not self.layers:
            return f"resolved layers: n/a (no layers found; {self.models} models)"
        return (f"resolved layers: {self.resolved}/{self.layers} "
                f"({100.0 * self.resolved / self.layers:.1f}%) in {self.models} models")

    def summary(self) -> str:
        times = [o.seconds for o in self.outcomes]
        sample = "all files" if self.every == 1 else f"every {self.every}th file"
        steps = [work["steps"] for o in self.outcomes for _, work, _ in o.work[:1]]
        return (f"memlint sweep of {self.root}: {len(self.outcomes)}/{self.total_files} .py "
                f"files ({sample}) in {self.seconds:.1f} s; per file median "
                f"{statistics.median(times) if times else 0:.3f} s, max "
                f"{max(times, default=0):.2f} s (information only: nothing asserts time); "
                f"interpreter steps per file median {statistics.median(steps) if steps else 0:,.0f},"
                f" max {max(steps, default=0):,}; {self.share_text()}")


def keras_root() -> Optional[Path]:
    """The installed ``keras`` package's folder (found without importing it), or None."""
    spec = importlib.util.find_spec("keras")
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    return Path(spec.origin).parent if spec.origin else None


def source_files(root: Path, every: int = 1, offset: int = 0) -> tuple:
    """(every Nth .py file under root sorted by path, from the ``offset``-th (taken modulo
    N), and the number of .py files)."""
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    every = max(every, 1)
    return files[offset % every::every], len(files)


def _count_layers(outcome: FileOutcome, report) -> None:
    outcome.models += len(report.models)
    for graph in report.models:
        for layer in graph.layers:
            outcome.layers += 1
            if layer.unresolved is None and _known(layer.output_shape):
                outcome.resolved += 1


def _known(shape) -> bool:
    """Every dimension but the batch known (a list: every output's)."""
    if shape is None:
        return False
    if isinstance(shape, list):
        return all(_known(s) for s in shape)
    return all(isinstance(d, int) for d in shape[1:])


def analyse_one(path: Path, settings: Settings, entries: bool = True) -> FileOutcome:
    """Analyse one file; when it builds nothing but defines model factories that need no
    arguments, also run each of them as ``--entry NAME`` would (their layers count in the
    share, their time in the file's)."""
    start = time.perf_counter()
    try:
        report = analyze_file(str(path), settings)
    except Exception as exc:  # noqa: BLE001 - any exception is what the sweep looks for
        return FileOutcome(str(path), time.perf_counter() - start,
                           exception=f"{type(exc).__name__}: {exc}")
    outcome = FileOutcome(str(path), time.perf_counter() - start,
                          internal_errors=list(report.internal_errors))
    _count_layers(outcome, report)
    _note_work(outcome, "the file", report)
    for name, needs_arguments in report.entries if entries else ():
        if needs_arguments:
            continue
        begin = time.perf_counter()
        try:
            entry_report = analyze_file(str(path), replace(settings, entry=name))
        except Exception as exc:  # noqa: BLE001
            outcome.exception = f"--entry {name}: {type(exc).__name__}: {exc}"
            break
        outcome.slowest_entry = max(outcome.slowest_entry, time.perf_counter() - begin)
        outcome.entries += 1
        outcome.internal_errors += [f"--entry {name}: {e}" for e in entry_report.internal_errors]
        _count_layers(outcome, entry_report)
        _note_work(outcome, f"--entry {name}", entry_report)
    return outcome


def _note_work(outcome: FileOutcome, label: str, report) -> None:
    limit = any(d.code == "MEM903" for d in report.diagnostics)
    outcome.work.append((label, dict(report.work), limit))


def work_problems(outcome: FileOutcome) -> list:
    """The analyses of one file that went over a work bound, or that used up the whole step
    budget without saying so (MEM903)."""
    from memlint.frontends.keras import work_bounds

    bounds, problems = work_bounds(), []
    for label, work, limit in outcome.work:
        over = [f"{unit} {work.get(unit, 0):,} > {bound:,}" for unit, bound in bounds.items()
                if work.get(unit, 0) > bound and not (unit == "tokens" and not work["parsed"])]
        if set(work) != set(bounds):
            over.append(f"work units {sorted(work)} reported, {sorted(bounds)} expected")
        if work.get("steps") == bounds["steps"] and not limit:
            over.append("the step budget ran out with no MEM903")
        if work.get("tokens", 0) > bounds["tokens"] and not limit:
            over.append("refused for its size with no MEM903")
        problems += [f"{outcome.path} ({label}): {p}" for p in over]
    return problems


def run_sweep(root: Path, every: int = 1, settings: Optional[Settings] = None,
              offset: int = 0) -> SweepResult:
    """Analyse the files in this process, one after another, timing each."""
    settings = settings or Settings(gpu="8GiB")
    files, total = source_files(root, every, offset)
    start = time.perf_counter()
    outcomes = [analyse_one(path, settings) for path in files]
    return SweepResult(root, total, every, outcomes, time.perf_counter() - start)


def sweep_every() -> int:
    return max(int(os.environ.get("MEMLINT_SWEEP_EVERY", "3") or 3), 1)


def sweep_offset(every: int) -> int:
    """Today's share of the files: consecutive days take consecutive offsets."""
    import datetime as dt

    return dt.date.today().toordinal() % max(every, 1)


@pytest.mark.slow
def test_memlint_survives_the_keras_source_tree():
    root = keras_root()
    if root is None or not root.is_dir():
        if os.environ.get("MEMLINT_REQUIRE_ORACLE") == "1":
            pytest.fail("MEMLINT_REQUIRE_ORACLE=1 but keras is not installed")
        pytest.skip("keras is not installed: nothing to sweep (pip install -e '.[test,oracle]')")
    settings = Settings(gpu="8GiB")
    every = sweep_every()
    result = run_sweep(root, every, settings, sweep_offset(every))
    print("\n" + result.summary())
    assert result.outcomes, f"no .py files under {root}"

    crashed = [f"{o.path}: {o.exception}" for o in result.outcomes if o.exception]
    internal = [error for o in result.outcomes for error in o.internal_errors]
    over = [problem for o in result.outcomes if not o.exception for problem in work_problems(o)]
    limited = [o for o in result.outcomes if any(limit for _, _, limit in o.work)]
    print(f"files that hit an analysis bound (MEM903): {len(limited)}")
    for outcome in sorted(result.outcomes, key=lambda o: -o.seconds)[:5]:  # information only
        print(f"  {outcome.seconds:6.2f} s  {outcome.path}  "
              + ", ".join(f"{label}: {work['steps']:,} steps" for label, work, _ in outcome.work))
    assert not crashed, "analyze_file raised:\n" + "\n".join(crashed)
    assert not internal, "internal errors:\n" + "\n".join(internal)
    assert not over, "work over its bounds:\n" + "\n".join(over)


def test_the_rotating_thirds_cover_every_file_once(tmp_path):
    for i in range(10):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    parts = [source_files(tmp_path, 3, offset)[0] for offset in range(3)]
    assert sorted(p for part in parts for p in part) == sorted(tmp_path.glob("*.py"))
    assert all(parts) and len({p for part in parts for p in part}) == 10
    assert source_files(tmp_path, 3, 4)[0] == parts[1]
