"""Run by the oracle tests in a subprocess: execute fixture scripts with real Keras.

Reads ``{"files": [...]}`` on stdin; for each file, executes it (this is the test tier, never
the product) with training and prediction calls stubbed out, then reports every
``keras.Model`` bound to a module-level variable: each layer's name, class, output shape and
trainable / non-trainable parameter counts.  Writes JSON on stdout.
"""

import contextlib
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402

_STUBBED = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
            "test_on_batch", "summary", "save", "save_weights")


def _stub(method):
    def run(self, *args, **kwargs):
        data = args[0] if args else kwargs.get("x")
        if not self.built and hasattr(data, "shape"):
            if _is_subclassed(self):  # Keras 3 build() does not run call(): fit would
                self(keras.Input(shape=tuple(data.shape[1:])))
            else:
                self.build((None,) + tuple(data.shape[1:]))
        return None
    run.__name__ = method
    return run


def _is_subclassed(model):
    return not isinstance(model, (keras.Sequential, keras.src.models.Functional))


_layer_call = keras.layers.Layer.__call__


def _recording_call(self, *args, **kwargs):
    """Layers inside subclassed models have no graph nodes: remember each first output."""
    out = _layer_call(self, *args, **kwargs)
    if not hasattr(self, "_oracle_output"):
        try:
            self._oracle_output = _shape(out)
        except Exception:
            pass
    return out


keras.layers.Layer.__call__ = _recording_call

for _method in _STUBBED:
    setattr(keras.Model, _method, _stub(_method))


def _shape(tensors):
    if isinstance(tensors, (list, tuple)):
        shapes = [_shape(t) for t in tensors]
        return shapes[0] if len(shapes) == 1 else shapes
    return list(tensors.shape)


def _output_shape(layer):
    try:
        return _shape(layer.output)
    except Exception:  # shared layers have several outputs: report the first call's
        if not layer._inbound_nodes:  # a layer of a subclassed model
            return getattr(layer, "_oracle_output", None)
        node = layer._inbound_nodes[0]
        return _shape(node.output_tensors)


def _count(weights):
    return int(sum(int(np.prod(w.shape)) for w in weights))


def describe(model):
    layers = []
    for layer in model.layers:
        layers.append({
            "name": layer.name,
            "type": type(layer).__name__,
            "output_shape": _output_shape(layer),
            "trainable": _count(layer.trainable_weights),
            "non_trainable": _count(layer.non_trainable_weights),
        })
    return {"name": model.name, "kind": type(model).__name__, "layers": layers,
            "total": int(model.count_params())}


def run_file(path):
    """Execute one fixture as ``python path`` would: its folder first on sys.path, and its
    project's modules forgotten afterwards (another fixture folder may have a module of the
    same name)."""
    keras.backend.clear_session()
    folder = os.path.dirname(os.path.abspath(path))
    before = set(sys.modules)
    sys.path.insert(0, folder)
    namespace = {"__name__": "__main__", "__file__": path}
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON answer
            exec(code, namespace)  # noqa: S102 - the oracle builds our own fixtures with real Keras
    finally:
        sys.path.remove(folder)
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.abspath(module_file).startswith(folder + os.sep):
                del sys.modules[name]
    models = {}
    for name, value in namespace.items():
        if isinstance(value, keras.Model) and not name.startswith("__"):
            models[name] = describe(value)
    return {"models": models}


def main():
    request = json.load(sys.stdin)
    results = {}
    for path in request["files"]:
        try:
            results[path] = run_file(path)
        except Exception as exc:
            results[path] = {"error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc()[-2000:]}
    json.dump({"keras_version": keras.__version__, "backend": keras.backend.backend(),
               "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
