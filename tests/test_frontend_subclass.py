"""Layer and Model subclasses defined in the analysed file (memlint.frontends.keras.classes).

Expected values are what real Keras 3 reports (checked with tensorflow-cpu 2.20 / Keras 3);
the fixtures ``fixtures/subclass_*.py`` are compared with real Keras by the oracle tests.
"""

import pytest

from memlint.frontends.keras import analyze_source

HEADER = (
    "import keras\n"
    "import numpy as np\n"
    "from keras import layers\n"
)


def _report(source: str):
    """memlint's analysis of ``HEADER + source`` with the default settings."""
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    return analyze_text(HEADER + source, "f.py", Settings())

SCALE = (
    "class Scale(layers.Layer):\n"
    "    def build(self, input_shape):\n"
    "        self.w = self.add_weight(shape=(input_shape[-1],), trainable=True)\n"
    "        self.c = self.add_weight(shape=(3,), trainable=False)\n"
    "    def call(self, x):\n"
    "        return x * self.w\n"
)

MODEL = (
    "class MyModel(keras.Model):\n"
    "    def __init__(self, n=2, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.conv = layers.Dense(8)\n"
    "        self.blocks = []\n"
    "        for i in range(n):\n"
    "            self.blocks.append(layers.Dense(4))\n"
    "        self.s = Scale()\n"
    "        self.out = layers.Dense(2)\n"
    "    def call(self, x, training=None):\n"
    "        x = self.conv(x)\n"
    "        for b in self.blocks:\n"
    "            x = b(x)\n"
    "        return self.out(self.s(x))\n"
)


def analyze(body: str):
    return analyze_source(HEADER + body, "snippet.py")


def models(body: str) -> dict:
    return {graph.variable: graph for graph in analyze(body).models}


def summary(graph) -> list:
    return [(layer.name, layer.type, layer.output_shape, layer.trainable_params,
             layer.non_trainable_params) for layer in graph.layers]


def test_custom_layer_with_add_weight_is_one_layer_of_its_class_name():
    got = models(SCALE + "x = keras.Input((4,))\n"
                         "m = keras.Model(x, layers.Dense(2)(Scale()(x)))\n")
    assert summary(got["m"]) == [
        ("input_layer", "InputLayer", (None, 4), 0, 0),
        ("scale", "Scale", (None, 4), 4, 3),
        ("dense", "Dense", (None, 2), 10, 0)]


def test_subclassed_model_called_on_an_input():
    got = models(SCALE + MODEL + "m1 = MyModel()\nm1(keras.Input((6,)))\n")
    graph = got["m1"]
    assert graph.name == "my_model" and graph.kind == "MyModel"
    # model.layers: attribute assignment order in __init__, lists flattened
    assert summary(graph) == [
        ("dense", "Dense", (None, 8), 56, 0),
        ("dense_1", "Dense", (None, 4), 36, 0),
        ("dense_2", "Dense", (None, 4), 20, 0),
        ("scale", "Scale", (None, 4), 4, 3),
        ("dense_3", "Dense", (None, 2), 10, 0)]
    assert graph.params == 129


def test_subclassed_model_called_on_data_or_fitted():
    got = models(SCALE + MODEL + "m2 = MyModel(n=3)\n"
                                 "m2(np.zeros((4, 5)))\n"
                                 "m3 = MyModel(name='third')\n"
                                 "m3.compile('adam', 'mse')\n"
                                 "m3.fit(np.zeros((10, 7)), np.zeros((10, 2)), batch_size=2)\n")
    assert [layer.name for layer in got["m2"].layers] == [
        "dense", "dense_1", "dense_2", "dense_3", "scale", "dense_4"]
    assert got["m2"].params == 141
    assert got["m3"].name == "third"
    assert got["m3"].params == 137
    assert got["m3"].layers[0].output_shape == (None, 8)
    assert got["m3"].setup.batch_size == 2


def test_build_traces_call_on_the_shape():
    # Keras 3 Model.build() of a subclassed model leaves its weights unbuilt until the first
    # call (fit); memlint counts the weights the first call will make
    got = models(SCALE + MODEL + "m = MyModel()\nm.build((None, 6))\n")
    assert got["m"].input_shapes == [(None, 6)]
    assert got["m"].params == 129


def test_model_never_called_has_unknown_shapes_and_a_note():
    result = analyze(SCALE + MODEL + "m = MyModel()\n")
    graph = result.models[0]
    assert all(layer.output_shape is None for layer in graph.layers)
    assert any(d.code == "MEM900" and "never called" in d.message
               for d in result.diagnostics)


def test_compute_output_shape_is_honoured_and_init_weights_count():
    got = models(
        "class Pool(layers.Layer):\n"
        "    def __init__(self, tokens, features, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.tokens = tokens\n"
        "        self.q = self.add_weight(shape=(tokens, features))\n"
        "    def call(self, x):\n"
        "        return keras.ops.einsum('bsf,tf->btf', x, self.q)\n"
        "    def compute_output_shape(self, input_shape):\n"
        "        return (input_shape[0], self.tokens, input_shape[-1])\n"
        "x = keras.Input((10, 8))\n"
        "m = keras.Model(x, Pool(3, 8, name='pool')(x))\n")
    assert summary(got["m"])[1] == ("pool", "Pool", (None, 3, 8), 24, 0)


def test_sublayers_naming_order_and_frozen_custom_layer():
    got = models(
        "class Block(layers.Layer):\n"
        "    def __init__(self, units, **kwargs):\n"
        "        super(Block, self).__init__(**kwargs)\n"
        "        self.d = layers.Dense(units)\n"
        "        self.bn = layers.BatchNormalization()\n"
        "    def call(self, x, training=None):\n"
        "        return self.bn(self.d(x), training=training)\n"
        "class MLPBlock(Block):\n"
        "    pass\n"
        "first = Block(4)\n"
        "first.trainable = False\n"
        "s = keras.Sequential([keras.Input((3,)), first, MLPBlock(5), layers.Dense(1)])\n")
    assert summary(got["s"]) == [
        ("block", "Block", (None, 4), 0, 32),
        ("mlp_block", "MLPBlock", (None, 5), 35, 10),
        ("dense_2", "Dense", (None, 1), 6, 0)]


def test_operations_inside_call_take_no_names():
    got = models(
        "class Res(layers.Layer):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.d = layers.Dense(4)\n"
        "    def call(self, x):\n"
        "        return x + self.d(x)\n"
        "x = keras.Input((4,))\n"
        "y = Res()(x)\n"
        "m = keras.Model(x, y + x)\n")
    assert [layer.name for layer in got["m"].layers] == ["input_layer", "res"]
    assert got["m"].params == 20


def test_ops_shape_and_arange_inside_call():
    got = models(
        "class PosEmb(layers.Layer):\n"
        "    def __init__(self, n, d, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.pos = layers.Embedding(n, d)\n"
        "    def call(self, x):\n"
        "        length = keras.ops.shape(x)[1]\n"
        "        return x + self.pos(keras.ops.arange(0, length, 1))\n"
        "x = keras.Input((12, 6))\n"
        "m = keras.Model(x, PosEmb(12, 6)(x))\n")
    assert summary(got["m"])[1] == ("pos_emb", "PosEmb", (None, 12, 6), 72, 0)


def test_plain_classes_are_config_objects_and_other_classes_not_evaluated():
    result = analyze("class Config(object):\n    units = 3\n"
                     "class Point(tuple):\n    pass\n"
                     "m = keras.Sequential([keras.Input((2,)), layers.Dense(Config.units)])\n")
    assert [(d[0], d[1]) for d in result.definitions if d[0] == "class"] == [("class", "Point")]
    (model,) = result.models
    assert model.layers[-1].output_shape == (None, 3)


def test_class_attributes_properties_and_activations_kept_inside():
    result = analyze(
        "class Block(layers.Layer):\n"
        "    units = 6\n"
        "    @property\n"
        "    def width(self):\n"
        "        return self.units * 2\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.a = layers.Dense(self.width)\n"
        "        self.b = layers.Dense(self.units)\n"
        "    def call(self, x):\n"
        "        return self.b(self.a(x))\n"
        "x = keras.Input((3,))\n"
        "m = keras.Model(x, Block()(x))\n")
    block = result.models[0].layers[1]
    assert (block.name, block.output_shape, block.trainable_params) == (
        "block", (None, 6), 3 * 12 + 12 + 12 * 6 + 6)
    assert block.inner_shapes == [(None, 12)]  # the hidden Dense output, kept for backward


def test_models_inside_a_subclassed_model_and_self_recursion():
    result = analyze(
        "class Inner(keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.d = layers.Dense(2)\n"
        "    def call(self, x):\n"
        "        return self.d(x)\n"
        "class Outer(keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.inner = Inner()\n"
        "        self.head = keras.Sequential([layers.Dense(3)])\n"
        "    def call(self, x):\n"
        "        return self.head(self.inner(x))\n"
        "class Loop(layers.Layer):\n"
        "    def call(self, x):\n"
        "        return self(x)\n"
        "outer = Outer()\n"
        "outer(np.zeros((2, 5)))\n"
        "x = keras.Input((3,))\n"
        "m = keras.Model(x, Loop()(x))\n")
    assert result.internal_errors == []
    got = {graph.variable: graph for graph in result.models}
    assert set(got) == {"outer", "m"}
    # a first call on a numpy batch of 2 builds with that batch, as Keras records it
    assert summary(got["outer"]) == [("inner", "Inner", (2, 2), 12, 0),
                                     ("sequential", "Sequential", (2, 3), 9, 0)]
    assert got["m"].layers[1].output_shape is None  # recursion stops at the depth cap


