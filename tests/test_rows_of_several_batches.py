"""Operations that read a tensor of several batches row by row, and TensorFlow variables on a
layer (memlint.frontends.keras.batches.row_wise, memlint.frontends.keras.variables).

keras.io's VQ-VAE finds each position's nearest code: the encoder's (batch, 7, 7, 16) map is
reshaped to (-1, 16) rows (49 batches of rows), compared with the codebook by a matrix
product, reduced along the codes, one-hot encoded and reshaped back.  Its codebook is a
``tf.Variable``, which Keras 3 does not track (0 parameters, as real Keras reports).
"""

import pytest

from memlint.frontends.keras.batches import row_wise
from memlint.frontends.keras.tensor_ops import operation_shape
from memlint.frontends.keras.values import Array, Batches, Tensor
from memlint.frontends.keras.variables import Initializer, initial_value, initializer, variable
from tests.test_frontend_subclass import HEADER, _model_and_memory

QUANTIZERS = (
    "import tensorflow as tf\n"
    "from keras import ops\n"
    "class VectorQuantizer(layers.Layer):\n"
    "    def __init__(self, codes, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.codes, self.dim = codes, dim\n"
    "        init = tf.random_uniform_initializer()\n"
    "        self.embeddings = tf.Variable(\n"
    "            initial_value=init(shape=(dim, codes), dtype='float32'), trainable=True)\n"
    "    def call(self, x):\n"
    "        input_shape = tf.shape(x)\n"
    "        flat = tf.reshape(x, [-1, self.dim])\n"
    "        similarity = tf.matmul(flat, self.embeddings)\n"
    "        distances = (tf.reduce_sum(flat ** 2, axis=1, keepdims=True)\n"
    "                     + tf.reduce_sum(self.embeddings ** 2, axis=0) - 2 * similarity)\n"
    "        codes = tf.one_hot(tf.argmin(distances, axis=1), self.codes)\n"
    "        quantized = tf.matmul(codes, self.embeddings, transpose_b=True)\n"
    "        quantized = tf.reshape(quantized, input_shape)\n"
    "        return x + tf.stop_gradient(quantized - x)\n"
    "class OpsQuantizer(layers.Layer):\n"
    "    def build(self, input_shape):\n"
    "        self.codebook = self.add_weight(shape=(input_shape[-1], 32))\n"
    "    def call(self, x):\n"
    "        flat = ops.reshape(x, (-1, ops.shape(x)[-1]))\n"
    "        d = (ops.sum(flat ** 2, axis=1, keepdims=True) - 2 * ops.matmul(flat, self.codebook)\n"
    "             + ops.sum(self.codebook ** 2, axis=0))\n"
    "        q = ops.matmul(ops.one_hot(ops.argmin(d, axis=-1), 32), ops.transpose(self.codebook))\n"
    "        return x + ops.stop_gradient(ops.reshape(q, ops.shape(x)) - x)\n"
    "inputs = keras.Input((28, 28, 1))\n"
    "h = layers.Conv2D(16, 3, strides=4, padding='same')(inputs)\n"
    "h = VectorQuantizer(64, 16)(h)\n"
    "h = OpsQuantizer()(h)\n"
    "outputs = layers.Conv2DTranspose(1, 3, strides=4, padding='same')(h)\n"
    "model = keras.Model(inputs, outputs)\n"
    "model.compile('adam', 'mse')\n"
    "model.fit(np.zeros((64, 28, 28, 1)), np.zeros((64, 28, 28, 1)), batch_size=16)\n"
)


def test_vector_quantizers_are_sized_and_hold_every_positions_distances():
    graph, memory = _model_and_memory(QUANTIZERS)
    quantizers = graph.layers[2:4]
    assert [(n.name, n.output_shapes, n.unresolved, n.trainable_params) for n in quantizers] \
        == [("vector_quantizer", [(None, 7, 7, 16)], None, 0),  # the tf.Variable: untracked
            ("ops_quantizer", [(None, 7, 7, 16)], None, 16 * 32)]
    # the distances of all 49 positions of a sample to the codes are made inside each
    assert (None, 49 * 64) in quantizers[0].inner_shapes
    assert (None, 49 * 32) in quantizers[1].inner_shapes
    assert memory.complete and memory.batch_size == 16


