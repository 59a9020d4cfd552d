"""MEM004 missing-allow-growth: TensorFlow training with no GPU memory setting, or too late.

A source-level rule: a small libcst visitor reads the file (never running it) for

* imports of TensorFlow or Keras (``import tensorflow as tf``, ``from tensorflow import
  keras``, ``import keras``, ``from keras.models import ...``) and their aliases;
* memory settings: ``tf.config.experimental.set_memory_growth(gpu, True)``,
  ``tf.config.set_logical_device_configuration`` /
  ``tf.config.experimental.set_virtual_device_configuration`` (memory limits),
  TF1 ``config.gpu_options.allow_growth = True``, ``per_process_gpu_memory_fraction``,
  ``GPUOptions(allow_growth=True)``, and ``TF_FORCE_GPU_ALLOW_GROWTH=true`` set through
  ``os.environ`` (item assignment, ``setdefault``, ``update``) or ``os.putenv``.  A setting
  whose value is literally off (``False``, ``"false"``) does not count;
* ``KERAS_BACKEND`` set to something other than TensorFlow before Keras is imported, or
  every model configured to another backend (``--backend``, the config file): then
  TensorFlow does not own the GPU and the rule stays silent;
* what initialises the GPU: the models the frontend found, ``fit``/``train_on_batch`` calls
  and tensor-creating TensorFlow calls.

It fires when the file imports TensorFlow/Keras and builds or trains a model with no setting
anywhere, and when every TF2/env setting runs after the GPU was initialised.  Order is judged
by execution position: module-level statements by line, code in functions by the line of the
first module-level call that reaches them; code never reached that way is not judged.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Optional

from memlint.checks.base import Rule, RuleContext, register
from memlint.diagnostics import Diagnostic
from memlint.ir import Location
from memlint.records import record

if TYPE_CHECKING:  # annotations only: libcst is imported where a Python file is checked
    import libcst as cst

FRAMEWORK_ROOTS = frozenset({"tensorflow", "keras", "tf_keras"})
GROWTH_ENV = "TF_FORCE_GPU_ALLOW_GROWTH"
BACKEND_ENV = "KERAS_BACKEND"
TRAIN_METHODS = frozenset({"fit", "train_on_batch", "fit_generator"})
# TensorFlow calls that create tensors or otherwise initialise the GPU runtime.
INIT_CALLS = frozenset({
    "constant", "Variable", "zeros", "ones", "zeros_like", "ones_like", "fill", "eye",
    "convert_to_tensor", "range", "normal", "uniform", "truncated_normal",
    "is_gpu_available", "gpu_device_name", "list_logical_devices", "from_tensor_slices",
    "from_tensors",
})
MEMORY_LIMIT_CALLS = frozenset({"set_logical_device_configuration",
                                "set_virtual_device_configuration"})
UNKNOWN = object()
MODULE = None  # scope of module-level code
OPAQUE = "<class>"  # scope of class bodies and methods: not ordered


@record
class Found:
    """One thing found in the source: a setting, an import, a GPU-initialising call."""

    kind: str  # growth, limit, tf1, env | import | init | train
    line: int
    column: int
    scope: Any  # MODULE, a top-level function name, or OPAQUE
    what: str  # how to name it in a message


def _literal(node: Optional[cst.BaseExpression]) -> Any:
    import libcst as cst
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value.decode() if isinstance(value, bytes) else value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.Float):
        return float(node.value)
    return UNKNOWN


def _is_off(value: Any) -> bool:
    if value is UNKNOWN:
        return False
    if isinstance(value, str):
        return value.strip().lower() in ("false", "0", "")
    return value in (False, None, 0)


class _Scanner:
    """The visitor's methods; `_scanner_class` mixes in libcst's visitor base, so that libcst
    is imported only when a Python file is checked (never for an ONNX model)."""

    def __init__(self, positions) -> None:
        super().__init__()
        self.positions = positions  # node -> CodeRange, computed once by the frontend
        self.aliases: dict = {}
        self.found: list = []  # list[Found]
        self.disabled: list = []  # settings that turn growth off
        self.backends: list = []  # (line, value) of KERAS_BACKEND assignments
        self.scope_stack: list = []
        self.function_lines: list = []  # (start, end, name) of top-level functions/classes
        self.calls: dict = {}  # caller scope -> {callee name: first call line}

    # -- positions and scopes

    def _pos(self, node) -> tuple:
        pos = self.positions[node]
        return pos.start.line, pos.start.column + 1

    @property
    def scope(self) -> Any:
        return self.scope_stack[0] if self.scope_stack else MODULE

    def _enter(self, node, name: str) -> None:
        if not self.scope_stack:
            pos = self.positions[node]
            self.function_lines.append((pos.start.line, pos.end.line, name))
        self.scope_stack.append(name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node, node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scope_stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter(node, OPAQUE)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scope_stack.pop()

    def _add(self, kind: str, node, what: str) -> None:
        line, column = self._pos(node)
        self.found.append(Found(kind, line, column, self.scope, what))

    # -- names

    def dotted(self, node) -> str:
        """The dotted name of ``node`` with its first part replaced by what it imports."""
        from libcst.helpers import get_full_name_for_node
        name = get_full_name_for_node(node) or ""
        head, _, rest = name.partition(".")
        if head in self.aliases:
            return self.aliases[head] + ("." + rest if rest else "")
        return name

    # -- imports

    def visit_Import(self, node: cst.Import) -> None:
        import libcst as cst
        from libcst.helpers import get_full_name_for_node
        for alias in node.names:
            dotted = get_full_name_for_node(alias.name) or ""
            root = dotted.split(".")[0]
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = dotted
            else:
                self.aliases[root] = root
            if root in FRAMEWORK_ROOTS:
                self._add("import", node, f"import {dotted}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        import libcst as cst
        from libcst.helpers import get_full_name_for_node
        if node.relative or node.module is None:
            return
        module = get_full_name_for_node(node.module) or ""
        if module.split(".")[0] in FRAMEWORK_ROOTS:
            self._add("import", node, f"from {module} import ...")
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}"

    # -- calls

    def visit_Call(self, node: cst.Call) -> None:
        import libcst as cst
        name = self.dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        args = [a for a in node.args if a.keyword is None and a.star == ""]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}

        if isinstance(node.func, cst.Name):
            self.calls.setdefault(self.scope, {}).setdefault(node.func.value, self._pos(node)[0])

        if last == "set_memory_growth":
            enable = keywords.get("enable", args[1].value if len(args) > 1 else None)
            if enable is not None and _is_off(_literal(enable)):
                self.disabled.append((self._pos(node)[0], "set_memory_growth(..., False)"))
            else:
                self._add("growth", node, f"{_short(name)}()")
        elif last in MEMORY_LIMIT_CALLS:
            self._add("limit", node, f"{_short(name)}()")
        elif last == "GPUOptions":
            growth = keywords.get("allow_growth")
            fraction = keywords.get("per_process_gpu_memory_fraction")
            if growth is not None and not _is_off(_literal(growth)):
                self._add("tf1", node, "GPUOptions(allow_growth=True)")
            elif fraction is not None and _limits(_literal(fraction)):
                self._add("tf1", node, "GPUOptions(per_process_gpu_memory_fraction=...)")
        elif (last in ("setdefault", "__setitem__") and _is_environ(name.rsplit(".", 1)[0])) \
                or name in ("os.putenv", "putenv"):
            if len(args) >= 2:
                self._env(node, _literal(args[0].value), args[1].value)
        elif last == "update" and _is_environ(name.rsplit(".", 1)[0]):
            for arg in args:
                if isinstance(arg.value, cst.Dict):
                    for element in arg.value.elements:
                        if isinstance(element, cst.DictElement):
                            self._env(node, _literal(element.key), element.value)
            for key, value in keywords.items():
                self._env(node, key, value)
        elif isinstance(node.func, cst.Attribute) and last in TRAIN_METHODS:
            self._add("train", node, f"{last}()")
        elif last in INIT_CALLS and name.split(".")[0] in FRAMEWORK_ROOTS:
            self._add("init", node, f"{_short(name)}()")

    def _env(self, node, key: Any, value_node) -> None:
        value = _literal(value_node)
        if key == GROWTH_ENV:
            # TensorFlow compares the value with exactly "true" and "false" (strcmp in
            # gpu_bfc_allocator.cc) and ignores anything else, "True" and "1" included.
            if value is UNKNOWN or value == "true":
                self._add("env", node, f"{GROWTH_ENV}={value if value is not UNKNOWN else '...'}")
            elif value == "false":
                self.disabled.append((self._pos(node)[0], f"{GROWTH_ENV}='false'"))
            else:
                self.disabled.append((self._pos(node)[0], f"{GROWTH_ENV}={value!r}, which "
                                      "TensorFlow ignores: it accepts only 'true' or 'false',"))
        elif key == BACKEND_ENV:
            self.backends.append((self._pos(node)[0], value))

    # -- assignments

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assigned(target.target, node.value, node)

    def _assigned(self, target, value_node, node) -> None:
        import libcst as cst
        if isinstance(target, cst.Attribute):
            attr = target.attr.value
            value = _literal(value_node)
            if attr == "allow_growth":
                if _is_off(value):
                    self.disabled.append((self._pos(node)[0], "allow_growth = False"))
                else:
                    self._add("tf1", node, "gpu_options.allow_growth = True")
            elif attr == "per_process_gpu_memory_fraction" and _limits(value):
                self._add("tf1", node, "gpu_options.per_process_gpu_memory_fraction")
        elif isinstance(target, cst.Subscript) and _is_environ(self.dotted(target.value)):
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                self._env(node, _literal(target.slice[0].slice.value), value_node)


def _is_environ(name: str) -> bool:
    return name in ("os.environ", "environ") or name.endswith(".environ")


def _limits(fraction: Any) -> bool:
    """Whether a per_process_gpu_memory_fraction value limits memory (unknown values do)."""
    if fraction is UNKNOWN:
        return True
    return isinstance(fraction, (int, float)) and not isinstance(fraction, bool) \
        and 0 < fraction < 1


def _short(name: str) -> str:
    for prefix in ("tensorflow.compat.v1.", "tensorflow."):
        if name.startswith(prefix):
            return "tf." + name[len(prefix):]
    return name


# ---------------------------------------------------------------- execution order

class _Order:
    """Execution positions: (module line, line in the first function called, ...)."""

    def __init__(self, scanner: _Scanner):
        self.scanner = scanner
        self.cache: dict = {}

    def scope_of_line(self, line: int) -> Any:
        for start, end, name in self.scanner.function_lines:
            if start <= line <= end:
                return name
        return MODULE

    def prefix(self, scope: Any, seen: frozenset = frozenset()) -> Optional[tuple]:
        """Position of the first call that runs ``scope`` (() for module level)."""
        if scope is MODULE:
            return ()
        if scope == OPAQUE or scope in seen:
            return None
        if scope in self.cache:
            return self.cache[scope]
        best = None
        for caller, callees in self.scanner.calls.items():
            if scope in callees and caller != scope:
                outer = self.prefix(caller, seen | {scope})
                if outer is not None:
                    candidate = outer + (callees[scope],)
                    if best is None or candidate < best:
                        best = candidate
        self.cache[scope] = best
        return best

    def position(self, line: int, scope: Any = UNKNOWN) -> Optional[tuple]:
        if scope is UNKNOWN:
            scope = self.scope_of_line(line)
        outer = self.prefix(scope)
        return None if outer is None else outer + (line,)


# ---------------------------------------------------------------- the rule

LATE_ERRORS = {
    "growth": "RuntimeError: Physical devices cannot be modified after being initialized",
    "limit": "RuntimeError: Virtual devices cannot be modified after being initialized",
}


@lru_cache(maxsize=None)
def _scanner_class() -> type:
    """:class:`_Scanner` with libcst's visitor base mixed in (imported on first use)."""
    import libcst as cst

    return type("Scanner", (_Scanner, cst.CSTVisitor), {})


