"""Classes of the analysed file derived from a registry layer: a class that builds itself
(``DepthwiseConv2D(Conv2D)`` with build() and compute_output_shape()) is evaluated as a
custom layer on its parent's configured attributes; one that only changes call() or adds
constructor arguments is its parent under its own class name.  Real Keras checks
``fixtures/keras2_mobilenet_own_depthwise.py`` layer by layer (tests/test_fixtures_oracle.py)."""

from __future__ import annotations

import textwrap

import pytest

from memlint.analysis import analyze_file, analyze_text
from memlint.config import Settings
from memlint.frontends.keras import analyze_source
from tests.conftest import FIXTURES

HEADER = textwrap.dedent("""
    import numpy as np
    from keras import backend as K
    from keras.layers import Conv2D, Dense, Input, InputSpec
    from keras.models import Model
""")


def layers_of(source: str) -> list:
    (model,) = analyze_text(HEADER + textwrap.dedent(source), "m.py", Settings()).models
    return [(layer.name, layer.type, layer.output_shape, layer.params)
            for layer in model.layers]


def test_a_subclass_that_builds_itself_reads_its_parents_attributes():
    rows = layers_of("""
        class DepthwiseConv2D(Conv2D):
            def __init__(self, kernel_size, strides=(1, 1), padding='valid',
                         depth_multiplier=1, use_bias=True, **kwargs):
                super(DepthwiseConv2D, self).__init__(filters=None, kernel_size=kernel_size,
                                                      strides=strides, padding=padding,
                                                      use_bias=use_bias, **kwargs)
                self.depth_multiplier = depth_multiplier

            def build(self, input_shape):
                channels = int(input_shape[3])
                self.depthwise_kernel = self.add_weight(
                    shape=(self.kernel_size[0], self.kernel_size[1], channels,
                           self.depth_multiplier), name='depthwise_kernel')
                if self.use_bias:
                    self.bias = self.add_weight(shape=(channels * self.depth_multiplier,),
                                                name='bias')
                self.input_spec = InputSpec(ndim=4, axes={3: channels})
                self.built = True

            def call(self, inputs):
                return K.depthwise_conv2d(inputs, self.depthwise_kernel)

            def compute_output_shape(self, input_shape):
                rows = (input_shape[1] + self.strides[0] - 1) // self.strides[0]
                cols = (input_shape[2] + self.strides[1] - 1) // self.strides[1]
                if self.padding == 'valid':
                    rows = (input_shape[1] - self.kernel_size[0] + self.strides[0]) \\
                        // self.strides[0]
                    cols = (input_shape[2] - self.kernel_size[1] + self.strides[1]) \\
                        // self.strides[1]
                return (input_shape[0], rows, cols, input_shape[3] * self.depth_multiplier)

        inputs = Input((16, 16, 4))
        x = DepthwiseConv2D(3, strides=2, padding='same', depth_multiplier=2)(inputs)
        x = DepthwiseConv2D((3, 3), use_bias=False, name='dw')(x)
        model = Model(inputs, x)
        """)
    assert rows[1:] == [("depthwise_conv2d", "DepthwiseConv2D", (None, 8, 8, 8), 3 * 3 * 4 * 2 + 8),
                        ("dw", "DepthwiseConv2D", (None, 6, 6, 8), 3 * 3 * 8)]


