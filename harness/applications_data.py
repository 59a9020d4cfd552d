"""Generate ``memlint/data/applications/``: every ``keras.applications`` factory, read from
Keras's source by memlint's own frontend and recorded as the layer calls it makes.

memlint never imports Keras, and the pre-commit environment has none; user code that calls
``keras.applications.ResNet50(...)`` is analysed by replaying what this module recorded
(``memlint/frontends/keras/applications.py`` says what a trace holds).  Recording works on
the frontend's own objects: while memlint interprets a factory of
``keras/src/applications/*.py`` (``--entry``, never imported), the frontend functions that
create layers and inputs, call layers, apply operations and build the model are wrapped to
write each call down, with its arguments as data.  Arguments that the user's call decides are
marked where they pass through unchanged (``classes``, ``classifier_activation``, ``name``,
``dropout_rate``, ``depth_multiplier`` ...: the factory is run with marked values), and the
results of the two helpers whose value depends on the input size (``obtain_input_shape``,
``correct_pad``) are recorded as calls, evaluated again on replay.  Arguments that change the
architecture in other ways (``include_top``, ``pooling``, ``alpha``, ``minimalistic``,
``include_preprocessing``, sometimes ``weights``) select one trace per combination.

Every trace is checked as it is made: the replayed model (through memlint's whole frontend, as
user code would call the factory) must equal the model memlint reads from Keras's source,
layer by layer, at the recorded arguments and at other sizes, class counts and names.
``python -m harness.applications_data --update`` rewrites the data; ``--check NAME...``
compares what would be written with what is stored.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from contextlib import contextmanager
from itertools import product
from pathlib import Path
from typing import Optional

from memlint.frontends.keras import classes, keras_utils, models
from memlint.frontends.keras.values import (LayerRef, ModelLayer, OpaqueLayer, Ref,
                                            SequentialModel, Tensor, is_unknown)

DATA = Path(__file__).resolve().parents[1] / "memlint" / "data" / "applications"

# Arguments that change the architecture other than by passing through: one trace per value
# (the values Keras ships weights for; other values of alpha are refused on replay).
ALPHAS = {"MobileNet": (0.25, 0.5, 0.75, 1.0),
          "MobileNetV2": (0.35, 0.5, 0.75, 1.0, 1.3, 1.4),
          "MobileNetV3Small": (0.75, 1.0), "MobileNetV3Large": (0.75, 1.0)}
STRUCTURAL = ("include_top", "pooling", "weights", "alpha", "minimalistic",
              "include_preprocessing")
# Never recorded: the input tensor is the caller's (replay substitutes it)
CALLER_VALUES = ("input_tensor", "input_shape")


class GenerationError(Exception):
    """A factory could not be recorded faithfully."""


# ---------------------------------------------------------------------- marked values

class MarkedInt(int):
    param: str


class MarkedFloat(float):
    param: str


class MarkedStr(str):
    param: str


class MarkedTuple(tuple):
    param: str


class Derived(tuple):
    """The result of a recorded helper call (its value id travels with it)."""
    vid: int


def mark(name: str, value):
    """``value`` carrying the parameter's name, or the value itself when its type cannot
    (None, booleans, tuples: those are structural or caller values)."""
    for base, cls in ((bool, None), (int, MarkedInt), (float, MarkedFloat), (str, MarkedStr),
                      (tuple, MarkedTuple)):
        if isinstance(value, base):
            if cls is None:
                return value
            out = cls(value)
            out.param = name
            return out
    return value


# ---------------------------------------------------------------------- recording

class Recorder:
    """The ops of one factory run, with the frontend objects they made."""

    def __init__(self):
        self.ops: list = []
        self.layers: dict = {}  # id(layer object) -> index of its creating op
        self.tensors: dict = {}  # producer key -> tensor id
        self.next_tensor = 0
        self.next_value = 0
        self.quiet = 0  # > 0 inside a custom layer class (its own calls are not the model's)
        self.customs: dict = {}  # index -> ClassObject

    def value(self, v):
        if isinstance(v, (MarkedInt, MarkedFloat, MarkedStr, MarkedTuple)):
            return {"p": v.param}
        if is_unknown(v):  # an argument memlint does not evaluate (an initializer object)
            return {"unknown": v.reason}
        if isinstance(v, Derived):
            return {"v": v.vid}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, Tensor):
            key = _tensor_key(v)
            if key not in self.tensors:
                raise GenerationError(f"a tensor the trace did not make: {v}")
            return {"t": self.tensors[key]}
        if isinstance(v, (LayerRef, OpaqueLayer, classes.ClassLayer, classes.ClassObject,
                          SequentialModel, ModelLayer)):
            obj = getattr(v, "obj", None) or getattr(v, "model", None) or v
            if id(obj) not in self.layers:
                raise GenerationError(f"a layer the trace did not make: {v}")
            return {"l": self.layers[id(obj)]}
        if isinstance(v, Ref):
            return {"ref": v.name}
        if isinstance(v, tuple):
            return {"tuple": [self.value(x) for x in v]}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {"dict": [[self.value(k), self.value(x)] for k, x in v.items()]}
        raise GenerationError(f"cannot record a value of type {type(v).__name__}: {v!r}")

    def output(self, out):
        """Give the tensors a call returned their ids; the structure as recorded."""
        if isinstance(out, Tensor):
            key = _tensor_key(out)
            self.tensors[key] = self.next_tensor
            self.next_tensor += 1
            return {"t": self.tensors[key]}
        if isinstance(out, (list, tuple)):
            return [self.output(x) for x in out]
        raise GenerationError(f"a call returned {type(out).__name__}")

    def derived(self, op: dict, result):
        if not isinstance(result, tuple):
            raise GenerationError(f"{op['op']}() gave {result!r}")
        out = Derived(result)
        out.vid = self.next_value
        self.next_value += 1
        op["out"] = out.vid
        self.ops.append(op)
        return out


def _tensor_key(tensor: Tensor) -> tuple:
    layer, call, index = tensor.producer
    return id(layer), call, index


@contextmanager
def recording(recorder: Recorder):
    """Wrap the frontend functions that build a functional model so that each call is
    written down (and nothing they do changes)."""
    saved = {name: getattr(models, name) for name in (
        "create_layer", "create_input", "call_layer", "tensor_operation", "apply_operation",
        "create_functional", "create_sequential")}
    construct, obtain, pad = classes.construct, keras_utils.obtain_input_shape, \
        keras_utils.correct_pad

    def active(interp) -> bool:
        return recorder.quiet == 0 and not getattr(interp, "tracing", 0)

    def recorded(name: str, op: str, fields: tuple, label: str = "", makes_layer=False,
                 returns_tensors=False):
        """A wrapper of the frontend function ``name(interp, [label,] *fields, node)`` that
        writes each call down as an ``op`` (what it made: a layer, tensors)."""
        def wrapper(interp, *given):
            *values, node = given
            on = active(interp)
            out = saved[name](interp, *values, node)
            if on:
                record = {"op": op}
                if label:
                    record[label], values = values[0], values[1:]
                for field, value in zip(fields, values):
                    record[field] = recorder.value(dict(value) if field == "kwargs"
                                                   else list(value))
                if makes_layer:
                    recorder.layers[id(out)] = len(recorder.ops)
                if returns_tensors:
                    record["out"] = recorder.output(out)
                recorder.ops.append(record)
            return out
        return wrapper

    def call_layer(interp, layer, args, kwargs, node):
        on = active(interp)
        if on:
            op = {"op": "call", "layer": recorder.value(layer),
                  "args": recorder.value(list(args)), "kwargs": recorder.value(dict(kwargs))}
        custom = isinstance(layer, (classes.ClassLayer, classes.ClassObject))
        recorder.quiet += custom  # what a layer class of the source runs inside is its own
        try:
            out = saved["call_layer"](interp, layer, args, kwargs, node)
        finally:
            recorder.quiet -= custom
        if on:
            op["out"] = recorder.output(out)
            recorder.ops.append(op)
        return out

    def construct_class(interp, cls, args, kwargs, node):
        on = active(interp)
        recorder.quiet += 1
        try:
            obj = construct(interp, cls, args, kwargs, node)
        finally:
            recorder.quiet -= 1
        if on and isinstance(obj, classes.ClassObject):
            index = len(recorder.ops)
            recorder.layers[id(obj)] = index
            recorder.customs[index] = obj
            recorder.ops.append({"op": "custom", "cls": cls.name,
                                 "named": isinstance(kwargs.get("name"), str)})
        return obj

    def obtain_input_shape(args, kwargs):
        result = obtain(args, kwargs)
        if recorder.quiet:
            return result
        # the factory's input_shape is marked when the caller gives one (None otherwise:
        # such a trace is replayed only for callers that give none)
        op = {"op": "obtain_input_shape", "args": recorder.value(list(args)),
              "kwargs": recorder.value(dict(kwargs))}
        return recorder.derived(op, result)

    def correct_pad(args, kwargs, data_format):
        result = pad(args, kwargs, data_format)
        if recorder.quiet:
            return result
        op = {"op": "correct_pad", "args": recorder.value(list(args)),
              "kwargs": recorder.value(dict(kwargs)), "data_format": data_format}
        return recorder.derived(op, result)

    both = ("args", "kwargs")
    wrappers = {
        "create_layer": recorded("create_layer", "layer", both, "cls", makes_layer=True),
        "create_input": recorded("create_input", "input", both, returns_tensors=True),
        "call_layer": call_layer,
        "tensor_operation": recorded("tensor_operation", "tensor_op", ("operands",), "type",
                                     returns_tensors=True),
        "apply_operation": recorded("apply_operation", "operation", both, "name",
                                    returns_tensors=True),
        "create_functional": recorded("create_functional", "model", both),
        "create_sequential": recorded("create_sequential", "sequential", both,
                                      makes_layer=True),
    }
    for name, wrapper in wrappers.items():
        setattr(models, name, wrapper)
    classes.construct = construct_class
    keras_utils.obtain_input_shape, keras_utils.correct_pad = obtain_input_shape, correct_pad
    try:
        yield recorder
    finally:
        for name, function in saved.items():
            setattr(models, name, function)
        classes.construct = construct
        keras_utils.obtain_input_shape, keras_utils.correct_pad = obtain, pad


# ---------------------------------------------------------------------- Keras's source

def keras_applications_dir() -> Path:
    """``keras/src/applications`` of the installed Keras (read as text, never imported)."""
    import importlib.util
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        raise GenerationError("Keras is not installed (pip install -e '.[oracle]')")
    return Path(list(spec.submodule_search_locations)[0]) / "src" / "applications"


def keras_version() -> str:
    from importlib.metadata import version
    return version("keras")


def factories(folder: Path) -> dict:
    """``{name: {"module", "exports", "params"}}`` of every function Keras exports under
    ``keras.applications`` (read with ``ast`` from the source)."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.endswith("_test.py") or path.name in ("__init__.py", "imagenet_utils.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            exports = _exports(node)
            if not any(e.startswith("keras.applications.") and e.rsplit(".", 1)[-1] ==
                       node.name for e in exports) or not node.name[:1].isupper():
                continue
            args = node.args
            defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
            params = [[a.arg, ast.literal_eval(d) if d is not None else None]
                      for a, d in zip(args.args, defaults)]
            found[node.name] = {"module": path.stem, "exports": sorted(exports),
                                "params": params}
    return found


