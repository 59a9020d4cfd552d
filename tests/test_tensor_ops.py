"""Shape rules of keras.ops functions and tensor indexing on symbolic tensors.

Expected shapes are what Keras 3.15 gives for the same calls on ``keras.Input((4, 6))`` and
``keras.Input((6, 5))`` (recorded from real Keras; the fixtures keras3_ops_in_functional.py
and keras3_tensor_slicing.py check the same against the oracle)."""

import pytest

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.tensor_ops import operation_shape
from memlint.frontends.keras.values import Array, Tensor
from memlint.layers.base import LayerError, UnresolvedArgument

X = Tensor((None, 4, 6))
Y = Tensor((None, 6, 5))
IMAGES = Tensor((None, 32, 32, 3))

# (name, args, kwargs, shape, whose call the oracle test makes): ESPCN's sub-pixel layer
REARRANGED = [
    ("keras.ops.depth_to_space", [Tensor((None, 8, 6, 12)), 2], {}, (None, 16, 12, 3), "k"),
    ("keras.ops.nn.space_to_depth", [Tensor((None, 8, 6, 3)), 2], {}, (None, 4, 3, 12), "k"),
    ("keras.ops.depth_to_space", [Tensor((None, 18, 8, 6)), 3],
     {"data_format": "channels_first"}, (None, 2, 24, 18), "k"),
    ("tensorflow.nn.depth_to_space", [Tensor((None, 5, 7, 27)), 3], {}, (None, 15, 21, 3),
     "tf"),
    ("tensorflow.nn.space_to_depth", [Tensor((None, 6, 4, 5)), 2], {}, (None, 3, 2, 20),
     "tf"),
    ("tensorflow.depth_to_space", [Tensor((None, 4, 4, 8))], {"block_size": 2},
     (None, 8, 8, 2), "tf"),
]

