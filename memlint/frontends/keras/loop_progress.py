"""``while`` loops that make no progress as memlint evaluates them: stopped at once.

A data loop such as ``while len(questions) < 50000: ... if key in seen: continue ...`` decides
its branches on random values memlint does not know; it follows the first branch of each
(``continue``), so the loop never changes anything and would spin until the step budget ran
out, ending the analysis before the model it feeds is built.  Here the loop is stopped as
soon as one iteration ends where the previous one began: the same values in every scope
(locals, enclosing functions, module globals, compared by what memlint knows of them, within
a bounded amount of inspection) and the same analysis state.  Evaluation is deterministic,
so every further iteration would do the same.

What the loop binds, stores into, or calls methods of (containers, plain objects), then
becomes unknown (the real program went on changing it), a MEM903 note says where, and the
analysis goes on after the loop.  Only the first ``CHECKED`` iterations are compared: a loop that changes
something in each of them is making progress.
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras.plain_objects import PlainObject
from memlint.frontends.keras.values import Array, Ref, UserFunction
from memlint.layers.base import Unknown

CHECKED = 8  # iterations whose start is compared with the previous one
_INSPECTED = 5_000  # values looked at per snapshot; a larger state is never judged stalled
_TOO_LARGE = object()


class ProgressWatch:
    """Snapshots of a ``while`` loop's state at the start of its first iterations."""

    def __init__(self, interp):
        self.interp = interp
        self._previous: Optional[tuple] = None

    def stalled(self, count: int) -> bool:
        """At the start of iteration ``count``: whether the previous iteration changed
        nothing memlint knows (so no iteration ever will)."""
        if count > CHECKED + 1:
            return False
        snapshot = self._snapshot()
        stalled = snapshot is not None and snapshot == self._previous
        self._previous = snapshot
        return stalled

    def _snapshot(self) -> Optional[tuple]:
        interp, state = self.interp, self.interp.state
        budget = [_INSPECTED]
        scopes = [interp.scope, *interp.outer, interp.globals]
        seen: set = set()
        parts = []
        for scope in scopes:
            if id(scope) in seen:
                continue
            seen.add(id(scope))
            parts.append(_key(scope, budget, 0))
        usage = sum(len(records) for model in [*state.models, *state.imported_models]
                    for records in getattr(model, "usage", {}).values())
        parts.append((len(state.models), sum(state._name_counts.values()),
                      len(state.diagnostics), len(state.memory_caps), usage))
        snapshot = tuple(parts)
        return None if budget[0] < 0 else snapshot


def _key(value: Any, budget: list, depth: int) -> Any:
    """What memlint knows of ``value``, as a comparable value (containers and plain objects
    by content, other objects by identity and their plain attributes)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 12:
        budget[0] = -1
        return _TOO_LARGE
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, range)):
        return (type(value).__name__, value)
    if isinstance(value, Array):
        return ("array", value.shape, value.dtype)
    if isinstance(value, Ref):
        return ("ref", value.name)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, len(value),
                tuple(_key(item, budget, depth + 1) for item in value))
    if isinstance(value, dict):
        return ("dict", len(value), tuple((_key(k, budget, depth + 1), _key(v, budget, depth + 1))
                                          for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, len(value),
                tuple(sorted(repr(_key(item, budget, depth + 1)) for item in value)))
    if isinstance(value, Unknown):
        return ("unknown", value.reason, _key(dict(vars(value)), budget, depth + 1))
    if isinstance(value, UserFunction):  # a def or lambda run again: the same function
        return ("function", id(value.node), tuple(map(id, value.closure)))
    if isinstance(value, PlainObject):
        return ("object", id(value), _key(value.attrs, budget, depth + 1))
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):  # models, layers, tensors...: their plain attributes
        budget[0] -= len(attributes)
        return ("other", id(value), tuple(
            (name, _shallow(item)) for name, item in attributes.items()))
    return ("other", id(value))


def _shallow(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, dict, set)):
        return (type(value).__name__, len(value))
    return id(value)


def forget_after_stop(interp, summary, reason: str) -> list:
    """After a loop stopped early, what the rest of it would have changed becomes
    ``Unknown(reason)`` in the scope that holds it: the names it binds, the roots of its
    attribute and element stores, and the containers and plain objects whose methods it
    calls (``questions.append``).  Returns the names, sorted."""
    names = set(summary.bound) | set(summary.mutated) | set(summary.stored)
    for call in summary.calls:
        scope = _scope_of(interp, call.root) if call.root else None
        if scope is not None and call.kind in ("chain", "method") and isinstance(
                scope[call.root], (list, dict, set, PlainObject, Unknown)):
            names.add(call.root)
    forgotten = []
    for name in sorted(names):
        scope = _scope_of(interp, name)
        if scope is not None:
            scope[name] = Unknown(reason)
            forgotten.append(name)
    return forgotten


def _scope_of(interp, name: str) -> Optional[dict]:
    for scope in (interp.scope, *interp.outer, interp.globals):
        if name in scope:
            return scope
    return None
