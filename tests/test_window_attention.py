"""keras.io's Swin Transformer, cut down: windows folded into the batch axis, a relative
position bias gathered with ``ops.take`` from a ``keras.Variable`` index, the shifted
windows' mask built in ``build()`` from NumPy data with ``keras.ops`` and kept as a
non-trainable ``keras.Variable``, ``q @ k`` products, ``ops.roll`` and a patch merging that
concatenates a tuple of strided slices.  Expected values are real Keras 3's (the oracle test).
"""

import pytest

from memlint.frontends.keras.arrays import _meshgrid, keras_op
from memlint.frontends.keras.tensor_ops import operation_shape
from memlint.frontends.keras.values import Array, Tensor
from memlint.frontends.keras.variables import KerasVariable, keras_variable
from memlint.layers.base import LayerError, UnresolvedArgument
from tests.test_frontend_subclass import HEADER, _model_and_memory

SWIN = (
    "from keras import ops\n"
    "def window_partition(x, size):\n"
    "    _, height, width, channels = x.shape\n"
    "    x = ops.reshape(x, (-1, height // size, size, width // size, size, channels))\n"
    "    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))\n"
    "    return ops.reshape(x, (-1, size, size, channels))\n"
    "def window_reverse(windows, size, height, width, channels):\n"
    "    x = ops.reshape(windows, (-1, height // size, width // size, size, size, channels))\n"
    "    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))\n"
    "    return ops.reshape(x, (-1, height, width, channels))\n"
    "class WindowAttention(layers.Layer):\n"
    "    def __init__(self, dim, size, heads, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.size, self.heads = size, heads\n"
    "        self.scale = (dim // heads) ** -0.5\n"
    "        self.qkv = layers.Dense(dim * 3)\n"
    "        self.proj = layers.Dense(dim)\n"
    "        self.table = self.add_weight(shape=((2 * size - 1) ** 2, heads),\n"
    "                                     initializer=keras.initializers.Zeros())\n"
    "        coords = np.stack(np.meshgrid(np.arange(size), np.arange(size), indexing='ij'))\n"
    "        flat = coords.reshape(2, -1)\n"
    "        relative = (flat[:, :, None] - flat[:, None, :]).transpose([1, 2, 0])\n"
    "        relative[:, :, 0] += size - 1\n"
    "        relative[:, :, 1] += size - 1\n"
    "        relative[:, :, 0] *= 2 * size - 1\n"
    "        index = relative.sum(-1)\n"
    "        self.index = keras.Variable(initializer=index, shape=index.shape, dtype='int',\n"
    "                                    trainable=False)\n"
    "    def call(self, x, mask=None):\n"
    "        _, n, channels = x.shape\n"
    "        qkv = ops.reshape(self.qkv(x), (-1, n, 3, self.heads, channels // self.heads))\n"
    "        qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))\n"
    "        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]\n"
    "        attn = q @ ops.transpose(k, (0, 1, 3, 2))\n"
    "        bias = ops.take(self.table, ops.reshape(self.index, (-1,)), axis=0)\n"
    "        bias = ops.transpose(ops.reshape(bias, (n, n, -1)), (2, 0, 1))\n"
    "        attn = attn + ops.expand_dims(bias, axis=0)\n"
    "        if mask is not None:\n"
    "            windows = mask.shape[0]\n"
    "            extra = ops.cast(ops.expand_dims(ops.expand_dims(mask, axis=1), axis=0),\n"
    "                             'float32')\n"
    "            attn = ops.reshape(attn, (-1, windows, self.heads, n, n)) + extra\n"
    "            attn = ops.reshape(attn, (-1, self.heads, n, n))\n"
    "        attn = ops.softmax(attn, axis=-1)\n"
    "        out = ops.reshape(ops.transpose(attn @ v, (0, 2, 1, 3)), (-1, n, channels))\n"
    "        return self.proj(out)\n"
    "class SwinBlock(layers.Layer):\n"
    "    def __init__(self, dim, patches, heads, size, shift, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.patches, self.size, self.shift = patches, size, shift\n"
    "        self.norm = layers.LayerNormalization(epsilon=1e-5)\n"
    "        self.attn = WindowAttention(dim, size, heads)\n"
    "        self.mlp = keras.Sequential([layers.Dense(2 * dim, activation='gelu'),\n"
    "                                     layers.Dense(dim)])\n"
    "    def build(self, input_shape):\n"
    "        self.mask = None\n"
    "        if self.shift:\n"
    "            marks = np.zeros((1, self.patches, self.patches, 1))\n"
    "            cuts = (slice(0, -self.size), slice(-self.size, -self.shift),\n"
    "                    slice(-self.shift, None))\n"
    "            count = 0\n"
    "            for h in cuts:\n"
    "                for w in cuts:\n"
    "                    marks[:, h, w, :] = count\n"
    "                    count += 1\n"
    "            windows = window_partition(ops.convert_to_tensor(marks), self.size)\n"
    "            windows = ops.reshape(windows, [-1, self.size * self.size])\n"
    "            mask = ops.expand_dims(windows, axis=1) - ops.expand_dims(windows, axis=2)\n"
    "            mask = ops.where(mask != 0, -100.0, mask)\n"
    "            self.mask = keras.Variable(initializer=mask, shape=mask.shape,\n"
    "                                       dtype=mask.dtype, trainable=False)\n"
    "    def call(self, x):\n"
    "        _, n, channels = x.shape\n"
    "        h = ops.reshape(self.norm(x), (-1, self.patches, self.patches, channels))\n"
    "        if self.shift:\n"
    "            h = ops.roll(h, shift=[-self.shift, -self.shift], axis=[1, 2])\n"
    "        windows = ops.reshape(window_partition(h, self.size),\n"
    "                              (-1, self.size * self.size, channels))\n"
    "        windows = ops.reshape(self.attn(windows, mask=self.mask),\n"
    "                              (-1, self.size, self.size, channels))\n"
    "        h = window_reverse(windows, self.size, self.patches, self.patches, channels)\n"
    "        if self.shift:\n"
    "            h = ops.roll(h, shift=[self.shift, self.shift], axis=[1, 2])\n"
    "        x = x + ops.reshape(h, (-1, n, channels))\n"
    "        return x + self.mlp(x)\n"
    "class PatchMerging(layers.Layer):\n"
    "    def __init__(self, patches, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.patches = patches\n"
    "        self.linear = layers.Dense(2 * dim, use_bias=False)\n"
    "    def call(self, x):\n"
    "        _, _, c = x.shape\n"
    "        x = ops.reshape(x, (-1, self.patches, self.patches, c))\n"
    "        parts = (x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :], x[:, 0::2, 1::2, :],\n"
    "                 x[:, 1::2, 1::2, :])\n"
    "        x = ops.concatenate(parts, axis=-1)\n"
    "        return self.linear(ops.reshape(x, (-1, (self.patches // 2) ** 2, 4 * c)))\n"
    "inputs = keras.Input((64, 12))\n"
    "x = layers.Dense(32)(inputs)\n"
    "x = SwinBlock(32, 8, 4, 2, 0)(x)\n"
    "x = SwinBlock(32, 8, 4, 2, 1)(x)\n"
    "x = PatchMerging(8, 32)(x)\n"
    "model = keras.Model(inputs, layers.Dense(10)(layers.GlobalAveragePooling1D()(x)))\n"
    "model.compile('adamw', 'sparse_categorical_crossentropy')\n"
    "model.fit(np.zeros((64, 64, 12)), np.zeros((64,)), batch_size=16)\n"
)


