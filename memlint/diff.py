"""Memory against a base revision: each model's estimate at the base and in the work tree.

:func:`compare` pairs the models of two sets of file reports by file and model name (the
same file paths on both sides) and says, per model, whether it is new, removed, changed or
unchanged; :func:`growth_findings` turns growth beyond the thresholds of rule MEM007
(``growth-share`` and ``growth-bytes``) and a model that stopped fitting into diagnostics.
The figures are the memory model's and the verdict's (:func:`memlint.memory.verdict.verdict`),
never recomputed here.
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Optional

from memlint.catalog import default_options, rule_info
from memlint.diagnostics import Diagnostic
from memlint.memory.verdict import DOES_NOT_FIT, FITS, TOO_CLOSE, verdict
from memlint.suppression import is_suppressed, suppressions
from memlint.units import format_bytes, parse_size
from memlint.records import record

CODE = "MEM007"
NEW, REMOVED, CHANGED, UNCHANGED = "new", "removed", "changed", "unchanged"


class DiffOptionError(ValueError):
    """A MEM007 threshold in the configuration is not a number or a size."""


@record(frozen=True)
class ModelState:
    """One model's figures on one side of the diff."""

    peak: int  # bytes; a lower bound when ``lower_bound``
    lower_bound: bool
    params: int
    batch_size: Optional[int]  # None when the batch size is not known
    mode: str
    verdict: Optional[str]  # fits / does_not_fit / too_close / unknown, None without a budget
    largest_batch_size: Optional[int]
    usable: Optional[int]
    total: Optional[int]
    line: Optional[int]  # where the model is built (None for a graph file)
    column: Optional[int]
    end_line: Optional[int] = None
    end_column: Optional[int] = None

    @classmethod
    def of(cls, graph, breakdown, budget) -> "ModelState":
        result = verdict(breakdown, budget)
        loc = graph.location if graph.location and graph.location.node is None else None
        return cls(peak=result.peak, lower_bound=result.lower_bound, params=graph.params,
                   batch_size=breakdown.batch_size if breakdown.batch_known else None,
                   mode=graph.setup.mode, verdict=result.status,
                   largest_batch_size=result.largest_batch_size,
                   usable=budget.usable if budget is not None else None,
                   total=budget.total if budget is not None else None,
                   line=loc.line if loc else None, column=loc.column if loc else None,
                   end_line=loc.end_line if loc else None,
                   end_column=loc.end_column if loc else None)


@record
class ModelChange:
    """One model in the diff: ``base`` is None for a new model, ``head`` for a removed one."""

    path: str
    name: str
    status: str
    base: Optional[ModelState]
    head: Optional[ModelState]

    @property
    def peak_change(self) -> Optional[int]:
        if self.base is None or self.head is None:
            return None
        return self.head.peak - self.base.peak

    @property
    def peak_share(self) -> Optional[float]:
        """The change as a share of the base peak (None when there is no base peak)."""
        change = self.peak_change
        if change is None or not self.base.peak:
            return None
        return change / self.base.peak

    @property
    def stopped_fitting(self) -> bool:
        return bool(self.base and self.head and self.base.verdict == FITS
                    and self.head.verdict in (DOES_NOT_FIT, TOO_CLOSE))

    @property
    def summary(self) -> str:
        """``model 'unet' training peak 5.1 GiB -> 7.8 GiB (+53%) at batch 16; 12 GiB GPU
        (10.5 GiB usable): now does NOT fit``."""
        return describe(self)

    def as_dict(self) -> dict:
        return {"path": self.path, "name": self.name, "status": self.status,
                "line": (self.head or self.base).line,
                "base": asdict(self.base) if self.base else None,
                "head": asdict(self.head) if self.head else None,
                "peak_change": self.peak_change, "peak_change_share": self.peak_share,
                "summary": self.summary}


