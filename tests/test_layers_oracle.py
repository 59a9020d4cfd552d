"""Every layer case in ``tests/layer_cases`` must match real Keras exactly."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import memlint.layers as registry
from memlint.layers.base import Args, LayerError, LayerInstance, UnresolvedArgument
from tests import layer_cases
from tests.conftest import require_keras, run_oracle


def _all_cases() -> list:
    cases = []
    for info in sorted(pkgutil.iter_modules(layer_cases.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"tests.layer_cases.{info.name}")
        for i, case in enumerate(module.CASES):
            cases.append(pytest.param(case, id=f"{info.name}-{i}-{case['layer']}"))
    return cases


CASES = _all_cases()


@pytest.fixture(scope="module")
def keras_results():
    require_keras()
    specs = [p.values[0] for p in CASES]
    answer = run_oracle("keras_layers.py", specs)
    return {id(spec): result for spec, result in zip(specs, answer["results"])}


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