def test_swin_blocks_are_sized_with_their_windows_and_variables():
    graph, memory = _model_and_memory(SWIN)
    blocks = [n for n in graph.layers if n.type in ("SwinBlock", "PatchMerging")]
    assert [(n.name, n.output_shapes, n.unresolved) for n in blocks] == [
        ("swin_block", [(None, 64, 32)], None), ("swin_block_1", [(None, 64, 32)], None),
        ("patch_merging", [(None, 16, 64)], None)]
    # the relative position index (4 x 4) of each block's attention, and the shifted
    # block's mask (16 windows of 4 x 4), are non-trainable weights, as Keras keeps them
    assert [n.non_trainable_params for n in blocks] == [16, 16 + 16 * 4 * 4, 0]
    # the window attention runs on 16 windows a sample: its call holds 16 batches
    attention = [n for n in blocks[0].inner_calls[0].nodes if n.type == "WindowAttention"]
    assert attention and attention[0].call_batches == [16]
    assert memory.complete and memory.batch_size == 16


@pytest.mark.oracle
def test_swin_blocks_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + SWIN)


@pytest.mark.parametrize("name,args,kwargs,expected", [
    ("keras.ops.take", [Tensor((9, 4)), Tensor((16,))], {"axis": 0}, (16, 4)),
    ("keras.ops.take", [Tensor((9, 4)), Tensor((2, 3))], {"axis": 1}, (9, 2, 3)),
    ("keras.ops.take", [Tensor((9, 4)), Tensor((5,))], {}, (5,)),  # of the flattened
    ("tensorflow.gather", [Tensor((None, 7, 4)), Tensor((3,))], {"axis": 1}, (None, 3, 4)),
    ("tensorflow.gather", [Tensor((10, 4)), Tensor((None,))], {}, (None, 4)),
    ("keras.ops.roll", [Tensor((None, 8, 8, 3))], {"shift": 1, "axis": 1}, (None, 8, 8, 3)),
    ("keras.ops.reshape", [Tensor((4, 4)), (-1,)], {}, (16,)),  # a constant: -1 is 16
    ("keras.ops.reshape", [Tensor((4, 4)), (2, -1)], {}, (2, 8)),
    ("keras.ops.concatenate", [(Tensor((None, 2, 3)), Tensor((None, 2, 5)))], {"axis": -1},
     (None, 2, 8)),
])
def test_take_gather_roll_and_reshapes_of_constants(name, args, kwargs, expected):
    assert operation_shape(name, args, kwargs)[1] == expected


