"""Every layer case in ``tests/layer_cases`` must match real Keras exactly."""

from __future__ import annotations

import datetime

import pytest

import memlint.layers as registry
from harness import keras_layer_results as stored_answers
from memlint.layers.base import Args, LayerError, LayerInstance, UnresolvedArgument
from tests.conftest import require_keras, run_oracle

CASES = [pytest.param(case, id=f"{module}-{i}-{case['layer']}")
         for module, i, case in stored_answers.all_cases()]


@pytest.fixture(scope="module")
def keras_answers():
    """Keras's answer for every case: the stored ones (harness.keras_layer_results), with
    the cases not stored yet and today's sample of the stored ones built again in Keras;
    also the sampled cases whose fresh answer differs from the stored one."""
    require_keras()
    specs = [p.values[0] for p in CASES]
    stored = stored_answers.load()
    build = stored_answers.to_build(specs, stored, datetime.date.today().toordinal())
    fresh = run_oracle("keras_layers.py", build)["results"] if build else []
    answers = dict(stored["results"])
    stale = []
    for spec, result in zip(build, fresh):
        key = stored_answers.case_key(spec)
        if key in answers and not _same_answer(answers[key], result):
            stale.append(f"{spec}: stored {answers[key]}, Keras now {result}")
        answers[key] = result
    return {"by_case": {id(spec): answers[stored_answers.case_key(spec)] for spec in specs},
            "built": len(build), "stale": stale}


def _same_answer(stored: dict, fresh: dict) -> bool:
    """Equal answers; two refusals are the same answer whatever their messages say."""
    if "error" in stored or "error" in fresh:
        return "error" in stored and "error" in fresh
    return stored == fresh


@pytest.fixture(scope="module")
def keras_results(keras_answers):
    return keras_answers["by_case"]


@pytest.mark.oracle
def test_stored_answers_are_what_keras_gives_today(keras_answers):
    """The day's sample of stored answers, built again, is what Keras gives (stale answers
    fail here: rebuild them with the command below)."""
    assert keras_answers["built"] > 0
    assert not keras_answers["stale"], (
        "\n".join(keras_answers["stale"][:20]) + f"\nrun `{stored_answers.REFRESH}`")


def _value(value):
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, dict) and "__layer__" in value:
        return _instance(value["__layer__"], value["args"], value["kwargs"])
    return value


def _instance(type_name, args, kwargs) -> LayerInstance:
    return registry.instantiate(
        type_name, Args([_value(a) for a in args], {k: _value(v) for k, v in kwargs.items()})
    )


def _memlint(case) -> dict:
    try:
        layer = _instance(case["layer"], case["args"], case["kwargs"])
        shapes = case["input"]
        if case["call"] == "single":
            shapes = tuple(shapes)
        else:
            shapes = [tuple(s) for s in shapes]
        out, weights = registry.call(layer, shapes)
    except (LayerError, UnresolvedArgument) as exc:
        return {"error": str(exc)}
    return {
        "output_shape": _as_lists(out),
        "trainable": sum(w.size for w in weights if w.trainable),
        "non_trainable": sum(w.size for w in weights if not w.trainable),
    }


def _as_lists(shape):
    if isinstance(shape, list):
        return [_as_lists(s) for s in shape]
    return list(shape)


def test_every_case_names_a_registered_layer():
    missing = sorted({p.values[0]["layer"] for p in CASES} - set(registry.REGISTRY))
    assert not missing, f"cases for unregistered layers: {missing}"


@pytest.mark.oracle
@pytest.mark.parametrize("case", CASES)
def test_layer_matches_keras(case, keras_results):
    expected = keras_results[id(case)]
    got = _memlint(case)
    if "error" in expected:
        assert "error" in got, f"Keras rejects this case ({expected['error']}) but memlint gave {got}"
        return
    assert "error" not in got, f"memlint rejects a case Keras accepts: {got['error']}"
    assert got == expected
