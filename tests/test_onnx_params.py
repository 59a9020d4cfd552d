"""Parameter counts of ONNX models against counts taken from the initializers themselves,
shape-only constants left out, subgraphs included, dtypes kept (fp16, int8)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

from memlint.frontends.onnx import analyze_model, analyze_onnx  # noqa: E402
from tests import onnx_models as M  # noqa: E402


def weights(result):
    return [w for layer in result.models[0].layers for w in layer.weights]


@pytest.mark.parametrize("name", sorted(M.OPERATOR_MODELS))
def test_parameter_count_equals_initializers(name):
    model, shape_only = M.OPERATOR_MODELS[name]()
    result = analyze_model(model, "m.onnx", batch_size=2, dims=M.MODEL_DIMS.get(name))
    assert result.models[0].params == M.expected_params(model, shape_only)
    names = [w.name for w in weights(result)]
    assert len(names) == len(set(names))  # each parameter counted once
    assert not set(names) & set(shape_only)


def test_shape_only_constants_are_not_parameters():
    model, shape_only = M.shape_chain()
    result = analyze_model(model, "m.onnx", batch_size=2)
    found = {w.name for w in weights(result)}
    assert found == {"w", "b", "cst", "zeros"}
    sizes = {w.name: w.size for w in weights(result)}
    assert sizes["zeros"] == 7 and sizes["cst"] == 7  # ConstantOfShape with a constant shape


def test_shape_arithmetic_on_float_constant_is_not_a_parameter():
    """A Constant that only feeds a Reshape target through Cast/Concat is shape-only."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
            np.array([4.0], np.float32))),
        helper.make_node("Cast", ["c"], ["ci"], to=onnx.TensorProto.INT64),
        helper.make_node("Concat", ["minus1", "ci"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    model = M.build(nodes, [("x", M.F, M.N(8))], ["y"], [M.ints("minus1", [-1])])
    result = analyze_model(model, "m.onnx", batch_size=2)
    assert result.models[0].params == 0
    assert result.tensors["y"][0] == (4, 4)  # [2*8/4, 4] at batch 2


def test_first_consumer_owns_a_shared_initializer():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("MatMul", ["a", "w"], ["b"])]
    model = M.build(nodes, [("x", M.F, M.N(4))], ["b"], [M.init("w", [4, 4])])
    layers = analyze_model(model, "m.onnx").models[0].layers
    assert [len(layer.weights) for layer in layers] == [0, 1, 0]
    assert layers[1].weights[0].shape == (4, 4)


def test_old_exporter_initializers_listed_as_inputs():
    model, _ = M.conv()
    for tensor in model.graph.initializer:
        model.graph.input.append(helper.make_tensor_value_info(
            tensor.name, tensor.data_type, list(tensor.dims)))
    result = analyze_model(model, "m.onnx", batch_size=2)
    assert result.models[0].params == M.expected_params(model)
    assert [layer.type for layer in result.models[0].layers].count("Input") == 1
    assert result.models[0].input_shapes == [(None, 3, 17, 16)]


def test_subgraph_initializers_are_counted():
    model, _ = M.if_subgraph()
    result = analyze_model(model, "m.onnx", batch_size=2)
    assert result.models[0].params == M.expected_params(model) == 4 + 4 + 8
    if_layer = next(layer for layer in result.models[0].layers if layer.type == "If")
    assert sorted(w.name for w in if_layer.weights) == ["eb", "ta"]


def test_loop_body_parameters_are_counted():
    model, shape_only = M.loop_subgraph()
    result = analyze_model(model, "m.onnx", batch_size=2)
    assert result.models[0].params == M.expected_params(model, shape_only) == 8
    loop = next(layer for layer in result.models[0].layers if layer.type == "Loop")
    assert sorted(w.name for w in loop.weights) == ["bias", "bw"]


def test_fp16_weights_keep_their_itemsize_and_policy():
    model, _ = M.fp16_model()
    result = analyze_model(model, "m.onnx", batch_size=2)
    graph = result.models[0]
    assert graph.params == M.expected_params(model)
    assert {w.itemsize for w in weights(result)} == {2}
    assert all(w.trainable for w in weights(result))
    assert graph.setup.dtype_policy == "float16"
    assert graph.layers[-1].config["output_itemsizes"] == [2]


def test_int8_weights_counted_in_their_dtype():
    model, _ = M.int8_model()
    result = analyze_model(model, "m.onnx", batch_size=2)
    by_name = {w.name: w for w in weights(result)}
    assert result.models[0].params == M.expected_params(model)
    assert by_name["wq"].itemsize == 1 and not by_name["wq"].trainable
    assert by_name["w2"].itemsize == 1 and not by_name["w2"].trainable
    assert by_name["ws"].itemsize == 4 and by_name["ws"].trainable
    assert result.models[0].setup.dtype_policy == "float32"
    out = next(layer for layer in result.models[0].layers if layer.type == "MatMulInteger")
    assert out.config["output_itemsizes"] == [4]  # int32


def test_external_data_is_never_read(tmp_path):
    model, _ = M.conv()
    expected = M.expected_params(model)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
    (tmp_path / "weights.data").unlink()  # memlint must not need it
    result = analyze_onnx(path, batch_size=2)
    assert result.models[0].params == expected
    assert not [d for d in result.diagnostics if "outside" in d.message]


def test_external_location_outside_the_folder_is_reported(tmp_path):
    model, _ = M.conv()
    expected = M.expected_params(model)
    onnx.external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../outside.bin"
    sub = tmp_path / "models"
    sub.mkdir()
    path = sub / "model.onnx"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "outside.bin").write_bytes(b"not weights")
    result = analyze_onnx(path, batch_size=2)
    notes = [d for d in result.diagnostics if "../outside.bin" in d.message]
    assert len(notes) == len(model.graph.initializer)
    assert all(d.code == "MEM900" and d.name == "unresolved-value" for d in notes)
    assert result.models[0].params == expected


