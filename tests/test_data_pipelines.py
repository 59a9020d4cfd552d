"""The batch size and the input size come from where real code puts them (issue 9).

``fixtures/data_pipelines/`` holds small real-world scripts that build a model AND feed it from
one data source: ``tf.data`` pipelines, ``keras.utils.*_dataset_from_*``, ``PyDataset`` /
``Sequence`` subclasses, Python generators, ``ImageDataGenerator`` and ``keras.datasets``.
Real Keras runs each script's real pipeline on stand-in data (``# oracle-data:`` headers,
see ``tests/oracle/keras_scripts.py``) and records the first batch the model is fed; memlint,
reading the same source, must find the same batch size, the same element shapes (one per
model input, batch dimension excluded) and the same mode.

A fixture whose model leaves the input size open (``Input((None, None, 3))``, a Sequential
without an input shape) has a twin, ``<name>_static_twin.py`` with ``# same-estimate-as:
<name>.py``, that writes the size into the model and the batch into ``fit()``: memlint must
estimate both the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings
from tests.conftest import FIXTURES, require_keras, run_oracle
from tests.test_fixtures_oracle import assert_memlint_reads_what_keras_is_fed

DATA_PIPELINES = FIXTURES / "data_pipelines"
FILES = sorted(DATA_PIPELINES.glob("*.py"))

_SAME = re.compile(r"^#\s*same-estimate-as:\s*(\S+)", re.MULTILINE)

# What each script says it feeds (read off the script by hand): the oracle, running the real
# pipeline on stand-in data, must record exactly this.  Guards the stand-in data (too few
# files or records would make a smaller first batch) and the oracle's batch taking.
STATED = {
    "generator_function_fit.py": ("model", "fit", 40, [[100]]),
    "generator_zip_image_mask_flows.py": ("model", "fit", 2, [[64, 64, 1]]),
    "image_data_generator_flow.py": ("model", "fit", 64, [[32, 32, 3]]),
    "image_data_generator_flow_from_directory.py":
        ("model", "fit_generator", 20, [[150, 150, 3]]),
    "keras_audio_dataset.py": ("model", "fit", 64, [[16000, 1]]),
    "keras_datasets_imdb_lstm.py": ("model", "fit", 32, [[200]]),
    "keras_datasets_mnist_cnn.py": ("model", "fit", 128, [[28, 28, 1]]),
    "keras_datasets_mnist_mlp.py": ("model", "fit", 128, [[784]]),
    "keras_image_dataset_dynamic_input.py": ("model", "fit", 64, [[180, 180, 3]]),
    "keras_image_dataset_dynamic_input_static_twin.py": ("model", "fit", 64, [[180, 180, 3]]),
    "keras_image_dataset_grayscale_defaults.py": ("model", "fit", 32, [[256, 256, 1]]),
    "keras_image_dataset_grayscale_defaults_static_twin.py":
        ("model", "fit", 32, [[256, 256, 1]]),
    "keras_pydataset_subclass.py": ("model", "fit", 96, [[64, 64, 3]]),
    "keras_sequence_subclass.py": ("model", "fit", 96, [[32, 32, 32, 1]]),
    "keras_text_dataset_vectorize.py": ("model", "fit", 32, [[500]]),
    "keras_timeseries_dataset.py": ("model", "fit", 128, [[120, 7]]),
    # a dict of inputs in keras.tree.flatten order (sorted keys): body, tags, title
    "super_resolution_sub_pixel_layer.py": ("model", "fit", 8, [[100, 100, 1]]),
    "tfdata_dict_multi_input.py": ("model", "fit", 64, [[100], [12], [10]]),
    "tfdata_from_generator_padded_batch.py": ("model", "fit", 32, [[200]]),
    "tfdata_from_generator_signature.py": ("model", "fit", 48, [[28, 28, 1]]),
    "tfdata_from_tensor_slices_batch.py": ("model", "fit", 256, [[784]]),
    "tfdata_from_tensors_full_batch.py": ("model", "fit", 500, [[20]]),
    "tfdata_map_lambda_pad_crop.py": ("model", "fit", 96, [[32, 32, 1]]),
    "tfdata_map_resize_one_hot.py": ("model", "fit", 64, [[160, 160, 3]]),
    "tfdata_passthroughs.py": ("model", "fit", 200, [[32]]),
    "tfdata_predict_central_crop.py": ("classifier", "predict", 50, [[224, 224, 3]]),
    "tfdata_range_zip.py": ("model", "fit", 100, [[16]]),
    "tfdata_rebatch.py": ("model", "fit", 128, [[64]]),
    "tfdata_tfrecord_parse_example.py": ("model", "fit", 128, [[28, 28, 1]]),
    "tfdata_unbatch_batch.py": ("model", "fit", 512, [[128, 9]]),
}


def _defines_and_maps(source: str, _path: Path) -> bool:
    """``ds.map(fn)`` with ``fn`` a function defined in the same file."""
    return any(re.search(rf"\.map\(\s*{name}\b", source)
               for name in re.findall(r"^def (\w+)\(", source, re.MULTILINE))


def _generator_to_fit(source: str, _path: Path) -> bool:
    """A generator function of the file (it yields) called straight into ``fit()``."""
    generators = [name for name, body in re.findall(
        r"^def (\w+)\(.*?\):\n((?:[ \t]+.*\n|\n)+)", source, re.MULTILINE) if "yield " in body]
    return any(re.search(rf"\.fit\(\s*{name}\(", source) for name in generators)


def _twin_of(pattern: str):
    """A ``_static_twin`` whose partner matches ``pattern``."""
    def check(source: str, path: Path) -> bool:
        match = _SAME.search(source)
        if not match or not path.name.endswith("_static_twin.py"):
            return False
        partner = (path.parent / match.group(1)).read_text(encoding="utf-8")
        return re.search(pattern, partner, re.MULTILINE | re.DOTALL) is not None
    return check


# Every data source issue 9 names: each needs a fixture where all its patterns appear (a
# pattern is a regular expression over the source, or a function of the source and path).
SOURCES = {
    "from_tensor_slices((x, y)).shuffle(10_000).batch(256) into fit(ds)": [
        r"from_tensor_slices\(\(\w+, \w+\)\)\.shuffle\(10_000\)\.batch\(256\)",
        r"\.fit\(\w+_ds\b"],
    "fit(..., validation_data=other_ds) with another validation batch": [
        r"\.batch\(1024\)", r"\.batch\(256\)", r"validation_data=val_ds"],
    "from_tensor_slices of a dict of arrays, multi-input model": [
        r"from_tensor_slices\(\s*\(\s*\{", r"keras\.Model\(\s*inputs=\["],
    "from_tensors": [r"Dataset\.from_tensors\("],
    "from_generator with output_signature": [
        r"from_generator\(", r"output_signature=", r"tf\.TensorSpec\("],
    "from_generator with output_types / output_shapes": [
        r"from_generator\(", r"output_types=", r"output_shapes="],
    "Dataset.range + Dataset.zip": [r"Dataset\.range\(", r"Dataset\.zip\("],
    "TFRecordDataset + map(parse_fn) with parse_single_example": [
        r"TFRecordDataset\(", r"\.map\(parse_fn", r"tf\.io\.parse_single_example\(",
        r"FixedLenFeature\(\[784\], tf\.float32\)"],
    "batch(drop_remainder=True)": [r"\.batch\([^)]*drop_remainder=True"],
    "padded_batch(padded_shapes=...)": [r"\.padded_batch\([^)]*padded_shapes="],
    "unbatch().batch(n)": [r"\.unbatch\(\)(\.shuffle\(\d+\))?\.batch\(\d+\)"],
    "rebatch": [r"\.rebatch\("],
    "map through a function defined in the file": [_defines_and_maps],
    "map through a lambda": [r"\.map\(\s*lambda "],
    "tf.image.resize": [r"tf\.image\.resize\("],
    "tf.cast": [r"tf\.cast\("],
    "tf.one_hot": [r"tf\.one_hot\("],
    "tf.reshape": [r"\.map\(\s*lambda .*tf\.reshape\("],
    "tf.expand_dims": [r"tf\.expand_dims\("],
    "tf.image.resize_with_pad": [r"tf\.image\.resize_with_pad\("],
    "random_crop": [r"tf\.image\.random_crop\("],
    "central_crop": [r"tf\.image\.central_crop\("],
    "shuffle": [r"\.shuffle\((buffer_size=)?[\d_]+"],
    "repeat": [r"\.repeat\(\)"], "cache": [r"\.cache\(\)"],
    "prefetch": [r"\.prefetch\("], "take": [r"\.take\("], "skip": [r"\.skip\("],
    "filter": [r"\.filter\("], "with_options": [r"\.with_options\("],
    "predict(ds) for inference": [r"\.predict\(\w+_ds\)"],
    "image_dataset_from_directory(image_size=(180, 180), batch_size=64) into "
    "Input((None, None, 3))": [
        r"image_dataset_from_directory\(", r"image_size = \(180, 180\)",
        r"batch_size = 64", r"image_size=image_size", r"batch_size=batch_size",
        r"Input\(shape=\(None, None, 3\)\)"],
    "image_dataset_from_directory defaults, color_mode='grayscale'": [
        r"image_dataset_from_directory\(\"[^\"]+\", color_mode=\"grayscale\"\)"],
    "Sequential without an input shape, built by fit": [
        r"Sequential\(\[\n\s+layers\.Rescaling"],
    "text_dataset_from_directory": [r"text_dataset_from_directory\("],
    "audio_dataset_from_directory(output_sequence_length=16000)": [
        r"audio_dataset_from_directory\([^)]*output_sequence_length=16000"],
    "timeseries_dataset_from_array with its default batch": [
        r"timeseries_dataset_from_array\((?:(?!batch_size)[^)])*\)"],
    "keras.utils.PyDataset subclass, batch_size=96": [
        r"class \w+\(keras\.utils\.PyDataset\)", r"batch_size=96"],
    "keras.utils.Sequence subclass, batch_size 96": [
        r"class \w+\(keras\.utils\.Sequence\)", r"\"batch_size\": 96"],
    "generator function via from_generator": [
        r"from_generator\(\s*\w+,", r"yield "],
    "generator function straight into fit()": [_generator_to_fit],
    "ImageDataGenerator().flow(x, y, batch_size=...)": [
        r"ImageDataGenerator\(", r"\.flow\(x_train, y_train, batch_size="],
    "flow_from_directory(target_size=(150, 150), batch_size=20)": [
        r"flow_from_directory\(", r"img_width, img_height = 150, 150", r"batch_size = 20",
        r"target_size=\(img_height, img_width\)"],
    "fit_generator": [r"\.fit_generator\("],
    "keras.datasets.mnist + reshape(-1, 784) / astype / 255 / to_categorical": [
        r"mnist\.load_data\(\)", r"reshape\(-1, 784\)", r"astype\(\"float32\"\)",
        r"/= 255", r"to_categorical\("],
    "keras.datasets.mnist + [..., np.newaxis] + shape=x_train.shape[1:]": [
        r"mnist\.load_data\(\)", r"\[\.\.\., np\.newaxis\]", r"x_train\.shape\[1:\]"],
    "keras.datasets.cifar10 + input_shape=x_train.shape[1:]": [
        r"cifar10\.load_data\(\)", r"input_shape=x_train\.shape\[1:\]"],
    "keras.datasets.imdb + pad_sequences(maxlen=200)": [
        r"imdb\.load_data\(", r"maxlen = 200", r"pad_sequences\(x_train, maxlen=maxlen\)"],
    "static twin of Input((None, None, 3)) fed by a dataset": [
        _twin_of(r"Input\(shape=\(None, None, 3\)\)")],
    "static twin of a Sequential built by fit": [
        _twin_of(r"Sequential\(\[\n\s+layers\.Rescaling")],
}


def _matches(pattern, source: str, path: Path) -> bool:
    if callable(pattern):
        return pattern(source, path)
    return re.search(pattern, source, re.MULTILINE) is not None


@pytest.mark.parametrize("source_name", sorted(SOURCES))
def test_a_fixture_covers_each_data_source(source_name):
    patterns = SOURCES[source_name]
    covering = [p.name for p in FILES
                if all(_matches(pattern, p.read_text(encoding="utf-8"), p)
                       for pattern in patterns)]
    assert covering, f"no fixture in fixtures/data_pipelines/ feeds a model from: {source_name}"


def test_every_fixture_states_what_it_feeds():
    assert sorted(STATED) == sorted(p.name for p in FILES)


def _pairs():
    pairs = []
    for path in sorted(DATA_PIPELINES.rglob("*.py")):  # fixtures/devices pair its own way
        match = _SAME.search(path.read_text(encoding="utf-8"))
        if match:
            pairs.append((path.parent / match.group(1), path))
    return pairs


PAIRS = _pairs()


def test_twins_are_named_after_their_partner():
    assert len(PAIRS) >= 2
    for partner, twin in PAIRS:
        assert partner.is_file(), f"{twin.name}: same-estimate-as names a missing file"
        assert twin.name == partner.stem + "_static_twin.py"


def _by_variable(report):
    return {graph.variable: (graph, breakdown)
            for graph, breakdown in zip(report.models, report.breakdowns)}


@pytest.mark.parametrize("partner,twin", PAIRS, ids=[t.name for _, t in PAIRS])
def test_static_twin_gets_the_same_estimate(partner, twin):
    settings = Settings(gpu="8GiB")
    dynamic = _by_variable(analyze_file(str(partner), settings))
    static = _by_variable(analyze_file(str(twin), settings))
    assert static and set(static) == set(dynamic), "the twins build different models"
    for variable, (graph, breakdown) in static.items():
        other_graph, other_breakdown = dynamic[variable]
        assert other_graph.setup.batch_size == graph.setup.batch_size, (
            f"{variable}: batch {other_graph.setup.batch_size} "
            f"({other_graph.setup.batch_source}) vs {graph.setup.batch_size} "
            f"({graph.setup.batch_source})")
        assert other_breakdown.peak == breakdown.peak, (
            f"{variable}: peak {other_breakdown.peak} from {partner.name} vs "
            f"{breakdown.peak} from {twin.name}")


# --- against real Keras ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keras_fed():
    """Real Keras runs every data-pipeline fixture on its stand-in data."""
    require_keras()
    return run_oracle("keras_scripts.py", {"files": [str(p) for p in FILES]})["results"]


def _result(keras_fed, path):
    result = keras_fed[str(path)]
    assert "error" not in result, f"real Keras could not run the fixture: " \
                                  f"{result.get('traceback', result['error'])}"
    return result


@pytest.mark.oracle
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_keras_runs_the_pipeline_and_records_the_first_batch(path, keras_fed):
    result = _result(keras_fed, path)
    assert result["fed"], "no model was fed by fit/predict"
    for variable, record in result["fed"].items():
        assert "error" not in record, f"{variable}: {record['error']}"
    variable, method, batch, shapes = STATED[path.name]
    assert result["fed"][variable] == {"method": method, "batch_size": batch,
                                       "input_shapes": shapes}


@pytest.mark.oracle
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_memlint_reads_what_keras_is_fed(path, keras_fed):
    fed = _result(keras_fed, path)["fed"]
    assert fed, "real Keras recorded no fed batch"
    assert_memlint_reads_what_keras_is_fed(path, fed)