CASES = [
    ("keras.ops.relu", [X], {}, (None, 4, 6)),
    ("keras.ops.mean", [X], {"axis": 1}, (None, 6)),
    ("keras.ops.sum", [X], {"axis": -1, "keepdims": True}, (None, 4, 1)),
    ("keras.ops.mean", [X], {}, ()),
    ("keras.ops.argmax", [X], {"axis": -1}, (None, 4)),
    ("keras.ops.matmul", [X, Y], {}, (None, 4, 5)),
    ("keras.ops.reshape", [X, (-1, 24)], {}, (None, 24)),
    ("keras.ops.transpose", [X, (0, 2, 1)], {}, (None, 6, 4)),
    ("keras.ops.expand_dims", [X, 1], {}, (None, 1, 4, 6)),
    ("keras.ops.concatenate", [[X, X]], {"axis": -1}, (None, 4, 12)),
    ("keras.ops.stack", [[X, X]], {"axis": 1}, (None, 2, 4, 6)),
    ("keras.ops.einsum", ["bij,bjk->bik", X, Y], {}, (None, 4, 5)),
    ("keras.ops.tile", [X, (1, 2, 1)], {}, (None, 8, 6)),
    ("keras.ops.repeat", [X, 2], {"axis": 1}, (None, 8, 6)),
    ("keras.ops.pad", [X, ((0, 0), (1, 1), (0, 0))], {}, (None, 6, 6)),
    ("keras.ops.split", [X, 2], {"axis": -1}, [(None, 4, 3), (None, 4, 3)]),
    ("keras.ops.where", [X, X, 0.0], {}, (None, 4, 6)),
    ("keras.ops.subtract", [X, 1.0], {}, (None, 4, 6)),
    ("operator.getitem", [X, (slice(None), slice(1, 3))], {}, (None, 2, 6)),
    ("operator.getitem", [X, (slice(None), 0)], {}, (None, 6)),
    ("operator.getitem", [X, (Ellipsis, slice(None, 2))], {}, (None, 4, 2)),
    ("operator.getitem", [X, (slice(None), None, slice(None), slice(2, None))], {},
     (None, 1, 4, 4)),
    # images (None, 32, 32, 3) and (32, 32, 3): patches flattened into the last axis
    ("keras.ops.image.extract_patches", [IMAGES, 4], {}, (None, 8, 8, 48)),
    ("keras.ops.image.extract_patches", [IMAGES, (3, 3)], {"strides": 2, "padding": "same"},
     (None, 16, 16, 27)),
    ("keras.ops.image.extract_patches", [IMAGES, 3], {"strides": 2}, (None, 15, 15, 27)),
    ("keras.ops.image.extract_patches", [IMAGES, 3], {"strides": 1, "dilation_rate": 2},
     (None, 28, 28, 27)),
    ("keras.ops.image.extract_patches", [Tensor((32, 32, 3)), 4], {}, (8, 8, 48)),
    # resized to a fixed size (a Lambda in front of a pretrained backbone)
    ("keras.ops.image.resize", [IMAGES, (224, 224)], {}, (None, 224, 224, 3)),
    ("tensorflow.image.resize", [Tensor((None, None, None, 3)), [96, 128]], {},
     (None, 96, 128, 3)),
    ("tensorflow.image.resize", [Tensor((32, 32, 3)), (8, 8)], {"method": "area"}, (8, 8, 3)),
    # keras.io's shifted patch tokenization: cropped by half a patch, padded back
    ("keras.ops.image.crop_images", [IMAGES], {"top_cropping": 3, "left_cropping": 3,
                                               "target_height": 29, "target_width": 29},
     (None, 29, 29, 3)),
    ("keras.ops.image.crop_images", [IMAGES, 1, 2, 3, 4], {}, (None, 28, 26, 3)),
    ("keras.ops.image.pad_images", [Tensor((None, 29, 29, 3))],
     {"top_padding": 3, "left_padding": 3, "target_height": 32, "target_width": 32},
     (None, 32, 32, 3)),
    ("keras.ops.image.pad_images", [Tensor((29, 29, 3)), 0, 1, 2, 3], {}, (31, 33, 3)),
    ("tensorflow.image.extract_patches", [IMAGES, [1, 4, 4, 1], [1, 4, 4, 1], [1, 1, 1, 1],
                                          "VALID"], {}, (None, 8, 8, 48)),
    # element-wise functions, comparisons and reductions beyond the activations
    ("keras.ops.arccos", [X], {}, (None, 4, 6)),
    ("keras.ops.greater", [X, Tensor((1, 6))], {}, (None, 4, 6)),
    ("keras.ops.logical_and", [X, 1.0], {}, (None, 4, 6)),
    ("keras.ops.amax", [X], {"axis": 1, "keepdims": True}, (None, 1, 6)),
    ("keras.ops.cumprod", [Tensor((3, 4, 6))], {}, (72,)),
    ("keras.ops.cumsum", [X], {"axis": 1}, (None, 4, 6)),
    ("keras.ops.conj", [X], {}, (None, 4, 6)),
    ("keras.ops.linspace", [0.0, 1.0, 16], {}, (16,)),
    # shapes given as arguments, and the Fourier transforms' (real, imaginary) pairs
    ("keras.ops.broadcast_to", [Tensor((None, 1, 6)), (None, 4, 6)], {}, (None, 4, 6)),
    ("keras.ops.slice", [X, (0, 1, 0), (2, 2, 6)], {}, (2, 2, 6)),
    ("keras.ops.convert_to_tensor", [X], {}, (None, 4, 6)),
    ("keras.ops.fft2", [(X, X)], {}, [(None, 4, 6), (None, 4, 6)]),
    ("keras.ops.top_k", [X], {"k": 2}, [(None, 4, 2), (None, 4, 2)]),
    ("keras.ops.unstack", [Tensor((3, 5, 2))], {}, [(5, 2)] * 3),
    ("keras.ops.unstack", [X], {"axis": 1}, [(None, 6)] * 4),
    # TensorFlow's matrix product with a transposed operand (attention scores)
    ("tensorflow.matmul", [X, Tensor((None, 5, 6))], {"transpose_b": True}, (None, 4, 5)),
    ("tensorflow.linalg.matmul", [Tensor((None, 6, 4)), Y], {"transpose_a": True},
     (None, 4, 5)),
    ("tensorflow.matmul", [Tensor((None, 6, 4)), Tensor((None, 5, 6))],
     {"adjoint_a": True, "adjoint_b": True}, (None, 4, 5)),
] + [case[:4] for case in REARRANGED]


