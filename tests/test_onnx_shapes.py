"""Every tensor shape memlint infers for ONNX models equals what onnxruntime produces when it
runs the model on random input: with ONNX's shape inference, and with memlint's own inference
alone on models stripped of value_info."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

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
    assert any("MatMul_0" in d.message and "'m'" in d.message for d in notes)


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
    assert result.tensors["y"][0] in ((None, 4), None)  # ONNX may not say; never wrong
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
