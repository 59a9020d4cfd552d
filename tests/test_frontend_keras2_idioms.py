"""Keras 2 / TF 1 era idioms the interpreter decides: star imports, ``type(x) is list``,
``is`` on literals, globals set through ``global``, private shape attributes, the backend's
image-ordering functions and the keras.applications helpers of that era (issue 15)."""

from __future__ import annotations

import libcst as cst

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.keras_utils import obtain_input_shape
from memlint.frontends.keras.state import FileState
from memlint.frontends.keras.values import Ref, is_unknown
from tests.test_frontend_imports import analyse, write


def names(source: str) -> dict:
    interp = Interpreter(cst.parse_module(source), FileState("snippet.py"))
    interp.run()
    return interp.globals


def models(source: str) -> dict:
    return {graph.variable: graph for graph in analyze_source(source, "snippet.py").models}


# ------------------------------------------------------------------ Python semantics

def test_type_comparisons_are_decided():
    got = names("a = type([1]) is list\nb = type((1,)) in (list, tuple)\n"
                "c = type({}) is not dict\nd = type(3) == float\ne = type('s') not in (int,)\n")
    assert (got["a"], got["b"], got["c"], got["d"], got["e"]) == (True, True, False, False, True)


def test_type_of_values_memlint_does_not_model_stays_unknown():
    got = names("import keras\nx = type(keras.Input((4,))) is list\n"
                "y = type(3) is keras.KerasTensor\n")
    assert is_unknown(got["x"]) and is_unknown(got["y"])


def test_is_on_literals_behaves_like_interned_equality():
    got = names("mode = 'th'\nn = 1\na = mode is 'th'\nb = mode is not 'tf'\n"
                "c = n is 1\nd = n is True\ne = None is None\nf = 'tf' is not mode\n")
    assert [got[k] for k in "abcdef"] == [True, True, True, False, True, True]


def test_globals_assigned_through_a_global_statement():
    got = names("from keras import backend as K\n"
                "def _handle_dim_ordering():\n"
                "    global ROW_AXIS, COL_AXIS\n"
                "    global CHANNEL_AXIS\n"
                "    if K.image_dim_ordering() == 'tf':\n"
                "        ROW_AXIS, COL_AXIS, CHANNEL_AXIS = 1, 2, 3\n"
                "    else:\n"
                "        CHANNEL_AXIS, ROW_AXIS, COL_AXIS = 1, 2, 3\n"
                "    local = 5\n"
                "_handle_dim_ordering()\n")
    assert (got["ROW_AXIS"], got["COL_AXIS"], got["CHANNEL_AXIS"]) == (1, 2, 3)
    assert "local" not in got


# ------------------------------------------------------------------ star imports

def test_later_star_import_rebinds_its_names():
    got = models("from keras.layers import *\nfrom keras.models import *\n"
                 "model = Sequential([Input((8,)), Dense(4), Dropout(0.1), Dense(2)])\n"
                 "inp = Input((8,))\nfm = Model(inp, concatenate([Dense(2)(inp), inp]))\n")
    assert [layer.type for layer in got["model"].layers] == ["Dense", "Dropout", "Dense"]
    assert got["fm"].layers[-1].output_shape == (None, 10)


def test_star_import_spellings_and_unknown_library_fallback():
    got = names("from tensorflow.keras.layers import *\nfrom keras.layers.core import *\n"
                "from keras.optimizers import *\nfrom keras_contrib.layers import *\n"
                "a = Conv2D\nb = Adam\nc = CRF\nd = Input\n")
    assert got["a"] == Ref("keras.layers.Conv2D") and got["b"] == Ref("keras.optimizers.Adam")
    assert got["c"] == Ref("keras_contrib.layers.CRF") and got["d"] == Ref("keras.Input")


def test_project_star_import_honours_all_and_hands_on_library_fallbacks(tmp_path):
    write(tmp_path, {
        "blocks.py": ("from keras.layers import *\nfrom keras_contrib.layers import *\n"
                      "__all__ = ['block', '_axis']\n"
                      "def _axis():\n    return -1\n"
                      "def block(x, n):\n    x = Conv2D(n, 3, padding='same')(x)\n"
                      "    return BatchNormalization(axis=_axis())(x)\n"
                      "def hidden():\n    return 1\n"),
        "main.py": ("from keras.layers import Input\nfrom keras.models import Model\n"
                    "from blocks import *\n"
                    "inp = Input((8, 8, 3))\nmodel = Model(inp, block(inp, 4))\n"
                    "h = hidden\nax = _axis()\n"),
        "other.py": ("from blocks2 import *\nr = Conv2D\nc = CRF\nz = _private\n"),
        "blocks2.py": ("from keras.layers import *\nfrom keras_contrib.layers import *\n"
                       "_private = 1\n"),
    })
    result = analyse(tmp_path / "main.py")
    graph = result.models[0]
    assert [layer.output_shape for layer in graph.layers][-1] == (None, 8, 8, 4)
    assert not [d for d in result.diagnostics if d.code == "MEM900" and "_axis" in d.message]
    interp_globals = _globals_of(tmp_path / "other.py")
    assert interp_globals["r"] == Ref("keras.layers.Conv2D")  # public names without __all__
    assert interp_globals["c"] == Ref("keras_contrib.layers.CRF")
    assert is_unknown(interp_globals["z"])


