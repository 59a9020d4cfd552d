"""What one statement reads, binds, mutates and calls, read off its syntax (for :mod:`.slicing`).

A :class:`Summary` covers a statement and everything nested in it, except the bodies of the
functions and classes it defines: the free names those read go to ``closure`` (they are read
whenever the function is called).  Nothing here knows values; :mod:`.slicing` judges the
names and calls against what the interpreter holds.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

import libcst as cst

from memlint.records import record
from memlint.source_index import children

_CONSTANTS = frozenset({"True", "False", "None"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
# statements that leave the block or change how names resolve: never skipped
_JUMPS = (cst.Return, cst.Raise, cst.Break, cst.Continue, cst.Global, cst.Nonlocal, cst.Del,
          cst.Import, cst.ImportFrom)


@record(frozen=True)
class Call:
    """A call: ``kind`` "name" (``f(...)``), "chain" (``a.b.f(...)``, ``dotted`` = "b.f"),
    "method" (a method of a value reached through subscripts or calls, ``x[0].append``),
    "fresh" (a method of a literal) or "bad" (anything else: ``fs[0](...)``)."""

    kind: str
    root: Optional[str] = None
    dotted: str = ""


# calls that never run a layer: builtins, and the methods of variables, metrics and lists
NO_LAYER_NAMES = frozenset(("zip", "range", "enumerate", "len", "print", "int", "float", "min",
                             "max", "sum", "abs", "isinstance", "list", "tuple", "dict", "str",
                             "sorted", "reversed", "round"))
NO_LAYER_METHODS = frozenset(("assign", "assign_add", "assign_sub", "update_state",
                               "reset_state", "reset_states", "result", "append", "extend",
                               "items", "keys", "values", "get", "format"))


def may_call_layers(summary: "Summary") -> bool:
    """Whether code of this summary may call a layer (anything but a builtin or a method
    that updates a variable, a metric or a container: ``ema_weight.assign(...)`` in a loop
    over weights does not)."""
    for call in summary.calls:
        if call.kind == "name" and call.root in NO_LAYER_NAMES:
            continue
        if call.kind == "chain" and call.dotted.rsplit(".", 1)[-1] in NO_LAYER_METHODS:
            continue
        return True
    return False


@record(frozen=True)
class Binding:
    """One binding of ``name``: ``kind`` "expr" (``name = rhs``), "elem" (an element of rhs:
    unpacking, a loop target), "mutate" (``name.m(rhs)``, ``name[k] = rhs``), "import"
    (``dotted`` is the module path) or "other" (def, class, with, except, parameters)."""

    name: str
    kind: str
    reads: frozenset = frozenset()
    calls: tuple = ()
    array_call: Optional[Call] = None  # ``rhs`` is this call (for NumPy array constructors)
    dotted: str = ""
    scalar: Optional[frozenset] = None  # rhs makes a number or string if these names hold one


@record
class Summary:
    """What a statement (and what is nested in it) does to names."""

    reads: set = field(default_factory=set)
    calls: list = field(default_factory=list)
    bindings: list = field(default_factory=list)
    kills: set = field(default_factory=set)  # names surely rebound (simple statements)
    mutated: set = field(default_factory=set)  # roots of attribute stores
    stored: set = field(default_factory=set)  # roots of subscript stores
    # (root, attribute) of each store to an attribute of a name (``self.batch_size = n``),
    # and the roots stored into any other way (``self.x[i] = v``, ``a.b.c = v``)
    attributes: set = field(default_factory=set)
    deep: set = field(default_factory=set)
    closure: set = field(default_factory=set)  # free names of functions defined inside
    declared: set = field(default_factory=set)  # ``global`` / ``nonlocal`` names
    blocked: bool = False  # contains something that is never skipped
    star: bool = False  # ``from m import *``

    @property
    def bound(self) -> set:
        return {b.name for b in self.bindings if b.kind != "mutate"}

    def merge(self, other: "Summary") -> None:
        self.reads |= other.reads
        self.calls += other.calls
        self.bindings += other.bindings
        self.mutated |= other.mutated
        self.stored |= other.stored
        self.attributes |= other.attributes
        self.deep |= other.deep
        self.closure |= other.closure
        self.declared |= other.declared
        self.blocked |= other.blocked
        self.star |= other.star


class _Expr:
    """Reads and calls of one expression."""

    def __init__(self):
        self.reads: set = set()
        self.calls: list = []
        self.closure: set = set()
        self.blocked = False

    def scan(self, node, local=frozenset()) -> None:
        stack = [(node, local)]
        while stack:
            node, local = stack.pop()
            if isinstance(node, cst.Name):
                if node.value not in local and node.value not in _CONSTANTS:
                    self.reads.add(node.value)
            elif isinstance(node, cst.Attribute):
                stack.append((node.value, local))
            elif isinstance(node, cst.Call):
                self.calls.append(_call(node.func))
                stack.append((node.func, local))
                stack.extend((arg.value, local) for arg in node.args)
            elif isinstance(node, cst.Lambda):  # a function value: never judged inert
                self.calls.append(Call("bad"))
                params = _param_names(node.params)
                inner = _Expr()
                inner.scan(node.body, local | params)
                self.merge(inner)
                self.closure |= inner.reads
                stack.extend((p.default, local) for p in _params(node.params) if p.default)
            elif isinstance(node, _COMPREHENSIONS):
                self._comprehension(node, local)
            elif isinstance(node, (cst.NamedExpr, cst.Yield, cst.Await)):
                self.blocked = True
                stack.extend((child, local) for child in children(node))
            else:
                stack.extend((child, local) for child in children(node))

    def merge(self, other: "_Expr") -> None:
        self.reads |= other.reads
        self.calls += other.calls
        self.closure |= other.closure
        self.blocked |= other.blocked

    def _comprehension(self, node, local) -> None:
        comp = node.for_in
        self.scan(comp.iter, local)  # the first iterable is evaluated outside
        inner = set(local)
        while comp is not None:
            if comp is not node.for_in:
                self.scan(comp.iter, frozenset(inner))
            inner |= target_names(comp.target)
            for cond in comp.ifs:
                self.scan(cond.test, frozenset(inner))
            comp = comp.inner_for_in
        parts = [node.key, node.value] if isinstance(node, cst.DictComp) else [node.elt]
        for part in parts:
            self.scan(part, frozenset(inner))


def _call(func) -> Call:
    """Classify a callee expression (see :class:`Call`)."""
    if isinstance(func, cst.Name):
        return Call("name", func.value)
    if not isinstance(func, cst.Attribute):
        return Call("bad")
    parts, node, plain = [], func, True
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        if isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        else:
            plain = False
            node = node.value if isinstance(node, cst.Subscript) else node.func
    if isinstance(node, cst.Name):
        if plain:
            return Call("chain", node.value, ".".join(reversed(parts)))
        return Call("method", node.value)
    if isinstance(node, (cst.BaseString, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.Integer,
                         cst.Float) + _COMPREHENSIONS):
        return Call("fresh")
    return Call("bad")


def _params(params: cst.Parameters) -> list:
    out = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            out.append(star)
    return out


def _param_names(params: cst.Parameters) -> frozenset:
    return frozenset(p.name.value for p in _params(params))


def target_names(target) -> set:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(target_names(el.value) for el in target.elements))
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def _root(node) -> Optional[str]:
    """The name under ``a.b[c].d`` (None when it is not a name)."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class Scanner:
    """Summaries of statements, computed once per node."""

    def __init__(self):
        self._cache: dict = {}

    def summary(self, stmt) -> Summary:
        key = id(stmt)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._statement(stmt)
        return found

    def expression(self, node) -> Summary:
        """The summary of evaluating one expression (a loop's iterable, a test)."""
        out = Summary()
        if node is not None:
            self._expr_into(node, out)
        return out

    # ------------------------------------------------------------------ statements

    def _statement(self, stmt) -> Summary:
        out = Summary()
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self._small(small, out)
        elif isinstance(stmt, cst.BaseSmallStatement):
            self._small(stmt, out)
        elif isinstance(stmt, cst.For):
            self._expr_into(stmt.iter, out)
            self._target(stmt.target, "elem", self.expression(stmt.iter), out, stmt.iter)
            self._blocks(out, stmt.body, stmt.orelse)
        elif isinstance(stmt, cst.While):
            self._expr_into(stmt.test, out)
            self._blocks(out, stmt.body, stmt.orelse)
        elif isinstance(stmt, cst.If):
            self._expr_into(stmt.test, out)
            self._blocks(out, stmt.body, stmt.orelse)
        elif isinstance(stmt, cst.With):
            out.blocked = True  # a context manager may be a strategy's scope
            for item in stmt.items:
                self._expr_into(item.item, out)
                if item.asname is not None:
                    self._target(item.asname.name, "other", Summary(), out)
            self._blocks(out, stmt.body)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self._blocks(out, stmt.body, stmt.orelse, stmt.finalbody)
            for handler in stmt.handlers:
                if handler.type is not None:
                    self._expr_into(handler.type, out)
                if handler.name is not None:
                    self._target(handler.name.name, "other", Summary(), out)
                self._blocks(out, handler.body)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            self._definition(stmt, out)
        else:  # anything else (``match``, ``async for``): read everything, never skipped
            out.blocked = True
            expr = _Expr()
            expr.scan(stmt)
            out.reads |= expr.reads
        return out

    def _blocks(self, out: Summary, *blocks) -> None:
        for block in blocks:
            if block is None:
                continue
            if isinstance(block, cst.If):  # ``elif``
                out.merge(self.summary(block))
                continue
            body = block.body
            for stmt in (body.body if hasattr(body, "body") else body):
                out.merge(self.summary(stmt))

    def _definition(self, stmt, out: Summary) -> None:
        out.blocked = True
        out.bindings.append(Binding(stmt.name.value, "other"))
        out.kills.add(stmt.name.value)
        for decorator in stmt.decorators:
            self._expr_into(decorator.decorator, out)
        if isinstance(stmt, cst.FunctionDef):
            for param in _params(stmt.params):
                if param.default is not None:
                    self._expr_into(param.default, out)
            body = self.summary_of_body(stmt.body)
            local = _param_names(stmt.params) | (body.bound - body.declared)
            out.closure |= (body.reads - local) | body.closure
        else:
            for base in (*stmt.bases, *stmt.keywords):
                self._expr_into(base.value, out)
            body = self.summary_of_body(stmt.body)
            out.closure |= body.reads | body.closure

    def summary_of_body(self, body) -> Summary:
        """The merged summary of a function's or class's body."""
        out = Summary()
        for stmt in (body.body if isinstance(body, cst.IndentedBlock) else body.body):
            out.merge(self.summary(stmt))
        out.kills = set()
        return out

    def _small(self, small, out: Summary) -> None:
        if isinstance(small, cst.Expr):
            self._expr_into(small.value, out)
        elif isinstance(small, cst.Assign):
            rhs = self.expression(small.value)
            out.merge(rhs)
            for target in small.targets:
                self._target(target.target, "expr", rhs, out, small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                rhs = self.expression(small.value)
                out.merge(rhs)
                self._target(small.target, "expr", rhs, out, small.value)
        elif isinstance(small, cst.AugAssign):
            rhs = self.expression(small.value)
            out.merge(rhs)
            self._expr_into(small.target, out)
            if isinstance(small.target, cst.Name):
                both = Summary(reads=rhs.reads | {small.target.value}, calls=rhs.calls)
                out.bindings.append(_binding(small.target.value, "expr", both,
                                             value=small.value))
            else:
                self._target(small.target, "expr", rhs, out, small.value)
        elif isinstance(small, _JUMPS):
            out.blocked = True
            if isinstance(small, (cst.Global, cst.Nonlocal)):
                out.declared |= {n.name.value for n in small.names}
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    full = _dotted(alias.name)
                    name = alias.asname.name.value if alias.asname else full.split(".")[0]
                    path = full if alias.asname else name
                    out.bindings.append(Binding(name, "import", dotted=path))
                    out.kills.add(name)
            elif isinstance(small, cst.ImportFrom):
                self._import_from(small, out)
            else:
                expr = _Expr()
                expr.scan(small)
                out.reads |= expr.reads
        elif not isinstance(small, cst.Pass):
            expr = _Expr()
            expr.scan(small)
            out.reads |= expr.reads

    def _import_from(self, node: cst.ImportFrom, out: Summary) -> None:
        if isinstance(node.names, cst.ImportStar):
            out.star = True
            return
        module = "" if node.relative or node.module is None else _dotted(node.module)
        for alias in node.names:
            name = _dotted(alias.name)
            bound = alias.asname.name.value if alias.asname else name
            kind = "import" if module else "other"
            out.bindings.append(Binding(bound, kind, dotted=f"{module}.{name}"))
            out.kills.add(bound)

    def _target(self, target, kind: str, rhs: Summary, out: Summary, value=None) -> None:
        if isinstance(target, cst.Name):
            array_call = _call(value.func) if isinstance(value, cst.Call) else None
            out.bindings.append(_binding(target.value, kind, rhs, array_call,
                                         value if kind == "expr" else None))
            if kind == "expr":
                out.kills.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value, "elem" if kind != "other" else kind, rhs, out)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value, kind, rhs, out)
        elif isinstance(target, (cst.Subscript, cst.Attribute)):
            self._expr_into(target, out)
            root = _root(target)
            if root is None:
                out.blocked = True
                return
            (out.stored if isinstance(target, cst.Subscript) and
             _root(target.value) == _plain_root(target.value) else out.mutated).add(root)
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
                out.attributes.add((root, target.attr.value))
            else:
                out.deep.add(root)
            out.bindings.append(_binding(root, "mutate", rhs, value=value))
        else:
            out.blocked = True

    def _expr_into(self, node, out: Summary) -> None:
        expr = _Expr()
        expr.scan(node)
        out.reads |= expr.reads
        out.calls += expr.calls
        out.closure |= expr.closure
        out.blocked |= expr.blocked