def test_class_defined_inside_a_function_sees_its_names():
    got = models(
        "def make(units):\n"
        "    class Head(layers.Layer):\n"
        "        def __init__(self, **kwargs):\n"
        "            super().__init__(**kwargs)\n"
        "            self.d = layers.Dense(units)\n"
        "        def call(self, x):\n"
        "            return self.d(x)\n"
        "    x = keras.Input((4,))\n"
        "    return keras.Model(x, Head()(x))\n"
        "m = make(3)\n")
    assert summary(got["m"])[1] == ("head", "Head", (None, 3), 15, 0)


def test_freezing_a_subclassed_model_freezes_its_layers():
    got = models(SCALE + MODEL + "m = MyModel()\nm(keras.Input((6,)))\nm.trainable = False\n")
    assert [(layer.trainable_params, layer.non_trainable_params) for layer in got["m"].layers] \
        == [(0, 56), (0, 36), (0, 20), (0, 7), (0, 10)]


# Keras 3 ``Tracker.track`` (keras/src/utils/tracking.py) on ``self.attr = value``: a layer
# joins ``model.layers`` the first time it is seen; a list or dict becomes a tracking copy
# whose later append / item assignment track then; a replaced attribute's old layer stays.
TRACKING = (
    "class Net(keras.Model):\n"
    "    def __init__(self, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.a = layers.Dense(1, name='a')\n"
    "        self.convs = []\n"
    "        self.pools = {}\n"
    "        for i in range(2):\n"
    "            self.convs.append(layers.Dense(1, name=f'c{i}'))\n"
    "            self.pools[f'p{i}'] = layers.Dense(1, name=f'p{i}')\n"
    "        self.a = layers.Dense(1, name='a2')\n"
    "        self.again = self.convs[0]\n"
    "        alias = []\n"
    "        self.alias = alias\n"
    "        alias.append(layers.Dense(1, name='not_tracked'))\n"
    "        self.nested = [[layers.Dense(1, name='n0')], (layers.Dense(1, name='t0'),)]\n"
    "        self.nested[0].append(layers.Dense(1, name='n1'))\n"
    "        self.last = layers.Dense(1, name='last')\n"
    "    def call(self, x):\n"
    "        return self.last(x)\n"
    "net = Net()\n"
    "net(keras.Input((3,)))\n"
)


def test_layers_are_listed_in_keras_tracking_order():
    got = models(TRACKING)
    assert [layer.name for layer in got["net"].layers] == [
        "a", "c0", "p0", "c1", "p1", "a2", "n0", "t0", "n1", "last"]


DICT_OUT = (
    "class Heads(keras.Model):\n"
    "    def __init__(self, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.trunk = layers.Dense(4)\n"
    "        self.heads = {t: layers.Dense(n, name=t) for t, n in (('b', 2), ('a', 3))}\n"
    "    def call(self, x):\n"
    "        h = self.trunk(x)\n"
    "        return {t: head(h) for t, head in self.heads.items()}\n"
    "class Pair(keras.Model):\n"
    "    def __init__(self, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.d = layers.Dense(5)\n"
    "    def call(self, x):\n"
    "        return {'x': x, 'y': self.d(x)}\n"
    "heads = Heads()\n"
    "heads(keras.Input(shape=(3,)))\n"
    "pair = Pair()\n"
    "pair(keras.Input(shape=(2,)))\n"
)


def test_call_may_return_a_dict_of_tensors():
    result = analyze(DICT_OUT)
    got = {graph.variable: graph for graph in result.models}
    assert summary(got["heads"]) == [
        ("dense", "Dense", (None, 4), 16, 0),
        ("b", "Dense", (None, 2), 10, 0),
        ("a", "Dense", (None, 3), 15, 0)]
    assert summary(got["pair"]) == [("dense_1", "Dense", (None, 5), 15, 0)]
    assert not [d for d in result.diagnostics if d.code.startswith("MEM9")]



def test_first_call_on_a_numpy_batch_keeps_its_batch_size():
    # Keras runs the call eagerly and records the real shapes: (2, 4), not (None, 4)
    got = models(
        "class M(keras.Model):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.d = layers.Dense(4)\n"
        "        self.e = layers.Dense(2)\n"
        "    def call(self, x):\n"
        "        return self.e(self.d(x))\n"
        "m = M()\n"
        "m(np.zeros((2, 3)))\n")
    assert got["m"].input_shapes == [(2, 3)]
    assert summary(got["m"]) == [("dense", "Dense", (2, 4), 16, 0),
                                 ("dense_1", "Dense", (2, 2), 10, 0)]


def test_first_call_on_a_dict_of_inputs():
    result = analyze(
        "class M(keras.Model):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.d = layers.Dense(4)\n"
        "        self.c = layers.Concatenate()\n"
        "    def call(self, inputs):\n"
        "        return self.d(self.c([inputs['a'], inputs['b']]))\n"
        "m = M()\n"
        "m({'b': keras.Input(shape=(2,)), 'a': keras.Input(shape=(3,))})\n")
    assert summary(result.models[0]) == [("dense", "Dense", (None, 4), 24, 0),
                                         ("concatenate", "Concatenate", (None, 5), 0, 0)]
    assert not [d for d in result.diagnostics if d.code.startswith("MEM9")]


def test_time_distributed_of_a_model_or_of_a_layer_class():
    # Keras: a model inside TimeDistributed owns its weights; a Layer subclass is built with
    # its build() alone (the Conv2D made in __init__ stays unbuilt) and its per-step shape
    # comes from compute_output_shape, call() is not run
    result = analyze(
        "def encoder():\n"
        "    frame = keras.Input(shape=(8, 8, 3))\n"
        "    x = layers.Conv2D(4, 3)(frame)\n"
        "    return keras.Model(frame, layers.GlobalAveragePooling2D()(x), name='enc')\n"
        "class Frame(layers.Layer):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.conv = layers.Conv2D(4, 3)\n"
        "        self.pool = layers.GlobalAveragePooling2D()\n"
        "    def build(self, input_shape):\n"
        "        self.scale = self.add_weight(shape=(input_shape[-1],))\n"
        "    def call(self, x):\n"
        "        return self.pool(self.conv(x))\n"
        "    def compute_output_shape(self, input_shape):\n"
        "        return (input_shape[0], 4)\n"
        "clips = keras.Input(shape=(5, 8, 8, 3))\n"
        "a = layers.TimeDistributed(encoder(), name='td_model')(clips)\n"
        "b = layers.TimeDistributed(Frame(), name='td_layer')(clips)\n"
        "video = keras.Model(clips, layers.Concatenate()([a, b]))\n")
    got = {graph.variable: graph for graph in result.models}
    assert summary(got["video"]) == [
        ("input_layer", "InputLayer", (None, 5, 8, 8, 3), 0, 0),
        ("td_model", "TimeDistributed", (None, 5, 4), 112, 0),
        ("td_layer", "TimeDistributed", (None, 5, 4), 3, 0),
        ("concatenate", "Concatenate", (None, 5, 8), 0, 0)]
    assert not [d for d in result.diagnostics if d.code in ("MEM900", "MEM901")]


def test_time_distributed_layer_class_needs_compute_output_shape():
    # Keras raises NotImplementedError when the wrapped layer has no compute_output_shape
    result = analyze(
        "class Frame(layers.Layer):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.conv = layers.Conv2D(4, 3)\n"
        "    def call(self, x):\n"
        "        return self.conv(x)\n"
        "clips = keras.Input(shape=(5, 8, 8, 3))\n"
        "m = keras.Model(clips, layers.TimeDistributed(Frame())(clips))\n")
    errors = [d.message for d in result.diagnostics if d.code == "MEM901"]
    assert errors and "compute_output_shape" in errors[0] and len(errors[0]) < 300


def test_operations_inside_call_keep_only_what_their_backward_reads():
    # a self-attention written with operations on the layer's own weight: the matrix
    # products keep their operands (q and its transpose, the probabilities and q again),
    # softmax its input and output (Keras's softmax on JAX recomputes exp from its input);
    # the raw product (only divided by a constant), the last product (only shifted by a
    # constant) and the output are not kept
    result = analyze(
        "from keras import ops\n"
        "class Attn(layers.Layer):\n"
        "    def build(self, input_shape):\n"
        "        self.w = self.add_weight(shape=(input_shape[-1], 8))\n"
        "    def call(self, x):\n"
        "        q = ops.matmul(x, self.w)\n"
        "        k = ops.transpose(q, (0, 2, 1))\n"
        "        s = ops.matmul(q, k) / 4.0\n"
        "        p = ops.softmax(s)\n"
        "        return ops.matmul(p, q) + 1.0\n"
        "x = keras.Input((5, 3))\n"
        "m = keras.Model(x, Attn()(x))\n")
    attn = result.models[0].layers[1]
    assert attn.output_shape == (None, 5, 8)
    assert attn.inner_shapes == [(None, 5, 8), (None, 8, 5), (None, 5, 5), (None, 5, 5)]


