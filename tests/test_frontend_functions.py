"""Functions defined in the analysed file are inlined by the Keras frontend."""

import pytest

from memlint.frontends.keras import analyze_source


def analyze(source: str):
    return analyze_source(source, "snippet.py")


def models(source: str) -> dict:
    return {graph.variable: graph for graph in analyze(source).models}


def test_helper_with_defaults_keywords_and_return():
    got = models(
        "import keras\n"
        "from keras import layers\n"
        "def block(x, filters, kernel=3, *, strides=1):\n"
        "    x = layers.Conv2D(filters, kernel, strides=strides, padding='same')(x)\n"
        "    return layers.ReLU()(x)\n"
        "inp = keras.Input((16, 16, 3))\n"
        "x = block(inp, 8)\n"
        "x = block(x, 16, kernel=1, strides=2)\n"
        "model = keras.Model(inp, x)\n"
    )
    graph = got["model"]
    assert [layer.output_shape for layer in graph.layers] == [
        (None, 16, 16, 3), (None, 16, 16, 8), (None, 16, 16, 8), (None, 8, 8, 16),
        (None, 8, 8, 16)]
    # 3x3x3x8 + 8, then 1x1x8x16 + 16
    assert graph.params == 224 + 144


def test_star_args_and_kwargs():
    got = models(
        "import keras\n"
        "def mlp(*units, activation='relu', **extra):\n"
        "    model = keras.Sequential(**extra)\n"
        "    model.add(keras.Input((4,)))\n"
        "    for n in units:\n"
        "        model.add(keras.layers.Dense(n, activation=activation))\n"
        "    return model\n"
        "net = mlp(8, 2, name='tiny')\n"
    )
    assert got["net"].name == "tiny"
    assert got["net"].params == (4 * 8 + 8) + (8 * 2 + 2)


def test_factory_called_twice_names_layers_in_call_order():
    got = models(
        "import keras\n"
        "def make(width):\n"
        "    x = keras.Input((3,))\n"
        "    return keras.Model(x, keras.layers.Dense(width)(x))\n"
        "a = make(2)\n"
        "b = make(5)\n"
    )
    assert [layer.name for layer in got["a"].layers] == ["input_layer", "dense"]
    assert [layer.name for layer in got["b"].layers] == ["input_layer_1", "dense_1"]
    assert got["b"].params == 3 * 5 + 5


def test_locals_do_not_leak_and_globals_are_read():
    got = models(
        "import keras\n"
        "UNITS = 6\n"
        "def head(x):\n"
        "    hidden = keras.layers.Dense(UNITS)(x)\n"
        "    return keras.layers.Dense(1)(hidden)\n"
        "inp = keras.Input((2,))\n"
        "hidden = 'untouched'\n"
        "m = keras.Model(inp, head(inp))\n"
        "if hidden == 'untouched':\n"
        "    n = keras.Sequential([keras.Input((2,)), keras.layers.Dense(UNITS)])\n"
    )
    assert set(got) == {"m", "n"}
    assert got["m"].params == (2 * 6 + 6) + (6 + 1)


def test_global_statement_and_closures():
    got = models(
        "import keras\n"
        "counter = 0\n"
        "def outer(width):\n"
        "    def inner(x):\n"
        "        return keras.layers.Dense(width)(x)\n"
        "    global counter\n"
        "    counter = counter + 1\n"
        "    return inner\n"
        "dense7 = outer(7)\n"
        "x = keras.Input((3,))\n"
        "if counter == 1:\n"
        "    m = keras.Model(x, dense7(x))\n"
    )
    assert got["m"].layers[-1].output_shape == (None, 7)


def test_main_guard_and_main_function():
    got = models(
        "import keras\n"
        "def main():\n"
        "    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "    return model\n"
        "if __name__ == '__main__':\n"
        "    trained = main()\n"
    )
    assert list(got) == ["trained"]
    assert got["trained"].setup.optimizer.name == "sgd"


def test_unbounded_recursion_stops_with_a_note():
    result = analyze(
        "def f(n):\n"
        "    return f(n + 1)\n"
        "x = f(0)\n"
    )
    assert any(d.code == "MEM903" for d in result.diagnostics)


def test_wrong_arguments_give_a_note_not_an_exception():
    result = analyze(
        "def f(a, *, b):\n"
        "    return a\n"
        "x = f(1, 2)\n"
        "y = f(b=1)\n"
        "z = f(1, b=2, c=3)\n"
    )
    assert sum(d.code == "MEM900" for d in result.diagnostics) == 3


