"""No verdict on an unknown size (issue 9): the verdict, the reporters and MEM005.

Hand-built breakdowns and graphs check :func:`memlint.memory.verdict.verdict` and MEM005
directly; the end-to-end tests run models on ``keras.Input((None, None, 3))`` through
:func:`memlint.analysis.analyze_text`.  Figures are worked out by hand in the comments.
"""

from __future__ import annotations

import textwrap

from memlint.analysis import analyze_text
from memlint.budget import Budget
from memlint.checks import RULES, RuleContext
from memlint.config import settings_from_table
from memlint.ir import LayerNode, Location, ModelGraph, TrainingSetup, Weight
from memlint.memory import estimate
from memlint.memory.estimate import MemoryBreakdown, Part
from memlint.memory.verdict import (DOES_NOT_FIT, FITS, UNKNOWN, input_shape_hint,
                                    sizing_flags, verdict)
from memlint.reporters.json_format import model_dict
from memlint.reporters.text import model_report

MiB = 2**20


def gpu(usable: int, margin: float = 0.0) -> Budget:
    """A budget whose usable memory is exactly ``usable`` bytes; the verdict's margin is
    ``margin`` (0: the bare estimate is judged; tests/test_verdict_margin.py has the
    profiles' margins)."""
    return Budget(label="test", device="GPU under test", total=usable, cuda_context=0,
                  framework_reserve=0, margin=margin)


def breakdown(unknown=(), batch_known=True) -> MemoryBreakdown:
    """Batch 4: 1,000 fixed bytes + 4 x 500 per sample = 3,000 bytes."""
    return MemoryBreakdown(
        mode="train", batch_size=4,
        parts=[Part("weights", "weights", 1000), Part("saved activations", "activations", 2000)],
        per_sample_bytes=500, fixed_bytes=1000, unknown_activations=list(unknown),
        batch_known=batch_known)


# ====================================================================== verdict()

def test_complete_estimate_fits_or_not_with_largest_batch():
    ok = verdict(breakdown(), gpu(3000))
    assert (ok.status, ok.peak, ok.lower_bound) == (FITS, 3000, False)
    assert ok.largest_batch_size == 4  # (3000 - 1000) // 500
    over = verdict(breakdown(), gpu(2999))
    assert over.status == DOES_NOT_FIT and over.largest_batch_size == 3


def test_unknown_layers_give_no_fit_and_no_largest_batch():
    result = verdict(breakdown(unknown=["conv2d"]), gpu(10**9))
    assert result.status == UNKNOWN
    assert result.lower_bound and result.peak == 3000
    assert result.largest_batch_size is None
    assert result.unknown_layers == ("conv2d",)


def test_known_parts_over_budget_do_not_fit_even_with_unknowns():
    result = verdict(breakdown(unknown=["conv2d"]), gpu(2999))
    assert result.status == DOES_NOT_FIT and result.lower_bound
    assert result.largest_batch_size is None


def test_unknown_batch_bounds_at_one_sample_and_keeps_largest_batch():
    # batch size 1: 1,000 + 500 = 1,500 bytes, whatever batch size was assumed (4)
    result = verdict(breakdown(batch_known=False), gpu(10_000))
    assert (result.status, result.peak, result.lower_bound) == (UNKNOWN, 1500, True)
    assert result.largest_batch_size == 18  # (10,000 - 1,000) // 500
    assert verdict(breakdown(batch_known=False), gpu(1499)).status == DOES_NOT_FIT
    assert verdict(breakdown(batch_known=False), gpu(1500)).status == UNKNOWN


def test_no_budget_no_status():
    result = verdict(breakdown(unknown=["x"]), None)
    assert result.status is None and result.largest_batch_size is None
    assert result.lower_bound and result.share is None