def test_operations_inside_call_by_what_their_backward_reads():
    # gelu keeps its input and one product of its size; 2 * x and a transpose keep nothing;
    # x * y keeps both; a layer called inside keeps what it reads
    result = analyze(
        "from keras import ops\n"
        "class Mix(layers.Layer):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.d = layers.Dense(4)\n"
        "    def call(self, x):\n"
        "        a = ops.gelu(x * 2)\n"
        "        b = ops.transpose(a, (0, 2, 1))\n"
        "        c = ops.sigmoid(b) * ops.tanh(b)\n"
        "        return self.d(ops.transpose(c, (0, 2, 1)))\n"
        "x = keras.Input((5, 3))\n"
        "m = keras.Model(x, Mix()(x))\n")
    mix = result.models[0].layers[1]
    assert mix.output_shape == (None, 5, 4)
    assert mix.inner_shapes == [(None, 5, 3), (None, 5, 3), (None, 3, 5), (None, 3, 5),
                                (None, 5, 3)]


def test_keras_io_patches_layer_with_extract_patches():
    # keras.io's ViT example: patches cut by keras.ops.image.extract_patches, reshaped with
    # the batch size read from ops.shape (None in the symbolic call), as real Keras gives
    result = analyze(
        "from keras import ops\n"
        "class Patches(layers.Layer):\n"
        "    def __init__(self, patch_size, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.patch_size = patch_size\n"
        "    def call(self, images):\n"
        "        batch_size = ops.shape(images)[0]\n"
        "        patches = ops.image.extract_patches(images, size=self.patch_size)\n"
        "        n = patches.shape[1] * patches.shape[2]\n"
        "        return ops.reshape(patches, (batch_size, n, patches.shape[-1]))\n"
        "x = keras.Input((32, 32, 3))\n"
        "m = keras.Model(x, layers.Dense(8)(Patches(4)(x)))\n")
    layers_ = result.models[0].layers
    assert [layer.output_shape for layer in layers_[1:]] == [(None, 64, 48), (None, 64, 8)]


SPREAD = (
    "from keras import ops\n"
    "class Gate(layers.Layer):\n"
    "    def __init__(self, units, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.proj = layers.Dense(units)\n"
    "    def call(self, x, context):\n"
    "        return self.proj(x) * context\n"
    "class Scaled(layers.Layer):\n"
    "    def build(self, input_shape):\n"
    "        self.w = self.add_weight(shape=(input_shape[-1],), initializer='ones')\n"
    "    def call(self, x, scale):\n"
    "        return x * self.w * scale\n"
    "class EndpointLoss(layers.Layer):\n"
    "    def call(self, targets, predictions):\n"
    "        self.add_loss(ops.mean(ops.square(targets - predictions)))\n"
    "        return predictions\n"
    "x = keras.Input(shape=(8,), name='features')\n"
    "c = keras.Input(shape=(4,), name='context')\n"
    "s = keras.Input(shape=(1,), name='scale')\n"
    "t = keras.Input(shape=(4,), name='targets')\n"
    "h = Gate(4, name='gate')(x, c)\n"
    "h2 = Gate(4, name='gate_kw')(x, context=c)\n"
    "scaled = Scaled(name='scaled')(x, s)\n"
    "merged = layers.Concatenate()([layers.Add()([h, h2]), scaled])\n"
    "out = EndpointLoss(name='endpoint')(layers.Dense(12)(t), merged)\n"
    "model = keras.Model([x, c, s, t], out)\n"
    "model.compile(optimizer='adam')\n"
    "model.fit([np.zeros((64, 8)), np.zeros((64, 4)), np.zeros((64, 1)), np.zeros((64, 4))],\n"
    "          batch_size=16)\n"
)


def test_layer_class_called_on_several_tensors_gets_them_as_arguments():
    # Keras hands call() every argument: CTC-style loss layers take (labels, predictions),
    # a required keyword tensor is passed by name, and build() sees the first tensor's shape
    result = analyze(SPREAD)
    got = {row[0]: row[1:] for row in summary(result.models[0])}
    assert got["gate"] == got["gate_kw"] == ("Gate", (None, 4), 36, 0)
    assert got["scaled"] == ("Scaled", (None, 8), 8, 0)
    assert got["endpoint"] == ("EndpointLoss", (None, 12), 0, 0)
    assert result.models[0].params == 140
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM900")]


def test_arguments_that_do_not_match_call_are_reported_at_the_call_site():
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + 
        "class Pair(layers.Layer):\n"
        "    def call(self, a, b, c):\n"
        "        return a + b\n"
        "x = keras.Input(shape=(8,))\n"
        "m = keras.Model(x, Pair()(x))\n", "snippet.py", Settings())
    notes = [d for d in result.diagnostics if "do not match" in d.message]
    assert notes and all(d.line == 8 for d in notes), \
        [(d.line, d.message) for d in notes]


def test_input_of_open_size_that_no_layer_sizes_leaves_no_verdict():
    # the labels of a CTC-style loss layer: (None, None), read only by the layer's loss, fed
    # from something memlint cannot size; their bytes are part of the batch, so the estimate
    # is incomplete, not "fits"
    source = SPREAD.replace("t = keras.Input(shape=(4,), name='targets')",
                            "t = keras.Input(shape=(None,), name='targets')").replace(
        "layers.Dense(12)(t)", "t").replace("np.zeros((64, 4))],", "load_labels()],")
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + source, "snippet.py", Settings())
    mem005 = [d for d in result.diagnostics if d.code == "MEM005"]
    assert mem005 and "targets" in mem005[0].message, \
        [(d.code, d.message) for d in result.diagnostics]


@pytest.mark.oracle
def test_layer_class_called_on_several_tensors_matches_keras(tmp_path):
    from memlint.analysis import analyze_file
    from memlint.config import Settings
    from tests.conftest import model_matches_keras
    path, expected = model_matches_keras(tmp_path, HEADER + SPREAD)
    graph = analyze_file(str(path), Settings()).models[0]
    assert graph.setup.batch_size == expected["fed"]["model"]["batch_size"] == 16


def test_keyword_only_tensor_of_call_is_passed_by_name():
    result = analyze(
        "class Join(layers.Layer):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.dense = layers.Dense(4)\n"
        "    def call(self, x, *, context, scale=None):\n"
        "        return self.dense(x) + context\n"
        "x = keras.Input(shape=(8,))\n"
        "y = keras.Input(shape=(4,))\n"
        "m = keras.Model([x, y], Join()(x, context=y, scale=y))\n")
    assert summary(result.models[0])[-1] == ("join", "Join", (None, 4), 36, 0)


# keras.io's positional embedding (its sequence length taken from the input)
POSITIONAL_CLASS = (
    "from keras import ops\n"
    "class PositionalEmbedding(layers.Layer):\n"
    "    def __init__(self, length, vocab, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.tokens = layers.Embedding(vocab, dim)\n"
    "        self.positions = layers.Embedding(length, dim)\n"
    "    def call(self, inputs):\n"
    "        length = ops.shape(inputs)[-1]\n"
    "        return self.tokens(inputs) + self.positions(ops.arange(0, length, 1))\n"
)
POSITIONAL_OPEN = POSITIONAL_CLASS + (
    "tokens = keras.Input(shape=(None,), dtype='int64', name='tokens')\n"
    "model = keras.Model(tokens, layers.Dense(4)(PositionalEmbedding(20, 1000, 16)(tokens)))\n"
)


def test_arange_to_a_symbolic_length_is_of_that_length():
    # keras.io's PositionalEmbedding on sequences of open length: (None, None, 16), not a
    # zero-length sequence (arange(0, None) was taken as arange(0))
    got = summary(analyze(POSITIONAL_OPEN).models[0])
    assert got[1] == ("positional_embedding", "PositionalEmbedding", (None, None, 16),
                      16_320, 0)


@pytest.mark.oracle
def test_arange_to_a_symbolic_length_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + POSITIONAL_OPEN)


# keras.io's knowledge distillation: the teacher runs in the distiller's compute_loss(), not
# in call(); compile() is the distiller's own and hands the optimizer on to Keras's
DISTILLER = (
    "from keras import ops\n"
    "class Distiller(keras.Model):\n"
    "    def __init__(self, student, teacher):\n"
    "        super().__init__()\n"
    "        self.teacher = teacher\n"
    "        self.student = student\n"
    "    def compile(self, optimizer, student_loss_fn, temperature=3):\n"
    "        super().compile(optimizer=optimizer)\n"
    "        self.student_loss_fn = student_loss_fn\n"
    "        self.temperature = temperature\n"
    "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,\n"
    "                     allow_empty=False):\n"
    "        teacher_pred = self.teacher(x, training=False)\n"
    "        soft = ops.softmax(teacher_pred / self.temperature, axis=1)\n"
    "        return self.student_loss_fn(y, y_pred) + ops.mean(\n"
    "            ops.square(soft - ops.softmax(y_pred / self.temperature, axis=1)))\n"
    "    def call(self, x):\n"
    "        return self.student(x)\n"
    "teacher = keras.Sequential([keras.Input(shape=(12, 12, 1)), layers.Conv2D(32, 3),\n"
    "                            layers.Flatten(), layers.Dense(10)], name='teacher')\n"
    "student = keras.Sequential([keras.Input(shape=(12, 12, 1)), layers.Conv2D(4, 3),\n"
    "                            layers.Flatten(), layers.Dense(10)], name='student')\n"
    "model = Distiller(student=student, teacher=teacher)\n"
    "model.compile(optimizer=keras.optimizers.SGD(),\n"
    "              student_loss_fn=keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n"
    "model.fit(np.zeros((16, 12, 12, 1)), np.zeros((16,)), batch_size=8, epochs=1)\n"
)