def test_while_loop_on_known_condition_and_int_shape():
    from memlint.frontends.keras import analyze_source

    result = analyze_source(
        "import keras\n"
        "from keras import backend as K\n"
        "x = inputs = keras.Input((32, 32, 3))\n"
        "filters = 8\n"
        "while K.int_shape(x)[1] > 4:\n"
        "    x = keras.layers.Conv2D(filters, 3, strides=2, padding='same')(x)\n"
        "    filters *= 2\n"
        "model = keras.Model(inputs, x)\n", "w.py")
    (graph,) = result.models
    # 32 -> 16 -> 8 -> 4: three convolutions with 8, 16 and 32 filters
    assert [layer.output_shape for layer in graph.layers[1:]] == [
        (None, 16, 16, 8), (None, 8, 8, 16), (None, 4, 4, 32)]
    assert not [d for d in result.diagnostics if d.code == "MEM900"]


def test_while_loop_on_unknown_condition_stops_with_a_note():
    from memlint.frontends.keras import analyze_source

    result = analyze_source("import os\nwhile os.environ.get('X'):\n    pass\n", "w.py")
    assert [(d.code, d.line) for d in result.diagnostics] == [("MEM900", 2)]


def test_while_true_is_bounded():
    from memlint.frontends.keras import analyze_source

    result = analyze_source("import keras\nn = 0\nwhile True:\n    n += 1\n"
                            "keras.layers.Dense(n)\n", "w.py")
    assert any(d.code == "MEM903" for d in result.diagnostics)


def test_layers_made_through_partial_getattr_and_lambdas():
    got = models(
        "import functools\nimport keras\nfrom keras import layers\n"
        "Conv = functools.partial(layers.Conv2D, padding='same', use_bias=False)\n"
        "make_norm = lambda: layers.GroupNormalization(4)\n"
        "UNITS = [16, 8]\n"
        "inp = keras.Input((8, 8, 3))\n"
        "x = Conv(8, 3)(inp)\n"
        "x = make_norm()(x)\n"
        "x = getattr(layers, 'ReLU')()(x)\n"
        "model = keras.Model(inp, x)\n"
        "mlp = keras.Sequential([keras.Input((20,))] + [layers.Dense(u) for u in UNITS])\n")
    conv = got["model"].layers[1]
    assert (conv.type, conv.output_shape, conv.params) == ("Conv2D", (None, 8, 8, 8), 216)
    assert [l.type for l in got["model"].layers] == [
        "InputLayer", "Conv2D", "GroupNormalization", "ReLU"]
    assert [l.output_shape for l in got["mlp"].layers] == [(None, 16), (None, 8)]


def test_a_generator_wrapper_guarded_by_return_none_hands_its_generator_on():
    # keras-yolo3's data_generator_wrapper: `if n == 0 or batch_size <= 0: return None` on
    # a count read from a file; the generator after the guard is what fit gets
    result = analyze(
        "import numpy as np\nimport keras\nfrom keras import layers\n"
        "lines = open('train.txt').readlines()\n"
        "def generator(lines, batch_size):\n"
        "    while True:\n"
        "        yield np.zeros((batch_size, 8)), np.zeros((batch_size, 2))\n"
        "def wrapper(lines, batch_size):\n"
        "    n = len(lines)\n"
        "    if n == 0 or batch_size <= 0: return None\n"
        "    return generator(lines, batch_size)\n"
        "model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])\n"
        "model.compile('adam', 'mse')\n"
        "model.fit(wrapper(lines, 24), steps_per_epoch=10)\n")
    (graph,) = result.models
    assert graph.setup.batch_size == 24
    assert any("the branch that returns None was not followed" in d.message
               for d in result.diagnostics)


def test_a_lambda_is_called_with_its_arguments():
    # Lambda(f, arguments={...}) calls f(inputs, **arguments) (keras-yolo3's loss layer)
    result = analyze(
        "import keras\nfrom keras import layers, ops\n"
        "def scaled(x, factor, axis=-1):\n"
        "    return ops.sum(x, axis=axis) * factor\n"
        "inputs = keras.Input((4, 6))\n"
        "out = layers.Lambda(scaled, arguments={'factor': 2.0, 'axis': 1})(inputs)\n"
        "model = keras.Model(inputs, out)\n")
    (graph,) = result.models
    assert graph.layers[-1].output_shapes == [(None, 6)]
    assert not [d for d in result.diagnostics if "do not match" in d.message]


