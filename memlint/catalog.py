"""The rule catalog: one YAML file per rule in the top-level ``rules/`` folder.

The same YAML feeds ``memlint rules``, ``memlint explain``, rule option defaults, SARIF rule
metadata and the example-based tests.  In an installed wheel it lives in
``memlint/catalog/``; in a source checkout it is read from ``rules/`` beside the package.
"""

from __future__ import annotations

import json
import os
import zlib
from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def load_yaml(text: str):
    """Parse YAML safely, with the C loader when available (PyYAML is imported on first use:
    a run whose catalog snapshot is fresh never needs it)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def catalog_dir() -> Path:
    """Where the rule YAML files are (installed wheel first, then a source checkout)."""
    for candidate in (_PACKAGE_DIR / "catalog", _PACKAGE_DIR.parent / "rules"):
        if candidate.is_dir() and any(candidate.glob("MEM*.yaml")):
            return candidate
    raise FileNotFoundError("memlint's rule catalog (rules/*.yaml) is missing from this install")


@lru_cache(maxsize=1)
def load_catalog() -> dict:
    """All rules by code, in code order.  The parsed catalog is kept as a JSON snapshot in
    the cache folder, named by a hash of the YAML files' contents (a changed, corrupt or
    missing snapshot is rebuilt from the YAML)."""
    texts = [path.read_bytes() for path in sorted(catalog_dir().glob("MEM*.yaml"))]

    def parse(texts: list) -> dict:
        rules = {}
        for text in texts:
            data = load_yaml(text.decode("utf-8"))
            rules[data["id"]] = data
        return rules

    return yaml_snapshot("catalog", texts, parse, lambda rules: len(rules) == len(texts))


def data_yaml(kind: str, path: Path, complete=lambda data: True) -> dict:
    """A YAML mapping of mappings shipped with memlint (``memlint/data/``), through its JSON
    snapshot (``complete``: what else a snapshot's entries must hold to be trusted)."""
    return yaml_snapshot(kind, [path.read_bytes()],
                         lambda texts: load_yaml(texts[0].decode("utf-8")),
                         lambda data: all(isinstance(entry, dict) for entry in data.values())
                         and complete(data))


def yaml_snapshot(kind: str, texts: list, parse, complete=lambda data: True) -> dict:
    """``parse(texts)`` (a dict), kept as a JSON snapshot in the cache folder, so that later
    runs import no YAML parser.  The snapshot holds the texts it was made from and is used
    only when they equal the current ones; a changed, corrupt, foreign or missing snapshot
    (not ``complete``) is rebuilt.  Its name (``kind``, a checksum and the length of the
    texts) only keeps the snapshots of different versions apart."""
    joined = b"\0".join(texts)
    sources = [text.decode("utf-8") for text in texts]
    snapshot = _snapshot_dir() / f"{kind}-{zlib.crc32(joined):08x}-{len(joined)}.json"
    try:
        stored = json.loads(snapshot.read_text(encoding="utf-8"))
        data = stored.get("data") if isinstance(stored, dict) else None
        if stored.get("sources") == sources and isinstance(data, dict) and complete(data):
            return data
    except (OSError, ValueError, AttributeError):
        pass
    data = parse(texts)
    try:
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        temporary = snapshot.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"sources": sources, "data": data}), encoding="utf-8")
        os.replace(temporary, snapshot)
    except (OSError, TypeError, ValueError):
        pass  # a snapshot only saves time
    return data


def _snapshot_dir() -> Path:
    from memlint.cache import default_dir

    return default_dir()


def rule_info(code: str) -> dict:
    """One rule's catalog entry; ``KeyError`` for an unknown code."""
    return load_catalog()[code.upper()]


def default_options(code: str) -> dict:
    """The rule's options with their default values."""
    options = rule_info(code).get("options") or {}
    return {name: spec.get("default") for name, spec in options.items()}
