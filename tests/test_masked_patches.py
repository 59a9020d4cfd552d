"""keras.io's masked autoencoder, cut down: a learned mask token kept as a ``tf.Variable``
(a constant to Keras 3), position embeddings tiled to the batch read from ``tf.shape``,
patches kept and masked per sample with ``tf.gather(..., batch_dims=1)`` after a random
``tf.argsort``, mask tokens repeated to the batch, ``compute_loss`` in a ``train_step()``,
and a test-time augmentation model the step never runs."""

import pytest

from memlint.frontends.keras.tensor_ops import operation_shape
from memlint.frontends.keras.values import Ref, Tensor
from tests.test_frontend_subclass import HEADER, _model_and_memory

MAE = (
    "import tensorflow as tf\n"
    "class Patches(layers.Layer):\n"
    "    def __init__(self, size, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.size = size\n"
    "        self.flat = layers.Reshape((-1, size * size * 3))\n"
    "    def call(self, images):\n"
    "        patches = tf.image.extract_patches(\n"
    "            images=images, sizes=[1, self.size, self.size, 1],\n"
    "            strides=[1, self.size, self.size, 1], rates=[1, 1, 1, 1], padding='VALID')\n"
    "        return self.flat(patches)\n"
    "class PatchEncoder(layers.Layer):\n"
    "    def __init__(self, size, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.dim = dim\n"
    "        self.mask_token = tf.Variable(tf.random.normal([1, size * size * 3]),\n"
    "                                      trainable=True)\n"
    "    def build(self, input_shape):\n"
    "        (_, self.count, self.area) = input_shape\n"
    "        self.projection = layers.Dense(self.dim)\n"
    "        self.position = layers.Embedding(self.count, self.dim)\n"
    "        self.masked = int(0.75 * self.count)\n"
    "    def call(self, patches):\n"
    "        batch = tf.shape(patches)[0]\n"
    "        positions = self.position(tf.range(start=0, limit=self.count, delta=1)"
    "[tf.newaxis, ...])\n"
    "        positions = tf.tile(positions, [batch, 1, 1])\n"
    "        embedded = self.projection(patches) + positions\n"
    "        order = tf.argsort(tf.random.uniform(shape=(batch, self.count)), axis=-1)\n"
    "        masked, kept = order[:, :self.masked], order[:, self.masked:]\n"
    "        kept_embedded = tf.gather(embedded, kept, axis=1, batch_dims=1)\n"
    "        kept_positions = tf.gather(positions, kept, axis=1, batch_dims=1)\n"
    "        masked_positions = tf.gather(positions, masked, axis=1, batch_dims=1)\n"
    "        tokens = tf.repeat(self.mask_token, repeats=self.masked, axis=0)\n"
    "        tokens = tf.repeat(tokens[tf.newaxis, ...], repeats=batch, axis=0)\n"
    "        return (kept_embedded, self.projection(tokens) + masked_positions,\n"
    "                kept_positions, masked)\n"
    "def transformer(count, dim, name):\n"
    "    inputs = keras.Input((count, dim))\n"
    "    x = layers.MultiHeadAttention(2, dim)(inputs, inputs)\n"
    "    return keras.Model(inputs, layers.LayerNormalization()(x + inputs), name=name)\n"
    "def decoder_model(count, dim, image):\n"
    "    inputs = keras.Input((count, dim))\n"
    "    x = layers.Flatten()(transformer(count, dim, 'decoder_body')(inputs))\n"
    "    x = layers.Dense(image * image * 3, activation='sigmoid')(x)\n"
    "    return keras.Model(inputs, layers.Reshape((image, image, 3))(x), name='decoder')\n"
    "class MaskedAutoencoder(keras.Model):\n"
    "    def __init__(self, train_aug, test_aug, patch_layer, patch_encoder, encoder,\n"
    "                 decoder, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.train_aug, self.test_aug = train_aug, test_aug\n"
    "        self.patch_layer, self.patch_encoder = patch_layer, patch_encoder\n"
    "        self.encoder, self.decoder = encoder, decoder\n"
    "    def calculate_loss(self, images, test=False):\n"
    "        augmented = self.test_aug(images) if test else self.train_aug(images)\n"
    "        patches = self.patch_layer(augmented)\n"
    "        kept, masked_embedded, kept_positions, masked = self.patch_encoder(patches)\n"
    "        encoded = self.encoder(kept) + kept_positions\n"
    "        decoded = self.decoder(tf.concat([encoded, masked_embedded], axis=1))\n"
    "        target = tf.gather(patches, masked, axis=1, batch_dims=1)\n"
    "        output = tf.gather(self.patch_layer(decoded), masked, axis=1, batch_dims=1)\n"
    "        return self.compute_loss(y=target, y_pred=output)\n"
    "    def train_step(self, images):\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = self.calculate_loss(images)\n"
    "        grads = tape.gradient(loss, self.trainable_variables)\n"
    "        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))\n"
    "        return {'loss': loss}\n"
    "train_aug = keras.Sequential([keras.Input((16, 16, 3)), layers.Rescaling(1 / 255.0),\n"
    "                              layers.RandomFlip('horizontal')], name='train_aug')\n"
    "test_aug = keras.Sequential([layers.Rescaling(1 / 255.0)], name='test_aug')\n"
    "model = MaskedAutoencoder(train_aug, test_aug, Patches(4), PatchEncoder(4, 32),\n"
    "                          transformer(4, 32, 'encoder'), decoder_model(16, 32, 16))\n"
    "model.compile(optimizer='adamw', loss='mse')\n"
    "model.fit(np.zeros((64, 16, 16, 3), 'float32'), batch_size=32, epochs=1)\n"
)


