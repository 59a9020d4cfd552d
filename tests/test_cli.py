"""The command line as users run it: output shape, exit codes, formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.test_frontend_subclass import POSITIONAL_CLASS

SEED = FIXTURES / "seed_gtx960_keras1.py"


def memlint(*args, env=None, cwd=None):
    environ = dict(os.environ, PYTHONPATH=str(ROOT))
    environ.pop("GITHUB_ACTIONS", None)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "memlint", *map(str, args)],
                          capture_output=True, text=True, env=environ, cwd=cwd or ROOT,
                          timeout=120)


def test_seed_model_over_budget_on_gtx960():
    proc = memlint("check", SEED, "--gpu", "2GiB")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    codes = {line.split(": ", 2)[1].split()[0] for line in lines if ": MEM" in line}
    assert {"MEM001", "MEM003", "MEM004"} <= codes
    assert lines[-1].startswith("Found ")
    first = next(line for line in lines if ": MEM001" in line)
    assert first.startswith(f"{SEED.relative_to(ROOT)}:") or first.startswith(str(SEED))


def test_json_shape_is_the_documented_contract():
    proc = memlint("check", SEED, "--gpu", "2GiB", "--output-format", "json")
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"memlint_version", "diagnostics", "models"}
    diag = doc["diagnostics"][0]
    assert set(diag) >= {"code", "name", "severity", "message", "path", "line", "column",
                         "end_line", "end_column"}
    model = doc["models"][0]
    assert set(model) >= {"name", "path", "line", "mode", "batch_size", "optimizer",
                          "dtype_policy", "params", "memory", "layers", "unresolved"}
    assert model["params"] == {"total": 206538153, "trainable": 206538153, "non_trainable": 0}
    assert set(model["memory"]) == {"weights", "gradients", "optimizer", "activations",
                                    "other", "peak"}
    assert model["memory"]["weights"] == 206538153 * 4
    assert model["layers"][0]["output_shape"] == [None, 16, 16, 256]
    assert model["batch_size"] == 1 and model["optimizer"] == "sgd"


def test_json_output_has_one_line_per_diagnostic_and_model():
    proc = memlint("check", SEED, "--gpu", "2GiB", "--output-format", "json")
    doc = json.loads(proc.stdout)
    lines = proc.stdout.splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    for key in ("diagnostics", "models"):
        start = lines.index(f'  "{key}": [')
        rows = [json.loads(line.strip().rstrip(","))
                for line in lines[start + 1:start + 1 + len(doc[key])]]
        assert rows == doc[key]


def test_github_format_is_selected_by_the_environment():
    proc = memlint("check", SEED, "--gpu", "2GiB", env={"GITHUB_ACTIONS": "true"})
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("::error file=")
    assert "title=MEM001 over-budget-parameters::" in proc.stdout
    levels = [line.split(" ", 1)[0] for line in lines]
    assert levels == sorted(levels, key=["::error", "::warning", "::notice"].index)


def test_report_prints_table_and_breakdown():
    proc = memlint("report", SEED, "--gpu", "2GiB")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Total params: 206,538,153" in out
    for word in ("weights", "gradients", "optimizer", "activations", "other", "peak",
                 "batch size:   1 (train_on_batch()", "optimizer:    sgd", "float32",
                 "usable"):
        assert word in out


def test_usage_errors_exit_2_with_one_line():
    for args in (("check",), ("check", SEED, "--gpu", "lots"), ("check", SEED, "--batch-size",
                                                                  "x"), ("explain", "MEM999")):
        proc = memlint(*args)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_missing_file_exits_2_but_other_files_are_checked(tmp_path):
    good = tmp_path / "empty.py"
    good.write_text("x = 1\n")
    proc = memlint("check", tmp_path / "nope.py", good)
    assert proc.returncode == 2
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr
    assert "1 file checked" in proc.stdout


def test_syntax_error_is_a_diagnostic_not_a_crash(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import keras\nmodel = keras.Sequential(\n")
    proc = memlint("check", bad)
    assert proc.returncode == 1
    assert "MEM902" in proc.stdout and "Traceback" not in proc.stderr


def test_clean_file_exits_0_and_exit_zero_flag(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("print('no model here')\n")
    assert memlint("check", clean).returncode == 0
    assert memlint("check", SEED, "--gpu", "2GiB", "--exit-zero").returncode == 0


def test_noqa_silences_a_line(tmp_path):
    source = SEED.read_text().replace("model = Sequential()", "model = Sequential()  # noqa")
    copy = tmp_path / "seed.py"
    copy.write_text(source)
    before = memlint("check", SEED, "--gpu", "2GiB", "--output-format", "json")
    after = memlint("check", copy, "--gpu", "2GiB", "--output-format", "json")
    line = next(i for i, l in enumerate(source.splitlines(), 1) if "# noqa" in l)
    assert any(d["line"] == line for d in json.loads(before.stdout)["diagnostics"])
    assert not any(d["line"] == line for d in json.loads(after.stdout)["diagnostics"])


def test_rules_and_explain():
    listing = memlint("rules")
    assert listing.returncode == 0
    for code in ("MEM001", "MEM002", "MEM003", "MEM004"):
        assert code in listing.stdout
    explain = memlint("explain", "mem003")
    assert explain.returncode == 0 and "deep-stack-on-tiny-input" in explain.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help(flag):
    assert memlint(flag).returncode == 0


def test_report_says_an_unknown_batch_is_unknown(tmp_path):
    """A batch the code does not state is shown as unknown with what to do, not as the 1 the
    known parts are sized at."""
    path = tmp_path / "feed.py"
    path.write_text("import keras\nimport mylib\n"
                    "model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(4)])\n"
                    "model.compile('adam', 'mse')\nmodel.fit(mylib.make_dataset())\n")
    proc = memlint("report", str(path), "--gpu", "4GiB", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if "batch size:" in l)
    assert "batch size:   unknown: fit() at line 5" in line and "pass --batch-size" in line
    assert "at batch size 1)" in line


POSITIONAL = "import keras\nfrom keras import layers\n" + POSITIONAL_CLASS + (
    "source = keras.Input(shape=(None,), dtype='int64', name='source')\n"
    "target = keras.Input(shape=(None,), dtype='int64', name='target')\n"
    "a = PositionalEmbedding(20, 1000, 16)(source)\n"
    "b = PositionalEmbedding(20, 1000, 16)(target)\n"
    "model = keras.Model([source, target], layers.Dense(4)(layers.Add()([a, b])))\n"
    "model.compile('adam', 'mse')\n"
)


def test_named_inputs_size_what_the_code_leaves_open(tmp_path):
    path = tmp_path / "seq.py"
    path.write_text(POSITIONAL)
    open_ = memlint("check", path, "--gpu", "8GiB")
    assert open_.returncode == 1, open_.stderr
    assert "Pass --input source=T and --input target=T" in open_.stdout
    sized = memlint("report", path, "--gpu", "8GiB", "--input", "source=20", "--input",
                    "target=20", "--output-format", "json")
    model = json.loads(sized.stdout)["models"][0]
    assert model["memory"]["peak"] > 0 and not model["unknown_activations"], model
    assert model["verdict"] == "fits" and not model["peak_is_lower_bound"]
    wrong = memlint("check", path, "--gpu", "8GiB", "--input", "src=20")
    assert "--input src: no keras.Input of this file is named 'src'" in wrong.stdout
    rank = memlint("check", path, "--gpu", "8GiB", "--input", "source=20,4")
    assert "--input source: (20, 4) has 2 dimension(s), the Input has 1" in rank.stdout