@record
class MemoryDiff:
    """The models of the checked files at ``base`` (a revision) against the work tree."""

    base: str  # the revision as the user named it
    commit: str
    changes: list = field(default_factory=list)  # list[ModelChange]
    errors: list = field(default_factory=list)  # files the base revision could not analyse

    def with_status(self, *statuses: str) -> list:
        return [c for c in self.changes if c.status in statuses]

    @property
    def title(self) -> str:
        """``main (3f2a1c9e0b)``, or the short commit when the base was named by it."""
        if self.commit.startswith(self.base.lower()):
            return self.commit[:10]
        return f"{self.base} ({self.commit[:10]})"

    def as_dict(self) -> dict:
        return {"base": self.base, "base_commit": self.commit,
                "models": [c.as_dict() for c in self.changes],
                "counts": {s: len(self.with_status(s))
                           for s in (CHANGED, NEW, REMOVED, UNCHANGED)},
                "errors": list(self.errors)}


def states(reports: list) -> dict:
    """(path, model name) -> ModelState for every model of ``reports``."""
    out = {}
    for report in reports:
        for graph, breakdown in zip(report.models, report.breakdowns):
            out.setdefault((report.path, graph.name), ModelState.of(graph, breakdown,
                                                                    report.budget))
    return out


def compare(base_reports: list, head_reports: list, base: str, commit: str,
            errors: list = ()) -> MemoryDiff:
    """Pair the models of the base revision's reports with the work tree's."""
    before, after = states(base_reports), states(head_reports)
    changes = []
    for key, head in after.items():
        old = before.get(key)
        if old is None:
            status = NEW
        else:
            status = UNCHANGED if _same(old, head) else CHANGED
        changes.append(ModelChange(key[0], key[1], status, old, head))
    changes += [ModelChange(key[0], key[1], REMOVED, old, None)
                for key, old in before.items() if key not in after]
    order = {CHANGED: 0, NEW: 1, REMOVED: 2, UNCHANGED: 3}
    changes.sort(key=lambda c: (order[c.status], c.path, c.name))
    return MemoryDiff(base, commit, changes, list(errors))


def _same(a: ModelState, b: ModelState) -> bool:
    keys = ("peak", "lower_bound", "params", "batch_size", "mode", "verdict")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


# ---------------------------------------------------------------------- wording

def signed_percent(share: float) -> str:
    """``+53%``, ``-4.2%``, ``+0.3%``: a change never rounds to a misleading 0%."""
    if 0 < abs(share) < 0.0001:
        return f"{'+' if share > 0 else '-'}<0.01%"
    digits = 0 if abs(share) >= 0.1 else 1 if abs(share) >= 0.001 else 2
    return f"{share:+.{digits}%}"


def _peak(state: ModelState) -> str:
    return ("at least " if state.lower_bound else "") + format_bytes(state.peak)


def _batch(state: Optional[ModelState]) -> str:
    return "?" if state is None or state.batch_size is None else f"{state.batch_size:,}"


_VERDICT = {FITS: "fits", DOES_NOT_FIT: "does NOT fit", TOO_CLOSE: "too close to call",
            "unknown": "verdict unknown"}


def _verdict_change(old: Optional[str], new: Optional[str]) -> str:
    if new is None:
        return ""
    if old == new and new in (FITS, DOES_NOT_FIT, TOO_CLOSE):
        return f"still {_VERDICT[new]}"
    if old in (FITS, DOES_NOT_FIT, TOO_CLOSE) and new in (FITS, DOES_NOT_FIT, TOO_CLOSE):
        return f"now {_VERDICT[new]}"
    return _VERDICT[new]


