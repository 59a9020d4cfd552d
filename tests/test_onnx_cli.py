"""ONNX files through the whole pipeline: CLI, settings, memory model, rules and reporters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

onnx = pytest.importorskip("onnx")

from memlint.analysis import AnalysisError, analyze_file  # noqa: E402
from memlint.cli import main  # noqa: E402
from memlint.config import Settings  # noqa: E402
from tests import onnx_models as M  # noqa: E402
from tests.conftest import FIXTURES, ROOT  # noqa: E402

helper = onnx.helper


def _save(model, path):
    path.write_bytes(model.SerializeToString())
    return path


def conv_stack(path, size=32, channels=16, layers=2, pads=1):
    """Conv+Relu pairs on (N, 3, size, size) with a symbolic batch N."""
    nodes, inits, prev, c = [], [], "x", 3
    for i in range(layers):
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"],
                                   pads=[pads] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        inits += [M.init(f"w{i}", [channels, c, 3, 3]), M.init(f"b{i}", [channels])]
        prev, c = f"r{i}", channels
    return _save(M.build(nodes, [("x", M.F, ["N", 3, size, size])], [prev], inits,
                         name="convs"), path)


def test_report_of_an_onnx_file(tmp_path, capsys):
    path = conv_stack(tmp_path / "m.onnx")
    assert main(["report", str(path), "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "Model 'convs' (ONNX)" in out and "Node (op type)" in out
    assert "Conv_0 (Conv)" in out and "(None, 16, 32, 32)" in out
    # 16*3*9 + 16 and 16*16*9 + 16
    assert "Total params: 2,768" in out
    assert "batch size:   4" in out and "mode:         infer (ONNX default)" in out


def test_inference_peak_is_the_liveness_peak(tmp_path):
    report = analyze_file(str(conv_stack(tmp_path / "m.onnx")), Settings(batch_size=2))
    (breakdown,) = report.breakdowns
    tensor = 2 * 16 * 32 * 32 * 4
    image = 2 * 3 * 32 * 32 * 4
    # the input and the first Conv output live together; Relu reuses the Conv buffer, the
    # second Conv needs a new one while the first Relu output is alive
    assert breakdown.category("activations") == max(image + tensor, 2 * tensor)
    assert breakdown.category("weights") == 2768 * 4
    assert breakdown.category("gradients") == 0


def test_the_report_names_the_tensors_alive_at_the_inference_peak(tmp_path, capsys):
    # the second Conv's output beside the first Relu's (in the first Conv's buffer, which
    # the Relu reused); the input is gone; the reserve is TensorFlow's, said to be kept for a
    # runtime not known
    path = conv_stack(tmp_path / "m.onnx")
    report = analyze_file(str(path), Settings(batch_size=2, gpu="t4"))
    (breakdown,) = report.breakdowns
    tensor = 2 * 16 * 32 * 32 * 4
    assert [(t["name"], t["bytes"]) for t in breakdown.peak_at["tensors"]] == [
        ("r0", tensor), ("c1", tensor)]
    assert main(["report", str(path), "--batch-size", "2", "--gpu", "t4"]) == 0
    out = capsys.readouterr().out
    assert "largest tensors alive there:\n        128 KiB  r0 (live)\n" in out
    assert "kept: the runtime an exported graph runs under is not known" in out


def test_training_mode_counts_gradients_and_optimizer(tmp_path):
    report = analyze_file(str(conv_stack(tmp_path / "m.onnx")),
                          Settings(batch_size=2, mode="train", optimizer="adam"))
    (breakdown,) = report.breakdowns
    assert breakdown.mode == "train"
    assert breakdown.category("optimizer") == 2 * 2768 * 4
    # v2: the peak is in the backward pass, before any weight gradient exists (v1 summed
    # all gradients into the peak), with the node outputs still kept; the gradients are all
    # there at the update (no backend: TensorFlow's schedule, every gradient waits for it)
    tensor = 2 * 16 * 32 * 32 * 4
    assert breakdown.peak_at["phase"] == "backward"
    assert breakdown.category("gradients") == 0
    loss = [m["bytes"] for m in breakdown.timeline if m["layer"] == "loss"][0]
    state = 2768 * 4 * 3 + 2 * 3 * 32 * 32 * 4 + tensor  # + the targets
    # the outputs kept for backward (Conv_0's is not: nothing before it trains, so its
    # input gradient is never made) and the loss gradient
    assert loss - state == 4 * tensor
    assert breakdown.category("activations") >= 3 * tensor
    update = [m["bytes"] for m in breakdown.timeline if m["phase"] == "update"][0]
    assert update - state == 2768 * 4


def test_budget_rules_fire_on_onnx_with_node_locations(tmp_path, capsys):
    path = conv_stack(tmp_path / "big.onnx", size=512, channels=64)
    code = main(["check", str(path), "--gpu", "2GiB", "--batch-size", "32"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{path}: node Conv_0: MEM002" in out
    assert "float16 conversion of the graph" in out and "mixed_float16" not in out


def test_deep_stack_rule_reads_onnx_windows(tmp_path, capsys):
    path = conv_stack(tmp_path / "tiny.onnx", size=2, channels=8, layers=3)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "MEM003" in out and "3 Conv nodes (Conv_0..Conv_4)" in out
    assert "line" not in out.split("MEM003", 1)[1].split(":")[0]


def test_unusual_padding_is_left_to_the_collapsed_rule(tmp_path, capsys):
    path = conv_stack(tmp_path / "p.onnx", size=2, channels=8, layers=3, pads=2)
    main(["check", str(path)])
    assert "MEM003" not in capsys.readouterr().out


def test_json_and_sarif_name_the_node(tmp_path, capsys):
    path = conv_stack(tmp_path / "tiny.onnx", size=2, channels=8, layers=3)
    main(["check", str(path), "--output-format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["diagnostics"][0]["node"] == "Conv_0"
    main(["check", str(path), "--output-format", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    location = sarif["runs"][0]["results"][0]["locations"][0]
    assert location["logicalLocations"][0]["name"] == "Conv_0"
    assert "region" not in location["physicalLocation"]


def test_github_annotation_titles_the_node(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = conv_stack(tmp_path / "tiny.onnx", size=2, channels=8, layers=3)
    main(["check", str(path)])
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("::"))
    assert "title=MEM003 deep-stack-on-tiny-input (node Conv_0)" in line
    assert "line=" not in line


def test_dims_bind_symbolic_dimensions(tmp_path, capsys):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    path = _save(M.build(nodes, [("x", M.F, ["N", "seq", 8])], ["y"], [M.init("w", [8, 4])]),
                 tmp_path / "seq.onnx")
    unbound = analyze_file(str(path), Settings(batch_size=2))
    assert unbound.models[0].layers[-1].output_shape == (None, None, 4)
    assert any("seq" in d.message or "unknown" in d.message for d in unbound.diagnostics)
    bound = analyze_file(str(path), Settings(batch_size=2, dims={"seq": 10}))
    assert bound.models[0].layers[-1].output_shape == (None, 10, 4)
    assert main(["report", str(path), "--dim", "seq=10", "--batch-size", "2"]) == 0
    assert "(None, 10, 4)" in capsys.readouterr().out
    assert main(["check", str(path), "--dim", "seq"]) == 2


def test_config_dims_merge_with_the_command_line(tmp_path):
    (tmp_path / ".memlint.yaml").write_text("dims:\n  seq: 12\n  heads: 2\n")
    from memlint.config import settings_for
    settings = settings_for(tmp_path / "m.onnx", {"dims": ["seq=10"]})
    assert settings.dims == {"seq": 10, "heads": 2}


def test_a_graph_with_a_fixed_batch_says_batch_size_does_not_apply(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    path = _save(M.build(nodes, [("x", M.F, [1, 8])], ["y"]), tmp_path / "fixed.onnx")
    report = analyze_file(str(path), Settings(batch_size=32))
    assert report.models[0].setup.batch_size == 1
    assert any("fixes the batch dimension" in d.message for d in report.diagnostics)


@pytest.mark.parametrize("content", [b"", b"not a model\n", b"\x08\x07\x12\x03abc\xff\xff"])
def test_bad_files_exit_2_and_the_others_are_still_checked(tmp_path, capsys, content):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    good = conv_stack(tmp_path / "good.onnx")
    code = main(["check", str(bad), str(good)])
    captured = capsys.readouterr()
    assert code == 2
    assert "1 file checked" in captured.out or "All checks passed (1 file" in captured.out
    errors = [l for l in captured.err.splitlines() if "bad.onnx" in l]
    assert len(errors) == 1 and "Traceback" not in captured.err
    with pytest.raises(AnalysisError):
        analyze_file(str(bad), Settings())


def test_folders_are_searched_for_onnx_files(tmp_path, capsys):
    conv_stack(tmp_path / "a.onnx")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert main(["check", str(tmp_path)]) == 0
    assert "2 files checked" in capsys.readouterr().out


def test_keras_only_runs_never_import_onnx():
    code = ("import sys; from memlint.cli import main; "
            f"main(['check', {str(FIXTURES / 'small_cnn_fits.py')!r}, '--exit-zero']); "
            "sys.exit(3 if 'onnx' in sys.modules else 0)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_rules_import_no_libcst():
    """The source-level rule MEM004 imports libcst only when it checks a Python file."""
    code = "import sys, memlint.checks; sys.exit(3 if 'libcst' in sys.modules else 0)"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_onnx_only_runs_never_import_libcst(tmp_path):
    """The Keras frontend and MEM004's visitor (libcst, about 0.2 s) are not imported."""
    path = conv_stack(tmp_path / "m.onnx")
    code = ("import sys; from memlint.cli import main; "
            f"main(['check', {str(path)!r}, '--exit-zero']); "
            "sys.exit(3 if 'libcst' in sys.modules else 0)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_report_shows_live_memory_per_node_and_explains_parameter_counts(tmp_path, capsys):
    path = conv_stack(tmp_path / "m.onnx")
    assert main(["report", str(path), "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    header = next(l for l in out.splitlines() if l.startswith("Node (op type)"))
    assert header.split()[-1] == "Live"
    conv = next(l for l in out.splitlines() if l.startswith("Conv_0 (Conv)"))
    # the input (2*3*32*32 floats, 24 KiB) and Conv_0's output (2*16*32*32 floats, 128 KiB)
    assert conv.split()[-2:] == ["152", "KiB"]
    assert "exporters fold BatchNormalization" in out and "profile:" not in out


def test_an_open_symbolic_dimension_is_given_by_dim_not_by_input_shape(tmp_path):
    model = M.build([helper.make_node("Relu", ["x"], ["y"])],
                    [("x", M.F, ["N", "seq", 8])], ["y"], name="open")
    report = analyze_file(str(_save(model, tmp_path / "o.onnx")),
                          Settings(batch_size=4, gpu="t4"))
    (note,) = [d.message for d in report.diagnostics if d.code == "MEM005"]
    assert note.endswith("Pass --dim seq=SIZE with the sizes of the data the model is fed.")
    assert "--input-shape" not in note and "Keras" not in note
    sized = analyze_file(str(tmp_path / "o.onnx"), Settings(batch_size=4, gpu="t4",
                                                            dims={"seq": 10}))
    assert not [d for d in sized.diagnostics if d.code == "MEM005"]
