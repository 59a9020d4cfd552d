"""``keras.applications`` factories called in the analysed code, replayed from data.

memlint never imports Keras, and the environment that runs it usually has none.  The
architecture of every application ships with memlint as data (``memlint/data/applications``):
for each factory, one *trace* per combination of the arguments that change its architecture
(``include_top``, ``pooling``, ``alpha``, ``minimalistic``, ``include_preprocessing``, and
``weights`` where it adds layers), written by ``harness/applications_data.py`` while memlint's
own frontend read the factory from Keras's source.  A trace is the list of calls the factory
made, in order:

* ``layer``: a layer constructor (``cls``, ``args``, ``kwargs``); ``custom``: an instance of a
  layer class of Keras's source, given as its name and weights (it keeps its input's shape);
* ``input``: ``keras.Input(...)``; ``call``: a layer called on tensors (``out`` numbers the
  tensors it returns); ``tensor_op`` / ``operation``: an operator or ``keras.ops`` function on
  tensors; ``model``: the ``Functional`` the factory returns;
* ``obtain_input_shape`` / ``correct_pad``: the helpers whose value depends on the input size,
  evaluated again (``keras_utils``) on the caller's input.

Values are JSON, with ``{"t": n}`` a tensor, ``{"l": i}`` the layer made by op ``i``,
``{"v": n}`` a helper's result, ``{"p": name}`` an argument of the factory's call,
``{"ref": name}`` a library object, ``{"tuple": [...]}`` and ``{"dict": [[k, v], ...]}``.
Replaying a trace goes through the same frontend functions as the code it was recorded from
(automatic names, dtype policy, shapes, errors), so the backbone is a functional model like
any other: ``.layers``, ``get_layer``, ``trainable``, use as a layer, surgery.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from memlint.frontends.keras import keras_utils, models, nested
from memlint.frontends.keras.names import to_snake_case
from memlint.frontends.keras.values import (FunctionalModel, LayerRef, Ref, SequentialModel,
                                            Tensor, Unknown, is_unknown)
from memlint.layers.base import LayerInstance, LayerKind
from memlint.ir import Weight

DATA = Path(__file__).resolve().parents[2] / "data" / "applications"

# Arguments of the Keras 2 ``keras_applications`` package's factories that inject Keras's
# modules: they change nothing memlint models.
_INJECTED = ("backend", "layers", "models", "utils")
_STEMS = ("keras.applications.", "keras_applications.")
# Libraries of pretrained models memlint has no description of: their models (and presets)
# get a note naming the call.  keras_hub / keras_cv / keras_nlp: their ``models`` namespace
# and ``from_preset``; the others: anything they construct.
_ZOO_MODELS = ("keras_hub.", "keras_cv.", "keras_nlp.")
_ZOOS = ("tensorflow_hub.", "segmentation_models.", "efficientnet.", "classification_models.",
         "image_classifiers.", "vit_keras.", "transformers.TF")

# Arguments whose value changes no shape: an unknown one leaves the model known
_SHAPELESS = ("input_tensor", "name", "classifier_activation")

_index: Optional[dict] = None
_traces: dict = {}
_overrides: dict = {}


def _index_file() -> dict:
    """``index.json``, read once: the Keras version the data comes from and the factories."""
    global _index
    if _index is None:
        _index = json.loads((DATA / "index.json").read_text())
    return _index


def index() -> dict:
    """The shipped factories: parameters, structural arguments and variants of each."""
    return _index_file()["factories"]


def factory_of(name: str) -> Optional[str]:
    """The factory a canonical name calls (``keras.applications.ResNet50``,
    ``keras.applications.resnet50.ResNet50``, ``keras_applications.resnet50.ResNet50``), or
    None when it names no application."""
    if not name.startswith(_STEMS):
        return None
    leaf = name.rsplit(".", 1)[-1]
    return leaf if leaf[:1].isupper() else None


def is_model_zoo(name: str) -> bool:
    """A pretrained model of a library memlint does not describe (keras_hub, keras_cv,
    tensorflow_hub, segmentation_models ...)."""
    leaf = name.rsplit(".", 1)[-1]
    if name.startswith(_ZOO_MODELS):
        return leaf == "from_preset" or (".models." in name and leaf[:1].isupper())
    return name.startswith(_ZOOS) and (leaf[:1].isupper() or leaf == "from_pretrained")


def zoo_note(interp, name: str, node) -> Unknown:
    reason = ("memlint has no description of this library's models (it ships the "
              "keras.applications architectures only, and never imports a library or "
              "downloads a preset); it would need the architecture built from Keras layers "
              "in the analysed code, or a keras.applications model")
    interp.state.note_unresolved(interp.location(node), f"{name}()", reason)
    made = Unknown(reason)
    leaf = name.rsplit(".", 1)[-1]
    if leaf[:1].isupper():  # a layer object (hub.KerasLayer): named as Keras names it
        made.constructed = (leaf, interp.location(node), "a layer of that library")
    return made


@contextmanager
def overridden(name: str, info: dict, ops: list):
    """Replay ``ops`` for every call of ``name`` (described by ``info`` as in the index)
    instead of the shipped data: used while the data is generated, to check each trace
    before it is written."""
    _overrides[name] = (info, ops)
    try:
        yield
    finally:
        _overrides.pop(name, None)


def pack(data: dict) -> bytes:
    """A factory's data as stored: a first line of JSON (everything but the traces, and
    where each trace lies after it), then the traces back to back; xz-compressed.  Reading
    one trace parses only that trace."""
    body, places = [], {}
    offset = 0
    for key in sorted(data["traces"]):
        text = json.dumps(data["traces"][key], sort_keys=True, separators=(",", ":"))
        places[key] = [offset, len(text)]
        body.append(text)
        offset += len(text)
    header = {k: v for k, v in data.items() if k != "traces"}
    header["traces"] = places
    text = json.dumps(header, sort_keys=True, separators=(",", ":")) + "\n" + "".join(body)
    import lzma
    return lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME)


def unpack(raw: bytes) -> tuple:
    """``(header, body)`` of a stored factory (see :func:`pack`)."""
    import lzma  # only for files that call an application
    text = lzma.decompress(raw).decode()
    first, _, body = text.partition("\n")
    return json.loads(first), body


def stored_trace(name: str, key: str) -> Optional[list]:
    """One stored trace of a factory (None when there is no such variant)."""
    if name not in _traces:
        _traces[name] = unpack((DATA / f"{name}.json.xz").read_bytes())
    header, body = _traces[name]
    place = header["traces"].get(key)
    if place is None:
        return None
    start, length = place
    return json.loads(body[start:start + length])


# ---------------------------------------------------------------------- the call

def call_factory(interp, name: str, canonical_name: str, args: list, kwargs: dict, node):
    """``keras.applications.<name>(...)`` in the analysed code: the functional model Keras
    would build, or Unknown (with a note saying why) when memlint cannot tell which."""
    state = interp.state
    loc = interp.location(node)
    what = f"{canonical_name}()"
    info, ops = _overrides.get(name) or (index().get(name), None)
    if info is None:
        reason = (f"memlint has no description of {name} (it ships the keras.applications "
                  f"models of Keras {_index_file().get('keras_version', '?')}: {', '.join(sorted(index()))})")
        state.note_unresolved(loc, what, reason)
        return Unknown(reason)
    bound = _bind(info["params"], args, kwargs)
    if isinstance(bound, str):
        state.note_error(loc, f"{name}(): {bound}")
        return Unknown(bound)
    unknown = next((p for p, _ in info["params"] if p not in _SHAPELESS and
                    is_unknown(bound.get(p))), None)
    if unknown is not None:
        reason = f"argument {unknown} is not known statically, and it decides the architecture"
        state.note_unresolved(loc, what, reason)
        return Unknown(reason)
    if state.context.data_format != "channels_last":
        reason = "memlint describes the applications in the channels_last data format only"
        state.note_unresolved(loc, what, reason)
        return Unknown(reason)
    key, problem = _variant(info, bound)
    if problem:
        state.note_unresolved(loc, what, problem)
        return Unknown(problem)
    refused = _refused(bound) or _fixed(name, info, bound)
    if refused:
        state.note_error(loc, f"{name}(): {refused}")
        return Unknown(refused)
    if ops is None:
        ops = stored_trace(name, key)
    if ops is None:
        reason = f"memlint ships no {name} with {key}"
        state.note_unresolved(loc, what, reason)
        return Unknown(reason)
    return Replay(interp, node, name, bound, dict(info["params"]).get("name")).run(ops)


def _bind(params: list, args: list, kwargs: dict):
    """The call's value of every parameter (defaults filled in), or the error Keras's
    signature gives."""
    names = [p for p, _ in params]
    if len(args) > len(names):
        return f"takes {len(names)} arguments, {len(args)} given"
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key in _INJECTED:
            continue
        if key not in names:
            return f"got an unexpected keyword argument '{key}'"
        if key in bound:
            return f"got multiple values for argument '{key}'"
        bound[key] = value
    for param, default in params:
        bound.setdefault(param, default)
    return bound


def _variant(info: dict, bound: dict) -> tuple:
    """The trace key for the call's structural arguments, or a reason there is none."""
    chosen = {}
    for param in info["structural"]:
        value = bound.get(param)
        if param == "include_top" or param in ("minimalistic", "include_preprocessing"):
            value = bool(value)
        elif param == "pooling":
            value = value if value in ("avg", "max") and not bound.get("include_top") else None
        elif param == "weights":
            value = "imagenet" if value == "imagenet" else None
        elif param == "input_shape":
            value = None if value is None else "given"
        chosen[param] = value
    for key in info["variants"]:
        if _matches(key, chosen):
            return key, None
    if "alpha" in chosen:
        shipped = sorted({_parse_key(k)["alpha"] for k in info["variants"]})
        return None, (f"alpha={chosen['alpha']!r}: memlint ships this model for alpha "
                      f"{', '.join(map(str, shipped))} (the values Keras has weights for)")
    return None, f"memlint ships no variant for {chosen}"


