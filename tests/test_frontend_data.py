"""Data sources as abstract values: the batch size and the input size a model is fed, read
from tf.data pipelines, Keras's dataset utilities, ImageDataGenerator flows, PyDataset /
Sequence subclasses and generator functions.  Expected values follow the TensorFlow and
Keras documentation (defaults: image_dataset_from_directory 256x256 / 32, flows 256x256 /
32, timeseries_dataset_from_array 128); the oracle tier (tests/test_data_pipelines.py) runs
the fixtures' real pipelines."""

from __future__ import annotations

import textwrap

import pytest

from memlint.analysis import analyze_text
from memlint.config import Settings
from memlint.frontends.keras import analyze_source

HEAD = textwrap.dedent("""\
    import numpy as np
    import tensorflow as tf
    import keras
    from keras import layers
    """)


def analysed(body: str, tail: str = ""):
    return analyze_source(HEAD + textwrap.dedent(body) + tail, "d.py")


def setup_of(body: str, tail: str = ""):
    (graph,) = analysed(body, tail).models
    return graph.setup


CONV = textwrap.dedent("""\
    model = keras.Sequential([keras.Input((None, None, 3)), layers.Conv2D(8, 3),
                              layers.GlobalAveragePooling2D(), layers.Dense(2)])
    model.compile("adam", "sparse_categorical_crossentropy")
    """)


@pytest.mark.parametrize("pipeline,batch,shapes", [
    ("ds = tf.data.Dataset.from_tensor_slices((np.zeros((500, 32, 32, 3)), np.zeros((500,))))"
     ".shuffle(100).batch(256)", 256, [(32, 32, 3)]),
    ("ds = tf.data.Dataset.from_tensor_slices((np.zeros((500, 32, 32, 3)), np.zeros((500,))))"
     ".batch(64, drop_remainder=True).repeat().prefetch(2)", 64, [(32, 32, 3)]),
    ("ds = tf.data.Dataset.from_tensors((np.zeros((16, 40, 40, 3)), np.zeros((16,))))",
     16, [(40, 40, 3)]),  # one element that is the whole batch
    ("ds = tf.data.Dataset.from_tensor_slices((np.zeros((500, 32, 32, 3)), np.zeros((500,))))"
     ".batch(8).unbatch().batch(24)", 24, [(32, 32, 3)]),
    ("ds = tf.data.Dataset.from_tensor_slices((np.zeros((500, 32, 32, 3)), np.zeros((500,))))"
     ".batch(8).rebatch(4)", 4, [(32, 32, 3)]),
    ("ds = keras.utils.image_dataset_from_directory('d', image_size=(180, 180), batch_size=64)",
     64, [(180, 180, 3)]),
    ("ds = keras.utils.image_dataset_from_directory('d')", 32, [(256, 256, 3)]),
    ("ds = tf.keras.preprocessing.image_dataset_from_directory('d', batch_size=16, "
     "image_size=(64, 96))", 16, [(64, 96, 3)]),
    ("gen = keras.preprocessing.image.ImageDataGenerator(rescale=1 / 255)\n"
     "ds = gen.flow_from_directory('d', target_size=(150, 150), batch_size=20, "
     "class_mode='binary')", 20, [(150, 150, 3)]),
    ("gen = tf.keras.preprocessing.image.ImageDataGenerator()\n"
     "ds = gen.flow_from_directory('d')", 32, [(256, 256, 3)]),
    ("gen = keras.preprocessing.image.ImageDataGenerator()\n"
     "ds = gen.flow(np.zeros((100, 48, 48, 3)), np.zeros((100,)), batch_size=10)",
     10, [(48, 48, 3)]),
    ("ds = tf.data.Dataset.from_tensor_slices(np.zeros((500, 32, 32, 3)))\n"
     "ds = ds.map(lambda x: (tf.image.resize(x, (64, 64)), 0)).batch(12)", 12, [(64, 64, 3)]),
])
def test_batch_and_input_size_from_the_pipeline(pipeline, batch, shapes):
    setup = setup_of(pipeline + "\n" + CONV + "model.fit(ds, epochs=3)\n")
    assert setup.batch_size == batch
    assert setup.data_shapes == shapes
    assert "fed to fit()" in setup.batch_source


def test_fit_batch_size_is_not_used_with_a_dataset():
    setup = setup_of("ds = tf.data.Dataset.from_tensor_slices((np.zeros((9, 8, 8, 3)), "
                     "np.zeros((9,)))).batch(5)\n" + CONV + "model.fit(ds)\n")
    assert setup.batch_size == 5
    assert "batch(5) at line" in setup.batch_source


