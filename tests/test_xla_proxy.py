"""CPU proxy tier: XLA's own memory plan of each fixture's compiled Keras 3 train step (JAX
backend on the CPU; ``jax.jit(train_step).lower(...).compile().memory_analysis()``, nothing
runs) against memlint's XLA profile for the same model, batch and optimizer.

The figures are stored in tests/data/xla_proxy.json (regenerate with
``python -m harness.proxy``, about 10 minutes on 2 CPUs).  Every run recomputes memlint's side
of every stored row (pure Python) and recompiles a rotating sample of fixtures (a different
window each day) to keep XLA's side honest.  The compiling test is skipped without JAX and
Keras (MEMLINT_REQUIRE_JAX=1 makes that a failure, as in CI).  The GPU-plan tier
(tests/test_gpu_plan.py) is the reference for the memory model; this CPU column stays beside
it for comparison.
"""

from __future__ import annotations

import datetime
import json

import pytest

from harness import proxy
from tests.conftest import require_modules

# Derived from the measured data (docs/gpu-verification.md; jax 0.10.2 on a CPU, batch 4):
# the bounds leave a little room above the stored figures and catch a change that makes
# things worse.
MEDIAN_TOLERANCE = 0.45
MODEL_TOLERANCE = 1.5
# Models whose CPU plan is smaller are left out of the per-model bound: their few kilobytes
# are dominated by what a GPU plan has and a CPU plan does not (the 256-byte pointer-table
# slots of multi-output kernels, docs/memory-model-v2.md); the GPU-plan tier checks them.
MODEL_TOLERANCE_FROM = 16 * 1024
SAMPLE = 8  # fixtures recompiled per run


def _require_jax() -> None:
    require_modules(("jax", "keras"), "MEMLINT_REQUIRE_JAX", "pip install jax keras")


def _stored() -> dict:
    return json.loads(proxy.DATA.read_text())


@pytest.fixture(scope="module")
def graphs():
    paths = sorted({proxy.ROOT / r["fixture"] for r in _stored()["rows"]})
    return proxy.memlint_graphs(paths, one_per_file=True)


def test_the_stored_table_is_current():
    """Every stored row is a fixture that still exists, and the table is large enough to
    mean something (fixtures added since are picked up by the next regeneration)."""
    rows = _stored()["rows"]
    stale = sorted({r["fixture"] for r in rows if not (proxy.ROOT / r["fixture"]).is_file()})
    assert not stale, f"regenerate with `python -m harness.proxy`: {stale[:5]}"
    assert len(rows) >= 100
    assert sum("relative_error" in r for r in rows) >= 0.8 * len(rows)


@pytest.mark.slow
def test_memlint_side_of_every_stored_row(graphs):
    """memlint's figure for each stored plan's configuration equals the stored one: when the
    memory model changes, the table (and docs/gpu-verification.md) must be regenerated."""
    moved = []
    for row in _stored()["rows"]:
        graph = graphs.get((row["fixture"], row["model"]))
        if "relative_error" not in row or graph is None:
            continue
        peak = proxy.memlint_estimate(graph, proxy.row_plan(row, graph)).peak
        if peak != row["memlint_peak"]:
            moved.append(f"{row['fixture']}::{row['model']}: {row['memlint_peak']:,} -> "
                         f"{peak:,}")
    assert not moved, "regenerate with `python -m harness.proxy`:\n" + "\n".join(moved)


def test_median_error_within_tolerance():
    rows = _stored()["rows"]
    median = proxy.median_error(rows)
    print(f"\nXLA CPU proxy (jax {_stored()['jax_version']}): median |error| {median:.1%} "
          f"over {sum('relative_error' in r for r in rows)} models")
    assert median <= MEDIAN_TOLERANCE
    worst = max((r for r in rows if "relative_error" in r
                 and r["xla_peak"] >= MODEL_TOLERANCE_FROM),
                key=lambda r: abs(r["relative_error"]))
    assert abs(worst["relative_error"]) <= MODEL_TOLERANCE, worst


@pytest.mark.slow
def test_rotating_sample_recompiles_to_the_stored_plans():
    _require_jax()
    stored = _stored()
    by_key = {(r["fixture"], r["model"]): r for r in stored["rows"]}
    fixtures = sorted({r["fixture"] for r in stored["rows"]})
    day = datetime.date.today().toordinal()
    sample = [proxy.ROOT / f for f in proxy.rotating_sample(fixtures, SAMPLE, day)]
    rows, meta = proxy.rows(paths=sample)
    same_jax = stored.get("jax_version") == meta["jax_version"]
    problems = []
    for row in rows:
        old = by_key.get((row["fixture"], row["model"]))
        if old is None:
            continue
        if ("error" in row) != ("error" in old):
            problems.append(f"{row['fixture']}::{row['model']}: "
                            f"{row.get('error', 'compiles')[:160]} (stored: "
                            f"{old.get('error', 'compiles')[:80]})")
        elif "error" not in row and same_jax and \
                abs(row["xla_peak"] - old["xla_peak"]) > 0.01 * old["xla_peak"]:
            problems.append(f"{row['fixture']}::{row['model']}: XLA {old['xla_peak']:,} -> "
                            f"{row['xla_peak']:,}")
    print(f"\nrecompiled {len(rows)} model(s) of {[p.name for p in sample]}")
    assert rows
    assert not problems, "regenerate with `python -m harness.proxy` if intended:\n" + \
        "\n".join(problems)


@pytest.mark.slow
def test_a_fixture_that_leaves_channels_first_set_does_not_break_the_next():
    """``tf_keras_resnet_shape_list`` sets channels_first and fails before setting it back;
    a fixture compiled after it in the same worker must still be built channels-last (it
    failed with "Computed output size would be negative" in pooling)."""
    _require_jax()
    answer = proxy.run_plans(["fixtures/tf_keras_resnet_shape_list.py",
                              "fixtures/unet_small.py"], workers=1)
    unet = answer["results"]["fixtures/unet_small.py"]
    assert "error" not in unet.get("unet", {"error": unet.get("__error__")}), unet
    assert unet["unet"]["peak"] > 0