@pytest.mark.parametrize("name,args,kwargs,expected", CASES,
                         ids=[f"{c[0].rsplit('.', 1)[-1]}-{i}" for i, c in enumerate(CASES)])
def test_operation_shapes_match_keras(name, args, kwargs, expected):
    assert operation_shape(name, args, kwargs)[1] == expected


@pytest.mark.oracle
def test_every_element_wise_and_reducing_keras_op_has_keras_shape_and_name():
    """Each ``keras.ops`` function memlint sizes element by element, by broadcasting, by
    reducing axes or as a running total gives the shape Keras gives, and its operation the
    name Keras gives it (an op class named ``Conjugate`` for ``ops.conj``)."""
    from tests.conftest import require_keras
    require_keras()
    import keras
    from memlint.frontends.keras import tensor_ops
    from memlint.frontends.keras.names import to_snake_case
    x, row = keras.KerasTensor((None, 4, 6)), keras.KerasTensor((1, 6))
    extra = {"threshold": (0.5, 0.0), "clip": (0.0, 1.0), "cast": ("float32",), "roll": (1,)}
    calls = {"_same": [((X,), {})], "_binary": [((X, Tensor((1, 6))), {})],
             "_reduce": [((X,), {"axis": 1}), ((X,), {"axis": 1, "keepdims": True})],
             "_cumulative": [((X,), {}), ((X,), {"axis": 1})]}
    checked = 0
    for name, (stem, rule) in sorted(tensor_ops.OPERATIONS.items()):
        short = name[len("keras.ops."):]
        if not name.startswith("keras.ops.") or "." in short or rule.__name__ not in calls:
            continue
        for operands, kwargs in calls[rule.__name__]:
            more = extra.get(short, ())
            made = getattr(keras.ops, short)(*(x if o is X else row for o in operands),
                                             *more, **kwargs)
            if rule.__name__ == "_cumulative" and not kwargs:
                # Keras: (None,), the batch and the rest in one axis; memlint sizes the
                # batch axis as one batch, so it leaves this unsized rather than under
                assert tuple(made.shape) == (None,)
                with pytest.raises(UnresolvedArgument):
                    operation_shape(name, [*operands, *more], kwargs)
                continue
            assert operation_shape(name, [*operands, *more], kwargs)[1] == \
                tuple(made.shape), (name, kwargs)
            assert to_snake_case(type(made._keras_history[0]).__name__) == stem, name
            checked += 1
    assert checked >= 140


@pytest.mark.oracle
@pytest.mark.parametrize("name,args", [
    ("broadcast_to", [(None, 1, 6), (None, 4, 6)]), ("slice", [(None, 4, 6), (0, 1, 0), (2, 2, 6)]),
    ("convert_to_tensor", [(None, 4, 6)]), ("fft", [[(None, 4, 6), (None, 4, 6)]]),
    ("fft2", [[(None, 4, 6), (None, 4, 6)]]), ("ifft2", [[(None, 4, 6), (None, 4, 6)]]),
    ("top_k", [(None, 4, 6), 3]), ("unstack", [(10, 5, 32)]),
])
def test_shape_argument_and_fourier_ops_have_keras_shapes_and_names(name, args):
    from tests.conftest import require_keras
    require_keras()
    import keras
    from memlint.frontends.keras.names import to_snake_case
    if isinstance(args[0], list):  # a (real, imaginary) pair
        keras_args = [tuple(keras.KerasTensor(s) for s in args[0])]
        ours = [tuple(Tensor(s) for s in args[0])]
    else:
        keras_args = [keras.KerasTensor(args[0]), *args[1:]]
        ours = [Tensor(args[0]), *args[1:]]
    made = getattr(keras.ops, name)(*keras_args)
    made = list(made) if isinstance(made, (tuple, list)) else made
    stem, shape = operation_shape("keras.ops." + name, ours, {})
    assert shape == ([tuple(m.shape) for m in made] if isinstance(made, list)
                     else tuple(made.shape))
    first = made[0] if isinstance(made, list) else made
    assert to_snake_case(type(first._keras_history[0]).__name__) == stem