def _exports(node: ast.FunctionDef) -> list:
    out = []
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == \
                "keras_export":
            for arg in decorator.args:
                value = ast.literal_eval(arg)
                out.extend([value] if isinstance(value, str) else value)
    return out


@contextmanager
def readable_sources(folder: Path):
    """The applications' source in a scratch folder where each module finds the others as
    project modules (``resnet_v2`` calls ``resnet``'s builder through a library import,
    which memlint does not read): the import lines are rewritten, nothing else."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in folder.glob("*.py"):
            text = path.read_text().replace("from keras.src.applications import resnet\n",
                                            "import resnet\n")
            (Path(tmp) / path.name).write_text(text)
        yield Path(tmp)


# ---------------------------------------------------------------------- one trace

def record(source: Path, name: str, params: list, arguments: dict):
    """The ops of ``name(**arguments)`` and the model memlint reads from the source."""
    from memlint.frontends import keras as frontend

    call = {}
    for param, default in params:
        value = arguments.get(param, default)
        if param in STRUCTURAL or param in CALLER_VALUES:
            call[param] = value
        else:
            call[param] = mark(param, value)
    if isinstance(call.get("weights"), str):
        call["weights"] = mark("weights", call["weights"])
    recorder = Recorder()
    original = frontend.parse_entry
    frontend.parse_entry = lambda text: (name, (), call)
    try:
        with recording(recorder):
            result = frontend.analyze_source(source.read_text(), str(source), entry=name)
    finally:
        frontend.parse_entry = original
    models_found = result.models
    # notes about module-level code (``if ResNet50.__doc__``) change nothing; the test tier
    # compares every trace's model with real Keras
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    if len(models_found) == 1:
        errors += [f"{l.name}: {l.unresolved}" for l in models_found[0].layers
                   if l.unresolved or not l.output_shapes or None in l.output_shapes]
    if len(models_found) != 1 or errors or result.internal_errors:
        raise GenerationError(f"{name}({arguments}): {len(models_found)} models, "
                              f"{errors[:3]} {result.internal_errors[:1]}")
    graph = models_found[0]
    _fill_customs(recorder, graph)
    return recorder.ops, graph


def _fill_customs(recorder: Recorder, graph) -> None:
    """A layer class of Keras's source (ConvNeXt's LayerScale, InceptionResNetV2's
    CustomScaleLayer): its weights as built and whether it keeps its first input's shape,
    from the model memlint read; replay makes a layer of exactly that."""
    by_name = {layer.name: layer for layer in graph.layers}
    for index, obj in recorder.customs.items():
        layer = by_name.get(getattr(obj, "name", None))
        if layer is None:
            raise GenerationError(f"layer class {recorder.ops[index]['cls']} not in the model")
        same = all(_first(inp) == out for inp, out in zip(layer.input_shapes,
                                                         layer.output_shapes))
        if not same:
            raise GenerationError(f"{layer.name}: a layer class whose output is not its "
                                  "input's shape")
        recorder.ops[index].update(
            name=layer.name, weights=[[w.name, list(w.shape), w.trainable]
                                      for w in layer.weights])


def _first(shape):
    return shape[0] if isinstance(shape, list) else shape


# ---------------------------------------------------------------------- variants

# MobileNet and MobileNetV2 choose their default size and their model's name from the rows of
# the input before anything is built (Keras: a square input of one of these sizes is its own
# default size; the name is "<stem>_<alpha:.2f>_<rows>", rows 224 under imagenet weights
# unless the input is one of these sizes).  Recorded as rules replay evaluates, checked below.
ROWS_RULES = {
    "MobileNet": {"sizes": [128, 160, 192, 224], "template": "mobilenet_{alpha:0.2f}_{rows}",
                  "from_tensor": False},
    "MobileNetV2": {"sizes": [96, 128, 160, 192, 224],
                    "template": "mobilenetv2_{alpha:0.2f}_{rows}", "from_tensor": True},
}


def variants(name: str, params: list) -> list:
    """The structural argument combinations recorded for a factory (``input_shape``: None
    or "given", two traces: a given shape passes through where None takes a default)."""
    names = {p for p, _ in params}
    axes = [("include_top", (True, False))]
    if "alpha" in names and name in ALPHAS:
        axes.append(("alpha", ALPHAS[name]))
    for flag in ("minimalistic", "include_preprocessing"):
        if flag in names:
            axes.append((flag, (False, True)))
    axes.append(("input_shape", (None, "given")))
    out = []
    for values in product(*[v for _, v in axes]):
        combo = dict(zip([a for a, _ in axes], values))
        for pooling in ((None,) if combo["include_top"] else (None, "avg", "max")):
            out.append({**combo, "pooling": pooling})
    return out


def variant_key(arguments: dict) -> str:
    return ",".join(f"{k}={arguments[k]!r}" for k in sorted(arguments))


def default_size(ops: list) -> int:
    """The default input size a trace's ``obtain_input_shape`` call was given (224 when it
    makes none)."""
    for op in ops:
        if op["op"] == "obtain_input_shape":
            kwargs = dict((k, v) for k, v in op["kwargs"]["dict"])
            size = kwargs.get("default_size", op["args"][1] if len(op["args"]) > 1 else 224)
            return size if isinstance(size, int) else 224
    return 224


def generate(name: str, info: dict, source_dir: Path, check=True,
             only: Optional[list] = None) -> dict:
    """Every trace of one factory: ``{"params", "structural", "traces": {key: ops}}``
    (``only``: the structural combinations to record, ``weights`` aside; default all)."""
    source = source_dir / f"{info['module']}.py"
    params = info["params"]
    traces = {}
    sizes = {}
    fixed: set = set()
    combos = variants(name, params)
    if only is not None:
        # a given input shape is recorded at the default size its None twin finds
        wanted = only + [{**c, "input_shape": None} for c in only
                         if c.get("input_shape") == "given"]
        combos = [c for c in combos if c in wanted]
    for combo in combos:
        per_weights = {}
        for weights in ("imagenet", None):
            arguments = {**combo, "weights": weights}
            run = dict(arguments)
            if combo["input_shape"] == "given":
                size = sizes.get(variant_key({**combo, "input_shape": None}), 224)
                run["input_shape"] = mark("input_shape", (size, size, 3))
            ops, graph = record(source, name, params, run)
            ops = apply_rows_rule(name, ops)
            if combo["input_shape"] is None:
                sizes[variant_key(combo)] = default_size(ops)
            per_weights[weights] = (ops, graph, arguments, run)
        same = _without_weights(per_weights["imagenet"][0]) == \
            _without_weights(per_weights[None][0])
        for weights, (ops, graph, arguments, run) in per_weights.items():
            key_args = dict(arguments) if not same else {
                k: v for k, v in arguments.items() if k != "weights"}
            traces[variant_key(key_args)] = ops
            if check:
                verify(name, info, ops, graph, run, source, sorted(key_args), fixed)
            if same:
                break
    structural = sorted({k for key in traces for k in _key_names(key)})
    return {"module": info["module"], "exports": info["exports"], "params": params,
            "structural": structural, "fixed": sorted(fixed), "traces": traces}


def apply_rows_rule(name: str, ops: list) -> list:
    """Replace what MobileNet / MobileNetV2 compute from the input's rows (the default size
    given to ``obtain_input_shape``, the model's default name) by the rule that makes it."""
    rule = ROWS_RULES.get(name)
    if rule is None:
        return ops
    for op in ops:
        if op["op"] == "obtain_input_shape":
            op["kwargs"]["dict"] = [[k, {"rows": "default_size", **rule} if k == "default_size"
                                     else v] for k, v in op["kwargs"]["dict"]]
        if op["op"] == "model":
            op["kwargs"]["dict"] = [[k, {"rows": "name", **rule} if k == "name" and
                                     isinstance(v, str) else v]
                                    for k, v in op["kwargs"]["dict"]]
    return ops


