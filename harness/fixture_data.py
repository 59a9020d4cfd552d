"""Stand-in data for fixture scripts and the first batch a model is fed.

Test and harness side only, never memlint: used by the Keras oracle
(``tests/oracle/keras_scripts.py``) and by ``harness/fixture_exec.py`` (the XLA CPU proxy and
the GPU harness), which execute fixture scripts with real Keras.

Data the scripts read is declared in their header and written, as stand-in data, into a
temporary working directory the script then runs in (paths stay relative, as in real code)::

    # oracle-data: images data/train classes=2 per_class=32 size=200x150 [channels=3] [format=png|jpg]
    # oracle-data: texts data/reviews classes=2 per_class=24 [words=40]
    # oracle-data: audio data/speech classes=2 per_class=8 samples=16000 [rate=16000]
    # oracle-data: tfrecord data/train.tfrecord records=256 feature=image:784:float32 feature=label:1:int64
    # oracle-data: npy data/volumes/id-{i}.npy count=100 shape=32x32x32x1 [dtype=float32]
    # oracle-data: csv data/prices.csv rows=120 columns=Date,Close,Volume

``images``/``texts``/``audio`` make one folder per class (``class_0``, ``class_1``, ...) under
the path; ``size`` is HEIGHTxWIDTH; a ``tfrecord`` feature is ``NAME:LENGTH:DTYPE`` (float32,
int64 or bytes) written as a zero ``tf.train.Example`` feature; ``npy`` writes ``count`` zero
arrays, ``{i}`` in the path numbering them; ``csv`` a table of float ramps under a header
of the named columns.  ``offline_datasets()`` makes
``keras.datasets.*.load_data`` return zero arrays of the real shapes and dtypes (no download).

``first_batch_x`` takes the first batch of ``x`` from what ``fit``/``predict``/... were given,
through Keras's own data adapters; ``build_unbuilt`` builds a model that is not built yet from
it, as ``fit`` does on its first batch.  Keras is imported only inside the functions (the
caller picks the backend first).
"""

import contextlib
import os
import re
import shlex
import shutil
import tempfile
import wave

import numpy as np

# --- the first batch a model is fed --------------------------------------------------------

# where each call takes batch_size and steps positionally (after x), Keras 3 / Keras 2 order
_POSITIONAL = {"fit": {"y": 1, "batch_size": 2}, "evaluate": {"y": 1, "batch_size": 2},
               "predict": {"batch_size": 1, "steps": 3},
               "fit_generator": {"steps_per_epoch": 1}, "predict_generator": {"steps": 1},
               "evaluate_generator": {"steps": 1}}


def call_data(args, kwargs):
    """The data a fit/predict/... call was given (``x``, or Keras 2's ``generator``)."""
    return args[0] if args else kwargs.get("x", kwargs.get("generator"))


def _argument(method, args, kwargs, name):
    if name in kwargs:
        return kwargs[name]
    index = _POSITIONAL.get(method, {}).get(name)
    return args[index] if index is not None and len(args) > index else None


def first_batch_x(method, args, kwargs):
    """The ``x`` of the first batch Keras would take from the call's data."""
    return batch_x(method, first_batch(method, args, kwargs))


def batch_x(method, batch):
    """The ``x`` of a batch :func:`first_batch` took for ``method``."""
    from keras.src.trainers.data_adapters import data_adapter_utils

    if method.endswith("_on_batch"):
        return batch  # the whole input is the batch
    return data_adapter_utils.unpack_x_y_sample_weight(batch)[0]


