"""Multi-device plan tier: memlint's per-device estimate under a distribution strategy against
XLA's per-device memory plan of the Keras 3 JAX train step compiled for several described GPUs
(``1x1xN`` H100 and T4 topologies) without a GPU (``harness/multi_device_plan.py``; data in
``tests/data/multi_device_plans.json``; the tables in docs/gpu-verification.md, "Several GPUs
without GPUs").

* Without JAX: memlint's side is recomputed for every stored row and must equal what is
  stored (after a change to memlint: ``python -m harness.multi_device_plan
  --refresh-memlint``, and the docs' figures updated); memlint's per-device batch must be the
  global batch over the replicas in every row; the median |error| is printed and must not get
  worse than the stored one; the all-reduce finding (every gradient and its combined copy
  alive at once) must hold in the stored plans.
* With jax, jaxlib, jax-cuda12-plugin and ptxas: two stored rows (chosen by the date) are
  compiled again and XLA's figures must be within 1% of the stored ones.  Skipped without
  them, unless MEMLINT_REQUIRE_GPUPLAN=1 (CI), where that is a failure.  10-30 s.
"""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from harness import multi_device_plan as mdp
from tests.gpuplan_support import require_gpuplan

pytestmark = pytest.mark.gpuplan

SAMPLE_SIZE = 2
SLACK = 0.002  # rounding room on the percentages
DOCS = mdp.ROOT / "docs" / "gpu-verification.md"
SECTION = "## Several GPUs without GPUs"


@pytest.fixture(scope="module")
def stored() -> dict:
    return mdp.load()


@pytest.fixture(scope="module")
def recomputed(stored) -> dict:
    """The stored data with memlint's side computed now."""
    data = copy.deepcopy(stored)
    mdp.add_memlint(data["rows"])
    return data


def test_stored_data_covers_every_configuration(stored):
    meta, rows = stored["meta"], stored["rows"]
    for key in ("date", "versions", "targets", "memlint", "regenerate", "figures", "how"):
        assert meta.get(key), key
    assert meta["memlint"]["commit"] and meta["memlint"]["computed"]
    assert meta["regenerate"] == mdp.REGENERATE
    keys = [(r["id"], r["target"]) for r in rows]
    assert len(keys) == len(set(keys)), "duplicate rows"
    expected = {(c["id"], t) for c in mdp.configurations() for t in mdp.TARGETS}
    missing = expected - set(keys)
    assert not missing, f"no plan for {sorted(missing)[:4]}: run `{mdp.REGENERATE}`"
    compiled = [r for r in rows if "plan" in r]
    assert len(compiled) >= 0.9 * len(rows)
    for row in compiled:
        for plan in (row["plan"], row["twin_plan"]):
            assert plan["peak"] == plan["argument"] + plan["output"] - plan["alias"] \
                + plan["temp"] > 0
        assert row["overhead"]["peak"] == row["plan"]["peak"] - row["twin_plan"]["peak"]
        assert row["global_batch"] == row["per_device_batch"] * row["replicas"]


def test_configurations_match_the_stored_ones(stored):
    """What a row was compiled from is what the harness would compile now."""
    by_id = {c["id"]: c for c in mdp.configurations()}
    changed = []
    for row in stored["rows"]:
        config = by_id.get(row["id"])
        if config is None:
            changed.append(f"{row['id']}: no longer configured")
            continue
        for key, value in config.items():
            if row.get(key) != value:
                changed.append(f"{row['target']} {row['id']}: {key} {row.get(key)!r} -> "
                               f"{value!r}")
    assert not changed, "\n".join(changed[:10]) + f"\nrun `{mdp.REGENERATE}`"


def test_memlint_side_equals_the_stored_figures(stored, recomputed):
    """memlint's per-device estimate (and its twin's) for every stored row equals the stored
    one: the docs' tables show what memlint computes now."""
    moved = []
    for old, new in zip(stored["rows"], recomputed["rows"]):
        a, b = old.get("memlint") or {}, new.get("memlint") or {}
        for key in ("peak", "twin_peak", "per_device_batch", "params_per_device"):
            if a.get(key) != b.get(key):
                moved.append(f"{old['target']} {old['id']}: {key} {a.get(key)} -> {b.get(key)}")
        if old.get("memlint_error") != new.get("memlint_error"):
            moved.append(f"{old['target']} {old['id']}: {new.get('memlint_error')}")
    assert not moved, (
        f"memlint's per-device estimates moved in {len(moved)} places; if intended, run "
        f"`{mdp.REFRESH}` (or `{mdp.REGENERATE}` to recompile everything), then update the "
        "figures in docs/gpu-verification.md (`python -m harness.multi_device_plan "
        "--table`):\n" + "\n".join(moved[:20]))


