"""Models inside models, freezing, model.layers / get_layer, and the training setup."""

from memlint.frontends.keras import analyze_source


def models(source: str) -> dict:
    return {graph.variable: graph for graph in analyze_source(source, "snippet.py").models}


def summary(graph) -> list:
    return [(layer.name, layer.type, layer.output_shape, layer.trainable_params,
             layer.non_trainable_params) for layer in graph.layers]


GAN = (
    "import keras\n"
    "from keras import layers\n"
    "gen = keras.Sequential([keras.Input((4,)), layers.Dense(6)], name='gen')\n"
    "disc = keras.Sequential([keras.Input((6,)), layers.Dense(3), layers.BatchNormalization(),\n"
    "                         layers.Dense(1)], name='disc')\n"
    "disc.trainable = False\n"
    "gan = keras.Sequential([gen, disc])\n"
    "z = keras.Input((4,))\n"
    "combined = keras.Model(z, disc(gen(z)))\n"
)


def test_sequential_of_models():
    got = models(GAN)
    # gen: 4*6+6 = 30; disc: 6*3+3 = 21, BatchNorm 4*3 (2 trainable, 2 moving), 3+1 = 4
    assert summary(got["gan"]) == [
        ("gen", "Sequential", (None, 6), 30, 0),
        ("disc", "Sequential", (None, 1), 0, 21 + 12 + 4),
    ]
    # frozen: every layer of disc reports its weights as non-trainable
    assert [(layer.trainable_params, layer.non_trainable_params)
            for layer in got["disc"].layers] == [(0, 21), (0, 12), (0, 4)]


def test_models_called_on_tensors():
    got = models(GAN)
    # gen, disc and gan (built from gen's input) each made an input_layer and a Functional
    assert summary(got["combined"]) == [
        ("input_layer_3", "InputLayer", (None, 4), 0, 0),
        ("gen", "Sequential", (None, 6), 30, 0),
        ("disc", "Sequential", (None, 1), 0, 37),
    ]
    assert got["combined"].name == "functional_3"


def test_unbuilt_sequential_is_built_by_its_first_call():
    got = models(
        "import keras\n"
        "body = keras.Sequential([keras.layers.Dense(5), keras.layers.Dense(2)])\n"
        "x = keras.Input((3,))\n"
        "m = keras.Model(x, body(x))\n"
    )
    assert summary(got["m"]) == [("input_layer", "InputLayer", (None, 3), 0, 0),
                                 ("sequential", "Sequential", (None, 2), 20 + 12, 0)]
    assert summary(got["body"])[-1] == ("dense_1", "Dense", (None, 2), 12, 0)


def test_trainable_set_after_the_call_counts():
    got = models(
        "import keras\n"
        "x = keras.Input((3,))\n"
        "d = keras.layers.Dense(4)\n"
        "m = keras.Model(x, keras.layers.Dense(1)(d(x)))\n"
        "for layer in m.layers:\n"
        "    layer.trainable = False\n"
        "m.layers[-1].trainable = True\n"
    )
    assert [(layer.trainable_params, layer.non_trainable_params)
            for layer in got["m"].layers] == [(0, 0), (0, 16), (5, 0)]


def test_feature_extractor_from_layers_and_get_layer():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "x = keras.Input((8, 8, 1))\n"
        "h = layers.Conv2D(2, 3, name='c1')(x)\n"
        "h = layers.Flatten(name='flat')(h)\n"
        "base = keras.Model(x, layers.Dense(3)(h))\n"
        "extract = keras.Model(base.inputs, [layer.output for layer in base.layers[1:3]])\n"
        "head = keras.Model(base.input, layers.Dense(1)(base.get_layer('flat').output))\n"
    )
    assert [layer.name for layer in got["extract"].layers] == ["input_layer", "c1", "flat"]
    assert [layer.name for layer in got["head"].layers] == [
        "input_layer", "c1", "flat", "dense_1"]
    assert got["head"].layers[-1].trainable_params == 6 * 6 * 2 + 1


def test_fixed_batch_dimension_wins_over_keras_default():
    got = models(
        "import numpy as np\n"
        "import keras\n"
        "m = keras.Sequential([keras.layers.InputLayer(batch_shape=(8, 3)),\n"
        "                      keras.layers.Dense(1)])\n"
        "m.compile(optimizer='adam', loss='mse')\n"
        "m.fit(unknown_data, epochs=2)\n"
    )
    assert got["m"].setup.batch_size == 8