def test_a_subclass_that_only_changes_call_is_its_parent_under_its_own_name():
    source = HEADER + textwrap.dedent("""
        class ScaledConv2D(Conv2D):
            def __init__(self, filters, kernel_size, scale=1.0, **kwargs):
                super(ScaledConv2D, self).__init__(filters, kernel_size, **kwargs)
                self.scale = scale

            def call(self, inputs):
                return super(ScaledConv2D, self).call(inputs) * self.scale

        class Gated(Dense):
            def call(self, inputs):
                return K.sigmoid(super().call(inputs))

        inputs = Input((12, 12, 3))
        x = ScaledConv2D(8, 3, scale=0.5, strides=2, activation='relu')(inputs)
        x = ScaledConv2D(4, (1, 1), padding='same')(x)
        y = Gated(5)(x)
        model = Model(inputs, y)
        model.compile(optimizer='adam', loss='mse')
        model.fit(np.zeros((4, 12, 12, 3)), np.zeros((4, 5, 5, 5)), batch_size=4)
        """)
    report = analyze_text(source, "m.py", Settings())
    (model,) = report.models
    rows = [(layer.name, layer.type, layer.output_shape, layer.params, layer.kind)
            for layer in model.layers[1:]]
    assert rows == [("scaled_conv2d", "ScaledConv2D", (None, 5, 5, 8), 3 * 3 * 3 * 8 + 8, "Conv2D"),
                    ("scaled_conv2d_1", "ScaledConv2D", (None, 5, 5, 4), 8 * 4 + 4, "Conv2D"),
                    ("gated", "Gated", (None, 5, 5, 5), 4 * 5 + 5, "Dense")]
    assert not [d for d in report.diagnostics if d.code.startswith("MEM9")]
    # the memory model walks them as the registry classes they derive from
    plain = analyze_text(source.replace("ScaledConv2D(8, 3, scale=0.5,", "Conv2D(8, 3,")
                         .replace("ScaledConv2D(4,", "Conv2D(4,").replace("Gated(5)", "Dense(5)"),
                         "m.py", Settings())
    assert report.breakdowns[0].peak == plain.breakdowns[0].peak


def test_a_subclass_may_add_weights_to_its_parents_build():
    rows = layers_of("""
        class ScaledDense(Dense):
            def build(self, input_shape):
                super(ScaledDense, self).build(input_shape)
                self.scale = self.add_weight(shape=(self.units,), name='scale',
                                             trainable=False)

        inputs = Input((6,))
        model = Model(inputs, ScaledDense(4)(inputs))
        """)
    assert rows[1] == ("scaled_dense", "ScaledDense", (None, 4), 6 * 4 + 4 + 4)


SUBCLASS_INIT_WEIGHTS = """
    import math
    import keras
    from keras import layers

    class MultiHeadAttentionLSA(layers.MultiHeadAttention):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.tau = keras.Variable(math.sqrt(float(self._key_dim)), trainable=True)

    class ScaledDense(layers.Dense):
        def __init__(self, units, **kwargs):
            super().__init__(units, **kwargs)
            self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

    inputs = keras.Input((10, 16))
    x = MultiHeadAttentionLSA(num_heads=2, key_dim=8)(inputs, inputs)
    model = keras.Model(inputs, ScaledDense(4)(x))
"""


def test_weights_a_subclass_makes_in_its_init_are_its_own():
    # keras.io's ViT for small datasets: locality self-attention keeps a trainable
    # temperature, keras.Variable(sqrt(self._key_dim)), beside its parent's weights (one
    # parameter a layer short, 8 in the model)
    rows = layers_of(SUBCLASS_INIT_WEIGHTS)
    assert rows[1:] == [
        ("multi_head_attention_lsa", "MultiHeadAttentionLSA", (None, 10, 16), 1088 + 1),
        ("scaled_dense", "ScaledDense", (None, 10, 4), 16 * 4 + 4 + 1)]


@pytest.mark.oracle
def test_weights_a_subclass_makes_in_its_init_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, textwrap.dedent(SUBCLASS_INIT_WEIGHTS))


def test_input_spec_is_not_a_layer():
    result = analyze_source(HEADER + "spec = InputSpec(ndim=4)\n", "m.py")
    assert result.diagnostics == []


def test_mobilenet_fixture_with_its_own_depthwise_convolution():
    (model,) = analyze_file(str(FIXTURES / "keras2_mobilenet_own_depthwise.py"),
                            Settings()).models
    assert model.params == 83_050  # real Keras: the same (the oracle tier checks each layer)
    types = {layer.type for layer in model.layers}
    assert {"DepthwiseConv2D", "ScaledConv2D"} <= types
    assert all(layer.output_shape is not None for layer in model.layers)
