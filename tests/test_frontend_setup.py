"""The training setup read from code: optimizer, batch size, mode and precision, each with
where it came from.  Expected values follow Keras's documented defaults."""

from __future__ import annotations

import pytest

from memlint.analysis import analyze_text
from memlint.config import Settings
from memlint.frontends.keras import analyze_source

MODEL = ("import numpy as np\n"
         "import tensorflow as tf\n"
         "from tensorflow import keras\n"
         "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n")


def setup_of(tail: str, head: str = ""):
    (graph,) = analyze_source(head + MODEL + tail, "s.py").models
    return graph.setup


@pytest.mark.parametrize("compile_call,name,options", [
    ("model.compile('sgd', 'mse')", "sgd", {}),
    ("model.compile(optimizer='Adam', loss='mse')", "adam", {}),
    ("model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss='mse')",
     "sgd", {"momentum": 0.9}),
    ("model.compile(optimizer=tf.keras.optimizers.Adam(amsgrad=True), loss='mse')",
     "adam", {"amsgrad": True}),
    ("opt = keras.optimizers.RMSprop(centered=True)\nmodel.compile(opt, 'mse')",
     "rmsprop", {"centered": True}),
    ("model.compile(optimizer=tf.optimizers.AdamW(use_ema=True), loss='mse')",
     "adamw", {"use_ema": True}),
    ("model.compile(loss='mse')", "rmsprop", {}),  # Keras's compile() default
    # TensorFlow Addons' optimizers (keras.io's ConvMixer compiles with tfa's AdamW)
    ("import tensorflow_addons as tfa\nopt = tfa.optimizers.AdamW(learning_rate=1e-3, "
     "weight_decay=1e-4)\nmodel.compile(optimizer=opt, loss='mse')", "adamw", {}),
    ("from tensorflow_addons.optimizers import RectifiedAdam\n"
     "model.compile(RectifiedAdam(amsgrad=True), 'mse')", "rectifiedadam", {"amsgrad": True}),
])
def test_optimizer_from_compile(compile_call, name, options):
    setup = setup_of(compile_call + "\n")
    assert setup.optimizer.name == name
    assert setup.optimizer.options == options
    assert "compile()" in setup.optimizer.source


def test_a_recompile_keeps_every_optimizer_and_the_analysis_the_heaviest():
    """Fine-tuning recompiles: frozen with SGD, then unfrozen with Adam.  The frontend keeps
    both; the analysis pairs the layers' last trainable state with the optimizer holding the
    most state, so the unfrozen phase's slots are counted (with SGD alone: none)."""
    tail = ("model.compile('sgd', 'mse')\nmodel.fit(np.zeros((8, 4)), np.zeros((8, 2)))\n"
            "model.compile(keras.optimizers.Adam(1e-5), 'mse')\n"
            "model.compile(keras.optimizers.RMSprop(), 'mse')\n")
    setup = setup_of(tail)
    assert setup.optimizer.name == "sgd"
    assert [spec.name for spec in setup.later_optimizers] == ["adam", "rmsprop"]
    report = analyze_text(MODEL + tail, "s.py", Settings())
    (graph,) = report.models
    assert graph.setup.optimizer.name == "adam"
    assert "line 7" in graph.setup.optimizer.source and \
        "3 optimizers the model is compiled with" in graph.setup.optimizer.source
    assert report.breakdowns[0].category("optimizer") == 2 * 10 * 4  # Adam's slots, float32
    # a configured optimizer still wins
    configured = analyze_text(MODEL + tail, "s.py", Settings(optimizer="sgd"))
    assert configured.models[0].setup.optimizer.name == "sgd"


