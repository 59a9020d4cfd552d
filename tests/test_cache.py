"""The result cache (memlint/cache.py): a second run on unchanged input is served from the
cache with the same output; a changed file, imported module, module lookup, settings or
memlint is a miss; a corrupt, foreign or hostile entry is ignored, never trusted.

Every test has its own empty cache (``MEMLINT_CACHE_DIR``, set by ``tests/conftest.py``) or
names a temporary one with ``--cache-dir``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memlint import cache, cli, config
from memlint.analysis import analyze_file
from memlint.config import Settings
from tests.conftest import FIXTURES

MODEL = ("import keras\n"
         "model = keras.Sequential([keras.Input((32,)), keras.layers.Dense({units})])\n"
         "model.compile(optimizer='adam', loss='mse')\n"
         "model.fit(x, y, batch_size=16)\n")


def run(capsys, *args) -> tuple:
    """(exit code, stdout, stderr, cache stats of the run)."""
    cache.LAST_STATS = None
    code = cli.main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err, cache.LAST_STATS


def entries(directory: Path) -> list:
    return sorted(directory.rglob("*.json"))


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "project" / "model.py"
    path.parent.mkdir()
    path.write_text(MODEL.format(units=8))
    return path


def test_the_second_run_is_served_from_the_cache(model, tmp_path, capsys):
    where = tmp_path / "cache"
    first = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    assert (first[3].hits, first[3].misses, first[3].stored) == (0, 1, 1)
    assert len(entries(where)) == 1
    second = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    assert (second[3].hits, second[3].misses, second[3].stored) == (1, 0, 0)
    assert second[:3] == first[:3]


def test_the_environment_variable_names_the_default_folder(model, tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path / "from-env"))
    run(capsys, "check", model)
    assert len(entries(tmp_path / "from-env")) == 1
    monkeypatch.delenv("MEMLINT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_dir() == tmp_path / "xdg" / "memlint"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.default_dir() == Path.home() / ".cache" / "memlint"


def test_no_cache_reads_and_writes_nothing(model, tmp_path, capsys):
    where = tmp_path / "cache"
    result = run(capsys, "check", model, "--no-cache", "--cache-dir", where)
    assert result[3] is None and not where.exists()


def test_a_changed_file_is_a_miss(model, tmp_path, capsys):
    where = tmp_path / "cache"
    first = run(capsys, "report", model, "--cache-dir", where)
    model.write_text(MODEL.format(units=9))
    second = run(capsys, "report", model, "--cache-dir", where)
    assert second[3].hits == 0 and second[3].misses == 1
    assert second[1] != first[1] and "297" in second[1]  # 32 * 9 + 9 parameters


def test_changed_settings_are_a_miss(model, tmp_path, capsys):
    where = tmp_path / "cache"
    run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    for args in (["--gpu", "4GiB"], ["--gpu", "8GiB", "--batch-size", "64"],
                 ["--gpu", "8GiB", "--ignore", "MEM004"]):
        assert run(capsys, "check", model, *args, "--cache-dir", where)[3].hits == 0, args
    # a configuration file is part of the effective settings
    (model.parent / ".memlint.yaml").write_text("gpu: 8GiB\nmode: infer\n")
    config._CACHE.clear()  # (config files are read once per process)
    assert run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)[3].hits == 0
    assert run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)[3].hits == 1


def test_another_memlint_is_a_miss(model, tmp_path, capsys, monkeypatch):
    where = tmp_path / "cache"
    run(capsys, "check", model, "--cache-dir", where)
    monkeypatch.setattr(cache, "_FINGERPRINT", [])
    monkeypatch.setattr(cache, "__version__", "999.0")
    assert run(capsys, "check", model, "--cache-dir", where)[3].hits == 0


PROJECT_MAIN = ("import keras\n"
                "from blocks import head\n"
                "inputs = keras.Input((16,))\n"
                "model = keras.Model(inputs, head(inputs))\n")
BLOCKS = ("import keras\n"
          "def head(x):\n"
          "    return keras.layers.Dense({units})(x)\n")


def test_a_changed_imported_module_is_a_miss(tmp_path, capsys):
    main = tmp_path / "project" / "main.py"
    main.parent.mkdir()
    main.write_text(PROJECT_MAIN)
    blocks = main.parent / "blocks.py"
    blocks.write_text(BLOCKS.format(units=4))
    where = tmp_path / "cache"
    first = run(capsys, "report", main, "--cache-dir", where)
    assert "68" in first[1]  # 16 * 4 + 4
    assert run(capsys, "report", main, "--cache-dir", where)[3].hits == 1
    blocks.write_text(BLOCKS.format(units=5))
    changed = run(capsys, "report", main, "--cache-dir", where)
    assert changed[3].hits == 0 and changed[3].rejected == 1
    assert "85" in changed[1]  # 16 * 5 + 5: the module as it is now
    assert run(capsys, "report", main, "--cache-dir", where)[3].hits == 1


def test_a_module_that_appears_is_a_miss(tmp_path, capsys):
    main = tmp_path / "project" / "main.py"
    main.parent.mkdir()
    main.write_text(PROJECT_MAIN)
    where = tmp_path / "cache"
    missing = run(capsys, "check", main, "--output-format", "json", "--cache-dir", where)
    assert run(capsys, "check", main, "--cache-dir", where)[3].hits == 1
    (main.parent / "blocks.py").write_text(BLOCKS.format(units=4))
    found = run(capsys, "check", main, "--output-format", "json", "--cache-dir", where)
    assert found[3].hits == 0
    assert json.loads(found[1])["models"][0]["params"]["total"] == 68
    assert not json.loads(missing[1])["models"]  # head() was unknown: no model then


def _only_entry(where: Path) -> Path:
    (entry,) = entries(where)
    return entry


@pytest.mark.parametrize("content", [
    b"",
    b"not json at all {",
    b"\x80\x04\x95 a pickle, never loaded",
    b"[]",
    b'{"schema": 1}',
    b"{" * 100_000,
])
def test_a_corrupt_entry_is_ignored_and_replaced(model, tmp_path, capsys, content):
    where = tmp_path / "cache"
    first = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    entry = _only_entry(where)
    entry.write_bytes(content)
    again = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    assert again[:3] == first[:3]
    assert again[3].hits == 0 and again[3].stored == 1
    assert run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)[3].hits == 1


def _tamper(entry: Path, change) -> None:
    data = json.loads(entry.read_text())
    change(data)
    entry.write_text(json.dumps(data))


@pytest.mark.parametrize("change", [
    # a class outside the list: never looked up, never constructed
    lambda d: d["report"].update({"__c": "os.system"}),
    lambda d: d["report"]["f"]["diagnostics"].append(
        {"__c": "Popen", "f": {"args": ["touch", "/tmp/memlint-pwned"]}}),
    # another key, schema, or fields that this memlint's classes do not have
    lambda d: d.update(key="0" * 64),
    lambda d: d.update(schema=0),
    lambda d: d["report"]["f"].update(extra=1),
    # an entry for another file or other settings (copied over)
    lambda d: d["report"]["f"].update(path="elsewhere.py"),
    lambda d: d["report"]["f"]["settings"]["f"].update(gpu="80GiB"),
    lambda d: d.update(dependencies={"files": "?"}),
])
def test_a_foreign_or_hostile_entry_is_ignored(model, tmp_path, capsys, change):
    where = tmp_path / "cache"
    first = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    _tamper(_only_entry(where), change)
    again = run(capsys, "check", model, "--gpu", "8GiB", "--cache-dir", where)
    assert again[:3] == first[:3]
    assert again[3].hits == 0 and again[3].rejected == 1
    assert not Path("/tmp/memlint-pwned").exists()


def test_an_entry_is_trusted_only_for_its_own_content(model, tmp_path, capsys):
    """The same report under another file's key is refused (it names another path)."""
    where = tmp_path / "cache"
    run(capsys, "check", model, "--cache-dir", where)
    entry = _only_entry(where)
    other = model.parent / "other.py"
    other.write_text(MODEL.format(units=8))
    run(capsys, "check", other, "--cache-dir", where)
    (other_entry,) = [e for e in entries(where) if e != entry]
    data = json.loads(entry.read_text())
    data["key"] = other_entry.stem  # the right key, the wrong report
    other_entry.write_text(json.dumps(data))
    assert run(capsys, "check", other, "--cache-dir", where)[3].rejected == 1


