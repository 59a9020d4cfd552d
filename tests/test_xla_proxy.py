"""CPU proxy tier: XLA's own memory plan of each fixture's compiled Keras 3 train step (JAX
backend on the CPU; ``jax.jit(train_step).lower(...).compile().memory_analysis()``, nothing
runs) against memlint's XLA profile for the same model, batch and optimizer.

The figures are stored in tests/data/xla_proxy.json (regenerate with
``python -m harness.proxy``): memlint's side must not move unless the model changes, and
with the same JAX version XLA's side must not either.  Skipped without JAX and Keras
(MEMLINT_REQUIRE_JAX=1 makes that a failure, as in CI).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from harness import proxy

# Several minutes of XLA compilation: run with the slow tier (CI runs every tier).
pytestmark = pytest.mark.slow

# Derived from the measured data (docs/gpu-verification.md; jax 0.10.2 on a CPU, batch 4,
# 103 models): median |memlint - XLA| / XLA was 20.4%, the extremes -83% and +122%.  The
# bounds leave a little room above those and catch a change that makes things worse.
MEDIAN_TOLERANCE = 0.25
MODEL_TOLERANCE = 1.5


def _require_jax() -> None:
    missing = [m for m in ("jax", "keras") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get("MEMLINT_REQUIRE_JAX") == "1":
        pytest.fail(f"MEMLINT_REQUIRE_JAX=1 but {', '.join(missing)} is not installed")
    pytest.skip(f"{', '.join(missing)} not installed (pip install jax keras)")


@pytest.fixture(scope="module")
def table():
    _require_jax()
    rows, meta = proxy.rows()
    return rows, meta


def _stored() -> dict:
    return json.loads(proxy.DATA.read_text())


def test_every_fixture_model_compiles(table):
    """Each fixture's largest model compiles, except those the stored data records as
    failing (with the reason: inputs the harness cannot synthesise, models Keras cannot
    build in a stateless step); none that compiled before may fail now."""
    rows, _ = table
    known = {(r["fixture"], r["model"]) for r in _stored()["rows"] if "error" in r}
    failed = [f"{r['fixture']}::{r['model']}: {r['error'][:200]}" for r in rows
              if "error" in r and (r["fixture"], r["model"]) not in known]
    assert len(rows) >= 40
    assert sum("relative_error" in r for r in rows) >= 0.8 * len(rows)
    assert not failed, "\n".join(failed)


def test_median_error_within_tolerance(table):
    rows, meta = table
    median = proxy.median_error(rows)
    print(f"\nXLA proxy ({meta['platform']}, jax {meta['jax_version']}): median |error| "
          f"{median:.1%} over {sum('relative_error' in r for r in rows)} models")
    assert median <= MEDIAN_TOLERANCE
    worst = max((r for r in rows if "relative_error" in r),
                key=lambda r: abs(r["relative_error"]))
    assert abs(worst["relative_error"]) <= MODEL_TOLERANCE, worst


def test_figures_match_the_stored_regression_data(table):
    rows, meta = table
    stored = {(r["fixture"], r["model"]): r for r in _stored()["rows"]}
    same_jax = _stored().get("jax_version") == meta["jax_version"]
    moved = []
    for row in rows:
        old = stored.get((row["fixture"], row["model"]))
        if old is None or "relative_error" not in row or "relative_error" not in old:
            continue
        if row["memlint_peak"] != old["memlint_peak"]:
            moved.append(f"{row['fixture']}::{row['model']}: memlint {old['memlint_peak']:,} "
                         f"-> {row['memlint_peak']:,}")
        if same_jax and abs(row["xla_peak"] - old["xla_peak"]) > 0.01 * old["xla_peak"]:
            moved.append(f"{row['fixture']}::{row['model']}: XLA {old['xla_peak']:,} -> "
                         f"{row['xla_peak']:,}")
    assert not moved, "regenerate with `python -m harness.proxy` if intended:\n" + \
        "\n".join(moved)
