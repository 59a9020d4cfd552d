"""Sweep memlint over real public Keras 2-era repositories and compare it with real Keras.

Test and harness side only, never memlint.  The repositories' code is kept OUT of this
repository: check the files out (any way you like) under one folder, one subfolder per
repository named ``owner__name`` with the repository's own layout below it, then::

    python harness/repo_sweep.py --root DIR [--list cases.json] [--json out.json]

Each case names a file of a repository and, for a file that only defines factories or classes
that hold models, the call memlint is given as ``--entry`` (``GAN()``,
``create_wide_residual_network((32, 32, 3), nb_classes=10, N=2, k=2)``).  The default cases
(``CASES`` below: repositories, paths, commits and entries, no third-party code) are the sweep
``docs/keras2-sweep.md`` reports; ``--list`` reads others from a JSON file of the same form.

For every case, real Keras builds the models in a subprocess (run sequentially, one at a time):

* ``"oracle": "keras3"``: Keras 3, with ``tests/oracle/keras_scripts.py``'s stubs (training,
  prediction and saving do nothing; ``keras.datasets`` load zero arrays offline) and its
  ``describe`` (each compiled model with the trainable flags of its last ``compile()``).
* ``"oracle": "keras2"``: Keras 2 (``tf_keras``, ``TF_USE_LEGACY_KERAS=1``) with the same stubs
  and descriptions, and a compatibility layer for code of the Keras 2.0-2.2 era that the
  installed ``tf_keras`` refuses only for its module layout: ``import keras`` is ``tf_keras``,
  the old submodules (``keras.layers.convolutional``, ``keras.layers.advanced_activations``,
  ``keras.engine.topology``, ``keras.utils.np_utils`` ...) are aliases of the public modules,
  ``K.image_dim_ordering()`` / ``K.set_image_dim_ordering()``, ``_obtain_input_shape`` with its
  old ``include_top=`` keyword, and a tensor's ``_keras_shape``.  What a model IS is never
  shimmed: a layer Keras 2 no longer has, or an internal API the code subclasses, still fails.

A script case executes the file as ``python FILE`` would (``__name__ == "__main__"``); an entry
case imports it (its ``if __name__ == "__main__":`` block does not run: it trains) and then
evaluates the entry call.  Models are found as the oracle tier finds them: module-level
variables, and models held on attributes of the project's own plain objects
(``GAN.discriminator``).  ``"stub_modules"`` lists third-party modules the file imports only
for plotting, data or metrics (matplotlib, pandas, sklearn, skimage): the oracle gets inert
stand-ins; memlint reads the file as it is.  ``"paths"`` are folders of the repository put on
the oracle's ``sys.path`` (a project importing ``utils.utils`` from its root).

memlint analyses the same file with ``analyze_file(path, Settings(entry=...))``.  A model is
rebuilt EXACTLY when memlint reports a model of the same name whose layers match real Keras
one by one (name, class, output shape, trainable and non-trainable parameter counts) and
whose total matches; the report also says whether the structure matches when layer and model
names are ignored (Keras 2 and Keras 3 name functional models differently).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The default sweep: repositories (owner__name), files at the commits read, entries.
# No third-party code here: check the files out under --root to run it.
CASES = [
    # eriklindernoren/Keras-GAN: a plain class per GAN, three compiled models each
    {"repo": "eriklindernoren__Keras-GAN", "commit": "01c19e45d3d4aacb181f5b9ef1bf01b3f34f7391",
     "file": "gan/gan.py", "entry": "GAN()", "oracle": "keras2", "stub_modules": ["matplotlib"]},
    {"repo": "eriklindernoren__Keras-GAN", "commit": "01c19e45d3d4aacb181f5b9ef1bf01b3f34f7391",
     "file": "dcgan/dcgan.py", "entry": "DCGAN()", "oracle": "keras2",
     "stub_modules": ["matplotlib"]},
    {"repo": "eriklindernoren__Keras-GAN", "commit": "2f7b43f92d9f3326d3c838acb8acf75f76001fc5",
     "file": "cgan/cgan.py", "entry": "CGAN()", "oracle": "keras2",
     "stub_modules": ["matplotlib"]},
    {"repo": "eriklindernoren__Keras-GAN", "commit": "01c19e45d3d4aacb181f5b9ef1bf01b3f34f7391",
     "file": "acgan/acgan.py", "entry": "ACGAN()", "oracle": "keras2",
     "stub_modules": ["matplotlib"]},
    # hfawaz/dl-4-tsc: a Classifier class per model, build_model called from __init__
    {"repo": "hfawaz__dl-4-tsc", "commit": "21b8ac2f2e570aa730835b32f714c837583373aa",
     "file": "classifiers/fcn.py",
     "entry": "Classifier_FCN('out/', input_shape=(128, 1), nb_classes=5)",
     "oracle": "keras2", "stub_modules": ["utils", "matplotlib"]},
    {"repo": "hfawaz__dl-4-tsc", "commit": "21b8ac2f2e570aa730835b32f714c837583373aa",
     "file": "classifiers/mlp.py",
     "entry": "Classifier_MLP('out/', input_shape=(128, 1), nb_classes=5)",
     "oracle": "keras2", "stub_modules": ["utils", "matplotlib"]},
    {"repo": "hfawaz__dl-4-tsc", "commit": "21b8ac2f2e570aa730835b32f714c837583373aa",
     "file": "classifiers/resnet.py",
     "entry": "Classifier_RESNET('out/', input_shape=(128, 1), nb_classes=5)",
     "oracle": "keras2", "stub_modules": ["utils", "matplotlib"]},
    {"repo": "hfawaz__dl-4-tsc", "commit": "21b8ac2f2e570aa730835b32f714c837583373aa",
     "file": "classifiers/inception.py",
     "entry": "Classifier_INCEPTION('out/', input_shape=(128, 1), nb_classes=5)",
     "oracle": "keras2", "stub_modules": ["utils", "matplotlib"]},
    # titu1994 architecture zoo
    {"repo": "titu1994__Wide-Residual-Networks",
     "commit": "12d8aa84c88a3e41eca4e78a4587448c9a989283", "file": "wide_residual_network.py",
     "oracle": "keras2"},
    {"repo": "titu1994__Wide-Residual-Networks",
     "commit": "12d8aa84c88a3e41eca4e78a4587448c9a989283", "file": "wide_residual_network.py",
     "entry": "create_wide_residual_network((32, 32, 3), nb_classes=100, N=4, k=8, "
              "dropout=0.3)", "oracle": "keras2"},
    {"repo": "titu1994__Keras-ResNeXt", "commit": "001ede18fc1496efd3fe56241f29554025333905",
     "file": "resnext.py", "entry": "ResNeXt((32, 32, 3), depth=29, cardinality=8, width=4)",
     "oracle": "keras2"},
    {"repo": "titu1994__Keras-ResNeXt", "commit": "001ede18fc1496efd3fe56241f29554025333905",
     "file": "resnext.py", "entry": "ResNeXt((64, 64, 3), depth=[2, 2, 2], cardinality=4, "
                                    "width=8, classes=100)", "oracle": "keras2"},
    {"repo": "titu1994__Keras-ResNeXt", "commit": "001ede18fc1496efd3fe56241f29554025333905",
     "file": "resnext.py", "entry": "ResNeXt((64, 64, 3), depth=[2, 2, 2], cardinality=4, "
                                    "width=8, include_top=False)", "oracle": "keras2"},
    # zhixuhao/unet: star imports, a factory
    {"repo": "zhixuhao__unet", "commit": "3951284d177ddb8a4beb543504caa65351cecd99",
     "file": "model.py", "entry": "unet()", "oracle": "keras2", "stub_modules": ["skimage"]},
    # keras-team/keras examples of the Keras 2 era
    {"repo": "keras-team__keras", "commit": "05676872b9a772d21da0afab92dc515b3738e54d",
     "file": "examples/mnist_cnn.py", "oracle": "keras3"},
    {"repo": "keras-team__keras", "commit": "334df8d5069bbed0763c08e7a6a89880adac39c5",
     "file": "examples/cifar10_resnet.py", "oracle": "keras2"},
    {"repo": "keras-team__keras", "commit": "334df8d5069bbed0763c08e7a6a89880adac39c5",
     "file": "examples/cifar10_resnet.py", "entry": "resnet_v2((32, 32, 3), depth=29)",
     "oracle": "keras2"},
]


# --- the oracle: real Keras in a subprocess ---------------------------------------------------

def run_oracle(case: dict, root: Path, timeout: int = 900) -> dict:
    """Build one case's models with real Keras in a fresh subprocess."""
    repo = root / case["repo"]
    request = {"file": str(repo / case["file"]), "entry": case.get("entry"),
               "stub_modules": case.get("stub_modules", []),
               "paths": [str(repo / p) for p in case.get("paths", ["."])]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    flavour = case.get("oracle", "keras3")
    if flavour == "keras2":
        env["TF_USE_LEGACY_KERAS"] = "1"
    else:
        env.pop("TF_USE_LEGACY_KERAS", None)
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", flavour],
                              input=json.dumps(request), capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"oracle exited {done.returncode}", "traceback": done.stderr[-3000:]}