@pytest.mark.oracle
def test_vector_quantizers_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + QUANTIZERS)


ROWS = Batches(Tensor((None, 16), producer=None), 49)


@pytest.mark.parametrize("name,args,kwargs,expected", [
    ("tensorflow.reduce_sum", [ROWS], {"axis": 1}, True),
    ("keras.ops.argmin", [ROWS], {"axis": -1}, True),
    ("keras.ops.one_hot", [ROWS, 8], {}, True),
    ("tensorflow.matmul", [ROWS, Tensor((16, 64))], {}, True),
    ("keras.ops.matmul", [ROWS, Array((16, 64))], {}, True),
    ("tensorflow.reduce_sum", [ROWS], {"axis": 0}, False),  # over the rows
    ("tensorflow.reduce_sum", [ROWS], {}, False),  # over everything
    ("tensorflow.argmin", [ROWS], {}, False),  # TensorFlow's default axis: the rows
    ("tensorflow.matmul", [ROWS, Tensor((16, 64))], {"transpose_a": True}, False),
    ("keras.ops.matmul", [ROWS, Tensor((None, 16))], {}, False),  # by a batch
    ("keras.ops.matmul", [Tensor((16, 16)), ROWS], {}, False),  # rows on the right
    ("keras.ops.transpose", [ROWS], {}, False),
])
def test_which_operations_read_rows_of_several_batches_row_by_row(name, args, kwargs,
                                                                  expected):
    assert row_wise(name, args, kwargs) is expected


def test_tensorflow_argmin_and_one_hot_take_tensorflow_arguments():
    x = Tensor((None, 5, 7))
    assert operation_shape("tensorflow.argmin", [x], {})[1] == (5, 7)  # axis 0 by default
    assert operation_shape("tensorflow.math.argmax", [x, 2], {})[1] == (None, 5)
    assert operation_shape("keras.ops.argmax", [x], {})[1] == ()  # Keras: flattened
    # on_value and off_value come before TensorFlow's axis
    assert operation_shape("tensorflow.one_hot", [Tensor((None, 5)), 10, 1.0, 0.0], {})[1] \
        == (None, 5, 10)
    assert operation_shape("tensorflow.one_hot", [Tensor((None, 5)), 10], {"axis": 1})[1] \
        == (None, 10, 5)


@pytest.mark.oracle
@pytest.mark.parametrize("name,args,kwargs", [
    ("argmin", [(3, 5, 7)], {}), ("math.argmax", [(3, 5, 7), 2], {}),
    ("one_hot", [(3, 5), 10, 1.0, 0.0], {}), ("one_hot", [(3, 5), 10], {"axis": 1}),
])
def test_tensorflow_argmin_and_one_hot_shapes_are_tensorflows(name, args, kwargs):
    tf = pytest.importorskip("tensorflow")
    fn = tf
    for part in name.split("."):
        fn = getattr(fn, part)
    made = fn(*(tf.zeros(a, "int32") if isinstance(a, tuple) else a for a in args), **kwargs)
    ours = operation_shape("tensorflow." + name,
                           [Tensor(a) if isinstance(a, tuple) else a for a in args], kwargs)
    assert ours[1] == tuple(made.shape)


def test_initializers_and_tensorflow_variables_are_constants_of_their_shape():
    # a tf.Variable is a constant tensor (no layer makes it), so what a layer's call()
    # computes from it runs through the operations' rules
    assert initializer("tensorflow.random_uniform_initializer") == \
        Initializer("tensorflow.random_uniform_initializer")
    assert initializer("keras.initializers.GlorotUniform") is not None
    assert initializer("keras.initializers.get") is None  # a lookup, not an initializer
    made = initial_value(Initializer("keras.initializers.HeNormal"), [(3, 4)], {})
    assert made == Array((3, 4), "float32")
    assert initial_value(Initializer("x"), [], {"shape": 5, "dtype": "float16"}) == \
        Array((5,), "float16")
    assert initial_value(Initializer("x"), ["shape"], {}).reason  # not known: Unknown
    assert variable([], {"initial_value": made, "trainable": True}) == Tensor((3, 4))
    assert variable([Tensor((None, 4))], {}).reason  # of a batch: not a constant
