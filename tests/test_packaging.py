"""The wheel carries everything memlint reads at run time, and nothing heavy."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("memlint-*.whl")
    return path


def test_wheel_contains_rule_and_gpu_catalogs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    rules = sorted(p.name for p in (ROOT / "rules").glob("MEM*.yaml"))
    assert rules, "no rule YAML in the repository"
    for rule in rules:
        assert f"memlint/catalog/{rule}" in names
    assert "memlint/data/gpus.yaml" in names
    assert "memlint/data/applications/index.json" in names
    assert "memlint/data/applications/ResNet50.json.xz" in names
    assert not any(n.startswith(("tests/", "fixtures/")) for n in names)


def test_wheel_metadata_has_only_light_runtime_dependencies(wheel):
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith("METADATA"))
        text = zf.read(meta).decode()
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")
                and "extra ==" not in line]
    # the chosen runtime packages only: TensorFlow, Keras, JAX, torch and onnxruntime belong
    # to the test tiers (onnx itself is imported only for .onnx files)
    names = [r.split(":", 1)[1].strip().split(";")[0].split(">")[0].split("=")[0].strip()
             for r in requires]
    assert names and set(names) <= {"libcst", "onnx", "pyyaml", "tomli"}, requires
    assert "console_scripts" in zipfile.ZipFile(wheel).read(
        next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("entry_points.txt"))
    ).decode()