def test_a_model_called_in_compute_loss_runs_in_the_step():
    # the teacher was "never called in call()": its size unknown, the distiller without an
    # estimate (MEM005); it runs in the step on the data the student gets
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + DISTILLER, "distill.py", Settings(gpu="1GiB"))
    graph = result.models[0]
    assert [(n.name, n.output_shapes) for n in graph.layers] == [
        ("teacher", [(None, 10)]), ("student", [(None, 10)])]
    assert graph.params == (9 * 32 + 32 + 10 * 10 * 32 * 10 + 10) + (
        9 * 4 + 4 + 10 * 10 * 4 * 10 + 10)
    assert graph.setup.optimizer.name == "sgd"  # the distiller's compile() passes it on
    assert graph.setup.batch_size == 8
    assert not [d for d in result.diagnostics if d.code == "MEM005"], \
        [(d.code, d.message) for d in result.diagnostics]


@pytest.mark.oracle
def test_a_model_called_in_compute_loss_matches_keras(tmp_path):
    # the oracle does not run fit(), so Keras never calls the teacher: its output shape is
    # the teacher's own (a model of the script), the rest as Keras reports the distiller
    from tests.conftest import keras_script_result, require_keras
    from tests.test_fixtures_oracle import memlint_models
    require_keras()
    path = tmp_path / "model.py"
    path.write_text(HEADER + DISTILLER)
    expected = keras_script_result(path)["models"]
    got = memlint_models(path)["model"]
    keras_layers = expected["model"]["layers"]
    assert keras_layers[0]["output_shape"] is None
    keras_layers[0]["output_shape"] = expected["teacher"]["layers"][-1]["output_shape"]
    assert got["layers"] == keras_layers
    assert got["total"] == expected["model"]["total"]


def test_a_compile_of_its_own_passing_no_optimizer_gives_keras_default():
    # a compile() of its own calling super().compile() with no optimizer: Keras's own step
    # applies Keras's default, RMSprop (one slot; it was an assumed Adam)
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    source = DISTILLER.replace("super().compile(optimizer=optimizer)", "super().compile()")
    graph = analyze_text(HEADER + source, "distill.py", Settings()).models[0]
    assert graph.setup.optimizer.name == "rmsprop"
    assert graph.setup.optimizer.source.startswith("Keras's default: compile() at line ")


@pytest.mark.oracle
def test_a_compile_of_its_own_passing_no_optimizer_matches_keras():
    from tests.conftest import require_keras
    require_keras()
    import keras
    class Own(keras.Model):
        def compile(self, optimizer, loss):
            super().compile()
            self.given = optimizer
    model = Own()
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    assert type(model.optimizer).__name__ == "RMSprop"


# keras.io's WGAN-GP: compile() of its own keeps the two networks' optimizers, hands none to
# Keras, and train_step() applies them
GAN = (
    "import tensorflow as tf\n"
    "g = keras.Sequential([keras.Input(shape=(8,)), layers.Dense(64), layers.Dense(16)], name='g')\n"
    "d = keras.Sequential([keras.Input(shape=(16,)), layers.Dense(32), layers.Dense(1)], name='d')\n"
    "class GAN(keras.Model):\n"
    "    def __init__(self, d, g):\n"
    "        super().__init__()\n"
    "        self.d, self.g = d, g\n"
    "    def compile(self, d_optimizer, g_optimizer):\n"
    "        super().compile()\n"
    "        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer\n"
    "    def train_step(self, real):\n"
    "        if isinstance(real, tuple):\n"
    "            real = real[0]\n"
    "        z = tf.random.normal((tf.shape(real)[0], 8))\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = tf.reduce_mean(self.d(self.g(z))) - tf.reduce_mean(self.d(real))\n"
    "        grads = tape.gradient(loss, self.d.trainable_variables)\n"
    "        self.d_optimizer.apply_gradients(zip(grads, self.d.trainable_variables))\n"
    "        return {'loss': loss}\n"
    "gan = GAN(d, g)\n"
    "gan.compile(d_optimizer=keras.optimizers.RMSprop(), g_optimizer=keras.optimizers.Adam())\n"
    "gan.fit(np.zeros((64, 16)), batch_size=16, epochs=1)\n"
)


def test_a_gan_compile_gives_the_optimizers_its_train_step_applies():
    # they were an assumed Adam ("no compile() found"); the one with the most state counts
    # for every weight (an over-estimate where they differ)
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    graph = analyze_text(HEADER + GAN, "gan.py", Settings()).models[0]
    assert graph.setup.optimizer.name == "adam"
    assert graph.setup.optimizer.source == (
        "compile() at line 24; the most state of the 2 optimizers the model is compiled "
        "with (rmsprop, adam)")
    same = GAN.replace("keras.optimizers.RMSprop()", "keras.optimizers.SGD(momentum=0.9)")
    graph = analyze_text(HEADER + same.replace("Adam()", "SGD()"), "gan.py",
                         Settings()).models[0]
    assert (graph.setup.optimizer.name, graph.setup.optimizer.options) == (
        "sgd", {"momentum": 0.9})


def test_a_gan_step_sees_the_batch_as_a_tensor_not_a_tuple():
    # ``if isinstance(real, tuple)`` on fit(x) alone: False, as in Keras (x is not packed
    # into a tuple); it was undecided, the batch unknown and the GAN without an estimate
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + GAN, "gan.py", Settings(gpu="1GiB"))
    graph = result.models[0]
    assert [n.name for n in graph.layers] == ["d", "g"]
    assert graph.setup.batch_size == 16
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM900")
                and "isinstance" in d.message + str(getattr(d, "notes", ""))], \
        [(d.code, d.message) for d in result.diagnostics]
    breakdown = result.breakdowns[0]
    assert breakdown.batch_known and not breakdown.unknown_activations


def test_a_discriminator_run_on_real_and_generated_images_joined_holds_both_batches():
    # keras.io's DCGAN: tf.concat([generated, real], axis=0) feeds the discriminator a batch
    # of twice the size; it was sized at one batch (later: left out of the estimate, which
    # still had a verdict).  The call now holds two batches, its layers' tensors too.
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    from memlint.memory.nesting import opened
    joined = GAN.replace(
        "            loss = tf.reduce_mean(self.d(self.g(z))) - tf.reduce_mean(self.d(real))\n",
        "            both = tf.concat([self.g(z), real], axis=0)\n"
        "            loss = tf.reduce_mean(self.d(both))\n")
    assert joined != GAN
    result = analyze_text(HEADER + joined, "gan.py", Settings(gpu="16GiB"))
    (graph,) = result.models
    by_name = {node.name: node for node in graph.layers}
    assert by_name["d"].call_batches == [2] and by_name["g"].call_batches == []
    assert [(op.type, op.call_batches) for op in graph.operations] == [
        ("ConcatenateBatches", [2])]
    inside = {node.name: node.call_batches for node in opened(graph).layers}
    assert inside["d/dense_2"] == inside["d/dense_3"] == [2] and inside["g/dense"] == []
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM900")
                and "batch" in d.message], [(d.code, d.message) for d in result.diagnostics]
    assert result.breakdowns[0].batch_known and not result.breakdowns[0].unknown_activations
    # its estimate counts the discriminator's tensors twice: above the same step with the
    # discriminator run on the generated images alone
    alone = GAN.replace(
        "            loss = tf.reduce_mean(self.d(self.g(z))) - tf.reduce_mean(self.d(real))\n",
        "            loss = tf.reduce_mean(self.d(self.g(z)))\n")
    once = analyze_text(HEADER + alone, "gan.py", Settings(gpu="16GiB")).breakdowns[0]

    def forward(breakdown):
        return max(e["bytes"] for e in breakdown.timeline if e["phase"] == "forward")
    assert forward(result.breakdowns[0]) > forward(once)


# two augmented views of a batch through one encoder (SimCLR's step), taken apart again
TWO_VIEWS = (
    "from keras import ops\n"
    "encoder = keras.Sequential([keras.Input((16, 16, 3)), layers.Conv2D(8, 3),\n"
    "                            layers.GlobalAveragePooling2D(), layers.Dense(4)],\n"
    "                           name='encoder')\n"
    "class TwoViews(keras.Model):\n"
    "    def __init__(self, encoder):\n"
    "        super().__init__()\n"
    "        self.encoder = encoder\n"
    "    def call(self, x):\n"
    "        both = ops.concatenate([x, x * 2.0], axis=0)\n"
    "        z1, z2 = ops.split(self.encoder(ops.relu(both)), 2, axis=0)\n"
    "        return z1 + z2\n"
    "model = TwoViews(encoder)\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(np.zeros((64, 16, 16, 3)), np.zeros((64, 4)), batch_size=16)\n"
)


def test_two_views_of_a_batch_through_one_encoder_hold_two_batches():
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + TWO_VIEWS, "views.py", Settings(gpu="16GiB"))
    (graph,) = result.models
    assert [(n.name, n.output_shapes, n.call_batches) for n in graph.layers] == [
        ("encoder", [(None, 4)], [2])]
    assert [(op.type, op.call_batches) for op in graph.operations] == [
        ("Multiply", []), ("ConcatenateBatches", [2]), ("Relu", [2]), ("Split", [2]),
        ("Add", [])]
    assert result.breakdowns[0].batch_known and not result.breakdowns[0].unknown_activations


