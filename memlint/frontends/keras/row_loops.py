"""Loops of unknown length that fill lists row by row: the sliding windows of a time
series (``for i in range(60, len(data)): x.append(data[i - 60:i, 0])``, then
``np.array(x)``), as Kaggle and tutorial scripts cut their training samples.

How many times such a loop runs depends on the data, but what it appends does not: the body
runs once with the loop variable a :class:`~.values.LoopIndex`, slices of two such bounds
have the length their difference fixes (``i - 60:i`` is 60 rows however long the series; a
window a series would cut short leaves NumPy a ragged list it refuses), and each list the
loop appends to becomes :class:`~.values.Rows` of that element: ``np.array`` of it has open
rows.  Only loops over ``range(...)`` whose body assigns names and appends to lists that are
empty before it qualify; anything else a loop of unknown length does is forgotten as before.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from memlint.frontends.keras.loop_progress import value_of
from memlint.frontends.keras.values import Array, LoopIndex, Rows

__all__ = ["fill_rows"]

# calls the body may make besides the appends: builtins on numbers
_PLAIN_CALLS = frozenset({"range", "int", "float", "len", "min", "max", "abs", "round"})


def _simple_body(stmt: cst.For) -> bool:
    return isinstance(stmt.body, cst.IndentedBlock) and all(
        isinstance(line, cst.SimpleStatementLine)
        and all(isinstance(small, (cst.Assign, cst.Expr)) for small in line.body)
        for line in stmt.body.body)


def _row(element) -> bool:
    """An element ``np.array`` stacks into rows: an array or a number (not a value of the
    symbolic index)."""
    return isinstance(element, Array) or (
        isinstance(element, (int, float)) and not isinstance(element, bool))


def fill_rows(interp, stmt: cst.For) -> Optional[dict]:
    """{list name: Rows} for a row-filling loop of unknown length (its body run once on a
    symbolic index), or None when ``stmt`` is not one."""
    func = stmt.iter.func if isinstance(stmt.iter, cst.Call) else None
    if not (isinstance(func, cst.Name) and func.value == "range"
            and isinstance(stmt.target, cst.Name) and stmt.orelse is None
            and _simple_body(stmt)):
        return None
    summary = interp.slicer.scanner.summary(stmt)
    if summary.mutated or summary.stored or summary.attributes or summary.deep:
        return None
    lists: dict = {}
    for call in summary.calls:
        if call.kind == "chain" and call.dotted == "append" and call.root:
            value = value_of(interp, call.root)
            if not isinstance(value, list) or value:
                return None  # only lists the loop fills from empty
            lists[call.root] = value
        elif not (call.kind == "name" and call.root in _PLAIN_CALLS):
            return None
    if not lists:
        return None
    interp.assign(stmt.target, LoopIndex(0))
    interp.exec_block(stmt.body.body)
    rows = {}
    for name, filled in lists.items():
        if len(filled) != 1 or not _row(filled[0]):
            return None
        rows[name] = Rows(filled[0])
    return rows
