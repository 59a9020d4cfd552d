"""The interpreter's side of slicing: plans for the module and for each function call.

The module is planned once before it runs and again before each top-level loop, with what
the names bound so far hold (a name counts only when every statement binding it ran and
nothing later rebinds it).  A function is planned at each call from its arguments and the
free names it reads (plans are reused for the same classes of values).
"""

from __future__ import annotations

import libcst as cst

from memlint.frontends.keras.slice_scan import Scanner, target_names
from memlint.frontends.keras.slicing import Plan, value_class
from memlint.frontends.keras.values import Ref

_LOOPS = (cst.For, cst.While)


class Slicer:
    """Plans for one interpreter; ``skipped`` holds the statements actually skipped."""

    def __init__(self, interp, enabled: bool = True):
        self.interp = interp
        self.enabled = enabled
        self.scanner = Scanner()
        self.skipped: set = set()
        self._functions: dict = {}
        self._module = None  # the plan of the whole module
        self._sites: dict = {}  # module name -> [(top-level index, statement ids)]

    def is_project(self, name: str) -> bool:
        project = self.interp.project
        return bool(project.enabled) and type(project).find_absolute(project, name) is not None

    # ------------------------------------------------------------------ the module

    def module_skips(self, body: list) -> frozenset:
        if not self.enabled:
            return frozenset()
        self._module = Plan(self.scanner, body, {}, {}, is_project=self.is_project)
        for index, stmt in enumerate(body):
            self._note_sites(stmt, index, ())
        return frozenset(self._module.skips)

    def before_top_level(self, body: list, index: int, skips: frozenset) -> frozenset:
        """The skips for the rest of the module, redone before a top-level loop that runs."""
        stmt = body[index]
        if self._module is None or not isinstance(stmt, _LOOPS) or id(stmt) in skips:
            return skips
        facts, paths = {}, {}
        for name, sites in self._sites.items():
            value = self.interp.globals.get(name, _MISSING)
            known = (value is not _MISSING and name not in self._module.always and
                     all(i < index and not (self.skipped & set(ids)) for i, ids in sites))
            facts[name] = value_class(value) if known else self._module.cls(name)
            if known and isinstance(value, Ref):
                paths[name] = value.name
            elif name in self._module.paths:
                paths[name] = self._module.paths[name]
        plan = Plan(self.scanner, body[index:], facts, paths, always=self._module.always,
                    builtins=self._module.builtins, is_project=self.is_project)
        return frozenset(plan.skips)

    def _note_sites(self, stmt, index: int, chain: tuple) -> None:
        chain = chain + (id(stmt),)
        names = set()
        if isinstance(stmt, (cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef)):
            names = self.scanner.summary(stmt).bound
        elif isinstance(stmt, cst.For):
            names = target_names(stmt.target)
        elif isinstance(stmt, (cst.With, cst.Try, cst.TryStar)):
            names = self.scanner.summary(stmt).bound  # never refined: skipped or not
            chain = chain + (0,)  # (an id no statement has: these sites never count)
        for name in names:
            self._sites.setdefault(name, []).append((index, chain))
        if isinstance(stmt, (cst.For, cst.While, cst.If)):
            for block in (stmt.body, stmt.orelse):
                if isinstance(block, cst.If):
                    self._note_sites(block, index, chain)
                elif block is not None:
                    for inner in block.body.body if isinstance(block, cst.Else) else block.body:
                        self._note_sites(inner, index, chain)

    # ------------------------------------------------------------------ functions

    def function_skips(self, fn, local: dict) -> frozenset:
        """The skips of one call of ``fn`` whose parameters are bound in ``local``."""
        node = fn.node
        if not self.enabled or not isinstance(getattr(node, "body", None), cst.IndentedBlock):
            return frozenset()
        body = node.body.body
        free = self._free(node, body)
        facts, paths = {}, {}
        for name in (*local, *free):
            value = local[name] if name in local else self._lookup(fn, name)
            if value is _MISSING:
                continue
            facts[name] = value_class(value)
            if isinstance(value, Ref):
                paths[name] = value.name
        key = (id(node), tuple(sorted(facts.items())), tuple(sorted(paths.items())))
        found = self._functions.get(key)
        if found is None:
            plan = Plan(self.scanner, body, facts, paths, escaping=set(local),
                        params=frozenset(local), is_project=self.is_project)
            found = self._functions[key] = frozenset(plan.skips)
        return found

    def _free(self, node, body) -> set:
        summary = self.scanner.summary_of_body(node.body)
        return (summary.reads | summary.closure) - summary.bound

    def _lookup(self, fn, name: str):
        for scope in fn.closure:
            if name in scope:
                return scope[name]
        scope = fn.module_globals if fn.module_globals is not None else self.interp.globals
        return scope.get(name, _MISSING)


_MISSING = object()
