"""``isinstance(layer, keras.layers.X)`` in fine-tuning loops (memlint.frontends.keras.
layer_isinstance): decided where Keras 2 and 3 agree, unknown where they do not.  The
trainable counts are compared with real Keras by the oracle test."""

import textwrap

import pytest

from memlint.analysis import analyze_text
from memlint.config import Settings

SOURCE = textwrap.dedent("""\
    import numpy as np
    import keras
    from keras import layers

    inputs = keras.Input(shape=(16, 16, 3))
    x = layers.Conv2D(8, 3, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPool2D()(x)
    x = layers.Conv2D(8, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Reshape((8, 64))(x)
    x = layers.LSTM(4, return_sequences=True)(x)
    x = layers.GRU(4)(x)
    outputs = layers.Dense(3)(x)
    model = keras.Model(inputs, outputs)
    for layer in model.layers:
        layer.trainable = False
    for layer in model.layers[-6:]:
        if not isinstance(layer, layers.BatchNormalization):
            layer.trainable = True
    for layer in model.layers:
        if isinstance(layer, (layers.Dense, layers.GlobalAvgPool2D)):
            layer.trainable = False
        if isinstance(layer, layers.RNN) and isinstance(layer, layers.Layer):
            layer.trainable = layer.name == "lstm"
        if isinstance(layer, (list, dict)):
            layer.trainable = True
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.zeros((8, 16, 16, 3)), np.zeros((8, 3)), batch_size=4)
    """)


def _report(source):
    return analyze_text(source, "model.py", Settings())


def _trainable(graph):
    return {layer.name: layer.trainable_params for layer in graph.layers
            if layer.trainable_params or layer.non_trainable_params}


def test_layer_classes_decide_which_layers_train():
    report = _report(SOURCE)
    got = _trainable(report.models[0])
    # the last six layers but the batch normalisation train, then Dense and GRU are frozen
    assert got == {"conv2d": 0, "batch_normalization": 0, "conv2d_1": 584,
                   "batch_normalization_1": 0, "lstm": 1104, "gru": 0, "dense": 0}
    assert not [d for d in report.diagnostics if d.code == "MEM900"]


def test_a_class_whose_subclasses_differ_between_keras_versions_is_not_decided():
    # Conv2DTranspose subclasses Conv2D in Keras 2, not in Keras 3
    source = SOURCE.replace('x = layers.Conv2D(8, 3, padding="same")(x)',
                            'x = layers.Conv2DTranspose(8, 3, padding="same")(x)').replace(
        "isinstance(layer, (layers.Dense, layers.GlobalAvgPool2D))",
        "isinstance(layer, layers.Conv2D)")
    notes = [d.message for d in _report(source).diagnostics if d.code == "MEM900"]
    assert any("not known statically" in m for m in notes), notes


@pytest.mark.oracle
def test_trainable_flags_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, SOURCE)
