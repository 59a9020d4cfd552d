"""The GPU tier (``pytest -m gpu``): real training steps on a GPU through the harness, with
the issue's targets checked on what was measured.  Skipped cleanly without a GPU."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess

import pytest

from harness import compare

COMMAND = ("pytest -m gpu, and for the data: OUT=<folder> bash harness/gpu_session.sh (keras "
           "carried as wheels: docs/gpu-verification.md)")


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None or importlib.util.find_spec("keras") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30
                              ).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.gpu
def test_small_matrix_meets_targets(tmp_path):
    if not _has_gpu():
        pytest.skip(f"no GPU (or no keras) here; on a GPU machine run: {COMMAND}")
    from harness import measure

    out = tmp_path / "gpu.jsonl"
    backends = [b for b in ("jax", "torch") if importlib.util.find_spec(b)]
    assert measure.main(["--backends", ",".join(backends), "--matrix", "tiny", "--verdicts",
                         "--jobs", "4", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["status"] in ("ok", "oom") for r in rows), rows
    for s in compare.summarise(rows):
        if s["basis"] != "measured":
            continue
        print(s)
        assert s["fit_then_oom"] == 0, s
        if s["median_abs_error"] is not None:
            assert s["median_abs_error"] <= 0.05, s
        if s["wrong_verdict_rate"] is not None:
            assert s["wrong_verdict_rate"] <= 0.05, s
