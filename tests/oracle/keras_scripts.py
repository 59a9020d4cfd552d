"""Run by the oracle tests in a subprocess: execute fixture scripts with real Keras.

Reads ``{"files": [...]}`` on stdin; for each file, executes it (this is the test tier, never
the product) with training and prediction calls stubbed out, then reports every
``keras.Model`` bound to a module-level variable: each layer's name, class, output shape and
trainable / non-trainable parameter counts.  Writes JSON on stdout.

What each model is fed is recorded too: the stubbed ``fit``/``predict``/... take the FIRST
batch from whatever they are given, through Keras's own data adapters (a ``tf.data.Dataset``,
a ``PyDataset``/``Sequence``, a Python generator, arrays with ``batch_size=``), and report
``"fed": {variable: {"method", "batch_size", "input_shapes"}}`` per file: the method, the
leading dimension of the first batch of ``x`` and the shapes of ``x`` without it, one per model
input (a dict of inputs in ``keras.tree.flatten`` order: sorted keys).  The first training call
(``fit``, ``train_on_batch``, ``fit_generator``) wins; without one, the first prediction call.
A batch that cannot be taken is reported as ``{"method", "error"}`` (the script still runs).

Models kept on plain objects are reported too, named ``holder.attribute`` (``gan.discriminator``
for ``gan = GAN()`` at module level, objects inside objects as ``a.b.c``): those compiled and
those no other model uses as a layer.  A script whose models are built by a class or function
it never calls names the call in its header, ``# oracle-entry: Classifier(input_shape=(128,
1))``: the call runs after the script, and its result (a model, or an object holding models)
is reported under the called name.  Every compiled model is described with the trainable
flags it had at its last ``compile()`` (what its train step updates: a GAN's discriminator
trains its own weights and is frozen inside the combined model); the others as the script
leaves them.

Data the scripts read is declared in their header (``# oracle-data: ...`` lines) and written,
as stand-in data, into a temporary working directory the script then runs in (paths stay
relative, as in real code); ``keras.datasets.*.load_data`` return zero arrays of the real
shapes and dtypes (no download).  The declarations, the writers, the offline loaders and the
first-batch helpers live in ``harness/fixture_data.py`` (shared with ``harness/fixture_exec.py``,
the XLA CPU proxy's runner), which documents the header format.
"""

import contextlib
import json
import os
import re
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402

# run as a script (tests/oracle first on sys.path): the repository root holds harness/
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from harness.held_models import held_models  # noqa: E402
from harness.fixture_data import (  # noqa: E402
    batch_x, build_unbuilt, call_data, data_declarations, first_batch, offline_datasets,
    working_directory)

_STUBBED = ("fit", "train_on_batch", "predict", "predict_on_batch", "evaluate",
            "test_on_batch", "summary", "save", "save_weights",
            "fit_generator", "predict_generator", "evaluate_generator")
_TRAIN = ("fit", "train_on_batch", "fit_generator")
_INFER = ("predict", "predict_on_batch", "predict_generator")
_FEEDS = _TRAIN + _INFER + ("evaluate", "test_on_batch", "evaluate_generator")


def _fed(method, x):
    flat = [t for t in keras.tree.flatten(x) if t is not None]
    shapes = [[int(d) for d in np.shape(t)] for t in flat]
    batches = {s[0] for s in shapes if s}
    if len(batches) != 1:
        raise ValueError(f"the first batch has no single batch dimension: {shapes}")
    return {"method": method, "batch_size": batches.pop(),
            "input_shapes": [s[1:] for s in shapes]}


def _record(model, method, fed):
    previous = getattr(model, "_oracle_fed", None)
    if method in _TRAIN:
        if previous is None or previous["method"] not in _TRAIN:
            model._oracle_fed = fed
    elif method in _INFER and previous is None:
        model._oracle_fed = fed


def _stub(method):
    def run(self, *args, **kwargs):
        data = call_data(args, kwargs)
        first = batch = None
        if method in _FEEDS and data is not None:  # fit(x=None): nothing is fed
            try:
                taken = first_batch(method, args, kwargs)
                first = batch_x(method, taken)
                fed = _fed(method, first)
                if method.startswith("fit") or method == "train_on_batch":
                    batch = taken
            except Exception as exc:  # reported, never fatal: the layers are still compared
                first = None
                fed = {"method": method, "error": f"{type(exc).__name__}: {exc}"}
            _record(self, method, fed)
        build_unbuilt(self, data, first, args[1] if len(args) > 1 else kwargs.get("y"),
                      batch)
        return None
    run.__name__ = method
    return run


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

