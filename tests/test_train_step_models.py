"""Models fit trains through their own ``train_step()`` (keras.io's VAE: no ``call()``, the
step runs an encoder and a decoder), layers that draw random tensors of the batch's size
(``keras.random.normal(shape=(ops.shape(x)[0], dim))``) and NumPy constants added to tensors.

memlint reads them without running anything; the oracle tests build the same sources with
real Keras (the step runs once on two samples, as fit would) and compare layer by layer.
"""

from __future__ import annotations

import textwrap

import pytest

from memlint.analysis import analyze_file, analyze_text
from memlint.config import Settings
from memlint.frontends.keras import analyze_source
from tests.conftest import keras_script_result, require_keras
from tests.test_fixtures_oracle import memlint_models

VAE = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers, ops


class Sampling(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(7)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        batch = ops.shape(z_mean)[0]
        dim = ops.shape(z_mean)[1]
        epsilon = keras.random.normal(shape=(batch, dim), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


encoder_inputs = keras.Input(shape=(28, 28, 1))
x = layers.Conv2D(32, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
x = layers.Conv2D(64, 3, activation="relu", strides=2, padding="same")(x)
x = layers.Flatten()(x)
x = layers.Dense(16, activation="relu")(x)
z_mean = layers.Dense(3, name="z_mean")(x)
z_log_var = layers.Dense(3, name="z_log_var")(x)
z = Sampling()([z_mean, z_log_var])
encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")

latent_inputs = keras.Input(shape=(3,))
x = layers.Dense(7 * 7 * 64, activation="relu")(latent_inputs)
x = layers.Reshape((7, 7, 64))(x)
x = layers.Conv2DTranspose(64, 3, activation="relu", strides=2, padding="same")(x)
x = layers.Conv2DTranspose(32, 3, activation="relu", strides=2, padding="same")(x)
decoder_outputs = layers.Conv2DTranspose(1, 3, activation="sigmoid", padding="same")(x)
decoder = keras.Model(latent_inputs, decoder_outputs, name="decoder")


class VAE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        return [self.loss_tracker]

    def train_step(self, data):
        with tf.GradientTape() as tape:
            z_mean, z_log_var, z = self.encoder(data)
            reconstruction = self.decoder(z)
            loss = ops.mean(ops.sum(keras.losses.binary_crossentropy(data, reconstruction),
                                    axis=(1, 2)))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}


digits = np.random.rand(64, 28, 28, 1).astype("float32")
vae = VAE(encoder, decoder)
vae.compile(optimizer=keras.optimizers.Adam())
vae.fit(digits, epochs=1, batch_size=16)
'''

# fit(x, y): the step gets (x, y)
VAE_XY = VAE.replace("z_mean, z_log_var, z = self.encoder(data)",
                     "x, y = data\n            z_mean, z_log_var, z = self.encoder(x)").replace(
    "binary_crossentropy(data, reconstruction)", "binary_crossentropy(y, reconstruction)"
).replace("vae.fit(digits, epochs=1", "vae.fit(digits, digits, epochs=1")

POSITIONS = '''
import numpy as np
import keras
from keras import layers

STEPS, WIDTH = 12, 16
angles = np.arange(STEPS)[:, None] / np.power(10000.0, np.arange(WIDTH)[None, :] / WIDTH)
table = np.zeros((1, STEPS, WIDTH), dtype="float32")

tokens = keras.Input(shape=(STEPS,), dtype="int32")
x = layers.Embedding(100, WIDTH)(tokens)
x = x + table
x = layers.GlobalAveragePooling1D()(x)
out = layers.Dense(2)(x)
model = keras.Model(tokens, out)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(np.zeros((32, STEPS), "int32"), np.zeros((32,), "int32"), batch_size=8)
'''


def _report(source: str):
    return analyze_text(textwrap.dedent(source).lstrip("\n"), "model.py", Settings())


def test_a_model_without_call_is_its_train_step():
    report = _report(VAE)
    graphs = {g.variable: g for g in report.models}
    vae = graphs["vae"]
    assert [layer.name for layer in vae.layers] == ["encoder", "decoder"]
    # encoder 320 + 18,496 + 50,192 + 2 x 51; decoder 12,544 + 36,928 + 18,464 + 289
    assert vae.params == 69_110 + 68_225
    # the decoder reads the encoder's third output, z
    assert vae.layers[1].inbound == [[("encoder", 0, 2)]]
    breakdown = report.breakdowns[list(graphs).index("vae")]
    assert breakdown.complete and breakdown.batch_size == 16
    assert not [d for d in report.diagnostics if d.code == "MEM005"]
    (note,) = [d for d in report.diagnostics if d.code == "MEM900"]
    assert note.severity == "info" and "reads the step fit runs from its train_step()" in \
        note.message and note.line == 63


def test_random_tensor_of_the_batch_size_in_a_layer_call():
    # (the report leaves the encoder out: only the VAE runs it, as a layer)
    encoder = {g.variable: g for g in analyze_source(VAE, "vae.py").models}["encoder"]
    assert encoder.setup.part_of == ["vae"]
    assert "encoder" not in {g.variable for g in _report(VAE).models}
    sampling = encoder.layers[-1]
    assert (sampling.name, sampling.output_shape) == ("sampling", (None, 3))


def test_numpy_constant_added_to_a_tensor():
    (graph,) = _report(POSITIONS).models
    assert graph.params == 100 * 16 + 16 * 2 + 2
    assert not graph.unresolved
    assert any(op.output_shapes == [(None, 12, 16)] for op in graph.operations)


def test_train_step_gets_x_and_y_when_fit_is_given_both():
    report = _report(VAE_XY)
    vae = {g.variable: g for g in report.models}["vae"]
    assert [layer.name for layer in vae.layers] == ["encoder", "decoder"]
    assert vae.params == 69_110 + 68_225
    assert not [d for d in report.diagnostics if d.code == "MEM005"]


def test_train_step_that_calls_no_model_says_so():
    source = VAE.replace("z_mean, z_log_var, z = self.encoder(data)",
                         "z_mean, z_log_var, z = data, data, data").replace(
        "reconstruction = self.decoder(z)", "reconstruction = data")
    report = _report(source)
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert any("train_step() calls no layer or model" in m for m in notes), notes


@pytest.mark.oracle
@pytest.mark.parametrize("source", [VAE, VAE_XY, POSITIONS], ids=["vae", "vae_xy", "positions"])
def test_matches_keras(source, tmp_path):
    require_keras()
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    expected = keras_script_result(path)
    got = memlint_models(path)
    assert set(got) == set(expected["models"])
    for variable, model in expected["models"].items():
        assert got[variable]["layers"] == model["layers"], variable
        assert got[variable]["total"] == model["total"], variable
    report = analyze_file(str(path), Settings())
    fed = expected.get("fed", {})
    for graph in report.models:
        if graph.variable in fed:
            assert graph.setup.batch_size == fed[graph.variable]["batch_size"]
