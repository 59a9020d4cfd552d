"""Models Keras refuses to build: MEM901 at the offending layer's line, and the rest of the
analysis goes on.  The oracle confirms that real Keras really refuses each of them."""

from __future__ import annotations

import pytest

from memlint.analysis import analyze_file, analyze_text
from memlint.config import Settings
from tests.conftest import FIXTURES, require_keras, run_oracle

INVALID = {
    "pool_1x1_map.py": "layers.MaxPooling2D(2)",
    "add_mismatch.py": "layers.Add()([a, b])",
    "negative_conv.py": "layers.Conv2D(4, 7)",
}


def _line_of(path, text) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_layer_reported_at_its_line(name):
    path = FIXTURES / "invalid" / name
    report = analyze_file(str(path), Settings())
    errors = [d for d in report.diagnostics if d.code == "MEM901"]
    assert [d.line for d in errors] == [_line_of(path, INVALID[name])]
    assert errors[0].severity == "error"
    assert report.models, "the model is still reported"


@pytest.mark.oracle
def test_real_keras_refuses_the_invalid_fixtures():
    require_keras()
    paths = [str(FIXTURES / "invalid" / name) for name in sorted(INVALID)]
    results = run_oracle("keras_scripts.py", {"files": paths})["results"]
    for path in paths:
        assert "error" in results[path], f"Keras built {path}"


def test_unknown_layer_is_info_and_the_rest_is_analysed():
    source = (
        "import keras\n"
        "from keras import layers\n"
        "from mylib import FancyBlock\n"
        "model = keras.Sequential([\n"
        "    keras.Input(shape=(32,)),\n"
        "    layers.Dense(64),\n"
        "    FancyBlock(3),\n"
        "    layers.Dense(10),\n"
        "    keras.layers.Frobnicate(2),\n"
        "])\n")
    report = analyze_text(source, "m.py", Settings())
    (graph,) = report.models
    dense = graph.layers[0]
    assert dense.params == 32 * 64 + 64 and dense.output_shape == (None, 64)
    infos = [d for d in report.diagnostics if d.code == "MEM900"]
    assert {d.line for d in infos} >= {7, 9}
    assert all(d.severity == "info" for d in infos)
