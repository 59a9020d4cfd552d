"""Imports of the user's own project modules: found on disk, read with libcst, interpreted.

``from .blocks import conv_block``, ``from . import blocks``, ``from mypkg.blocks import f``
and ``import mypkg.blocks as b`` are followed when the module's file exists next to the
analysed file (or under a package root above it, or the configuration's folder).  The
module is never imported: its source is parsed and its module-level statements interpreted
once per analysis (functions, classes, constants), sharing the file's step budget.  Models
it builds at module level are not models of the analysed file, and notes about its own code
are not reported against the analysed file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras.values import ModuleValue, Unknown

MAX_MODULES = 64  # project modules loaded per analysis
MAX_IMPORT_DEPTH = 16  # modules importing modules importing ...
MAX_TOTAL_CHARS = 500_000  # source read from project modules per analysis
# tokens of code parsed from project modules per analysis: as much as one analysed file may
# have (libcst parses ~20,000 tokens a second), so imports at most double the parse cost
MAX_TOTAL_TOKENS = 20_000
_INSTALLED = ("site-packages", "dist-packages")  # installed libraries: never a user project
# top-level names of libraries memlint models itself: never looked up on disk
LIBRARIES = frozenset({"keras", "tensorflow", "tf_keras", "numpy", "np", "tf", "math", "os",
                       "sys", "random", "json", "pathlib", "typing", "collections",
                       "functools", "itertools", "dataclasses", "argparse", "__future__"})


class ImportFailure(Exception):
    """The module's file exists but cannot be read or parsed (a one-line reason)."""


class ProjectModules:
    """Finds and loads project modules for one analysis (cached per file path)."""

    def __init__(self, main_path: str, roots: tuple = ()):
        self.main_file = _resolve(Path(main_path))
        # text that is not a file on disk (stdin, tests) has no project around it, and an
        # installed library's file is not a project's
        self.enabled = _is_file(self.main_file) and not _installed(self.main_file)
        self.roots = _search_roots(self.main_file, roots) if self.enabled else []
        self.cache: dict = {}  # resolved path -> ModuleValue (partially defined while loading)
        self.loading = 0
        self.loaded = 0
        self.chars = 0
        self.tokens = 0

    # ------------------------------------------------------------------ finding

    def find_absolute(self, dotted: str) -> Optional[tuple]:
        """(root, parts) for ``mypkg.blocks`` when it is a module of the project, else None."""
        parts = dotted.split(".")
        if not parts or parts[0] in LIBRARIES:
            return None
        for root in self.roots:
            if _module_file(root, parts) is not None:
                return root, parts
        return None

    def relative_base(self, current_file: Optional[str], level: int) -> Path:
        """The folder ``from .`` (level 1), ``from ..`` (level 2) ... refer to."""
        folder = (_resolve(Path(current_file)) if current_file else self.main_file).parent
        for _ in range(level - 1):
            folder = folder.parent
        return folder

    # ------------------------------------------------------------------ loading

    def module_at(self, interp, root: Path, parts: list, anchor) -> Any:
        """The ModuleValue for ``root/parts`` (loading it and its parent packages)."""
        value = None
        parent = None
        for i in range(1, len(parts) + 1):
            file = _module_file(root, parts[:i])
            name = ".".join(parts[:i])
            if file is None:
                if not is_package_folder(root, parts[:i]):
                    interp.state.note_unresolved(anchor, f"import of '{name}'",
                                                 "no such module in the project")
                    return Unknown(f"module '{name}' is not found")
                key = str(root.joinpath(*parts[:i]))
                value = self.cache.get(key)
                if value is None:
                    value = self.cache[key] = ModuleValue(name, None, {"__name__": name})
            else:
                value = self.load(interp, file, name, anchor)
                if isinstance(value, Unknown):
                    return value
            if parent is not None:
                parent.names.setdefault(parts[i - 1], value)
            parent = value
        return value

    def load(self, interp, file: Path, name: str, anchor) -> Any:
        """Interpret ``file`` once; a module being loaded (a cycle) comes back as it is."""
        key = str(file)
        if key in self.cache:
            return self.cache[key]
        if file == self.main_file:
            return Unknown(f"module '{name}' is the analysed file itself")
        if self.loaded >= MAX_MODULES or self.loading >= MAX_IMPORT_DEPTH:
            interp.state.note_budget(anchor, f"module '{name}' not followed: more than "
                                             f"{MAX_MODULES} project modules or "
                                             f"{MAX_IMPORT_DEPTH} nested imports")
            return Unknown(f"module '{name}' (import limit)")
        try:
            module = self._parse(file)
        except ImportFailure as exc:
            interp.state.note_unresolved(anchor, f"import of '{name}'", str(exc))
            return Unknown(f"module '{name}' cannot be read")
        value = ModuleValue(name, key, {"__name__": name, "__file__": key})
        self.cache[key] = value
        self.loaded += 1
        self.loading += 1
        try:
            interp.run_module(module, value, file, anchor)
        finally:
            self.loading -= 1
        return value

    def _parse(self, file: Path) -> cst.Module:
        from memlint.frontends.keras.source_limits import measure
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportFailure(f"{file.name} cannot be read ({type(exc).__name__})") from None
        self.chars += len(source)
        if self.chars > MAX_TOTAL_CHARS:
            raise ImportFailure(f"{file.name} not read: project modules exceed "
                                f"{MAX_TOTAL_CHARS:,} characters in all")
        problem, tokens = measure(source)
        if problem is not None:
            raise ImportFailure(f"{file.name}: {problem}")
        self.tokens += tokens
        if self.tokens > MAX_TOTAL_TOKENS:
            raise ImportFailure(f"{file.name} not read: project modules exceed "
                                f"{MAX_TOTAL_TOKENS:,} tokens of code in all")
        try:
            return cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            raise ImportFailure(f"{file.name} cannot be parsed: {exc.message}") from None


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _installed(path: Path) -> bool:
    return any(part in _INSTALLED for part in path.parts)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _search_roots(main_file: Path, extra: tuple) -> list:
    """Folders absolute imports are looked up in: the file's folder, the folder above each
    package (a folder with ``__init__.py``) that contains it, and the configuration's."""
    roots = [main_file.parent]
    folder = main_file.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
        roots.append(folder)
    for root in extra:
        root = _resolve(Path(root))
        if root not in roots:
            roots.append(root)
    return [root for root in roots if not _installed(root)]


def _module_file(root: Path, parts: list) -> Optional[Path]:
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    base = root.joinpath(*parts)
    try:
        if base.with_suffix(".py").is_file() and base.is_dir() is False:
            return _resolve(base.with_suffix(".py"))
        if (base / "__init__.py").is_file():
            return _resolve(base / "__init__.py")
    except OSError:
        return None
    return None


def is_package_folder(root: Path, parts: list) -> bool:
    try:
        return root.joinpath(*parts).is_dir()
    except OSError:
        return False