def test_input_shape_hint_placeholders():
    assert input_shape_hint((None, None, None, 3)) == "H,W,3"
    assert input_shape_hint((None, 3, None, None)) == "3,H,W"  # channels first
    assert input_shape_hint((None, None, 128)) == "T,128"
    assert input_shape_hint((None, None)) == "T"
    assert input_shape_hint((None, None, None, None, 1)) == "D,H,W,1"
    assert input_shape_hint((None, 224, 224, 3)) is None
    assert input_shape_hint(None) is None


# ====================================================================== estimate

def conv_graph(height=None, batch=8, batch_source="fit(batch_size=8) at line 9") -> ModelGraph:
    """Input((height, height, 3)) -> Conv2D(8, 3, 'same') -> GlobalAveragePooling2D."""
    path = "m.py"
    shape = (None, height, height, 3)
    inp = LayerNode("input_layer", "InputLayer", Location(path, 4, 10), output_shapes=[shape],
                    input_shapes=[shape])
    conv = LayerNode("conv2d", "Conv2D", Location(path, 5, 5),
                     weights=[Weight("kernel", (3, 3, 3, 8)), Weight("bias", (8,))],
                     input_shapes=[shape], output_shapes=[(None, height, height, 8)],
                     inbound=[[("input_layer", 0, 0)]])
    gap = LayerNode("gap", "GlobalAveragePooling2D", Location(path, 6, 5),
                    input_shapes=[(None, height, height, 8)], output_shapes=[(None, 8)],
                    inbound=[[("conv2d", 0, 0)]])
    setup = TrainingSetup(batch_size=batch, batch_source=batch_source,
                          location=Location(path, 9, 1))
    return ModelGraph("functional", Location(path, 8, 9), kind="Functional",
                      layers=[inp, conv, gap], input_shapes=[shape], setup=setup)


def test_estimate_marks_unknown_layers_and_batch():
    b = estimate(conv_graph())
    assert b.unknown_activations == ["conv2d"] and not b.complete
    assert estimate(conv_graph(height=16)).complete
    unknown_batch = estimate(conv_graph(height=16, batch=None, batch_source="unknown"))
    assert not unknown_batch.batch_known and not unknown_batch.complete


def test_layer_with_no_known_output_is_unknown_not_zero():
    graph = conv_graph(height=16)
    graph.layers.append(LayerNode("fancy", "Fancy", Location("m.py", 7, 5),
                                  unresolved="not a layer memlint knows"))
    b = estimate(graph)
    assert b.unknown_activations == ["fancy"]
    assert verdict(b, gpu(10**12)).status == UNKNOWN


# ====================================================================== MEM005 (by hand)

def mem005(graph, budget=None) -> list:
    ctx = RuleContext(path="m.py", models=[graph], breakdowns=[estimate(graph)],
                      budget=budget, options={})
    return list(RULES["MEM005"].check(ctx))


def test_mem005_names_layers_cause_and_flag_at_first_unknown_layer():
    (d,) = mem005(conv_graph(), gpu(8 * 2**30))
    assert d.code == "MEM005" and d.severity == "warning"
    assert (d.line, d.column) == (5, 5)  # the Conv2D, the first layer of unknown size
    assert "1 layer(s) have unknown output size: conv2d" in d.message
    assert "the model input (None, None, None, 3) leaves H, W open" in d.message
    assert "--input-shape H,W,3" in d.message
    assert "no largest batch size can be given" in d.message
    assert "--batch-size" not in d.message
    assert d.data["verdict"] == UNKNOWN


def test_mem005_fires_without_a_budget_for_unknown_layers():
    (d,) = mem005(conv_graph())
    assert "--input-shape H,W,3" in d.message and "usable" not in d.message


def test_mem005_quotes_a_layer_reason():
    graph = conv_graph(height=16)
    graph.layers.append(LayerNode("fancy", "Fancy", Location("m.py", 7, 5),
                                  unresolved="some_lib.Fancy is not a layer memlint knows"))
    (d,) = mem005(graph)
    assert d.line == 7
    assert "Fancy 'fancy': some_lib.Fancy is not a layer memlint knows" in d.message
    assert "--input-shape" not in d.message  # the input is fully known