def _key_names(key: str) -> list:
    return [part.split("=", 1)[0] for part in key.split(",")]


def _without_weights(ops: list) -> str:
    return json.dumps(ops, sort_keys=True).replace('"imagenet"', "null")


# ---------------------------------------------------------------------- verification

def probes(name: str, info: dict, arguments: dict) -> list:
    """Other calls a trace must replay exactly: another class count, activation, model
    name and input size where Keras allows them."""
    params = dict(info["params"])
    fixed_top = arguments.get("include_top") and arguments.get("weights") == "imagenet"
    other = {k: v for k, v in arguments.items()}
    if "classes" in params and not fixed_top:
        other["classes"] = 7
    if "classifier_activation" in params:
        other["classifier_activation"] = None if arguments.get("include_top") else "sigmoid"
    out = []
    if arguments.get("input_shape") is not None:
        sizes = [(160, 160, 3)] if name in ROWS_RULES else []
        if not fixed_top:
            sizes.append((197, 181, 3))
        out += [dict(other, input_shape=size) for size in sizes]
    if other != arguments:
        out.append(other)
    out.append(dict(arguments, name="probe_model"))
    return out


def verify(name: str, info: dict, ops: list, graph, arguments: dict, source: Path,
           structural: list, fixed: set) -> None:
    """The trace replayed through the whole frontend (a user file calling the factory) must
    give memlint's model of Keras's source, layer for layer, at the recorded arguments and at
    other sizes, class counts and names (:func:`probes`)."""
    from memlint.frontends.keras import applications
    plain = {k: (tuple(v) if isinstance(v, tuple) else v) for k, v in arguments.items()}
    key = variant_key({k: ("given" if k == "input_shape" and v is not None else v)
                       for k, v in plain.items() if k in structural})
    described = {"params": info["params"], "structural": structural, "variants": [key]}
    for probe in [plain] + probes(name, info, plain):
        try:
            expected = graph if probe is plain else record(source, name, info["params"],
                                                          _marked(probe))[1]
        except GenerationError:
            if probe.get("name") != "probe_model":
                raise
            fixed.add("name")  # Keras itself cannot build it under another name
            continue
        with applications.overridden(name, described, ops):
            replayed = _replay(name, probe)
        mine, theirs = _layers(replayed), _layers(expected)
        if mine != theirs:
            first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                         min(len(mine), len(theirs)))
            raise GenerationError(
                f"{name}({probe}): replay differs at layer {first}: "
                f"{mine[first] if first < len(mine) else None} != "
                f"{theirs[first] if first < len(theirs) else None}")


