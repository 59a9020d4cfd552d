"""Backend memory profiles and how memlint picks one (code, --backend, config)."""

from __future__ import annotations

import json

import pytest

from memlint.analysis import analyze_text
from memlint.cli import main
from memlint.config import ConfigError, Settings, settings_from_table
from memlint.memory import estimate
from memlint.memory.profiles import (PROFILES, TF_GRAPH, TORCH, XLA, get_profile,
                                     profile_for, rounded, rounding_overhead)

CNN = """
import keras
from keras import layers
model = keras.Sequential([
    keras.Input(shape=(32, 32, 3)),
    layers.Conv2D(16, 3, padding="same"),
    layers.Activation("relu"),
    layers.Dropout(0.2),
    layers.Flatten(),
    layers.Dense(10),
])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=8)
"""


def graph_of(source: str, settings: Settings = Settings()):
    report = analyze_text(source, "model.py", settings)
    return report.models[0], report.breakdowns[0]


def parts(breakdown) -> dict:
    return {p.name: p.bytes for p in breakdown.parts}


def test_no_profile_is_the_default_schedule():
    graph, breakdown = graph_of(CNN)
    assert breakdown.profile is None
    assert graph.setup.backend is None
    assert estimate(graph).peak == breakdown.peak
    assert "allocator rounding" not in parts(breakdown)


def test_tf_graph_profile_is_the_default_schedule_plus_rounding():
    # v2: both walk the TensorFlow graph-mode schedule; tf-graph adds the BFC allocator's
    # 256-byte rounding of every buffer alive at the peak
    graph, _ = graph_of(CNN)
    default, tf = estimate(graph), estimate(graph, profile=TF_GRAPH)
    extra = parts(tf)["allocator rounding"]
    assert 0 < extra < 256 * 20
    assert tf.peak == default.peak + extra
    assert tf.profile == "tf-graph"


def test_xla_profile_keeps_masks_not_copies_and_holds_targets():
    # v2 (was: "elementwise layers fused into their producer"): under XLA the ReLU after the
    # convolution keeps the convolution's output, dropout keeps a one-byte mask, and the
    # targets are a step argument; TensorFlow keeps the ReLU's output instead (the same size:
    # the ReLU writes over the dying convolution output)
    graph, _ = graph_of(CNN)
    xla, tf = estimate(graph, profile=XLA), estimate(graph, profile=TF_GRAPH)
    act = 8 * 32 * 32 * 16 * 4  # one conv output
    names = {t["name"] for t in xla.peak_at["tensors"]}
    assert "conv2d output" in names
    assert parts(xla)["saved activations"] >= act + 8 * 32 * 32 * 16  # + the dropout mask
    assert parts(xla)["targets"] == 8 * 10 * 4
    assert parts(tf)["targets"] == 8 * 10 * 4
    assert xla.profile == "xla"


def test_torch_profile_writes_nothing_in_place_and_rounds_to_512_bytes():
    graph, _ = graph_of(CNN)
    torch, tf = estimate(graph, profile=TORCH), estimate(graph, profile=TF_GRAPH)
    p = parts(torch)
    assert 0 < p["allocator rounding"] < 512 * 20  # under one block per buffer
    # the ReLU and the dropout each make a buffer of their own in eager mode
    forward = max(m["bytes"] for m in torch.timeline if m["phase"] == "forward")
    assert forward > max(m["bytes"] for m in tf.timeline if m["phase"] == "forward")


def test_profiles_keep_max_batch_consistent():
    from memlint.memory import max_batch_size

    graph, _ = graph_of(CNN)
    for profile in PROFILES.values():
        b = estimate(graph, profile=profile)
        assert b.fixed_bytes + b.per_sample_bytes * b.batch_size <= b.peak + b.batch_size
        assert max_batch_size(b, b.peak * 10) > b.batch_size


@pytest.mark.parametrize("size, multiple, expected", [
    (1, 512, 512), (512, 512, 512), (513, 512, 1024), (0, 512, 0), (300, 1, 300)])
def test_rounding(size, multiple, expected):
    assert rounded(size, multiple) == expected


def test_rounding_overhead_counts_each_buffer():
    assert rounding_overhead([1, 256, 257], 256) == 255 + 0 + 255


@pytest.mark.parametrize("name, profile", [
    ("tf", "tf-graph"), ("tensorflow", "tf-graph"), ("jax", "xla"), ("torch", "torch"),
    ("pytorch", "torch")])
def test_backend_names(name, profile):
    assert get_profile(name).name == profile


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError):
        get_profile("mxnet")


def test_tensorflow_with_jit_compile_is_xla():
    assert profile_for("tf", jit_compile=True) is XLA
    assert profile_for("tf", jit_compile=False) is TF_GRAPH
    assert profile_for(None) is None


@pytest.mark.parametrize("head, backend, source", [
    ('import os\nos.environ["KERAS_BACKEND"] = "jax"\n', "jax", "KERAS_BACKEND set at line 2"),
    ('import os\nos.environ.setdefault("KERAS_BACKEND", "torch")\n', "torch",
     "KERAS_BACKEND set at line 2"),
    ('import keras\nkeras.config.set_backend("jax")\n', "jax", "keras.config.set_backend()"),
    ("import torch\n", "torch", "import of torch at line 1"),
    ("import jax\n", "jax", "import of jax at line 1"),
    ("import tensorflow as tf\n", "tf", "import of tensorflow at line 1"),
    ("from tensorflow.keras import layers as L\n", "tf", "import of tensorflow.keras"),
    ('import os\nimport torch\nos.environ["KERAS_BACKEND"] = "jax"\n', "jax", "KERAS_BACKEND"),
])
def test_backend_from_code(head, backend, source):
    graph, breakdown = graph_of(head + CNN)
    assert graph.setup.backend == backend
    assert source in graph.setup.backend_source
    assert breakdown.profile == profile_for(backend).name


def test_jit_compile_in_compile_selects_xla_on_tensorflow():
    source = "import tensorflow as tf\n" + CNN.replace('loss="mse")', 'loss="mse", '
                                                       'jit_compile=True)')
    graph, breakdown = graph_of(source)
    assert graph.setup.jit_compile is True
    assert breakdown.profile == "xla"


def test_configured_backend_wins_over_the_code():
    graph, breakdown = graph_of("import torch\n" + CNN, Settings(backend="jax"))
    assert graph.setup.backend == "jax"
    assert graph.setup.backend_source.startswith("configured")
    assert breakdown.profile == "xla"


def test_config_backend_values():
    assert settings_from_table({"backend": "TensorFlow"}, "cfg").backend == "tf"
    with pytest.raises(ConfigError):
        settings_from_table({"backend": "theano"}, "cfg")


def test_cli_backend_flag_and_reports(tmp_path, capsys):
    path = tmp_path / "m.py"
    path.write_text(CNN)
    assert main(["report", str(path), "--backend", "torch", "--output-format", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["models"][0]
    assert model["backend"] == "torch" and model["memory_profile"] == "torch"
    assert model["backend_source"].startswith("configured")
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "profile:      default (TensorFlow graph-mode schedule" in out
    assert main(["report", str(path), "--backend", "jax"]) == 0
    assert "profile:      xla (backend jax: configured" in capsys.readouterr().out