def test_grayscale_and_channels_first():
    setup = setup_of("ds = keras.utils.image_dataset_from_directory('d', color_mode="
                     "'grayscale', image_size=(28, 28))\n"
                     "model = keras.Sequential([layers.Flatten(), layers.Dense(2)])\n"
                     "model.fit(ds)\n")
    assert setup.data_shapes == [(28, 28, 1)]
    (graph,) = analysed("ds = keras.utils.image_dataset_from_directory('d', color_mode="
                        "'grayscale', image_size=(28, 28))\n"
                        "model = keras.Sequential([layers.Flatten(), layers.Dense(2)])\n"
                        "model.fit(ds)\n").models
    assert graph.layers[0].output_shape == (None, 784)  # built by fit() on the data


def test_validation_data_does_not_change_the_training_batch():
    setup = setup_of("train = tf.data.Dataset.from_tensor_slices((np.zeros((9, 8, 8, 3)), "
                     "np.zeros((9,)))).batch(3)\n"
                     "val = tf.data.Dataset.from_tensor_slices((np.zeros((9, 8, 8, 3)), "
                     "np.zeros((9,)))).batch(9)\n" + CONV
                     + "model.fit(train, validation_data=val)\n")
    assert setup.batch_size == 3


def test_predict_on_a_dataset_is_inference_at_its_batch():
    setup = setup_of("ds = tf.data.Dataset.from_tensor_slices(np.zeros((99, 8, 8, 3)))"
                     ".batch(33)\n" + CONV + "model.predict(ds)\n")
    assert (setup.mode, setup.batch_size) == ("infer", 33)


def test_dict_elements_feed_a_two_input_model_in_key_order():
    body = """\
        a = keras.Input((5,), name="b_numbers")
        b = keras.Input((7,), name="a_words")
        model = keras.Model([a, b], layers.Dense(1)(layers.Concatenate()([a, b])))
        ds = tf.data.Dataset.from_tensor_slices(({"b_numbers": np.zeros((10, 5)),
                                                  "a_words": np.zeros((10, 7))},
                                                 np.zeros((10,)))).batch(2)
        model.fit(ds)
        """
    setup = setup_of(body)
    assert setup.batch_size == 2
    assert setup.data_shapes == [(7,), (5,)]  # tree.flatten order: sorted keys


def test_zip_range_and_from_generator_signature():
    setup = setup_of("""\
        images = tf.data.Dataset.from_tensor_slices(np.zeros((10, 16, 16, 3)))
        labels = tf.data.Dataset.range(10)
        ds = tf.data.Dataset.zip((images, labels)).batch(7)
        """, CONV + "model.fit(ds)\n")
    assert (setup.batch_size, setup.data_shapes) == (7, [(16, 16, 3)])
    setup = setup_of("""\
        def gen():
            while True:
                yield np.zeros((20, 20, 3)), 1
        ds = tf.data.Dataset.from_generator(gen, output_signature=(
            tf.TensorSpec(shape=(20, 20, 3), dtype=tf.float32),
            tf.TensorSpec(shape=(), dtype=tf.int32))).batch(11)
        """, CONV + "model.fit(ds)\n")
    assert (setup.batch_size, setup.data_shapes) == (11, [(20, 20, 3)])
    setup = setup_of("""\
        def gen():
            yield np.zeros((20, 20, 3)), 1
        ds = tf.data.Dataset.from_generator(gen, output_types=(tf.float32, tf.int32),
                                            output_shapes=((20, 20, 3), ())).batch(9)
        """, CONV + "model.fit(ds)\n")
    assert (setup.batch_size, setup.data_shapes) == (9, [(20, 20, 3)])


def test_padded_batch_leaves_open_dimensions_open():
    setup = setup_of("""\
        def gen():
            yield np.zeros((12,)), 1
        ds = tf.data.Dataset.from_generator(gen, output_signature=(
            tf.TensorSpec(shape=(None,), dtype=tf.int32), tf.TensorSpec(shape=(), dtype=tf.int32)))
        ds = ds.padded_batch(4, padded_shapes=([50], []))
        model = keras.Sequential([keras.Input((50,)), layers.Embedding(100, 8),
                                  layers.GlobalAveragePooling1D(), layers.Dense(1)])
        model.fit(ds)
        """)
    assert (setup.batch_size, setup.data_shapes) == (4, [(50,)])


