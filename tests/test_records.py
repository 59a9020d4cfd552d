"""``@record`` gives the classes ``@dataclass`` gives: same repr text, equality, hashing,
frozenness and dataclass helpers (memlint/records.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Optional

import pytest

from memlint.records import record


def pair(**options):
    """The same class body under @dataclass and under @record with ``options``."""
    def body():
        class Point:
            x: int
            y: Optional[str] = None
            tags: list = field(default_factory=list)
            hidden: int = field(default=0, repr=False, compare=False)
        return Point

    if options:
        return dataclass(**options)(body()), record(**options)(body())
    return dataclass(body()), record(body())


SAMPLES = [(1,), (1, "a"), (2, "a", [1, 2]), (1, None, [], 5)]


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"eq": False}])
def test_records_behave_as_dataclasses(options):
    reference, ours = pair(**options)
    assert dataclasses.is_dataclass(ours)
    assert [f.name for f in dataclasses.fields(ours)] == \
        [f.name for f in dataclasses.fields(reference)]
    for a in SAMPLES:
        assert repr(ours(*a)) == repr(reference(*a))
        for b in SAMPLES:
            assert (ours(*a) == ours(*b)) == (reference(*a) == reference(*b))
            assert (ours(*a) != ours(*b)) == (reference(*a) != reference(*b))
    hashable = reference.__hash__ is not None
    assert (ours.__hash__ is not None) == hashable
    if options.get("frozen"):
        for cls in (reference, ours):  # a frozen record hashes its fields (a list: refused)
            with pytest.raises(TypeError):
                hash(cls(1, "a"))
            assert hash(cls(1, "a", ())) == hash(cls(1, "a", ()))
    assert ours(1) != reference(1)  # another class is never equal
    changed = dataclasses.replace(ours(1, "a"), x=3)
    assert (changed.x, changed.y) == (3, "a")
    assert dataclasses.asdict(ours(1, "a")) == dataclasses.asdict(reference(1, "a"))


def test_frozen_records_refuse_assignment():
    _, ours = pair(frozen=True)
    point = ours(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2


def test_a_class_keeps_its_own_repr_and_eq():
    @record
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

        __hash__ = None

    assert repr(Named("a")) == "<a>"
    assert Named("A") == Named("a")


def test_a_record_that_holds_itself_prints():
    class Node:
        value: int
        parent: object = None

    texts = []
    for make in (dataclass, record):
        cls = make(type("Node", (), {"__annotations__": dict(Node.__annotations__),
                                     "parent": None}))
        node = cls(1)
        node.parent = node
        texts.append(repr(node))
    assert texts[0] == texts[1] == "Node(value=1, parent=...)"


@pytest.mark.parametrize("compile_after", [0, 10_000], ids=["compiled", "bound in Python"])
@pytest.mark.parametrize("frozen", [False, True])
def test_the_deferred_init_takes_what_dataclasses_init_takes(frozen, compile_after,
                                                             monkeypatch):
    import memlint.records

    monkeypatch.setattr(memlint.records, "COMPILE_AFTER", compile_after)
    reference, ours = pair(frozen=frozen)
    for cls in (reference, ours):
        point = cls(x=4, tags=[7])
        assert (point.x, point.y, point.tags, point.hidden) == (4, None, [7], 0)
        point = cls(4, "b", hidden=3)
        assert (point.x, point.y, point.tags, point.hidden) == (4, "b", [], 3)
        assert cls(1).tags is not cls(1).tags  # a fresh list per object
        for bad_args, bad_kwargs in [((), {}), ((1, "a", [], 0, "too many"), {}),
                                     ((1,), {"nope": 2}), ((1,), {"x": 2}),
                                     ((), {"y": "a"}), ((1,), {"hidden": 1, "nope": 2})]:
            with pytest.raises(TypeError):
                cls(*bad_args, **bad_kwargs)
    assert "__init__" in ours.__dict__


def test_a_class_is_compiled_after_its_first_objects():
    import memlint.records

    _, ours = pair()
    first = ours.__init__
    points = [ours(i) for i in range(memlint.records.COMPILE_AFTER + 1)]
    assert ours.__init__ is not first  # compiled
    assert [p.x for p in points] == list(range(len(points)))
    assert ours(5, "c").y == "c"


def test_post_init_runs_and_subclasses_get_their_own_fields():
    seen = []

    @record
    class Base:
        a: int

        def __post_init__(self):
            seen.append(type(self).__name__)

    @record
    class Child(Base):
        b: str = "b"

    assert Child(1).b == "b" and Child(1, "c").b == "c"
    assert Base(2).a == 2
    assert seen == ["Child", "Child", "Base"]
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]


def test_class_variables_are_not_fields():
    @record
    class Counted:
        total: ClassVar[int] = 0
        value: int = 1

    assert Counted(5).value == 5 and Counted.total == 0
    with pytest.raises(TypeError):
        Counted(1, 2)


def test_a_record_is_processed_by_dataclass_only_when_first_used():
    @record
    class Unused:
        x: int
        tags: list = field(default_factory=list)

    assert isinstance(Unused.__dict__["__dataclass_fields__"],
                      memlint_records()._PendingFields)
    assert dataclasses.is_dataclass(Unused)  # asking processes it
    assert isinstance(Unused.__dict__["__dataclass_fields__"], dict)
    assert [f.name for f in dataclasses.fields(Unused)] == ["x", "tags"]
    assert "tags" not in Unused.__dict__  # as dataclass leaves a default_factory field

    @record
    class Base:
        a: int

    class Plain(Base):  # a plain subclass inherits the fields
        pass

    @dataclass
    class Derived(Base):  # a dataclass subclass reads them
        b: int = 2

    assert [f.name for f in dataclasses.fields(Plain)] == ["a"]
    assert (Derived(1).a, Derived(1).b) == (1, 2)


def test_keyword_only_and_initvar_fields_are_left_to_dataclass():
    @dataclass(kw_only=True)
    class Options:
        size: int = 1

    @record
    class Sized(Options):
        name: str = "n"

    assert Sized(size=3).size == 3 and Sized("m").name == "m"
    with pytest.raises(TypeError):
        Sized(3, "m")  # size stays keyword-only

    @record
    class Seeded:
        x: int
        seed: dataclasses.InitVar[int] = 0

        def __post_init__(self, seed):
            self.x += seed

    assert Seeded(1, 2).x == 3


def memlint_records():
    import memlint.records

    return memlint.records


PARAMETERS_PROBE = """
import dataclasses, importlib, json, pkgutil
import memlint
import memlint.records as records
for info in pkgutil.walk_packages(memlint.__path__, "memlint."):
    if ".onnx" not in info.name and not info.name.endswith("__main__"):
        importlib.import_module(info.name)