def first_batch(method, args, kwargs):
    """The first batch Keras would take from the call's data, as a train_step() gets it."""
    from keras.src.trainers import data_adapters
    from keras.src.trainers.data_adapters import array_slicing

    x = call_data(args, kwargs)
    if method.endswith("_on_batch"):
        return x
    y = _argument(method, args, kwargs, "y")
    sample_weight = kwargs.get("sample_weight")
    batch_size = _argument(method, args, kwargs, "batch_size")
    steps = _argument(method, args, kwargs, "steps_per_epoch" if method.startswith("fit")
                      else "steps")
    split = kwargs.get("validation_split") if method == "fit" else None
    if split and kwargs.get("validation_data") is None:  # as Trainer.fit splits arrays
        (x, y, sample_weight), _ = array_slicing.train_validation_split(
            (x, y, sample_weight), validation_split=split)
    adapter = data_adapters.get_data_adapter(x, y, sample_weight, batch_size=batch_size,
                                             steps_per_epoch=steps, shuffle=False)
    adapter.on_epoch_begin()
    try:
        return next(iter(adapter.get_numpy_iterator()))
    finally:
        with contextlib.suppress(Exception):
            adapter.on_epoch_end()


def is_subclassed(model):
    """A subclassed model (neither a Sequential nor a functional model)."""
    import keras

    return not isinstance(model, (keras.Sequential, keras.src.models.Functional))


def build_from_batch(model, x):
    """Build an unbuilt model from a batch that came from a dataset, a generator or a
    PyDataset, as Keras's fit does on its first batch (batch dimension left open)."""
    import keras

    if is_subclassed(model) or keras.tree.is_nested(x):
        model(keras.tree.map_structure(
            lambda t: keras.Input(shape=tuple(np.shape(t)[1:]),
                                  dtype=keras.backend.standardize_dtype(t.dtype)), x))
    else:
        model.build((None,) + tuple(np.shape(x)[1:]))


def trains_without_call(model) -> bool:
    """A subclassed model with no call() of its own whose own train_step() runs its models
    (keras.io's VAE): fit runs that step, and calling the model fails."""
    import keras

    kind = type(model)
    return is_subclassed(model) and kind.call is keras.Model.call and \
        not kind.train_step.__module__.startswith("keras")


def has_own_train_step(model) -> bool:
    """A subclassed model whose class defines its own train_step()."""
    return is_subclassed(model) and \
        not type(model).train_step.__module__.startswith("keras")


def build_unbuilt(model, data, first, targets=None, batch=None):
    """Build ``model`` if it is not built yet: from ``data`` when it is an array (its
    shape), else from ``first``, the first batch's ``x`` taken from it (None: left
    unbuilt).  A model that trains without a call() runs its train_step() on two samples
    (with their ``targets`` when fit was given them: the step gets ``(x, y)``), as fit
    would; so does one whose call() cannot take ``first`` while its own train_step() takes
    the whole ``batch`` (keras.io's triplet-loss siamese network hands its three images to
    an inner model)."""
    import keras

    if not model.built and hasattr(data, "shape") and trains_without_call(model):
        step_data = keras.ops.convert_to_tensor(np.asarray(data[:2]))
        if hasattr(targets, "shape"):
            step_data = (step_data, keras.ops.convert_to_tensor(np.asarray(targets[:2])))
        model.train_step(step_data)
    elif not model.built and hasattr(data, "shape"):
        if is_subclassed(model):  # Keras 3 build() does not run call(): fit would
            model(keras.Input(shape=tuple(data.shape[1:])))
        else:
            model.build((None,) + tuple(data.shape[1:]))
    elif not model.built and first is not None:
        try:
            build_from_batch(model, first)
        except Exception:
            if batch is None or not has_own_train_step(model):
                raise
            model.train_step(keras.tree.map_structure(keras.ops.convert_to_tensor, batch))


# --- keras.datasets: zero arrays of the real shapes and dtypes --------------------------------

def _sequences(count):
    """Word-index lists as the text loaders return them (an object array of lists)."""
    out = np.empty((count,), dtype="object")
    for i in range(count):
        out[i] = [1] + [2] * 19
    return out