def test_data_shapes_through_astype_reshape_and_tf_constructors():
    got = models(
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "import keras\n"
        "a = keras.Sequential([keras.layers.Dense(1)])\n"
        "a.train_on_batch(np.random.rand(6, 12).astype('float32').reshape(-1, 4, 3), None)\n"
        "b = keras.Sequential([keras.layers.Dense(1)])\n"
        "b.predict(tf.random.normal((5, 7)))\n"
    )
    assert got["a"].layers[0].output_shape == (None, 4, 1)
    assert got["a"].setup.batch_size == 6
    assert got["b"].layers[0].output_shape == (None, 1)
    assert got["b"].setup.mode == "infer"
    assert got["b"].setup.batch_size == 5


def test_policy_is_the_one_in_force_when_the_model_was_made():
    got = models(
        "import keras\n"
        "keras.mixed_precision.set_global_policy('mixed_float16')\n"
        "x = keras.Input((3,))\n"
        "half = keras.Model(x, keras.layers.Dense(2)(x))\n"
        "keras.mixed_precision.set_global_policy('float32')\n"
        "full = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
    )
    assert got["half"].setup.dtype_policy == "mixed_float16"
    assert got["full"].setup.dtype_policy == "float32"


def test_custom_layers_stay_in_the_graph():
    result = analyze_source(
        "import keras\n"
        "from keras import layers\n"
        "from mylib import FancyBlock\n"
        "class Scale(layers.Layer):\n"
        "    def call(self, x):\n"
        "        return x * 2\n"
        "x = keras.Input((4,))\n"
        "y = Scale()(layers.Dense(3)(x))\n"
        "f = keras.Model(x, layers.Dense(2)(y))\n"
        "s = keras.Sequential([keras.Input((4,)), FancyBlock(3), layers.Dense(1)])\n",
        "custom.py")
    got = {graph.variable: graph for graph in result.models}
    assert [(layer.name, layer.type, layer.output_shape) for layer in got["f"].layers] == [
        ("input_layer", "InputLayer", (None, 4)), ("dense", "Dense", (None, 3)),
        ("scale", "Scale", (None, 3)), ("dense_1", "Dense", (None, 2))]  # Scale is traced
    assert [layer.name for layer in got["s"].layers] == ["fancy_block", "dense_2"]
    lines = {d.line for d in result.diagnostics if d.code == "MEM900"}
    assert 10 in lines and 8 not in lines  # only the imported FancyBlock is unknown


def test_memory_growth_idiom_gives_no_notes():
    result = analyze_source(
        "import tensorflow as tf\n"
        "gpus = tf.config.list_physical_devices('GPU')\n"
        "if gpus:\n"
        "    try:\n"
        "        for gpu in gpus:\n"
        "            tf.config.experimental.set_memory_growth(gpu, True)\n"
        "    except RuntimeError as e:\n"
        "        print(e)\n"
        "model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])\n",
        "growth.py")
    assert result.diagnostics == []
    assert len(result.models) == 1


def test_batch_size_larger_than_the_data_is_the_data():
    result = analyze_source(
        "import numpy as np\nimport keras\n"
        "m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
        "m.compile('sgd', 'mse')\n"
        "m.fit(np.zeros((8, 4)), np.zeros((8, 2)), batch_size=8192)\n", "b.py")
    (graph,) = result.models
    assert graph.setup.batch_size == 8


def test_nested_model_inner_activations_are_counted_for_training():
    from memlint.memory import estimate

    result = analyze_source(
        "import keras\n"
        "inner = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16),"
        " keras.layers.Dense(4)])\n"
        "outer = keras.Sequential([keras.Input((8,)), inner, keras.layers.Dense(1)])\n"
        "outer.compile('sgd', 'mse')\n", "n.py")
    graph = next(g for g in result.models if g.variable == "outer")
    nested = graph.layers[0]
    assert nested.inner_shapes == [(None, 16)]  # the (None, 4) output is the layer's own
    b = estimate(graph)
    batch = graph.setup.batch_size
    # v2: as the backward pass starts, the nested model's inner Dense(16) output and its own
    # output (4) are kept, float32, beside the weights, the batch, the targets, Dense(1)'s
    # output and the loss gradient (v1 summed every output into "activations")
    loss = [m["bytes"] for m in b.timeline if m["layer"] == "loss"][0]
    assert loss == 868 + batch * 8 * 4 + batch * 4 + batch * (16 + 4) * 4 + 2 * batch * 4
    # the nested model's layers run as calls of their own: the peak is in the backward
    # pass of its first Dense, where the gradient of its (16-wide) output is alive and
    # what the layers kept is already released
    assert b.peak_at["layer"] == "sequential/dense"
    assert b.category("activations") == 0
    assert b.category("other") == batch * 8 * 4 + batch * 4 + batch * 16 * 4


