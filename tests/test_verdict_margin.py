"""The verdict's margin: "fits" only with room for memlint's own error.

The margins of the backend profiles come from the stored oracle comparisons: with its
profile's margin (a share of memlint's peak), memlint's peak must cover every stored peak of a model of 1 MiB or more
(XLA's plans of the step compiled for GPU targets, the torch step's allocation trace), so
none of them would have been a "fits" that dies.  Smaller models are dominated by fixed
buffers: there the under-estimate must stay under 256 KiB, far below any GPU's size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from harness import gpu_plan_table
from memlint.analysis import analyze_text
from memlint.budget import Budget
from memlint.config import ConfigError, parse_margin, settings_from_table
from memlint.memory.estimate import MemoryBreakdown, Part
from memlint.memory.profiles import DEFAULT, PROFILES
from memlint.memory.verdict import (DOES_NOT_FIT, FITS, TOO_CLOSE, UNKNOWN, margin_for,
                                    verdict)
from memlint.reporters.json_format import model_dict
from memlint.reporters.text import verdict_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
MiB = 2**20
LARGE = MiB  # models whose oracle peak is at least this are held to the margin
SMALL_SLACK = 256 * 2**10  # smaller ones: the most bytes memlint may be under


def gpu(usable: int, margin=None) -> Budget:
    return Budget(label="test", device="GPU under test", total=usable, cuda_context=0,
                  framework_reserve=0, margin=margin)


def breakdown(profile=None, batch_known=True, unknown=()) -> MemoryBreakdown:
    """Batch 4: 1,000 fixed bytes + 4 x 500 per sample = 3,000 bytes."""
    return MemoryBreakdown(
        mode="train", batch_size=4, profile=profile,
        parts=[Part("weights", "weights", 1000), Part("saved activations", "activations", 2000)],
        per_sample_bytes=500, fixed_bytes=1000, batch_known=batch_known,
        unknown_activations=list(unknown))


# ====================================================================== verdict()

def test_fits_only_with_the_margin_else_too_close():
    # 3,000 bytes with a 10% margin need 3,300
    assert verdict(breakdown(), gpu(3300, 0.1)).status == FITS
    close = verdict(breakdown(), gpu(3299, 0.1))
    assert close.status == TOO_CLOSE and close.margin == 0.1
    assert verdict(breakdown(), gpu(3000, 0.1)).status == TOO_CLOSE
    assert verdict(breakdown(), gpu(2999, 0.1)).status == DOES_NOT_FIT
    assert verdict(breakdown(), gpu(3000, 0.0)).status == FITS


def test_largest_batch_fits_with_the_margin():
    # usable 10,000 with 25%: 8,000 for the estimate: (8,000 - 1,000) // 500 = 14
    assert verdict(breakdown(), gpu(10_000, 0.25)).largest_batch_size == 14
    assert verdict(breakdown(), gpu(10_000, 0.0)).largest_batch_size == 18


def test_lower_bound_stays_unknown_whatever_the_margin():
    result = verdict(breakdown(unknown=["conv2d"]), gpu(10**9, 0.0))
    assert result.status == UNKNOWN and result.largest_batch_size is None


def test_margin_is_the_profiles_unless_configured():
    for name, profile in PROFILES.items():
        assert margin_for(breakdown(profile=name)) == (profile.verdict_margin,
                                                       profile.margin_basis)
        assert margin_for(breakdown(profile=name), gpu(1, 0.05)) == (0.05, "configured")
        inference = replace(breakdown(profile=name), mode="infer")
        assert margin_for(inference) == (
            (profile.inference_margin, profile.inference_margin_basis)
            if profile.inference_margin is not None
            else (profile.verdict_margin, profile.margin_basis))
        assert margin_for(inference, gpu(1, 0.05)) == (0.05, "configured")
    assert margin_for(breakdown()) == (DEFAULT.verdict_margin, DEFAULT.margin_basis)
    for profile in [*PROFILES.values(), DEFAULT]:
        assert 0 < profile.verdict_margin < 1 and profile.margin_basis
        assert profile.inference_margin is None or (
            0 < profile.inference_margin < 1 and profile.inference_margin_basis)
    assert margin_for(replace(breakdown(profile="xla"), mode="infer"))[0] \
        > margin_for(breakdown(profile="xla"))[0]


def test_parse_margin_forms_and_errors():
    assert parse_margin("10%", "x") == pytest.approx(0.1)
    assert parse_margin("12.5", "x") == pytest.approx(0.125)
    assert parse_margin(0, "x") == 0
    for bad in ("-1%", "101", "ten", True, "5%%"):
        with pytest.raises(ConfigError, match="margin must be a percentage"):
            parse_margin(bad, "x")


# ====================================================================== the stored comparisons

def _rows(name: str) -> list:
    return json.loads((DATA / name).read_text())["rows"]


def _comparisons():
    """(profile, training or not, what, memlint's peak, the oracle's peak) of every stored
    comparison (a plan larger than its GPU, rematerialised by XLA, is not one)."""
    for r in _rows("gpu_plans.json"):
        if r.get("relative_error") is not None and not gpu_plan_table.over_the_card(r):
            yield ("xla", r["mode"] == "train",
                   f"{r['target']} {r['mode']} {r['fixture']}::{r['model']} "
                   f"batch {r['batch']} {r['optimizer_key']} {r['precision_requested']}",
                   r["memlint"]["peak"], r["plan"]["peak"])
    for r in _rows("torch_steps.json"):
        if r.get("relative_error") is not None:
            yield ("torch", True, f"{r['fixture']}::{r['model']} batch {r['batch']} "
                                  f"{r['optimizer_key']} {r['precision_requested']}",
                   r["memlint"]["peak"], r["oracle"]["peak"])


def _margin(profile: str, training: bool) -> tuple:
    """(margin, basis) the verdict takes for a step of that profile and mode."""
    mode = "train" if training else "infer"
    return margin_for(replace(breakdown(profile=profile), mode=mode))


def test_margins_cover_every_stored_comparison():
    found = {"xla": 0, "torch": 0}
    uncovered = []
    for profile, training, what, peak, oracle in _comparisons():
        found[profile] += 1
        margin = _margin(profile, training)[0]
        if oracle >= LARGE and peak * (1 + margin) < oracle:
            uncovered.append(f"{profile}: {what}: {peak:,} + {margin:.0%} < {oracle:,}")
        if oracle < LARGE and oracle - peak > SMALL_SLACK:
            uncovered.append(f"{profile}: {what}: {oracle - peak:,} bytes under")
    assert found["xla"] > 500 and found["torch"] > 200
    assert not uncovered, "\n".join(uncovered)


def test_margins_stay_tied_to_the_data():
    """Each margin (training, and outside training where a profile has its own) is within 5
    points of the most an oracle came out over memlint's peak (when memlint improves, the
    margin should shrink with it), its basis quotes that figure, and the profiles without an
    oracle take the largest margins."""
    worst = {("xla", True): 0.0, ("xla", False): 0.0, ("torch", True): 0.0}
    for profile, training, _, peak, oracle in _comparisons():
        if oracle >= LARGE:
            worst[profile, training] = max(worst[profile, training], (oracle - peak) / peak)
    for (name, training), under in worst.items():
        margin, basis = _margin(name, training)
        assert under <= margin <= under + 0.05, (name, training, under, margin)
        assert f"{under:.1%}" in basis, (name, training, under)
    largest = max(p.verdict_margin for p in PROFILES.values())
    assert PROFILES["tf-graph"].verdict_margin == DEFAULT.verdict_margin == largest
    largest = max(_margin(name, False)[0] for name in PROFILES)
    assert _margin("tf-graph", False)[0] == DEFAULT.inference_margin == largest


# ====================================================================== end to end

SOURCE = """
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(1024,)), keras.layers.Dense(256),
                          keras.layers.Dense(10)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=1024)
