"""Every fixture model must match real Keras layer by layer: name, class, output shape and
trainable / non-trainable parameters.

A fixture written in a spelling modern Keras no longer runs (Keras 1) names a Keras 3 twin
in a header comment ``# oracle-twin: other_file.py``; real Keras builds the twin.  A fixture
written for tf.keras 2 that Keras 3 refuses (``x.shape.as_list()``) says ``# oracle: keras2``:
Keras 2 (``tf_keras``, ``TF_USE_LEGACY_KERAS=1``, ``tests/oracle/keras2_scripts.py``) builds it.

Every model real Keras is fed (its first ``fit``/``train_on_batch``, else ``predict``, as the
oracle records it) must be read the same by memlint: mode, batch size and the shapes of the
data without the batch dimension.  ``fixtures/data_pipelines/`` is checked in
``tests/test_data_pipelines.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlint.analysis import analyze_file
from memlint.config import Settings
from tests.conftest import FIXTURES, require_keras, require_tf_keras, run_oracle

_TWIN = re.compile(r"^#\s*oracle-twin:\s*(\S+)", re.MULTILINE)
# a fixture written for tf.keras 2 that Keras 3 refuses: the Keras 2 oracle (tf_keras) checks it
_KERAS2 = re.compile(r"^#\s*oracle:\s*keras2\s*$", re.MULTILINE)
# a fixture whose models a class or function it never calls builds: the call, run by both
_ENTRY = re.compile(r"^#\s*oracle-entry:\s*(.+)$", re.MULTILINE)

# the mode memlint must report for the call real Keras took the first batch in
MODES = {"fit": "train", "train_on_batch": "train", "fit_generator": "train",
         "predict": "infer", "predict_on_batch": "infer", "predict_generator": "infer"}


def fixture_files() -> list:
    """Fixture scripts; modules of a package (a folder with ``__init__.py``) are checked
    through the scripts that import them (run alone, their relative imports fail)."""
    return sorted(p for p in FIXTURES.rglob("*.py") if "invalid" not in p.parts
                  and not (p.parent / "__init__.py").exists())


def fixture_settings(path) -> Settings:
    """memlint's settings for a fixture: its ``# oracle-entry:`` call as ``--entry``."""
    match = _ENTRY.search(path.read_text(encoding="utf-8"))
    return Settings(entry=match.group(1).strip()) if match else Settings()


def oracle_source(path):
    match = _TWIN.search(path.read_text(encoding="utf-8"))
    return path.parent / match.group(1) if match else path


FILES = fixture_files()


@pytest.fixture(scope="module")
def keras_models(request):
    """Real Keras builds the fixtures this run selected (all of them unless ``-k`` narrows)."""
    require_keras()
    chosen = [item.callspec.params["path"] for item in request.session.items
              if item.originalname in ("test_fixture_matches_keras",
                                       "test_fixture_is_fed_as_keras_feeds_it")]
    sources = sorted({str(oracle_source(p)) for p in chosen or FILES})
    keras2 = [s for s in sources if _KERAS2.search(Path(s).read_text(encoding="utf-8"))]
    results = {}
    if len(keras2) < len(sources):
        results.update(run_oracle("keras_scripts.py", {"files": sorted(
            set(sources) - set(keras2))})["results"])
    if keras2:  # written for tf.keras 2: the Keras 2 oracle (tf_keras) builds them
        require_tf_keras()
        results.update(run_oracle("keras2_scripts.py", {"files": keras2},
                                  env={"TF_USE_LEGACY_KERAS": "1"})["results"])
    return results


def _as_lists(shape):
    if isinstance(shape, list):
        return [_as_lists(s) for s in shape]
    return list(shape) if shape is not None else None


def memlint_models(path) -> dict:
    report = analyze_file(str(path), fixture_settings(path))
    out = {}
    for graph in report.models + report.parts:  # (parts: models only others run)
        out[graph.variable] = {
            "layers": [{
                "name": layer.name,
                "type": layer.type,
                "output_shape": _as_lists(layer.output_shape),
                "trainable": layer.trainable_params,
                "non_trainable": layer.non_trainable_params,
            } for layer in graph.layers],
            "total": graph.params,
        }
    return out


def test_there_are_fixtures():
    assert len(FILES) >= 10


@pytest.mark.oracle
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_matches_keras(path, keras_models):
    expected = keras_models[str(oracle_source(path))]
    assert "error" not in expected, f"real Keras could not build the fixture: " \
                                    f"{expected.get('traceback', expected['error'])}"
    got = memlint_models(path)
    assert set(got) == set(expected["models"]), "models found differ from real Keras"
    for variable, model in expected["models"].items():
        mine = got[variable]
        assert len(mine["layers"]) == len(model["layers"]), (
            f"{variable}: memlint has {[l['name'] for l in mine['layers']]}, "
            f"Keras has {[l['name'] for l in model['layers']]}")
        for ours, theirs in zip(mine["layers"], model["layers"]):
            assert ours == theirs, f"{variable}: layer differs"
        assert mine["total"] == model["total"]


def _as_lists_of_shapes(shapes):
    return None if shapes is None else [list(shape) for shape in shapes]


def assert_memlint_reads_what_keras_is_fed(path, fed: dict) -> None:
    """memlint's training setup of each model real Keras fed: mode, batch size, data shapes
    (one per model input, batch dimension excluded)."""
    models = {graph.variable: graph
              for graph in analyze_file(str(path), fixture_settings(path)).models}
    for variable, record in fed.items():
        assert "error" not in record, f"{variable}: the oracle could not take the first " \
                                      f"batch: {record['error']}"
        assert variable in models, f"memlint found no model {variable!r}"
        setup = models[variable].setup
        got = (setup.mode, setup.batch_size, _as_lists_of_shapes(setup.data_shapes))
        want = (MODES[record["method"]], record["batch_size"], record["input_shapes"])
        assert got == want, (
            f"{variable}: memlint has mode/batch/shapes {got} (batch from "
            f"{setup.batch_source}; data from {setup.data_source or 'nowhere'}), real Keras "
            f"fed {want} through {record['method']}()")


FED_FILES = [p for p in FILES if "data_pipelines" not in p.relative_to(FIXTURES).parts]


@pytest.mark.oracle
@pytest.mark.parametrize("path", FED_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_is_fed_as_keras_feeds_it(path, keras_models):
    expected = keras_models[str(oracle_source(path))]
    assert "error" not in expected, f"real Keras could not build the fixture: " \
                                    f"{expected.get('traceback', expected['error'])}"
    # a script that feeds no model (no fit/train_on_batch/predict with data) has nothing here
    assert_memlint_reads_what_keras_is_fed(path, expected["fed"])
