"""Every tensor shape memlint infers for ONNX models equals what onnxruntime produces when it
runs the model on random input: with ONNX's shape inference, and with memlint's own inference
alone on models stripped of value_info."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

from memlint.frontends.onnx import analyze_model  # noqa: E402
from tests import onnx_models as M  # noqa: E402


def check_against_ort(model, batch=2, dims=None, use_onnx=True, strip=False) -> int:
    """Compare memlint's shape of every node output with onnxruntime's; return how many
    tensors were compared.  Unknown dimensions anywhere fail the check."""
    dims = dict(dims or {})
    analysed = M.strip_value_info(model) if strip else model
    result = analyze_model(analysed, "model.onnx", batch_size=batch, dims=dims,
                           use_onnx_inference=use_onnx)
    assert not result.unresolved, [u.as_dict() | {"what": u.what} for u in result.unresolved]
    assert not [d for d in result.diagnostics if d.code == "MEM901"]
    bind = {"N": batch, "batch_size": batch, "#0": batch, **dims}
    expected = M.ort_shapes(model, M.random_feeds(model, bind))
    mismatches = {}
    for name, shape in expected.items():
        ours = result.tensors[name][0]
        ours = tuple(batch if d is None and i == 0 else d for i, d in enumerate(ours))
        if ours != shape:
            mismatches[name] = (ours, shape)
    assert not mismatches, mismatches
    return len(expected)


@pytest.mark.parametrize("name", sorted(M.OPERATOR_MODELS))
def test_operator_shapes_match_onnxruntime(name):
    model, _ = M.OPERATOR_MODELS[name]()
    assert check_against_ort(model, batch=2, dims=M.MODEL_DIMS.get(name)) >= 1


@pytest.mark.parametrize("name", sorted(M.OPERATOR_MODELS))
def test_own_inference_alone_matches_onnxruntime(name):
    """No value_info, no ONNX inference: memlint's own table must recover every shape."""
    model, _ = M.OPERATOR_MODELS[name]()
    assert check_against_ort(model, batch=3, dims=M.MODEL_DIMS.get(name), use_onnx=False,
                             strip=True) >= 1


@pytest.mark.parametrize("use_onnx", [True, False])
def test_dynamic_dims_bound_from_batch_and_dims(use_onnx):
    model, _ = M.dynamic_dims()
    check_against_ort(model, batch=5, dims={"seq": 7}, use_onnx=use_onnx, strip=not use_onnx)
    result = analyze_model(model, "m.onnx", batch_size=5, dims={"seq": 7},
                           use_onnx_inference=use_onnx)
    assert result.tensors["t"][0] == (None, 4, 7)  # the batch stays variable
    assert result.models[0].input_shapes == [(None, 7, 16)]


def test_unbound_symbol_is_reported_with_node_and_tensor():
    model, _ = M.dynamic_dims()
    result = analyze_model(model, "m.onnx", batch_size=5)
    whats = " ".join(u.what + " " + u.reason for u in result.unresolved)
    assert "seq" in whats and "'m'" in whats
    assert any(u.what == "tensor 'x' of node 'x'" and "graph input" in u.reason
               and "seq" in u.reason for u in result.unresolved)
    notes = [d for d in result.diagnostics if d.code == "MEM900"]
    assert notes and all(d.name == "unresolved-value" for d in notes)
    # the tensors computed from the unbound input (MatMul_0's 'm', then 't', 'r') are
    # unresolved too, and summed up in one note, not one each (a GPT block exported with a
    # dynamic sequence had 185 notes where one says what to give)
    assert any(u.what == "tensor 'm' of node 'MatMul_0'" for u in result.unresolved)
    assert [d.message for d in notes] == [
        "graph input 'x' is unknown (graph input with symbolic dimension(s) seq not bound "
        "(use --dim NAME=VALUE)); left out of the memory estimate",
        "2 more tensor(s) computed from those above have unknown shapes too"]


@pytest.mark.parametrize("use_onnx", [True, False])
def test_unnamed_batch_dimension(use_onnx):
    model, _ = M.unnamed_batch()
    check_against_ort(model, batch=4, use_onnx=use_onnx, strip=not use_onnx)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_if_subgraph_shapes(use_onnx):
    model, _ = M.if_subgraph()
    check_against_ort(model, batch=3, use_onnx=use_onnx)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_if_branches_without_declared_shapes(use_onnx):
    model, _ = M.if_subgraph(typed=False)
    check_against_ort(model, batch=3, use_onnx=use_onnx)


