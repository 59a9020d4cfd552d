"""What the Keras frontend learns about one file while interpreting it."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import field
from typing import Any, Iterator, Optional

from memlint.diagnostics import Diagnostic
from memlint.ir import Location, Unresolved
from memlint.layers.base import Context
from memlint.records import record

# Codes of the diagnostics the analysis itself produces (documented in rules/MEM9xx.yaml).
UNRESOLVED = ("MEM900", "unresolved-value", "info")
INVALID_LAYER = ("MEM901", "invalid-layer", "error")
SYNTAX_ERROR = ("MEM902", "syntax-error", "error")
ANALYSIS_LIMIT = ("MEM903", "analysis-limit", "info")

# Elements (list items, characters) that bulk operations of the analysed code may create in
# one file: ``[0] * n``, ``s + s``, ``list(range(n))``, ``sep.join(...)``.  Everything else
# the interpreter builds costs at least one step of its step budget.
MAX_ALLOCATED = 5_000_000
MAX_SEQUENCE = 100_000  # larger lists/strings from one operation are treated as unknown


@record
class FileState:
    """Accumulates models, settings and notes for one analysed file."""

    path: str
    context: Context = field(default_factory=Context)
    dtype_policy: str = "float32"
    dtype_source: str = "default"
    models: list = field(default_factory=list)  # SequentialModel | FunctionalModel, in order
    diagnostics: list = field(default_factory=list)
    internal_errors: list = field(default_factory=list)  # one line each: memlint's own bugs
    unresolved: list = field(default_factory=list)  # list[Unresolved], for the models' reports
    definitions: list = field(default_factory=list)  # (kind, name, Location) of defs skipped
    _name_counts: dict = field(default_factory=dict)
    _seen_notes: set = field(default_factory=set)
    # > 0 while code of an imported project module runs: its notes are not this file's
    # (errors Keras would raise building this file's model are kept, at the call site)
    quiet: int = 0
    # models built at module level of imported project modules: not reported, but built
    # (their weights) when used as layers of this file's models
    imported_models: list = field(default_factory=list)
    allocated: int = 0  # elements created by bulk operations so far (see MAX_ALLOCATED)
    created: int = 0  # of those, the elements of operations granted (the work actually done)
    # project module files read and module lookups made (for the result cache, cache.py)
    read_files: list = field(default_factory=list)
    module_lookups: list = field(default_factory=list)
    # --input-shape (batch first): the shape of an Input whose own shape is not known
    input_shape_hint: Optional[tuple] = None
    # --input NAME=SHAPE: the sizes of the named Inputs' open dimensions (no batch), and
    # the names an Input of the file has taken
    named_inputs: dict = field(default_factory=dict)
    named_inputs_used: set = field(default_factory=set)
    # --dim NAME=SIZE: the value a name the code assigns takes where the code's is not known
    # statically, and each use, as "vocab_size = 20000 (line 15)"
    given_values: dict = field(default_factory=dict)
    given_used: list = field(default_factory=list)
    memory_caps: list = field(default_factory=list)  # list[MemoryCap] the code sets
    # environment variables the code sets (os.environ[key] = value, setdefault, update)
    environment: dict = field(default_factory=dict)
    # functions of the file handed to a Keras Tuner tuner (built by it, not by the file)
    tuned_factories: set = field(default_factory=set)
    # optimizers whose apply_gradients() the code calls (a custom training loop), with where
    applied_optimizers: list = field(default_factory=list)
    applied_values: list = field(default_factory=list)  # what they apply gradients to
    # keras.distribution.set_distribution(...): (strategy, number of models made before it)
    distribution: Optional[tuple] = None
    # places inside traced code that may have called a layer memlint did not see (a loop
    # skipped whose body calls more than assign() or builtins, a value not known called on
    # a tensor): a layer class's sub-layer nothing was seen to call may have run there
    hidden_calls: int = 0

    def allocate(self, count: int) -> bool:
        """Account for a bulk operation creating ``count`` elements; False when over budget."""
        self.allocated += max(count, 0)
        if self.allocated > MAX_ALLOCATED:
            return False
        self.created += max(count, 0)
        return True

    def unique_name(self, stem: str) -> str:
        """Keras's automatic naming: ``dense``, ``dense_1``, ``dense_2`` ... per file."""
        count = self._name_counts.get(stem, 0)
        self._name_counts[stem] = count + 1
        return stem if count == 0 else f"{stem}_{count}"

    def bind_variable(self, name: str, value: Any, module_level: bool = True) -> None:
        """Remember the first module-level variable a model is assigned to (for reports and
        oracles); a name inside a function is kept only until a module-level one comes."""
        if not any(value is model for model in self.models):
            return
        if module_level and not getattr(value, "variable_is_global", False):
            value.variable = name
            value.variable_is_global = True
        elif getattr(value, "variable", None) is None:
            value.variable = name

    def _diagnostic(self, spec: tuple, location: Location, message: str,
                    detail: str = "") -> None:
        code, name, severity = spec
        if self.quiet and spec != INVALID_LAYER:
            return
        key = (code, location.line, location.column, message)
        if key in self._seen_notes:
            return  # the same note from a loop body is reported once
        self._seen_notes.add(key)
        self.diagnostics.append(Diagnostic(
            code=code, name=name, severity=severity, message=message + detail, path=self.path,
            line=location.line, column=location.column,
            end_line=location.end_line, end_column=location.end_column))

    @contextmanager
    def unreported(self) -> Iterator[None]:
        """Code evaluated for memlint's own use (a function Keras never traces, a skipped
        loop's call evaluated after it): nothing it notes is reported."""
        marks = (len(self.diagnostics), len(self.unresolved))
        self.quiet += 1
        try:
            yield
        finally:
            self.quiet -= 1
            del self.diagnostics[marks[0]:], self.unresolved[marks[1]:]

    def note_unresolved(self, location: Location, what: str, reason: str,
                        detail: str = "") -> None:
        """Something could not be determined; the analysis goes on without it.  ``detail``
        ends the message but not what makes it the same note again (a loop skipped on
        every call of its function names the values it made unknown the first time only)."""
        self.unresolved.append(Unresolved(what, reason + detail, location))
        self._diagnostic(UNRESOLVED, location, f"{what}: {reason}", detail)

    def note_info(self, location: Location, message: str) -> None:
        """Something the reader should know about how the file was analysed (MEM900, info);
        nothing is missing from the models because of it."""
        self._diagnostic(UNRESOLVED, location, message)

    def note_error(self, location: Location, message: str) -> None:
        """Keras would reject this at build time."""
        self._diagnostic(INVALID_LAYER, location, message)

    def note_budget(self, location: Location, message: str) -> None:
        """The analysis hit one of its bounds."""
        self._diagnostic(ANALYSIS_LIMIT, location, message)

    def note_internal(self, location: Location, what: str, exc: BaseException) -> None:
        """A bug in memlint: the analysis goes on around it, and the run exits with code 2."""
        self.internal_errors.append(
            f"{location.path}:{location.line}: internal error while analysing {what}: "
            f"{type(exc).__name__}: {exc}")

    def syntax_error(self, location: Location, message: str) -> None:
        self._diagnostic(SYNTAX_ERROR, location, message)

    def optional_location(self, value: Any) -> Optional[Location]:
        return getattr(value, "location", None)