def test_generator_function_first_yield_gives_the_batch():
    setup = setup_of("""\
        def batches(n=64):
            while True:
                yield np.random.rand(n, 28, 28, 1), np.random.randint(0, 10, size=(n,))
        model = keras.Sequential([keras.Input((28, 28, 1)), layers.Flatten(), layers.Dense(2)])
        model.fit(batches(48), steps_per_epoch=10)
        """)
    assert (setup.batch_size, setup.data_shapes) == (48, [(28, 28, 1)])
    assert "generator 'batches'" in setup.batch_source


def test_pydataset_batch_size_attribute():
    setup = setup_of("""\
        class Batches(keras.utils.PyDataset):
            def __init__(self, paths, batch_size=32, **kwargs):
                super().__init__(**kwargs)
                self.paths = paths
                self.batch_size = batch_size
            def __len__(self):
                return 10
            def __getitem__(self, idx):
                return load(self.paths[idx])
        model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
        model.fit(Batches(files, batch_size=96))
        """)
    assert setup.batch_size == 96


def test_sequence_getitem_arrays_give_batch_and_shape():
    setup = setup_of("""\
        class Batches(tf.keras.utils.Sequence):
            def __init__(self, n):
                self.n = n
            def __getitem__(self, idx):
                return np.zeros((self.n, 12)), np.zeros((self.n, 1))
        model = keras.Sequential([layers.Dense(2)])
        model.fit(Batches(40))
        """)
    assert (setup.batch_size, setup.data_shapes) == (40, [(12,)])


def test_fit_generator_takes_its_data_by_the_generator_keyword():
    # Keras 2's fit_generator(generator=...), as the widely copied data-generator tutorial
    # calls it with a Sequence subclass sized by its constructor's arguments
    setup = setup_of("""\
        class Volumes(keras.utils.Sequence):
            def __init__(self, ids, batch_size=32, dim=(32, 32, 32), n_classes=10):
                self.ids, self.batch_size, self.dim = ids, batch_size, dim
                self.n_classes = n_classes
            def __len__(self):
                return len(self.ids) // self.batch_size
            def __getitem__(self, index):
                x = np.empty((self.batch_size, *self.dim, 1))
                y = np.empty((self.batch_size,), dtype=int)
                return x, keras.utils.to_categorical(y, num_classes=self.n_classes)
        params = {'dim': (16, 16, 16), 'batch_size': 8, 'n_classes': 6}
        model = keras.Sequential([keras.Input((16, 16, 16, 1)), layers.Flatten(),
                                  layers.Dense(6, activation='softmax')])
        model.compile('adam', 'categorical_crossentropy')
        model.fit_generator(generator=Volumes(['a', 'b'], **params), workers=6)
        """)
    assert (setup.batch_size, setup.data_shapes) == (8, [(16, 16, 16, 1)])
    assert "Volumes.__getitem__(0)" in setup.batch_source


GENERATOR_SHRINKING_ITS_LAST_BATCH = """\
    import cv2
    class DataGenerator(keras.utils.PyDataset):
        def __init__(self, data, batch_size=6, dim=(768, 1024), **kwargs):
            super().__init__(**kwargs)
            self.data, self.indices = data, data.index.tolist()
            self.batch_size, self.dim = batch_size, dim
        def __len__(self):
            return int(np.ceil(len(self.data) / self.batch_size))
        def __getitem__(self, index):
            if (index + 1) * self.batch_size > len(self.indices):
                self.batch_size = len(self.indices) - index * self.batch_size
            batch = self.indices[index * self.batch_size:(index + 1) * self.batch_size]
            x = np.empty((self.batch_size, *self.dim, 3))
            for i, batch_id in enumerate(batch):
                x[i,] = self.load(self.data["image"][batch_id])
            return x.astype("float32"), x.astype("float32")
        def load(self, path):
            return cv2.resize(cv2.imread(path), self.dim)
    model = keras.Sequential([keras.Input((None, None, 3)), layers.Conv2D(3, 3, padding="same")])
    model.compile("sgd", "mse")
    model.fit(DataGenerator(frame, batch_size=32, dim=(64, 48)))
    """