def test_loop_runs_and_is_analysed():
    model, _ = M.loop_subgraph()
    result = analyze_model(model, "m.onnx", batch_size=2)
    expected = M.ort_shapes(model, M.random_feeds(model, {"N": 2}))
    assert result.tensors["y"][0] == (None, 4)
    assert expected["y"] == (2, 4)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_fp16_shapes(use_onnx):
    model, _ = M.fp16_model()
    check_against_ort(model, batch=2, use_onnx=use_onnx, strip=not use_onnx)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_int8_shapes(use_onnx):
    model, _ = M.int8_model()
    check_against_ort(model, batch=2, use_onnx=use_onnx, strip=not use_onnx)


def test_invalid_shapes_are_reported_as_invalid_layer():
    from onnx import helper
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    model = M.build(nodes, [("x", M.F, M.N(5))], ["y"], [M.init("w", [4, 3])])
    result = analyze_model(model, "m.onnx", use_onnx_inference=False)
    errors = [d for d in result.diagnostics if d.code == "MEM901"]
    assert errors and errors[0].name == "invalid-layer" and "MatMul_0" in errors[0].message


def test_onnx_inference_failure_falls_back_to_own(monkeypatch):
    import onnx

    original = onnx.shape_inference.infer_shapes

    def refuse(*args, **kwargs):  # memlint asks for data propagation; the oracle does not
        if kwargs.get("data_prop"):
            raise onnx.shape_inference.InferenceError("[ShapeInferenceError] refused")
        return original(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    model, _ = M.attention()
    check_against_ort(M.strip_value_info(model), batch=2, use_onnx=True)
    result = analyze_model(model, "m.onnx", batch_size=2)
    assert any("ONNX shape inference failed" in d.message for d in result.diagnostics)


def pads_through_transpose():
    """torch's legacy F.pad export: pads built as Concat(Constant, ConstantOfShape) ->
    Reshape[-1, 2] -> Slice(step -1) -> Transpose -> Reshape[-1] -> Cast -> Pad."""
    nodes = [
        helper.make_node("ConstantOfShape", ["four"], ["z"],
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Concat", ["p", "z"], ["cat"], axis=0),
        helper.make_node("Reshape", ["cat", "pairs"], ["r"]),
        helper.make_node("Slice", ["r", "st", "en", "ax", "sp"], ["sl"]),
        helper.make_node("Transpose", ["sl"], ["t"]),
        helper.make_node("Reshape", ["t", "flat_shape"], ["flat"]),
        helper.make_node("Cast", ["flat"], ["pads"], to=onnx.TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads"], ["y"])]
    constants = [("four", [4]), ("p", [2, 2, 2, 2]), ("pairs", [-1, 2]), ("st", [-1]),
                 ("en", [-(2 ** 63) + 1]), ("ax", [0]), ("sp", [-1]), ("flat_shape", [-1])]
    nodes = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(
        np.array(v, np.int64))) for n, v in constants] + nodes
    return M.build(nodes, [("x", M.F, M.N(8, 60, 60))], ["y"])


def reshape_from_reduce_prod():
    """tf2onnx's attention: Reshape(x, Concat(ReduceProd(Max(Shape(x)[0:2], 1)),
    Shape(x)[2:4])) (tf2onnx broadcasts batch dimensions with Max)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "lead"], ["g"]),
             helper.make_node("Max", ["g", "ones"], ["m"]),
             helper.make_node("ReduceProd", ["m"], ["p"], keepdims=1),
             helper.make_node("Gather", ["s", "rest"], ["r"]),
             helper.make_node("Concat", ["p", "r"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    return M.build(nodes, [("x", M.F, M.N(2, 5, 4))], ["y"],
                   [M.ints("lead", [0, 1]), M.ints("rest", [2, 3]), M.ints("ones", [1, 1])],
                   opset=13)


def loop_with_scan_output():
    """A Loop with a loop-carried value and a scan output; body shapes are not declared."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["h_in", "one"], ["h_out"]),
         helper.make_node("Relu", ["h_out"], ["step"])], "body",
        [helper.make_tensor_value_info("i", M.I64, []),
         helper.make_tensor_value_info("cond_in", M.BOOL, []),
         helper.make_tensor_value_info("h_in", M.F, None)],
        [helper.make_tensor_value_info("cond_out", M.BOOL, []),
         helper.make_tensor_value_info("h_out", M.F, None),
         helper.make_tensor_value_info("step", M.F, None)],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    nodes = [helper.make_node("Loop", ["trip", "", "x"], ["y", "steps"], body=body)]
    return M.build(nodes, [("x", M.F, M.N(4))], ["y", "steps"], [M.ints("trip", 5)])


@pytest.mark.parametrize("use_onnx", [True, False])
def test_pad_whose_pads_go_through_transpose(use_onnx):
    check_against_ort(pads_through_transpose(), batch=3, use_onnx=use_onnx,
                      strip=not use_onnx)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_reshape_target_from_reduce_prod_of_batch(use_onnx):
    model = reshape_from_reduce_prod()
    check_against_ort(model, batch=3, use_onnx=use_onnx, strip=not use_onnx)
    result = analyze_model(model, "m.onnx", use_onnx_inference=use_onnx)
    assert result.models[0].layers[-1].config["batch_factors"] == [2]  # [2 * batch, 5, 4]


@pytest.mark.parametrize("use_onnx", [True, False])
def test_loop_outputs_from_the_body(use_onnx):
    model = loop_with_scan_output()
    check_against_ort(model, batch=3, use_onnx=use_onnx, strip=not use_onnx)
    result = analyze_model(model, "m.onnx", batch_size=3, use_onnx_inference=use_onnx)
    assert result.tensors["y"][0] == (None, 4)
    assert result.tensors["steps"][0] == (5, 3, 4)  # the trip count leads


def sequence_fixed_at_export():
    """x [N, seq, 8] reshaped to [16, 4 * N, 2]: the 16 is the sequence length the graph
    was traced with (an exporter's constant), the 4 * N comes from the input's shape."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Mul", ["batch", "four"], ["rows"]),
             helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"]),
             helper.make_node("Concat", ["sixteen", "rows1", "two"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    return M.build(nodes, [("x", M.F, ["N", "seq", 8])], ["y"],
                   [M.ints("zero", 0), M.ints("four", 4), M.ints("axes", [0]),
                    M.ints("sixteen", [16]), M.ints("two", [2])])


@pytest.mark.parametrize("use_onnx", [True, False])
def test_a_reshape_fixed_at_export_rejects_another_sequence_length(use_onnx):
    # ONNX Runtime runs it at the traced length and fails at any other: so does memlint
    # (it read the other length's tensor as the traced one's, an under-estimate)
    model = sequence_fixed_at_export()
    check_against_ort(model, batch=3, use_onnx=use_onnx, strip=not use_onnx,
                      dims={"seq": 16})
    fine = analyze_model(model, "m.onnx", batch_size=3, dims={"seq": 16},
                         use_onnx_inference=use_onnx)
    assert not [d for d in fine.diagnostics if d.code == "MEM901"]
    longer = analyze_model(model, "m.onnx", batch_size=3, dims={"seq": 64},
                           use_onnx_inference=use_onnx)
    (refused,) = [d.message for d in longer.diagnostics if d.code == "MEM901"]
    assert "cannot reshape (batch, 64, 8) into (16, batch*4, 2)" in refused
    with pytest.raises(Exception, match="Reshape"):
        M.ort_shapes(model, M.random_feeds(model, {"N": 3, "seq": 64}))


def test_sizes_taken_from_an_unknown_tensor_are_summed_up_and_other_unknowns_noted():
    # ConstantOfShape(Shape(x)) of an input of unbound 'seq' reads no unknown tensor but
    # sizes taken from one: it follows from x; an operator of a custom domain on a known
    # tensor is unknown on its own account and keeps its note
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "seq", 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    c = helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, None)
    o = helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
         helper.make_node("Mystery", ["y"], ["o"], name="mystery", domain="custom.ops")],
        "g", [x, y], [c, o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("custom.ops", 1)])
    result = analyze_model(model, "m.onnx", batch_size=2)
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert notes[0].startswith("graph input 'x' is unknown")
    assert any(n.startswith("node 'mystery': shape of tensor 'o' is unknown") for n in notes)
    assert "1 more tensor(s) computed from those above have unknown shapes too" in notes
    assert not any("'fill'" in n for n in notes)
