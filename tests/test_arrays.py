"""NumPy data through the usual preprocessing: shapes and dtypes of abstract arrays
(``memlint.frontends.keras.arrays``), unit by unit and end to end through the frontend.

Where NumPy is installed, the dtype and shape rules are checked against it on tiny arrays
(NumPy only runs in the test, never in memlint); TensorFlow's expected shapes were taken
from TensorFlow 2.20 and are written out here.
"""

import itertools

import pytest

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras import arrays as A
from memlint.frontends.keras.values import Array, Ref, Unknown

DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "float64", "complex64", "complex128"]


def models(source: str) -> dict:
    return {graph.variable: graph for graph in analyze_source(source, "m.py").models}


def shapes(graph) -> list:
    return [(layer.type, layer.output_shape) for layer in graph.layers]


def unknown(value) -> bool:
    return isinstance(value, Unknown)


# ---------------------------------------------------------------------- dtypes and sizes

@pytest.mark.parametrize("spelling, name", [
    ("float32", "float32"), ("float", "float64"), ("double", "float64"), ("f4", "float32"),
    ("<f8", "float64"), ("uint8", "uint8"), ("int", "int64"), ("bool", "bool"),
    ("half", "float16"), ("object", "object"), ("bfloat16", "bfloat16"),
    (Ref("numpy.float32"), "float32"), (Ref("numpy.uint8"), "uint8"),
    (Ref("tensorflow.float16"), "float16"), (Ref("tensorflow.dtypes.int32"), "int32"),
    (Ref("tensorflow.bfloat16"), "bfloat16"), (Ref("builtins.float"), "float64"),
    (Ref("builtins.int"), "int64"), (Ref("builtins.bool"), "bool"),
    (Ref("numpy.float_"), "float64"), (Ref("numpy.bool_"), "bool"),
    ("no-such-type", None), (Ref("keras.layers.Dense"), None), (3, None),
])
def test_dtype_spellings(spelling, name):
    assert A.dtype_name(spelling) == name


def test_array_bytes():
    assert A.array_bytes(Array((60000, 28, 28), "uint8")) == 47_040_000
    assert A.array_bytes(Array((50000, 32, 32, 3), "float32")) == 614_400_000
    assert A.array_bytes(Array((10, 3), "float64")) == 240
    assert A.array_bytes(Array((4,), "bfloat16")) == 8
    assert A.array_bytes(Array((4,), "bool")) == 4
    assert A.array_bytes(Array((2, 2), "int32")) == 16
    assert A.array_bytes(Array((25000,), "object")) is None  # rows of any length
    assert A.array_bytes(Array((None, 784), "float32")) is None
    assert A.array_bytes(Array((5, 5))) is None  # dtype not known
    assert A.array_bytes(Array((), "float64")) == 8


def test_promotion_matches_numpy():
    np = pytest.importorskip("numpy")
    for a, b in itertools.product(DTYPES, repeat=2):
        assert A.promote(a, b) == np.result_type(a, b).name, (a, b)


@pytest.mark.parametrize("op, symbol", [("Add", "+"), ("Subtract", "-"), ("Multiply", "*"),
                                        ("TrueDivide", "/"), ("FloorDivide", "//"),
                                        ("Mod", "%"), ("Power", "**")])
def test_arithmetic_with_python_numbers_matches_numpy(op, symbol):
    np = pytest.importorskip("numpy")
    for dtype, scalar in itertools.product(DTYPES, (2, 2.0, True)):
        if dtype.startswith("complex") and symbol == "//":
            continue
        try:
            expected = eval(f"array {symbol} scalar", {"array": np.ones(2, dtype),
                                                       "scalar": scalar}).dtype.name
        except TypeError:  # NumPy refuses it (bool - bool, ...)
            continue
        assert A.binary(op, Array((2,), dtype), scalar).dtype == expected, (dtype, scalar)
        assert A.binary(op, scalar, Array((2,), dtype)).dtype == eval(
            f"scalar {symbol} array", {"array": np.ones(2, dtype), "scalar": scalar}
        ).dtype.name, (scalar, dtype)


def test_arithmetic_between_arrays_matches_numpy():
    np = pytest.importorskip("numpy")
    for a, b in itertools.product(["uint8", "int32", "float16", "float32", "float64"], repeat=2):
        got = A.binary("TrueDivide", Array((3, 1), a), Array((4,), b))
        assert got.shape == (3, 4)
        assert got.dtype == (np.ones((3, 1), a) / np.ones(4, b)).dtype.name


