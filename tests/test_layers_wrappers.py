"""Lambda and TimeDistributed details the JSON oracle cases cannot express.

A Lambda needs a Python function, which a layer case cannot carry, so these expectations are
derived by hand from Keras 3's ``Lambda.compute_output_shape``: a tuple ``output_shape`` is
taken without the batch axis, the input's batch size goes in front, and it is never checked
against what the function returns.  ``test_lambda_matches_keras`` re-derives them with real
Keras when it is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import memlint.layers as registry
from memlint.ir import Weight
from memlint.layers import base
from memlint.layers.base import Args, LayerError, LayerInstance, Unknown, UnresolvedArgument
from tests.conftest import require_keras

LAMBDA_FN = Unknown("lambda functions are not evaluated")  # what the frontend passes


def _lambda(*args, **kwargs) -> LayerInstance:
    return registry.instantiate("Lambda", Args(list(args), kwargs))


def _call(layer, shape):
    return registry.call(layer, shape)


# (output_shape argument, input shape, expected output shape); None = Keras rejects it
LAMBDA_CASES = [
    ((3,), (None, 5, 7), (None, 3)),
    ((None, 3), (None, 5, 7), (None, None, 3)),  # a leading None is NOT the batch axis
    ((9, 9, 9), (None, 5, 7), (None, 9, 9, 9)),  # not checked against the function
    ((), (None, 5, 7), (None,)),
    ((3,), (4, 5, 7), (4, 3)),  # fixed batch size carried over
    ((0,), (None, 5), (None, 0)),
    ([(3,), (4, 2)], (None, 5, 7), [(None, 3), (None, 4, 2)]),  # several outputs
    (((3,), (4, 2)), (None, 5, 7), [(None, 3), (None, 4, 2)]),
    ([3], (None, 5, 7), None),  # a list of ints is not a shape
    ([4, 3], (None, 5, 7), None),
    (3, (None, 5, 7), None),
    ("abc", (None, 5, 7), None),
    ((2.0,), (None, 5, 7), None),
    ((-2,), (None, 5, 7), None),
]


@pytest.mark.parametrize("output_shape, input_shape, expected", LAMBDA_CASES)
def test_lambda_output_shape(output_shape, input_shape, expected):
    layer = _lambda(LAMBDA_FN, output_shape=output_shape)
    if expected is None:
        with pytest.raises(LayerError):
            _call(layer, input_shape)
        return
    out, weights = _call(layer, input_shape)
    assert out == expected
    assert weights == []


def test_lambda_output_shape_by_position():
    out, weights = _call(_lambda(LAMBDA_FN, (6, 2)), (None, 3))
    assert out == (None, 6, 2)
    assert weights == []


def test_lambda_on_several_inputs_takes_the_first_batch_size():
    layer = _lambda(LAMBDA_FN, output_shape=(3,))
    assert layer.kind.output_shape(layer.config, [(8, 5, 7), (None, 3)]) == (8, 3)


def test_lambda_without_output_shape_is_unresolved():
    layer = _lambda(LAMBDA_FN)  # creating it is fine: the analysis can go on past it
    with pytest.raises(UnresolvedArgument) as info:
        _call(layer, (None, 5, 7))
    assert info.value.name == "function"
    assert "pass output_shape=" in info.value.reason
    with pytest.raises(UnresolvedArgument):
        _call(_lambda(LAMBDA_FN, output_shape=None), (None, 5, 7))


def test_lambda_with_unknown_or_callable_output_shape_is_unresolved():
    for value in (Unknown("not known"), (Unknown("not known"), 3), object()):
        with pytest.raises(UnresolvedArgument) as info:
            _call(_lambda(LAMBDA_FN, output_shape=value), (None, 5, 7))
        assert info.value.name == "output_shape"


def test_lambda_needs_a_function():
    with pytest.raises(UnresolvedArgument):
        _lambda(output_shape=(3,))


def test_lambda_inside_time_distributed():
    inner = _lambda(LAMBDA_FN, output_shape=(3,))
    td = registry.instantiate("TimeDistributed", Args([inner]))
    assert _call(td, (None, 5, 6)) == ((None, 5, 3), [])
    td = registry.instantiate("TimeDistributed", Args([_lambda(LAMBDA_FN)]))
    with pytest.raises(UnresolvedArgument):
        _call(td, (None, 5, 6))


class _Unmodelled:
    reason = "custom layer class"


class _Holder:
    def __init__(self, instance):
        self.instance = instance


def test_time_distributed_accepts_a_frontend_layer_object():
    dense = registry.instantiate("Dense", Args([4]))
    td = registry.instantiate("TimeDistributed", Args([_Holder(dense)]))
    out, weights = _call(td, (None, 10, 8))
    assert out == (None, 10, 4)
    assert sum(w.size for w in weights) == 8 * 4 + 4


def test_time_distributed_of_an_unmodelled_layer_is_unresolved():
    with pytest.raises(UnresolvedArgument):
        registry.instantiate("TimeDistributed", Args([_Unmodelled()]))
    with pytest.raises(UnresolvedArgument):
        registry.instantiate("TimeDistributed", Args([Unknown("not known")]))


class _Named:
    name = "encoder"
    big = "x" * 10_000  # a repr this long must not reach the message


def test_time_distributed_of_a_non_layer_names_it_briefly():
    with pytest.raises(LayerError) as exc:
        registry.instantiate("TimeDistributed", Args([_Named()]))
    assert "_Named 'encoder'" in str(exc.value) and len(str(exc.value)) < 200


class _Frontend:
    """What a frontend registers for its own objects (a model, a layer class of the file)."""

    class_name = "Encoder"

    def output_shape(self, shape):
        return (shape[0], 8)

    def weights(self, shape):
        return [Weight("kernel", (shape[-1], 8)), Weight("bias", (8,))]

    def saved_tensors(self, shape):
        return [(shape[0], 16)]


def test_time_distributed_applies_a_frontend_object_per_step(monkeypatch):
    marker = object()
    monkeypatch.setattr(base, "NESTED_ADAPTERS",
                        [lambda v: _Frontend() if v is marker else None])
    td = registry.instantiate("TimeDistributed", Args([marker]))
    out, weights = _call(td, (None, 6, 3))
    assert out == (None, 6, 8)
    assert sum(w.size for w in weights) == 3 * 8 + 8
    assert td.kind.saved_tensors(td.config, (None, 6, 3)) == [(None, 6, 16)]


def test_time_distributed_saved_tensors_gain_the_time_axis(monkeypatch):
    # No single-input layer keeps extra tensors yet: give Dense some for this test.
    dense = registry.instantiate("Dense", Args([4]))
    monkeypatch.setattr(dense.kind, "saved_tensors", lambda config, shape: [(shape[0], 2, 7)])
    td = registry.instantiate("TimeDistributed", Args([dense]))
    assert td.kind.saved_tensors(td.config, (None, 3, 8)) == [(None, 3, 2, 7)]


_KERAS_SCRIPT = r"""
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras

