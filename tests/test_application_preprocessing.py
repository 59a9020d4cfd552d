"""``keras.applications.<module>.preprocess_input`` on a symbolic tensor: the operations Keras 3
makes for each module's mode, their shapes, and what the analysis gets from them (a backbone
with a known input, so a verdict); the oracle test builds the same script with real Keras."""

from __future__ import annotations

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings
from memlint.frontends.keras import analyze_source
from tests.conftest import keras_script_result, require_keras
from tests.test_fixtures_oracle import memlint_models

HEAD = "import keras\nfrom keras import layers\n"


def _operations(body: str) -> tuple:
    result = analyze_source(HEAD + body, "m.py")
    graph = [g for g in result.models if g.variable == "model"][0]
    return [(op.name, op.type, op.output_shapes[0]) for op in graph.operations], result


def _model(call: str, shape: str = "(64, 64, 3)") -> str:
    return (f"inputs = keras.Input({shape})\nx = {call}(inputs)\n"
            "model = keras.Model(inputs, layers.Dense(2)(layers.GlobalAveragePooling2D()(x)))\n")


@pytest.mark.parametrize("module, expected", [
    ("resnet50", [("get_item", "GetItem"), ("get_item_1", "GetItem"), ("get_item_2", "GetItem"),
                  ("stack", "Stack"), ("add", "Add")]),
    ("vgg16", [("get_item", "GetItem"), ("get_item_1", "GetItem"), ("get_item_2", "GetItem"),
               ("stack", "Stack"), ("add", "Add")]),
    ("mobilenet_v2", [("true_divide", "TrueDivide"), ("subtract", "Subtract")]),
    ("xception", [("true_divide", "TrueDivide"), ("subtract", "Subtract")]),
    ("densenet", [("true_divide", "TrueDivide"), ("add", "Add"),
                  ("true_divide_1", "TrueDivide")]),
    ("efficientnet", []), ("convnext", [])])
def test_each_mode_makes_the_operations_keras_makes(module, expected):
    ops, result = _operations(_model(f"keras.applications.{module}.preprocess_input"))
    assert [(name, kind) for name, kind, _ in ops] == expected
    graph = [g for g in result.models if g.variable == "model"][0]
    assert graph.layers[-1].output_shape == (None, 2)  # known through the preprocessing
    if ops:
        assert ops[-1][2] == (None, 64, 64, 3)


def test_caffe_mode_keeps_three_channels_and_refuses_fewer():
    ops, _ = _operations(_model("keras.applications.vgg19.preprocess_input", "(32, 32, 5)"))
    assert ops[-1][2] == (None, 32, 32, 3)  # the first three channels, reversed
    _, result = _operations(_model("keras.applications.resnet.preprocess_input",
                                   "(32, 32, 2)"))
    codes = [d.code for d in result.diagnostics]
    assert "MEM901" in codes  # Keras: out-of-bounds index


def test_channels_first_and_the_generic_function():
    body = ("keras.backend.set_image_data_format('channels_first')\n"
            "inputs = keras.Input((3, 32, 32))\n"
            "x = keras.applications.imagenet_utils.preprocess_input(inputs, mode='caffe')\n"
            "y = keras.applications.imagenet_utils.preprocess_input(inputs, mode='torch')\n"
            "model = keras.Model(inputs, layers.Add()([x, y]))\n")
    ops, result = _operations(body)
    assert sorted(name for name, _, _ in ops) == [
        "add", "add_1", "get_item", "get_item_1", "get_item_2", "stack", "true_divide",
        "true_divide_1"]
    assert all(shape == (None, 3, 32, 32) for name, _, shape in ops if not name.startswith("get"))
    graph = [g for g in result.models if g.variable == "model"][0]
    assert [layer.name for layer in graph.layers][-1] == "add_2"  # the counter is shared


