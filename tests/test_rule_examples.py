"""Every example in the rule catalog (rules/*.yaml) behaves as documented.

A bad example must produce its rule's code at the line it names; a good example must not
produce that code anywhere.  Examples run through the whole pipeline
(:func:`memlint.analysis.analyze_text`) with the settings in their ``options``; nothing is
written to disk.  The catalog's schema is checked too, since ``memlint explain``, SARIF and
these tests all read it.
"""

from __future__ import annotations

import re

import pytest

from memlint.analysis import analyze_text
from memlint.catalog import catalog_dir, load_catalog
from memlint.checks import RULES
from memlint.config import settings_from_table

CATALOG = load_catalog()
SEVERITIES = ("error", "warning", "info")

def _examples(kind: str) -> list:
    params = []
    for code, info in CATALOG.items():
        for index, example in enumerate((info.get("examples") or {}).get(kind) or []):
            params.append(pytest.param(code, example, id=f"{code}-{kind}-{index}"))
    return params


def _run(code: str, example: dict):
    settings = settings_from_table(dict(example.get("options") or {}), f"{code} example")
    return analyze_text(example["code"], f"{code.lower()}_example.py", settings)


def _describe(report) -> str:
    return "\n".join(f"  {d.code} line {d.line}: {d.message}" for d in report.diagnostics) \
        or "  (no diagnostics)"


@pytest.mark.parametrize("code, example", _examples("bad"))
def test_bad_example_reports_rule_at_its_line(code, example):
    report = _run(code, example)
    lines = [d.line for d in report.diagnostics if d.code == code]
    assert example["line"] in lines, (
        f"{code} expected at line {example['line']}, got {lines}:\n{_describe(report)}")


@pytest.mark.parametrize("code, example", _examples("good"))
def test_good_example_is_clean(code, example):
    report = _run(code, example)
    hits = [d for d in report.diagnostics if d.code == code]
    assert not hits, f"{code} fired on a good example:\n{_describe(report)}"


# ---------------------------------------------------------------- catalog schema

@pytest.mark.parametrize("code", sorted(CATALOG))
def test_catalog_entry_schema(code):
    info = CATALOG[code]
    assert info["id"] == code and re.fullmatch(r"MEM\d{3}", code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", info["name"]), info["name"]
    assert info["severity"] in SEVERITIES
    assert info["summary"].strip() and "\n" not in info["summary"].strip()
    assert len(info["explanation"].split(". ")) >= 3, "explanation: several sentences"
    assert info["fix"].strip()
    for name, spec in (info.get("options") or {}).items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), name
        assert "default" in spec and str(spec.get("description", "")).strip(), name
    examples = info.get("examples") or {}
    assert set(examples) <= {"bad", "good"}
    for example in examples.get("bad") or []:
        assert example["code"].strip() and isinstance(example["line"], int)
        assert 1 <= example["line"] <= len(example["code"].splitlines())
    for example in examples.get("good") or []:
        assert example["code"].strip() and "line" not in example
    if info.get("kind") == "analysis":
        assert code.startswith("MEM9"), "analysis diagnostics use MEM9xx"
    elif info.get("kind") != "diff":  # diff rules run on two revisions (memlint/diff.py)
        assert code in RULES, f"{code} has no registered rule module"


def test_every_registered_rule_has_a_catalog_entry_with_examples():
    for code in RULES:
        assert code in CATALOG, f"{code} is registered but has no rules/{code}.yaml"
        examples = CATALOG[code].get("examples") or {}
        assert examples.get("bad") and examples.get("good"), f"{code} needs examples"


def test_catalog_files_are_named_after_their_ids():
    for path in catalog_dir().glob("MEM*.yaml"):
        assert path.stem in CATALOG, path.name


def test_example_options_override_rule_options():
    """Rule options in an example (``rules: {MEM00N: {...}}``) reach the rule."""
    example = CATALOG["MEM003"]["examples"]["bad"][0]
    strict = dict(example, options={"rules": {"MEM003": {"padding-share": 0.9,
                                                         "min-stack": 10}}})
    report = _run("MEM003", strict)
    assert not [d for d in report.diagnostics if d.code == "MEM003"], _describe(report)
