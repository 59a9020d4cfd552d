"""``@record``: a dataclass whose ``__repr__`` and ``__eq__`` are shared functions.

``dataclasses.dataclass`` writes and compiles the source of every method of every class it
decorates; for memlint's ~80 classes that was about 40% of its import time, which every run
of the pre-commit hook pays.  ``record`` takes the same arguments and gives the same class (a
real dataclass: ``fields``, ``replace``, ``asdict`` work), the same ``repr`` text and the
same equality and hashing rules, but ``repr`` and ``==`` (for classes that are not frozen)
are two functions defined once here.  Frozen classes keep the generated ``__eq__`` and
``__hash__``.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib


def record(cls=None, /, **options):
    """``@record``, ``@record(frozen=True)``, ``@record(eq=False)``: as ``@dataclass``."""
    eq = options.pop("eq", True)
    frozen = options.get("frozen", False)
    shared_eq = eq and not frozen

    def wrap(cls):
        built = dataclasses.dataclass(cls, repr=False, eq=eq and frozen, **options)
        if "__repr__" not in cls.__dict__:
            built.__repr__ = _fields_repr
        if shared_eq and "__eq__" not in cls.__dict__:
            built.__eq__ = _fields_eq
            built.__hash__ = None  # as dataclass: mutable and compared by value
        return built

    return wrap if cls is None else wrap(cls)


@reprlib.recursive_repr()
def _fields_repr(self) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                      for f in dataclasses.fields(self) if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _fields_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = _COMPARED.get(self.__class__)
    if compared is None:
        names = [f.name for f in dataclasses.fields(self) if f.compare]
        compared = _COMPARED[self.__class__] = (
            (lambda obj: ()) if not names else
            operator.attrgetter(*names) if len(names) > 1 else
            (lambda obj, get=operator.attrgetter(names[0]): (get(obj),)))
    return compared(self) == compared(other)  # tuples, as dataclass's own __eq__ compares


_COMPARED: dict = {}  # class -> the tuple of its compared fields, for one object