def test_an_unknown_mode_is_reported_and_leaves_the_model_unknown():
    body = ("inputs = keras.Input((32, 32, 3))\n"
            "x = keras.applications.imagenet_utils.preprocess_input(inputs, mode='zca')\n"
            "model = keras.Model(inputs, layers.Dense(2)(layers.Flatten()(x)))\n")
    _, result = _operations(body)
    notes = [d for d in result.diagnostics if d.code == "MEM900"]
    assert notes and "'zca'" in notes[0].message


def test_numpy_data_is_left_alone():
    body = ("import numpy as np\n"
            "x = keras.applications.resnet50.preprocess_input(np.zeros((8, 32, 32, 3)))\n"
            "model = keras.Sequential([keras.Input((32, 32, 3)), layers.Flatten(), "
            "layers.Dense(2)])\n")
    ops, result = _operations(body)
    assert ops == [] and not [d for d in result.diagnostics if d.code == "MEM901"]


TRANSFER = '''"""Transfer learning as keras.io writes it: the application's preprocess_input between the
input and a frozen backbone."""
import keras
from keras import layers

base = keras.applications.MobileNetV2(include_top=False, weights=None, input_shape=(96, 96, 3))
base.trainable = False
inputs = keras.Input(shape=(96, 96, 3))
x = keras.applications.mobilenet_v2.preprocess_input(inputs)
x = base(x, training=False)
x = layers.GlobalAveragePooling2D()(x)
model = keras.Model(inputs, layers.Dense(5)(layers.Dropout(0.2)(x)))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(None, None, batch_size=16)
'''


def test_a_backbone_after_preprocess_input_gets_a_verdict(tmp_path):
    path = tmp_path / "transfer.py"
    path.write_text(TRANSFER)
    report = analyze_file(str(path), Settings(gpu="8GiB"))
    graph = [g for g in report.models if g.variable == "model"][0]
    assert graph.layers[1].output_shape == (None, 3, 3, 1280)
    assert not [d for d in report.diagnostics if d.code == "MEM005"]  # no unknown sizes


ORACLE_SCRIPT = '''import keras
from keras import layers

inputs = keras.Input((32, 32, 3))
caffe = keras.applications.resnet50.preprocess_input(inputs)
scaled = keras.applications.mobilenet_v2.preprocess_input(inputs)
torch = keras.applications.densenet.preprocess_input(inputs)
same = keras.applications.efficientnet.preprocess_input(inputs)
joined = layers.Add()([caffe, scaled, torch, same])
model = keras.Model(inputs, layers.Dense(2)(layers.Subtract()([joined, scaled])))
'''


@pytest.mark.oracle
def test_names_and_shapes_match_keras(tmp_path):
    require_keras()
    path = tmp_path / "preprocessing.py"
    path.write_text(ORACLE_SCRIPT)
    expected = keras_script_result(path)
    ours = memlint_models(path)
    assert ours["model"]["layers"] == expected["models"]["model"]["layers"]
    assert [layer["name"] for layer in ours["model"]["layers"]][1:3] == ["add_2", "subtract_1"]


def test_on_data_in_a_map_the_element_keeps_its_shape():
    """``ds.map(lambda x, y: (preprocess_input(x), y))``: the element is float32 data of
    the same shape (three channels for caffe), so the model is still sized by its data."""
    body = ("x_ds = keras.utils.image_dataset_from_directory('imgs', image_size=(48, 40), "
            "batch_size=8)\n"
            "x_ds = x_ds.map(lambda x, y: (keras.applications.vgg16.preprocess_input(x), y))\n"
            "model = keras.Sequential([layers.Conv2D(4, 3), layers.GlobalAveragePooling2D(), "
            "layers.Dense(2)])\n"
            "model.compile('adam', 'mse')\nmodel.fit(x_ds)\n")
    result = analyze_source(HEAD + body, "m.py")
    (graph,) = result.models
    assert graph.setup.batch_size == 8
    assert graph.setup.data_shapes == [(48, 40, 3)]
    assert graph.layers[0].output_shape == (None, 46, 38, 4)  # built on the first batch
