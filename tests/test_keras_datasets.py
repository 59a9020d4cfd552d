"""``keras.datasets.<name>.load_data()``: the arrays memlint gives for each dataset
(``memlint/data/keras_datasets.yaml``), the spellings that reach them, and the catalog checked
against the installed Keras source (read as text, never imported)."""

import ast
import importlib.util
from pathlib import Path

import pytest

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.arrays import dataset_catalog, load_dataset
from memlint.frontends.keras.values import Unknown


def arrays(dataset: str, *args, data_format="channels_last", **kwargs):
    return load_dataset(dataset, list(args), kwargs, data_format)


def summary(result) -> tuple:
    """((x_train shape, dtype), (y_train ...), (x_test ...), (y_test ...))."""
    (x_train, y_train), (x_test, y_test) = result
    return tuple((a.shape, a.dtype) for a in (x_train, y_train, x_test, y_test))


@pytest.mark.parametrize("dataset, expected", [
    ("mnist", (((60000, 28, 28), "uint8"), ((60000,), "uint8"),
               ((10000, 28, 28), "uint8"), ((10000,), "uint8"))),
    ("fashion_mnist", (((60000, 28, 28), "uint8"), ((60000,), "uint8"),
                       ((10000, 28, 28), "uint8"), ((10000,), "uint8"))),
    ("cifar10", (((50000, 32, 32, 3), "uint8"), ((50000, 1), "uint8"),
                 ((10000, 32, 32, 3), "uint8"), ((10000, 1), "uint8"))),
    ("cifar100", (((50000, 32, 32, 3), "uint8"), ((50000, 1), "int64"),
                  ((10000, 32, 32, 3), "uint8"), ((10000, 1), "int64"))),
    ("imdb", (((25000,), "object"), ((25000,), "int64"),
              ((25000,), "object"), ((25000,), "int64"))),
    ("reuters", (((8982,), "object"), ((8982,), "int64"),
                 ((2246,), "object"), ((2246,), "int64"))),
    ("boston_housing", (((404, 13), "float64"), ((404,), "float64"),
                        ((102, 13), "float64"), ((102,), "float64"))),
    ("california_housing", (((16512, 8), "float32"), ((16512,), "float32"),
                            ((4128, 8), "float32"), ((4128,), "float32"))),
])
def test_default_arrays(dataset, expected):
    assert summary(arrays(dataset)) == expected


def test_arguments_that_change_the_split():
    # reuters: int(11228 * 0.9) = 10105 train rows; the rest for test
    assert summary(arrays("reuters", test_split=0.1))[0][0] == (10105,)
    assert summary(arrays("reuters", test_split=0.1))[2][0] == (1123,)
    # positional: path, num_words, skip_top, maxlen, test_split
    assert summary(arrays("reuters", "reuters.npz", 10000, 0, None, 0.5))[0][0] == (5614,)
    assert summary(arrays("boston_housing", test_split=0.3))[0][0] == (354, 13)
    assert summary(arrays("boston_housing", "b.npz", 0.0))[2][0] == (0, 13)
    assert summary(arrays("california_housing", version="small")) == (
        ((480, 8), "float32"), ((480,), "float32"), ((120, 8), "float32"), ((120,), "float32"))
    assert summary(arrays("california_housing", "small", test_split=0.5))[0][0] == (300, 8)


def test_arguments_that_keep_the_shapes():
    assert summary(arrays("cifar100", label_mode="coarse")) == summary(arrays("cifar100"))
    assert summary(arrays("cifar100", "coarse")) == summary(arrays("cifar100"))
    assert summary(arrays("imdb", num_words=10000, skip_top=20)) == summary(arrays("imdb"))
    assert summary(arrays("mnist", path="mnist.npz")) == summary(arrays("mnist"))


