"""Torch-step oracle tier: memlint's ``torch`` profile against the exact live-tensor peak of
each fixture's Keras 3 train step run eagerly with the PyTorch backend on the CPU
(``harness/torch_step.py``; data in ``tests/data/torch_steps.json``; the comparison in
docs/torch-oracle.md).

* The stored data is checked without torch: memlint's side is recomputed for every stored
  row and must equal what is stored (after a change to memlint: ``python -m
  harness.torch_step --refresh-memlint``, and the docs' figures updated), and the docs must
  quote the stored figures.
* The measuring method is checked on one Dense layer trained with SGD, where every tensor
  alive at the peak follows from what autograd holds (sizes computed by hand below).
* A rotating sample of stored rows (3 a day, chosen by the date, among the quick ones) is
  measured again: the peaks must equal the stored ones exactly.
  The last two need torch and Keras: skipped without them, unless MEMLINT_REQUIRE_EXPORTERS=1
  (CI, where torch is installed), where that is a failure.
"""

from __future__ import annotations

import copy
import datetime as dt
import pytest

from harness import torch_step
from tests.conftest import require_modules

SAMPLE_SIZE = 3
SAMPLE_MAX_SECONDS = 8.0  # rows whose stored measurement (both steps) took at most this
DOCS = torch_step.ROOT / "docs" / "torch-oracle.md"
F32 = 4


def require_torch() -> None:
    require_modules(("torch", "keras"), "MEMLINT_REQUIRE_EXPORTERS",
                    "pip install -e '.[oracle,exporters]'")


@pytest.fixture(scope="module")
def stored() -> dict:
    return torch_step.load()


@pytest.fixture(scope="module")
def graphs() -> dict:
    return torch_step._graphs()


@pytest.fixture(scope="module")
def recomputed(stored, graphs) -> dict:
    """The stored data with memlint's side computed now."""
    data = copy.deepcopy(stored)
    torch_step.add_memlint(data["rows"], graphs)
    return data


def test_stored_data_is_consistent(stored):
    meta, rows = stored["meta"], stored["rows"]
    for key in ("date", "versions", "method", "matrix", "figures"):
        assert meta.get(key), key
    assert meta["versions"]["torch"] and meta["versions"]["keras"]
    assert meta["backend"] == "torch"
    keys = [torch_step.row_key(r) for r in rows]
    assert len(keys) == len(set(keys)), "duplicate configurations"
    assert {r["batch"] for r in rows} == set(torch_step.BATCHES)
    measured = [r for r in rows if "oracle" in r]
    assert len(measured) >= 0.75 * len(rows)
    for row in measured:
        o = row["oracle"]
        assert o["peak"] == o["baseline"] + o["extra_peak"]
        assert o["baseline"] == sum(o["baseline_parts"].values())
        assert sum(o["at_peak"].values()) == o["peak"]
        assert o["end_minus_baseline"] >= 0  # this step's gradients replace the last ones
    assert "/work/" not in torch_step.DATA.read_text(encoding="utf-8")
    assert meta["figures"] == torch_step.figures(stored)


def test_stored_data_covers_the_matrix(stored, graphs):
    expected = {torch_step.row_key(r) for r in torch_step.matrix(graphs)}
    missing = expected - {torch_step.row_key(r) for r in stored["rows"]}
    assert not missing, (f"{len(missing)} configurations were never measured (new fixtures?), "
                         f"e.g. {sorted(missing)[:3]}: run `{torch_step.REGENERATE}`")


def test_no_fixture_changed_since_its_measurement(stored):
    from harness import gpu_plan

    stale = sorted({r["fixture"] for r in stored["rows"] if "source_sha" in r
                    and (torch_step.ROOT / r["fixture"]).exists()
                    and r["source_sha"] != gpu_plan.source_sha(r["fixture"])})
    assert not stale, f"changed since measured: {stale}; run `{torch_step.REGENERATE}`"


def test_memlint_side_equals_the_stored_figures(stored, recomputed):
    """memlint's estimate for every stored row equals the stored one: the comparison in the
    docs shows what memlint computes now."""
    moved = []
    for old, new in zip(stored["rows"], recomputed["rows"]):
        if old.get("memlint") != new.get("memlint"):
            before = (old.get("memlint") or {}).get("peak")
            after = (new.get("memlint") or {}).get("peak")
            moved.append(f"{old['fixture']}::{old['model']} b{old['batch']}: "
                         f"{before} -> {after}")
    assert not moved, (
        f"memlint's estimates moved in {len(moved)} rows; if intended, run "
        f"`{torch_step.REFRESH}` (then `python -m harness.torch_step --table` and update "
        "docs/torch-oracle.md):\n" + "\n".join(moved[:20]))


def test_memlint_exact_is_its_rounded_peak_without_the_rounding(stored):
    for row in torch_step.ok_rows(stored["rows"]):
        m = row["memlint"]
        assert m["peak"] == m["peak_rounded"] - m["parts"].get(torch_step.ROUNDING, 0)
        assert m["peak"] == sum(v for k, v in m["parts"].items() if k != torch_step.ROUNDING)
        assert row["relative_error"] == round(
            (m["peak"] - row["oracle"]["peak"]) / row["oracle"]["peak"], 4)


