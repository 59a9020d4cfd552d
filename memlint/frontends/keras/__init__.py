"""The Keras source frontend: static analysis of model scripts with libcst.

Nothing in the analysed file is imported or executed.  :func:`analyze_source` parses the
text, interprets it abstractly, and returns the models it builds with their training setup,
plus diagnostics for what could not be resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.models import to_graph
from memlint.frontends.keras.setup import training_setup
from memlint.frontends.keras.state import FileState
from memlint.ir import Location


@dataclass
class FrontendResult:
    """Models found in one file and the diagnostics the analysis itself raised."""

    models: list = field(default_factory=list)  # list[ModelGraph]
    diagnostics: list = field(default_factory=list)
    module: Optional[cst.Module] = None  # the parsed file, for source-level rules
    definitions: list = field(default_factory=list)  # (kind, name, Location) not evaluated


def analyze_source(source: str, path: str, *, input_shape: Optional[tuple] = None,
                   ) -> FrontendResult:
    """Analyse Keras model source text; ``input_shape`` (batch first) overrides the code's."""
    state = FileState(path)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line = getattr(exc, "raw_line", 1) or 1
        column = (getattr(exc, "raw_column", 0) or 0) + 1
        state.syntax_error(Location(path, line, column),
                           f"cannot parse this file: {exc.message}")
        return FrontendResult(diagnostics=state.diagnostics)
    Interpreter(module, state).run()
    models = []
    for model in state.models:
        graph = to_graph(state, model, input_override=input_shape)
        fixed = None
        if graph.input_shapes:
            first = graph.input_shapes[0]
            if first and isinstance(first[0], int) and not isinstance(first[0], bool):
                fixed = first[0]
        graph.setup = training_setup(model, state, fixed_batch=fixed)
        graph.unresolved = [u for u in state.unresolved]
        models.append(graph)
    return FrontendResult(models=models, diagnostics=state.diagnostics, module=module,
                          definitions=state.definitions)