def test_arguments_that_drop_samples_leave_the_rows_unknown():
    assert summary(arrays("imdb", maxlen=100))[0] == ((None,), "object")
    assert summary(arrays("imdb", maxlen=100))[3] == ((None,), "int64")
    assert summary(arrays("reuters", maxlen=50))[0] == ((None,), "object")
    assert summary(arrays("imdb", maxlen=None)) == summary(arrays("imdb"))


@pytest.mark.parametrize("dataset, args, kwargs", [
    ("cifar100", [], {"label_mode": "medium"}),
    ("california_housing", [], {"version": "medium"}),
    ("boston_housing", [], {"test_split": 1.0}),
    ("california_housing", [], {"test_split": -0.1}),
    ("reuters", [], {"test_split": Unknown("?")}),
    ("mnist", ["a", "b"], {}),
    ("fashion_mnist", ["path"], {}),
])
def test_arguments_keras_refuses(dataset, args, kwargs):
    assert isinstance(load_dataset(dataset, args, kwargs), Unknown)


def test_cifar_in_channels_first():
    result = arrays("cifar10", data_format="channels_first")
    assert summary(result)[0] == ((50000, 3, 32, 32), "uint8")
    assert summary(result)[1] == ((50000, 1), "uint8")
    assert summary(arrays("mnist", data_format="channels_first"))[0][0] == (60000, 28, 28)


@pytest.mark.parametrize("load", [
    "import keras\n(x, y), _ = keras.datasets.cifar10.load_data()\n",
    "import tensorflow as tf\n(x, y), _ = tf.keras.datasets.cifar10.load_data()\n",
    "from keras.datasets import cifar10\n(x, y), _ = cifar10.load_data()\n",
    "from tensorflow.keras.datasets import cifar10\n(x, y), (xt, yt) = cifar10.load_data()\n",
    "from tensorflow.keras import datasets\n(x, y), _ = datasets.cifar10.load_data()\n",
    "import keras.datasets.cifar10 as c\n(x, y), _ = c.load_data()\n",
    "from tensorflow import keras\ntrain, test = keras.datasets.cifar10.load_data()\n"
    "x, y = train\n",
])
def test_spellings(load):
    result = analyze_source(
        load + "import keras\n"
        "model = keras.Sequential([keras.layers.Conv2D(4, 3, input_shape=x.shape[1:]),\n"
        "                          keras.layers.Dense(int(y.shape[1]) + 1)])\n"
        "model.fit(x, y, batch_size=len(x) // 1000)\n", "m.py")
    graph = result.models[0]
    assert [layer.output_shape for layer in graph.layers] == [(None, 30, 30, 4),
                                                              (None, 30, 30, 2)]
    assert graph.setup.batch_size == 50


def test_channels_first_setting_reaches_the_data():
    result = analyze_source(
        "import keras\n"
        "keras.backend.set_image_data_format('channels_first')\n"
        "(x, y), _ = keras.datasets.cifar10.load_data()\n"
        "model = keras.Sequential([keras.layers.Conv2D(4, 3, input_shape=x.shape[1:])])\n",
        "m.py")
    assert result.models[0].layers[0].output_shape == (None, 4, 30, 30)


def test_regression_datasets_end_to_end():
    result = analyze_source(
        "from tensorflow import keras\n"
        "from keras.datasets import boston_housing, california_housing\n"
        "(x, y), (xt, yt) = boston_housing.load_data()\n"
        "mean, std = x.mean(axis=0), x.std(axis=0)\n"
        "x = (x - mean) / std\n"
        "boston = keras.Sequential([keras.layers.Dense(64, input_shape=(x.shape[1],)),\n"
        "                           keras.layers.Dense(1)])\n"
        "boston.compile('rmsprop', 'mse')\n"
        "boston.fit(x, y, batch_size=512)\n"
        "(cx, cy), _ = california_housing.load_data(version='small')\n"
        "cal = keras.Sequential([keras.layers.Dense(8, input_shape=cx.shape[1:])])\n"
        "cal.fit(cx, cy / 100000, epochs=2, batch_size=1000)\n",
        "m.py")
    got = {g.variable: g for g in result.models}
    assert got["boston"].layers[0].output_shape == (None, 64)
    # Keras never batches more than the data has: 404 training rows
    assert got["boston"].setup.batch_size == 404
    assert got["cal"].setup.batch_size == 480