def test_a_generator_that_may_shrink_its_last_batch_keeps_its_samples_shape():
    # keras.io's depth estimation: an undecided ``if`` that shrinks the last batch makes
    # its batch_size attribute unknown, not the whole generator; a loop memlint skips that
    # calls a method changing nothing of it (``self.load``) leaves it too; the batch's
    # rows are not known, its samples' shape is (it was all unknown)
    result = analysed(GENERATOR_SHRINKING_ITS_LAST_BATCH)
    (graph,) = result.models
    assert graph.setup.batch_size is None and graph.setup.data_shapes == [(64, 48, 3)]
    assert "the rows of the batches DataGenerator.__getitem__(0) returns" in \
        graph.setup.batch_source
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert any("self.batch_size is unknown after it" in n for n in notes), notes
    assert not any("self is unknown" in n for n in notes), notes
    report = analyze_text(HEAD + textwrap.dedent(GENERATOR_SHRINKING_ITS_LAST_BATCH), "d.py",
                          Settings(gpu="8GiB"))
    (warning,) = [d for d in report.diagnostics if d.code == "MEM005"]
    assert "batch size <=" in warning.message  # the largest batch that fits is given


def test_a_method_that_sets_an_attribute_is_not_followed_into_a_skipped_loop():
    # a skipped loop calling a method that changes its object forgets the object
    result = analysed(GENERATOR_SHRINKING_ITS_LAST_BATCH.replace(
        "return cv2.resize(cv2.imread(path), self.dim)",
        "self.last = path\n            return cv2.resize(cv2.imread(path), self.dim)"))
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert any("self is unknown after it" in n for n in notes), notes


def test_tfrecord_map_parse_fixed_len_features():
    setup = setup_of("""\
        spec = {"image": tf.io.FixedLenFeature([784], tf.float32),
                "label": tf.io.FixedLenFeature([], tf.int64)}
        def parse(record):
            example = tf.io.parse_single_example(record, spec)
            return example["image"], example["label"]
        ds = tf.data.TFRecordDataset(["a.tfrecord"]).map(parse).batch(128)
        model = keras.Sequential([keras.Input((784,)), layers.Dense(2)])
        model.fit(ds)
        """)
    assert (setup.batch_size, setup.data_shapes) == (128, [(784,)])


def test_timeseries_dataset_default_batch():
    setup = setup_of("""\
        series = np.zeros((1000, 7))
        ds = keras.utils.timeseries_dataset_from_array(series, series[:, 0], sequence_length=24)
        model = keras.Sequential([keras.Input((24, 7)), layers.LSTM(8), layers.Dense(1)])
        model.fit(ds)
        """)
    assert (setup.batch_size, setup.data_shapes) == (128, [(24, 7)])


def test_timeseries_dataset_of_data_read_from_a_file_keeps_its_batch():
    """keras.io's weather forecast feeds ``timeseries_dataset_from_array(x_train, y_train,
    sequence_length=..., batch_size=256)`` arrays read from a CSV: their shape is not known,
    the batch size is (it was "not known statically: pass --batch-size")."""
    setup = setup_of("""\
        import pandas as pd
        df = pd.read_csv("climate.csv")
        x_train = df[["p", "T"]].values
        ds = keras.utils.timeseries_dataset_from_array(x_train, df["T"].values,
                                                       sequence_length=120, batch_size=256)
        model = keras.Sequential([keras.Input((120, 2)), layers.LSTM(8), layers.Dense(1)])
        model.fit(ds)
        """)
    assert setup.batch_size == 256
    assert "batch_size=256" in setup.batch_source


def test_unknown_generator_batch_is_unknown_not_32():
    setup = setup_of("""\
        model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
        model.fit_generator(some_library.batches(), steps_per_epoch=3)
        """)
    assert setup.batch_size is None
    assert setup.batch_source.startswith("unknown")


def test_model_sized_by_its_data_keeps_keras_shapes_in_the_table():
    (graph,) = analysed("ds = keras.utils.image_dataset_from_directory('d', image_size="
                        "(180, 180), batch_size=64)\n" + CONV + "model.fit(ds)\n").models
    assert graph.layers[0].output_shape == (None, None, None, 8)  # as Keras shows it
    sized = graph.for_memory()
    assert sized is not graph
    assert sized.layers[0].output_shape == (None, 178, 178, 8)
    assert sized.input_shapes == [(None, 180, 180, 3)]


def test_sized_estimate_equals_the_static_twin():
    dynamic = analyze_text(HEAD + "ds = keras.utils.image_dataset_from_directory('d', "
                           "image_size=(180, 180), batch_size=64)\n" + CONV
                           + "model.fit(ds)\n", "a.py", Settings(gpu="8GiB"))
    static = analyze_text(HEAD + CONV.replace("(None, None, 3)", "(180, 180, 3)")
                          + "model.fit(np.zeros((640, 180, 180, 3)), np.zeros((640,)), "
                            "batch_size=64)\n", "b.py", Settings(gpu="8GiB"))
    assert dynamic.breakdowns[0].peak == static.breakdowns[0].peak > 0
    assert dynamic.breakdowns[0].unknown_activations == []


