"""The result cache: one file's report kept by content, so unchanged files cost nothing.

An entry is keyed by a hash of everything the report depends on that is known before the
analysis runs: the file's bytes, its path (as given, and resolved), the effective settings
(command line and configuration merged) and memlint itself (its version and a fingerprint of
its own files: the package, the rule catalog, the data tables).  What is only known after the
analysis is stored in the entry and checked on every hit: the project modules the file
imports (each file's content hash) and every lookup of a project module (a module that did not
exist then and does now, or that moved, is a miss).

Entries are JSON, never pickle: the report is written as plain values and the dataclasses of
memlint's report types (:func:`_classes`: the report, the settings and the data classes of
:data:`_DATA_MODULES`), and read back only into
those, setting their declared fields and running none of their code; an entry that does not
parse, names another key, schema or class, or fails any check is ignored (a miss) and
overwritten.  Reading an entry can never run code.  A report that holds any other kind of
value (except inside a layer's ``config``, see :class:`Opaque`), or internal errors, is not
cached.

Where: ``--cache-dir DIR``, else ``MEMLINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/memlint``, else
``~/.cache/memlint``; ``--no-cache`` turns it off.  The test suite points
``MEMLINT_CACHE_DIR`` at a fresh temporary folder for every test (``tests/conftest.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

from memlint import __version__
from memlint.records import record

SCHEMA = 1  # bump when the entry layout changes
MAX_ENTRY_BYTES = 64 * 2**20  # larger entries are not read
ENV_DIR = "MEMLINT_CACHE_DIR"
LAST_STATS = None  # the CacheStats of the last run of the command line in this process


class NotCacheable(Exception):
    """The report holds a value the entry format does not carry."""


class BadEntry(Exception):
    """An entry that is corrupt, foreign or stale."""


def default_dir() -> Path:
    """``MEMLINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/memlint``, else ``~/.cache/memlint``."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memlint"


# ---------------------------------------------------------------------- the values

# Modules of plain data classes a report is made of: every dataclass defined in one of them
# may be written to and read from an entry (classes added there later included).
_DATA_MODULES = ("memlint.ir", "memlint.diagnostics", "memlint.budget",
                 "memlint.memory.estimate", "memlint.memory.verdict",
                 "memlint.memory.profiles", "memlint.memory.dtypes")


def _classes() -> dict:
    """The dataclasses an entry may hold, by name (nothing else is ever constructed): the
    report, the settings, and the dataclasses of :data:`_DATA_MODULES`.  A name two of them
    share is left out (such values are not cached)."""
    import importlib

    from memlint.analysis import FileReport
    from memlint.config import Settings

    found: dict = {}
    clashes: set = set()
    candidates = [FileReport, Settings]
    for name in _DATA_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - a module that moved: its values not cached
            continue
        candidates += [value for value in vars(module).values()
                       if isinstance(value, type) and dataclasses.is_dataclass(value)
                       and value.__module__ == module.__name__]
    for cls in candidates:
        if found.get(cls.__name__, cls) is not cls:
            clashes.add(cls.__name__)
        found[cls.__name__] = cls
    return {name: cls for name, cls in found.items() if name not in clashes}


# Tuple subclasses of the frontend that stand for plain shapes once the analysis is over:
# written and read back as tuples.
_TUPLE_TYPES = {("memlint.frontends.keras.tensor_ops", "_ShapeOperand")}

_CLASSES: dict = {}


def _registry() -> dict:
    if not _CLASSES:
        _CLASSES.update(_classes())
    return _CLASSES


def _class_named(name: str):
    """The class an entry names, from the fixed lists above only (None for any other)."""
    if name == "Opaque":
        return Opaque
    return _registry().get(name)


def _cacheable_class(cls) -> bool:
    return _registry().get(cls.__name__) is cls