def test_mem005_silent_on_a_complete_estimate():
    assert mem005(conv_graph(height=16), gpu(8 * 2**30)) == []


def test_mem005_unknown_batch_only_with_a_budget():
    graph = conv_graph(height=16, batch=None,
                       batch_source="unknown (batches come from a generator at line 9)")
    assert mem005(graph) == []
    (d,) = mem005(graph, gpu(8 * 2**30))
    assert d.line == 9  # the fit() call
    assert "the batch size is not known (unknown (batches come from a generator" in d.message
    assert "--batch-size N" in d.message and "--input-shape" not in d.message
    assert "batch size <= " in d.message  # every layer is known: the largest batch is given
    assert sizing_flags(graph, estimate(graph)) == ["--batch-size N"]


def test_mem005_known_parts_over_budget():
    (d,) = mem005(conv_graph(), gpu(1000))
    assert "already over the 1000 B usable GPU memory: it does not fit" in d.message
    assert d.data["verdict"] == DOES_NOT_FIT


# ====================================================================== end to end

OPEN_INPUT = """
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape={shape})
x = layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(10)(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x_train, y_train, batch_size=8)
"""


def run(source: str, **options):
    table = {key.replace("_", "-"): value for key, value in options.items()}
    return analyze_text(textwrap.dedent(source).lstrip("\n"), "model.py",
                        settings_from_table(table, "test"))


def test_open_input_gives_unknown_verdict_everywhere():
    report = run(OPEN_INPUT.format(shape="(None, None, 3)"), gpu="8GiB")
    graph, b = report.models[0], report.breakdowns[0]
    assert sorted(b.unknown_activations) == ["conv2d", "conv2d_1"]
    found = [d for d in report.diagnostics if d.code == "MEM005"]
    assert [d.line for d in found] == [5]
    assert "--input-shape H,W,3" in found[0].message
    assert not [d for d in report.diagnostics if d.code == "MEM002"]

    text = "\n".join(model_report(graph, b, report.budget))
    assert "verdict:      unknown: at least " in text
    assert "2 layer(s) have unknown output size: conv2d, conv2d_1" in text
    assert "largest batch size" not in text and "fits" not in text
    assert "pass --input-shape H,W,3" in text

    doc = model_dict(graph, b, "model.py", report.budget)
    assert doc["verdict"] == "unknown"
    assert doc["peak_is_lower_bound"] is True and doc["largest_batch_size"] is None
    assert doc["memory"]["peak"] == b.peak  # existing keys stay


def test_known_input_gives_a_verdict_and_largest_batch():
    report = run(OPEN_INPUT.format(shape="(128, 128, 3)"), gpu="8GiB")
    graph, b = report.models[0], report.breakdowns[0]
    assert b.complete
    assert not [d for d in report.diagnostics if d.code == "MEM005"]
    doc = model_dict(graph, b, "model.py", report.budget)
    assert doc["verdict"] == "fits" and doc["peak_is_lower_bound"] is False
    assert isinstance(doc["largest_batch_size"], int) and doc["largest_batch_size"] > 8
    text = "\n".join(model_report(graph, b, report.budget))
    assert f"largest batch size that fits: {doc['largest_batch_size']:,}" in text


def test_no_budget_verdict_is_null_but_bound_is_flagged():
    report = run(OPEN_INPUT.format(shape="(None, None, 3)"))
    doc = model_dict(report.models[0], report.breakdowns[0], "model.py", None)
    assert doc["verdict"] is None and doc["largest_batch_size"] is None
    assert doc["peak_is_lower_bound"] is True
    assert [d.line for d in report.diagnostics if d.code == "MEM005"] == [5]