def _keras_and_memlint(tmp_path, source: str) -> tuple:
    """What real Keras and memlint report of the script's model ``model`` (the oracle)."""
    from tests.conftest import keras_script_result, require_keras
    from tests.test_fixtures_oracle import memlint_models
    require_keras()
    path = tmp_path / "model.py"
    path.write_text(HEADER + source)
    return keras_script_result(path)["models"]["model"], memlint_models(path)["model"]


@pytest.mark.oracle
def test_two_views_of_a_batch_match_keras(tmp_path):
    expected, got = _keras_and_memlint(tmp_path, TWO_VIEWS)
    assert got["layers"] == expected["layers"] and got["total"] == expected["total"]


def test_a_model_whose_call_result_is_not_known_gets_no_verdict():
    # every layer known, but call() ends in an operation memlint does not evaluate: the
    # estimate was complete without it (a "fits" for a step whose last tensors were not
    # counted)
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    source = (HEADER + "import tensorflow as tf\n"
              "class M(keras.Model):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.d = layers.Dense(4)\n"
              "    def call(self, x):\n"
              "        return tf.some_unknown_fn(self.d(x))\n"
              "model = M()\n"
              "model.compile(optimizer='adam', loss='mse')\n"
              "model.fit(np.zeros((64, 8)), np.zeros((64, 4)), batch_size=16)\n")
    result = analyze_text(source, "m.py", Settings(gpu="1GiB"))
    assert result.breakdowns[0].unknown_activations == ["M.call() result"]
    assert any(d.code == "MEM005" for d in result.diagnostics)


def test_what_reads_several_batches_otherwise_is_not_sized():
    # the batch axis sliced, reduced or split otherwise: not sized at one batch
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    for tail in ("out = self.encoder(both)[:4]", "out = ops.mean(both, axis=0)",
                 "out = ops.split(self.encoder(both), 3, axis=0)[0]",
                 "out = self.encoder(both) + self.encoder(x)"):
        source = (HEADER + "from keras import ops\n"
                  "encoder = keras.Sequential([keras.Input((8,)), layers.Dense(4)])\n"
                  "class M(keras.Model):\n"
                  "    def __init__(self):\n"
                  "        super().__init__()\n"
                  "        self.encoder = encoder\n"
                  "    def call(self, x):\n"
                  "        both = ops.concatenate([x, x], axis=0)\n"
                  f"        {tail}\n"
                  "        return out\n"
                  "model = M()\n"
                  "model.compile(optimizer='adam', loss='mse')\n"
                  "model.fit(np.zeros((64, 8)), np.zeros((64, 4)), batch_size=16)\n")
        result = analyze_text(source, "m.py", Settings(gpu="1GiB"))
        complete = [g.name for g, b in zip(result.models, result.breakdowns)
                    if b is not None and not b.unknown_activations and not b.not_modelled]
        assert "m" not in complete, (tail, complete)


# keras.io's triplet-loss siamese network: call() and a train_step() of its own that hands
# the batch of three images to an inner model without calling the model itself
SIAMESE = (
    "import tensorflow as tf\n"
    "embed = keras.Sequential([keras.Input(shape=(16, 16, 3)), layers.Conv2D(8, 3),\n"
    "                          layers.Flatten(), layers.Dense(4)], name='embed')\n"
    "class Distance(layers.Layer):\n"
    "    def call(self, anchor, positive, negative):\n"
    "        return (tf.reduce_sum(tf.square(anchor - positive), -1),\n"
    "                tf.reduce_sum(tf.square(anchor - negative), -1))\n"
    "a = layers.Input(name='anchor', shape=(16, 16, 3))\n"
    "p = layers.Input(name='positive', shape=(16, 16, 3))\n"
    "n = layers.Input(name='negative', shape=(16, 16, 3))\n"
    "network = keras.Model(inputs=[a, p, n], outputs=Distance()(embed(a), embed(p), embed(n)))\n"
    "class SiameseModel(keras.Model):\n"
    "    def __init__(self, network):\n"
    "        super().__init__()\n"
    "        self.network = network\n"
    "    def call(self, inputs):\n"
    "        return self.network(inputs)\n"
    "    def train_step(self, data):\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = self._loss(data)\n"
    "        grads = tape.gradient(loss, self.network.trainable_weights)\n"
    "        self.optimizer.apply_gradients(zip(grads, self.network.trainable_weights))\n"
    "        return {'loss': loss}\n"
    "    def _loss(self, data):\n"
    "        ap, an = self.network(data)\n"
    "        return tf.maximum(ap - an + 0.5, 0.0)\n"
    "images = tf.data.Dataset.from_tensor_slices(np.zeros((40, 16, 16, 3), 'float32'))\n"
    "triplets = tf.data.Dataset.zip((images, images, images)).batch(8)\n"
    "model = SiameseModel(network)\n"
    "model.compile(optimizer=keras.optimizers.Adam(0.0001))\n"
    "model.fit(triplets, epochs=1)\n"
)


def test_a_train_step_that_never_calls_the_model_gets_the_whole_batch():
    # the three images were taken for (x, y, sample_weight): call() was traced on the anchor
    # alone, the inner model "expects input [3 shapes]", no estimate
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(HEADER + SIAMESE, "siamese.py", Settings(gpu="1GiB"))
    graph = result.models[0]
    assert graph.input_shapes == [(None, 16, 16, 3)] * 3
    assert [(n.name, n.output_shapes) for n in graph.layers] == [
        ("functional_1", [[(None,), (None,)]])]  # as Keras names it (the oracle test)
    assert graph.params == 3 * 3 * 3 * 8 + 8 + 14 * 14 * 8 * 4 + 4
    assert graph.setup.batch_size == 8
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM901")], \
        [(d.code, d.message) for d in result.diagnostics]
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert any("its train_step() never calls the model itself" in n for n in notes), notes
    # a train_step() that calls the model itself is read through call(), as before
    calls_self = SIAMESE.replace("ap, an = self.network(data)", "ap, an = self(data)")
    notes = [d.message for d in analyze_text(HEADER + calls_self, "siamese.py",
                                             Settings()).diagnostics]
    assert not any("never calls the model itself" in n for n in notes), notes


@pytest.mark.oracle
def test_a_train_step_that_never_calls_the_model_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + SIAMESE)


def test_frames_folded_into_the_batch_axis_hold_that_many_batches():
    # a TimeDistributed written by hand: (batch, 6, ...) -> (-1, ...) for a 2-D encoder and
    # back; the encoder's tensors were sized at one batch (a sixth of them)
    from memlint.frontends.keras import analyze_source
    source = (HEADER + "from keras import ops\n"
              "frames = keras.Input((6, 8, 8, 3))\n"
              "x = layers.Conv2D(4, 3)(ops.reshape(frames, (-1, 8, 8, 3)))\n"
              "x = layers.GlobalAveragePooling2D()(x)\n"
              "x = layers.LSTM(2)(ops.reshape(x, (-1, 6, 4)))\n"
              "model = keras.Model(frames, x)\n")
    (graph,) = analyze_source(source, "f.py").models
    assert [(n.name, n.output_shapes, n.call_batches) for n in graph.layers] == [
        ("input_layer", [(None, 6, 8, 8, 3)], []), ("conv2d", [(None, 6, 6, 4)], [6]),
        ("global_average_pooling2d", [(None, 4)], [6]), ("lstm", [(None, 2)], [])]
    assert [(op.type, op.output_shapes, op.call_batches) for op in graph.operations] == [
        ("Reshape", [(None, 8, 8, 3)], [6]), ("Reshape", [(None, 6, 4)], [])]


# the scaled attention of TensorFlow's transformer tutorial and of keras.io: the scores
# divided by the square root of a depth cast to a float, keys transposed by the product
SCALED_ATTENTION = (
    "import tensorflow as tf\n"
    "from keras import ops\n"
    "class TfAttention(layers.Layer):\n"
    "    def __init__(self, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.q, self.k, self.v = layers.Dense(dim), layers.Dense(dim), layers.Dense(dim)\n"
    "    def call(self, x):\n"
    "        q, k, v = self.q(x), self.k(x), self.v(x)\n"
    "        dk = tf.cast(tf.shape(k)[-1], tf.float32)\n"
    "        scores = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(dk)\n"
    "        return tf.matmul(tf.nn.softmax(scores, axis=-1), v)\n"
    "class OpsAttention(layers.Layer):\n"
    "    def __init__(self, dim, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.dim = dim\n"
    "        self.q = layers.Dense(dim)\n"
    "    def call(self, x):\n"
    "        q = self.q(x)\n"
    "        scale = ops.sqrt(ops.cast(self.dim, 'float32'))\n"
    "        scores = ops.matmul(q, ops.transpose(x, (0, 2, 1))) / scale\n"
    "        keep = ops.greater(scores, ops.arccos(0.99))\n"
    "        return ops.matmul(ops.softmax(ops.where(keep, scores, -1e9)), x)\n"
    "inputs = keras.Input((12, 16))\n"
    "h = TfAttention(16)(inputs)\n"
    "h = OpsAttention(16)(h)\n"
    "model = keras.Model(inputs, layers.Dense(3)(layers.GlobalAveragePooling1D()(h)))\n"
    "model.compile('adam', 'mse')\n"
    "model.fit(np.zeros((64, 12, 16)), np.zeros((64, 3)), batch_size=8)\n"
)


