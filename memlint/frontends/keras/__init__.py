"""The Keras source frontend: static analysis of model scripts with libcst.

Nothing in the analysed file is imported or executed.  :func:`analyze_source` parses the
text, interprets it abstractly, and returns the models it builds with their training setup,
plus diagnostics for what could not be resolved.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import threading
from contextlib import contextmanager
from dataclasses import field
from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras.classes import UserClass
from memlint.frontends.keras.compiled import as_compiled
from memlint.frontends.keras.held import is_reported, mark_parts, name_held_models
from memlint.frontends.keras.entry import (EntryError, factories, needs_arguments,
                                           parse_entry, signature)
from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras import training_loops
from memlint.frontends.keras.plain_objects import PlainClass
from memlint.frontends.keras.graphs import aligned_data_shapes, sized_graph, to_graph
from memlint.frontends.keras.setup import apply_strategy, training_setup
from memlint.frontends.keras.source_limits import MAX_TOKENS, measure
from memlint.frontends.keras.state import FileState
from memlint.ir import Location
from memlint.layers.base import UnresolvedArgument
from memlint.records import record


@record
class FrontendResult:
    """Models found in one file and the diagnostics the analysis itself raised."""

    models: list = field(default_factory=list)  # list[ModelGraph]
    diagnostics: list = field(default_factory=list)
    module: Optional[cst.Module] = None  # the parsed file, for source-level rules
    positions: Any = None  # node -> CodeRange for ``module``, shared with the rules
    definitions: list = field(default_factory=list)  # (kind, name, Location) not evaluated
    internal_errors: list = field(default_factory=list)  # memlint's own bugs, one line each
    # model factories of a file that builds nothing at module level: (name, needs arguments)
    entries: list = field(default_factory=list)
    memory_caps: list = field(default_factory=list)  # list[MemoryCap]: what the code sets
    # deterministic work units the analysis spent, each held under its bound (see
    # :func:`work_bounds`): tokens, parsed, steps, allocated, call_depth, loop_iterations,
    # modules, module_tokens, module_chars
    work: dict = field(default_factory=dict)
    # what the result depends on besides the file (for the result cache, memlint/cache.py):
    # "files": the project module files read; "lookups": the module lookups made, as
    # ("find", dotted name, search roots) and ("module", root, parts)
    dependencies: dict = field(default_factory=dict)


_RECURSION_LIMIT = 4_000  # libcst and the interpreter recurse a few frames per nesting level

_limit_lock = threading.Lock()
_limit_users = 0
_saved_limit = 0


@contextmanager
def _recursion_room():
    """Raise Python's recursion limit while analysing (restored when the last analysis ends)."""
    global _limit_users, _saved_limit
    with _limit_lock:
        if _limit_users == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, _RECURSION_LIMIT))
        _limit_users += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                sys.setrecursionlimit(_saved_limit)


def _nesting_problem(source: str) -> Optional[str]:
    """Why the file is too large or too deeply nested to analyse, or None
    (:mod:`.source_limits`)."""
    return measure(source)[0]


def analyze_source(source: str, path: str, *, input_shape: Optional[tuple] = None,
                   roots: tuple = (), entry: Optional[str] = None,
                   inputs: Optional[dict] = None,
                   values: Optional[dict] = None) -> FrontendResult:
    """Analyse Keras model source text; ``input_shape`` (batch first) overrides the code's;
    ``inputs`` (an Input's name -> shape without the batch) sizes what named Inputs leave
    open; ``values`` (a name -> int, ``--dim``) is what a name the code assigns takes where
    its value is not known statically (a vocabulary read from a file).

    ``roots``: extra folders where absolute imports of the user's own modules are looked up
    (the file's folder and the package roots above it always are).  ``entry``: ``NAME`` or
    ``NAME(literal arguments)``, a function or class of the file that builds the model, run
    after the module (see :mod:`.entry`).

    Never raises on bad input: syntax errors, unknown names, unbounded loops and the like
    come back as diagnostics, with whatever models could be found."""
    state = FileState(path, input_shape_hint=input_shape, named_inputs=dict(inputs or {}),
                      given_values=dict(values or {}))
    problem, tokens = measure(source)
    work = {"tokens": tokens, "parsed": 0}
    if problem is not None:
        state.note_budget(Location(path, 1, 1), problem)
        return _with_work(FrontendResult(diagnostics=state.diagnostics), work, state)
    with _recursion_room():
        try:
            result = _analyze(source, path, state, input_shape, roots, entry, work)
        except (RecursionError, MemoryError) as exc:
            reason = "nesting too deep" if isinstance(exc, RecursionError) else "out of memory"
            state.note_budget(Location(path, 1, 1), f"analysis stopped ({reason})")
            result = FrontendResult(diagnostics=state.diagnostics)
        except Exception as exc:  # a bug in memlint: report it, exit 2, never a traceback
            state.note_internal(Location(path, 1, 1), "the file", exc)
            result = FrontendResult(diagnostics=state.diagnostics,
                                    internal_errors=state.internal_errors)
    return _with_work(result, work, state)