pending = [cls for cls in list(records._RECORDS)
           if isinstance(cls.__dict__.get("__dataclass_fields__"), records._PendingFields)]
differ = [cls.__qualname__ for cls in pending if records._parameters(cls) != tuple(
    (f.name, f.default, f.default_factory) for f in dataclasses.fields(cls))]
print(json.dumps([len(pending), differ]))
"""


def test_the_parameters_read_before_processing_are_dataclass_s_for_every_memlint_record():
    """Every record class of memlint, fresh from its module (another process): the
    parameters of its ``__init__`` read off its annotations equal those ``dataclass`` gives."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PARAMETERS_PROBE], capture_output=True,
                          text=True, check=True)
    pending, differ = json.loads(done.stdout.splitlines()[-1])
    assert pending > 50 and differ == []


def test_parameters_of_records_with_bases_class_variables_and_factories():
    import memlint.records as records

    @record
    class Base:
        a: int
        b: list = field(default_factory=list)
        count: ClassVar[int] = 0

    @record
    class Child(Base):
        c: str = "c"
        a: int = 5  # an override keeps its place

    early = records._parameters(Child)
    assert early == tuple((f.name, f.default, f.default_factory)
                          for f in dataclasses.fields(Child))
    assert [name for name, _, _ in early] == ["a", "b", "c"]
