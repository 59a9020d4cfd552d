"""``--entry``: the function or class of a file that builds its model, and model factories.

``parse_entry`` reads ``NAME`` or ``NAME(classes=10, input_shape=(32, 32, 3))`` with the
standard library's parser and literal evaluation only (nothing runs).  ``factories`` lists
the module-level functions, Model subclasses and plain classes that hold models (a GAN class,
a classifier with ``build_model``) of a file that look like model builders.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

import libcst as cst

from memlint.source_index import SourceIndex


class EntryError(ValueError):
    """The --entry text is not ``NAME`` or ``NAME(literal arguments)``."""


def parse_entry(text: str) -> tuple:
    """``(name, args, kwargs)`` from ``NAME`` or ``NAME(literal, key=literal, ...)``."""
    text = (text or "").strip()
    if not text or len(text) > 2_000:
        raise EntryError("--entry must be NAME or NAME(arguments), e.g. "
                         "'build_model(classes=10)'")
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise EntryError(f"--entry {text!r} is not NAME or NAME(literal arguments)") from None
    if isinstance(tree, ast.Name):
        return tree.id, (), {}
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise EntryError(f"--entry {text!r} must name a function or class of the file, "
                         "optionally called with literal arguments")
    try:
        if any(isinstance(a, ast.Starred) for a in tree.args) or \
                any(k.arg is None for k in tree.keywords):
            raise ValueError("* and ** are not literal arguments")
        args = tuple(_literal(a) for a in tree.args)
        kwargs = {k.arg: _literal(k.value) for k in tree.keywords}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError) as exc:
        raise EntryError(f"--entry {text!r}: arguments must be Python literals "
                         f"(numbers, strings, tuples, lists, dicts, True/False/None): "
                         f"{exc}") from None
    return tree.func.id, args, kwargs


def _literal(node: ast.AST) -> Any:
    value = ast.literal_eval(node)
    if isinstance(value, (set, frozenset, bytes, complex)):
        raise ValueError(f"{type(value).__name__} arguments are not supported")
    return value


_MODEL_CALLS = {"Model", "Sequential", "Functional"}


class _CalledNames(cst.CSTVisitor):
    """Last components of the names called anywhere in the visited node."""

    def __init__(self):
        self.names: set = set()

    def visit_Call(self, call: cst.Call) -> None:
        func = call.func
        if isinstance(func, cst.Name):
            self.names.add(func.value)
        elif isinstance(func, cst.Attribute):
            self.names.add(func.attr.value)


def _called_names(node: cst.CSTNode, index: SourceIndex) -> set:
    finder = _CalledNames()
    index.visit(finder, node)
    return finder.names


class _ValueReturns(cst.CSTVisitor):
    """Whether a ``def`` returns a value itself (a nested function's returns are not its)."""

    def __init__(self, node: cst.FunctionDef):
        self.node = node
        self.found = False

    def visit_Return(self, ret: cst.Return) -> None:
        if ret.value is not None:
            self.found = True

    def visit_FunctionDef(self, inner: cst.FunctionDef) -> bool:
        return inner is self.node

    def visit_Lambda(self, _node) -> bool:
        return False


def _returns_value(node: cst.FunctionDef, index: SourceIndex) -> bool:
    finder = _ValueReturns(node)
    index.visit(finder, node)
    return finder.found


def factories(module: cst.Module, model_classes: set, plain_classes: frozenset = frozenset(),
              index: Optional[SourceIndex] = None) -> list:
    """``(kind, name, FunctionDef | ClassDef)`` of the module-level model factories:
    functions that return a value and call Model / Sequential / a Model subclass / another
    factory, Model subclasses (``model_classes``: their names), and plain classes
    (``plain_classes``: their names) whose methods call any of those (``index``: the
    module's :class:`SourceIndex`, when the caller has it)."""
    index = index if index is not None else SourceIndex(module)
    functions = {}
    found = []
    holders = []
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and _returns_value(stmt, index):
            functions[stmt.name.value] = (stmt, _called_names(stmt, index))
        elif isinstance(stmt, cst.ClassDef) and stmt.name.value in model_classes:
            found.append(("class", stmt.name.value, stmt))
        elif isinstance(stmt, cst.ClassDef) and stmt.name.value in plain_classes:
            holders.append((stmt, _called_names(stmt, index)))
    builders = _MODEL_CALLS | set(model_classes)
    chosen: set = set()
    changed = True
    while changed:
        changed = False
        for name, (_, called) in functions.items():
            if name not in chosen and called & (builders | chosen):
                chosen.add(name)
                changed = True
    found += [("function", name, functions[name][0]) for name in functions if name in chosen]
    found += [("class", stmt.name.value, stmt) for stmt, called in holders
              if called & (builders | chosen)]
    order = {id(stmt): i for i, stmt in enumerate(module.body)}
    return sorted(found, key=lambda item: order.get(id(item[2]), 0))


def signature(node: cst.CSTNode) -> str:
    """``name(a, b=...)`` of a FunctionDef (its parameters), or of a class whose
    ``__init__`` takes arguments; else the class name."""
    params = _parameters(node)
    if params is None:
        return node.name.value
    parts = [p.name.value + ("=..." if p.default is not None else "") for p in params]
    return f"{node.name.value}({', '.join(parts)})"


def needs_arguments(node: cst.CSTNode) -> bool:
    params = _parameters(node, keyword_only=True)
    return params is not None and any(p.default is None for p in params)


def _parameters(node: cst.CSTNode, keyword_only: bool = False) -> Any:
    """The parameters a call gives values to: a function's, or a class's ``__init__``'s
    without ``self`` (None for a class without an ``__init__`` that takes any, and for a
    Model subclass, whose arguments are Keras's own)."""
    if isinstance(node, cst.ClassDef):
        init = next((item for item in (node.body.body if isinstance(
            node.body, cst.IndentedBlock) else []) if isinstance(item, cst.FunctionDef)
            and item.name.value == "__init__"), None)
        if init is None or any(_base_name(arg.value) in ("Model", "Layer")
                               for arg in node.bases):
            return None
        params = _parameters(init, keyword_only)
        return params[1:] if params else None
    params = node.params
    listed = [*params.posonly_params, *params.params]
    return listed + list(params.kwonly_params) if keyword_only else listed


def _base_name(expr: cst.BaseExpression) -> str:
    return expr.attr.value if isinstance(expr, cst.Attribute) else getattr(expr, "value", "")
