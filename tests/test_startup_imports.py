"""Start-up: checking a Python file imports only what that file needs: no ONNX, no YAML once
the rule catalog's snapshot exists (and no .memlint.yaml is read), and only the reporter the
output format uses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memlint import budget, catalog
from memlint.frontends.keras import arrays
from tests.conftest import FIXTURES

# reporters a check printed as text never uses
OTHER_REPORTERS = {f"memlint.reporters.{name}"
                   for name in ("json_format", "github", "sarif", "html", "summary")}
PROBE = """
import runpy, sys, json
sys.argv = ["memlint", *json.loads(sys.argv[1])]
try:
    runpy.run_module("memlint", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
sys.stdout.flush()
print("MODULES=" + json.dumps(sorted(sys.modules)))
"""


def imported(tmp_path, *args) -> set:
    """The modules a memlint run in a fresh interpreter has imported when it ends."""
    env = {"MEMLINT_CACHE_DIR": str(tmp_path / "cache"), "PATH": "", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("MODULES=")][-1]
    return set(json.loads(line[len("MODULES="):]))


def test_checking_a_python_file_imports_no_onnx_yaml_or_other_reporters(tmp_path):
    target = str(FIXTURES / "small_cnn_fits.py")
    first = imported(tmp_path, "check", target, "--no-cache")
    assert "yaml" in first  # the first run parses the catalog and keeps a snapshot
    modules = imported(tmp_path, "check", target, "--no-cache")
    assert "memlint.frontends.keras" in modules
    unwanted = {m for m in modules if m.split(".")[0] in ("onnx", "yaml", "onnxruntime")
                or m.startswith("memlint.frontends.onnx") or m in OTHER_REPORTERS}
    assert unwanted == set()
    # argparse's help width without shutil (and the compression modules it imports); no
    # OpenSSL for a run that does not use the result cache
    assert not modules & {"shutil", "bz2", "lzma", "hashlib", "_hashlib"}


def test_help_is_wrapped_as_argparse_wraps_it(monkeypatch):
    import argparse

    from memlint import cli

    def check_help(columns: str) -> str:
        monkeypatch.setenv("COLUMNS", columns)
        parser = cli.build_parser("check")
        [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return commands.choices["check"].format_help()

    ours = {columns: check_help(columns) for columns in ("50", "120")}
    assert len(ours["50"].splitlines()) > len(ours["120"].splitlines())  # COLUMNS is heard
    monkeypatch.setattr(cli, "_Formatter", argparse.HelpFormatter)  # argparse's own width
    assert ours == {columns: check_help(columns) for columns in ("50", "120")}


def test_gpu_names_sizes_and_dataset_facts_need_no_yaml_parser_once_snapshotted(tmp_path):
    target = str(FIXTURES / "data_pipelines" / "keras_datasets_mnist_cnn.py")  # mnist facts
    for gpu in ("t4", "2GiB"):
        imported(tmp_path, "check", target, "--no-cache", "--gpu", gpu)
        modules = imported(tmp_path, "check", target, "--no-cache", "--gpu", gpu)
        assert "memlint.frontends.keras.arrays" in modules
        assert not {m for m in modules if m.split(".")[0] == "yaml"}, gpu
    assert {p.name.split("-")[0] for p in (tmp_path / "cache").glob("*.json")} >= {
        "catalog", "gpus", "keras"}


@pytest.mark.parametrize("loader, kind", [(budget.catalog, "gpus"),
                                          (arrays.dataset_catalog, "keras-datasets")])
def test_data_snapshots_equal_their_yaml_and_a_corrupt_one_is_rebuilt(tmp_path, monkeypatch,
                                                                      loader, kind):
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path))
    loader.cache_clear()
    try:
        parsed = loader()
        assert parsed and all(isinstance(v, dict) for v in parsed.values())
        snapshots = list(tmp_path.glob(f"{kind}-*.json"))
        assert len(snapshots) == 1
        loader.cache_clear()
        assert loader() == parsed
        snapshots[0].write_text('{"k80": 3}', encoding="utf-8")  # foreign or broken content
        loader.cache_clear()
        assert loader() == parsed
    finally:
        loader.cache_clear()


def test_the_catalog_snapshot_equals_the_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path))
    catalog.load_catalog.cache_clear()
    try:
        parsed = catalog.load_catalog()  # from the YAML, writing the snapshot
        catalog.load_catalog.cache_clear()
        assert list(tmp_path.glob("catalog-*.json"))
        assert catalog.load_catalog() == parsed  # from the snapshot
        for path in tmp_path.glob("catalog-*.json"):
            path.write_text("{not json", encoding="utf-8")
        catalog.load_catalog.cache_clear()
        assert catalog.load_catalog() == parsed  # a corrupt snapshot is rebuilt
    finally:
        catalog.load_catalog.cache_clear()


def test_a_snapshot_is_used_only_for_the_texts_it_was_made_from(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path))
    texts = [b"a: {x: 1}\n"]
    assert catalog.yaml_snapshot("probe", texts, lambda t: {"a": {"x": 1}}) == {"a": {"x": 1}}
    [snapshot] = tmp_path.glob("probe-*.json")
    stored = json.loads(snapshot.read_text(encoding="utf-8"))
    stored["sources"] = ["a: {x: 2}\n"]  # the same name, made from other texts
    stored["data"] = {"a": {"x": 2}}
    snapshot.write_text(json.dumps(stored), encoding="utf-8")
    assert catalog.yaml_snapshot("probe", texts, lambda t: {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert catalog.yaml_snapshot("probe", texts, lambda t: 1 / 0) == {"a": {"x": 1}}  # reused


def test_a_run_served_from_the_cache_imports_no_libcst_and_no_frontend(tmp_path):
    target = str(FIXTURES / "small_cnn_fits.py")
    cold = imported(tmp_path, "check", target, "--gpu", "2GiB")
    assert "libcst" in cold
    warm = imported(tmp_path, "check", target, "--gpu", "2GiB")
    assert not {m for m in warm if m.split(".")[0] == "libcst"
                or m.startswith("memlint.frontends") or m == "importlib.metadata"}


GC_PROBE = """
import gc, json, sys
from memlint import startup
def collections():
    return sum(generation["collections"] for generation in gc.get_stats())
before = collections()
startup.load("memlint.frontends.keras")  # libcst, the interpreter, ...
loaded = [collections() - before, gc.get_freeze_count(), gc.isenabled()]
gc.unfreeze()
from memlint.config import Settings
from memlint.parallel import analyse_one  # what the command line runs for each file
analyse_one(sys.argv[1], Settings(gpu="8GiB"))
print(json.dumps(loaded + [gc.get_freeze_count(), gc.isenabled()]))
"""


def test_the_frontend_loads_without_collections_and_is_frozen_after(tmp_path):
    """libcst and the Keras frontend load with the collector paused, are frozen after, and
    the collector is on again; the command line's path through a file loads so too."""
    env = {"MEMLINT_CACHE_DIR": str(tmp_path / "cache"), "PATH": "", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", GC_PROBE, str(FIXTURES / "small_cnn_fits.py")],
                          capture_output=True, text=True, env=env, check=True)
    collected, frozen, enabled, frozen_by_run, enabled_after_run = \
        json.loads(done.stdout.splitlines()[-1])
    assert collected == 0 and frozen > 10_000 and enabled
    assert frozen_by_run > 1_000 and enabled_after_run  # memlint.analysis, loaded by load()


def test_loading_leaves_a_disabled_collector_disabled():
    import gc

    from memlint import startup

    enabled = gc.isenabled()
    gc.disable()
    try:
        assert startup.load("json") is sys.modules["json"]
        with startup.permanent_imports():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if enabled:
            gc.enable()