def test_the_training_call_with_the_largest_batch_sizes_the_step():
    """Training again on larger batches (a second phase): the step of the largest batch is
    the one that must fit; a later call whose batch is not known leaves the batch unknown
    (no verdict) rather than the smaller phase's."""
    data = "np.zeros((1000, 4)), np.zeros((1000, 2))"
    setup = setup_of(f"model.compile('adam', 'mse')\nmodel.fit({data}, batch_size=32)\n"
                     f"model.fit({data}, batch_size=256)\nmodel.fit({data}, batch_size=64)\n")
    assert setup.batch_size == 256
    assert "line 7" in setup.batch_source and "3 training calls" in setup.batch_source
    assert setup.mode_source == "fit() at line 7"
    unknown = setup_of(f"model.compile('adam', 'mse')\nmodel.fit({data}, batch_size=32)\n"
                       "model.fit_generator(make_batches())\n")
    assert unknown.batch_size is None and "generator" in unknown.batch_source
    single = setup_of(f"model.compile('adam', 'mse')\nmodel.fit({data}, batch_size=16)\n")
    assert single.batch_size == 16 and "training calls" not in single.batch_source


@pytest.mark.parametrize("compile_call,loss", [
    ("model.compile('sgd', 'mse')", "mean_squared_error"),
    ("model.compile(optimizer='adam', loss='MAE')", "mean_absolute_error"),
    ("model.compile('adam', loss=keras.losses.MeanSquaredError())", "mean_squared_error"),
    ("model.compile('adam', loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))",
     "binary_crossentropy"),
    ("model.compile('adam', keras.losses.categorical_crossentropy)",
     "categorical_crossentropy"),
    ("model.compile('adam', loss='Huber')", "huber"),
    ("model.compile('adam', loss={'a': 'mse', 'b': 'mean_squared_error'})",
     "mean_squared_error"),
    ("model.compile('adam', loss=['mse', 'mae'])", None),  # different losses
    ("def my_loss(y, p):\n    return y - p\nmodel.compile('adam', loss=my_loss)", None),
    ("model.compile('adam')", None),
])
def test_loss_from_compile(compile_call, loss):
    setup = setup_of(compile_call + "\n")
    assert setup.loss == loss
    assert "compile()" in setup.loss_source


@pytest.mark.parametrize("compile_call,loss,per_output", [
    ("model.compile('adam', loss=['sparse_categorical_crossentropy', None])",
     "sparse_categorical_crossentropy", ["sparse_categorical_crossentropy", ""]),
    ("model.compile('adam', loss={'logits': 'mse', 'aux': None})", "mean_squared_error",
     {"logits": "mean_squared_error", "aux": ""}),
    ("model.compile('adam', loss=['mse', my_loss])", None, ["mean_squared_error", None]),
    ("model.compile('adam', loss='sparse_categorical_crossentropy')",
     "sparse_categorical_crossentropy", None),
])
def test_each_output_s_loss_from_compile(compile_call, loss, per_output):
    """compile()'s loss per output where it gives a list or a dict (an output given None
    is fed no target); one loss for every output otherwise."""
    setup = setup_of("def my_loss(y, p):\n    return y - p\n" + compile_call + "\n")
    assert setup.loss == loss
    assert setup.output_losses == per_output


def test_no_compile_is_an_explicit_assumption():
    setup = setup_of("")
    assert setup.optimizer.source.startswith("assumed")
    assert setup.mode == "train" and setup.batch_size == 32
    assert "assumed" in setup.batch_source


def test_fit_batch_size_and_default():
    assert setup_of("model.fit(np.zeros((1000, 4)), np.zeros((1000, 2)), batch_size=64)\n"
                    ).batch_size == 64
    setup = setup_of("model.fit(np.zeros((1000, 4)), np.zeros((1000, 2)))\n")
    assert setup.batch_size == 32 and "default" in setup.batch_source
    assert setup.mode == "train"


def test_a_batch_size_that_is_no_count_of_samples_is_named():
    for given in ("0", "-8", "32.0"):
        setup = setup_of(f"model.fit(np.zeros((64, 4)), np.zeros((64, 2)), batch_size={given})\n")
        assert setup.batch_size is None
        assert setup.batch_source == (f"unknown: batch_size={given} given to fit() at line 5 "
                                      "is not a positive int; pass --batch-size")
    setup = setup_of("model.fit(np.zeros((64, 4)), np.zeros((64, 2)), batch_size=cfg.bs)\n")
    assert "is not known statically" in setup.batch_source


def test_train_on_batch_takes_the_data_rows():
    setup = setup_of("x = np.random.rand(3, 4)\nmodel.train_on_batch(x, np.zeros((3, 2)))\n")
    assert setup.batch_size == 3 and "train_on_batch" in setup.batch_source


