"""The one diagnostic type that every rule produces and every reporter prints."""

from __future__ import annotations

from dataclasses import field
from typing import Optional

from memlint.records import record

SEVERITIES = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    """0 for info, 1 for warning, 2 for error (higher is worse)."""
    return SEVERITIES.index(severity)


@record
class Diagnostic:
    """One finding: a rule code, a severity, a message and where it applies."""

    code: str  # MEM001
    name: str  # over-budget-parameters
    severity: str  # info, warning, error
    message: str
    path: str
    line: int = 1
    column: int = 1
    end_line: Optional[int] = None
    end_column: Optional[int] = None
    model: Optional[str] = None  # the model it concerns, if any
    data: dict = field(default_factory=dict)  # machine-readable figures behind the message
    node: Optional[str] = None  # the graph node it concerns, for files without source lines

    @property
    def where(self) -> str:
        """``path:line:column``, or ``path: node NAME`` for a graph node."""
        if self.node is not None:
            return f"{self.path}: node {self.node}"
        return f"{self.path}:{self.line}:{self.column}"

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line if self.end_line is not None else self.line,
            "end_column": self.end_column if self.end_column is not None else self.column,
            **({"node": self.node} if self.node is not None else {}),
        }
