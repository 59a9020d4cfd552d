"""Many files in a process pool (``--jobs``): the same output, in the same order, with the
same per-file errors and exit codes as one file after another in this process."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from memlint import cli, parallel
from tests.conftest import FIXTURES

# small fixtures of different kinds: Sequential, functional, nested models (frontend
# ModelNode layers), keras.ops shapes, a wrapped model (its report does not pickle: the
# parent analyses it again), invalid layers, an ONNX-free folder of .py files
SAMPLE = ["keras1_mnist_cnn.py", "functional_two_branch.py", "gan_nested_models.py",
          "keras3_ops_in_functional.py", "depth_subclass/video_timedistributed_model.py",
          "invalid/negative_conv.py", "invalid/pool_1x1_map.py", "seed_gtx960_keras1.py"]


@pytest.fixture()
def folder(tmp_path):
    root = tmp_path / "models"
    for name in SAMPLE:
        target = root / name.replace("/", "_")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, target)
    return root


def run(capsys, *args) -> tuple:
    code = cli.main([*map(str, args), "--no-cache"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_two_jobs_give_what_one_gives(folder, capsys, fmt):
    one = run(capsys, "check", folder, "--gpu", "8GiB", "--output-format", fmt, "--jobs", "1")
    two = run(capsys, "check", folder, "--gpu", "8GiB", "--output-format", fmt, "--jobs", "2")
    assert one == two
    assert one[0] == 1  # findings (MEM901 in the invalid models)
    if fmt == "json":
        paths = [m["path"] for m in json.loads(one[1])["models"]]
        assert paths == sorted(paths, key=lambda p: sorted(map(str, folder.iterdir())).index(p))


def test_report_with_two_jobs_gives_what_one_gives(folder, capsys):
    assert run(capsys, "report", folder, "--jobs", "1") == run(capsys, "report", folder,
                                                               "--jobs", "2")


def test_a_bad_file_among_good_ones_is_still_reported(folder, capsys):
    (folder / "b_not_utf8.py").write_bytes(b"x = '\xff\xfe'\n")
    (folder / "c_broken.py").write_text("import keras\nmodel = keras.Sequential(\n")
    results = [run(capsys, "check", folder, "--output-format", "json", "--jobs", jobs)
               for jobs in ("1", "2")]
    assert results[0] == results[1]
    code, out, err = results[0]
    assert code == 2  # an unreadable file
    assert err.strip().splitlines() == [f"memlint: {folder / 'b_not_utf8.py'}: not UTF-8 text"]
    doc = json.loads(out)
    broken = [d for d in doc["diagnostics"] if d["path"].endswith("c_broken.py")]
    assert [d["code"] for d in broken] == ["MEM902"]
    assert len({m["path"] for m in doc["models"]}) >= 5  # the good files' models are there


def test_an_internal_error_in_a_worker_is_reported_for_its_file(folder, capsys, monkeypatch):
    from memlint.frontends.keras import models as frontend_models

    real = frontend_models.create_layer

    def broken(interp, type_name, *args):
        if type_name == "Dropout":
            raise RuntimeError("boom")
        return real(interp, type_name, *args)

    monkeypatch.setattr(frontend_models, "create_layer", broken)  # forked workers inherit it
    one = run(capsys, "check", folder, "--jobs", "1")
    two = run(capsys, "check", folder, "--jobs", "2")
    assert one == two
    assert one[0] == 2
    assert one[2] and all("internal error" in line and "boom" in line
                          for line in one[2].strip().splitlines())


_PARENT: list = []


def _die_in_a_worker(path, settings, cache_dir):
    """In place of the pool's task: leave a mark, then crash in a way no exception handler
    sees."""
    if os.getpid() != _PARENT[0]:
        with open(f"{path}.died", "w") as mark:
            mark.write("x")
        os._exit(3)
    raise AssertionError("the parent never runs the pool's task")


def test_a_worker_that_dies_leaves_its_files_to_the_parent(folder, capsys, monkeypatch):
    expected = run(capsys, "check", folder, "--jobs", "1")
    _PARENT[:] = [os.getpid()]
    monkeypatch.setattr(parallel, "_pool_task", _die_in_a_worker)
    assert run(capsys, "check", folder, "--jobs", "2") == expected
    assert list(folder.glob("*.died"))  # a worker ran the task and died


def test_results_come_back_in_task_order_whatever_finishes_first(folder):
    from memlint.config import Settings

    files, _ = cli.collect_files([str(folder)])
    tasks = [(path, Settings()) for path in files]
    results = parallel.analyse_all(tasks, jobs=2)
    assert [report.path for report, _ in results] == [str(path) for path in files]


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_jobs_must_be_a_positive_number(capsys, value):
    assert cli.main(["check", str(FIXTURES / "keras1_mnist_cnn.py"), "--jobs", value]) == 2
    assert "--jobs" in capsys.readouterr().err


def test_default_jobs_is_the_cpus_of_this_process():
    assert parallel.default_jobs() >= 1
    if hasattr(os, "sched_getaffinity"):
        assert parallel.default_jobs() == len(os.sched_getaffinity(0))
