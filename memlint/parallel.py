"""Many files at once: cached reports first, then the rest in a process pool.

:func:`analyse_all` takes the files (each with its effective settings) in the order they are
reported and returns, in that same order, each file's report (or None) and its error lines.
Reports come from the result cache where it has them (:mod:`memlint.cache`); the other files
are analysed in this process (``jobs == 1``, or a single file) or in a pool of ``jobs`` worker
processes, the largest files first, which also store what they find in the cache.  Output
order, per-file errors and exit codes are the same whatever ``jobs`` is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Optional


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def analyse_one(path: str, settings, cache_dir: Optional[str] = None) -> tuple:
    """One file through the pipeline: ``(report or None, [error lines], cache stats)``.

    Never raises for a problem with the file or a bug in memlint (an error line instead),
    except under ``MEMLINT_DEBUG``, where a bug's traceback is wanted."""
    from memlint.startup import load

    analysis = load("memlint.analysis")  # the rules and the memory model
    AnalysisError, analyze_file = analysis.AnalysisError, analysis.analyze_file
    from memlint.cache import CacheStats, ResultCache

    cache = ResultCache(cache_dir) if cache_dir is not None else None
    key = cache.key_for_file(path, settings) if cache is not None else None
    errors: list = []
    report = None
    try:
        report = analyze_file(path, settings)
        errors.extend(report.internal_errors)
    except AnalysisError as exc:
        errors.append(str(exc))
    except Exception as exc:  # noqa: BLE001 - one file's crash must not hide the others
        if os.environ.get("MEMLINT_DEBUG"):
            raise
        errors.append(f"{path}: internal error: {type(exc).__name__}: {exc}{error_origin(exc)}")
    # store only what was analysed from the bytes the key was made of
    if report is not None and key is not None and cache.key_for_file(path, settings) == key:
        cache.store(key, report)
    return report, errors, cache.stats if cache is not None else CacheStats()


def analyse_all(tasks: list, jobs: int = 1, cache=None) -> list:
    """``tasks``: ``(path, settings)`` pairs.  Returns ``(report or None, errors)`` per task,
    in the order of ``tasks``.  ``cache``: a :class:`memlint.cache.ResultCache` or None."""
    results: list = [None] * len(tasks)
    pending = []
    for index, (path, settings) in enumerate(tasks):
        report = cache.lookup(str(path), settings) if cache is not None else None
        if report is not None:
            results[index] = (report, list(report.internal_errors))
        else:
            pending.append(index)
    cache_dir = str(cache.directory) if cache is not None else None
    workers = min(max(jobs, 1), len(pending))
    done = _in_pool(tasks, pending, workers, cache_dir, cache) if workers > 1 else {}
    for index in pending:
        if index not in done:  # jobs == 1, one file, or the pool could not run it
            path, settings = tasks[index]
            report, errors, stats = analyse_one(str(path), settings, cache_dir)
            done[index] = (report, errors)
            if cache is not None:
                _add_store_stats(cache, stats)
        results[index] = done[index]
    return results


def _add_store_stats(cache, stats) -> None:
    cache.stats.stored += stats.stored
    cache.stats.not_cacheable += stats.not_cacheable


def _in_pool(tasks: list, pending: list, workers: int, cache_dir, cache) -> dict:
    """Analyse ``pending`` in ``workers`` processes; {index: (report, errors)} for those that
    came back (a pool that cannot start, or a worker that dies, leaves files to the caller,
    which analyses them in this process)."""
    import concurrent.futures as futures

    _preload()  # a forked worker starts with memlint, libcst and the rules imported
    order = sorted(pending, key=lambda i: -_size(tasks[i][0]))  # largest first
    done: dict = {}
    try:
        context = _context()
        pool = futures.ProcessPoolExecutor(max_workers=workers, mp_context=context)
    except (OSError, ImportError, NotImplementedError, ValueError):
        return done
    try:
        submitted = {pool.submit(_pool_task, str(tasks[i][0]), tasks[i][1], cache_dir): i
                     for i in order}
        for future in futures.as_completed(submitted):
            index = submitted[future]
            try:
                payload = future.result()
                if payload is None:  # the report does not travel between processes
                    continue
                report, errors, stats = _unpack(payload)
            except futures.process.BrokenProcessPool:
                continue  # a worker died: the file is analysed again in this process
            except Exception:  # noqa: BLE001
                if os.environ.get("MEMLINT_DEBUG"):
                    raise
                continue  # analysed again in this process, which reports any error
            done[index] = (report, errors)
            if cache is not None:
                _add_store_stats(cache, stats)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return done


def _pool_task(path: str, settings, cache_dir) -> Optional[tuple]:
    """:func:`analyse_one` in a worker, its result serialised here: pickled, or where the
    report holds one of the frontend's own objects that do not pickle, in the cache's JSON
    form (None when neither can carry it: the parent then analyses the file itself)."""
    result = analyse_one(path, settings, cache_dir)
    try:
        import pickle  # only results crossing processes are pickled

        return "pickle", pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - any value that does not pickle
        pass
    from memlint.cache import encode
    try:
        report, errors, stats = result
        return "json", json.dumps([encode(report), errors, dataclasses.asdict(stats)])
    except Exception:  # noqa: BLE001
        return None


def _unpack(payload: tuple) -> tuple:
    kind, data = payload
    if kind == "pickle":
        import pickle

        return pickle.loads(data)  # noqa: S301 - from our own worker process
    from memlint.cache import CacheStats, loads
    report, errors, stats = loads(data)
    return report, errors, CacheStats(**stats)


def _context():
    import multiprocessing

    # fork: workers start at once with everything imported; elsewhere (macOS, Windows),
    # the platform's default
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _preload() -> None:
    from memlint.startup import permanent_imports

    with permanent_imports():  # frozen before the fork, as gc.freeze's documentation advises
        import memlint.analysis  # noqa: F401 - rules, memory model, catalog
        import memlint.frontends.keras  # noqa: F401 - libcst and the interpreter
        from memlint.catalog import load_catalog

        load_catalog()


def _size(path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def error_origin(exc: Exception) -> str:
    """Where an internal error was raised (file:line of the innermost frame), for its one line."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    return f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