def test_scaled_attention_written_with_tensorflow_or_keras_ops_is_sized():
    from memlint.frontends.keras import analyze_source
    (graph,) = analyze_source(HEADER + SCALED_ATTENTION, "f.py").models
    assert [(n.name, n.output_shapes, n.unresolved) for n in graph.layers[1:3]] == [
        ("tf_attention", [(None, 12, 16)], None), ("ops_attention", [(None, 12, 16)], None)]
    # the scores of both, (None, 12, 12), are among the tensors kept inside each layer
    assert all((None, 12, 12) in n.inner_shapes for n in graph.layers[1:3])


@pytest.mark.oracle
def test_scaled_attention_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + SCALED_ATTENTION)


# a model subclass that holds copies of its network it never runs in the step (keras.io's
# diffusion model keeps an EMA copy, a DQN its target network) and a layer it never calls
IDLE_COPIES = (
    "def network():\n"
    "    inputs = keras.Input((8,))\n"
    "    return keras.Model(inputs, layers.Dense(4)(layers.Dense(16)(inputs)))\n"
    "class WithCopies(keras.Model):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.network = network()\n"
    "        self.ema_network = network()\n"
    "        self.target = keras.models.clone_model(self.network)\n"
    "        self.copy = keras.Sequential([keras.Input((8,)), layers.Dense(16), layers.Dense(4)])\n"
    "        self.unused = layers.Dense(3)\n"
    "    def call(self, x):\n"
    "        return self.network(x)\n"
    "model = WithCopies()\n"
    "model.compile('adam', 'mse')\n"
    "model.fit(np.zeros((32, 8)), np.zeros((32, 4)), batch_size=8)\n"
)


def test_copies_of_the_network_the_step_never_runs_hold_weights_and_nothing_else():
    report = _report(IDLE_COPIES)
    (graph,), (memory,) = report.models, report.breakdowns
    assert [(n.name, n.output_shape, n.params, n.idle) for n in graph.layers] == [
        ("functional", (None, 4), 212, False), ("functional_1", (None, 4), 212, True),
        ("functional", (None, 4), 212, True), ("sequential", None, 212, True),
        ("dense_6", None, 0, True)]
    assert memory.complete and memory.category("weights") == 848 * 4
    # the idle copies make no tensor: the activations are the network's alone
    alone = _report(IDLE_COPIES.replace(
        "        self.ema_network = network()\n", "").replace(
        "        self.target = keras.models.clone_model(self.network)\n", "").replace(
        "        self.copy = keras.Sequential([keras.Input((8,)), layers.Dense(16), "
        "layers.Dense(4)])\n", "")).breakdowns[0]
    assert memory.per_sample_bytes == alone.per_sample_bytes > 0


def test_a_layer_the_step_may_have_called_unseen_stays_unknown():
    # a loop over an iterable memlint does not know, whose body runs a layer: the copy it
    # may run there is not taken as idle (no verdict, as before)
    hidden = IDLE_COPIES.replace(
        "        return self.network(x)\n",
        "        for _ in range(self.steps):\n"
        "            x = x + self.ema_network(x)\n"
        "        return self.network(x)\n")
    report = _report(hidden)
    ema = report.models[0].layers[1]
    assert (ema.output_shape, ema.idle) == ((None, 4), False)  # the loop's body ran once
    assert not report.breakdowns[0].complete


@pytest.mark.oracle
def test_copies_of_the_network_the_step_never_runs_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + IDLE_COPIES)


def test_clone_model_with_a_clone_function_or_of_an_unknown_model_is_noted_not_cloned():
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    for made, why in (("keras.models.clone_model(load())", "its model is not a Keras model"),
                      ("keras.models.clone_model(net, clone_function=lambda l: l)",
                       "its clone_function may change the layers")):
        source = (HEADER + "from somewhere import load\n"
                  "inputs = keras.Input((4,))\n"
                  "net = keras.Model(inputs, layers.Dense(2)(inputs))\n"
                  f"copy = {made}\n")
        notes = [d.message for d in analyze_text(source, "f.py", Settings()).diagnostics
                 if d.code == "MEM900"]
        assert any(n.startswith("clone_model(): " + why) for n in notes), notes


# keras.io's knowledge distillation: a student trained from scratch is a clone of the
# student (a Sequential); Keras builds the clone again, which names one functional model
SEQUENTIAL_CLONE = (
    "student = keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(16, 3, strides=2),\n"
    "                            layers.Flatten(), layers.Dense(10)], name='student')\n"
    "scratch = keras.models.clone_model(student)\n"
    "unbuilt = keras.models.clone_model(keras.Sequential([layers.Dense(4)]))\n"
    "inputs = keras.Input((3,))\n"
    "model = keras.Model(inputs, layers.Dense(2)(inputs))\n"
    "scratch.compile('adam', 'sparse_categorical_crossentropy')\n"
    "scratch.fit(np.zeros((64, 28, 28, 1)), np.zeros((64,)), batch_size=16)\n"
)


def test_clone_model_of_a_sequential_is_a_model_of_its_own():
    report = _report(SEQUENTIAL_CLONE)
    graphs = {(g.name, g.location.line): g for g in report.models}
    clone = graphs[("student", 6)]
    assert [(n.name, n.output_shape, n.params) for n in clone.layers] == [
        ("conv2d", (None, 13, 13, 16), 160), ("flatten", (None, 2704), 0),
        ("dense", (None, 10), 27050)]
    # the clone's build named 'functional_1' (the original's 'functional'), so the model
    # made after it is 'functional_2'
    assert ("functional_2", 9) in graphs
    memory = report.breakdowns[report.models.index(clone)]
    assert memory.complete and memory.batch_size == 16
    assert memory.category("weights") == 27210 * 4


@pytest.mark.oracle
@pytest.mark.parametrize("variable", ["scratch", "model"])
def test_clone_model_of_a_sequential_matches_keras(tmp_path, variable):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + SEQUENTIAL_CLONE, variable)


def test_an_optimizer_set_on_the_model_in_its_own_compile_is_the_one_applied():
    # keras.io's Zero-DCE: compile(learning_rate) calls super().compile() with no optimizer,
    # then sets self.optimizer; its train_step applies self.optimizer (Adam, not Keras's
    # default RMSprop: two slots per weight, not one)
    from memlint.frontends.keras import analyze_source
    source = (HEADER + "class Enhancer(keras.Model):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.net = keras.Sequential([keras.Input((8,)), layers.Dense(8)])\n"
              "    def compile(self, learning_rate, **kwargs):\n"
              "        super().compile(**kwargs)\n"
              "        self.optimizer = keras.optimizers.Adam(learning_rate=learning_rate)\n"
              "    def call(self, x):\n"
              "        return self.net(x)\n"
              "    def train_step(self, data):\n"
              "        import tensorflow as tf\n"
              "        with tf.GradientTape() as tape:\n"
              "            loss = keras.ops.mean(self.net(data))\n"
              "        grads = tape.gradient(loss, self.net.trainable_weights)\n"
              "        self.optimizer.apply_gradients(zip(grads, self.net.trainable_weights))\n"
              "        return {}\n"
              "model = Enhancer()\n"
              "model.compile(learning_rate=1e-4)\n"
              "model.fit(np.zeros((32, 8)), batch_size=8)\n")
    (graph,) = analyze_source(source, "f.py").models
    assert graph.setup.optimizer.name == "adam"


def test_layers_of_a_model_whose_step_was_never_traced_are_not_idle():
    # fitted on data of a shape not known: call() never ran here, so nothing says its
    # layers are idle (a false "fits" at 0 B otherwise)
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    source = (HEADER + "import pandas as pd\n"
              "x = pd.read_csv('data.csv').values\n"
              "class Net(keras.Model):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.a = layers.Dense(4096, activation='relu')\n"
              "    def call(self, x):\n"
              "        return self.a(x)\n"
              "model = Net()\n"
              "model.compile('adam', 'mse')\n"
              "model.fit(x, np.zeros((100, 4096)), batch_size=64)\n")
    report = analyze_text(source, "f.py", Settings())
    assert [(n.unresolved, n.idle) for n in report.models[0].layers] == [
        ("call() not traced: the model is never called on an input of a known shape", False)]
    assert not report.breakdowns[0].complete


def test_a_layer_only_a_train_step_beside_call_runs_is_not_idle():
    # the trace follows call(); the train_step() of its own that fit runs also calls the
    # teacher, which call() never does: its size stays unknown, not 0 B of activations
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    source = (HEADER + "import tensorflow as tf\n"
              "def net():\n"
              "    inputs = keras.Input((8,))\n"
              "    return keras.Model(inputs, layers.Dense(4)(inputs))\n"
              "class Distiller(keras.Model):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.student, self.teacher = net(), net()\n"
              "    def call(self, x):\n"
              "        return self.student(x)\n"
              "    def train_step(self, data):\n"
              "        x, y = data\n"
              "        soft = self.teacher(x, training=False)\n"
              "        with tf.GradientTape() as tape:\n"
              "            loss = keras.ops.mean((self(x) - soft) ** 2)\n"
              "        grads = tape.gradient(loss, self.student.trainable_weights)\n"
              "        self.optimizer.apply_gradients(zip(grads, self.student.trainable_weights))\n"
              "        return {}\n"
              "model = Distiller()\n"
              "model.compile('adam')\n"
              "model.fit(np.zeros((32, 8)), np.zeros((32, 4)), batch_size=8)\n")
    report = analyze_text(source, "f.py", Settings())
    teacher = report.models[0].layers[1]
    assert (teacher.unresolved, teacher.idle) == ("never called in call()", False)
    assert not report.breakdowns[0].complete


