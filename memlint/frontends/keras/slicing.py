"""Dependence slicing: statements nothing the models depend on reads are not evaluated.

Before a scope runs (the module, each call of a function of the file) a backward liveness
pass over its statements (:mod:`.slice_scan` says what each reads and writes) marks a
statement skipped when

* it is *inert*: it calls only NumPy, ``math``, ``random``, plotting and similar libraries,
  builtins, and methods of plain values (lists, dicts, strings, arrays), reads no model,
  layer, tensor, dataset, function or class, and neither imports, defines, jumps nor raises;
* and nothing it writes is read afterwards by a statement that runs: not the names it binds,
  nor (with every name that may share the object) the values it mutates.  Element stores
  into a NumPy array (``X[i, j] = v``) leave what memlint knows of it (shape, dtype) as it is
  and write nothing.

Everything the models, ``compile``, ``fit`` and the data pipelines depend on still runs in
order, so shapes and parameters stay exact.  Names a function defined in the scope reads are
live everywhere (it may be called at any time); a function's parameters, free names and
``global`` names escape it (writes to them are kept).  What a name may hold is judged from
its bindings, and from the interpreter's values where they are already known: a function's
arguments at its call, and module names before each top-level loop (the plan of the rest of
the module is redone there with them).
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras.slice_scan import Scanner, Summary, target_names
from memlint.frontends.keras.values import Array, Ref, Unknown

# what a name may hold
OTHER, INERT, ARRAY, LIB, SCALAR = "other", "inert", "array", "lib", "scalar"
TOP = "top"  # no binding seen yet

# libraries whose functions, as memlint models them, touch nothing but the values they are
# given and return (``os`` only outside ``os.environ`` and its helpers)
INERT_LIBS = frozenset({
    "numpy", "math", "random", "matplotlib", "seaborn", "pandas", "scipy", "sklearn",
    "time", "datetime", "json", "csv", "string", "re", "itertools", "statistics",
    "collections", "tqdm", "PIL", "glob", "os", "pprint", "logging", "warnings"})
STATEFUL = ("os.environ", "os.putenv", "os.unsetenv")
# builtins memlint models that call nothing of the analysed code with plain arguments
BUILTINS = frozenset({
    "range", "len", "int", "float", "str", "bool", "print", "isinstance", "min", "max",
    "sum", "abs", "round", "list", "tuple", "dict", "zip", "enumerate", "sorted",
    "reversed", "divmod", "any", "all", "chr", "ord"})
MODULE_NAMES = frozenset({"__name__", "__file__"})
# NumPy calls that make a new array, and array methods that keep one an array
ARRAY_FUNCS = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like",
                         "empty_like", "full_like", "array", "asarray", "copy", "arange",
                         "linspace"})
ARRAY_METHODS = frozenset({"reshape", "astype", "copy", "transpose", "flatten", "ravel",
                           "squeeze"})
_MAX_INSPECTED = 256  # elements of containers inspected when judging a value


def inert_library(dotted: str) -> bool:
    """Whether calling the library function ``dotted`` can only compute a value."""
    return dotted.split(".")[0] in INERT_LIBS and not dotted.startswith(STATEFUL)


def value_class(value: Any) -> str:
    """What an interpreter value is, for slicing: ARRAY, INERT, LIB or OTHER."""
    if isinstance(value, Array) or (isinstance(value, Unknown) and _plain(value, [1])):
        return ARRAY
    if isinstance(value, Ref):
        return LIB if inert_library(value.name) else OTHER
    if isinstance(value, (bool, int, float, complex, str)):
        return SCALAR
    budget = [_MAX_INSPECTED]
    return INERT if _plain(value, budget) else OTHER


def _plain(value: Any, budget: list) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, range,
                                           slice, Array)) or value is Ellipsis:
        return True
    if isinstance(value, Unknown):  # not an object of a class the file defines
        return not (getattr(value, "constructed", None) or getattr(value, "class_name", None))
    if isinstance(value, dict):
        return all(_plain(k, budget) and _plain(v, budget) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(item, budget) for item in value)
    return False


class _Aliases:
    """Names that may hold the same object (union-find over the scope's bindings)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, name: str) -> str:
        root = name
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        self.parent[name] = root
        return root

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def closure(self, names: set) -> set:
        roots = {self.find(n) for n in names}
        return {n for n in set(self.parent) | names if self.find(n) in roots}


class Plan:
    """The statements of one scope to skip, given what its names may hold.

    ``facts`` / ``paths``: classes (and library paths) known from values: names bound
    outside the scope, arguments; ``escaping``: names whose objects outlive the scope;
    ``always``: names live everywhere; ``builtins``: whether unbound names are Python's
    builtins (no ``from m import *``); ``is_project``: whether a top-level module name is one
    of the project's own modules (never a library)."""

    def __init__(self, scanner: Scanner, body: list, facts: dict, paths: dict,
                 escaping: set = frozenset(), always: set = frozenset(),
                 params: frozenset = frozenset(), builtins: bool = True,
                 is_project=lambda name: False):
        self.scanner = scanner
        self.skips: set = set()
        merged = Summary()
        for stmt in body:
            merged.merge(scanner.summary(stmt))
        self.always = set(merged.closure) | set(always)
        self.builtins = builtins and not merged.star
        self.is_project = is_project
        self.names = set(params) | {b.name for b in merged.bindings}
        free = (merged.reads | merged.closure) - self.names
        self.escaping = set(escaping) | merged.declared | free
        self.paths = dict(paths)
        for binding in merged.bindings:
            if binding.kind == "import":
                self.paths[binding.name] = binding.dotted
        self.classes = self._classes(merged.bindings, facts)
        self.aliases = _Aliases()
        for binding in merged.bindings:  # numbers, strings and modules share no object
            if binding.kind in ("expr", "elem", "mutate") and \
                    self.cls(binding.name) not in (SCALAR, LIB) and \
                    not self._makes_scalar(binding):
                for read in binding.reads:
                    if self.cls(read) not in (SCALAR, LIB):
                        self.aliases.union(binding.name, read)
        self.block(body, set(), set())

    # ------------------------------------------------------------------ what names hold

    def _classes(self, bindings: list, facts: dict) -> dict:
        classes = dict(facts)
        for binding in bindings:
            classes.setdefault(binding.name, TOP)
        changed = True
        while changed:
            changed = False
            for binding in bindings:
                new = _meet(classes[binding.name], self._binding_class(binding, classes))
                if new != classes[binding.name]:
                    classes[binding.name] = new
                    changed = True
        return {name: (ARRAY if value == TOP else value) for name, value in classes.items()}

    def _binding_class(self, binding, classes: dict) -> str:
        if binding.kind == "import":
            library = inert_library(binding.dotted) and \
                not self.is_project(binding.dotted.split(".")[0])
            return LIB if library else OTHER
        if binding.kind == "other":
            return OTHER
        if not self._inert(binding.reads, binding.calls, classes):
            return OTHER
        if binding.kind == "mutate":
            return TOP  # what the name holds stays what it was
        if binding.kind == "expr" and self._array_call(binding.array_call, classes):
            return ARRAY
        if self._makes_scalar(binding, classes):
            return SCALAR
        call = binding.array_call
        if binding.kind == "elem" and call is not None and call.kind == "name" and \
                call.root == "range" and self.cls("range", classes) == LIB:
            return SCALAR  # a loop over range() binds ints
        return INERT

    def _makes_scalar(self, binding, classes: Optional[dict] = None) -> bool:
        classes = self.classes if classes is None else classes
        return binding.scalar is not None and \
            all(self._raw(n, classes) in (SCALAR, LIB, TOP) for n in binding.scalar)

    def _array_call(self, call, classes: dict) -> bool:
        """Whether a call surely makes a NumPy array (where memlint keeps shape and dtype
        only, so element stores change nothing it knows)."""
        if call is None or call.kind not in ("name", "chain"):
            return False
        root = self._raw(call.root, classes)
        if root in (ARRAY, TOP):
            return call.kind == "chain" and call.dotted in ARRAY_METHODS
        path = self.paths.get(call.root)
        if root != LIB or path is None:
            return False
        full = f"{path}.{call.dotted}" if call.kind == "chain" else path
        return full.startswith("numpy.random.") or (
            full.startswith("numpy.") and full[len("numpy."):] in ARRAY_FUNCS)

    def cls(self, name: str, classes: Optional[dict] = None) -> str:
        found = self._raw(name, self.classes if classes is None else classes)
        return ARRAY if found == TOP else found

    def _raw(self, name: str, classes: dict) -> str:
        found = classes.get(name)
        if found is not None:
            return found
        if name in MODULE_NAMES:
            return INERT
        return LIB if self.builtins and name in BUILTINS else OTHER

    def _inert(self, reads, calls, classes: dict, mutated: Optional[set] = None) -> bool:
        """Whether reading ``reads`` and making ``calls`` can only compute plain values
        (``mutated`` collects the values whose methods are called)."""
        if any(self.cls(name, classes) == OTHER for name in reads):
            return False
        for call in calls:
            if call.kind == "fresh":
                continue
            if call.kind == "bad":
                return False
            root = self.cls(call.root, classes)
            path = self.paths.get(call.root)
            if call.kind == "name":
                if root != LIB:
                    return False
            elif root != LIB:
                if mutated is not None:
                    mutated.add(call.root)
            elif call.kind == "chain" and (path is None or
                                           not inert_library(f"{path}.{call.dotted}")):
                return False
        return True

    # ------------------------------------------------------------------ liveness

    def skippable(self, summary: Summary, out: set) -> bool:
        if summary.blocked:
            return False
        if any(self.cls(root) in (LIB, OTHER) for root in summary.mutated | summary.stored):
            return False  # a store into a module (``os.environ[...] = ...``) or an object
        mutated = set(summary.mutated)
        if not self._inert(summary.reads, summary.calls, self.classes, mutated):
            return False
        mutated |= {r for r in summary.stored if self.cls(r) != ARRAY}
        written = summary.bound | self.aliases.closure(mutated)
        return not (written & (out | self.always | self.escaping))

    def block(self, stmts, out: set, extra: set) -> set:
        """Live names before ``stmts`` given those live after (``extra``: live after every
        statement: a loop's head, a ``try``'s handlers)."""
        live = set(out)
        for stmt in reversed(list(stmts)):
            live = self.statement(stmt, live | extra, extra)
        return live

    def statement(self, stmt, out: set, extra: set) -> set:
        summary = self.scanner.summary(stmt)
        if self.skippable(summary, out):
            self.skips.add(id(stmt))
            return out
        self.skips.discard(id(stmt))
        if isinstance(stmt, cst.For):
            return self._loop(stmt, out, extra, self.scanner.expression(stmt.iter).reads,
                              target_names(stmt.target))
        if isinstance(stmt, cst.While):
            return self._loop(stmt, out, extra, self.scanner.expression(stmt.test).reads,
                              set(), header_in_loop=True)
        if isinstance(stmt, cst.If):
            test = self.scanner.expression(stmt.test).reads
            body = self.block(stmt.body.body, out, extra)
            return test | body | self._orelse(stmt.orelse, out, extra)
        if isinstance(stmt, cst.With):
            reads = set()
            for item in stmt.items:
                reads |= self.scanner.expression(item.item).reads
            return reads | self.block(stmt.body.body, out, extra)
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            return self._try(stmt, out, extra)
        return (out - summary.kills) | summary.reads

    def _orelse(self, orelse, out: set, extra: set) -> set:
        if orelse is None:
            return set(out)
        if isinstance(orelse, cst.If):
            return self.statement(orelse, out, extra)
        return self.block(orelse.body.body, out, extra)

    def _loop(self, stmt, out: set, extra: set, header: set, targets: set,
              header_in_loop: bool = False) -> set:
        head = out | self._orelse(stmt.orelse, out, extra)
        if header_in_loop:
            head |= header
        while True:
            body = self.block(stmt.body.body, head, extra | head)
            new = head | (body - targets)
            if new == head:
                break
            head = new
        return head | header

    def _try(self, stmt, out: set, extra: set) -> set:
        after = out | (self.block(stmt.finalbody.body.body, out, extra)
                       if stmt.finalbody is not None else set())
        handlers = set()
        for handler in stmt.handlers:
            if handler.type is not None:
                handlers |= self.scanner.expression(handler.type).reads
            handlers |= self.block(handler.body.body, after, extra)
        orelse = self.block(stmt.orelse.body.body, after, extra) \
            if stmt.orelse is not None else after
        return self.block(stmt.body.body, orelse, extra | handlers | after) | handlers


def _meet(a: str, b: str) -> str:
    if a == b or b == TOP:
        return a
    if a == TOP:
        return b
    if {a, b} <= {ARRAY, INERT, SCALAR}:
        return INERT
    return OTHER