def decode(v):  # tuples and lists travel as {"t": ..., "v": [...]}
    if isinstance(v, dict):
        items = [decode(x) for x in v["v"]]
        return tuple(items) if v["t"] == "tuple" else items
    return v

out = []
for output_shape, input_shape in json.load(sys.stdin):
    keras.backend.clear_session()
    try:
        layer = keras.layers.Lambda(lambda x: x, output_shape=decode(output_shape))
        y = layer(keras.Input(batch_shape=tuple(input_shape)))
        shape = [list(t.shape) for t in y] if isinstance(y, (list, tuple)) else list(y.shape)
        out.append({"shape": shape, "weights": len(layer.weights)})
    except Exception as exc:
        out.append({"error": type(exc).__name__})
json.dump(out, sys.stdout)
"""


def _to_json(value):
    if isinstance(value, (tuple, list)):
        return {"t": "tuple" if isinstance(value, tuple) else "list",
                "v": [_to_json(v) for v in value]}
    return value


@pytest.mark.oracle
def test_lambda_matches_keras():
    require_keras()
    payload = [[_to_json(o), list(i)] for o, i, _ in LAMBDA_CASES]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               KERAS_BACKEND=os.environ.get("MEMLINT_ORACLE_BACKEND", "tensorflow"))
    proc = subprocess.run([sys.executable, "-c", _KERAS_SCRIPT], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for (output_shape, input_shape, expected), got in zip(LAMBDA_CASES, json.loads(proc.stdout)):
        if expected is None:
            assert "error" in got, (output_shape, got)
            continue
        assert "error" not in got, (output_shape, got)
        want = [list(s) for s in expected] if isinstance(expected, list) else list(expected)
        assert got == {"shape": want, "weights": 0}, output_shape
