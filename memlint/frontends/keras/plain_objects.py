"""Plain Python objects that model code keeps its configuration and builders in.

* classes of the analysed file that derive from nothing Keras knows (``class Config:``,
  ``@dataclass class Config``, ``class Builder: def build(self): ...``, a ``tf.Module`` that
  holds a training step): instances with attributes, ``__init__`` run as written
  (dataclasses get theirs from the annotated fields), methods inlined with ``self`` bound,
  ``obj(...)`` running ``__call__``, class attributes;
* ``types.SimpleNamespace(**values)``;
* ``argparse``: a parser remembers each ``add_argument`` default, and ``parse_args()`` gives
  those defaults, as a run without command-line arguments would (noted once per parser).

Keras Layer and Model subclasses are :mod:`memlint.frontends.keras.classes`, not here.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras.values import Ref, Unknown, UserFunction, is_unknown
from memlint.records import record


@record(eq=False)
class PlainClass:
    """A class of the analysed file that is not a Keras Layer or Model."""

    name: str
    methods: dict  # name -> UserFunction
    attrs: dict  # class attributes
    fields: list  # dataclass fields in order: (name, default or _MISSING)
    is_dataclass: bool = False
    properties: set = field(default_factory=set)  # methods decorated with @property
    static: set = field(default_factory=set)  # @staticmethod / @classmethod: no ``self``
    # "PyDataset" / "Sequence": a Keras data source class; "torch": a torch Dataset
    data_kind: Optional[str] = None


@record(eq=False)
class PlainObject:
    """An instance of a :class:`PlainClass`, a SimpleNamespace or parsed arguments."""

    cls: Optional[PlainClass]
    attrs: dict = field(default_factory=dict)


@record(eq=False)
class PlainMethod:
    """``obj.method`` of a plain object, ready to be called with ``self`` bound."""

    obj: PlainObject
    fn: UserFunction


@record(eq=False)
class ArgumentParser:
    """``argparse.ArgumentParser()``: the defaults of its arguments by destination."""

    defaults: dict = field(default_factory=dict)
    location: Any = None


_MISSING = Unknown("a dataclass field without a default")
# Keras data classes a plain class of the file may derive from (its batches feed a model)
_DATA_BASES = {"keras.utils.PyDataset": "PyDataset", "keras.utils.Sequence": "Sequence",
               "keras.utils.data_utils.Sequence": "Sequence",
               # samples one by one, batched by a torch DataLoader (data._torch_loader)
               "torch.utils.data.Dataset": "torch", "torch.utils.data.dataset.Dataset": "torch"}


# library bases that add nothing memlint sizes: objects of the file's subclasses are plain
_PLAIN_BASES = frozenset({"tensorflow.Module"})


def define_plain_class(interp, stmt: cst.ClassDef) -> Optional[PlainClass]:
    """The :class:`PlainClass` for a class with no base, ``object``, ``tf.Module`` or another
    plain class of the file as its base; None for anything else (NamedTuple, Enum, library
    classes)."""
    inherited: list = []
    data_kind = None
    for arg in stmt.bases:
        if isinstance(arg.value, cst.Name) and arg.value.value == "object":
            continue
        base = interp.eval(arg.value)
        if isinstance(base, Ref) and base.name in _PLAIN_BASES:
            continue  # tf.Module: a plain object with a __call__ (a training step's holder)
        if isinstance(base, Ref) and base.name in _DATA_BASES:
            data_kind = _DATA_BASES[base.name]  # keras.utils.PyDataset / Sequence
            continue
        if not isinstance(base, PlainClass):
            return None
        inherited.append(base)
        data_kind = data_kind or base.data_kind
    if stmt.keywords:  # metaclass=...: not a plain class
        return None
    is_dataclass = any(_decorator_name(d) == "dataclass" for d in stmt.decorators)
    cls = PlainClass(stmt.name.value, {}, {}, [], is_dataclass, data_kind=data_kind)
    for base in inherited:
        cls.methods.update(base.methods)
        cls.attrs.update(base.attrs)
        cls.fields.extend(base.fields)
        cls.properties |= base.properties
        cls.static |= base.static
    body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else []
    saved = (interp.scope, interp.outer, len(interp.state.definitions))
    # methods see the enclosing function's names, never the class body's
    enclosing = (interp.scope,) + interp.outer if interp.scope is not interp.globals else ()
    interp.scope, interp.outer = {}, enclosing
    try:
        for item in body:
            if isinstance(item, cst.FunctionDef):
                interp.define_function(item)
                kinds = {_decorator_name(d) for d in item.decorators}
                if "property" in kinds:
                    cls.properties.add(item.name.value)
                if kinds & {"staticmethod", "classmethod"}:
                    cls.static.add(item.name.value)
            elif isinstance(item, cst.SimpleStatementLine):
                for small in item.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        _field(interp, cls, small)
                    else:
                        interp.exec_small(small)
        for name, value in interp.scope.items():
            if isinstance(value, UserFunction):
                cls.methods[name] = replace(value, closure=enclosing)
            else:
                cls.attrs[name] = value
    finally:
        interp.scope, interp.outer = saved[0], saved[1]
        del interp.state.definitions[saved[2]:]
    return cls


def _field(interp, cls: PlainClass, node: cst.AnnAssign) -> None:
    """``units: int = 64`` in a class body: a dataclass field and a class attribute."""
    name = node.target.value
    value = interp.eval(node.value) if node.value is not None else _MISSING
    if isinstance(node.value, cst.Call) and _callee_name(node.value) == "field":
        value = _dataclass_field_default(interp, node.value)
    cls.fields = [f for f in cls.fields if f[0] != name] + [(name, value)]
    if value is not _MISSING:
        cls.attrs[name] = value


def _dataclass_field_default(interp, call: cst.Call) -> Any:
    """``field(default=3)`` / ``field(default_factory=list)``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "default":
            return interp.eval(arg.value)
        if arg.keyword is not None and arg.keyword.value == "default_factory":
            factory = interp.eval(arg.value)
            name = getattr(factory, "name", "")
            return {"builtins.list": [], "builtins.dict": {}, "builtins.tuple": ()}.get(
                name, Unknown("a dataclass field made by a default_factory"))
    return _MISSING


