"""``memlint check --diff BASE``: models at a git revision against the work tree.

Each test builds a small git repository; the expected peaks come from analysing each
version of the files on its own, never from numbers written here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings
from memlint.diff import ModelState, signed_percent
from memlint.memory.verdict import verdict

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

HELPER = "WIDTH = {width}\n"
MODEL = '''\
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

from blocks import WIDTH

model = keras.Sequential([
    keras.Input(shape=(64, 64, 3)),
    layers.Conv2D(WIDTH, 3, activation="relu"),
    layers.Conv2D(WIDTH, 3, activation="relu"),
    layers.GlobalAveragePooling2D(),
    layers.Dense(10),
])
model.compile(optimizer="adam", loss="mse")
open("EXECUTED", "w").write("memlint ran the model file")  # must never happen
model.fit(np.zeros((64, 64, 64, 3)), np.zeros((64, 10)), batch_size=32)
'''
OTHER = '''\
from tensorflow import keras
other = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(4)], name="other")
other.compile(optimizer="sgd", loss="mse")
other.fit(x=None, batch_size=4)
'''


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def memlint(*args, cwd, env=None):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    environ["PYTHONPATH"] = str(ROOT)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "memlint", *map(str, args), "--no-cache"],
                          capture_output=True, text=True, cwd=cwd, env=environ, timeout=300)


@pytest.fixture
def repo(tmp_path):
    """A repository whose model imports its width from a project module, committed."""
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "blocks.py").write_text(HELPER.format(width=16))
    (project / "models" / "cnn.py").write_text(MODEL)
    (project / "models" / "other.py").write_text(OTHER)
    git("init", "-q", cwd=project)
    git("add", ".", cwd=project)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base",
        cwd=project)
    return project


def state_of(path: Path, gpu: str = "8GiB") -> ModelState:
    """The model's figures for the file as it is now (analysed directly, no git)."""
    report = analyze_file(str(path), Settings(gpu=gpu))
    graph, breakdown = report.models[0], report.breakdowns[0]
    return ModelState.of(graph, breakdown, report.budget)


def expected_peaks(repo: Path, old_width: int, new_width: int) -> tuple:
    """The peaks of the two versions, each analysed in a folder of its own."""
    peaks = []
    for width in (old_width, new_width):
        folder = repo.parent / f"copy_{width}"
        folder.mkdir()
        (folder / "blocks.py").write_text(HELPER.format(width=width))
        (folder / "cnn.py").write_text(MODEL)
        peaks.append(state_of(folder / "cnn.py").peak)
    return tuple(peaks)


def test_growth_through_an_imported_module_is_read_at_the_base(repo):
    """Only the imported module changes: the base side must read it at the base revision."""
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=256))
    status_before = git("status", "--porcelain", cwd=repo)
    proc = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "--output-format", "json",
                   "models", cwd=repo)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    old, new = expected_peaks(repo, 16, 256)
    assert old < new
    change = next(m for m in doc["diff"]["models"] if m["path"] == "models/cnn.py")
    assert change["status"] == "changed"
    assert (change["base"]["peak"], change["head"]["peak"]) == (old, new)
    assert change["peak_change"] == new - old
    growth = [d for d in doc["diagnostics"] if d["code"] == "MEM007"]
    assert len(growth) == 1 and growth[0]["path"] == "models/cnn.py"
    assert growth[0]["line"] == 7 and signed_percent((new - old) / old) in growth[0]["message"]
    other = next(m for m in doc["diff"]["models"] if m["name"] == "other")
    assert other["status"] == "unchanged"
    # nothing checked out, written or run in the work tree
    assert git("status", "--porcelain", cwd=repo) == status_before
    assert not (repo / "EXECUTED").exists() and not (repo / "models" / "EXECUTED").exists()


def test_thresholds_from_config_decide_whether_growth_is_a_finding(repo):
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=24))
    old, new = expected_peaks(repo, 16, 24)
    growth = new - old
    assert growth > 0
    config = repo / "pyproject.toml"
    # both limits just under the growth: a finding
    config.write_text("[tool.memlint.rules.MEM007]\n"
                      f"growth-share = {growth / old * 0.9}\ngrowth-bytes = {growth - 1}\n")
    found = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "models/cnn.py", cwd=repo)
    assert found.returncode == 1 and "MEM007" in found.stdout, found.stdout + found.stderr
    # the size limit just over it: only listed in the diff, no finding
    config.write_text("[tool.memlint.rules.MEM007]\n"
                      f"growth-share = 0\ngrowth-bytes = {growth + 1}\n")
    quiet = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "models/cnn.py", cwd=repo)
    assert "MEM007" not in quiet.stdout, quiet.stdout
    assert "models/cnn.py:7: model 'sequential' training peak" in quiet.stdout
    # the share limit over it
    config.write_text("[tool.memlint.rules.MEM007]\n"
                      f"growth-share = {growth / old * 1.1}\ngrowth-bytes = 0\n")
    quiet = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "models/cnn.py", cwd=repo)
    assert "MEM007" not in quiet.stdout, quiet.stdout
    config.write_text('[tool.memlint.rules.MEM007]\ngrowth-bytes = "lots"\n')
    bad = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "models/cnn.py", cwd=repo)
    assert bad.returncode == 2 and "growth-bytes" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_model_that_stops_fitting_is_an_error(repo):
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=128))
    before = expected_peaks(repo, 16, 128)
    budget = (before[0] + before[1]) // 2  # usable memory between the two peaks
    args = ("--gpu", f"{budget}B", "--cuda-context", "1", "--reserve", "1")
    proc = memlint("check", "--diff", "HEAD", *args, "--output-format", "json", "models",
                   cwd=repo)
    doc = json.loads(proc.stdout)
    change = next(m for m in doc["diff"]["models"] if m["path"] == "models/cnn.py")
    assert (change["base"]["verdict"], change["head"]["verdict"]) == ("fits", "does_not_fit")
    growth = [d for d in doc["diagnostics"] if d["code"] == "MEM007"]
    assert [d["severity"] for d in growth] == ["error"]
    text = memlint("check", "--diff", "HEAD", *args, "--output-format", "concise", "models",
                   cwd=repo)
    assert "now does NOT fit" in text.stdout and "stopped fitting" in text.stdout