@register
class MissingAllowGrowth(Rule):
    code = "MEM004"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        if ctx.module is None:
            return
        from memlint.source_index import SourceIndex  # libcst: only for Python files

        positions = ctx.positions
        if not isinstance(positions, SourceIndex):  # none given, or libcst's own mapping
            positions = SourceIndex(ctx.module)
        scanner = _scanner_class()(positions)
        positions.visit(scanner)

        imports = [f for f in scanner.found if f.kind == "import"]
        if not imports:
            return
        first_import = min(imports, key=lambda f: f.line)
        if self._other_backend(scanner, first_import.line) or self._configured_elsewhere(ctx):
            return
        trains = [f for f in scanner.found if f.kind == "train"]
        models = [m for m in ctx.models if m.location is not None]
        if not ctx.models and not trains:
            return
        settings = [f for f in scanner.found if f.kind in ("growth", "limit", "tf1", "env")]
        if not settings:
            yield self._missing(ctx, scanner, models, trains, first_import)
            return
        diag = self._late(ctx, scanner, settings, models)
        if diag is not None:
            yield diag

    @staticmethod
    def _configured_elsewhere(ctx: RuleContext) -> bool:
        """Every model runs on a backend other than TensorFlow by configuration (``--backend
        jax`` or the config file): TensorFlow does not own the GPU there."""
        return bool(ctx.models) and all(
            m.setup.backend in ("jax", "torch") and m.setup.backend_source.startswith("configured")
            for m in ctx.models)

    @staticmethod
    def _other_backend(scanner: _Scanner, first_import_line: int) -> bool:
        """KERAS_BACKEND set to a non-TensorFlow backend (or an unknown one) before import."""
        for line, value in scanner.backends:
            if line < first_import_line and value != "tensorflow":
                return True
        return False

    def _missing(self, ctx, scanner, models, trains, first_import) -> Diagnostic:
        if models:
            model = _anchor_model(models)
            location = model.location
            doing = f"builds model '{model.name}' here"
        elif trains:
            first = min(trains, key=lambda f: f.line)
            location = Location(ctx.path, first.line, first.column)
            doing = f"trains a model here ({first.what})"
        else:  # pragma: no cover - check() returns before this
            location = Location(ctx.path, first_import.line, first_import.column)
            doing = "uses a model"
        trained = " and trains it" if models and trains and _trained(model) else ""
        message = (f"this file {doing}{trained} with TensorFlow/Keras but never limits GPU "
                   "memory: TensorFlow maps nearly all of the GPU's memory when it starts, so "
                   "a second process on the same GPU fails with out-of-memory and nvidia-smi "
                   "shows the whole card in use whatever the model needs")
        if scanner.disabled:
            line, what = scanner.disabled[0]
            message += f" ({what} at line {line} does not turn growth on)"
        message += (". Right after importing TensorFlow, call "
                    "tf.config.experimental.set_memory_growth(gpu, True) for every gpu in "
                    "tf.config.list_physical_devices('GPU') (or set "
                    "TF_FORCE_GPU_ALLOW_GROWTH=true before TensorFlow starts; with TF1, "
                    "config.gpu_options.allow_growth = True) so TensorFlow takes memory only "
                    "as the model needs it.")
        return self.diagnostic(ctx, location, message, severity="warning",
                               data={"reason": "missing"})

    def _late(self, ctx, scanner, settings, models) -> Optional[Diagnostic]:
        order = _Order(scanner)
        ordered = [s for s in settings if s.kind != "tf1"]
        if len(ordered) < len(settings):
            return None  # a TF1 session config applies when the session is made
        positions = [order.position(s.line, s.scope) for s in ordered]
        if any(p is None for p in positions):
            return None  # a setting in code whose running order is unknown
        inits = []
        for model in models:
            pos = order.position(model.location.line)
            if pos is not None:
                inits.append((pos, f"model '{model.name}' built at line {model.location.line}"))
        for found in scanner.found:
            if found.kind in ("init", "train"):
                pos = order.position(found.line, found.scope)
                if pos is not None:
                    inits.append((pos, f"{found.what} at line {found.line}"))
        if not inits:
            return None
        first_init, what = min(inits, key=lambda item: item[0])
        if min(positions) < first_init:
            return None
        setting = ordered[positions.index(min(positions))]
        if setting.kind in LATE_ERRORS:
            effect = (f"TensorFlow then raises \"{LATE_ERRORS[setting.kind]}\" (or, "
                      "inside try/except, the setting silently does nothing)")
        else:
            effect = ("TensorFlow reads the variable once, when it initialises the GPU, so "
                      "it has no effect")
        message = (f"{setting.what} runs after the GPU was initialised by the {what}: "
                   f"{effect}. Move it to the top of the file, right after importing "
                   "TensorFlow and before any model, layer or tensor is created.")
        return self.diagnostic(ctx, Location(ctx.path, setting.line, setting.column), message,
                               severity="warning", data={"reason": "late"})


def _trained(graph) -> bool:
    """Whether the code trains ``graph`` (a fit, train_on_batch or training call found)."""
    return graph.setup.mode == "train" and graph.setup.location is not None


def _anchor_model(models: list):
    """The model the diagnostic points at: the first the code trains, else the first the
    code runs (predict), else the first built (a preprocessing Sequential built above the
    trained model is not the one that takes the GPU)."""
    def first(graphs):
        return min(graphs, key=lambda m: (m.location.line, m.location.column))
    for accept in (_trained, lambda g: g.setup.location is not None):
        chosen = [m for m in models if accept(m)]
        if chosen:
            return first(chosen)
    return first(models)