def work_bounds() -> dict:
    """The bound on each of :attr:`FrontendResult.work`'s units (what tests assert)."""
    from memlint.frontends.keras import imports
    from memlint.frontends.keras.expressions import MAX_LOOP_ITERATIONS
    from memlint.frontends.keras.interpreter import MAX_CALL_DEPTH, MAX_STEPS
    from memlint.frontends.keras.state import MAX_ALLOCATED

    return {"tokens": MAX_TOKENS, "parsed": 1, "steps": MAX_STEPS, "allocated": MAX_ALLOCATED,
            "call_depth": MAX_CALL_DEPTH, "loop_iterations": MAX_LOOP_ITERATIONS,
            "modules": imports.MAX_MODULES, "module_tokens": imports.MAX_TOTAL_TOKENS,
            "module_chars": imports.MAX_TOTAL_CHARS}


def _with_work(result: FrontendResult, work: dict, state: FileState) -> FrontendResult:
    """Fill in the work units (zero for the stages that did not run)."""
    interp = work.pop("interpreter", None)
    project = getattr(interp, "project", None)
    work.update(
        steps=getattr(interp, "steps", 0), allocated=state.created,
        call_depth=getattr(interp, "deepest", 0),
        loop_iterations=getattr(interp, "longest_loop", 0),
        modules=getattr(project, "loaded", 0), module_tokens=getattr(project, "tokens", 0),
        module_chars=getattr(project, "chars", 0))
    result.work = work
    result.dependencies = {"files": sorted(set(state.read_files)),
                           "lookups": list(dict.fromkeys(state.module_lookups))}
    return result


def _record_project_use(project, state: FileState) -> None:
    """Note each project module file the analysis reads (``state.read_files``) and each
    lookup of a project module (``state.module_lookups``): the result cache checks that the
    files are unchanged and that the lookups still find the same files."""
    parse, find, module_at = project._parse, project.find_absolute, project.module_at
    roots = tuple(str(root) for root in project.roots)

    def parsing(file):
        state.read_files.append(str(file))
        return parse(file)

    def finding(dotted):
        state.module_lookups.append(("find", dotted, roots))
        return find(dotted)

    def loading(interp, root, parts, anchor):
        state.module_lookups.append(("module", str(root), tuple(parts)))
        return module_at(interp, root, parts, anchor)

    project._parse, project.find_absolute, project.module_at = parsing, finding, loading


def _analyze(source: str, path: str, state: FileState, input_shape, roots=(),
             entry=None, work=None) -> FrontendResult:
    work = {} if work is None else work
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line, column = _syntax_error_position(source, exc)
        state.syntax_error(Location(path, line, column),
                           f"cannot parse this file: {exc.message}"
                           + _python2_hint(source, line))
        return FrontendResult(diagnostics=state.diagnostics)
    work["parsed"] = 1
    interpreter = Interpreter(module, state, roots, slicing=True)
    interpreter.autograd = training_loops.runs_autograd(source, module)
    if entry is not None:
        # --entry calls the file's function as code that imports the file would: the
        # module runs under its own name, and its `if __name__ == "__main__":` block does not
        interpreter.globals["__name__"] = os.path.splitext(os.path.basename(path))[0]
    work["interpreter"] = interpreter  # its counters, read when the analysis ends
    _record_project_use(interpreter.project, state)
    interpreter.run()
    roots = dict(interpreter.globals)
    if entry is not None:
        entry_name = _run_entry(interpreter, state, entry)
        held_object = getattr(interpreter, "entry_result", None)
        if entry_name is not None and held_object is not None:
            roots = {entry_name: held_object,
                     **{k: v for k, v in roots.items() if k != entry_name}}
    _build_imported(state)
    name_held_models(state.models, roots)  # ``gan.discriminator``: models on plain objects
    models, reported = [], []
    for model in state.models:
        if not is_reported(model):  # a part of another model (held.py)
            continue
        with as_compiled(model):  # its trainable split as its train step has it
            models.append(_model_graph(state, model, input_shape))
        reported.append(model)
    mark_parts(reported, models)
    for name in state.named_inputs:
        if name not in state.named_inputs_used:
            state.note_unresolved(Location(path, 1, 1), f"--input {name}",
                                  f"no keras.Input of this file is named {name!r}; "
                                  "the shape is not used")
    undecided = any(getattr(m, "undecided_branch", None) is not None for m in state.models)
    entries = _note_factories(interpreter, state) \
        if not models and entry is None and not undecided else []
    return FrontendResult(models=models, diagnostics=state.diagnostics, module=module,
                          memory_caps=list(state.memory_caps),
                          positions=interpreter.positions,
                          internal_errors=state.internal_errors,
                          definitions=state.definitions, entries=entries)


