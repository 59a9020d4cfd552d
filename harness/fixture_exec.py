"""Execute a fixture script with real Keras (test/harness side only, never memlint) and
return its module-level models.  Training, prediction and saving calls are stubbed out, so a
fixture builds its model and nothing else; unbuilt models are built from the data they were
given, as ``fit`` would: from an array's shape, or from the first batch of a dataset, a
generator or a ``PyDataset`` (``harness/fixture_data.py``).  Data the fixture declares
(``# oracle-data:``) is written to a temporary working directory for the run, and
``keras.datasets`` loaders return zero arrays of the real shapes (no download)."""

from __future__ import annotations

import contextlib
import os
import sys

from harness.fixture_data import (build_unbuilt, call_data, data_declarations, first_batch_x,
                                  offline_datasets, restore_datasets, working_directory)

_STUBBED = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
            "test_on_batch", "summary", "save", "save_weights", "fit_generator",
            "predict_generator", "evaluate_generator")
_FEEDS = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
          "test_on_batch", "fit_generator", "predict_generator", "evaluate_generator")


def _install_stubs(keras):
    originals = {name: getattr(keras.Model, name, None) for name in _STUBBED}

    def stub(name):
        def run(self, *args, **kwargs):
            data = call_data(args, kwargs)
            first = None
            if (not self.built and name in _FEEDS and data is not None
                    and not hasattr(data, "shape")):
                # a dataset, a generator, a PyDataset: build from its first batch as fit does
                with contextlib.suppress(Exception):
                    first = first_batch_x(name, args, kwargs)
            build_unbuilt(self, data, first)
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


class FixtureError(Exception):
    """A fixture that did not build the model asked for (the reason is data, not a crash)."""


def load_model(path: str, name: str):
    """The module-level model ``name`` of the fixture at ``path``, run as a plain script
    (``sys.argv`` is the file alone, for fixtures that parse arguments); a
    :class:`FixtureError` with the reason when the fixture fails or builds no such model."""
    argv = sys.argv
    sys.argv = [str(path)]
    try:
        models = load_models(str(path))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - one fixture's failure is data
        raise FixtureError(f"building the fixture: {type(exc).__name__}: {exc}") from None
    finally:
        sys.argv = argv
    model = models.pop(name, None)
    models.clear()
    if model is None:
        raise FixtureError("not built by Keras (no module-level model of that name)")
    return model


def load_models(path: str) -> dict:
    """``{variable: keras.Model}`` for the module-level models of the fixture at ``path``."""
    import keras

    path = os.path.abspath(path)  # the fixture may run in a temporary working directory
    folder = os.path.dirname(path)
    before = set(sys.modules)
    sys.path.insert(0, folder)
    namespace = {"__name__": "__main__", "__file__": path}
    originals = _install_stubs(keras)
    datasets = offline_datasets()
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        code = compile(source, path, "exec")
        with working_directory(data_declarations(source)), \
                contextlib.redirect_stdout(sys.stderr):
            exec(code, namespace)  # noqa: S102 - our own fixtures, in the harness only
    finally:
        restore_datasets(datasets)
        _restore(keras, originals)
        sys.path.remove(folder)
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.abspath(module_file).startswith(folder + os.sep):
                del sys.modules[name]
    return {name: value for name, value in namespace.items()
            if isinstance(value, keras.Model) and not name.startswith("__")}