@pytest.mark.oracle
@pytest.mark.parametrize("name,args,kwargs", [
    ("matmul", [(2, 4, 6), (2, 5, 6)], {"transpose_b": True}),
    ("matmul", [(2, 6, 4), (2, 6, 5)], {"transpose_a": True}),
    ("matmul", [(6, 4), (5, 6)], {"adjoint_a": True, "adjoint_b": True}),
    ("clip_by_value", [(2, 4, 6), 0.0, 1.0], {}),
    ("math.l2_normalize", [(2, 4, 6)], {"axis": -1}),
    ("math.greater_equal", [(2, 4, 6), (1, 6)], {}),
    ("pow", [(2, 4, 6), 2.0], {}),
    ("cast", [(2, 4, 6), "float16"], {}),
])
def test_tensorflow_spellings_have_tensorflow_shapes(name, args, kwargs):
    tf = pytest.importorskip("tensorflow")
    fn = tf
    for part in name.split("."):
        fn = getattr(fn, part)
    made = fn(*(tf.zeros(a) if isinstance(a, tuple) else a for a in args), **kwargs)
    ours = operation_shape("tensorflow." + name,
                           [Tensor(a) if isinstance(a, tuple) else a for a in args], kwargs)
    assert ours[1] == tuple(made.shape)


def test_an_operation_on_scalars_alone_is_a_constant_in_no_graph():
    """``ops.sqrt(ops.cast(64, "float32"))`` runs at once: a 0-d tensor that takes no name
    and sizes what divides by it (a layer's scaled attention scores)."""
    from memlint.frontends.keras.tensor_ops import constant
    assert constant("keras.ops.arccos", [0.95], {}) == Tensor(())
    assert constant("keras.ops.linspace", [0.0, 3.0, 16], {}) == Tensor((16,))
    assert constant("keras.ops.cast", [Array((60000, 28, 28))], {}) is None  # data, not sized
    assert constant("keras.ops.sqrt", ["x"], {}) is None
    result = analyze_source(
        "import keras\nfrom keras import layers, ops\n"
        "scale = ops.sqrt(ops.cast(64, 'float32'))\n"
        "angle = 2.0 * ops.exp(ops.linspace(0.0, 3.0, 64)) * ops.arccos(0.95)\n"
        "inputs = keras.Input((4, 64))\n"
        "x = layers.Dense(64)(inputs) / scale\n"
        "x = ops.sin(x * angle)\n"
        "model = keras.Model(inputs, x)\n", "f.py")
    graph = result.models[0]
    assert [op.name for op in graph.operations] == ["true_divide", "multiply", "sin"]
    assert graph.operations[-1].output_shape == (None, 4, 64)


@pytest.mark.parametrize("name,args", [
    ("keras.ops.matmul", [X, X]),  # inner dimensions 6 and 4
    ("operator.getitem", [X, (slice(None), 7)]),  # index out of range on an axis of 4
    ("keras.ops.concatenate", [[X, Y]]),  # axis 0 default: other axes differ
])
def test_inputs_keras_refuses_raise(name, args):
    with pytest.raises(LayerError):
        operation_shape(name, args, {})