def _images(train, test, shape, labels_shape=()):
    def load_data(*_args, **_kwargs):
        return ((np.zeros((train,) + shape, "uint8"), np.zeros((train,) + labels_shape, "uint8")),
                (np.zeros((test,) + shape, "uint8"), np.zeros((test,) + labels_shape, "uint8")))
    return load_data


def _texts(train, test):
    def load_data(*_args, **_kwargs):
        return ((_sequences(train), np.zeros((train,), "int64")),
                (_sequences(test), np.zeros((test,), "int64")))
    return load_data


def _boston(*_args, **_kwargs):
    return ((np.zeros((404, 13), "float64"), np.zeros((404,), "float64")),
            (np.zeros((102, 13), "float64"), np.zeros((102,), "float64")))


_DATASETS = {
    "mnist": _images(60000, 10000, (28, 28)),
    "fashion_mnist": _images(60000, 10000, (28, 28)),
    "cifar10": _images(50000, 10000, (32, 32, 3), (1,)),
    "cifar100": _images(50000, 10000, (32, 32, 3), (1,)),
    "imdb": _texts(25000, 25000),
    "reuters": _texts(8982, 2246),
    "boston_housing": _boston,
}


def offline_datasets():
    """Patch every ``keras.datasets.<name>.load_data`` (each import path Keras 3 has) to
    return zero arrays of the real shapes and dtypes, and make pretrained weights offline
    (``keras.applications.X(weights="imagenet")`` builds what Keras builds for them; the file
    is neither fetched nor read); returns what ``restore_datasets`` needs to undo it."""
    import importlib

    originals = []
    for name, load_data in _DATASETS.items():
        for prefix in ("keras.src.datasets", "keras.datasets", "keras._tf_keras.keras.datasets"):
            with contextlib.suppress(ImportError):
                module = importlib.import_module(f"{prefix}.{name}")
                originals.append((module, "load_data", getattr(module, "load_data", None)))
                module.load_data = load_data
    with contextlib.suppress(ImportError):
        file_utils = importlib.import_module("keras.src.utils.file_utils")
        model = importlib.import_module("keras.src.models.model").Model
        originals.append((file_utils, "get_file", file_utils.get_file))
        originals.append((model, "load_weights", model.load_weights))
        file_utils.get_file = lambda *args, **kwargs: "pretrained-weights-not-downloaded.h5"
        model.load_weights = lambda self, *args, **kwargs: None
    return originals


def restore_datasets(originals):
    """Undo ``offline_datasets()``."""
    for owner, attribute, value in reversed(originals):
        if value is None:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, value)


# --- stand-in data declared by the scripts ---------------------------------------------------

_DATA = re.compile(r"^#\s*oracle-data:\s*(.+)$", re.MULTILINE)


def _options(words, allowed, required):
    options, features = {}, []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in allowed:
            raise ValueError(f"oracle-data: unknown option {word!r} (allowed: {allowed})")
        if key == "feature":
            features.append(value)
        else:
            options[key] = value
    missing = [key for key in required if key not in options]
    if missing:
        raise ValueError(f"oracle-data: missing {missing}")
    options["feature"] = features
    return options


def _dims(text):
    return tuple(int(d) for d in text.lower().split("x"))


def _class_dirs(path, classes):
    for c in range(classes):
        folder = os.path.join(path, f"class_{c}")
        os.makedirs(folder, exist_ok=True)
        yield folder


def _write_images(path, opts):
    from PIL import Image

    height, width = _dims(opts["size"])
    channels = int(opts.get("channels", 3))
    fmt = opts.get("format", "png")
    pixels = np.zeros((height, width, channels) if channels != 1 else (height, width), "uint8")
    image = Image.fromarray(pixels)
    for folder in _class_dirs(path, int(opts["classes"])):
        for i in range(int(opts["per_class"])):
            image.save(os.path.join(folder, f"image_{i}.{fmt}"))