def _globals_of(path):
    interp = Interpreter(cst.parse_module(path.read_text()), FileState(str(path)))
    interp.run()
    return interp.globals


# ------------------------------------------------------------------ shapes

SHAPES = (
    "from keras.layers import Input, Conv2D\nimport keras.backend as K\n"
    "x = Conv2D(8, 3)(Input((32, 32, 3)))\n"
    "a = x._keras_shape\nb = x.get_shape().as_list()\nc = x.shape.as_list()\n"
    "d = getattr(x, '_shape_val')\ne = x.get_shape()[3].value\nf = x.shape[0].value\n"
    "g = x.shape.ndims\nh = K.ndim(x)\ni = K.int_shape(x)[-1]\n"
    "j = K.is_keras_tensor(x)\n"
)


def test_private_and_tf1_shape_spellings():
    got = names(SHAPES)
    assert got["a"] == got["d"] == (None, 30, 30, 8)
    assert got["b"] == got["c"] == [None, 30, 30, 8]
    assert (got["e"], got["f"], got["g"], got["h"], got["i"], got["j"]) == (
        8, None, 4, 4, 8, True)


def test_image_ordering_functions_in_every_spelling():
    got = models("from keras.backend.common import set_image_dim_ordering, image_dim_ordering\n"
                 "from keras import backend as K\nfrom keras.layers import *\n"
                 "from keras.models import Model\n"
                 "set_image_dim_ordering('th')\n"
                 "axis = 1 if image_dim_ordering() == 'th' else -1\n"
                 "fmt = K.image_data_format()\n"
                 "inp = Input((3, 16, 16))\n"
                 "x = Conv2D(4, (3, 3))(inp)\nx = BatchNormalization(axis=axis)(x)\n"
                 "x = MaxPooling2D()(x)\n"
                 "model = Model(inp, x)\n")
    assert [layer.output_shape for layer in got["model"].layers][1:] == [
        (None, 4, 14, 14), (None, 4, 14, 14), (None, 4, 7, 7)]
    assert got["model"].layers[2].params == 16  # four channels on axis 1


# ------------------------------------------------------------------ applications helpers

def test_obtain_input_shape_of_keras_1_2_and_2_0():
    # include_top= (Keras 2.0): a top needs exactly the default shape, 3 channels always
    assert obtain_input_shape([None, 224, 48], {"data_format": "channels_last",
                                                "include_top": True}) == (224, 224, 3)
    assert obtain_input_shape([(64, 64, 3), 224, 48], {
        "data_format": "channels_last", "include_top": False}) == (64, 64, 3)
    assert is_unknown(obtain_input_shape([(96, 96, 3), 224, 48], {
        "data_format": "channels_last", "include_top": True}))
    assert is_unknown(obtain_input_shape([(64, 64, 1), 224, 48], {
        "data_format": "channels_last", "include_top": False}))
    # Keras 1.2's dim_ordering 'th' / 'tf', positional
    assert obtain_input_shape([None, 299, 139, "th", False], {}) == (3, None, None)
    assert obtain_input_shape([None, 299, 139, "tf", True], {}) == (299, 299, 3)
    # the later signature is unchanged: require_flatten without imagenet keeps the channels
    assert obtain_input_shape([(32, 32, 1), 224, 32, "tf", True, None], {}) is not None


def test_applications_helpers_of_keras_2():
    source = (
        "from keras.layers import Input, Conv2D, GlobalAveragePooling2D\n"
        "from keras.models import Model\nfrom keras import backend as K\n"
        "from keras.applications.resnet50 import _obtain_input_shape\n"
        "from keras.engine.topology import get_source_inputs\n"
        "from keras.utils.data_utils import get_file\nfrom keras.utils import layer_utils\n"
        "from keras.applications.imagenet_utils import decode_predictions\n"
        "shape = _obtain_input_shape(None, default_size=224, min_size=48,\n"
        "                            data_format=K.image_dim_ordering(), include_top=False)\n"
        "inp = Input(shape=shape)\n"
        "x = GlobalAveragePooling2D()(Conv2D(8, 3)(inp))\n"
        "model = Model(get_source_inputs(x), x)\n"
        "path = get_file('w.h5', 'https://example.invalid/w.h5', cache_subdir='models')\n"
        "model.load_weights(path)\nlayer_utils.convert_all_kernels_in_model(model)\n"
        "top = decode_predictions(model.predict(None))\n")
    got = names(source)
    assert got["path"] == "~/.keras/models/w.h5"
    assert len(got["model"].inputs) == 1 and got["model"].inputs[0].shape == (None, None,
                                                                              None, 3)
    result = analyze_source(source, "snippet.py")
    assert not [d for d in result.diagnostics if d.code == "MEM900"]
    assert [layer.type for layer in result.models[0].layers] == [
        "InputLayer", "Conv2D", "GlobalAveragePooling2D"]