def _parse_key(key: str) -> dict:
    out = {}
    for part in key.split(","):
        name, text = part.split("=", 1)
        out[name] = json.loads(text.replace("'", '"').replace("None", "null")
                               .replace("True", "true").replace("False", "false"))
    return out


def _matches(key: str, chosen: dict) -> bool:
    wanted = _parse_key(key)
    for name, value in wanted.items():
        given = chosen.get(name)
        if isinstance(value, float) or isinstance(given, float):
            if not isinstance(given, (int, float)) or isinstance(given, bool) or \
                    abs(float(given) - float(value)) > 1e-9:
                return False
        elif given != value:
            return False
    return True


def _refused(bound: dict) -> Optional[str]:
    """What every application refuses before it builds anything (other refusals, such as an
    input size, come from ``obtain_input_shape`` as the trace replays)."""
    if bound.get("weights") == "imagenet" and bound.get("include_top") and \
            bound.get("classes") != 1000:
        return ("Keras refuses classes other than 1000 with weights='imagenet' and "
                "include_top=True")
    return None


def _fixed(name: str, info: dict, bound: dict) -> Optional[str]:
    """An argument Keras's factory cannot be built with unless it keeps its default (Keras
    3's EfficientNetV2 looks its block table up by ``name``)."""
    defaults = dict(info["params"])
    for param in info.get("fixed", ()):
        if bound.get(param) != defaults.get(param):
            return (f"Keras cannot build {name} with {param}={bound.get(param)!r}: the "
                    f"factory looks its configuration up by {param} (it raises KeyError)")
    return None