def _plain_root(node) -> Optional[str]:
    """The name under ``x[i][j]`` (subscripts only), else None."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _binding(name: str, kind: str, rhs: Summary, array_call=None, value=None) -> Binding:
    return Binding(name, kind, frozenset(rhs.reads), tuple(rhs.calls), array_call,
                   scalar=_scalar(value) if value is not None else None)


_SCALAR_CALLS = frozenset({"len", "int", "float", "str", "bool", "round", "ord", "isinstance"})


def _scalar(node) -> Optional[frozenset]:
    """The names that must hold numbers or strings for an expression to make one (None: it
    may make something else; a builtin such as ``len`` always makes one): such a value
    cannot share an object with another."""
    if isinstance(node, cst.Name):
        return frozenset({node.value})
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.BaseString)):
        return frozenset()
    if isinstance(node, cst.Call):
        scalar = isinstance(node.func, cst.Name) and node.func.value in _SCALAR_CALLS
        return frozenset({node.func.value}) if scalar else None
    if isinstance(node, cst.Comparison):
        return frozenset()
    parts = {cst.BinaryOperation: ("left", "right"), cst.UnaryOperation: ("expression",),
             cst.IfExp: ("body", "orelse")}.get(type(node))
    if parts is None:
        return None
    names = [_scalar(getattr(node, part)) for part in parts]
    return None if None in names else frozenset().union(*names)