@record(frozen=True)
class Opaque:
    """Stands, in a report read back from the cache, for a value of the Keras frontend's own
    that a layer's ``config`` keeps for the analysis (a wrapped model, ``TimeDistributed``'s
    traced inner layer): only the analysis reads those, never the reporters."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name} (not kept in the cache)>"


def encode(value: Any, _depth: int = 0, _opaque: bool = False) -> Any:
    """``value`` as JSON-ready data; :class:`NotCacheable` for anything outside the format.
    (Inside a layer's ``config`` only, a value outside it becomes an :class:`Opaque`.)"""
    if _depth > 200:
        raise NotCacheable("nested too deeply (or a cycle)")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    depth = _depth + 1
    if type(value) is list:
        return [encode(v, depth, _opaque) for v in value]
    if type(value) is tuple or (isinstance(value, tuple) and (
            type(value).__module__, type(value).__qualname__) in _TUPLE_TYPES):
        return {"__t": [encode(v, depth, _opaque) for v in value]}
    if type(value) is dict:
        if all(type(k) is str and not k.startswith("__") for k in value):
            return {k: encode(v, depth, _opaque) for k, v in value.items()}
        return {"__d": [[encode(k, depth, _opaque), encode(v, depth, _opaque)]
                        for k, v in value.items()]}
    cls = type(value)
    if dataclasses.is_dataclass(value) and (_cacheable_class(cls) or cls is Opaque):
        layer = isinstance(value, _registry()["LayerNode"])
        return {"__c": cls.__name__,
                "f": {f.name: encode(getattr(value, f.name), depth,
                                     _opaque or (layer and f.name == "config"))
                      for f in dataclasses.fields(value)}}
    if _opaque:
        return {"__c": "Opaque", "f": {"type_name": cls.__name__}}
    raise NotCacheable(f"a value of type {cls.__name__}")


def decode(data: Any) -> Any:
    """The inverse of :func:`encode` on already-parsed JSON; :class:`BadEntry` for anything
    it would not write.  (Entries are read with :func:`loads`, which does this while
    parsing.)"""
    return loads(json.dumps(data))


def loads(text: str | bytes) -> Any:
    """Parse an entry's JSON, turning the tagged objects back into tuples, mappings and the
    listed dataclasses (bottom-up, as the parser builds them)."""
    return json.loads(text, object_hook=_revive)


def _field_names(cls) -> frozenset:
    found = _FIELD_NAMES.get(cls)
    if found is None:
        found = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return found


_FIELD_NAMES: dict = {}  # dataclass -> the names of its fields


def _revive(obj: dict) -> Any:
    if "__t" in obj:
        items = obj["__t"]
        if len(obj) != 1 or not isinstance(items, list):
            raise BadEntry("bad tuple")
        return tuple(items)
    if "__d" in obj:
        pairs = obj["__d"]
        if len(obj) != 1 or not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 for p in pairs):
            raise BadEntry("bad mapping")
        try:
            return {key: value for key, value in pairs}
        except TypeError:  # an unhashable key
            raise BadEntry("bad mapping key") from None
    if "__c" in obj:
        name, values = obj["__c"], obj.get("f")
        cls = _class_named(name) if isinstance(name, str) else None
        if cls is None or len(obj) != 2 or not isinstance(values, dict):
            raise BadEntry(f"unknown class {name!r}")
        if values.keys() != _field_names(cls):
            raise BadEntry(f"fields of {cls.__name__} do not match this memlint")
        instance = object.__new__(cls)  # no __init__ / __post_init__: only fields are set
        state = getattr(instance, "__dict__", None)
        if state is not None:
            state.update(values)
        else:  # a class with slots
            for key, value in values.items():
                object.__setattr__(instance, key, value)
        return instance
    return obj


# ---------------------------------------------------------------------- memlint itself

_FINGERPRINT: list = []