# ---------------------------------------------------------------------- replay

class _CustomKind(LayerKind):
    """A layer class of Keras's source (ConvNeXt's ``LayerScale``): the weights it builds,
    as recorded, and its input's shape as its output."""

    def output_shape(self, config: dict, input_shape):
        return input_shape[0] if isinstance(input_shape, list) else input_shape

    def weights(self, config: dict, input_shape) -> list:
        return [Weight(n, tuple(shape), trainable) for n, shape, trainable in
                config["weights"]]


_CUSTOM = _CustomKind()


class Replay:
    """One replay of a trace in the analysed file's state, at the call's location."""

    def __init__(self, interp, node, factory: str, bound: dict,
                 default_name: Optional[str] = None):
        self.interp, self.node, self.bound = interp, node, bound
        self.factory = factory
        self.default_name = default_name
        self.tensors: dict = {}
        self.values: dict = {}
        self.layers: dict = {}
        self.given_input = bound.get("input_tensor")
        self.input_size = None  # what obtain_input_shape gave

    def run(self, ops: list) -> Any:
        model = Unknown("the application's model was not built")
        first_input = True
        for index, op in enumerate(ops):
            kind = op["op"]
            if kind == "layer":
                self.layers[index] = models.create_layer(
                    self.interp, op["cls"], self.value(op["args"]),
                    self._renamed(self.value(op["kwargs"])), self.node)
            elif kind == "custom":
                self.layers[index] = self._custom(op)
            elif kind == "input":
                if first_input and self.given_input is not None:
                    out = self.given_input
                else:
                    out = models.create_input(self.interp, self.value(op["args"]),
                                              self.value(op["kwargs"]), self.node)
                first_input = False
                self._assign(op["out"], out)
            elif kind == "call":
                layer = self.value(op["layer"])
                if isinstance(layer, (SequentialModel, FunctionalModel)):
                    layer = nested.model_as_layer(layer)
                out = models.call_layer(self.interp, layer,
                                        self.value(op["args"]), self.value(op["kwargs"]),
                                        self.node)
                self._assign(op["out"], out)
            elif kind == "tensor_op":
                out = models.tensor_operation(self.interp, op["type"],
                                              self.value(op["operands"]), self.node)
                self._assign(op["out"], out)
            elif kind == "operation":
                out = models.apply_operation(self.interp, op["name"], self.value(op["args"]),
                                             self.value(op["kwargs"]), self.node)
                self._assign(op["out"], out)
            elif kind in ("obtain_input_shape", "correct_pad"):
                result = self._helper(op)
                if is_unknown(result):
                    return result
                self.values[op["out"]] = result
                if kind == "obtain_input_shape":
                    self.input_size = result
            elif kind == "sequential":
                self.layers[index] = models.create_sequential(
                    self.interp, self.value(op["args"]), self._renamed(self.value(op["kwargs"])),
                    self.node)
            elif kind == "model":
                args, kwargs = self.value(op["args"]), self.value(op["kwargs"])
                if self.given_input is not None:
                    args[0] = keras_utils.source_inputs(self.given_input)
                model = models.create_functional(self.interp, args, kwargs, self.node)
        return model

    def _helper(self, op: dict) -> Any:
        args, kwargs = self.value(op["args"]), self.value(op["kwargs"])
        if op["op"] == "correct_pad":
            return keras_utils.correct_pad(args, kwargs, op["data_format"])
        result = keras_utils.obtain_input_shape(args, kwargs)
        if is_unknown(result):
            loc = self.interp.location(self.node)
            if keras_utils.is_refusal(result):
                self.interp.state.note_error(loc, f"{self.factory}(): {result.reason}")
            else:
                self.interp.state.note_unresolved(loc, f"{self.factory}()", result.reason)
        return result

    def _renamed(self, kwargs: dict) -> dict:
        """Layer names the factory makes from the model's name (``convnext_tiny_stem``)
        follow a ``name=`` the caller gives."""
        default, given = self.default_name, self.bound.get("name")
        layer_name = kwargs.get("name")
        if isinstance(default, str) and isinstance(given, str) and given != default and \
                isinstance(layer_name, str) and layer_name.startswith(default + "_"):
            kwargs = dict(kwargs, name=given + layer_name[len(default):])
        return kwargs

    def _rows(self, rule: dict) -> Any:
        """What MobileNet / MobileNetV2 derive from the input's rows before building: the
        default size handed to ``obtain_input_shape`` (a square input of one of ``sizes`` is
        its own default, else 224) or the model's default name (rows 224 under imagenet
        weights unless the input is square and one of ``sizes``)."""
        sizes = rule["sizes"]
        if rule["rows"] == "default_size":
            shape = self.bound.get("input_shape")
            if shape is None and rule["from_tensor"] and isinstance(self.given_input, Tensor) \
                    and self.given_input.shape is not None:
                shape = tuple(self.given_input.shape[1:])
            if isinstance(shape, (tuple, list)) and len(shape) >= 2 and shape[0] == shape[1] \
                    and shape[0] in sizes:
                return shape[0]
            return 224
        if self.bound.get("name") is not None:
            return self.bound["name"]
        shape = self.input_size or (None, None)
        rows, cols = shape[0], shape[1]
        if self.bound.get("weights") == "imagenet" and (rows != cols or rows not in sizes):
            rows = 224
        alpha = self.bound.get("alpha", 1.0)
        return rule["template"].format(alpha=float(alpha), rows=rows)

    def _custom(self, op: dict) -> LayerRef:
        state = self.interp.state
        name = self._renamed({"name": op["name"]})["name"] if op.get("named") else \
            state.unique_name(to_snake_case(op["cls"]))
        instance = LayerInstance(_CUSTOM, {"weights": op["weights"]})
        ref = LayerRef(instance, op["cls"], name, self.interp.location(self.node))
        ref.dtype_policy = (state.dtype_policy, state.dtype_source)
        return ref

    def _assign(self, recorded: Any, out: Any) -> None:
        if isinstance(recorded, dict):
            self.tensors[recorded["t"]] = out
            return
        values = out if isinstance(out, (list, tuple)) else [out] * len(recorded)
        for slot, value in zip(recorded, values):
            self._assign(slot, value)

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "t" in v:
            return self.tensors.get(v["t"], Unknown("a tensor of the application"))
        if "l" in v:
            return self.layers[v["l"]]
        if "v" in v:
            return self.values[v["v"]]
        if "p" in v:
            return self.bound.get(v["p"])
        if "ref" in v:
            return Ref(v["ref"])
        if "unknown" in v:
            return Unknown(v["unknown"])
        if "rows" in v:
            return self._rows(v)
        if "tuple" in v:
            return tuple(self.value(x) for x in v["tuple"])
        if "dict" in v:
            return {self.value(k): self.value(x) for k, x in v["dict"]}
        raise ValueError(f"not a trace value: {v}")
