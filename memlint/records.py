"""``@record``: a dataclass whose methods cost nothing until they are used.

``dataclasses.dataclass`` writes and compiles the source of every method of every class it
decorates when the class is made; for memlint's ~80 classes that was about 40% of its import
time, which every run of the pre-commit hook pays, although a run uses few of them.
``record`` takes the same arguments and gives the same class (a real dataclass: ``fields``,
``replace``, ``asdict``, ``is_dataclass`` work) with the same behaviour:

* ``__init__`` binds its arguments in plain Python for the first ``COMPILE_AFTER`` objects
  of the class, and is compiled after that (the same signature, defaults, ``default_factory``
  calls, ``__post_init__`` call, and for frozen classes assignment through
  ``object.__setattr__``): most classes make a few objects per run, where compiling cost more
  than it saved;
* ``__repr__``, ``__eq__``, ``__hash__`` (frozen classes) and the frozen ``__setattr__`` /
  ``__delattr__`` are functions shared by every record: the same text, the same comparison
  of the fields' tuples, the same ``FrozenInstanceError``;
* ``dataclass`` itself processes the class (its ``Field`` objects, ``__dataclass_fields__``)
  only when something first asks for its fields (``fields``, ``replace``, ``asdict``,
  ``is_dataclass``, a comparison, a ``repr``); making objects does not, since ``__init__``'s
  parameters are read off the annotations as ``dataclass`` reads them.  Until then a field
  declared with ``field(...)`` is a ``Field`` object on the class (objects have their own
  values).

Options ``record`` does not handle itself (``init=False``, ``kw_only``, ``slots``,
``order``, ``unsafe_hash``, ``InitVar`` fields) are left to ``dataclass`` entirely.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import typing

_HANDLED = {"frozen", "eq"}


def record(cls=None, /, **options):
    """``@record``, ``@record(frozen=True)``, ``@record(eq=False)``: as ``@dataclass``."""
    def wrap(cls):
        if set(options) - _HANDLED or _needs_dataclass(cls):
            return dataclasses.dataclass(cls, **options)  # the rare cases: dataclass's own
        eq, frozen = options.get("eq", True), options.get("frozen", False)
        own = cls.__dict__
        if not own.get("__doc__"):  # dataclass would ask inspect.signature for one
            cls.__doc__ = f"{cls.__name__}({', '.join(own.get('__annotations__', ()))})"
        cls.__dataclass_fields__ = _PendingFields(cls)
        _RECORDS.add(cls)
        if "__init__" not in own:
            cls.__init__ = _deferred_init(cls, frozen)
        if "__repr__" not in own:
            cls.__repr__ = _fields_repr
        if eq and "__eq__" not in own:
            cls.__eq__ = _fields_eq
            if "__hash__" not in own:
                cls.__hash__ = _fields_hash if frozen else None  # as dataclass decides
        if frozen:
            _FROZEN.add(cls)
            cls.__setattr__, cls.__delattr__ = _frozen_setattr, _frozen_delattr
        return cls

    return wrap if cls is None else wrap(cls)


def _needs_dataclass(cls) -> bool:
    """Keyword-only fields (here or in a dataclass base) and ``InitVar`` pseudo-fields:
    what only ``dataclass``'s own ``__init__`` handles."""
    own = cls.__dict__
    if any("InitVar" in str(kind) or "KW_ONLY" in str(kind)
           for kind in own.get("__annotations__", {}).values()):
        return True
    if any(isinstance(value, dataclasses.Field) and value.kw_only is True
           for value in own.values()):
        return True
    return any(base not in _RECORDS and dataclasses.is_dataclass(base) and any(
        f.kw_only is True for f in dataclasses.fields(base)) for base in cls.__mro__[1:-1])


class _PendingFields:
    """A record's ``__dataclass_fields__`` until something first asks for it (``fields``,
    ``replace``, ``asdict``, a comparison): then ``dataclass`` processes the class
    (leaving ``__init__``, ``__repr__`` and ``__eq__`` to the record) and puts the real
    mapping in its place.  Classes never used cost nothing."""

    def __init__(self, cls):
        self.cls = cls

    def __get__(self, obj, owner=None):
        cls = self.cls
        if cls.__dict__.get("__dataclass_fields__") is self:
            delattr(cls, "__dataclass_fields__")
            dataclasses.dataclass(cls, init=False, repr=False, eq=False)
        return cls.__dict__["__dataclass_fields__"]


# ---------------------------------------------------------------------- __init__, when used

COMPILE_AFTER = 32  # objects of a class made before its ``__init__`` is compiled