def test_the_usual_scalings():
    x = Array((60000, 28, 28), "uint8")
    assert A.binary("TrueDivide", x, 255.0) == Array((60000, 28, 28), "float64")
    assert A.binary("TrueDivide", x, 255) == Array((60000, 28, 28), "float64")
    as32 = Array((60000, 28, 28), "float32")
    assert A.binary("TrueDivide", as32, 255) == as32
    assert A.binary("Subtract", A.binary("Multiply", as32, 2.0), 1.0) == as32
    # a NumPy scalar (x.mean()) is not a weak Python number: float64 wins (NumPy 2)
    assert A.binary("Subtract", as32, A.reduce(Array((3,), "float64"), "mean")).dtype == "float64"
    # feature-wise normalisation: (404, 13) - (13,)
    data = Array((404, 13), "float64")
    mean = A.reduce(data, "mean", 0)
    assert mean == Array((13,), "float64")
    assert A.binary("TrueDivide", A.binary("Subtract", data, mean), mean) == data


def test_in_place_arithmetic_keeps_the_array_or_is_refused():
    x = Array((10, 3), "float32")
    assert A.binary("TrueDivide", x, 255.0, inplace=True) == x
    assert A.binary("Subtract", x, Array((3,), "float64"), inplace=True) == x
    # NumPy: Cannot cast ufunc 'divide' output from float64 to uint8
    assert unknown(A.binary("TrueDivide", Array((10, 3), "uint8"), 255, inplace=True))
    assert unknown(A.binary("Add", Array((3,), "float32"), Array((10, 3), "float32"),
                            inplace=True))


def test_broadcasting_and_unknown_dimensions():
    assert A.binary("Add", Array((5, 1, 3), "float32"), Array((4, 1), "float32")).shape == (5, 4, 3)
    assert unknown(A.binary("Add", Array((5, 3), "float32"), Array((4,), "float32")))
    # a dimension not known statically takes the other operand's size
    assert A.binary("Multiply", Array((None, 3), "float32"), Array((8, 3), "float32")).shape \
        == (8, 3)
    assert A.binary("Multiply", Array((None, 3), "float32"), 2).shape == (None, 3)
    assert A.binary("Add", Array((2,), None), 1.0) == Array((2,), None)
    assert unknown(A.binary("Add", Array((2,), "float32"), Unknown("?")))
    assert unknown(A.binary(None, Array((2,), "float32"), 1))
    assert A.compare(Array((4, 3), "float32"), 0.5) == Array((4, 3), "bool")
    assert A.unary("USub", Array((2,), "int8")) == Array((2,), "int8")


# ---------------------------------------------------------------------- indexing