def describe(change: ModelChange) -> str:
    """One sentence for a model of the diff."""
    base, head = change.base, change.head
    word = {"train": "training", "infer": "inference"}
    if head is None:
        return (f"removed model '{change.name}' (its {word.get(base.mode, base.mode)} peak "
                f"was {_peak(base)} at batch {_batch(base)})")
    what = f"{word.get(head.mode, head.mode)} peak"
    if base is None:
        text = f"new model '{change.name}': {what} {_peak(head)} at batch {_batch(head)}"
    else:
        share = change.peak_share
        delta = "" if share is None or not change.peak_change else \
            f" ({signed_percent(share)})"
        batch = _batch(head) if base.batch_size == head.batch_size else \
            f"{_batch(base)} -> {_batch(head)}"
        mode = "" if base.mode == head.mode else f" (was {word.get(base.mode, base.mode)})"
        text = (f"model '{change.name}' {what}{mode} {_peak(base)} -> {_peak(head)}{delta} "
                f"at batch {batch}")
        if base.params != head.params:
            text += f", {base.params:,} -> {head.params:,} parameters"
    if head.usable is not None:
        judged = _verdict_change(base.verdict if base else None, head.verdict)
        text += f"; {format_bytes(head.total)} GPU ({format_bytes(head.usable)} usable)"
        text += f": {judged}" if judged else ""
    return text


# ---------------------------------------------------------------------- findings

def thresholds(settings) -> tuple:
    """(growth share, growth bytes) of MEM007 for a file's settings."""
    options = settings.rule_options(CODE, default_options(CODE))
    where = f"rules.{CODE}"
    try:
        share = float(options["growth-share"])
    except (TypeError, ValueError):
        raise DiffOptionError(f"{where}.growth-share must be a number such as 0.1, got "
                              f"{options['growth-share']!r}") from None
    raw = options["growth-bytes"]
    try:
        size = parse_size(str(raw), allow_zero=True)
    except ValueError as exc:
        raise DiffOptionError(f"{where}.growth-bytes: {exc}") from None
    if share < 0:
        raise DiffOptionError(f"{where}.growth-share must not be negative, got {share}")
    return share, size


def growth_findings(diff: MemoryDiff, head_reports: list, sources: dict) -> list:
    """MEM007 diagnostics for the models that grew beyond their file's thresholds or
    stopped fitting, added to their file's report (in line order); ``sources`` maps a path
    to its text for ``# noqa`` (files not in it are not checked for suppressions)."""
    by_path = {report.path: report for report in head_reports}
    info = rule_info(CODE)
    found = []
    for change in diff.with_status(CHANGED):
        report = by_path.get(change.path)
        if report is None or not report.settings.enabled(CODE):
            continue
        share, size = thresholds(report.settings)
        grew = change.peak_change is not None and change.peak_change > 0 and \
            not change.base.lower_bound and not change.head.lower_bound and \
            change.peak_change > size and (change.peak_share is None
                                            or change.peak_share > share)
        if not (grew or change.stopped_fitting):
            continue
        too_close = change.stopped_fitting and change.head.verdict == TOO_CLOSE
        why = ("fits no longer with memlint's margin" if too_close else "stopped fitting") \
            if change.stopped_fitting else f"grew more than {share:.0%} and {format_bytes(size)}"
        diag = Diagnostic(
            code=CODE, name=info["name"],
            severity="error" if change.stopped_fitting and not too_close else info["severity"],
            message=f"against {diff.title}, {change.summary} ({why}; thresholds: "
                    f"rules.{CODE} growth-share, growth-bytes)",
            path=change.path, line=max(change.head.line or 1, 1),
            column=max(change.head.column or 1, 1), end_line=change.head.end_line,
            end_column=change.head.end_column, model=change.name,
            data={"base": diff.base, "base_commit": diff.commit,
                  "base_peak": change.base.peak, "peak": change.head.peak,
                  "peak_change": change.peak_change})
        if change.path in sources and is_suppressed(diag, suppressions(sources[change.path])):
            report.suppressed += 1
            continue
        report.diagnostics = sorted([*report.diagnostics, diag], key=Diagnostic.sort_key)
        found.append(diag)
    return found