# --- the worker (runs in the subprocess) --------------------------------------------------------

class _Inert:
    """A stand-in for anything a plotting/data/metrics module offers: callable, indexable,
    every attribute another stand-in."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getitem__(self, key):
        return _Inert()

    def __setitem__(self, key, value):
        pass

    def __iter__(self):
        return iter(())


def _install_stubs(names):
    import importlib.abc
    import importlib.machinery
    import types

    class StubModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _Inert()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname.split(".")[0] in names:
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            module = StubModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Finder())


def _install_keras2_compat(tf_keras):
    """``import keras`` as Keras 2.0-2.2 code wrote it, on tf_keras (module layout only)."""
    import importlib
    import importlib.abc
    import importlib.machinery
    import types

    from tf_keras import backend as K
    from tf_keras.src.applications import imagenet_utils
    from tf_keras.src.engine.keras_tensor import KerasTensor

    def module(name, **attrs):
        made = types.ModuleType(name)
        made.__dict__.update(attrs)
        made.__path__ = []
        return made

    def convert_all_kernels_in_model(model):
        return None

    def obtain_input_shape(input_shape, default_size, min_size, data_format,
                           require_flatten=None, weights=None, include_top=None):
        if include_top is not None:  # Keras 2.0.0-2.0.6's signature, and its rules
            first = data_format == "channels_first"
            default = (3, default_size, default_size) if first else \
                (default_size, default_size, 3)
            if include_top:
                if input_shape is not None and input_shape != default:
                    raise ValueError("When setting`include_top=True`, `input_shape` "
                                     f"should be {default}.")
                return default
            if input_shape is None:
                return (3, None, None) if first else (None, None, 3)
            channels = input_shape[0] if first else input_shape[-1]
            spatial = input_shape[1:] if first else input_shape[:2]
            if len(input_shape) != 3 or channels != 3 or any(
                    d is not None and d < min_size for d in spatial):
                raise ValueError(f"input_shape {input_shape} refused")
            return input_shape
        return imagenet_utils.obtain_input_shape(input_shape, default_size, min_size,
                                                 data_format, require_flatten, weights)

    layers = tf_keras.layers
    legacy = {
        **{f"keras.layers.{old}": layers for old in (
            "advanced_activations", "convolutional", "normalization", "merge", "core",
            "pooling", "recurrent", "embeddings", "wrappers", "noise", "local",
            "convolutional_recurrent", "cudnn_recurrent")},
        "keras.engine": module("keras.engine", Layer=layers.Layer, InputSpec=layers.InputSpec,
                               Input=layers.Input, Model=tf_keras.Model,
                               get_source_inputs=tf_keras.utils.get_source_inputs),
        "keras.engine.topology": module("keras.engine.topology", Layer=layers.Layer,
                                        InputSpec=layers.InputSpec, Input=layers.Input,
                                        get_source_inputs=tf_keras.utils.get_source_inputs),
        "keras.utils.layer_utils": module("keras.utils.layer_utils",
                                          convert_all_kernels_in_model=convert_all_kernels_in_model,
                                          get_source_inputs=tf_keras.utils.get_source_inputs),
        "keras.utils.data_utils": module("keras.utils.data_utils",
                                         get_file=tf_keras.utils.get_file),
        "keras.utils.np_utils": module("keras.utils.np_utils",
                                       to_categorical=tf_keras.utils.to_categorical),
        "keras.applications.imagenet_utils": module(
            "keras.applications.imagenet_utils", _obtain_input_shape=obtain_input_shape,
            preprocess_input=imagenet_utils.preprocess_input,
            decode_predictions=imagenet_utils.decode_predictions),
    }

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname != "keras" and not fullname.startswith("keras."):
                return None
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

        def create_module(self, spec):
            if spec.name in legacy:
                return legacy[spec.name]
            return importlib.import_module("tf_keras" + spec.name[len("keras"):])

        def exec_module(self, module):
            pass

    for name in [n for n in sys.modules if n == "keras" or n.startswith("keras.")]:
        del sys.modules[name]  # Keras 3, imported by TensorFlow: Keras 2 code gets tf_keras
    sys.meta_path.insert(0, Finder())

    def image_dim_ordering():
        return "th" if K.image_data_format() == "channels_first" else "tf"

    def set_image_dim_ordering(order):
        K.set_image_data_format("channels_first" if order == "th" else "channels_last")

    K.image_dim_ordering = image_dim_ordering
    K.set_image_dim_ordering = set_image_dim_ordering
    KerasTensor._keras_shape = property(lambda self: tuple(self.shape.as_list()))


def worker(flavour: str) -> None:
    request = json.load(sys.stdin)
    sys.path.insert(0, str(ROOT / "tests" / "oracle"))
    sys.path.insert(0, str(ROOT))
    _install_stubs(set(request["stub_modules"]))
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # the scripts print; stdout carries the JSON answer
    try:
        if flavour == "keras2":
            result = _run_keras2(request)
        else:
            result = _run_keras3(request)
    except BaseException as exc:  # noqa: BLE001 - reported, the sweep goes on
        import traceback
        result = {"error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-3000:]}
    sys.stdout = real_stdout
    print(json.dumps(result))


def _execute(request, keras_model, held, compiled_reset, describe):
    """Run the file (as a script, or imported and then the entry called) and describe every
    model it leaves: module-level variables and models held on the project's plain objects."""
    import contextlib

    path = os.path.abspath(request["file"])
    folder = os.path.dirname(path)
    compiled_reset()
    before = set(sys.modules)
    for extra in reversed([folder] + request["paths"]):
        sys.path.insert(0, extra)
    entry = request.get("entry")
    namespace = {"__name__": "__sweep__" if entry else "__main__", "__file__": path}
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"repo_sweep_{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    with contextlib.chdir(scratch) if hasattr(contextlib, "chdir") else _chdir(scratch):
        exec(compile(source, path, "exec"), namespace)  # noqa: S102 - the harness oracle
        roots = {k: v for k, v in namespace.items() if not k.startswith("__")}
        if entry:
            made = eval(entry, namespace)  # noqa: S307 - the sweep's own entry call
            called = entry.split("(")[0].strip()
            roots = {called: made}
    local = {"__main__", "__sweep__"}
    for name in set(sys.modules) - before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if os.path.abspath(module_file).startswith(os.path.dirname(folder)):
            local.add(name)
    found = {}
    for name, value in roots.items():
        if isinstance(value, keras_model):
            found.setdefault(name, value)
    held(roots, found, local)
    return {"models": {name: describe(model) for name, model in found.items()}}