# ---------------------------------------------------------------------- against Keras

def _keras_datasets() -> Path:
    spec = importlib.util.find_spec("keras")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("keras is not installed")
    folder = Path(list(spec.submodule_search_locations)[0]) / "src" / "datasets"
    if not folder.is_dir():
        pytest.skip("not a Keras 3 layout (keras/src/datasets)")
    return folder


def _load_data(source: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    return next(node for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.name == "load_data")


@pytest.mark.parametrize("dataset", sorted(dataset_catalog()))
def test_catalog_matches_the_keras_source(dataset):
    facts = dataset_catalog()[dataset]
    source = (_keras_datasets() / f"{dataset}.py").read_text(encoding="utf-8")
    function = _load_data(source)
    params = [a.arg for a in function.args.args]
    assert params == facts["params"], dataset
    defaults = dict(zip(params[len(params) - len(function.args.defaults):],
                        [ast.literal_eval(d) for d in function.args.defaults]))
    for name, value in facts.get("defaults", {}).items():
        assert defaults[name] == value, (dataset, name)
    for name in facts.get("drops", []):
        assert f"if {name}:" in source and "remove_long_seq" in source
    if "total" in facts or "versions" in facts:
        assert "int(len(x" in source and "(1 - test_split))" in source
    if facts.get("checked_split"):
        assert "if not (0 <= test_split < 1):" in source
    if "versions" in facts:
        assert f"x = x[:{facts['versions']['small']}]" in source
    if facts["x"]["dtype"] == "object":
        assert 'np.array(xs[:idx], dtype="object")' in source


def test_catalog_facts_written_in_the_keras_source():
    folder = _keras_datasets()
    text = {path.stem: path.read_text(encoding="utf-8") for path in folder.glob("*.py")}
    # cifar10: uint8 buffers of 50,000 channels-first images, transposed for channels_last
    assert "num_train_samples = 50000" in text["cifar10"]
    assert 'np.empty((num_train_samples, 3, 32, 32), dtype="uint8")' in text["cifar10"]
    assert 'np.empty((num_train_samples,), dtype="uint8")' in text["cifar10"]
    assert "y_test = y_test.astype(y_train.dtype)" in text["cifar10"]
    assert "x_train.transpose(0, 2, 3, 1)" in text["cifar100"]
    assert "data.reshape(data.shape[0], 3, 32, 32)" in text["cifar"]
    # cifar100's labels stay the pickled lists until np.reshape makes them int arrays
    assert "np.reshape(y_train, (len(y_train), 1))" in text["cifar100"]
    assert ".astype(" not in text["cifar100"].split("def load_data")[1]
    # fashion_mnist: uint8 buffers, images reshaped to (len(y), 28, 28)
    assert text["fashion_mnist"].count("np.uint8") == 4
    assert "len(y_train), 28, 28" in text["fashion_mnist"]
    # the documented shapes
    for dataset in ("mnist", "fashion_mnist"):
        assert "assert x_train.shape == (60000, 28, 28)" in text[dataset]
        assert "assert y_test.shape == (10000,)" in text[dataset]
    for dataset in ("cifar10", "cifar100"):
        assert "assert x_train.shape == (50000, 32, 32, 3)" in text[dataset]
        assert "assert y_test.shape == (10000, 1)" in text[dataset]
    assert "11,228 newswires" in text["reuters"]
    assert "25,000" in text["imdb"]
    assert "20,640 samples" in text["california_housing"]
    assert "contains 600 samples" in text["california_housing"]