def test_get_source_inputs_of_two_inputs_in_keras_order():
    got = names("import keras\nfrom keras.utils import get_source_inputs\n"
                "a = keras.Input((4,), name='a')\nb = keras.Input((4,), name='b')\n"
                "x = keras.layers.Add()([keras.layers.Dense(4)(b), a])\n"
                "s = get_source_inputs(x)\nt = get_source_inputs(a)\n")
    assert [t.producer[0].name for t in got["s"]] == ["b", "a"]
    assert [t.producer[0].name for t in got["t"]] == ["a"]


def test_a_function_as_keras1_merge_mode_is_named_in_one_short_line():
    from memlint.frontends.keras import analyze_source

    source = ("from keras.layers import Input, merge\na = Input(shape=(4,))\n"
              "b = Input(shape=(4,))\n"
              "c = merge([a, b], mode=lambda p: p[0] + p[1], output_shape=(4,))\n")
    messages = [d.message for d in analyze_source(source, "m.py").diagnostics]
    assert messages == ["merge(): a function as merge mode (<lambda> at line 4) is not "
                        "modelled: its output shape is not computed"]


def test_lower_case_optimizer_names_of_keras_2():
    # keras.optimizers.rmsprop(lr=..., decay=...) in Keras 2.0-2.2's CIFAR-10 example
    source = ("import keras\nfrom keras import optimizers\n"
              "from keras.models import Sequential\nfrom keras.layers import Dense\n"
              "m = Sequential([Dense(4, input_shape=(8,))])\n"
              "m.compile(loss='mse', optimizer=keras.optimizers.rmsprop(lr=1e-4, decay=1e-6))\n"
              "n = Sequential([Dense(4, input_shape=(8,))])\n"
              "n.compile(loss='mse', optimizer=optimizers.sgd(lr=0.01, momentum=0.9))\n"
              "k = Sequential([Dense(4, input_shape=(8,))])\n"
              "k.compile(loss='mse', optimizer=keras.optimizers.get('adagrad'))\n")
    got = models(source)
    assert got["m"].setup.optimizer.name == "rmsprop"
    assert (got["n"].setup.optimizer.name, got["n"].setup.optimizer.options) == (
        "sgd", {"momentum": 0.9})
    # keras.optimizers.get is not an optimizer class: memlint assumes one, and says so
    assert "assumed" in got["k"].setup.optimizer.source


def test_model_and_layer_shape_attributes():
    # model.input_shape / output_shape (Keras 3's Functional, and a Sequential with an input
    # shape); a layer's own, as Keras 2 has them (the classic fine-tuning script sizes its
    # top model with Flatten(input_shape=base_model.output_shape[1:]))
    got = names(
        "import keras\nfrom keras import layers\n"
        "a = keras.Input((8, 8, 3))\nb = keras.Input((5,))\n"
        "conv = layers.Conv2D(4, 3)\nh = layers.Flatten()(conv(a))\n"
        "net = keras.Model([a, b], [layers.Dense(2)(h), layers.Dense(7)(b)])\n"
        "one = keras.Model(a, h)\n"
        "seq = keras.Sequential([layers.Dense(6, input_shape=(3,)), layers.Dense(2)])\n"
        "bare = keras.Sequential([layers.Dense(6)])\n"
        "shapes = (net.input_shape, net.output_shape, one.output_shape, seq.input_shape,\n"
        "          seq.output_shape, conv.output_shape, conv.input_shape)\n"
        "open_ = bare.output_shape\n")
    assert got["shapes"] == ([(None, 8, 8, 3), (None, 5)], [(None, 2), (None, 7)],
                             (None, 144), (None, 3), (None, 2), (None, 6, 6, 4),
                             (None, 8, 8, 3))
    assert is_unknown(got["open_"])


def test_python_2_and_3_compatibility_spellings_of_the_builtins():
    # Keras 2's examples import range from six.moves (addition_rnn.py): the loop that adds
    # the recurrent layers ran over an unknown range, and the model lost them
    got = names("from six.moves import range, zip\nfrom past.builtins import xrange\n"
                "import six\nfrom builtins import map\n"
                "a = list(range(3))\nb = list(six.moves.range(2))\nc = list(zip([1], [2]))\n"
                "d = list(xrange(2))\ne = list(map(abs, [-1]))\n")
    assert (got["a"], got["b"], got["c"], got["d"], got["e"]) == \
        ([0, 1, 2], [0, 1], [(1, 2)], [0, 1], [1])