def test_docs_quote_the_stored_figures(stored):
    text = DOCS.read_text(encoding="utf-8")
    overall = stored["meta"]["figures"]["all"]
    for key in ("median", "p90", "max"):
        assert f"{overall[key]:.1%}" in text, f"docs/torch-oracle.md does not quote {key}"
    assert f"| all | {overall['n']} |" in text
    assert torch_step.markdown(stored).split("\n\n")[2] in text, \
        "the figures table in docs/torch-oracle.md is not the stored one (--table)"


def test_rotating_sample_is_deterministic_per_day(stored):
    rows = stored["rows"]
    day = dt.date(2026, 3, 1)
    first = torch_step.sample(rows, SAMPLE_SIZE, day, SAMPLE_MAX_SECONDS)
    assert first == torch_step.sample(rows, SAMPLE_SIZE, day, SAMPLE_MAX_SECONDS)
    assert len(first) == SAMPLE_SIZE
    assert len({r["fixture"] for r in first}) == SAMPLE_SIZE
    others = [torch_step.sample(rows, SAMPLE_SIZE, day + dt.timedelta(days=n),
                                SAMPLE_MAX_SECONDS) for n in (1, 2)]
    assert any(o != first for o in others)


@pytest.mark.oracle
def test_method_on_one_dense_layer():
    """``Dense(U)`` on F features, batch B, SGD, MSE, measured by the harness's method.

    Before the step: the kernel and bias (F*U + U floats), SGD's two scalar variables
    (iteration int32, learning rate), the loss tracker's two, the batch (B*F), the targets
    (B*U) and, from the step before, the gradients in ``.grad`` (F*U + U).

    Keras's torch ``train_step`` runs the forward, then ``zero_grad`` (frees the previous
    gradients), then the loss, ``backward`` and the update.  For B=2, F=3, U=4 the peak is in
    MSE's backward: alive are the prediction y (B*U, kept for the metrics), y - t (B*U, saved
    by ``pow``), two scalars (the loss and the scaled loss) and four B*U tensors of
    ``pow``'s backward, grad * (2 * (y - t) ** 1): the mean's gradient, the power, the
    product by 2, the product by the gradient.  For B=8, F=100, U=3 the peak is at the
    kernel's gradient: the new ``.grad`` (F*U + U), y, the two scalars and the gradient
    flowing into the matrix product (B*U).  After the step exactly the baseline is alive
    again (new gradients for the old); nothing is left to the cyclic collector.
    """
    require_torch()
    small, wide = torch_step.run_tiny([dict(batch=2, features=3, units=4),
                                       dict(batch=8, features=100, units=3)])
    for r, (b, f, u) in ((small, (2, 3, 4)), (wide, (8, 100, 3))):
        params = (f * u + u) * F32
        assert r["jit_compile"] is False
        assert r["baseline_parts"] == {
            "weights": params, "optimizer": 8, "previous gradients": params, "metrics": 8,
            "input batch": b * f * F32, "targets": b * u * F32}
        assert r["other_not_counted"] == 0
        assert r["end_minus_baseline"] == 0
        assert r["cyclic_garbage"] == 0
    state = {"weights": 12 * F32 + 4 * F32, "optimizer": 8, "metrics": 8,
             "input batch": 2 * 3 * F32, "targets": 2 * 4 * F32}
    assert small["peak_phase"] == "backward"
    assert small["at_peak"] == {**state, "forward": 8 * F32, "loss": 8 * F32 + 2 * F32,
                                "backward": 4 * 8 * F32}
    assert small["peak"] == 336
    assert wide["peak_phase"] == "backward"
    assert wide["at_peak"] == {
        "weights": 303 * F32, "optimizer": 8, "metrics": 8, "input batch": 800 * F32,
        "targets": 24 * F32, "gradients": 303 * F32, "forward": 24 * F32, "loss": 2 * F32,
        "backward": 24 * F32}


@pytest.mark.oracle
def test_rotating_sample_measures_the_stored_peaks(stored):
    """Today's sample measured again: every storage count and byte figure equal."""
    require_torch()
    chosen = torch_step.sample(stored["rows"], SAMPLE_SIZE, max_seconds=SAMPLE_MAX_SECONDS)
    fresh = torch_step.remeasure(chosen)
    off = []
    for old, new in zip(chosen, fresh):
        label = f"{old['fixture']}::{old['model']} b{old['batch']}"
        if "oracle" not in new:
            off.append(f"{label}: {new.get('error', 'no result')[:300]}")
            continue
        for key in ("baseline", "extra_peak", "peak", "at_peak", "peak_phase"):
            if old["oracle"][key] != new["oracle"][key]:
                off.append(f"{label}: {key} stored {old['oracle'][key]}, now "
                           f"{new['oracle'][key]}")
        print(f"{label}: peak {new['oracle']['peak']:,} (stored {old['oracle']['peak']:,})")
    assert not off, "\n".join(off) + f"\n(after a deliberate change: `{torch_step.REGENERATE}`)"