def _marked(arguments: dict) -> dict:
    out = dict(arguments)
    if isinstance(out.get("input_shape"), tuple):
        out["input_shape"] = mark("input_shape", out["input_shape"])
    return out


def _replay(name: str, arguments: dict):
    from memlint.frontends.keras import analyze_source
    text = "import keras\n\nmodel = keras.applications.%s(%s)\n" % (
        name, ", ".join(f"{k}={v!r}" for k, v in arguments.items()))
    result = analyze_source(text, "replay.py")
    if len(result.models) != 1 or result.internal_errors:
        problems = [d.message for d in result.diagnostics][:3]
        raise GenerationError(f"replay of {name}({arguments}) gave "
                              f"{len(result.models)} models: {problems} "
                              f"{result.internal_errors[:1]}")
    return result.models[0]


def _layers(graph) -> list:
    return [(l.name, l.type, repr(l.output_shapes), [(w.name, w.shape, w.trainable)
                                                     for w in l.weights])
            for l in graph.layers] + [graph.name]


# ---------------------------------------------------------------------- files

def write(name: str, data: dict, folder: Path = DATA) -> Path:
    from memlint.frontends.keras.applications import pack
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json.xz"
    path.write_bytes(pack(data))
    return path


def stored(name: str, folder: Path = DATA) -> dict:
    """A factory's stored data with every trace."""
    from memlint.frontends.keras.applications import unpack
    header, body = unpack((folder / f"{name}.json.xz").read_bytes())
    traces = {key: json.loads(body[start:start + length])
              for key, (start, length) in header["traces"].items()}
    return {**header, "traces": traces}