def test_predict_only_is_inference():
    setup = setup_of("model.predict(np.zeros((500, 4)), batch_size=100)\n")
    assert setup.mode == "infer" and setup.batch_size == 100


def test_training_wins_over_prediction():
    setup = setup_of("model.predict(np.zeros((5, 4)))\nmodel.fit(np.zeros((50, 4)), "
                     "np.zeros((50, 2)), batch_size=10)\n")
    assert setup.mode == "train" and setup.batch_size == 10


@pytest.mark.parametrize("head,policy", [
    ("from tensorflow.keras import mixed_precision\n"
     "mixed_precision.set_global_policy('mixed_float16')\n", "mixed_float16"),
    ("import keras\nkeras.mixed_precision.set_global_policy(keras.mixed_precision.Policy("
     "'mixed_bfloat16'))\n", "mixed_bfloat16"),
    ("import tensorflow as tf\ntf.keras.mixed_precision.experimental.set_policy('mixed_float16')\n",
     "mixed_float16"),
    ("from keras import backend as K\nK.set_floatx('float16')\n", "float16"),
])
def test_precision_policies(head, policy):
    assert setup_of("", head=head).dtype_policy == policy


@pytest.mark.parametrize("head, source", [
    ("import keras\nkeras.config.set_dtype_policy('mixed_bfloat16')\n",
     "set_dtype_policy at line 2"),
    ("from keras.config import set_dtype_policy\nset_dtype_policy('mixed_bfloat16')\n",
     "set_dtype_policy at line 2"),
    ("from keras import mixed_precision\nmixed_precision.set_global_policy('mixed_bfloat16')\n",
     "set_global_policy at line 2"),
])
def test_the_policy_source_names_the_function_as_the_code_calls_it(head, source):
    setup = setup_of("", head=head)
    assert (setup.dtype_policy, setup.dtype_source) == ("mixed_bfloat16", source)


TFDS = ("import tensorflow_datasets as tfds\n"
        "def resize(image, label):\n"
        "    return tf.image.resize(image, (4, 4)), label\n")


@pytest.mark.parametrize("load, fed, batch", [
    ("ds = tfds.load('mnist', split='train', as_supervised=True)", "ds.batch(64)", 64),
    ("(ds, test), info = tfds.load('mnist', split=['train', 'test'], as_supervised=True, "
     "with_info=True)", "ds.map(resize).shuffle(100).batch(128)", 128),
    ("ds = tfds.load('mnist', split='train', batch_size=16)", "ds", 16),
    ("ds = tfds.load('mnist', split='train')", "ds", None),  # unbatched, shapes not known
    # no split=: a dict of the catalogue's splits (TensorFlow's distributed training guide)
    ("datasets, info = tfds.load(name='mnist', with_info=True, as_supervised=True)\n"
     "train = datasets['train']", "train.cache().shuffle(10000).batch(64)", 64),
    ("splits = tfds.load('mnist')\nfirst = splits[0]", "first.batch(64)", None),
])
def test_a_tensorflow_datasets_source_gives_the_batch_the_code_makes(load, fed, batch):
    """TensorFlow Datasets' catalogue is not described, so its elements' shapes are not
    known; the batch the pipeline makes still is (the model's input shape sizes it)."""
    setup = setup_of(f"{load}\nmodel.compile('adam', 'mse')\nmodel.fit({fed}, epochs=2)\n",
                     head=TFDS)
    assert setup.batch_size == batch
    assert "tfds.load('mnist')" in setup.data_source or batch is None


@pytest.mark.parametrize("source, batch", [
    ("tf.data.experimental.make_csv_dataset('train.csv', 265, label_name='income')", 265),
    ("tf.data.experimental.make_csv_dataset('*.csv', batch_size=BATCH)", 48),
    ("tf.data.experimental.make_batched_features_dataset('*.tfrecord', 64, FEATURES, "
     "label_key='y')", 64),
    ("tf.data.experimental.make_csv_dataset('train.csv', batch_size=n_rows())", None),
])
def test_a_batched_file_dataset_gives_its_batch_size(source, batch):
    """``make_csv_dataset`` and ``make_batched_features_dataset`` batch the records of files
    memlint does not read: their columns are not known, the batch they make is (found on a
    keras.io-style structured-data script, built in a helper function)."""
    head = ("import tensorflow as tf\nBATCH = 48\nFEATURES = {}\n"
            "def make(path):\n    return " + source + ".prefetch(2)\n")
    setup = setup_of("model.compile('adam', 'mse')\nmodel.fit(make('x'), epochs=2)\n",
                     head=head)
    assert setup.batch_size == batch
    if batch is not None:
        assert "make_" in setup.batch_source


