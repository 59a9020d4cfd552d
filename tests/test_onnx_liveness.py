"""The inference activation peak from tensor liveness, against peaks worked out by hand."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from onnx import helper  # noqa: E402

from memlint.frontends.onnx import analyze_model, inference_peak  # noqa: E402
from tests import onnx_models as M  # noqa: E402


def _graph(nodes, outputs, width=1000, inits=()):
    model = M.build(nodes, [("x", M.F, M.N(width))], outputs, list(inits))
    return analyze_model(model, "m.onnx", batch_size=2).models[0]


def test_chain_reuses_dead_input():
    S = 2 * 1000 * 4
    graph = _graph([helper.make_node("Relu", ["x"], ["r1"]),
                    helper.make_node("Relu", ["r1"], ["r2"])], ["r2"])
    peak, node, per_node = inference_peak(graph, 2)
    assert (peak, node) == (2 * S, "Relu_0")
    assert per_node == [("x", S), ("Relu_0", 2 * S), ("Relu_1", S)]


def test_diamond():
    S = 2 * 1000 * 4
    graph = _graph([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("Sigmoid", ["x"], ["b"]),
                    helper.make_node("Add", ["a", "b"], ["c"])], ["c"])
    peak, node, per_node = inference_peak(graph, 2)
    assert (peak, node) == (3 * S, "Sigmoid_1")
    assert [live for _, live in per_node] == [S, 2 * S, 3 * S, 2 * S]


def test_graph_outputs_stay_alive():
    S = 2 * 1000 * 4
    graph = _graph([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("Relu", ["b"], ["c"])], ["a", "c"])
    _, _, per_node = inference_peak(graph, 2)
    # a is an output: b gets its own buffer; c reuses b's
    assert [live for _, live in per_node] == [S, 2 * S, 2 * S, 2 * S]


def test_fp16_conv_network_in_its_own_itemsize():
    model, _ = M.fp16_model()
    graph = analyze_model(model, "m.onnx", batch_size=2).models[0]
    x, conv = 2 * 3 * 64 * 2, 2 * 8 * 64 * 2
    pooled, out = 2 * 8 * 2, 2 * 10 * 2
    peak, node, per_node = inference_peak(graph, 2)
    assert (peak, node) == (x + conv, "Conv_0")
    assert [live for _, live in per_node] == [x, x + conv, conv, conv + pooled, pooled,
                                              pooled + out]


def test_weights_are_not_activations():
    S = 2 * 16 * 4
    model = M.build([helper.make_node("MatMul", ["x", "w"], ["y"]),
                     helper.make_node("Add", ["y", "c"], ["z"]),
                     helper.make_node("Constant", [], ["c"], value_float=1.0)],
                    [("x", M.F, M.N(16))], ["z"], [M.init("w", [16, 16])])
    graph = analyze_model(model, "m.onnx", batch_size=2).models[0]
    peak, _, _ = inference_peak(graph, 2)
    assert peak == 2 * S


def test_peak_scales_with_batch():
    graph = _graph([helper.make_node("Relu", ["x"], ["r1"])], ["r1"])
    assert inference_peak(graph, 8)[0] == 4 * inference_peak(graph, 2)[0]


def test_batch_multiple_scales_without_a_configured_batch():
    """[batch * heads, ...] tensors: the same peak whether the batch is known or not."""
    model, _ = M.batch_heads()
    fixed = analyze_model(model, "m.onnx", batch_size=3).models[0]
    free = analyze_model(model, "m.onnx").models[0]
    split = next(layer for layer in free.layers if layer.config["outputs"] == ["split"])
    assert split.output_shapes == [(None, 6, 2)] and split.config["batch_factors"] == [4]
    assert inference_peak(free, 3) == inference_peak(fixed, 3)
    x, scores = 3 * 6 * 8 * 4, 3 * 4 * 6 * 6 * 4
    assert inference_peak(free, 3)[0] >= x + scores