def test_a_factory_backbone_used_as_a_layer_is_part_of_the_model():
    got = analyze_source(
        "import keras\nfrom keras import layers\n"
        "def make_backbone():\n"
        "    inputs = keras.Input(shape=(8,))\n"
        "    return keras.Model(inputs, layers.Dense(4)(inputs), name='backbone')\n"
        "def build():\n"
        "    backbone = make_backbone()\n"
        "    inputs = keras.Input(shape=(8,))\n"
        "    return keras.Model(inputs, layers.Dense(2)(backbone(inputs)))\n"
        "model = build()\n", "f.py").models
    assert [g.variable for g in got] == ["model"]
    assert got[0].params == 36 + 10


def test_an_inputless_sequential_inside_a_sequential_is_built_on_its_input():
    got = {g.variable: g for g in analyze_source(
        "import keras\nfrom keras import layers\n"
        "inner = keras.Sequential([layers.Dense(4)], name='inner')\n"
        "outer = keras.Sequential([keras.Input(shape=(8,)), inner, layers.Dense(2)])\n",
        "f.py").models}
    assert got["inner"].layers[0].output_shape == (None, 4)
    assert got["inner"].params == 36
    assert [(l.name, l.params) for l in got["outer"].layers] == [("inner", 36), ("dense_1", 10)]


def _analyze(source: str):
    return analyze_source("import keras\nfrom keras import layers\n" + source, "f.py")


def test_a_nested_functional_model_re_derives_shapes_on_a_more_specific_input():
    # Keras: enc(Input((12,))) is (None, 12, 8); the encoder's own output stays (None, None, 8)
    got = {g.variable: g for g in _analyze(
        "t = keras.Input((None,), dtype='int32')\n"
        "enc = keras.Model(t, layers.Embedding(50, 8)(t))\n"
        "q = keras.Input((12,), dtype='int32')\n"
        "model = keras.Model(q, layers.Dense(3)(layers.Flatten()(enc(q))))\n").models}
    rows = got["model"].layers
    assert [(l.name, l.output_shape) for l in rows] == [
        ("input_layer_1", (None, 12)), ("functional", (None, None, 8)),
        ("flatten", (None, 96)), ("dense", (None, 3))]
    assert rows[1].output_shapes == [(None, 12, 8)]  # what memory counts
    assert rows[3].params == 96 * 3 + 3
    assert got["enc"].layers[1].output_shape == (None, None, 8)


def test_nested_models_re_derive_through_shared_layers_operations_and_models():
    # Keras: outer_block([Input((10, 6)), Input((7, 6))]) -> (None, 10, 6), (None, 10, 7)
    got = {g.variable: g for g in _analyze(
        "a = keras.Input((None, 6)); b = keras.Input((None, 6))\n"
        "shared = layers.Dense(6)\n"
        "pa, pb = shared(a), shared(b)\n"
        "ctx, sc = layers.Attention()([pa, pb], return_attention_scores=True)\n"
        "inner = keras.Model([a, b], [ctx + pa, sc])\n"
        "x = keras.Input((None, 6)); y = keras.Input((None, 6))\n"
        "h, s = inner([x, y])\n"
        "h2, _ = inner([h, y])\n"
        "block = keras.Model([x, y], [h2, s])\n"
        "l = keras.Input((10, 6)); r = keras.Input((7, 6))\n"
        "seq, att = block([l, r])\n"
        "model = keras.Model([l, r], layers.Concatenate()([layers.Flatten()(seq),\n"
        "                                                 layers.Flatten()(att)]))\n").models}
    rows = {l.name: l for l in got["model"].layers}
    assert rows["flatten"].output_shape == (None, 60)
    assert rows["flatten_1"].output_shape == (None, 70)
    assert rows["concatenate"].output_shape == (None, 130)


