"""Plain Python objects model code keeps its configuration in: classes of the file that are
not Keras classes, dataclasses, SimpleNamespace and argparse defaults."""

from tests.test_interpreter_values import names, run


def test_plain_class_with_init_methods_and_class_attributes():
    got = names(
        "class Cfg:\n    scale = 2\n"
        "    def __init__(self, width, depth=3):\n"
        "        self.width = width\n        self.depth = depth\n"
        "    def total(self):\n        return self.width * self.depth * self.scale\n"
        "c = Cfg(4)\nc.depth = 5\nr = (c.width, c.depth, c.total(), Cfg.scale)\n")
    assert got["r"] == (4, 5, 40, 2)


def test_dataclass_fields_defaults_property_and_post_init():
    got = names(
        "from dataclasses import dataclass, field\n"
        "@dataclass\nclass Cfg:\n    units: int\n    depth: int = 2\n"
        "    tags: list = field(default_factory=list)\n"
        "    def __post_init__(self):\n        self.total = self.units * self.depth\n"
        "    @property\n    def half(self):\n        return self.units // 2\n"
        "c = Cfg(8, depth=3)\nr = (c.units, c.depth, c.tags, c.total, c.half)\n")
    assert got["r"] == (8, 3, [], 24, 4)


def test_inheritance_between_plain_classes_and_static_methods():
    got = names(
        "class Base:\n    width = 8\n    @staticmethod\n    def act():\n        return 'gelu'\n"
        "    def w(self):\n        return self.width\n"
        "class Wide(Base):\n    width = 32\n"
        "r = (Wide().w(), Wide.act(), Base().w())\n")
    assert got["r"] == (32, "gelu", 8)


def test_simple_namespace_and_argparse_defaults():
    got, state = run(
        "import argparse, types\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--hidden-dim', type=int, default=24)\n"
        "p.add_argument('--layers', dest='depth', type=int, default=3)\n"
        "p.add_argument('--bn', action='store_true')\n"
        "p.add_argument('data')\n"
        "a = p.parse_args()\n"
        "ns = types.SimpleNamespace(w=a.hidden_dim * 2)\n"
        "r = (a.hidden_dim, a.depth, a.bn, ns.w)\n")
    assert got["r"] == (24, 3, False, 48)
    assert any("defaults given to add_argument" in d.message for d in state.diagnostics)


def test_classes_with_other_bases_are_not_plain():
    got = names("from typing import NamedTuple\nclass P(NamedTuple):\n    x: int = 1\nr = P()\n")
    from memlint.frontends.keras.values import is_unknown
    assert is_unknown(got["r"])


def test_dataclass_field_spellings():
    got = names(
        "import dataclasses\n"
        "def field_width():\n    return 3\n"
        "@dataclasses.dataclass\nclass Cfg:\n"
        "    units: int = dataclasses.field(default=5)\n"
        "    width: int = field_width()\n"
        "c = Cfg()\nr = (c.units, c.width)\n")
    assert got["r"] == (5, 3)


def test_environment_variables_read_with_a_default():
    # `int(os.environ.get("BATCH_SIZE", 64))` in fit(batch_size=...) was not known, and
    # Keras's default of 32 was used; the default a run without the variable gets applies,
    # said once, and a value the code sets itself wins
    got, state = run(
        "import os\n"
        "os.environ['EPOCHS'] = '3'\n"
        "os.environ.setdefault('EPOCHS', '7')\n"
        "b = int(os.environ.get('BATCH_SIZE', 64))\n"
        "e = int(os.getenv('EPOCHS', '10'))\n"
        "w = os.environ.get('WORKERS')\n"
        "k = os.getenv(name, '1')\n")
    assert (got["b"], got["e"]) == (64, 3)
    assert not isinstance(got["w"], (int, str)) and not isinstance(got["k"], (int, str))
    notes = [d.message for d in state.diagnostics]
    assert notes == ["environment variable BATCH_SIZE: the default given to os.environ.get() "
                     "is used (as a run without it set would)"], notes