def test_fit_on_data_not_known_to_be_arrays_has_no_default_batch():
    """Keras's default of 32 is for arrays: a dataset or generator of a library fed alone
    batches itself, so the batch is unknown (no verdict) until --batch-size gives it."""
    head = "import mylib\n"
    alone = setup_of("model.compile('adam', 'mse')\nmodel.fit(mylib.train_data())\n",
                     head=head)
    assert alone.batch_size is None and "pass --batch-size" in alone.batch_source
    # arrays whose shapes are not known (x and y given): Keras's default applies
    pair = setup_of("model.compile('adam', 'mse')\n"
                    "model.fit(mylib.features(), mylib.labels())\n", head=head)
    assert pair.batch_size == 32
    stated = setup_of("model.compile('adam', 'mse')\n"
                      "model.fit(mylib.train_data(), batch_size=8)\n", head=head)
    assert stated.batch_size == 8


def test_a_model_compiled_again_keeps_every_layer_any_compile_trained():
    """Trained unfrozen first, then frozen and compiled again: the estimate must cover the
    unfrozen phase, so a layer trainable in a compile the model was trained under counts as
    trainable (with the compiles' heaviest optimizer); frozen first and unfrozen after is
    the last compile's."""
    body = ("import keras\nfrom keras import layers\n"
            "inputs = keras.Input((8,))\nbody = layers.Dense(16)\n"
            "model = keras.Model(inputs, layers.Dense(2)(body(inputs)))\n")
    fit = "model.fit(np.zeros((8, 8)), np.zeros((8, 2)))\n"
    body = "import numpy as np\n" + body
    unfrozen_first = analyze_text(
        body + "model.compile('adam', 'mse')\n" + fit + "body.trainable = False\n"
               "model.compile('sgd', 'mse')\n" + fit, "m.py", Settings())
    (graph,) = unfrozen_first.models
    assert graph.trainable_params == 8 * 16 + 16 + 16 * 2 + 2
    assert graph.setup.optimizer.name == "adam"
    frozen_first = analyze_text(
        body + "body.trainable = False\nmodel.compile('adam', 'mse')\n" + fit
        + "body.trainable = True\nmodel.compile('adam', 'mse')\n" + fit, "m.py", Settings())
    assert frozen_first.models[0].trainable_params == 8 * 16 + 16 + 16 * 2 + 2
    # a compile no training followed is replaced by the next one
    untrained = analyze_text(body + "model.compile('adam', 'mse')\nbody.trainable = False\n"
                             "model.compile('adam', 'mse')\n" + fit, "m.py", Settings())
    assert untrained.models[0].trainable_params == 16 * 2 + 2


def test_train_on_batch_of_rows_not_known_has_no_default_batch():
    """train_on_batch trains on the one batch it is given: Keras's default batch size does
    not apply, so rows memlint cannot count leave the batch unknown; the targets' rows count
    where the inputs' are not known (Keras needs as many)."""
    head = "import mylib\n"
    unknown = setup_of("model.compile('adam', 'mse')\n"
                       "model.train_on_batch(mylib.images(), mylib.labels())\n", head=head)
    assert unknown.batch_size is None and "pass --batch-size" in unknown.batch_source
    by_targets = setup_of("model.compile('adam', 'mse')\n"
                          "model.train_on_batch(mylib.images(), np.ones((48, 2)))\n", head=head)
    assert by_targets.batch_size == 48
    known = setup_of("model.compile('adam', 'mse')\n"
                     "model.train_on_batch(np.zeros((16, 4)), np.ones((16, 2)))\n")
    assert known.batch_size == 16
