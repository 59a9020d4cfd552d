"""Real exporter output: models for the architectures of Keras fixtures, exported by PyTorch
(``torch.onnx.export``, dynamo and TorchScript paths) and by Keras itself
(``model.export(format="onnx")``), analysed by memlint and checked against

(a) the weights actually stored in the exported graph, counted here from the initializers
    and Constant nodes (subgraphs included);
(b) onnxruntime: every tensor shape memlint infers equals the shape onnxruntime produces on
    random input at batch 3;
(c) the source framework's parameter count, up to the differences docs/onnx.md explains.

The exports run once per session, in subprocesses (tests/oracle/onnx_exports.py), one per
exporter and in parallel.  Without torch / tf2onnx the tier skips, unless
MEMLINT_REQUIRE_EXPORTERS=1, where that is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import numpy_helper  # noqa: E402

from memlint.frontends.onnx import analyze_onnx  # noqa: E402
from tests import onnx_models as M  # noqa: E402
from tests.conftest import ORACLE  # noqa: E402

pytestmark = pytest.mark.exporter

BATCH = 3
MODELS = ["small_cnn", "mnist_mlp", "lstm_bidirectional", "transformer", "unet",
          "resnet_mini"]
# exporter -> modules it needs
EXPORTERS = {"torch-dynamo": ("torch", "onnxscript"), "torch-legacy": ("torch",),
             "keras": ("keras", "tensorflow", "tf2onnx")}

# Input positions that carry shapes, axes, indices, scales, counts or conditions, not data
# (written for this test from the ONNX operator specs, independently of memlint's table).
NOT_DATA = {"Reshape": {1}, "Resize": {1, 2, 3}, "Upsample": {1}, "Slice": {1, 2, 3, 4},
            "Pad": {1, 3}, "Expand": {1}, "Tile": {1}, "Unsqueeze": {1}, "Squeeze": {1},
            "Gather": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "Where": {0},
            "Loop": {0, 1}, "If": {0}, "Split": {1}, "LSTM": {4}, "GRU": {4},
            "ReverseSequence": {1}, "Shape": {0}, "Size": {0},
            **{op: {1} for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceProd")}}

# Python literals the model code multiplies or adds, stored by the exporter as weights:
# (model, exporter) -> how many elements (docs/onnx.md lists each one).
LITERALS = {
    ("mnist_mlp", "torch-dynamo"): 1, ("mnist_mlp", "torch-legacy"): 1,
    ("mnist_mlp", "keras"): 2,
    ("transformer", "torch-dynamo"): 1, ("transformer", "torch-legacy"): 1,
    ("transformer", "keras"): 2,
    ("lstm_bidirectional", "torch-dynamo"): 1,
    ("lstm_bidirectional", "keras"): 10,
}

# Pairs where memlint is known to be wrong today (docs/onnx.md, "memlint bugs found").
KNOWN_SHAPE_BUGS: dict = {}
KNOWN_PARAM_BUGS: dict = {}


def missing_modules(exporter: str) -> list:
    """Modules ``exporter`` needs that are not installed."""
    return [m for m in EXPORTERS[exporter] if importlib.util.find_spec(m) is None]


def require(exporter: str) -> None:
    """Skip (or fail under MEMLINT_REQUIRE_EXPORTERS=1) when the exporter is missing."""
    missing = missing_modules(exporter)
    if not missing:
        return
    why = (f"exporter {exporter} needs {', '.join(missing)} "
           "(pip install torch==2.13.0 onnxscript tf2onnx keras tensorflow-cpu)")
    if os.environ.get("MEMLINT_REQUIRE_EXPORTERS") == "1":
        pytest.fail(f"MEMLINT_REQUIRE_EXPORTERS=1 but {why}")
    pytest.skip(why)


def start_export(exporter: str, folder) -> subprocess.Popen:
    """Start the oracle subprocess exporting every model with ``exporter``; its stdout
    (the JSON answer) and stderr (exporter chatter) go to files, so no pipe can fill."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               KERAS_BACKEND="tensorflow", PYTHONWARNINGS="ignore")
    request = folder / f"{exporter}.request.json"
    request.write_text(json.dumps({"out": str(folder), "exporters": [exporter],
                                   "models": MODELS}))
    with open(request) as stdin, open(folder / f"{exporter}.out", "w") as stdout, \
            open(folder / f"{exporter}.err", "w") as stderr:
        return subprocess.Popen([sys.executable, str(ORACLE / "onnx_exports.py")],
                                stdin=stdin, stdout=stdout, stderr=stderr, env=env)


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> dict:
    """(model, exporter) -> the oracle's record, every available exporter run in parallel."""
    folder = tmp_path_factory.mktemp("exports")
    running = {e: start_export(e, folder) for e in EXPORTERS if not missing_modules(e)}
    records = {}
    for exporter, proc in running.items():
        if proc.wait(timeout=900) != 0:
            err = (folder / f"{exporter}.err").read_text()
            raise RuntimeError(f"exporter {exporter} crashed:\n{err[-4000:]}")
        answer = json.loads((folder / f"{exporter}.out").read_text())
        for record in answer["exports"]:
            records[(record["model"], record["exporter"])] = record
    return records


def exported(exports, model: str, exporter: str) -> dict:
    """The record of one export; the test fails when exporting itself failed."""
    require(exporter)
    record = exports[(model, exporter)]
    assert "error" not in record, record.get("traceback", record["error"])
    return record


