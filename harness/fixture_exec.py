"""Execute a fixture script with real Keras (test/harness side only, never memlint) and
return its module-level models.  Training, prediction and saving calls are stubbed out, so a
fixture builds its model and nothing else; unbuilt models are built from the data they were
given, as ``fit`` would."""

from __future__ import annotations

import contextlib
import os
import sys

_STUBBED = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
            "test_on_batch", "summary", "save", "save_weights", "fit_generator",
            "predict_generator")


def _install_stubs(keras):
    originals = {name: getattr(keras.Model, name, None) for name in _STUBBED}

    def stub(name):
        def run(self, *args, **kwargs):
            data = args[0] if args else kwargs.get("x")
            if not self.built and hasattr(data, "shape"):
                if isinstance(self, (keras.Sequential, keras.src.models.Functional)):
                    self.build((None,) + tuple(data.shape[1:]))
                else:
                    self(keras.Input(shape=tuple(data.shape[1:])))
            return None
        run.__name__ = name
        return run

    for name in _STUBBED:
        setattr(keras.Model, name, stub(name))
    return originals


def _restore(keras, originals):
    for name, method in originals.items():
        if method is None:
            delattr(keras.Model, name)
        else:
            setattr(keras.Model, name, method)


def load_models(path: str) -> dict:
    """``{variable: keras.Model}`` for the module-level models of the fixture at ``path``."""
    import keras

    folder = os.path.dirname(os.path.abspath(path))
    before = set(sys.modules)
    sys.path.insert(0, folder)
    namespace = {"__name__": "__main__", "__file__": path}
    originals = _install_stubs(keras)
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        with contextlib.redirect_stdout(sys.stderr):
            exec(code, namespace)  # noqa: S102 - our own fixtures, in the harness only
    finally:
        _restore(keras, originals)
        sys.path.remove(folder)
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.abspath(module_file).startswith(folder + os.sep):
                del sys.modules[name]
    return {name: value for name, value in namespace.items()
            if isinstance(value, keras.Model) and not name.startswith("__")}
