"""Run by the oracle tests in a subprocess: build layer cases with real Keras.

Reads a JSON list of cases (see ``tests/layer_cases``) on stdin and writes a JSON list of
results: ``{"output_shape", "trainable", "non_trainable"}`` or ``{"error"}``.  This file
imports Keras; memlint itself never does.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402


def make_layer(spec):
    args = [make_value(a) for a in spec["args"]]
    kwargs = {k: make_value(v) for k, v in spec["kwargs"].items()}
    return getattr(keras.layers, spec["layer"])(*args, **kwargs)


def make_value(value):
    if isinstance(value, dict) and "__layer__" in value:
        return make_layer({"layer": value["__layer__"], "args": value["args"],
                           "kwargs": value["kwargs"]})
    if isinstance(value, list):
        return tuple(make_value(v) for v in value)
    return value


def shape_of(tensor):
    if isinstance(tensor, (list, tuple)):
        return [shape_of(t) for t in tensor]
    return list(tensor.shape)


def count(weights):
    return int(sum(int(np.prod(w.shape)) for w in weights))


def run(case):
    keras.backend.clear_session()
    spec = case.get("twin") or case
    shapes = case["input"]
    if case["call"] == "single":
        inputs = keras.Input(batch_shape=tuple(shapes))
    else:
        inputs = [keras.Input(batch_shape=tuple(s)) for s in shapes]
    layer = make_layer(spec)
    if case["call"] == "args":
        out = layer(*inputs)
    else:
        out = layer(inputs)
    return {
        "output_shape": shape_of(out),
        "trainable": count(layer.trainable_weights),
        "non_trainable": count(layer.non_trainable_weights),
    }


def main():
    cases = json.load(sys.stdin)
    results = []
    for case in cases:
        try:
            results.append(run(case))
        except Exception as exc:  # Keras rejected the case: that is a result too
            results.append({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
    json.dump({"keras_version": keras.__version__, "backend": keras.backend.backend(),
               "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
