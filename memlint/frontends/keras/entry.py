"""``--entry``: the function or class of a file that builds its model, and model factories.

``parse_entry`` reads ``NAME`` or ``NAME(classes=10, input_shape=(32, 32, 3))`` with the
standard library's parser and literal evaluation only (nothing runs).  ``factories`` lists
the module-level functions and Model subclasses of a file that look like model builders.
"""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst


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


def _called_names(node: cst.CSTNode) -> set:
    """Last components of the names called anywhere in ``node``."""
    out = set()

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Name):
                out.add(func.value)
            elif isinstance(func, cst.Attribute):
                out.add(func.attr.value)

    node.visit(Visitor())
    return out


def _returns_value(node: cst.FunctionDef) -> bool:
    found = []

    class Visitor(cst.CSTVisitor):
        def visit_Return(self, ret: cst.Return) -> None:
            if ret.value is not None:
                found.append(ret)

        def visit_FunctionDef(self, inner: cst.FunctionDef) -> bool:
            return inner is node  # a nested function's returns are not this one's

        def visit_Lambda(self, _node) -> bool:
            return False

    node.visit(Visitor())
    return bool(found)


def factories(module: cst.Module, model_classes: set) -> list:
    """``(kind, name, FunctionDef | ClassDef)`` of the module-level model factories:
    functions that return a value and call Model / Sequential / a Model subclass / another
    factory, and Model subclasses (``model_classes``: their names)."""
    functions = {}
    found = []
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and _returns_value(stmt):
            functions[stmt.name.value] = (stmt, _called_names(stmt))
        elif isinstance(stmt, cst.ClassDef) and stmt.name.value in model_classes:
            found.append(("class", stmt.name.value, stmt))
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
    order = {id(stmt): i for i, stmt in enumerate(module.body)}
    return sorted(found, key=lambda item: order.get(id(item[2]), 0))


def signature(node: cst.CSTNode) -> str:
    """``name(a, b=...)`` of a FunctionDef (its parameters), or the class name."""
    if not isinstance(node, cst.FunctionDef):
        return node.name.value
    params = node.params
    parts = [p.name.value + ("=..." if p.default is not None else "")
             for p in (*params.posonly_params, *params.params)]
    return f"{node.name.value}({', '.join(parts)})"


def needs_arguments(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.FunctionDef):
        return False
    params = node.params
    return any(p.default is None for p in (*params.posonly_params, *params.params,
                                           *params.kwonly_params))
