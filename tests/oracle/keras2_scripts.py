"""Run by the oracle tests in a subprocess: execute fixture scripts with Keras 2 (tf_keras).

The Keras 2 oracle, for fixtures written for ``tf.keras`` 2 that Keras 3 refuses (their
header says ``# oracle: keras2``).  The subprocess runs with ``TF_USE_LEGACY_KERAS=1``, so
``tensorflow.keras`` is the ``tf_keras`` package, and this script imports ``tf_keras``.

Reads ``{"files": [...]}`` on stdin; executes each file (this is the test tier, never the
product) with training, prediction and saving stubbed out, and reports every Keras model bound
to a module-level variable as ``keras_scripts.py`` does: each layer's name, class, output
shape and trainable / non-trainable parameter counts.  What the models are fed is not
recorded (``"fed": {}``).  The image data format is reset after each file.
"""

import contextlib
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tf_keras as keras  # noqa: E402

_STUBBED = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
            "test_on_batch", "summary", "save", "save_weights", "load_weights",
            "fit_generator", "predict_generator", "evaluate_generator")


def _stub(self, *args, **kwargs):
    return None


for _method in _STUBBED:
    setattr(keras.Model, _method, _stub)


def _shape(tensors):
    if isinstance(tensors, (list, tuple)):
        shapes = [_shape(t) for t in tensors]
        return shapes[0] if len(shapes) == 1 else shapes
    return [None if d is None else int(d) for d in tensors.shape]


def _output_shape(layer):
    try:
        return _shape(layer.output)
    except Exception:  # a shared layer: its first call's output
        return _shape(layer.get_output_at(0))


def _count(weights):
    return int(sum(int(np.prod(w.shape)) for w in weights))


def describe(model):
    layers = [{"name": layer.name, "type": type(layer).__name__,
               "output_shape": _output_shape(layer),
               "trainable": _count(layer.trainable_weights),
               "non_trainable": _count(layer.non_trainable_weights)}
              for layer in model.layers]
    return {"name": model.name, "kind": type(model).__name__, "layers": layers,
            "total": int(model.count_params())}


def run_file(path):
    """Execute one fixture as ``python path`` would (its folder first on sys.path)."""
    keras.backend.clear_session()
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    namespace = {"__name__": "__main__", "__file__": path}
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON answer
            exec(code, namespace)  # noqa: S102 - the oracle builds our own fixtures
    finally:
        sys.path.remove(folder)
        keras.backend.set_image_data_format("channels_last")
    models = {name: describe(value) for name, value in namespace.items()
              if isinstance(value, keras.Model) and not name.startswith("__")}
    return {"models": models, "fed": {}}


def main():
    request = json.load(sys.stdin)
    results = {}
    for path in request["files"]:
        try:
            results[path] = run_file(path)
        except Exception as exc:
            results[path] = {"error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc()[-2000:]}
    json.dump({"keras_version": keras.__version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