def test_input_shape_option_completes_a_sequential_on_an_open_input():
    source = """
    from tensorflow import keras
    from tensorflow.keras import layers

    model = keras.Sequential([
        keras.Input(shape=(None, None, 3)),
        layers.Conv2D(8, 3, padding="same"),
        layers.GlobalAveragePooling2D(),
    ])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=4)
    """
    assert [d.line for d in run(source).diagnostics if d.code == "MEM005"] == [6]
    report = run(source, input_shape="64,64,3", gpu="8GiB")
    assert report.breakdowns[0].complete
    assert not [d for d in report.diagnostics if d.code == "MEM005"]


def test_mem002_on_known_parts_over_budget_claims_no_batch_size():
    source = """
    import some_lib
    from tensorflow import keras
    from tensorflow.keras import layers

    inputs = keras.Input(shape=(512, 512, 3))
    x = layers.Conv2D(64, 3, padding="same")(inputs)
    x = some_lib.Fancy(64)(x)
    x = layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, layers.Dense(10)(x))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x_train, y_train, batch_size=64)
    """
    # conv2d alone: 64 x 512 x 512 x 64 x 4 bytes = 4 GiB, over a 2 GiB GPU
    report = run(source, gpu="2050MiB", cuda_context="1MiB", reserve="1MiB")
    peak = [d for d in report.diagnostics if d.code == "MEM002" and d.severity == "error"]
    assert len(peak) == 1
    d = peak[0]
    assert d.line == 11 and "is at least" in d.message
    assert "the largest batch size that fits cannot be given" in d.message
    assert "batch size <=" not in d.message.split("cannot be given")[1]
    assert d.data["max_batch_size"] is None and d.data["peak_is_lower_bound"] is True
    assert [x.line for x in report.diagnostics if x.code == "MEM005"] == [7]


# ============================================ GPU library memory not modelled (cuDNN RNNs)

def _rnn_model(layer: str) -> str:
    return ("model = keras.Sequential([keras.Input((50, 16)), L." + layer
            + ", L.Dense(1)])")


