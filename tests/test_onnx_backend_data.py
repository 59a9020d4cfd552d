"""The models that ship in the onnx package's backend test data: the 'light' real networks
(AlexNet, ResNet-50, VGG-19, ...) and the PyTorch-converted node tests.  Output shapes must
equal the stored expected outputs, and parameter counts the weights present in the file."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import numpy_helper  # noqa: E402

from memlint.frontends.onnx import analyze_model  # noqa: E402
from tests import onnx_models as M  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "*.onnx")))
NODE_MODELS = sorted(glob.glob(os.path.join(DATA, "pytorch-*", "*", "model.onnx"))
                     + glob.glob(os.path.join(DATA, "simple", "*", "model.onnx")))
# outputs whose shape depends on run-time values or on sequence/string operators
OWN_GAPS = ("test_sequence_", "test_strnorm_", "test_gradient_", "test_expand_shape_")
ONNX_GAPS = ("test_sequence_model1", "test_sequence_model4", "test_gradient_")


def _tensor_dims(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as handle:
        tensor.ParseFromString(handle.read())
    return tuple(tensor.dims)


def _light_params(model) -> int:
    """Float initializers some node reads, plus the weights the light models make with
    ConstantOfShape (an initializer nothing reads is reported, not counted)."""
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    read = {name for node in model.graph.node for name in node.input}
    total = sum(a.size for n, a in arrays.items() if a.dtype.kind == "f" and n in read)
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape":
            total += int(np.prod(arrays[node.input[0]]))
    return total


@pytest.mark.skipif(not LIGHT, reason="onnx ships no light models")
@pytest.mark.parametrize("path", LIGHT, ids=os.path.basename)
@pytest.mark.parametrize("use_onnx", [True, False])
def test_light_real_models(path, use_onnx):
    model = onnx.load(path, load_external_data=False)
    analysed = model if use_onnx else M.strip_value_info(model)
    result = analyze_model(analysed, path, use_onnx_inference=use_onnx)
    assert not result.unresolved
    assert result.models[0].params == _light_params(model)
    expected = _tensor_dims(path.replace(".onnx", "_output_0.pb"))
    assert result.tensors[model.graph.output[0].name][0] == expected
    unused = {t.name for t in model.graph.initializer} - {
        name for node in model.graph.node for name in node.input}
    notes = [d.message for d in result.diagnostics if "read by no node" in d.message]
    assert bool(notes) == bool(unused)


@pytest.mark.parametrize("use_onnx", [True, False])
def test_backend_node_models(use_onnx):
    assert NODE_MODELS
    failures = []
    for path in NODE_MODELS:
        folder = os.path.dirname(path)
        name = os.path.basename(folder)
        model = onnx.load(path, load_external_data=False)
        analysed = model if use_onnx else M.strip_value_info(model)
        result = analyze_model(analysed, path, use_onnx_inference=use_onnx)
        outputs = sorted(glob.glob(os.path.join(folder, "test_data_set_0", "output_*.pb")))
        for value, out in zip(model.graph.output, outputs):
            ours = result.tensors[value.name][0]
            expected = _tensor_dims(out)
            if ours is not None and None not in ours and ours != expected:
                failures.append((name, value.name, ours, expected))  # wrong, never allowed
            elif ours is None or None in ours:
                if not name.startswith(OWN_GAPS if not use_onnx else ONNX_GAPS):
                    failures.append((name, value.name, ours, expected))
    assert not failures, failures