def _decorator_name(decorator: cst.Decorator) -> str:
    return _callee_name(decorator.decorator)


def _callee_name(expr) -> str:
    """The last name of ``name``, ``module.name`` or a call of either (``field(...)``)."""
    expr = expr.func if isinstance(expr, cst.Call) else expr
    return expr.attr.value if isinstance(expr, cst.Attribute) else getattr(expr, "value", "")


def construct(interp, cls: PlainClass, args: list, kwargs: dict, node) -> Any:
    """``Cls(...)``: a new object, initialised by ``__init__`` or the dataclass fields."""
    obj = PlainObject(cls)
    init = cls.methods.get("__init__")
    if init is not None:
        interp.call_function(init, [obj, *args], kwargs, node)
    elif cls.is_dataclass:
        names = [name for name, _ in cls.fields]
        values = dict(cls.fields)
        if len(args) > len(names) or any(k not in values for k in kwargs):
            return Unknown(f"arguments of {cls.name}() do not match its fields")
        values.update(zip(names, args))
        values.update(kwargs)
        obj.attrs.update(values)
        post = cls.methods.get("__post_init__")
        if post is not None:
            interp.call_function(post, [obj], {}, node)
    return obj


def get_attribute(interp, base: Any, attr: str, node) -> Any:
    """``obj.attr``: an instance attribute, a bound method, or a class attribute."""
    if isinstance(base, PlainClass):
        if attr in base.attrs:
            return base.attrs[attr]
        return base.methods.get(attr) or Unknown(f"'{base.name}.{attr}' is not defined")
    if attr in base.attrs:
        return base.attrs[attr]
    cls = base.cls
    if cls is not None:
        if attr in cls.properties:
            return interp.call_function(cls.methods[attr], [base], {}, node)
        if attr in cls.methods:
            if attr in cls.static:
                return cls.methods[attr]
            return PlainMethod(base, cls.methods[attr])
        if attr in cls.attrs:
            return cls.attrs[attr]
    return Unknown(f"attribute '{attr}' is not set on this object")


def set_attribute(obj: PlainObject, attr: str, value: Any) -> None:
    obj.attrs[attr] = value
    if getattr(value, "held_by", None) is None and hasattr(value, "usage") \
            or isinstance(value, PlainObject) and getattr(value, "held_by", None) is None:
        # a model (or an object holding models) kept on this object: ``self.generator``
        # names it in reports (held.py)
        value.held_by = (obj, attr)


def namespace(kwargs: dict) -> PlainObject:
    """``types.SimpleNamespace(a=1, b=2)`` (and ``argparse.Namespace``)."""
    return PlainObject(None, dict(kwargs))


def add_argument(parser: ArgumentParser, args: list, kwargs: dict) -> None:
    """``parser.add_argument("--hidden-dim", type=int, default=64)``: remember the default."""
    flags = [a for a in args if isinstance(a, str)]
    if not flags:
        return
    dest = kwargs.get("dest")
    if not isinstance(dest, str):
        longs = [f for f in flags if f.startswith("--")]
        dest = (longs or flags)[0].lstrip("-").replace("-", "_")
    action = kwargs.get("action")
    if "default" in kwargs:
        default = kwargs["default"]
    elif action == "store_true":
        default = False
    elif action == "store_false":
        default = True
    elif not flags[0].startswith("-"):
        default = Unknown(f"positional command-line argument '{dest}' has no default")
    else:
        default = None
    parser.defaults[dest] = default


def parse_args(interp, parser: ArgumentParser, node) -> PlainObject:
    """``parser.parse_args()``: the defaults, as a run without arguments gives them."""
    interp.state.note_info(
        interp.location(node), "command-line arguments: the defaults given to add_argument() "
                               "are used (as a run without arguments would)")
    return PlainObject(None, dict(parser.defaults))


def environment_value(interp, name: str, args: list, kwargs: dict, node) -> Any:
    """``os.environ.get("BATCH_SIZE", "64")`` / ``os.getenv(...)``: what the code set it to,
    else the default given, as a run without it set gives (said once, as for the defaults
    of command-line arguments); without a default, not known."""
    key = args[0] if args else kwargs.get("key")
    if not isinstance(key, str):
        return Unknown("an environment variable whose name is not known statically")
    if key in interp.state.environment:
        return interp.state.environment[key]
    default = args[1] if len(args) > 1 else kwargs.get("default")
    if default is None or is_unknown(default):
        return Unknown(f"environment variable {key}: its value is not known statically")
    short = "os.getenv" if name == "os.getenv" else "os.environ.get"
    interp.state.note_info(interp.location(node), f"environment variable {key}: the default "
                           f"given to {short}() is used (as a run without it set would)")
    return default
