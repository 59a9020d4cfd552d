"""Shared test fixtures: paths, and access to real Keras for the oracle tier."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
ORACLE = Path(__file__).resolve().parent / "oracle"


@pytest.fixture(autouse=True)
def _private_result_cache(tmp_path_factory, monkeypatch):
    """Every test gets an empty result cache of its own (memlint.cache): no test reads
    the user's cache or one left by another test; subprocesses inherit the variable."""
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path_factory.mktemp("memlint-cache")))


def require_modules(modules, variable: str, install: str) -> None:
    """Skip when one of ``modules`` is not installed, unless the environment variable
    ``variable`` is 1 (CI), where that is a failure; ``install`` says how to get them."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {', '.join(missing)} is not installed")
    pytest.skip(f"{', '.join(missing)} not installed ({install})")


def keras_available() -> bool:
    return importlib.util.find_spec("keras") is not None


def require_keras() -> None:
    """Skip without Keras, unless MEMLINT_REQUIRE_ORACLE=1 (CI), where that is a failure."""
    if keras_available():
        return
    if os.environ.get("MEMLINT_REQUIRE_ORACLE") == "1":
        pytest.fail("MEMLINT_REQUIRE_ORACLE=1 but keras is not installed")
    pytest.skip("keras is not installed (pip install -e '.[test,oracle]')")


def require_tf_keras() -> None:
    """Skip without tf_keras (the Keras 2 oracle), unless MEMLINT_REQUIRE_ORACLE=1."""
    if importlib.util.find_spec("tf_keras") is not None:
        return
    if os.environ.get("MEMLINT_REQUIRE_ORACLE") == "1":
        pytest.fail("MEMLINT_REQUIRE_ORACLE=1 but tf_keras is not installed")
    pytest.skip("tf_keras is not installed (pip install --no-deps 'tf_keras==2.20.*')")


def run_oracle(script: str, payload, env: dict | None = None) -> dict:
    """Run one of the oracle scripts with real Keras in a subprocess; return its JSON answer
    (``env``: variables added to its environment, e.g. ``TF_USE_LEGACY_KERAS``)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               KERAS_BACKEND=os.environ.get("MEMLINT_ORACLE_BACKEND", "tensorflow"),
               **(env or {}))
    proc = subprocess.run(
        [sys.executable, str(ORACLE / script)],
        input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=1200,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"oracle {script} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def keras_script_result(path) -> dict:
    """What real Keras reports for one script (``tests/oracle/keras_scripts.py``): its
    models' layers and what each is fed; the script must run."""
    expected = run_oracle("keras_scripts.py", {"files": [str(path)]})["results"][str(path)]
    assert "error" not in expected, expected.get("traceback", expected.get("error"))
    return expected


def model_matches_keras(tmp_path, source: str, variable: str = "model") -> tuple:
    """The script's model ``variable`` as real Keras reports it and as memlint does: the same
    layers (names, classes, shapes, trainable / non-trainable counts) and total (the oracle
    tier); returns the script's path and Keras's answer."""
    from tests.test_fixtures_oracle import memlint_models
    require_keras()
    path = tmp_path / "model.py"
    path.write_text(source)
    expected = keras_script_result(path)
    got = memlint_models(path)
    assert got[variable]["layers"] == expected["models"][variable]["layers"]
    assert got[variable]["total"] == expected["models"][variable]["total"]
    return path, expected