@pytest.mark.parametrize("location", ["/etc/passwd", "a/../../x.bin", "C:\\\\w.bin"])
def test_escaping_locations(location):
    from memlint.frontends.onnx.loader import _escapes_folder
    assert _escapes_folder(location)


@pytest.mark.parametrize("location", ["w.data", "sub/w.data", "sub/../w.data", "./w"])
def test_local_locations(location):
    from memlint.frontends.onnx.loader import _escapes_folder
    assert not _escapes_folder(location)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_large_constant_node_weights(use_onnx):
    """TensorFlow exporters keep weights in Constant nodes; large ones too."""
    value = numpy_helper.from_array(np.ones((100, 60), np.float32))
    nodes = [helper.make_node("Constant", [], ["w"], value=value),
             helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"])]
    model = M.build(nodes, [("x", M.F, M.N(100))], ["z"])
    result = analyze_model(M.strip_value_info(model), "m.onnx", batch_size=2,
                           use_onnx_inference=use_onnx)
    assert result.models[0].params == numpy_helper.to_array(value).size
    assert result.tensors["z"][0] == (None, 60) and not result.unresolved
    matmul = result.models[0].layers[2]
    assert matmul.type == "MatMul" and [w.name for w in matmul.weights] == ["w"]
    assert result.models[0].layers[1].config["parameter_outputs"] == ["w"]


def test_pads_built_through_transpose_are_shape_only():
    """torch's legacy F.pad export: every int64 constant only builds Pad's pads (Concat,
    Reshape, Slice, Transpose, Reshape, Cast), so the model has no parameters."""
    from tests.test_onnx_shapes import pads_through_transpose

    result = analyze_model(pads_through_transpose(), "m.onnx", batch_size=3)
    assert result.models[0].params == 0
    assert not weights(result)


def test_constants_deciding_a_loop_condition_are_shape_only():
    """tf2onnx's while loop: Less(a, b) -> And -> Loop cond only decides whether the loop
    runs; the body's initializer is the one parameter."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["h_in", "one"], ["h_out"])], "body",
        [helper.make_tensor_value_info("i", M.I64, []),
         helper.make_tensor_value_info("cond_in", M.BOOL, []),
         helper.make_tensor_value_info("h_in", M.F, None)],
        [helper.make_tensor_value_info("cond_out", M.BOOL, []),
         helper.make_tensor_value_info("h_out", M.F, None)],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    nodes = [helper.make_node("Less", ["a", "b"], ["lt"]),
             helper.make_node("And", ["lt", "t"], ["cond"]),
             helper.make_node("Not", ["cond"], ["stop"]),
             helper.make_node("Or", ["cond", "stop"], ["go"]),
             helper.make_node("Loop", ["trip", "go", "x"], ["y"], body=body)]
    inits = [M.ints("trip", 5), numpy_helper.from_array(np.array(0.0, np.float32), "a"),
             numpy_helper.from_array(np.array(200.0, np.float32), "b"),
             numpy_helper.from_array(np.array(True), "t")]
    model = M.build(nodes, [("x", M.F, M.N(4))], ["y"], inits)
    result = analyze_model(model, "m.onnx", batch_size=3)
    assert result.models[0].params == M.expected_params(model, {"trip", "a", "b", "t"}) == 1
    assert [w.name for w in weights(result)] == ["one"]
