"""Training loops that only repeat themselves: stopped early, before the step budget is spent.

A custom training loop (``for epoch in range(30000): ... model.train_on_batch(x, y)``) calls
the file's models with the same shapes on every iteration; interpreting it to the end costs
the whole step budget (the analysis then stops, and nothing after the loop is seen) and
teaches nothing after the first iterations.  A loop is stopped when

* its last ``REPEATS`` iterations (fewer, at least 2, when ``REPEATS`` more would take over
  half the steps left) each called a model (fit, train_on_batch, predict ...) and every such
  call repeated one already recorded (same model, method, arguments), and created nothing: no
  model, layer, note, memory cap or distribution;
* the rest of the loop could not run within what is left of the step budget (so the
  analysis would have stopped inside the loop anyway);
* and its own body changes no model: no ``compile``, ``trainable`` or model construction
  appears in it (a schedule such as "unfreeze at epoch 50" keeps the loop running; setting
  weights changes no shape).

The stop is reported (MEM903, like every bound) and the analysis goes on after the loop, with
the values the loop's names had at the stop.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from memlint.layers.base import Unknown

REPEATS = 20  # iterations in a row that only repeated model calls before a loop may stop
MIN_REPEATS = 2  # ... when REPEATS more would take over half the steps left

# what in a loop body may change a model between iterations (then the loop never stops early)
_CHANGES_MODELS = frozenset({"compile", "trainable", "Model", "Sequential"})


class RepeatWatch:
    """Watches the iterations of one loop; :meth:`end` after each says for how many
    iterations in a row the loop has only repeated itself."""

    def __init__(self, interp, stmt: cst.CSTNode):
        self.interp = interp
        self.state = interp.state
        self.enabled = not _changes_models(stmt, interp)
        self.streak = 0
        self._before: Optional[tuple] = None
        self._usage: dict = {}
        self._previous: list = []  # the model calls of the previous iteration

    def begin(self) -> None:
        if self.enabled:
            self._before = self._counts()
            self._usage = {id(m): {k: len(v) for k, v in _usage(m).items()}
                           for m in self._models()}

    def end(self) -> int:
        """After an iteration: how many iterations in a row only repeated (0: not this one)."""
        if not self.enabled or self._before is None:
            return 0
        if self._counts() != self._before or not self._calls_repeated():
            self.streak = 0
        else:
            self.streak += 1
        return self.streak

    def _models(self) -> list:
        return [*self.state.models, *self.state.imported_models]

    def _counts(self) -> tuple:
        state = self.state
        # notes count once (a note repeated by a loop is not a new diagnostic)
        return (len(state.models), len(state.imported_models),
                sum(state._name_counts.values()), len(state.diagnostics),
                len(state.memory_caps), state.distribution is None, len(state.definitions))

    def _calls_repeated(self) -> bool:
        """Whether this iteration called a model and every call repeated one of the previous
        iteration (same model, method, arguments)."""
        calls = []
        for model in self._models():
            before = self._usage.get(id(model), {})
            for method, records in _usage(model).items():
                calls.extend((id(model), method, record)
                             for record in records[before.get(method, 0):])
        previous, self._previous = self._previous, calls
        return bool(calls) and all(
            any(model == old[0] and method == old[1] and _same(record, old[2])
                for old in previous)
            for model, method, record in calls)


def enough_repeats(streak: int, per_iteration: int, steps_left: int, stopped_before: bool
                   ) -> bool:
    """Whether ``streak`` repeated iterations are enough to stop a loop that cannot finish
    within ``steps_left`` steps (each of its iterations takes ``per_iteration``);
    ``stopped_before``: this loop was stopped so on an earlier run (an inner loop run again by
    its outer loop), then ``MIN_REPEATS`` are."""
    if stopped_before:
        return streak >= MIN_REPEATS
    affordable = (steps_left // 2) // max(per_iteration, 1)
    return streak >= max(MIN_REPEATS, min(REPEATS, affordable))


def _usage(model) -> dict:
    usage = getattr(model, "usage", None)
    return usage if isinstance(usage, dict) else {}


def _same(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether two recorded values tell the analysis the same: equal values, and unknown
    values with the same reason (and attributes): neither says more than the other."""
    if a is b:
        return True
    if depth > 8 or type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, Unknown):
        return _same(vars(a), vars(b), depth + 1)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values without a usable ==: not the same
        return False


def _changes_models(stmt: cst.CSTNode, interp) -> bool:
    """Whether the loop's body names something that changes models (once per loop)."""
    known = interp.model_changing_loops
    found = known.get(id(stmt))
    if found is None:
        finder = _ModelChanges()
        interp.positions.visit(finder, stmt)
        found = known[id(stmt)] = finder.found
    return found


class _ModelChanges(cst.CSTVisitor):
    def __init__(self):
        self.found = False

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value in _CHANGES_MODELS:
            self.found = True
        return False
