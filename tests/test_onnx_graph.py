"""The IR the ONNX frontend builds: layers per node in execution order, inputs, links,
configuration, training setup and diagnostics."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from onnx import helper  # noqa: E402

from memlint.frontends.onnx import analyze_model, analyze_onnx  # noqa: E402
from memlint.ir import Location  # noqa: E402
from tests import onnx_models as M  # noqa: E402


def test_layers_follow_execution_order_and_name_nodes(tmp_path):
    nodes = [helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("MatMul", ["x", "w"], ["a"]),  # out of order in the file
             helper.make_node("Add", ["b", "x2"], ["y"], name="")]
    model = M.build(nodes, [("x", M.F, M.N(4)), ("x2", M.F, M.N(3))], ["y"],
                    [M.init("w", [4, 3])], name="tiny")
    path = tmp_path / "tiny.onnx"
    path.write_bytes(model.SerializeToString())
    result = analyze_onnx(path, batch_size=8)
    graph = result.models[0]
    assert (graph.name, graph.kind, graph.variable) == ("tiny", "ONNX", None)
    assert [(layer.name, layer.type) for layer in graph.layers] == [
        ("x", "Input"), ("x2", "Input"), ("MatMul_1", "MatMul"), ("second", "Relu"),
        ("Add_2", "Add")]
    assert graph.input_shapes == [(None, 4), (None, 3)]
    add = graph.layers[-1]
    assert add.location == Location(str(path), 1, node="Add_2")
    assert add.config["op_type"] == "Add" and add.config["outputs"] == ["y"]
    assert add.config["output_itemsizes"] == [4] and add.config["domain"] == ""
    assert add.inbound == [[("second", 0, 0), ("x2", 0, 0)]]
    assert add.input_shapes == [[(None, 3), (None, 3)]]
    assert add.output_shapes == [(None, 3)]
    matmul = graph.layers[2]
    assert [w.name for w in matmul.weights] == ["w"] and matmul.inbound == [[("x", 0, 0)]]
    setup = graph.setup
    assert (setup.mode, setup.mode_source, setup.batch_size) == ("infer", "ONNX default", 8)
    assert setup.dtype_policy == "float32"
    assert graph.params == 12 and not result.unresolved


def test_multi_output_node_links_by_output_index():
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1),
             helper.make_node("Sub", ["b", "a"], ["y"])]
    model = M.build(nodes, [("x", M.F, M.N(6))], ["y"], opset=17)
    graph = analyze_model(model, "m.onnx").models[0]
    split, sub = graph.layers[1], graph.layers[2]
    assert split.output_shapes == [[(None, 3), (None, 3)]]
    assert sub.inbound == [[("Split_0", 0, 1), ("Split_0", 0, 0)]]


def test_unknown_operator_is_reported_and_analysis_goes_on():
    nodes = [helper.make_node("MyOp", ["x"], ["a"], domain="custom"),
             helper.make_node("Relu", ["x"], ["b"])]
    model = M.build(nodes, [("x", M.F, M.N(6))], ["a", "b"])
    model.opset_import.append(helper.make_opsetid("custom", 1))
    result = analyze_model(model, "m.onnx")
    assert result.tensors["b"][0] == (None, 6)
    notes = [d for d in result.diagnostics if d.code == "MEM900"]
    assert any("custom.MyOp" in d.message and "'a'" in d.message for d in notes)
    layer = result.models[0].layers[1]
    assert layer.type == "MyOp" and layer.config["domain"] == "custom"
    assert layer.unresolved


def test_fp16_policy_and_input_itemsize():
    model, _ = M.fp16_model()
    graph = analyze_model(model, "m.onnx").models[0]
    assert graph.setup.dtype_policy == "float16"
    assert graph.layers[0].config["output_itemsizes"] == [2]
