"""The composite GitHub Action (``action.yml``) run as GitHub would run its steps: each step's
``run`` script in bash (``-eo pipefail``), its ``env`` expressions filled in from the inputs
and earlier steps' outputs, against a temporary repository with a pull request's base commit,
``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` pointing at temporary files.

The fast tests stand in for the install step with this checkout's memlint; the slow one runs
the install step for real (a virtual environment and ``pip install`` of this checkout).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")
pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                                reason="needs git and bash")

SMALL = (ROOT / "fixtures" / "small_cnn_fits.py").read_text()


def git(*args, cwd):
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=cwd, check=True, capture_output=True)


def steps() -> dict:
    return {step["id"]: step for step in ACTION["runs"]["steps"]}


def evaluate(text: str, context: dict) -> str:
    def value(match):
        name = match.group(1)
        if name not in context:
            raise AssertionError(f"action.yml uses ${{{{ {name} }}}}, unknown to this test")
        return context[name]
    return EXPRESSION.sub(value, str(text))


def run_step(step: dict, context: dict, workspace: Path, runner: dict) -> tuple:
    """(exit code, stdout, stderr, outputs) of one step."""
    output = workspace.parent / f"output-{step['id']}"
    output.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(runner, GITHUB_OUTPUT=str(output))
    env.update({k: evaluate(v, context) for k, v in (step.get("env") or {}).items()})
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           step["run"]], cwd=workspace, env=env, capture_output=True,
                          text=True, timeout=900)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    for key, val in outputs.items():
        context[f"steps.{step['id']}.outputs.{key}"] = val
    return proc.returncode, proc.stdout, proc.stderr, outputs


@pytest.fixture
def pull_request(tmp_path):
    """A repository whose base commit has a small model that the head commit enlarges."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "model.py").write_text(SMALL)
    git("init", "-q", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "base", cwd=work)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True,
                          text=True, check=True).stdout.strip()
    (work / "model.py").write_text(SMALL.replace("Conv2D(64,", "Conv2D(2048,"))
    git("commit", "-qam", "wider", cwd=work)
    summary = tmp_path / "step_summary.md"
    runner = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
              "GITHUB_WORKSPACE": str(work), "RUNNER_TEMP": str(tmp_path / "runner_temp"),
              "PYTHONPATH": str(ROOT), "MEMLINT_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "runner_temp").mkdir()
    return work, base, summary, runner


def context_for(inputs: dict, base: str) -> dict:
    context = {f"inputs.{name}": str(spec.get("default", ""))
               for name, spec in ACTION["inputs"].items()}
    context.update({f"inputs.{k}": v for k, v in inputs.items()})
    context["github.action_path"] = str(ROOT)
    context["github.event.pull_request.base.sha"] = base
    return context


def stand_in_memlint(tmp_path: Path) -> str:
    """An executable that runs this checkout's memlint (instead of the install step)."""
    script = tmp_path / "memlint"
    script.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m memlint \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def test_action_metadata_is_composite_with_its_inputs():
    assert ACTION["runs"]["using"] == "composite"
    assert {"gpu", "args", "version", "paths", "diff-base"} <= set(ACTION["inputs"])
    for step in ACTION["runs"]["steps"]:
        assert step["shell"] == "bash"
        # inputs reach the scripts through env only (no expression inside a script)
        assert "${{" not in step["run"], step["id"]


def test_check_step_annotates_writes_the_summary_and_fails_on_growth(pull_request, tmp_path):
    work, base, summary, runner = pull_request
    context = context_for({"gpu": "2GiB"}, base)
    context["steps.install.outputs.memlint"] = stand_in_memlint(tmp_path)
    code, out, err, outputs = run_step(steps()["check"], context, work, runner)
    assert code == 1, out + err
    assert outputs["exit-code"] == "1"
    lines = out.splitlines()
    assert lines[0].startswith("::notice title=Memory against ")
    assert any(line.startswith("::warning file=model.py,line=16") and "MEM007" in line
               for line in lines)
    text = summary.read_text()
    assert "## memlint: GPU memory" in text and "| `sequential` |" in text
    assert f"| Against {base[:10]} |" in text
    assert "→" in text  # the diff column: base peak -> head peak


def test_check_step_extra_args_and_no_diff(pull_request, tmp_path):
    work, base, summary, runner = pull_request
    context = context_for({"gpu": "2GiB", "args": "--fail-on error --batch-size 8",
                           "diff-base": "none"}, base)
    context["steps.install.outputs.memlint"] = stand_in_memlint(tmp_path)
    code, out, err, outputs = run_step(steps()["check"], context, work, runner)
    assert code == 0, out + err
    assert "Memory against" not in out and "| 8 |" in summary.read_text()


def test_check_step_reports_an_unknown_base(pull_request, tmp_path):
    work, _, _, runner = pull_request
    context = context_for({"diff-base": "0" * 40}, "")
    context["steps.install.outputs.memlint"] = stand_in_memlint(tmp_path)
    code, out, err, outputs = run_step(steps()["check"], context, work, runner)
    assert code == 2 and outputs["exit-code"] == "2"
    assert "unknown revision" in err and "Traceback" not in err


@pytest.mark.slow
def test_install_step_then_check_step(pull_request, tmp_path):
    """The whole action: memlint installed from this checkout into its own environment."""
    work, base, summary, runner = pull_request
    runner = dict(runner)
    runner.pop("PYTHONPATH")
    context = context_for({"gpu": "2GiB", "python": sys.executable}, base)
    code, out, err, outputs = run_step(steps()["install"], context, work, runner)
    assert code == 0, out + err
    installed = Path(outputs["memlint"])
    assert installed.is_file() and str(tmp_path / "runner_temp") in str(installed)
    assert out.strip().startswith("memlint ")
    code, out, err, outputs = run_step(steps()["check"], context, work, runner)
    assert code == 1, out + err
    assert "MEM007" in out and "| `sequential` |" in summary.read_text()