@pytest.mark.oracle
@pytest.mark.parametrize("name,args,kwargs,expected,how", REARRANGED)
def test_depth_to_space_shapes_are_keras_and_tensorflow_ones(name, args, kwargs, expected,
                                                             how):
    from tests.conftest import require_keras
    require_keras()
    import keras
    shape = args[0].shape
    if how == "k":  # on a symbolic tensor, as in a functional model
        x = keras.KerasTensor(shape)
        fn = getattr(keras.ops, name.rsplit(".", 1)[-1])
        got = fn(x, *args[1:], **kwargs).shape
    else:  # TensorFlow's own kernel on a batch of 1 (its spelling is TensorFlow's)
        tf = pytest.importorskip("tensorflow")
        fn = getattr(tf.nn, name.rsplit(".", 1)[-1])
        got = (None,) + tuple(fn(tf.zeros((1,) + shape[1:]), *args[1:], **kwargs).shape)[1:]
    assert tuple(got) == expected


@pytest.mark.parametrize("name,args,kwargs", [
    ("keras.ops.depth_to_space", [Tensor((None, 8, 8, 10)), 2], {}),  # 10 channels, 4 per pixel
    ("keras.ops.space_to_depth", [Tensor((None, 7, 8, 3)), 2], {}),  # odd height
    ("tensorflow.nn.depth_to_space", [Tensor((None, 8, 8, 4)), 1], {}),  # TF needs 2 or more
    ("keras.ops.depth_to_space", [Tensor((None, 8, 12)), 2], {}),  # not 4-D
])
def test_depth_to_space_inputs_refused_raise(name, args, kwargs):
    with pytest.raises(LayerError):
        operation_shape(name, args, kwargs)


def test_the_rule_of_a_concatenation_along_the_batch_axis_sizes_no_batch():
    # the rule alone: one batch's shape would halve two batches (memlint's interpreter takes
    # a concatenation of batches to frontends/keras/batches.py first; rows of a known count
    # joined to a batch stay unknown)
    for name in ("keras.ops.concatenate", "tensorflow.concat"):
        with pytest.raises(UnresolvedArgument, match="known count and a batch"):
            operation_shape(name, [[IMAGES, IMAGES]], {"axis": 0})
    with pytest.raises(UnresolvedArgument):
        operation_shape("keras.ops.concatenate", [[IMAGES, Tensor((8, 32, 32, 3))], 0], {})
    # along another axis, or of tensors of known rows, it is sized
    assert operation_shape("keras.ops.concatenate", [[IMAGES, IMAGES]], {"axis": -1})[1] == \
        (None, 32, 32, 6)
    assert operation_shape("keras.ops.concatenate", [[Tensor((4, 6)), Tensor((2, 6))]],
                           {"axis": 0})[1] == (6, 6)


def test_extract_patches_with_unknown_sizes_or_channels_first_is_unresolved():
    with pytest.raises(UnresolvedArgument):
        operation_shape("keras.ops.image.extract_patches", [IMAGES, 4],
                        {"data_format": "channels_first"})
    with pytest.raises(UnresolvedArgument):
        operation_shape("keras.ops.image.extract_patches", [IMAGES, Tensor((None,))], {})
    with pytest.raises(LayerError):
        operation_shape("keras.ops.image.extract_patches", [IMAGES, 40], {})
    # TensorFlow's [1, rows, cols, 1] strides: Keras 3's convolution refuses them (checked
    # on the JAX backend: "window and window_strides must have the same number of
    # dimensions")
    with pytest.raises(LayerError, match=r"strides \[1, 6, 6, 1\] has 4 values"):
        operation_shape("keras.ops.image.extract_patches", [IMAGES, (6, 6)],
                        {"strides": [1, 6, 6, 1]})


def test_a_resize_of_channels_first_images_is_unresolved():
    # data_format is resize's ninth argument (images, size, interpolation, antialias,
    # crop_to_aspect_ratio, pad_to_aspect_ratio, fill_mode, fill_value, data_format)
    args = [IMAGES, (8, 8), "bilinear", False, False, False, "constant", 0.0]
    assert operation_shape("keras.ops.image.resize", args, {})[1] == (None, 8, 8, 3)
    with pytest.raises(UnresolvedArgument):
        operation_shape("keras.ops.image.resize", args + ["channels_first"], {})


def test_unknown_arguments_are_unresolved():
    with pytest.raises(UnresolvedArgument):
        operation_shape("keras.ops.reshape", [X, "not a shape"], {})