BACKBONE = ("base_in = keras.Input((None, None, 3))\n"
            "base = keras.Model(base_in, layers.GlobalAveragePooling2D()(layers.Conv2D(8, 3)("
            "layers.Conv2D(8, 3, activation='relu')(base_in))))\n"
            "model = keras.Sequential([base, layers.Dense(2)])\n")


def test_a_backbone_with_an_open_input_is_sized_inside_by_the_data():
    """A functional backbone built on ``(None, None, 3)`` inside a Sequential fed 180x180
    images: Keras runs it on those sizes, so the memory model sizes the calls inside it too
    (before: its inside stayed open and the estimate gave no verdict)."""
    dynamic = analyze_text(HEAD + "ds = keras.utils.image_dataset_from_directory('d', "
                           "image_size=(180, 180), batch_size=16)\n" + BACKBONE
                           + "model.compile('adam', 'mse')\nmodel.fit(ds)\n", "a.py",
                           Settings(gpu="8GiB"))
    graph = [g for g in dynamic.models if g.variable == "model"][0]
    breakdown = dynamic.breakdowns[dynamic.models.index(graph)]
    assert breakdown.unknown_activations == [] and breakdown.peak > 0
    static = analyze_text(HEAD + BACKBONE.replace("(None, None, 3)", "(180, 180, 3)")
                          + "model.compile('adam', 'mse')\n"
                            "model.fit(np.zeros((64, 180, 180, 3)), np.zeros((64, 2)), "
                            "batch_size=16)\n", "b.py", Settings(gpu="8GiB"))
    twin = [g for g in static.models if g.variable == "model"][0]
    assert breakdown.peak == static.breakdowns[static.models.index(twin)].peak


def test_host_data_records_in_memory_arrays():
    setup = setup_of("x = np.zeros((50000, 224, 224, 3), dtype='float32')\n"
                     "y = np.zeros((50000,), dtype='int64')\n"
                     "model = keras.Sequential([keras.Input((224, 224, 3)), layers.Flatten(),"
                     " layers.Dense(2)])\n"
                     "model.fit(x, y, batch_size=32)\n")
    sizes = sorted(h.bytes for h in setup.host_data)
    assert sizes == [50000 * 8, 50000 * 224 * 224 * 3 * 4]
    setup = setup_of("x = np.zeros((50000, 224, 224, 3), dtype='float32')\n"
                     "ds = tf.data.Dataset.from_tensor_slices(x).batch(32)\n"
                     "model = keras.Sequential([keras.Input((224, 224, 3)), layers.Flatten(),"
                     " layers.Dense(2)])\n"
                     "model.fit(ds)\n")
    assert [h.bytes for h in setup.host_data] == [50000 * 224 * 224 * 3 * 4]
    assert "from_tensor_slices" in setup.host_data[0].what


def test_never_a_verdict_on_an_unknown_input_size():
    report = analyze_text(HEAD + CONV + "model.fit(unknown_data, batch_size=8)\n", "u.py",
                          Settings(gpu="8GiB"))
    assert report.breakdowns[0].unknown_activations  # the open size is not guessed


def test_validation_split_rows_are_held_out_before_batching():
    setup = setup_of("x = np.zeros((32, 8))\n"
                     "model = keras.Sequential([keras.Input((8,)), layers.Dense(1)])\n"
                     "model.fit(x, np.zeros((32,)), batch_size=32, validation_split=0.25)\n")
    assert setup.batch_size == 24
    assert "validation_split=0.25" in setup.batch_source


def test_open_data_sizes_are_completed_from_the_model_input():
    setup = setup_of("ds = keras.utils.audio_dataset_from_directory('d', batch_size=16, "
                     "output_sequence_length=16000)\n"
                     "model = keras.Sequential([keras.Input((16000, 1)), layers.Conv1D(4, 9),"
                     " layers.GlobalMaxPooling1D(), layers.Dense(2)])\n"
                     "model.fit(ds)\n")
    assert (setup.batch_size, setup.data_shapes) == (16, [(16000, 1)])


