"""The base revision's side of ``memlint check --diff BASE``: the checked paths are read as
they were at BASE (:mod:`memlint.revision`, into a scratch folder that is removed
afterwards), analysed with the same flags, and compared with the work tree
(:mod:`memlint.diff`)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from memlint.diff import MemoryDiff, compare
from memlint.revision import RevisionError, open_revision, relative_to_root, snapshot


def memory_diff(args, head_reports: list, analyse) -> MemoryDiff:
    """The diff of ``args.paths`` between ``args.diff`` and the work tree.  ``analyse``
    runs the analysis of a namespace of arguments (``cli.run_analysis``); raises
    :class:`RevisionError` for a bad revision or a path outside the repository."""
    first = Path(args.paths[0]).absolute()
    revision = open_revision(args.diff, first if first.is_dir() else first.parent)
    inside = {raw: relative_to_root(revision, Path(raw)) for raw in args.paths}
    scratch = Path(tempfile.mkdtemp(prefix="memlint-base-"))
    try:
        tree = scratch / "tree"
        snapshot(revision, tree, onnx_under=tuple(inside.values()))
        mapped = [str(tree / rel) if rel else str(tree) for rel in inside.values()]
        present = [p for p in mapped if Path(p).exists()]
        base_args = argparse.Namespace(**{**vars(args), "paths": present, "no_cache": True})
        reports, errors = analyse(base_args) if present else ([], [])
        back = _back_mapping(tree, inside)
        for report in reports:
            report.path = back(report.path)
        errors = [_strip(message, tree) for message in errors]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return compare(reports, head_reports, revision.name, revision.commit, errors)


def _back_mapping(tree: Path, inside: dict):
    """A function from a snapshot path to the path the work tree's report uses (the form
    the user typed: relative to the working directory, or absolute)."""
    anchors = [(tree / rel if rel else tree, Path(raw)) for raw, rel in inside.items()]

    def back(path: str) -> str:
        p = Path(path)
        for snap, user in anchors:
            if p == snap:
                return str(user)
            try:
                rest = p.relative_to(snap)
            except ValueError:
                continue
            return str(user / rest)
        return path

    return back


def _strip(message: str, tree: Path) -> str:
    """An error line without the scratch folder in it."""
    return message.replace(str(tree) + "/", "").replace(str(tree), ".")


__all__ = ["RevisionError", "memory_diff"]