_compile = keras.Model.compile
# id(model) -> (model, [(layer, trainable)] at its last compile, parents before children);
# kept outside the model, whose attributes Keras would track as layers
_COMPILED = {}


def _recording_compile(self, *args, **kwargs):
    _COMPILED[id(self)] = (self, [(layer, layer.trainable) for layer in
                                  self._flatten_layers(include_self=True, recursive=True)])
    return _compile(self, *args, **kwargs)


keras.Model.compile = _recording_compile

offline_datasets()  # keras.datasets.*.load_data: zero arrays of the real shapes, no download


# --- the run -----------------------------------------------------------------------------------

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


@contextlib.contextmanager
def _as_compiled(model):
    """The trainable flags of the model's last compile() while it is described."""
    flags = _COMPILED.get(id(model), (None, None))[1]
    if not flags:
        yield
        return
    now = [(layer, layer.trainable) for layer, _ in flags]
    try:
        for layer, flag in flags:
            layer.trainable = flag
        yield
    finally:
        for layer, flag in now:
            layer.trainable = flag


def describe(model):
    with _as_compiled(model):
        return _describe(model)


def _describe(model):
    layers = []
    for layer in model.layers:
        layers.append({
            "name": layer.name,
            "type": type(layer).__name__,
            "output_shape": _output_shape(layer),
            "trainable": _count(layer.trainable_weights),
            "non_trainable": _count(layer.non_trainable_weights),
        })
    # a model that trains without a call() (its train_step() runs its models) is never built
    # itself: its weights are its models'
    total = int(model.count_params()) if model.built else _count(model.weights)
    return {"name": model.name, "kind": type(model).__name__, "layers": layers,
            "total": total}


def run_file(path):
    """Execute one fixture as ``python path`` would: its folder first on sys.path, and its
    project's modules forgotten afterwards (another fixture folder may have a module of the
    same name)."""
    keras.backend.clear_session()
    _COMPILED.clear()
    path = os.path.abspath(path) if not os.path.isabs(path) else path
    folder = os.path.dirname(os.path.abspath(path))
    before = set(sys.modules)
    sys.path.insert(0, folder)
    namespace = {"__name__": "__main__", "__file__": path}
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        code = compile(source, path, "exec")
        with working_directory(data_declarations(source)), \
                contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON answer
            exec(code, namespace)  # noqa: S102 - the oracle builds our own fixtures with real Keras
        roots = {name: value for name, value in namespace.items()
                 if not name.startswith("__")}
        entry = _ENTRY.search(source)
        if entry is not None:  # the call the header names, after the script
            with working_directory(data_declarations(source)), \
                    contextlib.redirect_stdout(sys.stderr):
                made = eval(entry.group(1).strip(), namespace)  # noqa: S307 - our fixture
            called = entry.group(1).split("(")[0].strip()
            roots = {called: made, **{k: v for k, v in roots.items() if k != called}}
    finally:
        sys.path.remove(folder)
        local = {"__main__"}  # the modules whose classes are the project's own
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.abspath(module_file).startswith(folder + os.sep):
                local.add(name)
                del sys.modules[name]
    found = {}
    for name, value in roots.items():
        if isinstance(value, keras.Model):
            found.setdefault(name, value)
    _held_models(roots, found, local)
    models, fed = {}, {}
    for name, value in found.items():
        models[name] = describe(value)
        if getattr(value, "_oracle_fed", None) is not None:
            fed[name] = value._oracle_fed
    return {"models": models, "fed": fed}


_ENTRY = re.compile(r"^#\s*oracle-entry:\s*(.+)$", re.MULTILINE)


def _held_models(roots, found, local):
    """Models on attributes of objects of the project's own plain classes:
    ``holder.attribute`` (``harness/held_models.py``)."""
    held_models(roots, found, local, keras.Model, keras.layers.Layer, _COMPILED)


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
