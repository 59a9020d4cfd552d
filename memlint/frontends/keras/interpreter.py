"""A bounded abstract interpreter over the subset of Python that model scripts use.

It walks a libcst module statement by statement: imports (resolved to canonical names),
assignments, arithmetic, ``for`` loops over ``range`` and literal sequences, ``if`` on known
values, ``with`` and ``try`` bodies, calls of functions defined in the file (inlined, with
their own local scope), and library calls.  It never imports or executes the analysed code.
Library calls (Keras, NumPy, builtins) are handled in :mod:`.calls`.

Work is bounded: a step budget per file, an iteration cap per loop and a depth cap on nested
calls stop pathological input (``for i in range(10**12)``, unbounded recursion) quickly, with
an info diagnostic saying so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import libcst as cst
import libcst.matchers as m

from memlint.frontends.keras import (calls, classes, data, devices, models, plain_objects,
                                     row_loops, star_imports, training_loops)
from memlint.frontends.keras.imports import ProjectModules
from memlint.frontends.keras.expressions import (MAX_LOOP_ITERATIONS, ExpressionEvaluator,
                                                 has_truth)
from memlint.frontends.keras.loop_progress import (FixedPointWatch, ProgressWatch,
                                                   forget_after_stop, scope_of,
                                                   value_of)
from memlint.frontends.keras.loop_repeats import REPEATS, RepeatWatch, enough_repeats
from memlint.frontends.keras.names import canonical
from memlint.frontends.keras.slice_scan import NO_LAYER_METHODS, NO_LAYER_NAMES, may_call_layers
from memlint.frontends.keras.slicer import Slicer
from memlint.frontends.keras.state import FileState
from memlint.frontends.keras.values import (Array, FunctionalModel, ModuleValue, Ref,
                                            SequentialModel, Tensor, Unknown, UserFunction,
                                            is_unknown)
from memlint.ir import Location
from memlint.source_index import SourceIndex

MAX_STEPS = 200_000  # expression/statement evaluations per file
MAX_CALL_DEPTH = 16  # nested calls of functions defined in the analysed file


# Decorators that leave what a function or class builds unchanged (no note for them).
SHAPE_NEUTRAL_DECORATORS = frozenset({
    "register_keras_serializable", "function", "staticmethod", "classmethod", "property",
    "abstractmethod", "dataclass", "override", "wraps"})


class RaisedInCode(BaseException):
    """An exception the analysed code raises and one of its own ``except`` clauses catches
    (a BaseException so that memlint's ``except Exception`` guards let it through)."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


# What each exception name catches of the lookups the interpreter knows fail.
_CATCHES = {"KeyError": {"KeyError"}, "IndexError": {"IndexError"},
            "LookupError": {"KeyError", "IndexError"},
            "Exception": {"KeyError", "IndexError"}, "BaseException": {"KeyError", "IndexError"}}


def _ends_in_raise(block) -> bool:
    """Whether a block's last statement is ``raise ...``."""
    last = _last_statement(block)
    return isinstance(last, cst.Raise)


def _returns_nothing(block) -> bool:
    """Whether a block is one ``return`` or ``return None`` (a guard: ``if n == 0 or
    batch_size <= 0: return None`` in a data generator's wrapper)."""
    last = _last_statement(block)
    return len(block.body) == 1 and isinstance(last, cst.Return) and (
        last.value is None or (isinstance(last.value, cst.Name) and last.value.value == "None"))


def _last_statement(block):
    body = block.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return last


def _caught_names(handler: cst.ExceptHandler) -> Optional[set]:
    """The exception names an ``except`` clause lists (None: a bare ``except:``)."""
    if handler.type is None:
        return None
    items = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    out = set()
    for item in items:
        node = item.value if isinstance(item, cst.Element) else item
        out.add(_dotted(node).rsplit(".", 1)[-1])
    return out


def _catches(names: Optional[set], error: str) -> bool:
    return names is None or any(error in _CATCHES.get(name, ()) for name in names)


class _Yielded(BaseException):
    """The first ``yield`` of a generator function run for its first value."""

    def __init__(self, value: Any):
        super().__init__()
        self.value = value


def _is_generator(fn_node, index: SourceIndex) -> bool:
    """Whether a ``def`` contains ``yield`` in its own body (not in nested functions)."""
    if not isinstance(fn_node, cst.FunctionDef):
        return False
    finder = _YieldFinder(fn_node)
    index.visit(finder, fn_node)
    return finder.found


class _YieldFinder(cst.CSTVisitor):
    """A ``yield`` (with ``returns``, a ``return`` too) in ``fn_node``'s own body, or in a
    block's when ``fn_node`` is None, nested definitions aside."""

    def __init__(self, fn_node, returns: bool = False):
        self.fn_node = fn_node
        self.returns = returns
        self.found = False

    def visit_Yield(self, node):
        self.found = True

    def visit_Return(self, node):
        self.found = self.found or self.returns

    def visit_FunctionDef(self, node):
        return node is self.fn_node

    def visit_Lambda(self, node):
        return False

    def visit_ClassDef(self, node):
        return False


class BudgetExceeded(Exception):
    """The per-file step budget ran out."""


class _LoopControl(Exception):
    def __init__(self, kind: str):
        self.kind = kind


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


# how many times the body of one loop whose iterable is not known is read once
MAX_RUNS_ONCE = 8

# callees whose calls run no model, layer or code of the file: modules' functions, builtins
# and the methods of data
_DATA_ROOTS = (Ref, ModuleValue, Array, Tensor, Unknown, data.Dataset, list, tuple, dict, set,
               str, bytes, int, float, bool, type(None))


def runs_code(interp, summary) -> bool:
    """Whether code of this summary may run a model, a layer or a function or object of the
    file: a call of anything but a module's function, a builtin or a method of data."""
    for call in summary.calls:
        if call.kind == "fresh" or (call.kind == "name" and call.root in NO_LAYER_NAMES):
            continue
        if call.kind in ("name", "chain") and call.root:
            if not isinstance(interp._value_of(call.root), _DATA_ROOTS):
                return True
        elif call.dotted.rsplit(".", 1)[-1] not in NO_LAYER_METHODS:
            return True
    return False


def _returns_inside(body) -> bool:
    """Whether a loop's body returns or yields (nested definitions aside)."""
    finder = _YieldFinder(None, returns=True)
    body.visit(finder)
    return finder.found


def _method_call(tree, root: str, method: str):
    """The first ``root.method(...)`` call in ``tree``, or None."""
    if isinstance(tree, cst.Call) and isinstance(tree.func, cst.Attribute) \
            and isinstance(tree.func.value, cst.Name) and tree.func.value.value == root \
            and tree.func.attr.value == method:
        return tree
    for child in tree.children:
        found = _method_call(child, root, method)
        if found is not None:
            return found
    return None


def _unknown_after(names: list) -> str:
    """The end of a note on a loop memlint could not run: the names now unknown."""
    if not names:
        return ""
    return f", and {_names(names)} {'is' if len(names) == 1 else 'are'} unknown after it"


def _names(names: list) -> str:
    """A few names for a note: ``a, b, c, ...``."""
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")


class Interpreter(ExpressionEvaluator):
    """Evaluates one module; results accumulate in :class:`FileState`."""

    def __init__(self, module: cst.Module, state: FileState, roots: tuple = (),
                 slicing: bool = False):
        self.module = module
        self.positions = SourceIndex(module)  # positions and visits, shared with the rules
        self.literals: dict = {}  # number literal node -> its value (ExpressionEvaluator.literal)
        self.state = state
        self.globals: dict[str, Any] = {"__name__": "__main__", "__file__": state.path}
        self.project = ProjectModules(state.path, roots)
        # while code of an imported project module runs: where the analysed file reached it
        # (the import statement or the call); everything located in that code is located there
        self.anchor = None
        self.scope: dict[str, Any] = self.globals  # the current local scope
        self.outer: tuple = ()  # enclosing function scopes, innermost first
        self.global_names: set = set()  # names declared ``global`` in the current function
        self.depth = 0  # nesting of inlined calls
        self.tape_depth = 0  # enclosing ``with tf.GradientTape()`` blocks (training_loops)
        self.tape_calls: list = []  # per enclosing tape block: the training calls it ran
        # the file runs torch's autograd (``loss.backward()``): a model call on data records
        # its backward graph, outside ``with torch.no_grad()`` blocks (training_loops; set
        # by the frontend, which has the source text)
        self.autograd = False
        self.no_grad_depth = 0
        # the tf.data ``map()`` whose function is running (its Location; data.py): a model
        # that function calls runs in the input pipeline, on the host
        self.dataset_map = None
        self.try_handlers: list = []  # per enclosing ``try`` body: its handlers' names
        self.steps = 0  # statements and expressions evaluated (at most MAX_STEPS)
        self.deepest = 0  # deepest nesting of inlined calls reached (at most MAX_CALL_DEPTH)
        self.longest_loop = 0  # most iterations one for/while loop ran (MAX_LOOP_ITERATIONS)
        self._generators: dict = {}  # id(def node) -> whether it is a generator function
        self.model_changing_loops: dict = {}  # id(loop) -> whether it may change a model
        self.repeating_loops: set = set()  # ids of loops stopped for repeating (loop_repeats.py)
        self.runs_once: dict = {}  # id of a loop of unknown iterable -> times read once
        self.jits: list = []  # the functions being called: each one's UserFunction.jit
        self.differentiating: list = []  # lines of the jax.grad functions being run
        self.undecided_ifs: set = set()  # ids of the ifs already noted as undecided
        self.file_closure: Optional[set] = None  # names functions of the file read (lazily)
        self._capture_depth = -1  # call depth of the generator run by first_yield
        # with ``slicing``: what nothing the models depend on reads is skipped (slicing.py)
        self.slicer = Slicer(self, enabled=slicing)
        self.skips: frozenset = frozenset()  # ids of the current scope's skipped statements

    # ------------------------------------------------------------------ helpers

    def location(self, node: cst.CSTNode) -> Location:
        pos = self.positions.get(node)
        if pos is None:
            given = getattr(node, "loc", None)  # a call site traced outside its statement
            return given if isinstance(given, Location) else \
                self.anchor or Location(self.state.path, 1, 1)
        return Location(self.state.path, pos.start.line, pos.start.column + 1,
                        pos.end.line, pos.end.column + 1)

    def tick(self, node: cst.CSTNode) -> None:
        if self.steps >= MAX_STEPS:  # the step that would go over the budget is not taken
            raise BudgetExceeded(self.location(node))
        self.steps += 1

    def run(self) -> None:
        """Evaluate the whole module, stopping cleanly when the budget runs out."""
        body = list(self.module.body)
        self.skips = self.slicer.module_skips(body)
        try:
            for index, stmt in enumerate(body):
                self.skips = self.slicer.before_top_level(body, index, self.skips)
                try:
                    self.exec_statement(stmt)
                except (BudgetExceeded, _Return, _LoopControl, RecursionError, MemoryError):
                    raise
                except Exception as exc:  # a bug in memlint: keep what the rest gives
                    self.state.note_internal(self.location(stmt), "this statement", exc)
        except BudgetExceeded as exc:
            loc = exc.args[0]
            self.state.note_budget(loc, f"analysis stopped after {MAX_STEPS:,} steps; "
                                        "models found before this point are still reported")
        except (_Return, _LoopControl):
            # 'return' / 'break' outside a function or loop: Python rejects the file
            self.state.syntax_error(Location(self.state.path, 1, 1),
                                    "'return', 'break' or 'continue' outside a function or "
                                    "loop; analysis stopped there")

    def run_entry(self, name: str, args: tuple, kwargs: dict) -> bool:
        """``--entry NAME(...)``: call a function or construct a class of the file, as the
        module's last statement would.  False when the file defines no such name."""
        value = self.globals.get(name)
        node = getattr(value, "node", None)
        if isinstance(value, (classes.UserClass, plain_objects.PlainClass)):
            node = next((s for s in self.module.body
                         if isinstance(s, cst.ClassDef) and s.name.value == name), None)
        if node is None or node not in self.positions or not isinstance(
                value, (UserFunction, classes.UserClass, plain_objects.PlainClass)):
            return False
        try:
            try:
                if isinstance(value, UserFunction):
                    result = self.call_function(value, list(args), dict(kwargs), node)
                elif isinstance(value, plain_objects.PlainClass):
                    # a class that holds models (a GAN, a classifier with build_model)
                    result = plain_objects.construct(self, value, list(args), dict(kwargs),
                                                     node)
                    self.entry_result = result
                else:
                    result = classes.construct(self, value, list(args), dict(kwargs), node)
            except (BudgetExceeded, RecursionError, MemoryError):
                raise
            except (_Return, _LoopControl):
                result = None
            except Exception as exc:  # a bug in memlint
                self.state.note_internal(self.location(node), f"--entry {name}", exc)
                return True
            if any(result is model for model in self.state.models) and \
                    getattr(result, "variable", None) is None:
                result.variable = name
        except BudgetExceeded as exc:
            self.state.note_budget(exc.args[0], f"analysis stopped after {MAX_STEPS:,} steps; "
                                                "models found before this point are still "
                                                "reported")
        return True

    # ------------------------------------------------------------------ statements

    def exec_block(self, body) -> None:
        for stmt in body:
            self.exec_statement(stmt)

    def exec_statement(self, stmt: cst.CSTNode) -> None:
        self.tick(stmt)
        if id(stmt) in self.skips:  # nothing that runs reads what it writes (slicing.py)
            self.slicer.skipped.add(id(stmt))
            return
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.exec_small(small)
        elif isinstance(stmt, cst.BaseSmallStatement):  # a one-line body: ``for x in y: f(x)``
            self.exec_small(stmt)
        elif isinstance(stmt, cst.For):
            self.exec_for(stmt)
        elif isinstance(stmt, cst.If):
            self.exec_if(stmt)
        elif isinstance(stmt, cst.With):
            scopes, tapes, no_grads, opened = [], 0, 0, []
            for item in stmt.items:
                if isinstance(item.item, cst.Call) and _dotted(item.item.func):
                    called = self.eval(item.item.func)  # a name chain: nothing runs twice
                    tapes += training_loops.is_tape(getattr(called, "name", None))
                    no_grads += training_loops.is_no_grad(getattr(called, "name", None))
                value = self.eval(item.item)
                if isinstance(value, devices.StrategyScope):
                    scopes.append(value.strategy)
                if isinstance(value, training_loops.Tape):
                    opened.append(value)
                if item.asname is not None:
                    self.assign(item.asname.name, value)
            made = len(self.state.models)
            self.tape_depth += tapes
            self.no_grad_depth += no_grads
            try:
                if tapes:
                    training_loops.tape_block(
                        self, f"under the GradientTape at line {self.location(stmt).line}",
                        lambda: self.exec_block(stmt.body.body), tuple(opened))
                else:
                    self.exec_block(stmt.body.body)
            finally:
                self.tape_depth -= tapes
                self.no_grad_depth -= no_grads
                for model in self.state.models[made:]:  # made inside strategy.scope()
                    if scopes and getattr(model, "strategy", None) is None:
                        model.strategy = scopes[-1]
        elif isinstance(stmt, cst.Try):
            self.exec_try(stmt)
        elif isinstance(stmt, cst.While):
            self.exec_while(stmt)
        elif isinstance(stmt, cst.FunctionDef):
            self.define_function(stmt)
        elif isinstance(stmt, cst.ClassDef):
            name = stmt.name.value
            user_class = classes.define_class(self, stmt)
            if user_class is not None:  # a Keras Layer / Model subclass
                self.set_name(name, user_class)
                return
            plain = plain_objects.define_plain_class(self, stmt)
            if plain is not None:  # a config or builder class
                self.set_name(name, plain)
                return
            value = Unknown(f"class '{name}' defined in the analysed file is not evaluated")
            value.class_name = name
            self.set_name(name, value)
            self.state.definitions.append(("class", name, self.location(stmt)))

    def exec_small(self, small: cst.CSTNode) -> None:
        if isinstance(small, cst.Expr):
            self.eval(small.value)
        elif isinstance(small, cst.Assign):
            value = self.eval(small.value)
            for target in small.targets:
                self.assign(target.target, value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.eval(small.value))
        elif isinstance(small, cst.AugAssign):
            current = self.eval(small.target)
            value = self.binary(current, self.eval(small.value), small.operator, small)
            if isinstance(current, list) and isinstance(value, list) \
                    and isinstance(small.operator, cst.AddAssign):
                current[:] = value  # ``items += more`` extends the same list
                value = current
            self.assign(small.target, value)
        elif isinstance(small, cst.Import):
            for alias in small.names:
                full = _dotted(alias.name)
                if self.import_project(full, alias, small):
                    continue
                if alias.asname is not None:
                    self.set_name(alias.asname.name.value, Ref(canonical(full)))
                else:
                    top = full.split(".")[0]
                    self.set_name(top, Ref(canonical(top)))
        elif isinstance(small, cst.ImportFrom):
            self.exec_import_from(small)
        elif isinstance(small, (cst.Break, cst.Continue)):
            raise _LoopControl("break" if isinstance(small, cst.Break) else "continue")
        elif isinstance(small, cst.Return):
            raise _Return(self.eval(small.value) if small.value is not None else None)
        elif isinstance(small, cst.Global):
            self.global_names.update(n.name.value for n in small.names)
        elif isinstance(small, cst.Del):
            self.delete(small.target)

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        if self.import_from_project(node) or node.relative:
            return
        if node.module is None:
            return
        module = _dotted(node.module)
        if isinstance(node.names, cst.ImportStar):
            for key, value in star_imports.bind_library(self.scope, canonical(module)).items():
                self.set_name(key, value)
            return
        for alias in node.names:
            name = _dotted(alias.name)
            bound = alias.asname.name.value if alias.asname is not None else name
            self.set_name(bound, Ref(canonical(f"{module}.{name}")))

    # ------------------------------------------------------------------ project modules

    def import_project(self, full: str, alias, node) -> bool:
        """``import mypkg.blocks [as b]`` of a project module: bind it; False if not one."""
        found = self.project.find_absolute(full)
        if found is None:
            return False
        root, parts = found
        loc = self.location(node)
        if alias.asname is not None:
            value = self.project.module_at(self, root, parts, loc)
            self.set_name(alias.asname.name.value, value)
        else:
            self.project.module_at(self, root, parts, loc)
            top = self.project.module_at(self, root, parts[:1], loc)
            self.set_name(parts[0], top)
        return True

    def import_from_project(self, node: cst.ImportFrom) -> bool:
        """``from [.]mod import a, b`` of a project module: bind the names; False if the
        module is not one of the project (a library: handled as before)."""
        if not self.project.enabled:
            return bool(node.relative)  # relative imports of text with no file: skipped
        level = len(node.relative)
        module = _dotted(node.module) if node.module is not None else ""
        parts = [p for p in module.split(".") if p]
        loc = self.location(node)
        if level:
            current = self.globals.get("__file__")
            root = self.project.relative_base(current if isinstance(current, str) else None,
                                              level)
        else:
            found = self.project.find_absolute(module) if parts else None
            if found is None:
                if isinstance(node.names, cst.ImportStar) or not parts:
                    return False
                # ``from mypkg import blocks`` where mypkg is a folder without __init__.py
                subs = (self.project.find_absolute(f"{module}.{_dotted(a.name)}")
                        for a in node.names)
                found = next((f for f in subs if f is not None), None)
                if found is None:
                    return False
            root = found[0]
        base = self.project.module_at(self, root, parts, loc) if parts else None
        if level and not parts:  # ``from . import x``: the package's __init__.py, if any
            base = self.project.module_at(self, root.parent, [root.name], loc) \
                if root.name.isidentifier() else None
        if isinstance(node.names, cst.ImportStar):
            if isinstance(base, ModuleValue):
                for key, value in star_imports.project_names(base.names).items():
                    self.set_name(key, value)
                star_imports.add_fallback(self.scope, base.names.get(star_imports.FALLBACK, []))
            return True
        for alias in node.names:
            name = _dotted(alias.name)
            bound = alias.asname.name.value if alias.asname is not None else name
            value = None
            if isinstance(base, ModuleValue) and name in base.names:
                value = base.names[name]
            elif (root.joinpath(*parts, name).with_suffix(".py").is_file()
                  or root.joinpath(*parts, name, "__init__.py").is_file()):
                value = self.project.module_at(self, root, [*parts, name], loc)
            elif isinstance(base, Unknown):
                value = Unknown(f"'{name}' from a module that could not be read ({base.reason})")
            else:
                where = ".".join(parts) or "the package"
                value = Unknown(f"'{name}' is not defined (statically) in module '{where}'")
            self.set_name(bound, value)
        return True

    def run_module(self, module: cst.Module, value: ModuleValue, file, anchor) -> None:
        """Interpret a project module's statements in its own namespace (``value.names``).

        What it leaves in the file's state (models built at its module level, notes about its
        own code, definitions) is dropped: only the names it defines are kept."""
        state = self.state
        saved = (self.globals, self.scope, self.outer, self.global_names, self.anchor,
                 self.skips)
        marks = (len(state.models), len(state.diagnostics), len(state.definitions),
                 len(state.unresolved), set(state._seen_notes))
        self.globals = self.scope = value.names
        self.outer, self.global_names, self.skips = (), set(), frozenset()
        self.anchor = self.anchor or anchor
        state.quiet += 1
        try:
            for stmt in module.body:
                try:
                    self.exec_statement(stmt)
                except (BudgetExceeded, RecursionError, MemoryError):
                    raise
                except (_Return, _LoopControl):
                    break
                except Exception as exc:  # a bug in memlint: keep what the rest gives
                    state.note_internal(self.location(stmt), f"module '{value.name}'", exc)
        finally:
            state.quiet -= 1
            (self.globals, self.scope, self.outer, self.global_names, self.anchor,
             self.skips) = saved
            state.imported_models.extend(state.models[marks[0]:])
            del state.models[marks[0]:]
            del state.diagnostics[marks[1]:]
            del state.definitions[marks[2]:]
            del state.unresolved[marks[3]:]
            state._seen_notes = marks[4]

    def exec_try(self, stmt: cst.Try) -> None:
        """``try``: the body runs; a lookup in it that Python would fail (a missing dict key,
        an index out of range) and that this statement's handlers catch runs the handler
        instead, as in Python.  Other handlers never run."""
        self.try_handlers.append([_caught_names(h) for h in stmt.handlers])
        raised = None
        try:
            self.exec_block(stmt.body.body)
        except RaisedInCode as exc:
            raised = exc
        finally:
            self.try_handlers.pop()
        try:
            if raised is not None:
                handler = next(h for h in stmt.handlers
                               if _catches(_caught_names(h), raised.error))
                if handler.name is not None:
                    self.assign(handler.name.name, Unknown(f"the {raised.error} caught here"))
                self.exec_block(handler.body.body)
                if handler.name is not None and isinstance(handler.name.name, cst.Name):
                    self.scope.pop(handler.name.name.value, None)  # Python unbinds it
            elif stmt.orelse is not None:
                self.exec_block(stmt.orelse.body.body)
        finally:
            if stmt.finalbody is not None:
                self.exec_block(stmt.finalbody.body.body)

    def lookup_failed(self, error: str) -> None:
        """A subscript Python would fail with ``error``: raise it into the innermost ``try``
        when that one catches it (otherwise the caller goes on with an unknown value)."""
        if self.try_handlers and any(_catches(names, error) for names in self.try_handlers[-1]):
            raise RaisedInCode(error)

    def exec_for(self, stmt: cst.For) -> None:
        iterable = self.eval(stmt.iter)
        items = self.iterate(iterable, stmt)
        if items is None:
            rows = row_loops.fill_rows(self, stmt)  # sliding windows: rows of known shape
            if rows:
                self._forget_skipped(stmt)
                self._uses_in_skipped(stmt)
                for name, value in rows.items():
                    scope_of(self, name)[name] = value
                return
            ran, forgotten = self._run_once(stmt, Unknown(
                f"an item of the loop at line {self.location(stmt).line}, whose iterable is "
                "not known statically"))
            if not ran:
                self._uses_in_skipped(stmt)
            self.state.note_unresolved(
                self.location(stmt.iter), "for loop",
                "the loop's iterable is not known statically; " + (
                    "its body is read once, for what it calls"
                    if ran else "its body is skipped"),
                _unknown_after(forgotten))
            return
        count = 0
        broke = False
        watch = RepeatWatch(self, stmt)
        fixed = FixedPointWatch(self, stmt)
        total = len(items)
        for item in items:
            count += 1
            if count > MAX_LOOP_ITERATIONS:
                self.state.note_budget(self.location(stmt),
                                       f"loop stopped after {MAX_LOOP_ITERATIONS:,} iterations")
                return
            self.longest_loop = max(self.longest_loop, count)
            self.assign(stmt.target, item)
            start = self.steps
            watch.begin()
            try:
                self.exec_block(stmt.body.body)
            except _LoopControl as ctl:
                if ctl.kind == "break":
                    broke = True
                    break
            streak = watch.end()
            if self._stop_repeating(stmt, count, total - count, self.steps - start, streak):
                return
            if count < total and fixed.reached(streak):
                # the rest would repeat this iteration exactly (loop_progress.py)
                self.assign(stmt.target, items[-1])
                break
        if not broke:
            self._note_uniform(stmt, count, watch.streak)
        if not broke and stmt.orelse is not None:
            self.exec_block(stmt.orelse.body.body)

    def exec_while(self, stmt: cst.While) -> None:
        """``while`` on conditions known statically, bounded like ``for``; a condition that
        becomes unknown stops the loop with a note."""
        count = 0
        watch = RepeatWatch(self, stmt)
        progress = ProgressWatch(self)
        while True:
            test = self.eval(stmt.test)
            if not has_truth(test):
                if count == 0:
                    ran, forgotten = self._run_once(stmt, None)
                else:
                    ran, forgotten = False, self._forget_skipped(stmt)
                self.state.note_unresolved(
                    self.location(stmt.test), "while condition",
                    "the condition is not known statically; " + (
                        "its body is read once, for what it calls" if ran
                        else "the loop stopped there"),
                    _unknown_after(forgotten))
                return
            if not test:
                break
            count += 1
            if count > MAX_LOOP_ITERATIONS:
                self.state.note_budget(self.location(stmt),
                                       f"loop stopped after {MAX_LOOP_ITERATIONS:,} iterations")
                return
            if progress.stalled(count):
                self._stop_stalled(stmt, count)
                return
            self.longest_loop = max(self.longest_loop, count)
            start = self.steps
            watch.begin()
            try:
                self.exec_block(stmt.body.body)
            except _LoopControl as ctl:
                if ctl.kind == "break":
                    return
            if self._stop_repeating(stmt, count, None, self.steps - start, watch.end()):
                return
        if stmt.orelse is not None:
            self.exec_block(stmt.orelse.body.body)

    def _stop_stalled(self, stmt, count: int) -> None:
        """A ``while`` loop whose last iteration changed nothing memlint knows
        (loop_progress.py): stopped; what it changes becomes unknown after it."""
        forgotten = self._forget_loop(stmt)
        self.state.note_budget(
            self.location(stmt),
            f"loop stopped after {count - 1:,} iteration(s): the last one changed nothing "
            "memlint knows (it follows branches it cannot decide), so the loop would never end "
            "here; " + (f"{_names(forgotten)} are unknown after it" if forgotten else
                        "the analysis goes on after it"))

    def _run_once(self, stmt, item) -> tuple:
        """The body of a loop whose iterable (or condition) is not known, run once (on
        ``item`` for a ``for`` loop) for what it calls: a training loop over
        ``range(int(os.environ["EPOCHS"]))`` still trains at its batch.  Not run where it
        returns or yields (the loop may not run at all), nor where it calls no model, layer
        or code of the file (a loop making data, ``np.random.randint`` inside another loop
        of 1,200 samples), nor after :data:`MAX_RUNS_ONCE` runs of the same loop (called
        again and again by an outer loop).  Then what it changes is forgotten
        (:meth:`_forget_skipped`).  Whether it ran, and the names it made unknown that were
        bound before it (a body read on an earlier run of the loop counts as read)."""
        unknown_before = self._unknown_names()
        bound_before = {name for scope in (self.scope, *self.outer, self.globals)
                        for name in scope}
        runs = self.runs_once.get(id(stmt), 0)
        ran = runs < MAX_RUNS_ONCE and not _returns_inside(stmt.body) \
            and runs_code(self, self.slicer.scanner.summary(stmt))
        if ran:
            self.runs_once[id(stmt)] = runs + 1
            if isinstance(stmt, cst.For):
                self.assign(stmt.target, item)
            try:
                self.exec_block(stmt.body.body)
            except _LoopControl:
                pass
        forgotten = self._forget_skipped(stmt, unknown_before)
        return ran or runs > 0, [name for name in forgotten if name in bound_before]

    def _forget_skipped(self, stmt, unknown_before: set | None = None) -> list:
        """A loop whose iterable (or condition) is not known may run any number of times
        more: what its body changes becomes unknown after it (``x = Dense(n)(x)``,
        ``vocab.add(word)``), and a Sequential it adds layers to gets one it cannot know
        (``model.add(Dense(n))`` for sizes read from a file: the model kept only the layers
        outside the loop and was estimated as if complete).  The names, sorted."""
        line = self.location(stmt).line
        what = "condition" if isinstance(stmt, cst.While) else "iterable"
        if unknown_before is None:
            unknown_before = self._unknown_names()
        summary = self.slicer.scanner.summary(stmt)
        if getattr(self, "tracing", 0) and may_call_layers(summary):
            self.state.hidden_calls += 1
        forgotten = self._forget_changed(
            summary,
            f"changed by the loop at line {line}, whose {what} is not known statically",
            f"the layers the loop at line {line} adds: its {what} is not known statically",
            stmt)
        return [name for name in forgotten if name not in unknown_before]

    def _uses_in_skipped(self, stmt: cst.For) -> None:
        """A model a skipped ``for`` loop trains or runs (``feature_extractor.predict(frame)``
        for frames of files it lists): the call is recorded as if made, on data not known,
        so the model is not taken for one the code never uses (then assumed trained)."""
        for call in self.slicer.scanner.summary(stmt).calls:
            if call.kind != "chain" or not call.root or call.dotted not in models.DATA_USES:
                continue
            model = self._value_of(call.root)
            if not isinstance(model, (SequentialModel, FunctionalModel)):
                continue
            node = _method_call(stmt, call.root, call.dotted)
            args, kwargs = self._arguments_after(node) if node is not None else ([], {})
            if not args and "x" not in kwargs and "generator" not in kwargs:
                args = [Unknown(f"data of the loop at line {self.location(stmt).line}, whose "
                                "iterable is not known statically")]
            models.model_method(self, model, call.dotted, args, kwargs, node or stmt)

    def _arguments_after(self, node: cst.Call) -> tuple:
        """The arguments of a call in a loop memlint skipped, evaluated after it (what the
        loop changes is unknown then: ``batch_size=64`` is kept, the loop's batch is not);
        nothing evaluating them notes is reported."""
        if any(arg.star for arg in node.args):
            return [], {}
        with self.state.unreported():
            return self.call_arguments(node)

    def _forget_changed(self, summary, reason: str, layers: str, stmt) -> list:
        """What ``summary``'s code may change becomes ``Unknown(reason)``, and a Sequential
        it adds layers to gets one it cannot know (``layers`` says why).  The names."""
        for call in summary.calls:  # (a while loop's condition is in its summary too)
            model = self._value_of(call.root) if call.kind == "chain" and call.dotted == "add" \
                and call.root else None
            if isinstance(model, SequentialModel):
                models.sequential_add(self, model, Unknown(layers), stmt)
        # ``X[i] = np.load(path)`` keeps an array's shape and dtype: not forgotten
        kept = {name for name in summary.stored - summary.mutated - summary.bound
                if isinstance(self._value_of(name), Array)}
        return forget_after_stop(self, replace(summary, stored=summary.stored - kept), reason)

    def _unknown_names(self) -> set:
        """The names in scope whose value is not known (a note names only what a loop or a
        branch it could not decide made unknown)."""
        return {name for scope in (self.scope, *self.outer, self.globals)
                for name, value in scope.items() if isinstance(value, Unknown)}

    def _forget_loop(self, stmt) -> list:
        """What a loop stopped early would still have changed becomes unknown
        (loop_progress.forget_after_stop); the names, sorted."""
        return forget_after_stop(
            self, self.slicer.scanner.summary(stmt),
            f"changed by the loop at line {self.location(stmt).line}, which memlint stopped "
            "early")

    def _stop_repeating(self, stmt, count: int, remaining: Optional[int], per_iteration: int,
                        streak: int) -> bool:
        """Stop a loop whose last ``streak`` iterations only repeated model calls
        (loop_repeats.py) when its remaining iterations (None: not known) cannot run within
        the step budget, or when an earlier run of the same loop (an inner loop run again by
        its outer loop) was stopped so or only repeated from its second iteration on."""
        if not streak:
            return False
        left = MAX_LOOP_ITERATIONS - count if remaining is None else \
            min(remaining, MAX_LOOP_ITERATIONS - count)
        steps_left = MAX_STEPS - self.steps
        known = id(stmt) in self.repeating_loops
        if left <= 0 or (not known and left * max(per_iteration, 1) <= steps_left) or \
                not enough_repeats(streak, per_iteration, steps_left, known):
            return False
        self.repeating_loops.add(id(stmt))
        why = "as its earlier runs did" if known else \
            "and the rest would exceed the analysis's step budget"
        forgotten = self._forget_loop(stmt)
        self.state.note_budget(
            self.location(stmt),
            f"loop stopped after {count:,} iterations: the last {streak} only repeated calls "
            f"of the models already seen, {why}; the analysis goes on after the loop"
            + (f" ({_names(forgotten)} unknown after it)" if forgotten else ""))
        return True

    def _note_uniform(self, stmt, count: int, streak: int) -> None:
        """A loop that ran to its end repeating its model calls from its second iteration on
        (at least ``REPEATS`` times): a later run of it may stop early (_stop_repeating)."""
        if streak >= REPEATS and streak >= count - 1:
            self.repeating_loops.add(id(stmt))

    def iterate(self, value: Any, node: cst.CSTNode):
        if isinstance(value, range):
            return value  # lazy: range(10**12) is never materialised
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, data.Dataset):  # a custom training loop over its batches
            return data.batches(value)
        return None

    def exec_if(self, stmt: cst.If) -> None:
        test = self.eval(stmt.test)
        if not has_truth(test):
            if _ends_in_raise(stmt.body):
                # an error guard (``if not ok: raise ValueError``): the model is built on the
                # path that does not raise
                self.state.note_unresolved(
                    self.location(stmt.test), "if condition",
                    "the condition is not known statically; the branch that raises an error "
                    "was not followed")
                test = False
            elif _returns_nothing(stmt.body) and stmt.orelse is None:
                # a guard that gives nothing back (``if n == 0: return None``): what the
                # function makes is on the path after it
                self.state.note_unresolved(
                    self.location(stmt.test), "if condition",
                    "the condition is not known statically; the branch that returns None "
                    "was not followed")
                test = False
            else:
                self._undecided_if(stmt)
                return
        if test:
            self.exec_block(stmt.body.body)
        elif isinstance(stmt.orelse, cst.If):
            self.exec_if(stmt.orelse)
        elif stmt.orelse is not None:
            self.exec_block(stmt.orelse.body.body)

    def _undecided_if(self, stmt: cst.If) -> None:
        """An ``if`` whose condition is not known: its first branch is followed, but what
        either branch changes is unknown after it (``if cfg["pool"]: x = MaxPooling2D()(x)``
        would otherwise fix the smaller shape), a Sequential either branch adds layers to
        gets one it cannot know, and a model the first branch builds while another branch
        builds its own is no estimate of what runs (``if cfg["size"] == "small": model =
        small() else: model = big()`` was estimated small, "fits").  Names bound by imports
        and definitions keep the first branch's (version-guarded imports)."""
        line = self.location(stmt).line
        made = len(self.state.models)
        # (the note is made once per if: the names it quotes are only needed then)
        unknown_before = self._unknown_names() if id(stmt) not in self.undecided_ifs \
            else set()
        arrays = {name: value for name in self.slicer.scanner.summary(stmt).bound
                  if isinstance(value := self._value_of(name), Array)}
        returned = False
        try:
            self.exec_block(stmt.body.body)
        except _Return:  # ``if cfg: return small()``: the code after the if is the other path
            returned = True
            raise
        finally:  # also when the branch returns or breaks
            self._after_undecided_if(stmt, line, made, unknown_before, returned, arrays)

    def _given(self, target: cst.Name) -> Any:
        """The value ``--dim`` gives a name whose value here is not known statically."""
        value = self.state.given_values[target.value]
        used = f"{target.value} = {value} (--dim, line {self.location(target).line})"
        if used not in self.state.given_used:
            self.state.given_used.append(used)
        return value

    def _value_of(self, name: str) -> Any:
        return value_of(self, name)

    def _after_undecided_if(self, stmt: cst.If, line: int, made: int, unknown_before: set,
                            returned: bool, arrays: dict) -> None:
        summary = self.slicer.scanner.summary(stmt)
        other = stmt.orelse
        branch = [other] if isinstance(other, cst.If) else \
            list(other.body.body) if other is not None else []
        # an array the branch followed leaves with its shape, where no other branch binds
        # it (``if np.max(img) > 1: img = img / 255``), has that shape after the if either
        # way: kept, its dtype where both agree
        bound_elsewhere = {b.name for node in branch
                           for b in self.slicer.scanner.summary(node).bindings}
        same_shape = {}
        for name, old in arrays.items():
            new = self._value_of(name)
            if name not in bound_elsewhere and not returned and isinstance(new, Array) and \
                    tuple(new.shape) == tuple(old.shape):
                same_shape[name] = Array(tuple(old.shape),
                                         old.dtype if old.dtype == new.dtype else None)
        if getattr(self, "tracing", 0) and any(
                may_call_layers(self.slicer.scanner.summary(node)) for node in branch):
            self.state.hidden_calls += 1  # the branch not followed may call a layer
        others = returned or any(b.kind in ("expr", "elem") for node in branch
                                 for b in self.slicer.scanner.summary(node).bindings) or any(
            m.findall(node, m.Return()) for node in branch)
        for model in self.state.models[made:] if others else []:
            model.undecided_branch = line
            self.state.note_unresolved(
                model.location, f"model '{model.name}'",
                f"it is built in a branch of the if at line {line}, whose condition is not "
                "known statically, and another branch may build another: not estimated")
        forgotten = self._forget_changed(
            replace(summary, bindings=[b for b in summary.bindings
                                       if b.kind not in ("import", "other")]),
            f"set in a branch of the if at line {line}, whose condition is not known "
            "statically", f"the layers a branch of the if at line {line} may add: its "
            "condition is not known statically", stmt)
        for name, value in same_shape.items():
            scope_of(self, name)[name] = value
        forgotten = [name for name in forgotten if name not in same_shape]
        if id(stmt) not in self.undecided_ifs:  # once, as in a loop it runs again
            self.undecided_ifs.add(id(stmt))
            self.state.note_unresolved(
                self.location(stmt.test), "if condition",
                "the condition is not known statically; the first branch was followed"
                + _unknown_after([n for n in forgotten if n not in unknown_before]))

    # ------------------------------------------------------------------ functions

    def define_function(self, stmt: cst.FunctionDef) -> None:
        """``def f(...)``: remember it (defaults evaluated now, as Python does) for inlining."""
        name = stmt.name.value
        fn = self.make_function(name, stmt)
        self.set_name(name, self.decorate(stmt, fn))
        self.state.definitions.append(("function", name, self.location(stmt)))

    def decorate(self, stmt: cst.FunctionDef, fn: UserFunction) -> UserFunction:
        """Apply the decorators defined in the analysed code (innermost first), as Python
        does: ``@register("plain")`` that files the function in a registry, a wrapper that
        calls it.  A library decorator, or one whose result is not a function memlint can
        call, is not applied (:meth:`note_decorators` says so where it matters)."""
        value = fn
        for decorator in reversed(stmt.decorators):
            deco = self.eval(decorator.decorator)
            jit = training_loops.jit_decorator(deco)
            if jit is not None:  # ``@jax.jit``: what it donates (training_loops.jitted)
                value = training_loops.jitted(value, jit, self.location(decorator).line)
                continue
            if not isinstance(deco, UserFunction):
                self.note_decorator(decorator, stmt)
                continue
            result = self.call_function(deco, [value], {}, decorator)
            if isinstance(result, UserFunction):
                value = result
            else:
                self.note_decorator(decorator, stmt)
        return value

    def make_function(self, name: str, node) -> UserFunction:
        """A ``def`` or ``lambda`` as a function value: defaults evaluated now, as Python
        does, and the enclosing function scopes kept as its closure."""
        defaults = {}
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                defaults[param.name.value] = self.eval(param.default)
        closure = (self.scope,) + self.outer if self.scope is not self.globals else ()
        return UserFunction(name, node, defaults, closure, self.location(node), self.globals)

    def make_lambda(self, node: cst.Lambda) -> UserFunction:
        """``lambda x, k=2: expr`` as a function value."""
        return self.make_function("<lambda>", node)

    def note_decorators(self, stmt) -> None:
        """A class's decorators are not applied: it is analysed as written."""
        for decorator in stmt.decorators:
            self.note_decorator(decorator, stmt)

    def note_decorator(self, decorator: cst.Decorator, stmt) -> None:
        """One decorator not applied: those known not to change what gets built pass
        silently, any other gets an info note."""
        expr = decorator.decorator
        dotted = _dotted(expr.func if isinstance(expr, cst.Call) else expr)
        if dotted.rsplit(".", 1)[-1] in SHAPE_NEUTRAL_DECORATORS:
            return
        self.state.note_info(
            self.location(decorator), f"decorator @{dotted or '...'} is not applied; "
            f"'{stmt.name.value}' is analysed as written")

    def call_function(self, fn: UserFunction, args: list, kwargs: dict, node) -> Any:
        """Inline a call of a function defined in the analysed file (a generator function's
        call is a generator, run when data is taken from it: :meth:`first_yield`)."""
        if self._generator(fn.node):
            from memlint.frontends.keras.data import Generator
            return Generator(fn, list(args), dict(kwargs), node)
        return self._inline(fn, args, kwargs, node)

    def _generator(self, fn_node) -> bool:
        """Whether ``fn_node`` is a generator function's ``def`` (once per node)."""
        found = self._generators.get(id(fn_node))
        if found is None:
            found = self._generators[id(fn_node)] = _is_generator(fn_node, self.positions)
        return found

    def first_yield(self, fn: UserFunction, args: list, kwargs: dict, node) -> Any:
        """The first value the generator function ``fn`` yields (None if it yields none or
        it cannot be told)."""
        if not isinstance(fn, UserFunction) or not self._generator(fn.node):
            return None
        saved = self._capture_depth
        self._capture_depth = self.depth + 1  # the depth its body runs at
        try:
            self._inline(fn, args, kwargs, node)
        except _Yielded as got:
            return got.value
        finally:
            self._capture_depth = saved
        return None

    def eval_Yield(self, node):
        value = node.value
        if isinstance(value, cst.From):
            return Unknown("yield from is not evaluated")
        result = self.eval(value) if value is not None else None
        if self._capture_depth == self.depth:
            raise _Yielded(result)
        return Unknown("the value sent to a generator")

    def _inline(self, fn: UserFunction, args: list, kwargs: dict, node) -> Any:
        loc = self.location(node)
        if self.depth >= MAX_CALL_DEPTH:
            self.state.note_budget(loc, f"call of '{fn.name}' not evaluated: more than "
                                        f"{MAX_CALL_DEPTH} nested calls")
            return Unknown(f"result of '{fn.name}' (calls nested too deeply)")
        local = self.bind_arguments(fn, args, kwargs)
        if local is None:
            self.state.note_unresolved(loc, f"call of '{fn.name}'",
                                       "its arguments do not match the definition")
            return Unknown(f"result of '{fn.name}' (arguments do not match)")
        self.state.definitions[:] = [d for d in self.state.definitions
                                     if not (d[0] == "function" and d[1] == fn.name)]
        saved = (self.scope, self.outer, self.global_names, self.globals, self.anchor,
                 self.skips)
        self.skips = self.slicer.function_skips(fn, local)
        self.scope, self.outer, self.global_names = local, fn.closure, set()
        if fn.module_globals is not None:
            self.globals = fn.module_globals
        foreign = self.anchor is None and fn.node not in self.positions
        if foreign:  # a function of an imported project module, called from this file
            self.anchor = loc
            self.state.quiet += 1
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        self.jits.append(fn.jit)
        try:
            body = fn.node.body
            if isinstance(fn.node, cst.Lambda):  # ``lambda x: expr``: the value of expr
                raise _Return(self.eval(body))
            if isinstance(body, cst.SimpleStatementSuite):
                for small in body.body:
                    self.exec_small(small)
            else:
                self.exec_block(body.body)
            result = None
        except _Return as ret:
            result = ret.value
        except _LoopControl:
            result = Unknown(f"result of '{fn.name}'")
        finally:
            (self.scope, self.outer, self.global_names, self.globals, self.anchor,
             self.skips) = saved
            if foreign:
                self.state.quiet -= 1
            self.depth -= 1
            self.jits.pop()
        return result

    def bind_arguments(self, fn: UserFunction, args: list, kwargs: dict):
        """The local scope of a call: parameters bound as Python binds them (None if invalid)."""
        params = fn.node.params
        local: dict = {}
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        args = list(args)
        kwargs = dict(kwargs)
        for name in positional:
            if args:
                local[name] = args.pop(0)
            elif name in kwargs:
                local[name] = kwargs.pop(name)
            elif name in fn.defaults:
                local[name] = fn.defaults[name]
            else:
                return None
        star = params.star_arg
        if isinstance(star, cst.Param):
            local[star.name.value] = tuple(args)
        elif args:
            return None
        for param in params.kwonly_params:
            name = param.name.value
            if name in kwargs:
                local[name] = kwargs.pop(name)
            elif name in fn.defaults:
                local[name] = fn.defaults[name]
            else:
                return None
        if params.star_kwarg is not None:
            local[params.star_kwarg.name.value] = kwargs
        elif kwargs:
            return None
        return local

    def set_name(self, name: str, value: Any) -> None:
        if name in self.global_names:
            self.globals[name] = value
        else:
            self.scope[name] = value

    def delete(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            scope = self.globals if target.value in self.global_names else self.scope
            scope.pop(target.value, None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.delete(el.value)

    def assign(self, target: cst.CSTNode, value: Any) -> None:
        if isinstance(target, cst.Name):
            if is_unknown(value) and target.value in self.state.given_values:
                value = self._given(target)  # --dim NAME=SIZE
            self.set_name(target.value, value)
            module_level = self.scope is self.globals or target.value in self.global_names
            self.state.bind_variable(target.value, value, module_level)
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [el.value for el in target.elements]
            starred = [i for i, el in enumerate(target.elements)
                       if isinstance(el, cst.StarredElement)]
            if isinstance(value, (tuple, list)) and len(starred) == 1 \
                    and len(value) >= len(names) - 1:
                # ``first, *rest = items``: the starred name takes a list of what is left
                i, after = starred[0], len(names) - starred[0] - 1
                value = [*value[:i], list(value[i:len(value) - after]),
                         *value[len(value) - after:]]
            if isinstance(value, (tuple, list)) and len(value) == len(names) \
                    and len(starred) <= 1:
                for sub, item in zip(names, value):
                    self.assign(sub, item)
            elif isinstance(value, Tensor) and value.shape is None and not starred:
                # ``out, h, c = LSTM(..., return_state=True)(x)`` on a tensor of a shape not
                # known: the layer's outputs, of shapes not known for the same reason
                producer = value.producer
                for index, sub in enumerate(names):
                    self.assign(sub, Tensor(None, producer and (*producer[:2], index),
                                            reason=value.reason))
            else:
                for sub in names:
                    self.assign(sub, Unknown("unpacking of a value that is not known statically"))
        elif isinstance(target, cst.Subscript):
            container = self.eval(target.value)
            if isinstance(container, (Ref, devices.LayoutMap)) and len(target.slice) == 1 \
                    and isinstance(target.slice[0].slice, cst.Index):
                key = self.eval(target.slice[0].slice.value)
                if isinstance(container, Ref) and container.name == "os.environ":
                    devices.set_env(self.state, key, value, self.location(target))
                elif isinstance(container, devices.LayoutMap):
                    devices.set_item(container, key, value)
            elif isinstance(container, (list, dict)) and len(target.slice) == 1:
                index = target.slice[0].slice
                if isinstance(index, cst.Index):
                    key = self.eval(index.value)
                    try:
                        container[key] = value
                    except (TypeError, IndexError, KeyError):
                        pass
        elif isinstance(target, cst.Attribute):
            calls.set_attribute(self.eval(target.value), target.attr.value, value,
                                self.location(target))

def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""

