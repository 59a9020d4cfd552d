"""Reporters: the same diagnostics and models printed with source context (``full``), one line
each (``concise``; ``text`` is its older name), as JSON, GitHub annotations or SARIF.

Each reporter module provides ``render_check(reports, errors, options)`` and
``render_report(reports, errors, options)``; only the one asked for is imported.
"""

from __future__ import annotations

from importlib import import_module

FORMATS = {"full": "full", "concise": "text", "text": "text", "json": "json_format",
           "github": "github", "sarif": "sarif"}


def reporter(name: str):
    """The reporter module for an output format name."""
    return import_module(f"memlint.reporters.{FORMATS[name]}")