def graphs(graph):
    """``graph`` and every subgraph inside it."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from graphs(attr.g)
            for sub in attr.graphs:
                yield from graphs(sub)


def stored_tensors(graph) -> dict:
    """name -> array of every initializer and Constant-node tensor of one graph."""
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    scalar = {"value_float": lambda a: a.f, "value_floats": lambda a: list(a.floats),
              "value_int": lambda a: a.i, "value_ints": lambda a: list(a.ints)}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    arrays[node.output[0]] = numpy_helper.to_array(attr.t)
                elif attr.name in scalar:
                    arrays[node.output[0]] = np.asarray(scalar[attr.name](attr))
    return arrays


def outer_reads(node) -> set:
    """Names the subgraphs of ``node`` read (outer-scope tensors included)."""
    names = set()
    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
            for inner in graphs(sub):
                for inner_node in inner.node:
                    names.update(inner_node.input)
    return names


def data_tensors(graph) -> set:
    """Tensors whose values reach a graph output through data positions (backwards from
    the outputs: a node computing data reads data at every position not in NOT_DATA;
    whatever its subgraphs read counts as data)."""
    data = {v.name for v in graph.output}
    for node in reversed(graph.node):
        if not any(out in data for out in node.output):
            continue
        skip = NOT_DATA.get(node.op_type, ())
        data.update(n for i, n in enumerate(node.input) if i not in skip)
        data.update(outer_reads(node))
    return data


def stored_weights(model) -> int:
    """Elements of the tensors the graph stores and computes with: initializers and
    Constant nodes (subgraphs included) whose values reach an output as data, not only as
    shapes, indices, scales or conditions."""
    total = 0
    for graph in graphs(model.graph):
        data = data_tensors(graph)
        total += sum(a.size for name, a in stored_tensors(graph).items() if name in data)
    return total


def feeds_for(model) -> dict:
    """Random inputs at batch BATCH: token ids below 200 (valid for every embedding here)."""
    feeds = {}
    for value in model.graph.input:
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else BATCH for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = M.RNG.random(shape).astype(dtype)
        else:
            feeds[value.name] = M.RNG.integers(0, 200, size=shape).astype(dtype)
    return feeds


def shape_mismatches(result, model) -> dict:
    """tensor -> (memlint's shape, onnxruntime's) wherever they differ."""
    expected = M.ort_shapes(model, feeds_for(model))
    wrong = {}
    for name, shape in expected.items():
        ours = result.tensors.get(name, (None, None))[0]
        if ours is not None:
            ours = tuple(BATCH if d is None and i == 0 else d for i, d in enumerate(ours))
        if ours != shape:
            wrong[name] = (ours, shape)
    return wrong


def source_delta(record) -> int:
    """memlint's total minus the source framework's trainable count, as docs/onnx.md
    explains it: BatchNorm folded into the preceding convolution (its gamma and beta go,
    one bias per channel comes), Keras LSTM biases doubled to ONNX's [W_b, R_b], and
    Python literals stored as constants."""
    source, key = record["source"], (record["model"], record["exporter"])
    delta = -source["batchnorm_affine"] // 2 + LITERALS.get(key, 0)
    if record["exporter"] == "keras":
        delta += source.get("lstm_bias", 0)
    return delta


PAIRS = [(m, e) for e in EXPORTERS for m in MODELS]


def _marked(table):
    """PAIRS with a strict xfail on the pairs of a known-bug table."""
    return [pytest.param(m, e, marks=pytest.mark.xfail(reason=table[(m, e)], strict=True))
            if (m, e) in table else (m, e) for m, e in PAIRS]


@pytest.mark.parametrize("model_name,exporter", _marked(KNOWN_PARAM_BUGS))
def test_parameters_equal_stored_weights(exports, model_name, exporter):
    record = exported(exports, model_name, exporter)
    result = analyze_onnx(record["path"], batch_size=BATCH)
    stored = stored_weights(onnx.load(record["path"]))
    assert result.models[0].params == stored


@pytest.mark.parametrize("model_name,exporter", _marked(KNOWN_SHAPE_BUGS))
def test_shapes_equal_onnxruntime(exports, model_name, exporter):
    record = exported(exports, model_name, exporter)
    result = analyze_onnx(record["path"], batch_size=BATCH)
    assert not [d for d in result.diagnostics if d.code == "MEM901"]
    assert not result.unresolved, [(u.what, u.reason) for u in result.unresolved[:5]]
    assert not shape_mismatches(result, onnx.load(record["path"]))


@pytest.mark.parametrize("model_name,exporter", _marked(KNOWN_PARAM_BUGS))
def test_source_count_difference_is_the_documented_one(exports, model_name, exporter):
    record = exported(exports, model_name, exporter)
    result = analyze_onnx(record["path"], batch_size=BATCH)
    assert result.models[0].params - record["source"]["parameters"] == source_delta(record)


@pytest.mark.parametrize("exporter", list(EXPORTERS))
def test_exports_have_a_dynamic_batch_and_external_data_is_not_read(exports, exporter):
    """Every export keeps a symbolic batch; the dynamo exporter writes its weights to a
    side file, which memlint never opens (it still counts them from the shapes)."""
    for model_name in MODELS:
        record = exported(exports, model_name, exporter)
        model = onnx.load(record["path"], load_external_data=False)
        for value in model.graph.input:
            assert not value.type.tensor_type.shape.dim[0].HasField("dim_value")
        data = record["path"] + ".data"
        if os.path.exists(data):
            os.rename(data, data + ".away")  # gone: memlint must not need it
            try:
                result = analyze_onnx(record["path"], batch_size=BATCH)
            finally:
                os.rename(data + ".away", data)
            assert result.models[0].params == stored_weights(onnx.load(record["path"])) > 0
