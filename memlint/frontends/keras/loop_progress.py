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

A ``for`` loop can reach such a fixed point too (:class:`FixedPointWatch`): a training loop
whose iterations only repeat model calls already recorded, and leave every value memlint knows
as the previous iteration left it, would do the same in every iteration still to come,
provided nothing that runs reads the loop's own variable (which alone changes).  Such a loop
ends there, with its variable bound to the last item, exactly as running it out would leave
it: nothing is lost, so no note is made.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras.plain_objects import PlainObject
from memlint.frontends.keras.slice_scan import Summary, target_names
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
        state = self.interp.state
        usage = sum(len(records) for model in [*state.models, *state.imported_models]
                    for records in getattr(model, "usage", {}).values())
        found = snapshot(self.interp)
        return None if found is None else (*found, usage)


class FixedPointWatch:
    """One run of a ``for`` loop: :meth:`reached` after each iteration says whether the loop
    has reached a fixed point (see the module's docstring)."""

    def __init__(self, interp, stmt: cst.For):
        self.interp = interp
        self.target = _dead_target(interp, stmt)  # None: the body may read it
        self._previous: Optional[tuple] = None
        self._compared = 0

    def reached(self, streak: int) -> bool:
        """``streak``: iterations in a row that only repeated model calls (loop_repeats.py),
        this one included.  True when this iteration also left every value as it found it."""
        if self.target is None or self._compared >= CHECKED or streak < 1:
            self._previous = None
            return False
        # model calls that repeat records already kept change nothing that is read
        # (every use of a model's calls reads the first of each method): not compared
        found = snapshot(self.interp, exclude=self.target)
        same = found is not None and found == self._previous
        if self._previous is not None:
            self._compared += 1
        self._previous = found
        return same


def snapshot(interp, exclude: frozenset = frozenset()) -> Optional[tuple]:
    """What memlint knows of every scope (``exclude``: names left out) and of the analysis's
    state, as a comparable value; None when that is more than ``_INSPECTED`` values."""
    state = interp.state
    budget = [_INSPECTED]
    scopes = [interp.scope, *interp.outer, interp.globals]
    seen: set = set()
    parts = []
    for scope in scopes:
        if id(scope) in seen:
            continue
        seen.add(id(scope))
        kept = {name: value for name, value in scope.items() if name not in exclude} \
            if exclude else scope
        parts.append(_key(kept, budget, 0))
    settings = tuple((name, _shallow(value)) for name, value in vars(state).items()
                     if name not in _WORK_COUNTERS)
    parts.append((settings, tuple(vars(state.context).items()),
                  sum(state._name_counts.values())))
    return None if budget[0] < 0 else tuple(parts)


# what the analysis spent, and notes made again (each distinct note is one more diagnostic)
_WORK_COUNTERS = frozenset({"allocated", "created", "unresolved"})


def _dead_target(interp, stmt: cst.For) -> Optional[frozenset]:
    """The names a ``for`` loop of the analysed file binds, when no statement of its body
    that runs reads them and no function or class of the file does; otherwise None (also
    for a loop of an imported module, whose functions are not the file's)."""
    names = target_names(stmt.target)
    if not names or _stores_elsewhere(stmt.target) or stmt not in interp.positions:
        return None
    scanner = interp.slicer.scanner
    read = _running_reads(scanner, stmt.body.body, interp.skips)
    closure = interp.file_closure
    if closure is None:
        closure = interp.file_closure = set().union(
            *(scanner.summary(s).closure for s in interp.module.body))
    return None if names & (read | closure) else frozenset(names)


