"""Keras 3 naming and layer order in the Keras frontend.

Expected names are what Keras 3.x gives for the same code (checked with real Keras): layer
names come from per-class counters shared by the whole file, and some Keras internals take
names from those counters too.
"""

from memlint.frontends.keras import analyze_source


def models(source: str) -> dict:
    result = analyze_source(source, "snippet.py")
    return {graph.variable: graph for graph in result.models}


def names(graph) -> list:
    return [layer.name for layer in graph.layers]


def test_input_shape_on_first_layer_takes_an_input_layer_name():
    # Sequential.add makes InputLayer(shape=...) for the first layer's input_shape=
    got = models(
        "import keras\n"
        "seq = keras.Sequential([keras.layers.Dense(4, input_shape=(3,))])\n"
        "x = keras.Input((3,))\n"
        "fn = keras.Model(x, keras.layers.Dense(2)(x))\n"
    )
    assert names(got["fn"]) == ["input_layer_1", "dense_1"]


def test_input_dim_also_makes_an_input_layer_but_input_length_does_not():
    got = models(
        "import keras\n"
        "a = keras.Sequential([keras.layers.Embedding(100, 8, input_length=5)])\n"
        "x = keras.Input((3,))\n"
        "b = keras.Model(x, x)\n"
        "c = keras.Sequential([keras.layers.Dense(4, input_dim=3)])\n"
        "y = keras.Input((3,))\n"
        "d = keras.Model(y, y)\n"
    )
    assert names(got["b"]) == ["input_layer"]
    assert names(got["d"]) == ["input_layer_2"]


def test_build_and_fit_on_unbuilt_sequential_take_input_layer_names_when_they_happen():
    got = models(
        "import numpy as np\n"
        "import keras\n"
        "s = keras.Sequential([keras.layers.Dense(2)])\n"
        "x = keras.Input((3,))\n"                       # input_layer: s is not built yet
        "s.fit(np.zeros((4, 3)), np.zeros((4, 2)))\n"   # builds s: input_layer_1
        "y = keras.Input((3,))\n"                       # input_layer_2
        "m = keras.Model([x, y], keras.layers.Add()([x, y]))\n"
    )
    assert names(got["m"]) == ["input_layer", "input_layer_2", "add"]


def test_each_sequential_rebuild_uses_a_functional_name():
    # Sequential(): add(Input) builds nothing; each later add() rebuilds -> 3 Functionals
    got = models(
        "import keras\n"
        "s = keras.Sequential()\n"
        "s.add(keras.Input((3,)))\n"
        "for units in (8, 4, 2):\n"
        "    s.add(keras.layers.Dense(units))\n"
        "x = keras.Input((3,))\n"
        "f = keras.Model(x, keras.layers.Dense(1)(x))\n"
    )
    assert got["f"].name == "functional_3"
    assert got["s"].name == "sequential"


def test_sequential_from_a_list_builds_once():
    got = models(
        "import keras\n"
        "s = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8), keras.layers.Dense(2)])\n"
        "x = keras.Input((3,))\n"
        "f = keras.Model(x, x)\n"
    )
    assert got["f"].name == "functional_1"


def test_input_layer_shape_argument():
    got = models(
        "import keras\n"
        "s = keras.Sequential([keras.layers.InputLayer((5, 7)), keras.layers.Dense(3)])\n"
        "t = keras.Sequential([keras.layers.InputLayer(shape=(4,), batch_size=16),\n"
        "                      keras.layers.Dense(3)])\n"
    )
    assert got["s"].layers[0].output_shape == (None, 5, 3)
    assert got["t"].layers[0].output_shape == (16, 3)
    assert got["t"].setup.batch_size == 16


def test_multi_head_attention_build_takes_softmax_and_dropout_names():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "x = keras.Input((10, 16))\n"
        "a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)\n"
        "a = layers.Dropout(0.1)(a)\n"
        "a = layers.Softmax()(a)\n"
        "m = keras.Model(x, a)\n"
    )
    assert names(got["m"]) == ["input_layer", "multi_head_attention", "dropout_1",
                               "softmax_1"]


def test_tensor_arithmetic_is_an_op_not_a_layer_but_takes_the_add_name():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "x = keras.Input((4, 8))\n"
        "y = layers.Dense(8)(x)\n"
        "z = x + y\n"                       # ops.Add named 'add'
        "w = layers.Add()([z, 2.0 * y])\n"  # ops.Multiply 'multiply', then layer 'add_1'
        "m = keras.Model(x, layers.Dense(1)(w - 1))\n"
    )
    graph = got["m"]
    assert names(graph) == ["input_layer", "dense", "add_1", "dense_1"]
    assert [layer.output_shape for layer in graph.layers] == [
        (None, 4, 8), (None, 4, 8), (None, 4, 8), (None, 4, 1)]


def test_broadcasting_of_tensor_operations():
    got = models(
        "import keras\n"
        "x = keras.Input((6, 1))\n"
        "y = keras.Input((5,))\n"
        "m = keras.Model([x, y], keras.layers.Flatten()(x * y))\n"
    )
    assert got["m"].layers[-1].output_shape == (None, 30)


def test_keyword_tensors_of_a_call_decide_the_layer_order():
    # the encoder LSTM feeds the decoder only through initial_state=, so Keras puts it (and
    # the encoder input) before the decoder
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "enc_in = keras.Input((None, 5))\n"
        "_, h, c = layers.LSTM(4, return_state=True)(enc_in)\n"
        "dec_in = keras.Input((None, 6))\n"
        "out = layers.LSTM(4, return_sequences=True)(dec_in, initial_state=[h, c])\n"
        "m = keras.Model([enc_in, dec_in], out)\n"
    )
    assert names(got["m"]) == ["input_layer", "input_layer_1", "lstm", "lstm_1"]
    # LSTM(4) on 6 features: 4 * 4 * (6 + 4 + 1)
    assert got["m"].layers[3].trainable_params == 176


def test_return_attention_scores_gives_two_outputs():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "q = keras.Input((7, 16))\n"
        "v = keras.Input((9, 12))\n"
        "out, scores = layers.MultiHeadAttention(num_heads=3, key_dim=4)(\n"
        "    q, v, return_attention_scores=True)\n"
        "m = keras.Model([q, v], [out, layers.Flatten()(scores)])\n"
    )
    mha = next(layer for layer in got["m"].layers if layer.type == "MultiHeadAttention")
    # Keras 3's symbolic scores are (batch, heads, query_len, query_len), even when the key
    # is longer (run time gives query_len x key_len); the summary shows the symbolic one
    assert mha.output_shape == [(None, 7, 16), (None, 3, 7, 7)]
    assert got["m"].layers[-1].output_shape == (None, 3 * 7 * 7)


def test_module_level_variable_names_the_model():
    got = models(
        "import keras\n"
        "def build():\n"
        "    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])\n"
        "    return model\n"
        "classifier = build()\n"
    )
    assert list(got) == ["classifier"]


def test_attention_called_with_keywords():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "q = keras.Input((5, 8))\n"
        "kv = keras.Input((9, 6))\n"
        "out = layers.MultiHeadAttention(num_heads=2, key_dim=4)(query=q, value=kv, key=kv)\n"
        "m = keras.Model([q, kv], out)\n"
    )
    mha = got["m"].layers[-1]
    assert mha.output_shape == (None, 5, 8)
    # query 8*2*4+2*4, key 6*2*4+2*4, value 6*2*4+2*4, output 2*4*8+8
    assert mha.trainable_params == 72 + 56 + 56 + 72
