"""The rule catalog: one YAML file per rule in the top-level ``rules/`` folder.

The same YAML feeds ``memlint rules``, ``memlint explain``, rule option defaults, SARIF rule
metadata and the example-based tests.  In an installed wheel it lives in
``memlint/catalog/``; in a source checkout it is read from ``rules/`` beside the package.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

_PACKAGE_DIR = Path(__file__).resolve().parent
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it


def load_yaml(text: str):
    """Parse YAML safely, with the C loader when available (memlint reads YAML every run)."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


def catalog_dir() -> Path:
    """Where the rule YAML files are (installed wheel first, then a source checkout)."""
    for candidate in (_PACKAGE_DIR / "catalog", _PACKAGE_DIR.parent / "rules"):
        if candidate.is_dir() and any(candidate.glob("MEM*.yaml")):
            return candidate
    raise FileNotFoundError("memlint's rule catalog (rules/*.yaml) is missing from this install")


@lru_cache(maxsize=1)
def load_catalog() -> dict:
    """All rules by code, in code order."""
    rules = {}
    for path in sorted(catalog_dir().glob("MEM*.yaml")):
        data = load_yaml(path.read_text(encoding="utf-8"))
        rules[data["id"]] = data
    return rules


def rule_info(code: str) -> dict:
    """One rule's catalog entry; ``KeyError`` for an unknown code."""
    return load_catalog()[code.upper()]


def default_options(code: str) -> dict:
    """The rule's options with their default values."""
    options = rule_info(code).get("options") or {}
    return {name: spec.get("default") for name, spec in options.items()}
