"""What a rule is given and how it reports."""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar, Iterable, Optional

from memlint.budget import Budget
from memlint.catalog import rule_info
from memlint.diagnostics import Diagnostic
from memlint.ir import Location
from memlint.records import record


@record
class RuleContext:
    """Everything a rule may look at for one file.

    ``models`` and ``breakdowns`` are parallel lists (one memory breakdown per model).
    ``budget`` is None when no GPU was configured; rules that need one then stay silent.
    ``module`` is the parsed libcst module for source-level rules (None for ONNX input).
    """

    path: str
    models: list
    breakdowns: list
    budget: Optional[Budget]
    options: dict  # this rule's options (defaults from its YAML, overridden by config)
    module: Any = None
    positions: Any = None  # libcst node -> CodeRange for ``module`` (computed by the frontend)
    source: str = ""
    diagnostics: list = field(default_factory=list)


class Rule:
    """Base class of every rule.  Subclasses set ``code`` and implement :meth:`check`."""

    code: ClassVar[str] = ""

    @property
    def info(self) -> dict:
        return rule_info(self.code)

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        raise NotImplementedError

    def diagnostic(self, ctx: RuleContext, location: Optional[Location], message: str, *,
                   severity: Optional[str] = None, model: Optional[str] = None,
                   data: Optional[dict] = None) -> Diagnostic:
        """A diagnostic of this rule at ``location`` (line 1 when the location is unknown)."""
        loc = location or Location(ctx.path, 1, 1)
        return Diagnostic(
            code=self.code, name=self.info["name"],
            severity=severity or self.info["severity"], message=message, path=ctx.path,
            line=max(loc.line, 1), column=max(loc.column, 1), end_line=loc.end_line,
            end_column=loc.end_column, model=model, data=data or {}, node=loc.node)


RULES: dict[str, Rule] = {}


def register(cls: type) -> type:
    """Class decorator: register a rule under its code."""
    RULES[cls.code] = cls()
    return cls