def fingerprint() -> str:
    """memlint's version, Python's, libcst's, and the names, sizes and modification times of
    memlint's own files (package, rule catalog, data tables, the applications' traces): a
    changed memlint is a miss."""
    if _FINGERPRINT:
        return _FINGERPRINT[0]
    import hashlib  # loads OpenSSL: only runs that use the cache pay for it

    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"{__version__}|{sys.version}|{_libcst_version()}".encode())
    folders = [package]
    rules = package.parent / "rules"
    if rules.is_dir() and not (package / "catalog").is_dir():
        folders.append(rules)
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if not name.endswith((".py", ".yaml", ".yml", ".json", ".xz")):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                rel = os.path.relpath(path, folder.parent)
                digest.update(f"{rel}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def _libcst_version() -> str:
    """The installed libcst's version, from its ``.dist-info`` folder's name when there is
    exactly one beside the package (importing importlib.metadata costs more than a cached
    run's whole analysis), else from the distribution's metadata."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("libcst")
        if spec is not None and spec.origin:
            found = list(Path(spec.origin).parent.parent.glob("libcst-*.dist-info"))
            if len(found) == 1:
                return found[0].name[len("libcst-"):-len(".dist-info")]
        from importlib.metadata import version
        return version("libcst")
    except Exception:  # noqa: BLE001 - not installed as a distribution: unknown
        return "?"


# ---------------------------------------------------------------------- dependencies

def file_digest(path: str) -> Optional[str]:
    import hashlib

    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest() \
                if hasattr(hashlib, "file_digest") else hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _lookup_answer(question: list) -> Any:
    """What a module lookup recorded by the Keras frontend finds now (see
    ``memlint.frontends.keras._record_project_use``): for each folder / module the lookup
    may look at, whether ``NAME.py``, ``NAME/__init__.py`` and the folder ``NAME`` exist.
    (The same files ``frontends/keras/imports.py`` looks for; its ``LIBRARIES`` names are
    never looked up there, so their answer does not matter.)"""
    kind = question[0]
    if kind == "find":
        _, dotted, roots = question
        parts = dotted.split(".")
        return [_probe(Path(root), parts) for root in roots]
    if kind == "module":
        _, root, parts = question
        return [_probe(Path(root), list(parts[:i])) for i in range(1, len(parts) + 1)]
    raise BadEntry(f"unknown lookup {kind!r}")


def _probe(root: Path, parts: list) -> list:
    if not parts or not all(isinstance(p, str) and p.isidentifier() for p in parts):
        return []
    base = root.joinpath(*parts)
    try:
        return [base.with_suffix(".py").is_file(), (base / "__init__.py").is_file(),
                base.is_dir()]
    except OSError:
        return []


def _dependency_record(dependencies: dict) -> dict:
    files = [[path, file_digest(path)] for path in dependencies.get("files", ())]
    lookups = []
    for question in dependencies.get("lookups", ()):
        question = [question[0], question[1], list(question[2])]
        lookups.append([question, _lookup_answer(question)])
    return {"files": files, "lookups": lookups}


def _dependencies_hold(record: Any) -> bool:
    if not isinstance(record, dict) or set(record) != {"files", "lookups"}:
        raise BadEntry("bad dependency record")
    for item in record["files"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise BadEntry("bad file dependency")
        if file_digest(item[0]) != item[1]:
            return False
    for item in record["lookups"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                and len(item[0]) == 3 and isinstance(item[0][1], str)
                and isinstance(item[0][2], list)):
            raise BadEntry("bad lookup dependency")
        if _lookup_answer(item[0]) != item[1]:
            return False
    return True


# ---------------------------------------------------------------------- the cache

@record
class CacheStats:
    """What one run did with the cache (``MEMLINT_DEBUG`` prints it; tests read it)."""

    hits: int = 0
    misses: int = 0
    stored: int = 0
    rejected: int = 0  # corrupt, foreign or stale entries ignored
    not_cacheable: int = 0

    def add(self, other: "CacheStats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class ResultCache:
    """Reports by content in ``directory`` (created on the first store)."""

    def __init__(self, directory: os.PathLike | str):
        self.directory = Path(directory)
        self.stats = CacheStats()

    # keys -------------------------------------------------------------------

    def key(self, path: str, data: bytes, settings) -> str:
        import hashlib

        parts = [SCHEMA, fingerprint(), str(path), os.path.abspath(path),
                 hashlib.sha256(data).hexdigest(), encode(settings)]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def entry_path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def key_for_file(self, path: str, settings) -> Optional[str]:
        """The key of ``path`` as it is now, or None when it cannot be cached (unreadable:
        the analysis reports it; settings holding values the format does not carry)."""
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        try:
            return self.key(path, data, settings)
        except (NotCacheable, ValueError, TypeError):
            return None

    # reading ----------------------------------------------------------------

    def lookup(self, path: str, settings):
        """The cached report for ``path`` under ``settings``, or None (a miss)."""
        key = self.key_for_file(path, settings)
        report = self._read(key, path, settings) if key is not None else None
        if report is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return report

    def _read(self, key: str, path: str, settings):
        entry = self.entry_path(key)
        try:
            if entry.stat().st_size > MAX_ENTRY_BYTES:
                self.stats.rejected += 1
                return None
            raw = entry.read_bytes()
        except OSError:
            return None  # no entry
        try:
            data = loads(raw)
            if not isinstance(data, dict) or data.get("schema") != SCHEMA \
                    or data.get("key") != key:
                raise BadEntry("another schema or key")
            if not _dependencies_hold(data.get("dependencies")):
                self.stats.rejected += 1  # stale: an imported module changed
                return None
            report = data.get("report")
            from memlint.analysis import FileReport
            if not isinstance(report, FileReport) or report.path != str(path) \
                    or report.settings != settings:
                raise BadEntry("an entry for another file or settings")
        except (BadEntry, ValueError, TypeError, KeyError, IndexError, RecursionError):
            self.stats.rejected += 1
            return None
        return report

    # writing ----------------------------------------------------------------

    def store(self, key: str, report) -> bool:
        """Write ``report`` under ``key``; False when it is not cacheable or cannot be
        written (the cache is an optimisation: failures are silent)."""
        if report.internal_errors:
            return False
        try:
            body = {"schema": SCHEMA, "key": key,
                    "dependencies": _dependency_record(report.dependencies or {}),
                    "report": encode(report)}
            text = json.dumps(body, separators=(",", ":"))
        except (NotCacheable, ValueError, TypeError, RecursionError):
            self.stats.not_cacheable += 1
            return False
        entry = self.entry_path(key)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            import tempfile  # only a run that writes entries needs it

            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=entry.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, entry)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            return False
        self.stats.stored += 1
        return True