def test_new_and_removed_models_are_listed(repo):
    (repo / "models" / "other.py").unlink()
    (repo / "models" / "extra.py").write_text(OTHER.replace('"other"', '"extra"'))
    proc = memlint("check", "--diff", "HEAD", "--output-format", "json", "models", cwd=repo)
    doc = json.loads(proc.stdout)
    status = {(m["path"], m["name"]): m["status"] for m in doc["diff"]["models"]}
    assert status[("models/extra.py", "extra")] == "new"
    assert status[("models/other.py", "other")] == "removed"
    assert status[("models/cnn.py", "sequential")] == "unchanged"
    assert doc["diff"]["counts"] == {"changed": 0, "new": 1, "removed": 1, "unchanged": 1}
    text = memlint("check", "--diff", "HEAD", "models", cwd=repo).stdout
    assert "new model 'extra'" in text and "removed model 'other'" in text
    assert "1 model unchanged" in text


def test_github_and_sarif_carry_the_diff(repo):
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=256))
    github = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "models",
                     cwd=repo, env={"GITHUB_ACTIONS": "true"}).stdout.splitlines()
    assert github[0].startswith("::notice title=Memory against HEAD")
    assert any(line.startswith("::warning file=models/cnn.py,line=7") and "MEM007" in line
               for line in github)
    sarif = json.loads(memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "--output-format",
                               "sarif", "models", cwd=repo).stdout)
    run = sarif["runs"][0]
    assert "MEM007" in {r["ruleId"] for r in run["results"]}
    assert "MEM007" in {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert run["properties"]["memlintDiff"]["counts"]["changed"] == 1


def test_noqa_on_the_model_line_suppresses_the_growth_finding(repo):
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=256))
    cnn = repo / "models" / "cnn.py"
    cnn.write_text(MODEL.replace("model = keras.Sequential([",
                                 "model = keras.Sequential([  # noqa: MEM007"))
    proc = memlint("check", "--diff", "HEAD", "--gpu", "8GiB", "--output-format", "concise",
                   "models", cwd=repo)
    assert ": MEM007 " not in proc.stdout and "Memory against HEAD" in proc.stdout
    assert "training peak" in proc.stdout  # still listed in the diff


def test_bad_revision_and_no_repository_are_one_line_errors(repo, tmp_path):
    bad = memlint("check", "--diff", "no-such-branch", "models", cwd=repo)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "memlint: error: unknown revision 'no-such-branch' in project (a branch, tag or "
        "commit; in a shallow CI checkout fetch it first)"]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "m.py").write_text(OTHER)
    outside = memlint("check", "--diff", "HEAD", "m.py", cwd=plain,
                      env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert outside.returncode == 2 and "needs a git repository" in outside.stderr
    assert len(outside.stderr.strip().splitlines()) == 1 and "Traceback" not in outside.stderr
    option = memlint("check", "--diff", "--gpu", "models", cwd=repo)
    assert option.returncode == 2 and "Traceback" not in option.stderr


def test_a_path_outside_the_repository_is_refused(repo, tmp_path):
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(OTHER)
    proc = memlint("check", "--diff", "HEAD", "models", str(elsewhere), cwd=repo)
    assert proc.returncode == 2 and "is not inside the git repository" in proc.stderr


def test_model_state_reads_the_verdict():
    report = analyze_file(str(ROOT / "fixtures" / "small_cnn_fits.py"), Settings(gpu="2GiB"))
    state = ModelState.of(report.models[0], report.breakdowns[0], report.budget)
    result = verdict(report.breakdowns[0], report.budget)
    assert (state.peak, state.verdict, state.largest_batch_size) == \
        (result.peak, result.status, result.largest_batch_size)


@pytest.mark.parametrize("share, text", [(0.53, "+53%"), (-0.042, "-4.2%"),
                                         (0.003, "+0.3%"), (0.00004, "+<0.01%"),
                                         (-0.00004, "-<0.01%")])
def test_signed_percent(share, text):
    assert signed_percent(share) == text


def test_parent_folder_from_a_subfolder(repo):
    """``..`` from a subfolder: both revisions see the same files, under the same paths."""
    (repo / "models" / "blocks.py").write_text(HELPER.format(width=256))
    sub = repo / "models" / "sub"
    sub.mkdir()
    proc = memlint("check", "--diff", "HEAD", "--output-format", "json", "..", cwd=sub)
    doc = json.loads(proc.stdout)
    status = {(m["path"], m["name"]): m["status"] for m in doc["diff"]["models"]}
    assert status == {("../cnn.py", "sequential"): "changed",
                      ("../other.py", "other"): "unchanged"}
