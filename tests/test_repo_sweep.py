"""The repository sweep's comparison (harness/repo_sweep.py): what counts as an exact rebuild.
Real Keras and the swept repositories are not needed here."""

from harness.repo_sweep import _counterpart, compare, totals


def _layer(name, kind="Dense", shape=(None, 4), trainable=20, frozen=0):
    return {"name": name, "type": kind, "output_shape": list(shape),
            "trainable": trainable, "non_trainable": frozen}


def _model(*layers):
    return {"layers": list(layers), "total": sum(l["trainable"] + l["non_trainable"]
                                                 for l in layers)}


def test_same_layers_are_exact():
    keras = _model(_layer("input_layer", "InputLayer", trainable=0), _layer("dense"))
    assert compare(keras, _model(*keras["layers"])) == {"exact": True, "structure": True,
                                                        "why": None}


def test_a_different_shape_is_a_miss_with_the_first_difference():
    keras = _model(_layer("dense"))
    result = compare(keras, _model(_layer("dense", shape=(None, 5))))
    assert not result["exact"] and not result["structure"]
    assert "output_shape" in result["why"]


def test_keras2_input_and_model_names_are_not_compared_under_the_keras2_oracle():
    keras = _model(_layer("input_1", "InputLayer", trainable=0),
                   _layer("model", "Functional"), _layer("dense"))
    ours = _model(_layer("input_layer", "InputLayer", trainable=0),
                  _layer("functional", "Functional"), _layer("dense"))
    assert compare(keras, ours, "keras2")["exact"]
    assert not compare(keras, ours, "keras3")["exact"]
    renamed = _model(*ours["layers"][:2], _layer("dense_1"))
    result = compare(keras, renamed, "keras2")
    assert not result["exact"] and result["structure"]  # other names still count


def test_models_an_entry_builds_are_found_under_memlint_names():
    gan = _model(_layer("dense"))
    assert _counterpart("GAN.combined", {"gan.combined": gan}, {}, 1) is gan
    made = _model(_layer("dense"))
    assert _counterpart("build", {"model": made, "other": gan}, {"model": made}, 1) is made
    assert _counterpart("build", {}, {}, 1) is None


def test_totals_count_models_and_oracle_errors():
    rows = [{"models": {"a": {"exact": True, "structure": True},
                        "b": {"exact": False, "structure": True}}},
            {"oracle_error": "ValueError"}]
    assert totals(rows) == {"cases": 2, "oracle_errors": 1, "models": 2, "exact": 1,
                            "structure": 2}