def test_operations_take_names_from_the_layer_counter():
    source = ("import keras\nfrom keras import layers, ops\n"
              "x = keras.Input((4, 6))\n"
              "y = ops.concatenate([x, x], axis=-1)\n"
              "z = layers.Concatenate()([y, y])\n"
              "m = keras.Model(x, layers.Activation('relu')(x[:, :, 3:]))\n"
              "n = keras.Model(x, z)\n")
    models = {g.variable: g for g in analyze_source(source, "f.py").models}
    assert [l.name for l in models["n"].layers] == ["input_layer", "concatenate_1"]
    assert models["n"].layers[-1].output_shape == (None, 4, 24)
    assert models["m"].layers[-1].output_shape == (None, 4, 3)


@pytest.mark.parametrize("name,args,kwargs", [
    ("keras.ops.reshape", [X, (-1, 6)], {}),  # four rows per sample into the batch axis
    ("keras.ops.reshape", [Tensor((None, None, 6)), (-1, 6)], {}),  # time into the batch
    ("tensorflow.reshape", [X, (-1, 12)], {}),
    ("keras.ops.tile", [X, (2, 1, 1)], {}),
    ("keras.ops.repeat", [X, 2], {"axis": 0}),
])
def test_reshapes_and_repeats_that_grow_the_batch_axis_are_not_sized(name, args, kwargs):
    with pytest.raises(UnresolvedArgument):
        operation_shape(name, args, kwargs)


def test_reshapes_that_keep_or_merge_samples_are_sized():
    # the batch rows stay (or fewer rows: sized at the batch, an over-estimate)
    assert operation_shape("keras.ops.reshape", [X, (-1, 24)], {})[1] == (None, 24)
    assert operation_shape("keras.ops.reshape", [X, (-1, 2, 12)], {})[1] == (None, 2, 12)
    assert operation_shape("keras.ops.reshape", [X, (-1, 48)], {})[1] == (None, 48)
    assert operation_shape("keras.ops.tile", [X, (1, 2, 1)], {})[1] == (None, 8, 6)


def test_reshapes_to_sizes_known_only_at_run_time_leave_them_open_as_keras_does():
    # ops.reshape(x, [n, h, w, 3, 3, c // 9]) with n, h, w from ops.shape() of an open
    # input: Keras's output keeps those axes open (None is not -1); two -1s stay refused
    open_maps = Tensor((None, None, None, 9))
    assert operation_shape("keras.ops.reshape", [open_maps, (None, None, None, 3, 3, 1)],
                           {})[1] == (None, None, None, 3, 3, 1)
    assert operation_shape("keras.ops.reshape", [open_maps, (None, None, -1)],
                           {})[1] == (None, None, None)
    with pytest.raises(UnresolvedArgument, match="more than one dimension is inferred"):
        operation_shape("keras.ops.reshape", [open_maps, (None, -1, -1)], {})


def test_reshapes_that_move_rows_between_the_batch_axis_and_the_others():
    from memlint.frontends.keras.batches import regrouped
    from memlint.frontends.keras.values import Batches
    clip = Tensor((None, 6, 16, 16, 3))
    assert regrouped([clip, (-1, 16, 16, 3)], {}) == (clip, (None, 16, 16, 3), 6)
    folded = Batches(Tensor((None, 32)), 6)
    assert regrouped([folded, (-1, 6, 32)], {})[1:] == ((None, 6, 32), 1)
    assert regrouped([folded, (-1, 3, 32)], {})[1:] == ((None, 3, 32), 2)
    assert regrouped([X, (-1, 6)], {})[1:] == ((None, 6), 4)
    # the rows do not divide, a dimension is open, or nothing moves: the rule decides
    assert regrouped([Tensor((None, 5, 16)), (-1, 3, 16)], {}) is None
    assert regrouped([Tensor((None, None, 16)), (-1, 16)], {}) is None
    assert regrouped([X, (-1, 24)], {}) is None


