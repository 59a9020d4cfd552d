"""Layer and Model subclasses defined in the analysed file (memlint.frontends.keras.classes).

Expected values are what real Keras 3 reports (checked with tensorflow-cpu 2.20 / Keras 3);
the fixtures ``fixtures/subclass_*.py`` are compared with real Keras by the oracle tests.
"""

from memlint.frontends.keras import analyze_source

HEADER = (
    "import keras\n"
    "import numpy as np\n"
    "from keras import layers\n"
)

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


def test_other_classes_are_still_not_evaluated():
    result = analyze("class Config(object):\n    units = 3\n"
                     "m = keras.Sequential([keras.Input((2,)), layers.Dense(1)])\n")
    assert ("class", "Config") in [(d[0], d[1]) for d in result.definitions]
    assert len(result.models) == 1


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
    assert summary(got["outer"]) == [("inner", "Inner", (None, 2), 12, 0),
                                     ("sequential", "Sequential", (None, 3), 9, 0)]
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