def test_a_masked_autoencoder_is_sized():
    graph, memory = _model_and_memory(MAE)
    nodes = {n.name: n for n in graph.layers}
    assert nodes["patch_encoder"].unresolved is None
    assert nodes["patch_encoder"].output_shapes == [
        [(None, 4, 32), (None, 12, 32), (None, 4, 32), (None, 12)]]
    # the test-time augmentation, never run and never built, holds nothing
    assert nodes["test_aug"].idle and not nodes["test_aug"].weights
    # the mask token is no weight of the layer (Keras 3 does not track a tf.Variable)
    assert nodes["patch_encoder"].trainable_params == 48 * 32 + 32 + 16 * 32
    assert memory.complete and memory.batch_size == 32


@pytest.mark.oracle
def test_a_masked_autoencoder_matches_keras(tmp_path):
    # Keras reports the sub-layers' first calls at their concrete batch, memlint keeps the
    # batch open: the shapes are compared past the batch axis, the rest as they are
    from tests.test_frontend_subclass import _keras_and_memlint
    expected, got = _keras_and_memlint(tmp_path, MAE)
    assert got["total"] == expected["total"]

    def past_batch(shape):  # a shape, a list of them (the patch encoder's), or None (unbuilt)
        if shape and isinstance(shape[0], list):
            return [past_batch(s) for s in shape]
        return None if shape is None else shape[1:]
    assert [{**layer, "output_shape": past_batch(layer["output_shape"])}
            for layer in got["layers"]] == [
        {**layer, "output_shape": past_batch(layer["output_shape"])}
        for layer in expected["layers"]]


@pytest.mark.parametrize("name,args,kwargs,expected", [
    ("tensorflow.gather", [Tensor((None, 16, 32)), Tensor((None, 4))],
     {"axis": 1, "batch_dims": 1}, (None, 4, 32)),
    ("tensorflow.gather", [Tensor((None, 16)), Tensor((None, 4))], {"batch_dims": 1},
     (None, 4)),
    ("tensorflow.tile", [Tensor((1, 16, 32)), [None, 1, 1]], {}, (None, 16, 32)),
    ("tensorflow.tile", [Tensor((2, 3))], {"multiples": [2, 1]}, (4, 3)),
    ("tensorflow.repeat", [Tensor((1, 12, 48)), None], {"axis": 0}, (None, 12, 48)),
    ("tensorflow.repeat", [Tensor((1, 48)), 12], {"axis": 0}, (12, 48)),
    ("tensorflow.argsort", [Tensor((None, 16))], {"axis": -1}, (None, 16)),
    ("operator.getitem", [Tensor((16, 32)), (Ref("tensorflow.newaxis"), Ellipsis)], {},
     (1, 16, 32)),
])
def test_per_sample_gathers_and_rows_repeated_to_the_batch(name, args, kwargs, expected):
    assert operation_shape(name, args, kwargs)[1] == expected


@pytest.mark.oracle
def test_per_sample_gathers_and_tiles_are_tensorflows():
    tf = pytest.importorskip("tensorflow")
    made = tf.gather(tf.zeros((2, 16, 32)), tf.zeros((2, 4), "int32"), axis=1, batch_dims=1)
    assert operation_shape("tensorflow.gather", [Tensor((2, 16, 32)), Tensor((2, 4))],
                           {"axis": 1, "batch_dims": 1})[1] == tuple(made.shape)
    made = tf.tile(tf.zeros((1, 16, 32)), [3, 1, 1])
    assert operation_shape("tensorflow.tile", [Tensor((1, 16, 32)), [3, 1, 1]], {})[1] == \
        tuple(made.shape)
    made = tf.repeat(tf.zeros((1, 12, 48)), repeats=3, axis=0)
    assert operation_shape("tensorflow.repeat", [Tensor((1, 12, 48)), 3], {"axis": 0})[1] == \
        tuple(made.shape)


def test_a_model_held_by_the_step_and_never_run_is_reported_as_held_not_estimated():
    # the test-time augmentation had a MEM005 of its own, at an assumed batch of 32
    from memlint.reporters.text import part_line
    from tests.test_frontend_subclass import _report
    report = _report(MAE)
    assert [g.name for g in report.models] == ["masked_autoencoder"]
    held = {g.name: g for g in report.parts}["test_aug"]
    assert held.setup.part_of == ["masked_autoencoder"] and held.setup.part_idle
    assert "held by 'masked_autoencoder', whose training step never runs it" in part_line(held)
    running = {g.name: g for g in report.parts}["train_aug"]
    assert not running.setup.part_idle and "runs only inside" in part_line(running)