def test_refused_takes_and_reshapes_raise():
    with pytest.raises(UnresolvedArgument):  # the flattened batch
        operation_shape("keras.ops.take", [Tensor((None, 4)), Tensor((5,))], {})
    with pytest.raises(LayerError):  # the indices' batch is not the params'
        operation_shape("tensorflow.gather", [Tensor((8, 4)), Tensor((2,))], {"batch_dims": 1})
    with pytest.raises(UnresolvedArgument):
        operation_shape("tensorflow.gather", [Tensor((8, 4)), Tensor((8, 2))],
                        {"batch_dims": "1"})
    with pytest.raises(LayerError):  # 16 values do not fill rows of 3
        operation_shape("keras.ops.reshape", [Tensor((4, 4)), (3, -1)], {})


@pytest.mark.oracle
@pytest.mark.parametrize("name,args,kwargs", [
    ("take", [(9, 4), (16,)], {"axis": 0}), ("take", [(9, 4), (2, 3)], {"axis": 1}),
    ("take", [(9, 4), (5,)], {}), ("roll", [(2, 8, 8, 3)], {"shift": 1, "axis": 1}),
    ("reshape", [(4, 4), (-1,)], {}), ("reshape", [(4, 4), (2, -1)], {}),
])
def test_take_roll_and_reshape_shapes_are_keras(name, args, kwargs):
    from tests.conftest import require_keras
    require_keras()
    import keras
    import numpy as np
    operands = [np.zeros(a, "int32") if isinstance(a, tuple) and i < 2 and not (
        name == "reshape" and i == 1) else a for i, a in enumerate(args)]
    made = getattr(keras.ops, name)(*operands, **kwargs)
    ours = [Tensor(a) if isinstance(a, tuple) and i < 2 and not (name == "reshape" and i == 1)
            else a for i, a in enumerate(args)]
    assert operation_shape("keras.ops." + name, ours, kwargs)[1] == tuple(made.shape)


def test_meshgrid_gives_each_input_its_axis():
    import numpy as np
    xs = [Array((2,), "int64"), Array((3,), "float64"), Array((2, 2), "float32")]
    for kwargs in ({}, {"indexing": "ij"}, {"indexing": "ij", "sparse": True},
                   {"sparse": True}):
        real = np.meshgrid(np.zeros(2, "int64"), np.zeros(3), np.zeros((2, 2), "float32"),
                           **kwargs)
        assert _meshgrid(xs, kwargs) == [Array(a.shape, str(a.dtype)) for a in real]
    assert _meshgrid(xs, {"indexing": "xyz"}).reason


def test_keras_ops_on_numpy_data_give_data_of_numpys_shape():
    marks = Array((1, 8, 8, 1), "float64")
    assert keras_op("convert_to_tensor", [marks], {}) == marks
    assert keras_op("cast", [marks, "float32"], {}) == Array((1, 8, 8, 1), "float32")
    assert keras_op("reshape", [marks, (-1, 4, 2, 4, 2, 1)], {}) == \
        Array((1, 4, 2, 4, 2, 1), "float64")
    assert keras_op("transpose", [Array((2, 3)), (1, 0)], {}) == Array((3, 2))
    assert keras_op("where", [Array((16, 4, 4), "bool"), -100.0, Array((16, 4, 4), "float64")],
                    {}) == Array((16, 4, 4), "float64")
    assert keras_op("sort", [marks], {}).reason  # not evaluated: Unknown


def test_keras_variables_become_weights_of_the_layer_that_keeps_them():
    made = keras_variable([], {"initializer": Array((4, 4), "int64"), "trainable": False})
    assert isinstance(made, KerasVariable) and made.weight.shape == (4, 4) \
        and not made.weight.trainable
    assert keras_variable(["zeros"], {"shape": 5}).weight.shape == (5,)
    assert keras_variable(["zeros"], {}).reason  # no shape: Unknown
    assert keras_variable([Array((2,))], {"trainable": "yes"}).reason


def test_operators_on_tensors_are_keras_operations():
    """``q @ k`` is ``ops.matmul``, ``scores > 0`` ``ops.greater``: Keras's tensors define
    them (the second was not sized, the first not modelled)."""
    from memlint.frontends.keras import analyze_source
    source = HEADER + (
        "from keras import ops\n"
        "class Gate(layers.Layer):\n"
        "    def call(self, x):\n"
        "        scores = x @ ops.transpose(x, (0, 2, 1))\n"
        "        keep = ops.cast(scores > 0, 'float32')\n"
        "        return (keep * scores) @ x\n"
        "inputs = keras.Input((6, 4))\n"
        "model = keras.Model(inputs, Gate()(inputs))\n")
    (graph,) = analyze_source(source, "f.py").models
    gate = graph.layers[1]
    assert gate.output_shapes == [(None, 6, 4)] and gate.unresolved is None
    assert operation_shape("keras.ops.greater", [Tensor((None, 6, 6)), 0], {})[0] == "greater"