def test_a_concatenate_layer_along_the_batch_axis_holds_both_batches():
    # Keras's shape, (None, 8, 8, 3), and the layers after it hold two batches; rows of a
    # known count joined to a batch are no number of batches: not sized (Keras's shapes and
    # parameters kept)
    source = ("import keras\nfrom keras import layers\n"
              "a = keras.Input((8, 8, 3))\nb = keras.Input((8, 8, 3))\n"
              "both = layers.Concatenate(axis=0)([a, b])\n"
              "m = keras.Model([a, b], layers.Conv2D(4, 3)(both))\n"
              "c = keras.Input((3,))\n"
              "n = keras.Model(c, layers.Dense(2)(layers.Concatenate(axis=0)(\n"
              "    [c, keras.ops.ones((4, 3))])))\n")
    graphs = {g.variable: g for g in analyze_source(source, "f.py").models}
    assert [(n.name, n.output_shapes, n.call_batches) for n in graphs["m"].layers][2:] == [
        ("concatenate", [(None, 8, 8, 3)], [2]), ("conv2d", [(None, 6, 6, 4)], [2])]
    layers = graphs["n"].layers
    assert [(n.name, n.output_shapes, n.call_batches) for n in layers][1:] == [
        ("concatenate_1", [(None, 3)], [0]), ("dense", [(None, 2)], [])]
    assert graphs["n"].params == 8


def test_one_hot_labels_spread_over_an_image_by_a_flat_repeat_are_sized():
    # keras.io's conditional GAN: labels (None, 10) -> (None, 10, 1, 1) -> repeated with no
    # axis (flattened: 7,840 values a sample) -> reshaped to (None, 28, 28, 10)
    source = ("import keras\nfrom keras import layers, ops\n"
              "labels = keras.Input((10,))\n"
              "spread = ops.repeat(labels[:, :, None, None], repeats=[28 * 28])\n"
              "images = ops.reshape(spread, (-1, 28, 28, 10))\n"
              "m = keras.Model(labels, layers.Conv2D(4, 3)(images))\n")
    (graph,) = analyze_source(source, "f.py").models
    assert [(n.name, n.output_shapes) for n in graph.layers][1:] == [
        ("conv2d", [(None, 26, 26, 4)])]
    assert [(op.type, op.output_shapes, op.call_batches) for op in graph.operations][1:] == [
        ("Repeat", [(None,)], [7840]), ("Reshape", [(None, 28, 28, 10)], [])]


def test_a_tile_or_repeat_of_the_batch_axis_alone_holds_that_many_batches():
    from memlint.frontends.keras.batches import repeated
    assert repeated("keras.ops.repeat", [X, 4], {"axis": 0}) == (X, (None, 4, 6), 4)
    assert repeated("keras.ops.tile", [X, (3, 1, 1)], {}) == (X, (None, 4, 6), 3)
    # with no axis the tensor is flattened first: 4 x 6 x 5 values per sample
    assert repeated("keras.ops.repeat", [X], {"repeats": [5]}) == (X, (None,), 120)
    assert repeated("keras.ops.repeat", [Tensor((None, 4, None)), 5], {}) is None
    # along other axes too, or of rows of a known count: the rule decides
    assert repeated("keras.ops.tile", [X, (3, 2, 1)], {}) is None
    assert repeated("keras.ops.repeat", [X, 4], {"axis": 1}) is None
    assert repeated("keras.ops.repeat", [Tensor((4, 6)), 4], {"axis": 0}) is None
    source = ("import keras\nfrom keras import layers, ops\n"
              "x = keras.Input((8,))\n"
              "m = keras.Model(x, layers.Dense(16)(ops.repeat(x, 4, axis=0)))\n")
    (graph,) = analyze_source(source, "f.py").models
    assert [(n.name, n.output_shapes, n.call_batches) for n in graph.layers][1:] == [
        ("dense", [(None, 16)], [4])]
    assert [(op.name, op.output_shapes, op.call_batches) for op in graph.operations] == [
        ("repeat", [(None, 8)], [4])]
