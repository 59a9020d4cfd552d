"""The Markdown job summary (``--job-summary FILE``, ``$GITHUB_STEP_SUMMARY`` under GitHub
Actions): one row per model with figures read from the JSON report of the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memlint.units import format_bytes

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [ROOT / "fixtures" / "small_cnn_fits.py", ROOT / "fixtures" / "seed_gtx960.py",
            ROOT / "fixtures" / "dcgan_two_models.py"]


def memlint(*args, env=None):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    environ.update(env or {}, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "memlint", *map(str, args), "--no-cache"],
                          capture_output=True, text=True, cwd=ROOT, env=environ, timeout=300)


def table_rows(markdown: str) -> list:
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]


def test_summary_rows_match_the_json_report(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    proc = memlint("check", *FIXTURES, "--gpu", "2GiB", "--job-summary", target)
    assert proc.returncode == 1
    doc = json.loads(memlint("check", *FIXTURES, "--gpu", "2GiB", "--output-format",
                             "json").stdout)
    text = target.read_text()
    assert text.startswith("earlier step\n## memlint: GPU memory")  # appended
    rows = table_rows(text)
    assert len(rows) == len(doc["models"]) >= 3
    for row, model in zip(rows, doc["models"]):
        assert row[0] == f"`{model['name']}`"
        assert row[2] == f"{model['params']['total']:,}"
        assert row[3].endswith(format_bytes(model["memory"]["peak"]))
        verdict = {"fits": "fits", "does_not_fit": "does not fit",
                   "unknown": "unknown"}[model["verdict"]]
        assert verdict in row[6]
        largest = model["largest_batch_size"]
        assert row[7] == (f"{largest:,}" if largest is not None else "—")
    errors = sum(d["severity"] == "error" for d in doc["diagnostics"])
    assert f"{errors} error" in text


def test_github_actions_appends_to_the_step_summary(tmp_path):
    target = tmp_path / "step_summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(target)}
    proc = memlint("check", FIXTURES[0], "--gpu", "2GiB", env=env)
    assert proc.stdout.startswith("::") or proc.stdout == ""
    first = target.read_text()
    assert "| `sequential` |" in first and "✅ fits" in first
    memlint("check", FIXTURES[0], "--gpu", "2GiB", env=env)
    assert target.read_text() == first * 2
    # not under GitHub Actions: nothing written
    memlint("check", FIXTURES[0], env={"GITHUB_STEP_SUMMARY": str(target)})
    assert target.read_text() == first * 2


def test_unwritable_summary_is_a_warning(tmp_path):
    proc = memlint("check", FIXTURES[0], "--job-summary", tmp_path / "missing" / "x.md")
    assert proc.returncode == 0 and "cannot write the job summary" in proc.stderr
    assert "Traceback" not in proc.stderr