def test_memlint_splits_the_global_batch_over_the_replicas(recomputed):
    """memlint's per-device batch (memlint.placement, from the code's strategy or --gpus)
    is the global batch over the replicas XLA split it over, in every row."""
    wrong = []
    for row in recomputed["rows"]:
        side = row.get("memlint")
        if side is None:
            continue
        if (side["per_device_batch"], side["global_batch"], side["replicas"]) != (
                row["global_batch"] // row["replicas"], row["global_batch"], row["replicas"]):
            wrong.append(f"{row['target']} {row['id']}: memlint {side['per_device_batch']} of "
                         f"{side['global_batch']} over {side['replicas']}, expected "
                         f"{row['global_batch'] // row['replicas']} of {row['global_batch']} "
                         f"over {row['replicas']}")
        assert side["strategy"], row["id"]
    assert not wrong, "\n".join(wrong)
    assert sum("memlint" in r for r in recomputed["rows"]) >= 0.9 * sum(
        "plan" in r for r in recomputed["rows"])


def _report(name: str, figures: dict) -> None:
    for target, s in figures.items():
        if s["n"]:
            print(f"{name}, {target}: {s['n']} rows, median |error| {s['median']:.1%}, "
                  f"max {s['max']:.1%}, beyond 20%: {s['beyond_20']}")


def test_median_error_does_not_get_worse(stored, recomputed):
    """memlint per device against XLA per device (strategy fixtures, constructed data
    parallelism, model parallelism): printed, and not worse than the stored figures.  The
    issue's targets (median <= 5%, none beyond 20%) are not met yet: see the docs."""
    now = mdp.figures(recomputed["rows"])
    before = stored["meta"]["figures"]
    print()
    _report("stored", before)
    _report("now", now)
    _report("now, one-device twins", mdp.figures(recomputed["rows"],
                                                 key="twin_relative_error"))
    _report("now, with the all-reduce term", mdp.figures(recomputed["rows"],
                                                         key="with_all_reduce_error"))
    worse = [f"{t}: median {now[t]['median']:.1%} (stored {s['median']:.1%}), beyond 20% "
             f"{now[t]['beyond_20']} (stored {s['beyond_20']})"
             for t, s in before.items() if s["n"] and now[t]["n"]
             and (now[t]["median"] > s["median"] + SLACK or now[t]["beyond_20"] > s["beyond_20"])]
    assert not worse, "memlint is further from the per-device plans than stored:\n" + \
        "\n".join(worse)


def test_every_gradient_and_its_combined_copy_are_alive_at_once(stored):
    """The finding the docs state: where no gradient is above XLA's all-reduce combine
    threshold, the data-parallel step's temporaries hold at least G + C per device (every
    gradient, and the combined buffer they are copied into for the all-reduce)."""
    checked = 0
    for row in stored["rows"]:
        over = row.get("overhead")
        if not over or row["replicas"] < 2 or over["largest_all_reduce"] > \
                mdp.COMBINE_THRESHOLD:
            continue
        floor = over["gradient_bytes"] + over["combined_bytes"]
        assert row["plan"]["temp"] >= floor * 0.999, (row["target"], row["id"])
        checked += 1
    assert checked >= 20


def test_rotating_sample_is_deterministic_per_day(stored):
    rows = stored["rows"]
    day = dt.date(2026, 3, 1)
    first = mdp.sample(rows, SAMPLE_SIZE, day)
    assert first == mdp.sample(rows, SAMPLE_SIZE, day)
    assert len({(r["id"], r["target"]) for r in first}) == SAMPLE_SIZE
    later = [mdp.sample(rows, SAMPLE_SIZE, day + dt.timedelta(days=n)) for n in range(1, 40)]
    seen = {(r["id"], r["target"]) for s in later for r in s}
    assert len(seen) >= 0.5 * sum("plan" in r for r in rows)


def test_docs_quote_the_stored_figures(stored):
    text = DOCS.read_text(encoding="utf-8")
    assert SECTION in text
    section = text[text.index(SECTION):]
    overall = stored["meta"]["figures"]["all"]
    assert f"{overall['median']:.1%}" in section, \
        "docs/gpu-verification.md does not quote the stored median |error|"


def test_rotating_sample_recompiles_to_the_stored_plans(stored):
    """Today's two rows compiled again: XLA's per-device figures and the twin's within 1% of
    the stored ones."""
    require_gpuplan()
    chosen = mdp.sample(stored["rows"], SAMPLE_SIZE)
    fresh, meta = mdp.recompile(chosen)
    versions = meta.get("versions") or {}
    note = ""
    if any(versions.get(k) != stored["meta"]["versions"].get(k)
           for k in ("jax", "jaxlib", "jax-cuda12-plugin", "keras")):
        note = (f"\ninstalled {versions} differ from the stored "
                f"{stored['meta']['versions']}: run `{mdp.REGENERATE}`")
    off = []
    for old in chosen:
        new = fresh[(old["id"], old["target"])]
        label = f"{old['target']} {old['id']}"
        if "plan" not in new:
            off.append(f"{label}: {new.get('error', 'no plan')[:300]}")
            continue
        for which in ("plan", "twin_plan"):
            for key in ("argument", "output", "alias", "temp", "peak"):
                a, b = old[which][key], new[which][key]
                if abs(a - b) > 0.01 * max(a, 1):
                    off.append(f"{label}: {which} {key} stored {a:,}, now {b:,}")
        print(f"{label}: per device {new['plan']['peak']:,} (stored {old['plan']['peak']:,}),"
              f" twin {new['twin_plan']['peak']:,} (stored {old['twin_plan']['peak']:,}), "
              f"compiled in {new.get('compile_s')} s")
    assert not off, "\n".join(off) + note