def test_a_report_with_internal_errors_is_not_cached(model, tmp_path, capsys, monkeypatch):
    from memlint.frontends.keras import models as frontend_models

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(frontend_models, "create_layer", broken)
    where = tmp_path / "cache"
    assert run(capsys, "check", model, "--cache-dir", where)[0] == 2
    assert not entries(where)


def test_an_unwritable_cache_folder_changes_nothing(model, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    expected = run(capsys, "check", model, "--no-cache")
    result = run(capsys, "check", model, "--cache-dir", blocker / "cache")
    assert result[:3] == expected[:3] and result[3].stored == 0


def test_workers_store_what_they_find(tmp_path, capsys):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("keras1_mnist_cnn.py", "functional_two_branch.py", "gan_nested_models.py",
                 "keras3_ops_in_functional.py"):
        shutil.copy(FIXTURES / name, folder / name)
    where = tmp_path / "cache"
    cold = run(capsys, "check", folder, "--jobs", "2", "--output-format", "json",
               "--cache-dir", where)
    assert cold[3].stored == 4
    warm = run(capsys, "check", folder, "--jobs", "2", "--output-format", "json",
               "--cache-dir", where)
    assert warm[3].hits == 4 and warm[:3] == cold[:3]


@pytest.mark.parametrize("name", [
    "seed_gtx960_keras1.py", "gan_nested_models.py", "keras3_ops_in_functional.py",
    "functional_two_branch.py", "invalid/add_mismatch.py", "dcgan_two_models.py"])
def test_reports_read_back_equal(name):
    report = analyze_file(str(FIXTURES / name), Settings(gpu="8GiB"))
    text = json.dumps(cache.encode(report))
    assert cache.loads(text) == report


def test_values_outside_the_format_are_not_cacheable():
    class Thing:
        pass

    for value in (Thing(), {1, 2}, b"bytes", [object()], Path("x")):
        with pytest.raises(cache.NotCacheable):
            cache.encode(value)
    value = {"a": (1, None), (2, 3): [4.5], "__c": "os.system", "b": {"__t": 1}}
    assert cache.loads(json.dumps(cache.encode(value))) == value


def test_tests_never_use_the_users_cache():
    assert os.environ["MEMLINT_CACHE_DIR"] != str(Path.home() / ".cache" / "memlint")
    assert cache.default_dir() == Path(os.environ["MEMLINT_CACHE_DIR"])


def test_a_wrapped_model_is_cached_with_the_same_output(tmp_path, capsys):
    """TimeDistributed(model) keeps the frontend's traced inner model in the layer's config
    (for the analysis only): the cache keeps a stand-in there, and every output is the
    same."""
    path = tmp_path / "video.py"
    shutil.copy(FIXTURES / "depth_subclass" / "video_timedistributed_model.py", path)
    where = tmp_path / "cache"
    for command, fmt in (("check", "text"), ("check", "json"), ("report", "text"),
                         ("report", "json")):
        fresh = run(capsys, command, path, "--gpu", "8GiB", "--output-format", fmt,
                    "--no-cache")
        run(capsys, command, path, "--gpu", "8GiB", "--output-format", fmt,
            "--cache-dir", where)
        cached = run(capsys, command, path, "--gpu", "8GiB", "--output-format", fmt,
                     "--cache-dir", where)
        assert cached[3].hits == 1, (command, fmt)
        assert cached[:3] == fresh[:3], (command, fmt)
    report = analyze_file(str(path), Settings(gpu="8GiB"))
    back = cache.loads(json.dumps(cache.encode(report)))
    opaque = [value for graph in back.models for layer in graph.layers
              for value in (layer.config.get("layer") or {}).values()
              if isinstance(value, cache.Opaque)]
    assert opaque and opaque[0].type_name == "WrappedInner"


def test_settings_the_format_does_not_carry_turn_the_cache_off_for_the_file(model, tmp_path,
                                                                           capsys):
    (model.parent / ".memlint.yaml").write_text("rules:\n  MEM002:\n    since: 2024-01-01\n")
    config._CACHE.clear()
    where = tmp_path / "cache"
    expected = run(capsys, "check", model, "--no-cache")
    result = run(capsys, "check", model, "--cache-dir", where)
    assert result[:3] == expected[:3]
    assert result[3].stored == 0 and not entries(where)


def test_changed_application_traces_change_the_fingerprint(monkeypatch):
    """The shipped keras.applications traces are part of memlint: regenerated data is a miss."""
    import os
    from memlint import cache
    from memlint.frontends.keras import applications

    monkeypatch.setattr(cache, "_FINGERPRINT", [])
    before = cache.fingerprint()
    path = applications.DATA / "VGG16.json.xz"
    stat = path.stat()
    try:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        cache._FINGERPRINT.clear()
        assert cache.fingerprint() != before
    finally:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_tagged_values_with_extra_keys_are_bad_entries():
    import pytest

    from memlint.cache import BadEntry, loads

    for text in ('{"__t": [1], "x": 1}', '{"__d": [], "x": 1, "y": 2}',
                 '{"__c": "Location", "f": {}, "x": 1}'):
        with pytest.raises(BadEntry):
            loads(text)
