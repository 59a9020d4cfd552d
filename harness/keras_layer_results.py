"""Real Keras's answer for every layer case of ``tests/layer_cases`` (output shape, trainable
and non-trainable counts, or the error Keras raises), stored in
``tests/data/keras_layer_results.json`` with the Keras version and backend that gave it.

The oracle tier (``tests/test_layers_oracle.py``) compares memlint with the stored answers
and builds again in Keras only the cases not stored yet and a rotating sample of the stored
ones (a different window each day, so that every stored answer is checked again over the
weeks); where the installed Keras or the oracle's backend differs from the stored one it
builds every case.  ``python -m harness.keras_layer_results`` builds every case with the
installed Keras and rewrites the file (after adding or changing cases, or a Keras upgrade).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import pkgutil
import sys
from pathlib import Path

from harness.proxy import rotating_sample

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "keras_layer_results.json"
SAMPLE_SIZE = 120  # stored cases built again on each run (of about 1,250)
REFRESH = "python -m harness.keras_layer_results"


def all_cases() -> list:
    """(module name, index, case) of every layer case, in a stable order."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import layer_cases
    out = []
    for info in sorted(pkgutil.iter_modules(layer_cases.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"tests.layer_cases.{info.name}")
        out += [(info.name, i, case) for i, case in enumerate(module.CASES)]
    return out


def case_key(case: dict) -> str:
    """A case's key in the stored file: a digest of its JSON (a changed case is a new one)."""
    text = json.dumps(case, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def oracle_backend() -> str:
    return os.environ.get("MEMLINT_ORACLE_BACKEND", "tensorflow")


def installed_keras() -> str | None:
    try:
        return importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:
        return None


def load() -> dict:
    """The stored answers (``{"keras_version", "backend", "results": {key: answer}}``), or
    an empty store when the file is missing or unreadable."""
    try:
        stored = json.loads(DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"keras_version": None, "backend": None, "results": {}}
    stored.setdefault("results", {})
    return stored


def to_build(cases: list, stored: dict, day: int, size: int = SAMPLE_SIZE) -> list:
    """The cases to build in Keras now: every case where the stored answers come from
    another Keras or backend (or ``MEMLINT_ORACLE_FULL`` is set), else those not stored and
    the day's sample of the stored ones."""
    same = stored.get("keras_version") == installed_keras() \
        and stored.get("backend") == oracle_backend()
    if not same or os.environ.get("MEMLINT_ORACLE_FULL"):
        return list(cases)
    results = stored["results"]
    keyed = {case_key(c): c for c in cases}
    sample = set(rotating_sample([k for k in keyed if k in results], size, day))
    return [c for k, c in keyed.items() if k not in results or k in sample]


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    from tests.conftest import run_oracle
    cases = [case for _, _, case in all_cases()]
    answer = run_oracle("keras_layers.py", cases)
    results = {case_key(c): r for c, r in zip(cases, answer["results"])}
    DATA.write_text(json.dumps({"keras_version": answer["keras_version"],
                                "backend": answer["backend"], "results": results},
                               indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"[keras_layer_results] {len(results)} cases, Keras {answer['keras_version']} "
          f"({answer['backend']}): {DATA.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