def _model_graph(state: FileState, model, input_shape):
    """One reported model as a :class:`~memlint.ir.ModelGraph` with its training setup and
    the graph sized by its data."""
    graph = to_graph(state, model, input_override=input_shape)
    fixed = None
    if graph.input_shapes:
        first = graph.input_shapes[0]
        if first and isinstance(first[0], int) and not isinstance(first[0], bool):
            fixed = first[0]
    graph.setup = training_setup(model, state, fixed_batch=fixed)
    apply_strategy(graph.setup, model, state)
    fed = aligned_data_shapes(model, graph, graph.setup)
    if input_shape is not None:
        # --input-shape sizes what the model leaves open, as data would (a Sequential
        # takes it as its input outright)
        fed = [tuple(input_shape[1:])]
    try:
        graph.sized = sized_graph(model, graph, fed)
    except UnresolvedArgument as exc:
        given = "--input-shape" if input_shape is not None else "the data"
        graph.unsized_because = f"the sizes {given} gives are not carried through: " \
                                f"{exc.reason}"
        state.note_unresolved(model.location, f"model '{graph.name}' on the sizes {given} "
                              "gives", exc.reason)
    if input_shape is not None and graph.sized is not None:
        fed_by = graph.setup.data_source  # the sizes are --input-shape's, not the data's
        graph.setup.data_source = "from --input-shape" + (f"; the data: {fed_by}"
                                                           if fed_by else "")
    graph.unresolved = [u for u in state.unresolved]
    return graph


def _build_imported(state: FileState) -> None:
    """Sequential models of imported modules (used as layers here): their weights, built as
    this file's own Sequentials are, with no notes about the imported code."""
    from memlint.frontends.keras.classes import _build_sequential
    if not state.imported_models:
        return
    mark = len(state.unresolved)
    state.quiet += 1
    try:
        for model in state.imported_models:
            _build_sequential(state, model)
    finally:
        state.quiet -= 1
        del state.unresolved[mark:]


def _run_entry(interpreter: Interpreter, state: FileState, entry: str) -> Optional[str]:
    """Run ``--entry``; the name it calls (None when the text is not an entry)."""
    try:
        name, args, kwargs = parse_entry(entry)
    except EntryError as exc:
        state.note_unresolved(Location(state.path, 1, 1), "--entry", str(exc))
        return None
    if not interpreter.run_entry(name, args, kwargs):
        found = _factory_list(interpreter)
        hint = f"; model factories in this file: {', '.join(found)}" if found else ""
        state.note_unresolved(Location(state.path, 1, 1), f"--entry {name}",
                              f"no function or class '{name}' is defined in this file{hint}")
    return name


def _factory_list(interpreter: Interpreter) -> list:
    return [signature(node) for _, _, node in _factories(interpreter)]


def _factories(interpreter: Interpreter) -> list:
    """The file's model factories: functions, Model subclasses and plain classes."""
    model_classes = {k for k, v in interpreter.globals.items()
                     if isinstance(v, UserClass) and v.kind == "model"}
    plain = frozenset(k for k, v in interpreter.globals.items() if isinstance(v, PlainClass))
    return factories(interpreter.module, model_classes, plain, interpreter.positions)


def _note_factories(interpreter: Interpreter, state: FileState) -> list:
    """A file that builds no model but defines functions / classes that build one: say so.
    Returns the factories as ``(name, needs arguments)``."""
    found = [f for f in _factories(interpreter) if f[1] not in state.tuned_factories]
    if not found:
        return []
    names = ", ".join(signature(node) for _, _, node in found)
    first = found[0][1]
    example = f"--entry {first}" if not needs_arguments(found[0][2]) else \
        f"--entry '{first}(...)' with literal arguments"
    state.note_unresolved(
        interpreter.location(found[0][2]), "no model built at module level",
        f"this file defines model factories it never calls: {names}; analyse one with "
        f"{example}")
    return [(name, needs_arguments(node)) for _, name, node in found]


# Python 2 statements that Python 3 cannot parse, as old Keras scripts write them
_PYTHON2 = (
    (re.compile(r"^\s*print(\s*>>|\s+[^\s(=.,)\]}:;+*/%&|^<>!-])"), "a print statement"),
    (re.compile(r"^\s*except\s+[\w.]+\s*,\s*\w+\s*:"), "an 'except Error, name:' clause"),
    (re.compile(r"^\s*exec\s+[\"']"), "an exec statement"),
    (re.compile(r"^\s*raise\s+[\w.]+\s*,"), "a 'raise Error, message' statement"),
)


def _python2_hint(source: str, line: int) -> str:
    """Where the line memlint cannot parse is Python 2 (``print "done"``), say so: memlint
    reads Python 3 source."""
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    for pattern, what in _PYTHON2:
        if pattern.search(text):
            return (f" (line {line} is Python 2, {what}: memlint reads Python 3 source; "
                    "convert the file first, e.g. with 2to3)")
    return ""


def _syntax_error_position(source: str, exc: cst.ParserSyntaxError) -> tuple:
    """(line, column) of a syntax error.  libcst reports the token after the error (or line 1
    for tokenizer errors); Python's own parser (parsing only, nothing runs) is exact."""
    try:
        ast.parse(source)
    except SyntaxError as err:
        if err.lineno:
            return err.lineno, max(err.offset or 1, 1)
    except (ValueError, MemoryError, RecursionError):
        pass
    return (getattr(exc, "raw_line", 1) or 1), (getattr(exc, "raw_column", 0) or 0) + 1