def test_a_layer_handed_to_a_function_memlint_does_not_evaluate_is_not_idle():
    source = IDLE_COPIES.replace(
        "        return self.network(x)\n",
        "        keras.ops.vectorized_map(self.ema_network, x)\n"
        "        return self.network(x)\n")
    report = _report(source)
    assert report.models[0].layers[1].unresolved == "never called in call()"
    assert not report.breakdowns[0].complete


# keras.io's denoising diffusion model, cut down: no call(), a train_step() that trains the
# network under a tape through a helper, updates an EMA copy of it in a loop over weights
# and a metric; the EMA copy (a clone) is idle, what the step runs is sized
DIFFUSION = (
    "import tensorflow as tf\n"
    "from keras import ops\n"
    "def network():\n"
    "    images = keras.Input((16, 16, 3))\n"
    "    rates = keras.Input((1, 1, 1))\n"
    "    e = layers.UpSampling2D(size=16)(rates)\n"
    "    x = layers.Concatenate()([layers.Conv2D(8, 1)(images), e])\n"
    "    return keras.Model([images, rates], layers.Conv2D(3, 1)(x))\n"
    "class Diffusion(keras.Model):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.network = network()\n"
    "        self.ema_network = keras.models.clone_model(self.network)\n"
    "        self.tracker = keras.metrics.Mean(name='loss')\n"
    "    def denoise(self, noisy, rates, training):\n"
    "        net = self.network if training else self.ema_network\n"
    "        return net([noisy, rates ** 2], training=training)\n"
    "    def train_step(self, images):\n"
    "        noises = keras.random.normal(shape=ops.shape(images))\n"
    "        times = keras.random.uniform((ops.shape(images)[0], 1, 1, 1))\n"
    "        angles = ops.cast(ops.arccos(0.95), 'float32') * times\n"
    "        rates = ops.sin(angles)\n"
    "        noisy = ops.cos(angles) * images + rates * noises\n"
    "        with tf.GradientTape() as tape:\n"
    "            pred = self.denoise(noisy, rates, training=True)\n"
    "            loss = self.loss(noises, pred)\n"
    "        grads = tape.gradient(loss, self.network.trainable_weights)\n"
    "        self.optimizer.apply_gradients(zip(grads, self.network.trainable_weights))\n"
    "        self.tracker.update_state(loss)\n"
    "        for w, ema_w in zip(self.network.weights, self.ema_network.weights):\n"
    "            ema_w.assign(0.999 * ema_w + 0.001 * w)\n"
    "        return {'loss': self.tracker.result()}\n"
    "model = Diffusion()\n"
    "model.compile(optimizer='adam', loss=keras.losses.mean_absolute_error)\n"
    "model.fit(np.zeros((64, 16, 16, 3), dtype='float32'), batch_size=8)\n"
)


def test_a_diffusion_models_ema_copy_is_idle_and_its_step_sized():
    report = _report(DIFFUSION)
    graph, memory = report.models[0], report.breakdowns[0]
    assert [(n.name, n.idle, n.params) for n in graph.layers] == [
        ("functional", False, 62), ("functional", True, 62)]
    assert memory.complete and memory.category("weights") == 2 * 62 * 4


@pytest.mark.oracle
def test_a_diffusion_models_ema_copy_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + DIFFUSION)


# keras.io's MLP-Mixer and FNet, cut down: Sequentials of layer classes with no Input,
# built when the functional model first calls them; a position embedding sliced from a
# weight and broadcast to the input's shape; a Fourier transform of the tokens
MIXER = (
    "from keras import ops\n"
    "class Mixer(layers.Layer):\n"
    "    def __init__(self, patches, units, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.mlp1 = keras.Sequential([layers.Dense(patches, activation='gelu'),\n"
    "                                      layers.Dense(patches)])\n"
    "        self.norm = layers.LayerNormalization()\n"
    "    def call(self, x):\n"
    "        y = ops.transpose(self.mlp1(ops.transpose(self.norm(x), (0, 2, 1))), (0, 2, 1))\n"
    "        return x + y\n"
    "class FNet(layers.Layer):\n"
    "    def __init__(self, units, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.ffn = keras.Sequential([layers.Dense(units, activation='gelu')])\n"
    "    def call(self, x):\n"
    "        real = ops.fft2((x, ops.zeros_like(x)))[0]\n"
    "        return self.ffn(real + x)\n"
    "class PositionEmbedding(layers.Layer):\n"
    "    def __init__(self, length, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.length = length\n"
    "    def build(self, input_shape):\n"
    "        self.table = self.add_weight(shape=[self.length, input_shape[-1]])\n"
    "    def call(self, x):\n"
    "        shape = ops.shape(x)\n"
    "        table = ops.slice(ops.convert_to_tensor(self.table), (0, 0), (shape[-2], shape[-1]))\n"
    "        return ops.broadcast_to(table, shape)\n"
    "blocks = keras.Sequential([Mixer(16, 32) for _ in range(2)])\n"
    "inputs = keras.Input((16, 32))\n"
    "x = inputs + PositionEmbedding(16)(inputs)\n"
    "x = keras.Sequential([FNet(32), FNet(32)])(blocks(x))\n"
    "model = keras.Model(inputs, layers.Dense(10)(layers.GlobalAveragePooling1D()(x)))\n"
    "model.compile('adam', 'sparse_categorical_crossentropy')\n"
    "model.fit(np.zeros((64, 16, 32)), np.zeros((64,)), batch_size=16)\n"
)


def _model_and_memory(source: str) -> tuple:
    """The graph and the estimate of the script's model ``model``."""
    report = _report(source)
    (graph,) = [g for g in report.models if g.variable == "model"]
    return graph, report.breakdowns[report.models.index(graph)]


def test_sequentials_of_layer_classes_built_on_their_first_call_are_sized():
    graph, memory = _model_and_memory(MIXER)
    assert all(n.unresolved is None for n in graph.layers), \
        [(n.name, n.unresolved) for n in graph.layers]
    assert memory.complete


@pytest.mark.oracle
def test_sequentials_of_layer_classes_built_on_their_first_call_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + MIXER)


# keras.io's conditional GAN, cut down: no call(); fit gets a dataset of (image, one-hot
# label) pairs, which the step unpacks; the labels are spread over the image by a flat
# repeat; the discriminator runs on fake and real images joined along the batch axis
CONDITIONAL_GAN = (
    "import tensorflow as tf\n"
    "from keras import ops\n"
    "discriminator = keras.Sequential([keras.layers.InputLayer((8, 8, 4)),\n"
    "    layers.Conv2D(8, 3, strides=2, padding='same'), layers.GlobalMaxPooling2D(),\n"
    "    layers.Dense(1)], name='discriminator')\n"
    "generator = keras.Sequential([keras.layers.InputLayer((19,)), layers.Dense(64),\n"
    "    layers.Reshape((8, 8, 1))], name='generator')\n"
    "class ConditionalGAN(keras.Model):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.discriminator, self.generator = discriminator, generator\n"
    "    def compile(self, d_optimizer, g_optimizer):\n"
    "        super().compile()\n"
    "        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer\n"
    "    def train_step(self, data):\n"
    "        real_images, one_hot_labels = data\n"
    "        labels = ops.repeat(one_hot_labels[:, :, None, None], repeats=[8 * 8])\n"
    "        labels = ops.reshape(labels, (-1, 8, 8, 3))\n"
    "        z = keras.random.normal((ops.shape(real_images)[0], 16))\n"
    "        fake = self.generator(ops.concatenate([z, one_hot_labels], axis=1))\n"
    "        both = ops.concatenate([ops.concatenate([fake, labels], -1),\n"
    "                                ops.concatenate([real_images, labels], -1)], axis=0)\n"
    "        with tf.GradientTape() as tape:\n"
    "            loss = ops.mean(self.discriminator(both))\n"
    "        grads = tape.gradient(loss, self.discriminator.trainable_weights)\n"
    "        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))\n"
    "        return {'d_loss': loss}\n"
    "images = np.zeros((64, 8, 8, 1), dtype='float32')\n"
    "onehot = keras.utils.to_categorical(np.zeros((64,)), 3)\n"
    "dataset = tf.data.Dataset.from_tensor_slices((images, onehot)).batch(16)\n"
    "model = ConditionalGAN()\n"
    "model.compile(d_optimizer=keras.optimizers.Adam(), g_optimizer=keras.optimizers.Adam())\n"
    "model.fit(dataset, epochs=1)\n"
)


def test_a_step_without_call_unpacks_a_dataset_of_pairs():
    graph, memory = _model_and_memory(CONDITIONAL_GAN)
    assert [(n.name, n.unresolved, n.call_batches) for n in graph.layers] == [
        ("discriminator", None, [2]), ("generator", None, [])]
    assert memory.complete and memory.batch_size == 16


