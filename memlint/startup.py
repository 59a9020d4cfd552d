"""Loading memlint's heavy modules (libcst, the frontends, the rules) without the cyclic
garbage collector.

Importing them creates some hundred thousand objects that live until the process ends; while
they load, the collector runs dozens of times and only retraces them (about a tenth of a
short run's start-up).  :func:`load` imports a module with the collector paused, then freezes
everything allocated so far (``gc.freeze``: later collections skip those objects, and a
forked worker does not copy them by touching their counts) and turns the collector back on.
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from importlib import import_module


@contextmanager
def permanent_imports():
    """Imports of modules kept for the rest of the process: no collection while they load,
    their objects frozen afterwards; the collector is then as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def load(name: str):
    """``importlib.import_module(name)``; the first time, inside :func:`permanent_imports`."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    with permanent_imports():
        return import_module(name)