def _deferred_init(cls, frozen: bool):
    made = 0
    fields = None

    def __init__(self, *args, **kwargs):
        nonlocal made, fields
        made += 1
        if made > COMPILE_AFTER:
            real = _compile_init(cls, frozen)
            cls.__init__ = real
            real(self, *args, **kwargs)
            return
        if fields is None:  # read off the annotations: making objects processes nothing
            fields = _parameters(cls), hasattr(cls, "__post_init__")
        _bind(self, fields, args, kwargs, frozen)
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _parameters(cls) -> tuple:
    """``(name, default, factory)`` per parameter of the generated ``__init__``; while the
    class is not processed yet, read off the annotations of the class and its bases as
    ``dataclass`` reads them."""
    if not isinstance(cls.__dict__.get("__dataclass_fields__"), _PendingFields):
        return tuple((f.name, f.default, f.default_factory) for f in dataclasses.fields(cls))
    found: dict = {}
    for base in cls.__mro__[-1:0:-1]:  # the bases' fields first, as dataclass orders them
        if base in _RECORDS or dataclasses.is_dataclass(base):
            found.update((name, (name, default, factory))
                         for name, default, factory in _parameters(base))
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if _is_class_variable(kind):
            continue
        default, factory = getattr(cls, name, dataclasses.MISSING), dataclasses.MISSING
        if isinstance(default, dataclasses.Field):
            default, factory = default.default, default.default_factory
        found[name] = (name, default, factory)
    return tuple(found.values())


def _is_class_variable(kind) -> bool:
    if isinstance(kind, str):
        return kind.replace(" ", "").startswith(("ClassVar", "typing.ClassVar"))
    return kind is typing.ClassVar or typing.get_origin(kind) is typing.ClassVar


def _bind(self, spec: tuple, args: tuple, kwargs: dict, frozen: bool) -> None:
    """What the compiled ``__init__`` does, and the same errors for bad arguments."""
    fields, post_init = spec
    if len(args) > len(fields):
        raise TypeError(f"__init__() takes {len(fields) + 1} positional arguments but "
                        f"{len(args) + 1} were given")
    missing = []
    values = []
    used = 0  # keyword arguments bound
    for index, (name, default, factory) in enumerate(fields):
        if index < len(args):
            if name in kwargs:
                raise TypeError(f"__init__() got multiple values for argument {name!r}")
            values.append(args[index])
        elif name in kwargs:
            values.append(kwargs[name])
            used += 1
        elif default is not dataclasses.MISSING:
            values.append(default)
        elif factory is not dataclasses.MISSING:
            values.append(_NO_ARGUMENT)
        else:
            missing.append(name)
    if used < len(kwargs):
        known = {name for name, _, _ in fields}
        unexpected = next(key for key in kwargs if key not in known)
        raise TypeError(f"__init__() got an unexpected keyword argument {unexpected!r}")
    if missing:
        raise TypeError(f"__init__() missing {len(missing)} required argument(s): "
                        + ", ".join(repr(name) for name in missing))
    set_field = object.__setattr__ if frozen else setattr
    for (name, _, factory), value in zip(fields, values):
        set_field(self, name, factory() if value is _NO_ARGUMENT else value)
    if post_init:
        self.__post_init__()


_NO_ARGUMENT = object()  # a default_factory field's default in the generated signature


def _compile_init(cls, frozen: bool):
    params, body, namespace = [], [], {"_NO_ARGUMENT": _NO_ARGUMENT,
                                       "_set": object.__setattr__}
    for name, default, factory in _parameters(cls):
        if default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = default
            params.append(f"{name}=_default_{name}")
            value = name
        elif factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = factory
            params.append(f"{name}=_NO_ARGUMENT")
            value = f"_factory_{name}() if {name} is _NO_ARGUMENT else {name}"
        else:
            params.append(name)
            value = name
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = (f"def __init__(self, {', '.join(params)}):\n" if params else
              "def __init__(self):\n") + "".join(f"    {line}\n" for line in body or ["pass"])
    exec(source, namespace)  # noqa: S102 - memlint's own generated source, as dataclass does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


# ---------------------------------------------------------------------- shared methods

@reprlib.recursive_repr()
def _fields_repr(self) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                      for f in dataclasses.fields(self) if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _compared(cls):
    """The tuple of ``cls``'s compared fields, for one object (made once per class)."""
    found = _COMPARED.get(cls)
    if found is None:
        names = [f.name for f in dataclasses.fields(cls) if f.compare]
        found = _COMPARED[cls] = (
            (lambda obj: ()) if not names else
            operator.attrgetter(*names) if len(names) > 1 else
            (lambda obj, get=operator.attrgetter(names[0]): (get(obj),)))
    return found


def _fields_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = _compared(self.__class__)
    return compared(self) == compared(other)  # tuples, as dataclass's own __eq__ compares


def _fields_hash(self) -> int:
    cls = self.__class__
    hashed = _HASHED.get(cls)
    if hashed is None:
        names = [f.name for f in dataclasses.fields(cls)
                 if (f.compare if f.hash is None else f.hash)]
        hashed = _HASHED[cls] = tuple(names)
    return hash(tuple(getattr(self, name) for name in hashed))


def _frozen_setattr(self, name, value):
    cls = type(self)
    if cls in _FROZEN or name in cls.__dataclass_fields__:  # as dataclass's own __setattr__
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self, name):
    cls = type(self)
    if cls in _FROZEN or name in cls.__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


_COMPARED: dict = {}
_HASHED: dict = {}
_FROZEN: set = set()  # the frozen record classes
_RECORDS: set = set()  # every record class