def test_cudnn_recurrences_under_xla_leave_the_estimate_a_lower_bound():
    # On a GPU Keras 3 on JAX hands an LSTM or GRU to cuDNN unless its configuration rules
    # it out; XLA's plans of such steps on an H200 held 32 MiB and more that the scan model
    # does not count, so the estimate is a lower bound and there is no "fits"
    from memlint.memory.profiles import TF_GRAPH, TORCH, XLA
    from tests.test_memory_walk import graph_of

    flagged = {"LSTM(32)": "lstm", "GRU(32)": "gru", "Bidirectional(L.LSTM(8))": "bidirectional",
               "LSTM(32, use_cudnn=True)": "lstm"}
    for layer, name in flagged.items():
        b = estimate(graph_of(_rnn_model(layer)), profile=XLA)
        assert [n for n, _ in b.not_modelled] == [name], layer
        assert "cuDNN" in b.not_modelled[0][1] and not b.complete
        result = verdict(b, gpu(10 * b.peak))
        assert result.status == UNKNOWN and result.largest_batch_size is None
        assert verdict(b, gpu(b.peak // 2)).status == DOES_NOT_FIT  # the lower bound is over
    kept = ("LSTM(32, use_cudnn=False)", "LSTM(32, recurrent_dropout=0.1)",
            "LSTM(32, activation='relu')", "GRU(32, reset_after=False)", "LSTM(32, unroll=True)",
            "LSTM(32, use_bias=False)", "SimpleRNN(32)",
            "Bidirectional(L.LSTM(8, recurrent_activation='hard_sigmoid'))")
    for layer in kept:
        b = estimate(graph_of(_rnn_model(layer)), profile=XLA)
        assert not b.not_modelled and b.complete, layer
    graph = graph_of(_rnn_model("LSTM(32)"))
    for profile in (TORCH, TF_GRAPH, None):  # measured under XLA only
        assert not estimate(graph, profile=profile).not_modelled
    # XLA plans compiled without a device take Keras's scan loop, which memlint models
    assert estimate(graph, profile=XLA, gpu_code_paths=False).complete


def test_mem005_and_the_reports_name_the_cudnn_recurrence():
    source = textwrap.dedent("""\
        import os
        os.environ["KERAS_BACKEND"] = "jax"
        import keras
        from keras import layers

        model = keras.Sequential([keras.Input((50, 16)), layers.LSTM(32), layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
        model.fit(x, y, batch_size=64)
        """)
    report = analyze_text(source, "m.py", settings_from_table({"gpu": "8GiB"}, "test"))
    (d,) = [d for d in report.diagnostics if d.code == "MEM005"]
    assert d.line == 6 and "'lstm'" in d.message and "cuDNN" in d.message
    assert d.data["not_modelled"] == ["lstm"] and d.data["verdict"] == UNKNOWN
    graph, b = report.models[0], report.breakdowns[0]
    text = "\n".join(model_report(graph, b, report.budget))
    assert "not counted (lstm): on a GPU Keras 3 on JAX runs it through cuDNN" in text
    assert "verdict:      unknown: at least" in text
    data = model_dict(graph, b, "m.py", report.budget)
    assert data["not_modelled"][0]["layer"] == "lstm" and data["verdict"] == UNKNOWN
    # without a budget there is no verdict to withhold: the layer figures are all known
    plain = analyze_text(source, "m.py", settings_from_table({}, "test"))
    assert not [d for d in plain.diagnostics if d.code == "MEM005"]
    assert plain.breakdowns[0].not_modelled


# ============================= a layer class's call() that TimeDistributed runs untraced

_WRAPPED_CLASS = textwrap.dedent("""\
    import keras
    from keras import layers

    class FrameEncoder(layers.Layer):
        def __init__(self, width=8, **kwargs):
            super().__init__(**kwargs)
            self.width = width
            self.conv = layers.Conv2D(width, 3, activation="relu")
            self.pool = layers.GlobalAveragePooling2D()

        def call(self, frame):
            return self.pool(self.conv(frame))

        def compute_output_shape(self, input_shape):
            return (input_shape[0], self.width)

    frames = keras.Input((6, 16, 16, 3))
    {wrapped}
    model = keras.Model(frames, layers.Dense(1)(layers.Flatten()(per_frame)))
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=32)
    """)


def test_a_layer_class_timedistributed_runs_untraced_leaves_the_estimate_a_lower_bound():
    # Keras takes the step's shape from compute_output_shape() and builds the class with
    # build() alone, so its call() is not traced, but it runs on every step (H100 plan of a
    # video classifier with TimeDistributed(FrameEncoder): six f32[32, 14, 14, 8]
    # convolution outputs memlint did not count, -14.6%): no verdict, under every profile
    wrapped = _WRAPPED_CLASS.format(
        wrapped='per_frame = layers.TimeDistributed(FrameEncoder(8), name="td")(frames)')
    for backend in ({}, {"backend": "jax"}, {"backend": "torch"}):
        report = analyze_text(wrapped, "m.py",
                              settings_from_table({"gpu": "8GiB", **backend}, "test"))
        (b,) = report.breakdowns
        assert [n for n, _ in b.not_modelled] == ["td"], backend
        assert "FrameEncoder.call()" in b.not_modelled[0][1] and not b.complete
        (d,) = [d for d in report.diagnostics if d.code == "MEM005"]
        assert d.data["verdict"] == UNKNOWN and "'td'" in d.message
    plain = _WRAPPED_CLASS.format(
        wrapped='per_frame = layers.TimeDistributed(layers.Conv2D(8, 3), name="td")(frames)')
    (b,) = analyze_text(plain, "m.py", settings_from_table({"gpu": "8GiB"}, "test")).breakdowns
    assert not b.not_modelled and b.complete