def write_index(found: dict, folder: Path = DATA) -> Path:
    """``index.json``: each factory's parameters, structural arguments and variants (read
    by memlint before any trace is)."""
    index = {"keras_version": keras_version(), "factories": {}}
    for name in sorted(found):
        data = stored(name, folder)
        index["factories"][name] = {
            "module": data["module"], "params": data["params"],
            "structural": data["structural"], "fixed": data["fixed"],
            "variants": sorted(data["traces"])}
    path = folder / "index.json"
    path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="factories (default: all)")
    parser.add_argument("--update", action="store_true", help="write the data")
    parser.add_argument("--check", action="store_true",
                        help="compare with the stored data (exit 1 on a difference)")
    parser.add_argument("--no-verify", action="store_true")
    options = parser.parse_args(argv)
    folder = keras_applications_dir()
    found = factories(folder)
    names = options.names or sorted(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        parser.error(f"not a keras.applications factory: {', '.join(unknown)}")
    differences = 0
    with readable_sources(folder) as source_dir:
        for name in names:
            data = generate(name, found[name], source_dir, check=not options.no_verify)
            if options.update:
                path = write(name, data)
                print(f"{name}: {len(data['traces'])} traces, {path.stat().st_size} bytes")
            elif options.check:
                if stored(name) != json.loads(json.dumps(data)):
                    differences += 1
                    print(f"{name}: differs from the stored data")
                else:
                    print(f"{name}: same")
    if options.update:
        write_index(found if not options.names else
                    {n: found[n] for n in found if (DATA / f"{n}.json.xz").exists()})
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