def _write_texts(path, opts):
    words = int(opts.get("words", 40))
    for c, folder in enumerate(_class_dirs(path, int(opts["classes"]))):
        for i in range(int(opts["per_class"])):
            with open(os.path.join(folder, f"text_{i}.txt"), "w", encoding="utf-8") as handle:
                handle.write(" ".join(f"word{(i + j + c) % 50}" for j in range(words)))


def _write_audio(path, opts):
    samples, rate = int(opts["samples"]), int(opts.get("rate", 16000))
    frames = np.zeros((samples,), "<i2").tobytes()
    for folder in _class_dirs(path, int(opts["classes"])):
        for i in range(int(opts["per_class"])):
            with wave.open(os.path.join(folder, f"clip_{i}.wav"), "wb") as handle:
                handle.setnchannels(1)
                handle.setsampwidth(2)
                handle.setframerate(rate)
                handle.writeframes(frames)


def _write_tfrecord(path, opts):
    import tensorflow as tf

    features = {}
    for spec in opts["feature"]:
        name, length, dtype = spec.split(":")
        length = int(length)
        if dtype == "float32":
            features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * length))
        elif dtype == "int64":
            features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * length))
        elif dtype == "bytes":
            features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b""] * length))
        else:
            raise ValueError(f"oracle-data: tfrecord feature dtype {dtype!r}")
    record = tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(int(opts["records"])):
            writer.write(record)


def _write_npy(path, opts):
    array = np.zeros(_dims(opts["shape"]), opts.get("dtype", "float32"))
    for i in range(int(opts["count"])):
        target = path.replace("{i}", str(i))
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        np.save(target, array)


def _write_csv(path, opts):
    """A table with a header of ``columns`` (comma-separated names) and ``rows`` rows, each
    column a ramp of floats (the row's number plus the column's)."""
    names = opts["columns"].split(",")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as out:
        out.write(",".join(names) + "\n")
        for row in range(int(opts["rows"])):
            out.write(",".join(f"{row + col}.0" for col in range(len(names))) + "\n")


_WRITERS = {  # kind: (writer, allowed options, required options)
    "images": (_write_images, ("classes", "per_class", "size", "channels", "format"),
               ("classes", "per_class", "size")),
    "texts": (_write_texts, ("classes", "per_class", "words"), ("classes", "per_class")),
    "audio": (_write_audio, ("classes", "per_class", "samples", "rate"),
              ("classes", "per_class", "samples")),
    "tfrecord": (_write_tfrecord, ("records", "feature"), ("records",)),
    "npy": (_write_npy, ("count", "shape", "dtype"), ("count", "shape")),
    "csv": (_write_csv, ("rows", "columns"), ("rows", "columns")),
}


def data_declarations(source):
    """``# oracle-data:`` header lines as (kind, relative path, options)."""
    out = []
    for line in _DATA.findall(source):
        kind, path, *words = shlex.split(line)
        if kind not in _WRITERS:
            raise ValueError(f"oracle-data: unknown kind {kind!r} (known: {sorted(_WRITERS)})")
        if os.path.isabs(path) or ".." in path.split("/"):
            raise ValueError(f"oracle-data: {path!r} must be relative, inside the script's "
                             "working directory")
        _writer, allowed, required = _WRITERS[kind]
        out.append((kind, path, _options(words, allowed, required)))
    return out


def materialise(declarations, root):
    """Write the declared stand-in data under ``root``."""
    for kind, path, options in declarations:
        _WRITERS[kind][0](os.path.join(root, path), options)


@contextlib.contextmanager
def working_directory(declarations):
    """Scripts that declare data run in a temporary folder holding it; others where they are."""
    if not declarations:
        yield
        return
    root = tempfile.mkdtemp(prefix="memlint-oracle-")
    before = os.getcwd()
    try:
        materialise(declarations, root)
        os.chdir(root)
        yield
    finally:
        os.chdir(before)
        shutil.rmtree(root, ignore_errors=True)