KEYS = [
    0, -1, slice(1, 3), slice(None, None, 2), (Ellipsis, None), (slice(None), None),
    (0, Ellipsis), (slice(None),) * 3 + (None,), (1, slice(None), 2), (Ellipsis, 0),
    ([0, 2, 3],), ([0, 2], slice(None), [1, 2]), (slice(None), [0, 1], [1, 2]),
    (slice(None), [0, 1], slice(None), 0), (1, [0, 1]), ([True, False, True, True],),
    (None, 0, None), (slice(-2, None), Ellipsis, slice(None, 1)),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_matches_numpy(key):
    np = pytest.importorskip("numpy")
    data = np.zeros((4, 5, 6, 3), "uint8")
    assert A.getitem(Array((4, 5, 6, 3), "uint8"), key) == Array(data[key].shape, "uint8")


def test_indexing_with_index_arrays():
    x = Array((60000, 28, 28), "uint8")
    assert A.getitem(x, Array((100,), "int64")) == Array((100, 28, 28), "uint8")
    assert A.getitem(x, (Array((7, 2), "int64"), 0)) == Array((7, 2, 28), "uint8")
    # a bool mask selects rows not known statically
    assert A.getitem(x, Array((60000,), "bool")) == Array((None, 28, 28), "uint8")
    assert A.getitem(x, Ref("numpy.newaxis")) == Array((1, 60000, 28, 28), "uint8")
    assert A.getitem(x, (Ellipsis, Ref("numpy.newaxis"))).shape == (60000, 28, 28, 1)
    assert unknown(A.getitem(x, (0, 0, 0, 0)))
    assert unknown(A.getitem(x, 60000))
    assert unknown(A.getitem(x, Array((3,), "float32")))
    assert unknown(A.getitem(x, Unknown("?")))
    assert unknown(A.getitem(x, (Ellipsis, Ellipsis)))
    # rows not known: slices and ints still work
    rows = Array((None, 28, 28), "float32")
    assert A.getitem(rows, slice(0, 10)).shape == (None, 28, 28)
    assert A.getitem(rows, (slice(None), 0)).shape == (None, 28)
    assert A.getitem(rows, 5).shape == (28, 28)


# ---------------------------------------------------------------------- reshaping

def test_reshape():
    x = Array((60000, 28, 28), "uint8")
    assert A.reshape(x, (-1, 784)) == Array((60000, 784), "uint8")
    assert A.reshape(x, (60000, 784)) == Array((60000, 784), "uint8")
    assert A.reshape(x, 60000 * 784).shape == (47_040_000,)
    assert A.call_method(x, "reshape", [-1, 28, 28, 1], {}).shape == (60000, 28, 28, 1)
    assert A.call_method(x, "reshape", [(x.shape[0], 28, 28, 1)], {}).shape == (60000, 28, 28, 1)
    assert unknown(A.reshape(x, (-1, 783)))
    assert unknown(A.reshape(x, (60000, 785)))
    assert unknown(A.reshape(x, (-1, -1)))
    assert unknown(A.reshape(x, Unknown("?")))
    # rows not known: -1 stays unknown, an explicit shape is taken as written
    rows = Array((None, 28, 28), "uint8")
    assert A.reshape(rows, (-1, 784)).shape == (None, 784)
    assert A.reshape(rows, (100, 784)).shape == (100, 784)


def test_shape_functions_match_numpy():
    np = pytest.importorskip("numpy")
    data = np.zeros((4, 1, 6, 3), "float32")
    x = Array((4, 1, 6, 3), "float32")
    cases = [
        (A.transpose(x), data.T),
        (A.transpose(x, (0, 2, 3, 1)), data.transpose(0, 2, 3, 1)),
        (A.expand_dims(x, -1), np.expand_dims(data, -1)),
        (A.expand_dims(x, (0, 2)), np.expand_dims(data, (0, 2))),
        (A.squeeze(x), np.squeeze(data)),
        (A.squeeze(x, 1), np.squeeze(data, 1)),
        (A.concatenate([x, x], 0), np.concatenate([data, data], 0)),
        (A.concatenate([x, x], -1), np.concatenate([data, data], -1)),
        (A.concatenate([x, x], None), np.concatenate([data, data], None)),
        (A.stack([x, x, x], 1), np.stack([data, data, data], 1)),
        (A.vstack([Array((3,), "int64"), Array((2, 3), "int64")]),
         np.vstack([np.zeros(3, "int64"), np.zeros((2, 3), "int64")])),
        (A.hstack([Array((3,), "int64"), Array((2,), "float32")]),
         np.hstack([np.zeros(3, "int64"), np.zeros(2, "float32")])),
        (A.hstack([x, x]), np.hstack([data, data])),
        (A.call_method(x, "flatten", [], {}), data.flatten()),
        (A.call_method(x, "swapaxes", [1, 3], {}), data.swapaxes(1, 3)),
        (A.call_method(x, "repeat", [2], {"axis": 0}), data.repeat(2, axis=0)),
    ]
    for got, expected in cases:
        assert got == Array(expected.shape, expected.dtype.name)
    assert unknown(A.squeeze(x, 0))
    assert unknown(A.concatenate([x, Array((4, 2, 6, 3), "float32")], 0))
    assert unknown(A.stack([x, Array((4, 2, 6, 3), "float32")]))
    assert unknown(A.transpose(x, (0, 1)))
    assert unknown(A.expand_dims(x, 9))


def test_reductions_match_numpy():
    np = pytest.importorskip("numpy")
    for dtype in ("bool", "uint8", "int16", "int64", "float16", "float32"):
        data = np.ones((3, 4), dtype)
        x = Array((3, 4), dtype)
        for method in ("mean", "sum", "max", "min", "std", "argmax", "prod"):
            expected = getattr(data, method)(axis=0)
            assert A.call_method(x, method, [], {"axis": 0}) == Array(
                expected.shape, expected.dtype.name), (dtype, method)
            whole = getattr(data, method)()
            assert A.call_method(x, method, [], {}) == Array((), whole.dtype.name)
    assert A.call_method(Array((3, 4), "float32"), "mean", [], {"axis": 1, "keepdims": True}) \
        .shape == (3, 1)


def test_attributes():
    x = Array((60000, 28, 28), "uint8")
    assert A.get_attribute(x, "shape") == (60000, 28, 28)
    assert A.get_attribute(x, "ndim") == 3
    assert A.get_attribute(x, "dtype") == "uint8"
    assert A.get_attribute(x, "size") == 47_040_000
    assert A.get_attribute(x, "nbytes") == 47_040_000
    assert A.get_attribute(x, "T").shape == (28, 28, 60000)
    assert unknown(A.get_attribute(Array((None, 3), "uint8"), "size"))
    assert unknown(A.get_attribute(Array((3,)), "dtype"))
    assert A.length(x) == 60000
    assert unknown(A.length(Array((None, 3))))
    assert unknown(A.length(Array(())))


def test_casts():
    x = Array((10, 28, 28), "uint8")
    for dtype in ("float32", Ref("numpy.float32"), Ref("tensorflow.float32")):
        assert A.call_method(x, "astype", [dtype], {}) == Array((10, 28, 28), "float32")
    assert A.call_method(x, "astype", ["float"], {}).dtype == "float64"
    assert A.call_method(x, "astype", [Unknown("?")], {}) == Array((10, 28, 28), None)
    assert A.numpy_function("numpy.float32", [x], {}) == Array((10, 28, 28), "float32")
    assert A.numpy_function("numpy.float32", [3], {}) == 3.0
    assert A.numpy_function("numpy.asarray", [x], {"dtype": "float16"}).dtype == "float16"
    assert A.numpy_function("numpy.array", [x], {}) == x
    assert A.numpy_function("numpy.array", [[[1, 2], [3, 4], [5, 6]]], {}) == \
        Array((3, 2), "int64")
    assert A.numpy_function("numpy.array", [[1, 2.5]], {}) == Array((2,), "float64")
    assert unknown(A.numpy_function("numpy.array", [[[1, 2], [3]]], {}))  # ragged
    assert A.like("numpy.zeros_like", [x], {}) == x
    assert A.like("tensorflow.cast", [x, Ref("tensorflow.float16")], {}).dtype == "float16"
    assert A.like("tensorflow.convert_to_tensor", [x], {"dtype": "float32"}).dtype == "float32"
    assert A.like("keras.ops.cast", [x, "float16"], {}) == Array((10, 28, 28), "float16")
    assert A.like("keras.ops.convert_to_numpy", [x], {}) == x


def test_numpy_helpers():
    assert A.numpy_function("numpy.prod", [(28, 28, 1)], {}) == 784
    assert A.numpy_function("numpy.arange", [10], {}) == Array((10,), "int64")
    assert A.numpy_function("numpy.arange", [0, 1, 0.25], {}) == Array((4,), "float64")
    assert A.numpy_function("numpy.random.permutation", [60000], {}) == Array((60000,), "int64")
    assert A.numpy_function("numpy.random.choice", [100, 10], {}) == Array((10,), "int64")
    assert A.numpy_function("numpy.random.shuffle", [Array((3,), "int64")], {}) is None
    assert A.numpy_function("numpy.moveaxis", [Array((3, 4, 5), "uint8"), 0, -1], {}).shape \
        == (4, 5, 3)
    for dtype, computed in (("uint8", "float16"), ("int16", "float32"), ("int64", "float64"),
                            ("float32", "float32"), ("bool", "float16")):
        assert A.numpy_function("numpy.sqrt", [Array((3,), dtype)], {}).dtype == computed
    assert A.numpy_function("numpy.clip", [Array((3,), "float32"), 0, 1], {}).dtype == "float32"
    assert unknown(A.numpy_function("numpy.fft.fft", [Array((3,), "float32")], {}))


@pytest.mark.parametrize("name, dtype", [
    ("numpy.zeros", "float64"), ("numpy.random.rand", "float64"),
    ("numpy.random.randint", "int64"), ("tensorflow.zeros", "float32"),
    ("tensorflow.random.normal", "float32"), ("tensorflow.random.uniform", "float32"),
])
def test_constructor_dtypes(name, dtype):
    assert A.constructor_dtype(name, {}) == dtype
    assert A.constructor_dtype(name, {"dtype": "float16"}) == "float16"


# ---------------------------------------------------------------------- Keras / TF functions

def test_to_categorical():
    # Keras 3 builds it with np.zeros: float64; (N, 1) labels lose their last axis
    assert A.to_categorical([Array((50000, 1), "uint8"), 10], {}) == Array((50000, 10), "float64")
    assert A.to_categorical([Array((60000,), "uint8")], {"num_classes": 10}).shape == (60000, 10)
    assert A.to_categorical([Array((5, 2), "uint8"), 3], {}).shape == (5, 2, 3)
    assert A.to_categorical([Array((5,), "uint8"), 3], {"dtype": "float32"}).dtype == "float32"
    assert A.to_categorical([Array((5,), "uint8")], {}).shape == (5, None)
    assert A.to_categorical([[1, 2, 0]], {"num_classes": 3}).shape == (3, 3)
    assert unknown(A.to_categorical([Unknown("?"), 10], {}))


def test_pad_sequences():
    imdb = Array((25000,), "object")
    assert A.pad_sequences([imdb], {"maxlen": 200}) == Array((25000, 200), "int32")
    assert A.pad_sequences([imdb, 80], {"dtype": "float32"}) == Array((25000, 80), "float32")
    assert A.pad_sequences([imdb], {}) == Array((25000, None), "int32")
    assert A.pad_sequences([[[1, 2], [3]]], {}) == Array((2, 2), "int32")
    assert A.pad_sequences([Array((100, 30), "int64")], {}) == Array((100, 30), "int32")
    assert unknown(A.pad_sequences([imdb], {"maxlen": Unknown("?")}))


@pytest.mark.parametrize("name, args, kwargs, expected", [
    # (shapes from TensorFlow 2.20 on a (2, 37, 53, 3) uint8 batch)
    ("tensorflow.image.central_crop", [0.5], {}, ((2, 19, 27, 3), "uint8")),
    ("tensorflow.image.central_crop", [0.875], {}, ((2, 33, 47, 3), "uint8")),
    ("tensorflow.image.central_crop", [0.3], {}, ((2, 13, 17, 3), "uint8")),
    ("tensorflow.image.central_crop", [0.33], {}, ((2, 13, 19, 3), "uint8")),
    ("tensorflow.image.resize", [(20, 30)], {}, ((2, 20, 30, 3), "float32")),
    ("tensorflow.image.resize", [(20, 30)], {"method": "nearest"}, ((2, 20, 30, 3), "uint8")),
    ("tensorflow.image.resize", [(20, 30)], {"preserve_aspect_ratio": True},
     ((2, 20, 29, 3), "float32")),
    ("tensorflow.image.resize_with_pad", [64, 64], {}, ((2, 64, 64, 3), "float32")),
    ("tensorflow.image.random_crop", [(2, 20, 20, 3)], {}, ((2, 20, 20, 3), "uint8")),
    ("tensorflow.image.rgb_to_grayscale", [], {}, ((2, 37, 53, 1), "uint8")),
    ("tensorflow.image.convert_image_dtype", [Ref("tensorflow.float32")], {},
     ((2, 37, 53, 3), "float32")),
    ("tensorflow.image.rot90", [], {}, ((2, 53, 37, 3), "uint8")),
    ("tensorflow.image.per_image_standardization", [], {}, ((2, 37, 53, 3), "float32")),
    ("tensorflow.image.random_flip_left_right", [], {}, ((2, 37, 53, 3), "uint8")),
    ("tensorflow.cast", [Ref("tensorflow.float16")], {}, ((2, 37, 53, 3), "float16")),
    ("tensorflow.reshape", [(2, -1)], {}, ((2, 5883), "uint8")),
    ("tensorflow.expand_dims", [0], {}, ((1, 2, 37, 53, 3), "uint8")),
    ("tensorflow.transpose", [], {"perm": (0, 3, 1, 2)}, ((2, 3, 37, 53), "uint8")),
])
def test_tensorflow_functions_on_arrays(name, args, kwargs, expected):
    images = Array((2, 37, 53, 3), "uint8")
    assert A.handles(name, [images, *args], kwargs)
    assert A.call(None, name, [images, *args], kwargs) == Array(*expected)


def test_tensorflow_functions_edge_cases():
    image = Array((37, 53, 3), "uint8")
    resized = A.call(None, "tensorflow.image.resize", [image, (100, 100)],
                     {"preserve_aspect_ratio": True})
    assert resized == Array((70, 100, 3), "float32")  # TensorFlow 2.20: (70, 100, 3)
    assert A.call(None, "tensorflow.one_hot", [Array((5, 1), "int64"), 10], {}) == \
        Array((5, 1, 10), "float32")
    assert A.call(None, "tensorflow.io.decode_jpeg", [Unknown("bytes")], {"channels": 3}) == \
        Array((None, None, 3), "uint8")
    assert A.call(None, "tensorflow.io.decode_png", [Unknown("bytes")], {}) == \
        Array((None, None, None), "uint8")
    assert unknown(A.call(None, "tensorflow.io.decode_image", [Unknown("bytes")], {}))
    assert A.call(None, "tensorflow.io.decode_image", [Unknown("bytes")],
                  {"channels": 1, "expand_animations": False}).shape == (None, None, 1)
    assert unknown(A.call(None, "tensorflow.image.central_crop", [image, 1.5], {}))
    assert unknown(A.call(None, "tensorflow.image.resize", [Array((3, 4), "uint8"), (2, 2)], {}))
    assert A.call(None, "tensorflow.image.resize", [Array((None, None, 3), "uint8"), (224, 224)],
                  {}) == Array((224, 224, 3), "float32")
    # a crop of a catalogue's image of a size not known (keras.io's CycleGAN) is of the size
    # asked for; a size not known leaves it unknown
    assert A.call(None, "tensorflow.image.random_crop", [Unknown("image")],
                  {"size": [256, 256, 3]}) == Array((256, 256, 3))
    assert unknown(A.call(None, "tensorflow.image.random_crop", [Unknown("image"),
                                                                 Unknown("size")], {}))
    assert A.call(None, "keras.utils.normalize", [Array((3, 4), "uint8")], {}).dtype == "float64"
    assert A.call(None, "keras.utils.normalize", [Array((3, 4), "float32")], {}).dtype == "float32"
    # never on symbolic tensors: those are the model's operations (tensor_ops)
    from memlint.frontends.keras.values import Tensor
    assert not A.handles("tensorflow.reshape", [Tensor((None, 4)), (-1, 2, 2)], {})
    assert not A.handles("tensorflow.nn.relu", [image], {})


def test_tensorflow_split_and_colour_spaces_on_arrays():
    # keras.io's ESPCN takes the Y channel: tf.split(tf.image.rgb_to_yuv(x), 3, axis=-1)
    # (shapes as TensorFlow 2.20 gives them for a (2, 37, 53, 3) float32 batch)
    images = Array((2, 37, 53, 3), "float32")
    yuv = A.call(None, "tensorflow.image.rgb_to_yuv", [images], {})
    assert yuv == images
    assert A.call(None, "tensorflow.split", [yuv, 3], {"axis": -1}) == \
        [Array((2, 37, 53, 1), "float32")] * 3
    assert A.call(None, "tensorflow.split", [yuv, [1, -1], 3], {}) == \
        [Array((2, 37, 53, 1), "float32"), Array((2, 37, 53, 2), "float32")]
    assert A.call(None, "tensorflow.split", [yuv, [10, 27]], {"axis": 1}) == \
        [Array((2, 10, 53, 3), "float32"), Array((2, 27, 53, 3), "float32")]
    assert A.call(None, "tensorflow.split", [yuv, 2], {}) == [Array((1, 37, 53, 3),
                                                                   "float32")] * 2
    assert unknown(A.call(None, "tensorflow.split", [yuv, 2], {"axis": -1}))  # 3 in 2
    assert unknown(A.call(None, "tensorflow.split", [yuv, [1, 1]], {"axis": -1}))
    assert unknown(A.call(None, "tensorflow.split", [yuv, Unknown("?")], {"axis": -1}))
    assert unknown(A.call(None, "tensorflow.split", [yuv, 3], {"axis": 4}))


def test_train_test_split():
    x, y = Array((506, 13), "float64"), Array((506,), "float64")
    parts = A.train_test_split([x, y], {"test_size": 0.2, "random_state": 42})
    # scikit-learn: n_test = ceil(0.2 * 506) = 102, n_train = 404
    assert parts == [Array((404, 13), "float64"), Array((102, 13), "float64"),
                     Array((404,), "float64"), Array((102,), "float64")]
    assert [p.shape[0] for p in A.train_test_split([x], {})] == [379, 127]  # test_size 0.25
    assert [p.shape[0] for p in A.train_test_split([x], {"train_size": 100})] == [100, 406]
    assert unknown(A.train_test_split([x], {"test_size": 600}))


# ---------------------------------------------------------------------- end to end

def test_mnist_flattened_for_a_dense_network():
    got = models(
        "import numpy as np\n"
        "from tensorflow import keras\n"
        "(x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()\n"
        "x_train = x_train.reshape(-1, 784).astype('float32') / 255\n"
        "x_test = x_test.reshape(10000, 784) / 255.0\n"
        "y_train = keras.utils.to_categorical(y_train, 10)\n"
        "model = keras.Sequential([\n"
        "    keras.layers.Dense(512, activation='relu', input_shape=(x_train.shape[1],)),\n"
        "    keras.layers.Dense(y_train.shape[1], activation='softmax')])\n"
        "other = keras.Sequential([keras.layers.Dense(3, input_shape=x_test.shape[1:])])\n"
        "model.compile('adam', 'categorical_crossentropy')\n"
        "model.fit(x_train, y_train, batch_size=len(x_train) // 500)\n"
    )
    assert shapes(got["model"]) == [("Dense", (None, 512)), ("Dense", (None, 10))]
    assert shapes(got["other"]) == [("Dense", (None, 3))]
    assert got["model"].setup.batch_size == 120


@pytest.mark.parametrize("channel_axis", [
    "x_train = x_train[..., np.newaxis]",
    "x_train = x_train[:, :, :, None]",
    "x_train = np.expand_dims(x_train, -1)",
    "x_train = np.expand_dims(x_train, axis=3).astype(np.float32)",
    "x_train = x_train.reshape(x_train.shape[0], 28, 28, 1)",
    "x_train = tf.expand_dims(x_train, -1)",
    "x_train = tf.cast(x_train[..., tf.newaxis], tf.float32) / 255.0",
])
def test_mnist_with_a_channel_axis_for_a_cnn(channel_axis):
    got = models(
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "from tensorflow.keras.datasets import mnist\n"
        "(x_train, y_train), _ = mnist.load_data()\n"
        f"{channel_axis}\n"
        "model = tf.keras.Sequential([\n"
        "    tf.keras.layers.Conv2D(8, 3, input_shape=x_train.shape[1:]),\n"
        "    tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])\n"
    )
    assert shapes(got["model"]) == [("Conv2D", (None, 26, 26, 8)), ("Flatten", (None, 5408)),
                                    ("Dense", (None, 10))]


def test_cifar10_scaled_and_fed_to_a_cnn():
    got = models(
        "from tensorflow import keras\n"
        "(x_train, y_train), (x_test, y_test) = keras.datasets.cifar10.load_data()\n"
        "x_train = x_train.astype('float32') / 255.0\n"
        "model = keras.Sequential([keras.layers.Conv2D(32, 3, input_shape=x_train.shape[1:]),\n"
        "                          keras.layers.Flatten(), keras.layers.Dense(10)])\n"
        "model.compile(optimizer='adam', loss='sparse_categorical_crossentropy')\n"
        "model.fit(x_train, y_train, batch_size=128, validation_data=(x_test, y_test))\n"
    )
    graph = got["model"]
    assert shapes(graph) == [("Conv2D", (None, 30, 30, 32)), ("Flatten", (None, 28800)),
                             ("Dense", (None, 10))]
    assert graph.layers[0].trainable_params == 3 * 3 * 3 * 32 + 32
    assert graph.setup.batch_size == 128


def test_imdb_padded_for_an_embedding():
    got = models(
        "from tensorflow import keras\n"
        "from tensorflow.keras.preprocessing.sequence import pad_sequences\n"
        "max_features, maxlen = 10000, 200\n"
        "(x_train, y_train), (x_test, y_test) = keras.datasets.imdb.load_data(\n"
        "    num_words=max_features)\n"
        "x_train = pad_sequences(x_train, maxlen=maxlen)\n"
        "x_test = keras.utils.pad_sequences(x_test, maxlen)\n"
        "model = keras.Sequential([\n"
        "    keras.layers.Embedding(max_features, 32, input_length=x_train.shape[1]),\n"
        "    keras.layers.Flatten(), keras.layers.Dense(1, activation='sigmoid')])\n"
        "model.compile('rmsprop', 'binary_crossentropy')\n"
        "model.fit(x_train, y_train, batch_size=32, validation_data=(x_test, y_test))\n"
    )
    assert shapes(got["model"]) == [("Embedding", (None, 200, 32)), ("Flatten", (None, 6400)),
                                    ("Dense", (None, 1))]


def test_shuffled_and_split_data_keeps_its_rows():
    got = models(
        "import numpy as np\n"
        "import keras\n"
        "(x, y), _ = keras.datasets.fashion_mnist.load_data()\n"
        "idx = np.random.permutation(len(x))\n"
        "x, y = x[idx], y[idx]\n"
        "x_val, x_train = x[:5000] / 255.0, x[5000:] / 255.0\n"
        "x_all = np.concatenate([x_train, x_val], axis=0)\n"
        "model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(4)])\n"
        "model.fit(x_all, y, batch_size=100000)\n"
    )
    # Keras never batches more than the data has: all 60,000 rows
    assert got["model"].setup.batch_size == 60000
    assert shapes(got["model"]) == [("Flatten", (None, 784)), ("Dense", (None, 4))]


def test_array_comparisons_and_identity():
    got = models(
        "import numpy as np\n"
        "import keras\n"
        "x = np.random.rand(10, 3)\n"
        "mask = (x > 0.5).astype('float32')\n"
        "extra = None\n"
        "width = 7 if x is not None else 1\n"
        "model = keras.Sequential([keras.layers.Dense(width, input_shape=mask.shape[1:])])\n"
    )
    assert shapes(got["model"]) == [("Dense", (None, 7))]


def test_arrays_never_crash_on_unknown_parts():
    # unknown rows, unknown dtypes and unknown arguments flow through without errors
    result = analyze_source(
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "import keras\n"
        "x = np.load('data.npy')\n"
        "y = tf.io.decode_jpeg(tf.io.read_file('a.jpg'), channels=3)\n"
        "y = tf.image.resize(y, (64, 64)) / 255.0\n"
        "z = np.zeros((n, 4))\n"
        "w = y[..., ::-1] - y.mean(axis=(0, 1))\n"
        "v = -w.reshape(-1, 3).T\n"
        "u = len(np.random.rand(4, 2)) + w.ndim\n"
        "model = keras.Sequential([keras.layers.Dense(u, input_shape=w.shape)])\n",
        "m.py")
    assert not any(d.code == "MEM902" for d in result.diagnostics)
    graph = result.models[0]
    assert shapes(graph) == [("Dense", (None, 64, 64, 7))]


@pytest.mark.parametrize("source,shape", [
    ("np.tile(np.arange(200), (8, 1))", (8, 200)),
    ("np.tile(np.zeros((2, 3)), 2)", (2, 6)),
    ("np.tile(np.zeros((2, 3)), (2, 1, 1))", (2, 2, 3)),
])
def test_tile(source, shape):
    (graph,) = models("import numpy as np\nimport keras\n"
                      f"x = {source}\n"
                      "model = keras.Sequential([keras.layers.Dense(1)])\n"
                      "model.fit(x, x)\n").values()
    assert graph.setup.data_shapes == [shape[1:]]


def test_an_image_loaded_at_a_target_size():
    # Keras's docs classify one image: load_img(path, target_size=(224, 224)) ->
    # img_to_array -> expand_dims: one row, so predict() runs a batch of 1 (was Keras's
    # default 32: the image's shape was not known)
    image = A.call(None, "keras.utils.load_img", ["a.jpg"], {"target_size": (224, 224)})
    assert A.call(None, "keras.utils.img_to_array", [image], {}) == Array((224, 224, 3),
                                                                          "float32")
    gray = A.call(None, "keras.preprocessing.image.load_img", ["a.jpg"],
                  {"target_size": (28, 28), "color_mode": "grayscale"})
    assert gray == Array((28, 28, 1), "uint8")
    assert unknown(A.call(None, "keras.utils.load_img", ["a.jpg"], {}))  # the file's size
    assert unknown(A.call(None, "keras.utils.load_img", ["a.jpg", False], {}))
    (graph,) = analyze_source(
        "import numpy as np\n"
        "from keras.applications.resnet50 import ResNet50, preprocess_input\n"
        "from keras.preprocessing import image\n"
        "model = ResNet50(weights='imagenet')\n"
        "img = image.load_img('elephant.jpg', target_size=(224, 224))\n"
        "x = preprocess_input(np.expand_dims(image.img_to_array(img), axis=0))\n"
        "preds = model.predict(x)\n", "m.py").models
    assert (graph.setup.mode, graph.setup.batch_size) == ("infer", 1)


@pytest.mark.parametrize("expr", ["bool(np.zeros((1,)))", "str(x)", "max(x)", "list(x)",
                                  "sum(x)", "int(np.ones((1,)))"])
def test_builtins_over_an_array_are_not_known_from_its_shape(expr):
    # NumPy's text, truth and elements of an array are its values' (bool(np.zeros((1,)))
    # is False), which memlint does not hold: a branch on them is not taken either way
    source = ("import numpy as np\nfrom tensorflow import keras\nx = np.zeros((100, 8))\n"
              f"model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])\n"
              f"if {expr}:\n    model.add(keras.layers.Dense(3))\n")
    layers = models(source)["model"].layers
    assert len(layers) == 3 and layers[-1].output_shape is None  # the branch's layer: open


def test_the_length_of_an_array_is_its_rows():
    source = ("import numpy as np\nfrom tensorflow import keras\nx = np.zeros((100, 8))\n"
              "model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(len(x))])\n")
    assert shapes(models(source)["model"])[-1] == ("Dense", (None, 100))