def test_what_a_lambda_computes_comes_from_its_traced_function():
    # element-wise operations alone keep the input's shape; a slice or a concatenation
    # moves or joins elements (a sum over an axis of size 1 too); a reduction, a product
    # or a layer inside computes something else
    result = analyze(
        "import keras\nfrom keras import layers, ops\n"
        "def tripled(shape):\n    return (shape[0], 3 * shape[1])\n"
        "x = keras.Input((6,))\ny = keras.Input((6,))\n"
        "outs = [\n"
        "    layers.Lambda(lambda p: ops.abs(p[0] - p[1]) * 0.5, name='e')([x, y]),\n"
        "    layers.Lambda(lambda t: ops.concatenate([t, ops.square(t)], axis=-1),\n"
        "                  output_shape=(12,), name='j')(x),\n"
        "    layers.Lambda(lambda t: ops.relu(t[:, :3]), name='s')(x),\n"
        "    layers.Lambda(lambda t: ops.sum(ops.expand_dims(t, 1), axis=1), name='u')(x),\n"
        "    layers.Lambda(lambda t: ops.concatenate([t, t, t], axis=-1),\n"
        "                  output_shape=tripled, name='c')(x),\n"
        "    layers.Lambda(lambda t: ops.mean(t, axis=-1, keepdims=True), name='r')(x),\n"
        "    layers.Lambda(lambda t: ops.softmax(t), name='n')(x),\n"
        "    layers.Lambda(lambda t: layers.Dense(6)(t), name='d')(x)]\n"
        "model = keras.Model([x, y], layers.Concatenate()(outs))\n")
    (graph,) = result.models
    work = {layer.name: layer.config.get("work") for layer in graph.layers
            if layer.type == "Lambda"}
    assert work == {"e": "elementwise", "j": "layout", "s": "layout", "u": "layout",
                    "c": "layout", "r": None, "n": None, "d": None}


def test_a_lambda_with_a_callable_output_shape_is_traced_quietly():
    # Keras takes the shape from the callable and never traces the function: what the
    # trace would note (here a sum of shapes that do not broadcast) is not reported
    source = ("import keras\nfrom keras import layers, ops\n"
              "x = keras.Input((6,))\n"
              "out = layers.Lambda(lambda t: t + ops.ones((7,)),\n"
              "                    output_shape=lambda s: (s[0], 6))(x)\n"
              "model = keras.Model(x, layers.Dense(2)(out))\n")
    result = analyze(source)
    (graph,) = result.models
    assert graph.layers[1].output_shapes == [(None, 6)]
    assert "work" not in graph.layers[1].config
    assert not result.diagnostics, [d.message for d in result.diagnostics]


SEQUENTIAL_LAMBDAS = (
    "import tensorflow as tf\n"
    "import keras\n"
    "from keras import layers\n"
    "resized = keras.Sequential([keras.Input((None, None, 3)),\n"
    "                            layers.Lambda(lambda x: tf.image.resize(x, (64, 64))),\n"
    "                            layers.Conv2D(8, 3)])\n"
    "model = keras.Sequential([keras.Input((32, 32, 3)), layers.Lambda(lambda x: x / 255.0),\n"
    "                          layers.Conv2D(8, 3), layers.Flatten(), layers.Dense(2)])\n"
    "scale = keras.Sequential([layers.Lambda(lambda x: x * 2.0), layers.Conv2D(4, 3)])\n"
    "inputs = keras.Input((16, 16, 3))\n"
    "outer = keras.Model(inputs, layers.Dense(2)(layers.Flatten()(scale(inputs))))\n"
)


def test_a_sequentials_lambda_functions_are_traced():
    # a Lambda in a Sequential was never traced (functional calls were): "a Lambda's output
    # shape is not known without running its function", even for x / 255.0 on a known input
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    report = analyze_text(SEQUENTIAL_LAMBDAS, "m.py", Settings())
    resized, model, outer = report.models
    # one with no Input, run as another model's layer, is built on that call
    assert outer.layers[1].output_shape == (None, 14, 14, 4) and outer.params == 112 + 1570
    assert [n.output_shape for n in resized.layers] == [(None, 64, 64, 3), (None, 62, 62, 8)]
    assert [n.output_shape for n in model.layers] == [
        (None, 32, 32, 3), (None, 30, 30, 8), (None, 7200), (None, 2)]
    assert model.layers[0].config.get("work") == "elementwise"
    assert not [d.message for d in report.diagnostics if "Lambda" in d.message]


@pytest.mark.oracle
def test_a_sequentials_lambda_functions_match_keras(tmp_path):
    from tests.conftest import model_matches_keras
    model_matches_keras(tmp_path, SEQUENTIAL_LAMBDAS)
    model_matches_keras(tmp_path, SEQUENTIAL_LAMBDAS, "resized")
    model_matches_keras(tmp_path, SEQUENTIAL_LAMBDAS, "outer")