def test_reports_show_the_fed_size_and_its_source():
    from memlint.reporters.json_format import model_dict
    from memlint.reporters.text import model_report

    report = analyze_text(HEAD + "ds = keras.utils.image_dataset_from_directory('d', "
                          "image_size=(180, 180), batch_size=64)\n" + CONV
                          + "model.fit(ds)\n", "a.py", Settings(gpu="8GiB"))
    graph, breakdown = report.models[0], report.breakdowns[0]
    text = "\n".join(model_report(graph, breakdown, report.budget))
    assert "input size:   (None, 180, 180, 3) (image_dataset_from_directory() at line 5" in text
    conv_row = next(line for line in text.splitlines() if line.startswith("conv2d "))
    assert "(None, None, None, 8)" in conv_row and "?" not in conv_row  # Keras shape, fed bytes
    data = model_dict(graph, breakdown, "a.py", report.budget)
    assert data["data_shapes"] == [[180, 180, 3]]
    assert data["sized_input_shapes"] == [[None, 180, 180, 3]]
    assert data["verdict"] == "fits" and data["peak_is_lower_bound"] is False


def test_input_shape_option_sizes_a_functional_model():
    source = HEAD + textwrap.dedent("""\
        inputs = keras.Input((None, None, 3))
        outputs = layers.Dense(2)(layers.GlobalAveragePooling2D()(layers.Conv2D(8, 3)(inputs)))
        model = keras.Model(inputs, outputs)
        model.fit(x, y, batch_size=4)
        """)
    report = analyze_text(source, "f.py", Settings(gpu="8GiB", input_shape=(64, 64, 3)))
    assert report.breakdowns[0].unknown_activations == []
    assert report.models[0].for_memory().layers[1].output_shape == (None, 62, 62, 8)


def test_dict_data_sizes_inputs_by_name_not_position():
    (graph,) = analysed("""\
        title = keras.Input((None,), name="title")
        body = keras.Input((None,), name="body")
        x = layers.Concatenate()([layers.GlobalAveragePooling1D()(layers.Embedding(50, 4)(title)),
                                  layers.GlobalAveragePooling1D()(layers.Embedding(50, 4)(body))])
        model = keras.Model([title, body], layers.Dense(1)(x))
        ds = tf.data.Dataset.from_tensor_slices(({"title": np.zeros((64, 10)),
                                                  "body": np.zeros((64, 100))},
                                                 np.zeros((64,)))).batch(8)
        model.fit(ds)
        """).models
    assert graph.setup.data_shapes == [(100,), (10,)]  # sorted keys: body, title
    assert graph.for_memory().input_shapes == [(None, 10), (None, 100)]  # title, body


def test_espcn_pipeline_sizes_an_open_model_with_a_sub_pixel_output():
    # keras.io's ESPCN: the Y channel (tf.image.rgb_to_yuv, tf.split) of 300x300 crops,
    # resized to 100x100, feeds an open-size model ending in tf.nn.depth_to_space; the
    # model had "outputs not known statically" and the data "H, W open"
    source = HEAD + textwrap.dedent("""\
        ds = keras.utils.image_dataset_from_directory('d', batch_size=8,
                                                      image_size=(300, 300), label_mode=None)
        ds = ds.map(lambda x: x / 255.0)
        def y_of(x, size):
            y, u, v = tf.split(tf.image.rgb_to_yuv(x), 3, axis=len(x.shape) - 1)
            return tf.image.resize(y, [size, size], method="area") if size else y
        ds = ds.map(lambda x: (y_of(x, 100), y_of(x, None)))
        inputs = keras.Input(shape=(None, None, 1))
        x = layers.Conv2D(64, 5, padding="same", activation="relu")(inputs)
        x = layers.Conv2D(9, 3, padding="same")(x)
        model = keras.Model(inputs, tf.nn.depth_to_space(x, 3))
        model.compile(optimizer="adam", loss="mse")
        model.fit(ds, epochs=100)
        """)
    result = analyze_text(source, "espcn.py", Settings(gpu="1GiB"))
    (graph,) = result.models
    assert graph.setup.batch_size == 8
    assert graph.setup.data_shapes == [(100, 100, 1)]
    assert [op.output_shapes for op in graph.operations] == [[(None, None, None, 1)]]
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM900")], \
        [(d.code, d.message) for d in result.diagnostics]
    # the sub-pixel output (8, 300, 300, 1) is the step's: the loss reads it
    assert result.breakdowns[0].batch_known and not result.breakdowns[0].unknown_activations


