"""The pre-commit hook for real: ``pre-commit try-repo`` and a refused ``git commit``.

These tests build the hook's own environment from this repository (pip install of memlint
into a fresh virtualenv), so they take a minute and need the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow

GOOD_MODEL = """\
import tensorflow as tf
from tensorflow import keras

for gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)

model = keras.Sequential([
    keras.Input(shape=(28, 28, 1)),
    keras.layers.Conv2D(8, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
"""


def _pre_commit() -> list:
    exe = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or \
        shutil.which("pre-commit")
    if exe is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    return [exe]


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("pre-commit-home")
    environ = dict(os.environ, PRE_COMMIT_HOME=str(home), GIT_AUTHOR_NAME="t",
                   GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@example.com")
    environ.pop("GITHUB_ACTIONS", None)
    return environ


@pytest.fixture
def project(tmp_path):
    _git("init", "-q", cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.memlint]\ngpu = "2GiB"\n')
    (tmp_path / "good_model.py").write_text(GOOD_MODEL)
    shutil.copy(FIXTURES / "seed_gtx960_keras1.py", tmp_path / "bad_model.py")
    _git("add", ".", cwd=tmp_path)
    return tmp_path


def test_try_repo_passes_good_and_fails_bad(project, env):
    run = _pre_commit()
    good = subprocess.run([*run, "try-repo", str(ROOT), "memlint", "--files", "good_model.py"],
                          cwd=project, capture_output=True, text=True, env=env, timeout=900)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([*run, "try-repo", str(ROOT), "memlint", "--files", "bad_model.py"],
                         cwd=project, capture_output=True, text=True, env=env, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "MEM001" in bad.stdout and "bad_model.py:" in bad.stdout


def test_commit_of_over_budget_model_is_refused(project, env):
    run = _pre_commit()
    rev = _git("rev-parse", "HEAD", cwd=ROOT).stdout.strip()
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {rev}\n  hooks:\n  - id: memlint\n")
    subprocess.run([*run, "install"], cwd=project, check=True, capture_output=True, env=env)
    _git("add", ".", cwd=project)
    commit = subprocess.run(["git", "commit", "-m", "add models"], cwd=project,
                            capture_output=True, text=True, env=env, timeout=900)
    assert commit.returncode != 0, commit.stdout + commit.stderr
    assert "MEM001" in commit.stdout + commit.stderr
    _git("rm", "-q", "--cached", "bad_model.py", cwd=project)
    ok = subprocess.run(["git", "commit", "-m", "good model only"], cwd=project,
                        capture_output=True, text=True, env=env, timeout=900)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def _onnx_conv_model(path: Path, size: int) -> None:
    """A two-convolution ONNX graph on (N, 3, size, size) images with a symbolic batch."""
    onnx = pytest.importorskip("onnx")
    from tests.onnx_models import F, build, init

    nodes = [onnx.helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["c1"], ["r1"]),
             onnx.helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1])]
    model = build(nodes, [("x", F, ["N", 3, size, size])], ["y"],
                  [init("w1", [32, 3, 3, 3]), init("w2", [32, 32, 3, 3])])
    path.write_bytes(model.SerializeToString())


def test_onnx_hook_checks_onnx_files_only(tmp_path, env):
    run = _pre_commit()
    _git("init", "-q", cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.memlint]\ngpu = "2GiB"\nbatch-size = 16\n')
    _onnx_conv_model(tmp_path / "small.onnx", 32)  # 16 x 32 x 32 x 32 floats per tensor
    _onnx_conv_model(tmp_path / "large.onnx", 1024)  # 2 GiB per activation tensor
    (tmp_path / "model.py").write_text(GOOD_MODEL)
    _git("add", ".", cwd=tmp_path)
    good = subprocess.run([*run, "try-repo", str(ROOT), "memlint-onnx", "--files",
                           "small.onnx", "model.py"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([*run, "try-repo", str(ROOT), "memlint-onnx", "--files", "large.onnx"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "MEM002" in bad.stdout and "large.onnx: node" in bad.stdout
    python_hook = subprocess.run([*run, "try-repo", str(ROOT), "memlint", "--files",
                                  "large.onnx"],
                                 cwd=tmp_path, capture_output=True, text=True, env=env,
                                 timeout=900)
    assert python_hook.returncode == 0 and "(no files to check)" in python_hook.stdout