def _stores_elsewhere(target) -> bool:
    """Whether a loop target stores into an attribute or element (``for self.i in``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_stores_elsewhere(el.value) for el in target.elements)
    if isinstance(target, cst.StarredElement):
        return _stores_elsewhere(target.value)
    return not isinstance(target, cst.Name)


def _running_reads(scanner, body, skips: frozenset) -> set:
    """The names the statements of ``body`` that are not skipped (slicing.py) read, with
    the free names of functions they define."""
    reads: set = set()
    for stmt in body:
        if id(stmt) in skips:
            continue
        if isinstance(stmt, (cst.For, cst.While, cst.If)):
            header = scanner.expression(stmt.iter if isinstance(stmt, cst.For) else stmt.test)
            reads |= header.reads | header.closure
            reads |= _running_reads(scanner, stmt.body.body, skips)
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                reads |= _running_reads(scanner, [orelse], skips)
            elif orelse is not None:
                reads |= _running_reads(scanner, orelse.body.body, skips)
        else:
            summary = scanner.summary(stmt)
            reads |= summary.reads | summary.closure
    return reads


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
    called = set()
    for call in summary.calls:
        scope = scope_of(interp, call.root) if call.root else None
        if scope is not None and call.kind in ("chain", "method") and isinstance(
                scope[call.root], (list, dict, set, PlainObject, Unknown)) and not (
                call.kind == "chain" and _leaves_object(interp, scope[call.root], call.dotted)):
            called.add(call.root)
    names |= called
    attributes: dict = {}
    for root, attr in summary.attributes:
        attributes.setdefault(root, set()).add(attr)
    forgotten = []
    for name in sorted(names):
        scope = scope_of(interp, name)
        if scope is None:
            continue
        if _only_attributes_set(scope[name], name, summary, called) and name in attributes:
            # ``self.batch_size = n`` on an object: that attribute, not the object
            from memlint.frontends.keras.calls import set_attribute
            for attr in sorted(attributes[name]):
                set_attribute(scope[name], attr, Unknown(reason))
                forgotten.append(f"{name}.{attr}")
            continue
        scope[name] = Unknown(reason)
        forgotten.append(name)
    return forgotten


def _leaves_object(interp, obj, dotted: str, depth: int = 0) -> bool:
    """Whether ``obj.<dotted>(...)`` is a method of ``obj``'s class of the file that changes
    nothing of ``obj`` (a data generator's ``self.load(path)`` reading its settings): it
    stores nothing into its ``self`` and calls on it only methods that do not either."""
    method = obj.cls.methods.get(dotted) if isinstance(obj, PlainObject) and obj.cls \
        and "." not in dotted else None
    params = getattr(getattr(method, "node", None), "params", None)
    if method is None or params is None or not params.params or depth > 3 \
            or dotted in getattr(obj.cls, "static", ()):
        return False
    me = params.params[0].name.value
    summary = Summary()  # of the method's body (the ``def`` itself only binds its name)
    for stmt in method.node.body.body:
        summary.merge(interp.slicer.scanner.summary(stmt))
    if me in summary.mutated | summary.stored | summary.bound:
        return False
    return all(_leaves_object(interp, obj, call.dotted, depth + 1)
               for call in summary.calls if call.root == me)


def _only_attributes_set(value, name: str, summary, called: set) -> bool:
    """Whether ``summary`` only sets attributes of ``name``'s object (a plain object or an
    object of a Keras class of the file): nothing rebinds the name, stores into it
    otherwise, or calls its methods."""
    from memlint.frontends.keras.classes import ClassObject
    return isinstance(value, (PlainObject, ClassObject)) and name not in summary.bound \
        and name not in summary.deep and name not in summary.stored and name not in called



def scope_of(interp, name: str) -> Optional[dict]:
    """The innermost scope of ``interp`` that binds ``name`` (None if none does)."""
    for scope in (interp.scope, *interp.outer, interp.globals):
        if name in scope:
            return scope
    return None


def value_of(interp, name: str) -> Any:
    """What ``name`` is bound to in ``interp``'s innermost scope that binds it (None if none
    does)."""
    scope = scope_of(interp, name)
    return None if scope is None else scope[name]