# keras.io's ESPCN in Keras 3: the sub-pixel step is a layer class of the file whose call()
# does arithmetic on ops.shape() of its open input
PIXEL_SHUFFLE = textwrap.dedent("""\
    from keras import ops
    class Shuffle(layers.Layer):
        def call(self, x):
            n, h, w, c = ops.shape(x)
            x = ops.reshape(x, [n, h, w, 3, 3, c // 9])
            x = ops.transpose(x, [0, 1, 3, 2, 4, 5])
            return ops.reshape(x, [n, h * 3, w * 3, c // 9])
    inputs = keras.Input((None, None, 1))
    x = layers.Conv2D(9, 3, padding="same")(layers.Conv2D(16, 3, padding="same")(inputs))
    model = keras.Model(inputs, Shuffle()(x))
    model.compile(optimizer="adam", loss="mse")
    """)


def test_a_layer_class_on_open_sizes_is_traced_again_on_the_sizes_the_data_gives():
    source = HEAD + PIXEL_SHUFFLE + textwrap.dedent("""\
        low = np.zeros((64, 100, 100, 1), "float32")
        ds = tf.data.Dataset.from_tensor_slices((low, np.zeros((64, 300, 300, 1)))).batch(8)
        model.fit(ds)
        """)
    result = analyze_text(source, "espcn3.py", Settings(gpu="1GiB"))
    (graph,), (breakdown,) = result.models, result.breakdowns
    # Keras's own shape: its stand-in for the open sizes leaves h * 3 open
    assert graph.layers[-1].output_shape == (None, None, None, 1)
    assert graph.layers[-1].unresolved is None and graph.layers[-1].params == 0
    assert graph.for_memory().layers[-1].output_shape == (None, 300, 300, 1)
    assert breakdown.batch_known and not breakdown.unknown_activations
    assert not [d for d in result.diagnostics if d.code in ("MEM005", "MEM900")], \
        [(d.code, d.message) for d in result.diagnostics]


def test_a_layer_class_inside_a_model_used_as_a_layer_is_traced_again_too():
    # keras.io's English-to-Spanish transformer: a decoder model on (None,) tokens, made of
    # layer classes, called inside the trained model on the data's 20 tokens
    source = HEAD + PIXEL_SHUFFLE.replace("model = keras.Model(inputs, Shuffle()(x))",
                                          "inner = keras.Model(inputs, Shuffle()(x))\n"
                                          "outer = keras.Input((None, None, 1))\n"
                                          "model = keras.Model(outer, inner(outer))") + \
        textwrap.dedent("""\
        low = np.zeros((64, 100, 100, 1), "float32")
        ds = tf.data.Dataset.from_tensor_slices((low, np.zeros((64, 300, 300, 1)))).batch(8)
        model.fit(ds)
        """)
    result = analyze_text(source, "nested.py", Settings(gpu="1GiB"))
    graph = next(g for g in result.models if g.variable == "model")
    breakdown = result.breakdowns[result.models.index(graph)]
    assert breakdown.batch_known and not breakdown.unknown_activations
    (inner,) = [n for n in graph.for_memory().layers if n.inner_calls]
    shuffle = inner.inner_calls[0].nodes[-1]
    assert shuffle.output_shapes == [(None, 300, 300, 1)]


def test_input_shape_sizes_a_layer_class_on_open_sizes():
    source = HEAD + PIXEL_SHUFFLE + "model.fit(x, y, batch_size=8)\n"
    report = analyze_text(source, "espcn3.py", Settings(input_shape=(40, 50, 1)))
    assert report.models[0].for_memory().layers[-1].output_shape == (None, 120, 150, 1)
    assert report.breakdowns[0].unknown_activations == []
    assert report.models[0].setup.data_source == "from --input-shape"


def test_sizes_that_cannot_be_carried_through_say_why_and_are_not_asked_for_again():
    from memlint.memory.verdict import sizing_flags

    source = HEAD + PIXEL_SHUFFLE + "model.fit(x, y, batch_size=8)\n"
    report = analyze_text(source, "espcn3.py", Settings(input_shape=(40, 50, 3)))
    (graph,), (breakdown,) = report.models, report.breakdowns
    assert breakdown.unknown_activations and graph.sized is None
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert any("--input-shape" in n and "(None, 40, 50, 3) does not match the model input "
               "(None, None, None, 1)" in n for n in notes), notes
    unknown = next(d.message for d in report.diagnostics if d.code == "MEM005")
    assert "the sizes --input-shape gives are not carried through" in unknown
    assert "Pass --input-shape" not in unknown and sizing_flags(graph, breakdown) == []


# Keras 3's fit takes a torch DataLoader on the torch backend
TORCH_DATA = textwrap.dedent("""\
    import torch
    class Frames(torch.utils.data.Dataset):
        def __init__(self, n):
            self.x = np.zeros((n, 3, 20, 24), dtype="float32")
            self.y = np.zeros((n,), dtype="int64")
        def __len__(self):
            return len(self.x)
        def __getitem__(self, i):
            return self.x[i], self.y[i]
    """)