"""


def run(**options):
    table = {"cuda-context": "1MiB", "reserve": "1MiB", **options}
    return analyze_text(textwrap.dedent(SOURCE).lstrip("\n"), "model.py",
                        settings_from_table(table, "test"))


def _peak() -> int:
    return run().breakdowns[0].peak


def test_too_close_warns_and_names_the_batch_that_fits_with_the_margin():
    peak = _peak()
    report = run(gpu=str(int(peak * 1.05) + 2 * MiB))  # usable: 5% over the peak
    graph, breakdown = report.models[0], report.breakdowns[0]
    result = verdict(breakdown, report.budget)
    assert result.status == TOO_CLOSE and result.margin == DEFAULT.verdict_margin
    (d,) = [d for d in report.diagnostics if d.code == "MEM002"]
    assert d.severity == "warning" and d.line == 7  # the fit() call
    assert "too close to call" in d.message \
        and f"{DEFAULT.verdict_margin:.0%} margin" in d.message
    best = d.data["max_batch_size"]
    assert 0 < best < 1024 and f"batch size <= {best} fits with the margin" in d.message
    assert "too close to call" in verdict_text(result)
    data = model_dict(graph, breakdown, "model.py", report.budget)
    assert (data["verdict"], data["verdict_margin"]) == (TOO_CLOSE, DEFAULT.verdict_margin)


def test_fits_with_room_or_with_the_margin_set_to_zero():
    peak = _peak()
    roomy = run(gpu=str(int(peak * (1 + DEFAULT.verdict_margin + 0.02)) + 2 * MiB))
    assert verdict(roomy.breakdowns[0], roomy.budget).status == FITS
    assert not [d for d in roomy.diagnostics if d.code == "MEM002"]
    bare = run(gpu=str(int(peak * 1.05) + 2 * MiB), margin="0%")
    assert verdict(bare.breakdowns[0], bare.budget).status == FITS
    assert not [d for d in bare.diagnostics if d.code == "MEM002"]


def test_cli_margin_flag_and_its_error(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    peak = _peak()
    size = str(int(peak * 1.05) + 2 * MiB)
    base = [sys.executable, "-m", "memlint", "report", str(model), "--gpu", size,
            "--cuda-context", "1MiB", "--reserve", "1MiB", "--no-cache"]
    out = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and "too close to call" in out.stdout
    out = subprocess.run(base + ["--margin", "2%"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert "fits (with the 2% margin)" in out.stdout
    out = subprocess.run(base + ["--margin", "lots"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2 and "margin must be a percentage" in out.stderr
    assert "Traceback" not in out.stderr
