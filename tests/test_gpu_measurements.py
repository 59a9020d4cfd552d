"""memlint against what real GPUs measured (data/measurements/*.jsonl other than the CPU
files, recorded by harness/measure.py on a GPU machine: docs/gpu-verification.md).  The
stored memlint side must be today's (``python -m harness.measure --refresh-memlint FILE``
after a change to the memory model), and the torch profile must hold its figures on them."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from harness import compare
from harness.measure import memlint_breakdown

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for p in (ROOT / "data" / "measurements").glob("*.jsonl")
               if not p.name.startswith("cpu-"))
ROWS = [row for path in FILES for row in compare.load([path])]


def test_there_are_gpu_measurements():
    assert FILES and any(r.get("measured_peak") for r in ROWS)


@pytest.mark.parametrize("row", [r for r in ROWS if r.get("status") in ("ok", "oom")],
                         ids=lambda r: f"{r['backend']}-{Path(r['fixture']).stem}-b{r['batch']}-"
                                       f"{r['optimizer']}-{r['precision']}-{r['mode']}-"
                                       f"{r.get('kind') or 'peak'}")
def test_stored_memlint_side_is_todays(row):
    _, breakdown = memlint_breakdown(row)
    assert breakdown.peak == row["memlint_peak"], (
        "memlint's estimate changed: python -m harness.measure --refresh-memlint "
        + " ".join(str(p.relative_to(ROOT)) for p in FILES))


def test_torch_profile_against_measured_peaks():
    errors = [compare.relative_error(r)[0] for r in ROWS if r["backend"] == "torch"]
    errors = [e for e in errors if e is not None]
    assert len(errors) >= 10
    assert statistics.median(abs(e) for e in errors) <= 0.05
    assert min(errors) >= -0.05, "memlint under the measured torch peak by more than 5%"


def test_stored_device_plans_memlint_side_is_the_oracle_tiers():
    # the plans XLA compiled on a GPU (harness/device_plan.py) sit beside memlint's estimate
    # of the same stored oracle row: it must be today's, as docs/measurements.md reads it
    from harness import device_plan, gpu_plan

    files = sorted((ROOT / "data" / "measurements").glob("device-plans-*.json"))
    assert files
    stored = gpu_plan.load()
    for path in files:
        data = json.loads(path.read_text())
        before = [row.get("memlint_peak") for row in data["rows"]]
        changed = device_plan.refresh_memlint(data, stored)
        assert changed == 0, (
            f"memlint's estimate changed: python -m harness.device_plan --refresh-memlint "
            f"{path.relative_to(ROOT)}")
        assert [row.get("memlint_peak") for row in data["rows"]] == before