def test_a_nested_model_refuses_an_incompatible_input():
    # Keras: "expected shape=(None, 12), found shape=(None, 10)"
    result = _analyze("i = keras.Input((12,))\n"
                      "inner = keras.Model(i, layers.Dense(3)(i))\n"
                      "j = keras.Input((10,))\n"
                      "model = keras.Model(j, inner(j))\n")
    assert any("expects input (None, 12)" in d.message for d in result.diagnostics)


def test_dict_outputs_and_inputs_are_flattened_by_sorted_key():
    # Keras 3 tree.flatten sorts dict keys: layers input, dense, label, mask; unreached
    # dict inputs listed a, b; nested [mask, {"z": label, "a": h}] flattens to mask, h, label
    got = {g.variable: g for g in _analyze(
        "inp = keras.Input((8,))\n"
        "h = layers.Dense(4)(inp)\n"
        "mask = layers.Dense(2, name='mask')(h)\n"
        "label = layers.Dense(3, name='label')(h)\n"
        "model = keras.Model(inp, {'mask': mask, 'label': label})\n"
        "nested = keras.Model(inp, [mask, {'z': label, 'a': h}])\n"
        "a = keras.Input((3,), name='a'); b = keras.Input((4,), name='b')\n"
        "by_key = keras.Model({'b': b, 'a': a}, layers.Dense(2, name='out')(a))\n").models}
    assert [l.name for l in got["model"].layers] == ["input_layer", "dense", "label", "mask"]
    assert [l.name for l in got["nested"].layers] == ["input_layer", "dense", "mask", "label"]
    assert [l.name for l in got["by_key"].layers] == ["a", "b", "out"]


def test_attention_and_additive_attention_return_their_scores():
    # Keras: scores are (*query.shape[:-1], key.shape[-2]); key defaults to the value
    got = _analyze(
        "q = keras.Input((5, 4)); v = keras.Input((7, 4)); k = keras.Input((9, 4))\n"
        "c1, s1 = layers.Attention()([q, v], return_attention_scores=True)\n"
        "c2, s2 = layers.AdditiveAttention()([q, k, k], return_attention_scores=True)\n"
        "model = keras.Model([q, v, k], [c1, s1, c2, s2])\n").models[0]
    rows = {l.name: l.output_shape for l in got.layers}
    assert rows["attention"] == [(None, 5, 4), (None, 5, 7)]
    assert rows["additive_attention"] == [(None, 5, 4), (None, 5, 9)]


def test_a_re_run_layer_keeps_its_keyword_tensors_apart_from_its_input():
    # Keras: LSTM(t, initial_state=[s, s]) inside, called on Input((6, 4)): Flatten -> 18
    got = {g.variable: g for g in _analyze(
        "t = keras.Input((None, 4)); s = keras.Input((3,))\n"
        "h = layers.LSTM(3, return_sequences=True)(t, initial_state=[s, s])\n"
        "enc = keras.Model([t, s], h)\n"
        "q = keras.Input((6, 4)); s2 = keras.Input((3,))\n"
        "model = keras.Model([q, s2], layers.Flatten()(enc([q, s2])))\n").models}
    assert [(l.name, l.output_shape) for l in got["model"].layers][2:] == [
        ("functional", (None, None, 3)), ("flatten", (None, 18))]


def test_a_sequential_made_and_called_inside_a_factory_keeps_its_weights():
    got = analyze_source(
        "import keras\nfrom keras import layers\n"
        "def build():\n"
        "    inputs = keras.Input((32, 32, 3))\n"
        "    stem = keras.Sequential([layers.Conv2D(8, 4, strides=4), layers.LayerNormalization()],"
        " name='stem')\n"
        "    x = stem(inputs)\n"
        "    return keras.Model(inputs, layers.Dense(2)(x))\n"
        "model = build()\n", "f.py").models
    (model,) = got
    stem = model.layers[1]
    # Conv2D 4*4*3*8 + 8 = 392 and LayerNormalization 2*8, built by the call as Keras does
    assert (stem.name, stem.output_shape, stem.params) == ("stem", (None, 8, 8, 8), 392 + 16)
