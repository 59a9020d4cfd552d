"""The files of a git revision, read with git: never checked out into the work tree, never
imported or executed.

:func:`snapshot` writes the Python sources, the memlint configuration files and the checked
ONNX graphs of one commit into a scratch folder laid out like the repository, so the Keras
frontend follows the project's imports as they were at that commit.  The blobs come from
``git cat-file --batch`` (what ``git show REV:path`` prints, for many files in one process).
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

from memlint.records import record

CONFIG_NAMES = ("pyproject.toml", ".memlint.yaml")
SOURCE_SUFFIXES = (".py", ".pyi")
_BLOB_MODES = ("100644", "100755")  # plain files; links and submodules are not read


class RevisionError(Exception):
    """git cannot give the revision (not a repository, unknown revision, git missing)."""


@record(frozen=True)
class Revision:
    """A commit of the repository at ``root``, as the user named it."""

    root: Path
    name: str
    commit: str

    @property
    def short(self) -> str:
        return self.commit[:10]


def _git(root: Path, *args: str, data: bytes = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=data,
                              capture_output=True, check=False)
    except FileNotFoundError:
        raise RevisionError("git is not installed (needed for --diff)") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RevisionError(reason[-1] if reason else f"git {args[0]} failed")
    return done.stdout


def open_revision(name: str, where: Path) -> Revision:
    """The commit ``name`` (a branch, tag, sha, ``HEAD~1``, ``origin/main``) of the
    repository that contains ``where``."""
    if not name or name.startswith("-"):
        raise RevisionError(f"{name!r} is not a revision")
    while not where.is_dir() and where != where.parent:  # a deleted file's folder
        where = where.parent
    try:
        top = _git(where, "rev-parse", "--show-toplevel").decode().strip()
    except RevisionError:
        raise RevisionError(f"--diff needs a git repository, and {where} is not inside "
                            "one") from None
    root = Path(top)
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                      f"{name}^{{commit}}").decode().strip()
    except RevisionError:
        commit = ""
    if not commit:
        raise RevisionError(f"unknown revision {name!r} in {root.name} (a branch, tag or "
                            "commit; in a shallow CI checkout fetch it first)")
    return Revision(root, name, commit)


def snapshot(revision: Revision, dest: Path, onnx_under: tuple = ()) -> int:
    """Write the revision's sources and config files (and its ``.onnx`` files under the
    repository-relative folders or files ``onnx_under``) below ``dest``; the number of files
    written.  A ``.git`` marker in ``dest`` keeps config discovery inside the snapshot."""
    listing = _git(revision.root, "ls-tree", "-r", "-z", "--full-tree", revision.commit)
    wanted = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind == "blob" and mode in _BLOB_MODES and _wanted(path, onnx_under):
            wanted.append((blob, path))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".git").write_text("memlint snapshot\n", encoding="utf-8")
    if not wanted:
        return 0
    out = _git(revision.root, "cat-file", "--batch",
               data="".join(f"{blob}\n" for blob, _ in wanted).encode())
    offset = 0
    base = dest.resolve()
    for blob, path in wanted:
        end = out.index(b"\n", offset)
        size = int(out[offset:end].split()[2])
        content = out[end + 1:end + 1 + size]
        offset = end + 1 + size + 1
        target = (dest / path).resolve()
        if base not in target.parents:  # git refuses such trees; never write outside dest
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return len(wanted)


def _wanted(path: str, onnx_under: tuple) -> bool:
    pure = PurePosixPath(path)
    if pure.suffix in SOURCE_SUFFIXES or pure.name in CONFIG_NAMES:
        return True
    if pure.suffix.lower() == ".onnx":
        return any(under in ("", ".") or path == under or path.startswith(under.rstrip("/")
                                                                          + "/")
                   for under in onnx_under)
    return False


def relative_to_root(revision: Revision, path: Path) -> str:
    """``path`` (absolute or relative to the working directory) as a repository-relative
    POSIX path; :class:`RevisionError` when it lies outside the repository."""
    absolute = Path(path).absolute()
    root = revision.root.resolve()
    try:
        return absolute.resolve().relative_to(root).as_posix()
    except ValueError:
        try:
            return absolute.relative_to(root).as_posix()
        except ValueError:
            raise RevisionError(f"{path} is not inside the git repository {root.name}") \
                from None
