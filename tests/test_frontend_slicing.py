"""Dependence slicing (memlint/frontends/keras/slicing.py): code nothing the models, compile,
fit or the data pipelines read is not evaluated, and everything they read still is, exactly.

Work is asserted in the analysis's deterministic units (``FrontendResult.work``), never in
seconds."""

from __future__ import annotations

import libcst as cst

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.interpreter import MAX_STEPS, Interpreter
from memlint.frontends.keras.state import FileState
from tests.conftest import FIXTURES

HEADER = "import math\nimport random\nimport keras\nimport numpy as np\nfrom keras import layers\n"


def analyse(body: str):
    return analyze_source(HEADER + body, "sliced.py")


def units(result, model: int = 0) -> list:
    return [layer.config.get("units") for layer in result.models[model].layers
            if layer.type == "Dense"]


def test_the_fixture_with_50000_generated_samples_is_resolved_in_few_steps():
    path = FIXTURES / "synthetic_data_loops.py"
    result = analyze_source(path.read_text(encoding="utf-8"), str(path))
    assert [d.code for d in result.diagnostics if d.code.startswith("MEM9")] == []
    graph = result.models[0]
    assert graph.unresolved == []
    assert [layer.output_shape for layer in graph.layers] == [
        (None, 64), (None, 256), (None, 128), (None, 128), (None, 64), (None, 64), (None, 10)]
    assert graph.params == 58_442
    assert graph.setup.batch_size == 256  # found by a loop: it ran
    assert graph.setup.data_shapes == [(64,)]
    assert [(h.shape, h.dtype) for h in graph.setup.host_data] == [
        ((50_000, 64), "float32"), ((50_000,), "int64")]
    assert result.work["steps"] < 1_000
    assert result.work["loop_iterations"] < 20


def test_without_slicing_the_same_fixture_spends_the_whole_budget():
    source = (FIXTURES / "synthetic_data_loops.py").read_text(encoding="utf-8")
    state = FileState("f.py")
    interp = Interpreter(cst.parse_module(source), state)
    interp.run()
    assert interp.steps == MAX_STEPS
    assert not state.models


def test_dead_loops_cost_nothing_and_live_ones_run():
    result = analyse(
        "total = 0\nfor i in range(10**6):\n    total += i\n"
        "n = 0\nfor i in range(5):\n    n += 2\n"
        "m = keras.Sequential([keras.Input((4,)), layers.Dense(n)])\n")
    assert units(result) == [10]
    assert result.work["loop_iterations"] == 5


def test_loops_that_build_layers_run():
    result = analyse(
        "inp = x = keras.Input((8, 8, 3))\nfor i in range(3):\n"
        "    x = layers.Conv2D(4 * (i + 1), 3, padding='same')(x)\n"
        "m = keras.Model(inp, x)\n")
    assert [layer.output_shape for layer in result.models[0].layers][-1] == (None, 8, 8, 12)


def test_data_built_in_a_list_that_sizes_the_model_runs():
    result = analyse(
        "rows = []\nfor i in range(100):\n    row = []\n    for j in range(6):\n"
        "        row.append(0.5 * j)\n    rows.append(row)\n"
        "x = np.array(rows, dtype='float32')\n"
        "m = keras.Sequential([keras.Input(x.shape[1:]), layers.Dense(len(rows) // 10)])\n")
    assert units(result) == [10]
    assert result.models[0].layers[0].params == 6 * 10 + 10


def test_a_mutation_through_another_name_is_seen():
    result = analyse(
        "sizes = []\nalias = sizes\nfor i in range(3):\n    alias.append(8)\n"
        "m = keras.Sequential([keras.Input((4,)), layers.Dense(len(sizes))])\n")
    assert units(result) == [3]


def test_a_function_that_fills_its_argument_runs():
    result = analyse(
        "def fill(out, n):\n    for i in range(n):\n        out.append(i)\n"
        "    scratch = [0] * 1000\n    for i in range(1000):\n        scratch[i] = i\n"
        "widths = []\nfill(widths, 7)\n"
        "m = keras.Sequential([keras.Input((4,)), layers.Dense(len(widths))])\n")
    assert units(result) == [7]
    assert result.work["loop_iterations"] == 7  # the scratch loop was skipped


def test_names_read_by_functions_are_kept():
    result = analyse(
        "n = 1\nfor i in range(4):\n    n *= 2\n"
        "def build():\n    return keras.Sequential([keras.Input((4,)), layers.Dense(n)])\n"
        "m = build()\n")
    assert units(result) == [16]


def test_element_stores_into_arrays_are_skipped_but_not_into_lists():
    result = analyse(
        "x = np.zeros((20000, 3))\nfor i in range(20000):\n    x[i, 0] = math.sin(i)\n"
        "widths = [1, 1]\nfor i in range(2):\n    widths[i] = 5\n"
        "m = keras.Sequential([keras.Input(x.shape[1:]), layers.Dense(sum(widths))])\n")
    assert units(result) == [10]
    assert result.models[0].layers[0].params == 3 * 10 + 10
    assert result.work["loop_iterations"] == 2


def test_settings_and_models_in_dead_looking_code_are_kept():
    result = analyse(
        "import os\nfor key in ['CUDA_VISIBLE_DEVICES']:\n    os.environ[key] = '0,1'\n"
        "m = keras.Sequential([keras.Input((4,)), layers.Dense(2)])\n"
        "for i in range(2):\n    keras.Sequential([keras.Input((4,)), layers.Dense(3)])\n")
    assert len(result.models) == 3
    assert [cap.kind for cap in result.memory_caps] == ["visible-devices"]


def test_loops_after_fit_that_read_plain_results_are_skipped():
    result = analyse(
        "m = keras.Sequential([keras.Input((4,)), layers.Dense(2)])\n"
        "m.compile(optimizer='adam', loss='mse')\n"
        "history = m.fit(np.zeros((100, 4)), np.zeros((100, 2)), batch_size=10)\n"
        "best = 0.0\nfor epoch in range(10**6):\n    best = max(best, epoch * 0.5)\n"
        "print(best)\n")
    assert result.models[0].setup.batch_size == 10
    assert result.work["loop_iterations"] == 0