@pytest.mark.oracle
def test_a_step_without_call_unpacks_a_dataset_of_pairs_like_keras(tmp_path):
    # Keras reports the discriminator's first call, on the 2 x 16 images joined: memlint
    # the same call as one of two batches (call_batches), its other numbers alike
    expected, got = _keras_and_memlint(tmp_path, CONDITIONAL_GAN)
    assert got["total"] == expected["total"]
    assert [layer["output_shape"] for layer in expected["layers"]] == [[32, 1], [16, 8, 8, 1]]
    assert [layer["output_shape"] for layer in got["layers"]] == [[None, 1], [None, 8, 8, 1]]
    drop = ("output_shape",)
    assert [{k: v for k, v in layer.items() if k not in drop} for layer in got["layers"]] == \
        [{k: v for k, v in layer.items() if k not in drop} for layer in expected["layers"]]


def test_a_layer_class_call_records_its_inputs_shapes_not_its_outputs():
    # (its record had held the outputs' shapes in place of the inputs' since a tidy-up)
    (graph,) = analyze_source(HEADER + (
        "class Widen(layers.Layer):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.dense = layers.Dense(8)\n"
        "    def call(self, x):\n"
        "        return self.dense(x)\n"
        "inputs = keras.Input((4,))\n"
        "model = keras.Model(inputs, Widen()(inputs))\n"), "f.py").models
    widen = graph.layers[1]
    assert (widen.input_shapes, widen.output_shapes) == ([(None, 4)], [(None, 8)])


def test_a_gram_matrix_by_tf_linalg_einsum_is_sized():
    # TensorFlow's style transfer: tf.linalg.einsum('bijc,bijd->bcd', x, x) over a
    # convolution's output, divided by the positions counted from tf.shape (the call's
    # result was "arithmetic of an array with a value not known statically")
    source = ("import tensorflow as tf\n"
              "def gram_matrix(x):\n"
              "    result = tf.linalg.einsum('bijc,bijd->bcd', x, x)\n"
              "    shape = tf.shape(x)\n"
              "    return result / tf.cast(shape[1] * shape[2], tf.float32)\n"
              "class Styled(keras.Model):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.conv = layers.Conv2D(8, 3)\n"
              "        self.head = layers.Dense(2)\n"
              "    def call(self, x):\n"
              "        return self.head(gram_matrix(self.conv(x)))\n"
              "model = Styled()\n"
              "model.compile('adam', 'mse')\n"
              "model.fit(np.zeros((16, 32, 32, 3)), np.zeros((16, 8, 2)), batch_size=4)\n")
    report = _report(source)
    (graph,), (memory,) = report.models, report.breakdowns
    assert [(n.name, n.output_shape) for n in graph.layers] == [
        ("conv2d", (None, 30, 30, 8)), ("dense", (None, 8, 2))]
    assert memory.complete, [d.message for d in report.diagnostics]


def test_an_output_sized_by_a_lookups_vocabulary_is_sized():
    # keras.io's OCR for captchas: Dense(len(char_to_num.get_vocabulary()) + 1), the
    # lookup made from the sorted set of the label characters (the inverse lookup's
    # vocabulary is that list, its OOV token first)
    source = ("characters = sorted(set('abcdefghij0123456789'))\n"
              "char_to_num = layers.StringLookup(vocabulary=list(characters), mask_token=None)\n"
              "num_to_char = layers.StringLookup(vocabulary=char_to_num.get_vocabulary(),\n"
              "                                  mask_token=None, invert=True)\n"
              "masked = layers.StringLookup(vocabulary=characters, mask_token='')\n"
              "inputs = keras.Input((50, 64))\n"
              "outputs = layers.Dense(len(char_to_num.get_vocabulary()) + 1)(inputs)\n"
              "extra = layers.Dense(len(num_to_char.get_vocabulary()))(inputs)\n"
              "masks = layers.Dense(len(masked.get_vocabulary()))(inputs)\n"
              "model = keras.Model(inputs, [outputs, extra, masks])\n")
    report = _report(source)
    (graph,) = report.models
    assert [n.output_shape for n in graph.layers[1:]] == [(None, 50, 22), (None, 50, 21),
                                                          (None, 50, 22)]
    assert not [d for d in report.diagnostics if d.code == "MEM900"]


@pytest.mark.oracle
def test_a_lookups_vocabulary_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + (
        "characters = sorted(set('abcdefghij0123456789'))\n"
        "char_to_num = layers.StringLookup(vocabulary=list(characters), mask_token=None)\n"
        "masked = layers.StringLookup(vocabulary=characters, mask_token='')\n"
        "inputs = keras.Input((50, 64))\n"
        "a = layers.Dense(len(char_to_num.get_vocabulary()) + 1)(inputs)\n"
        "model = keras.Model(inputs, [a, layers.Dense(len(masked.get_vocabulary()))(inputs)])\n"))


TRAINING_ARGUMENT = (
    "class Block(layers.Layer):\n"
    "    def __init__(self, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.wide = layers.Dense(32)\n"
    "        self.narrow = layers.Dense(8)\n"
    "    def call(self, inputs, training, mask=None):\n"
    "        if training:\n"
    "            return self.wide(inputs)\n"
    "        return self.narrow(inputs)\n"
    "class Captioner(keras.Model):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.block = Block()\n"
    "        self.head = layers.Dense(2)\n"
    "    def call(self, x, training=False):\n"
    "        return self.head(self.block(x, training=training))\n"
    "model = Captioner()\n"
    "model.compile('adam', 'mse')\n"
    "y = model(np.zeros((4, 16)), training=True)\n"
)


def test_the_keyword_arguments_of_a_layer_call_reach_call():
    # keras.io's image captioning: ``encoder(x, training=training)`` for a call() whose
    # ``training`` has no default; Keras hands it on (memlint dropped it: "arguments do not
    # match", no estimate); its value picks the branch
    report = _report(TRAINING_ARGUMENT)
    assert not [d for d in report.diagnostics if "do not match" in d.message]
    block = report.models[0].layers[0]
    assert (block.name, block.output_shape, block.params) == ("block", (4, 32), 16 * 32 + 32)
    narrow = _report(TRAINING_ARGUMENT.replace("training=True)", "training=False)"))
    assert narrow.models[0].layers[0].output_shape == (4, 8)


@pytest.mark.oracle
def test_the_keyword_arguments_of_a_layer_call_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + TRAINING_ARGUMENT)


def test_a_subclass_fitted_on_data_of_unknown_shape_says_which_data():
    # TensorFlow's text generation: a dataset of character ids read from a downloaded file
    # (the note said the model was never fitted on a known shape)
    report = _report(
        "import json\nimport tensorflow as tf\n"
        "ids = tf.data.Dataset.from_tensor_slices(json.load(open('ids.json')))\n"
        "class Net(keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.dense = layers.Dense(4)\n"
        "    def call(self, x):\n"
        "        return self.dense(x)\n"
        "model = Net()\n"
        "model.compile('adam', 'mse')\n"
        "model.fit(ids.batch(64))\n")
    [note] = [d.message for d in report.diagnostics if "input shape" in d.message]
    assert "the data passed to fit() at line 15 has no shape known statically" in note, note
    assert note.endswith("; pass --input-shape")


RNN_CELL = (
    "from keras import ops\n"
    "class MinimalCell(layers.Layer):\n"
    "    def __init__(self, units, **kwargs):\n"
    "        super().__init__(**kwargs)\n"
    "        self.units = units\n"
    "        self.state_size = units\n"
    "    def build(self, input_shape):\n"
    "        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name='k')\n"
    "        self.recurrent = self.add_weight(shape=(self.units, self.units), name='r')\n"
    "    def call(self, inputs, states):\n"
    "        out = ops.matmul(inputs, self.kernel) + ops.matmul(states[0], self.recurrent)\n"
    "        return out, [out]\n"
    "inputs = keras.Input((50, 12))\n"
    "x = layers.RNN(MinimalCell(16), return_sequences=True)(inputs)\n"
    "x = layers.RNN(MinimalCell(8))(x)\n"
    "model = keras.Model(inputs, layers.Dense(3)(x))\n"
    "model.compile('adam', 'mse')\n"
    "model.fit(np.zeros((64, 50, 12)), np.zeros((64, 3)), batch_size=32)\n"
)


def test_an_rnn_over_a_cell_class_of_the_file_is_sized_and_not_counted():
    # keras.io's "working with RNNs": RNN(MinimalRNNCell(32)) was an error ("cell must be
    # an RNN cell", MEM901), which Keras does not raise; the cell's call() runs on every
    # step untraced, so the estimate is a lower bound with no verdict
    report = _report(RNN_CELL)
    (graph,), (memory,) = report.models, report.breakdowns
    assert not [d for d in report.diagnostics if d.code == "MEM901"]
    shapes = [(n.name, n.output_shape, n.params) for n in graph.layers]
    assert shapes[1:] == [("rnn", (None, 50, 16), 12 * 16 + 16 * 16),
                          ("rnn_1", (None, 8), 16 * 8 + 8 * 8), ("dense", (None, 3), 8 * 3 + 3)]
    assert not memory.complete
    assert [name for name, _ in memory.not_modelled] == ["rnn", "rnn_1"]
    assert "MinimalCell.call() on every time step" in memory.not_modelled[0][1]
    with_layer = _report(RNN_CELL.replace(
        "        self.state_size = units\n",
        "        self.state_size = units\n        self.proj = layers.Dense(units)\n"))
    assert with_layer.models[0].layers[1].output_shape is None  # sub-layer: not known


@pytest.mark.oracle
def test_an_rnn_over_a_cell_class_of_the_file_matches_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, HEADER + RNN_CELL)