TORCH_MODEL = textwrap.dedent("""\
    model = keras.Sequential([keras.Input((3, 20, 24)), layers.Flatten(), layers.Dense(10)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    """)


@pytest.mark.parametrize("loader, batch, origin", [
    ("torch.utils.data.DataLoader(Frames(100), batch_size=16, shuffle=True)", 16,
     "DataLoader(batch_size=16) at line"),
    ("torch.utils.data.DataLoader(Frames(100), 8)", 8, "DataLoader(batch_size=8) at line"),
    ("torch.utils.data.DataLoader(Frames(100))", 1, "DataLoader()'s default batch_size=1"),
    ("torch.utils.data.DataLoader(torch.utils.data.TensorDataset(np.zeros((50, 3, 20, 24)), "
     "np.zeros((50,))), batch_size=5)", 5, "DataLoader(batch_size=5) at line"),
])
def test_a_torch_data_loader_gives_the_batch_and_the_samples(loader, batch, origin):
    # it was "data whose batches are not known statically": no estimate
    setup = setup_of(TORCH_DATA + f"loader = {loader}\n" + TORCH_MODEL + "model.fit(loader)\n")
    assert setup.batch_size == batch
    assert setup.batch_source.startswith(origin)
    assert setup.data_shapes == [(3, 20, 24)]


def test_a_torch_data_loader_whose_batches_are_not_known_gives_no_batch():
    for loader in ("torch.utils.data.DataLoader(Frames(100), batch_size=None)",
                   "torch.utils.data.DataLoader(Frames(100), batch_sampler=sampler)",
                   "torch.utils.data.DataLoader(Frames(100), batch_size=cfg.batch)"):
        setup = setup_of(TORCH_DATA + f"loader = {loader}\n" + TORCH_MODEL +
                         "model.fit(loader)\n")
        assert setup.batch_size is None, loader


@pytest.mark.oracle
def test_a_torch_data_loader_batches_as_memlint_reads_them():
    torch = pytest.importorskip("torch")
    import numpy as np
    scope: dict = {"np": np, "torch": torch}
    exec(compile(TORCH_DATA, "torch_data.py", "exec"), scope)  # the test's own source
    for loader, shapes in (
            (torch.utils.data.DataLoader(scope["Frames"](100), batch_size=16), (16, 3, 20, 24)),
            (torch.utils.data.DataLoader(scope["Frames"](100)), (1, 3, 20, 24))):
        x, y = next(iter(loader))
        assert tuple(x.shape) == shapes and tuple(y.shape) == shapes[:1]
    setup = setup_of(TORCH_DATA + "loader = torch.utils.data.DataLoader(Frames(100), "
                     "batch_size=16)\n" + TORCH_MODEL + "model.fit(loader)\n")
    assert (setup.batch_size, *setup.data_shapes[0]) == (16, 3, 20, 24)


def test_a_torch_dataset_fed_without_a_data_loader_gives_no_batch():
    # Keras refuses it; its samples must not be read as batches (3 channels, not 3 rows)
    setup = setup_of(TORCH_DATA + TORCH_MODEL + "model.fit(Frames(100))\n")
    assert setup.batch_size is None


@pytest.mark.parametrize("convert", ["keras.ops.convert_to_numpy({})", "np.asarray({})",
                                     "keras.ops.convert_to_tensor({})",
                                     "keras.ops.cast({}, 'float32')"])
def test_a_model_s_output_converted_to_an_array_keeps_its_shape(convert):
    """A GAN's discriminator trained on real images and the generator's, converted to an
    array by Keras's ops as by NumPy: the batch is both halves, each image the generator's
    output shape."""
    result = analysed(f"""\
        generator = keras.Sequential([keras.Input((16,)), layers.Dense(8 * 8 * 3),
                                      layers.Reshape((8, 8, 3))])
        critic = keras.Sequential([keras.Input((8, 8, 3)), layers.Flatten(), layers.Dense(1)])
        critic.compile("adam", "binary_crossentropy")
        noise = np.random.normal(size=(32, 16))
        fake = {convert.format("generator(noise, training=False)")}
        real = np.random.rand(32, 8, 8, 3)
        critic.train_on_batch(np.concatenate([real, fake]), np.zeros((64, 1)))
        """)
    (critic,) = [g for g in result.models if g.variable == "critic"]
    assert (critic.setup.batch_size, critic.setup.data_shapes) == (64, [(8, 8, 3)])