@__import__("contextlib").contextmanager
def _chdir(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _quiet(keras):
    """What the oracle tier's stubs leave a script to read back: ``evaluate`` gives scores
    (``scores[0]``), and ``plot_model`` draws nothing (it needs pydot and graphviz)."""
    def evaluate(self, *args, **kwargs):
        return [0.0, 0.0]

    keras.Model.evaluate = evaluate
    keras.utils.plot_model = lambda *args, **kwargs: None


def _run_keras3(request):
    import keras
    import keras_scripts  # the oracle tier's stubs, offline datasets and describe()

    _quiet(keras)

    return dict(_execute(request, keras.Model, keras_scripts._held_models,
                         keras_scripts._COMPILED.clear, keras_scripts.describe),
                keras=keras.__version__)


def _run_keras2(request):
    import tf_keras as keras
    import keras2_scripts  # the Keras 2 oracle's stubs (fit, save, load_weights ...)

    from harness.fixture_data import _DATASETS
    from harness.held_models import held_models
    import tensorflow  # noqa: F401 - before the compatibility layer replaces ``keras``

    _install_keras2_compat(keras)
    _quiet(keras)
    for name, load_data in _DATASETS.items():  # offline: zero arrays of the real shapes
        module = getattr(keras.datasets, name, None)
        if module is not None:
            module.load_data = load_data
    keras.utils.get_file = lambda *args, **kwargs: "pretrained-weights-not-downloaded.h5"

    compiled = {}
    original_compile = keras.Model.compile

    def recording_compile(self, *args, **kwargs):
        compiled[id(self)] = (self, [(layer, layer.trainable) for layer in
                                     self._flatten_layers(include_self=True, recursive=True)])
        return original_compile(self, *args, **kwargs)

    keras.Model.compile = recording_compile

    def describe(model):
        flags = compiled.get(id(model), (None, None))[1]
        now = [(layer, layer.trainable) for layer, _ in flags or ()]
        try:
            for layer, flag in flags or ():
                layer.trainable = flag
            return keras2_scripts.describe(model)
        finally:
            for layer, flag in now:
                layer.trainable = flag

    def held(roots, found, local):
        held_models(roots, found, local, keras.Model, keras.layers.Layer, compiled)

    keras.backend.clear_session()
    return dict(_execute(request, keras.Model, held, compiled.clear, describe),
                keras=keras.__version__)


# --- memlint and the comparison -------------------------------------------------------------

def _as_lists(shape):
    if isinstance(shape, (list, tuple)):
        return [_as_lists(s) for s in shape]
    return shape


def memlint_models(path: Path, entry) -> dict:
    from memlint.analysis import analyze_file
    from memlint.config import Settings

    report = analyze_file(str(path), Settings(entry=entry))
    out = {}
    for graph in report.models:
        out[graph.variable] = {
            "name": graph.name,
            "layers": [{"name": layer.name, "type": layer.type,
                        "output_shape": _as_lists(layer.output_shape),
                        "trainable": layer.trainable_params,
                        "non_trainable": layer.non_trainable_params}
                       for layer in graph.layers],
            "total": graph.params}
    diagnostics = [f"{d.code} {d.message[:200]}" for d in report.diagnostics
                   if d.code in ("MEM000", "MEM099") or "could not" in d.message]
    return {"models": out, "notes": diagnostics[:5],
            "internal_errors": [str(e)[:300] for e in report.internal_errors][:3]}


# Keras 2 names inputs input_1, input_2 (a Sequential's own input <first layer>_input) and
# functional models model, model_1; Keras 3, whose names memlint follows, input_layer,
# input_layer_1 and functional, functional_1.  Under the Keras 2 oracle these names are not
# compared; every other layer name is.
_KERAS2_NAMING = ("InputLayer", "Functional", "Model")


def compare(theirs: dict, ours, flavour: str = "keras3") -> dict:
    """One model: exact, or the first difference."""
    if ours is None:
        return {"exact": False, "structure": False, "why": "memlint reports no such model"}
    if len(ours["layers"]) != len(theirs["layers"]):
        return {"exact": False, "structure": False,
                "why": f"{len(ours['layers'])} layers, Keras has {len(theirs['layers'])}: "
                       f"memlint {[l['name'] for l in ours['layers']][:12]}, "
                       f"Keras {[l['name'] for l in theirs['layers']][:12]}"}
    first, structural = None, None
    for index, (mine, real) in enumerate(zip(ours["layers"], theirs["layers"])):
        for key in ("name", "type", "output_shape", "trainable", "non_trainable"):
            if key == "name" and flavour == "keras2" and real["type"] in _KERAS2_NAMING:
                continue
            if _as_lists(mine[key]) != _as_lists(real[key]):
                where = f"layer {index} {real['name']!r} {key}: memlint {mine[key]!r}, " \
                        f"Keras {real[key]!r}"
                first = first or where
                if key != "name":
                    structural = structural or where
    if ours["total"] != theirs["total"]:
        where = f"total: memlint {ours['total']:,}, Keras {theirs['total']:,}"
        first = first or where
        structural = structural or where
    return {"exact": first is None, "structure": structural is None, "why": first}


def _counterpart(variable: str, models: dict, entry_made: dict, layers: int):
    """memlint's model of that name.  memlint names what an entry builds differently from
    the oracle (which calls it after importing the file): a held model of an entry call
    (``GAN.combined``) after the variable the file's own ``__main__`` block binds
    (``gan.combined``): the one model with the same attribute path; a model a factory entry
    returns after the variable inside the factory (``model``): the model the entry added to
    what memlint reports without it (``entry_made``), the one with Keras's layer count when
    several."""
    if variable in models:
        return models[variable]
    head, dot, attribute = variable.partition(".")
    if dot:
        same = [m for name, m in models.items() if name.partition(".")[2] == attribute]
        return same[0] if len(same) == 1 else None
    if len(entry_made) == 1:
        return next(iter(entry_made.values()))
    same = [m for m in entry_made.values() if len(m["layers"]) == layers]
    return same[0] if same else None


def sweep(cases: list, root: Path) -> list:
    rows = []
    for case in cases:
        path = root / case["repo"] / case["file"]
        label = f"{case['repo']}/{case['file']}" + (f" --entry '{case['entry']}'"
                                                    if case.get("entry") else "")
        started = time.time()
        if not path.is_file():
            rows.append({"case": label, "repo": case["repo"], "error": "file not checked out"})
            continue
        oracle = run_oracle(case, root)
        try:
            mine = memlint_models(path, case.get("entry"))
            base = memlint_models(path, None)["models"] if case.get("entry") else {}
        except Exception as exc:  # noqa: BLE001 - a crash is a finding
            mine = {"models": {}, "error": f"{type(exc).__name__}: {exc}"}
            base = {}
        entry_made = {name: model for name, model in mine["models"].items()
                      if name not in base or model != base[name]}
        row = {"case": label, "repo": case["repo"], "file": case["file"],
               "entry": case.get("entry"), "oracle": case.get("oracle", "keras3"),
               "seconds": round(time.time() - started, 1),
               "memlint_models": sorted(mine["models"]),
               "memlint_notes": mine.get("notes", []) + mine.get("internal_errors", []) +
               ([mine["error"]] if "error" in mine else [])}
        if "error" in oracle:
            row["oracle_error"] = oracle["error"]
            row["oracle_traceback"] = oracle.get("traceback", "")[-1500:]
        else:
            row["models"] = {}
            for variable, model in oracle["models"].items():
                result = compare(model, _counterpart(variable, mine["models"], entry_made,
                                                     len(model["layers"])),
                                 case.get("oracle", "keras3"))
                result.update(layers=len(model["layers"]), params=model["total"])
                row["models"][variable] = result
        rows.append(row)
        print(_summary_line(row), file=sys.stderr, flush=True)
    return rows


def _summary_line(row):
    if "oracle_error" in row:
        return f"ORACLE-ERROR {row['case']}: {row['oracle_error'][:200]}"
    parts = [f"{'OK ' if m['exact'] else 'MISS'} {v} ({m['layers']} layers)"
             + ("" if m["exact"] else f": {m['why'][:300]}") for v, m in row["models"].items()]
    return f"{row['case']} [{row['seconds']}s]\n  " + "\n  ".join(parts or ["no models"])


def totals(rows: list) -> dict:
    models = [m for r in rows for m in r.get("models", {}).values()]
    return {"cases": len(rows), "oracle_errors": sum("oracle_error" in r for r in rows),
            "models": len(models), "exact": sum(m["exact"] for m in models),
            "structure": sum(m["structure"] for m in models)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=("keras2", "keras3"), help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help="folder of checked-out repos (owner__name)")
    parser.add_argument("--list", type=Path, help="JSON list of cases (default: CASES)")
    parser.add_argument("--only", help="run the cases whose repo or file contains this")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    if args.root is None:
        parser.error("--root is required")
    sys.path.insert(0, str(ROOT))
    cases = json.loads(args.list.read_text()) if args.list else CASES
    if args.only:
        cases = [c for c in cases if args.only in c["repo"] or args.only in c["file"]]
    rows = sweep(cases, args.root)
    figures = totals(rows)
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps({"totals": figures, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
