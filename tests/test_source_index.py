"""memlint.source_index: positions equal libcst's PositionProvider node for node, and its
visits call a visitor's methods in the order libcst's own traversal does."""

from __future__ import annotations

import inspect

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from memlint.source_index import SourceIndex
from tests.conftest import FIXTURES

ROOT = FIXTURES.parent
ODD_SOURCES = {
    "crlf": "import keras\r\nx = keras.layers.Dense(\r\n    4)\r\n",
    "lone_cr": "a = 1\rb = (a +\r  2)\r",
    "tabs_and_comments": "if True:\n\t# a comment\n\ty = [1,\n\t     2]  # trailing\n",
    "no_final_newline": "def f(x):\n    return x * 2",
    "empty": "",
    "decorated_class": "@dec(1)\n@other\nclass A(B, metaclass=M):\n    '''doc'''\n    x: int = 3\n",
    "unicode": "s = 'été'; t = \"日本語\"  # ümlaut\nu = s + t\n",
}
SOURCES = sorted(p for p in ROOT.glob("fixtures/**/*.py")
                 if "invalid" not in p.parts) + sorted(ROOT.glob("memlint/**/*.py"))


def _libcst_positions(module):
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _same_positions(module) -> None:
    expected = _libcst_positions(module)
    index = SourceIndex(module)
    assert len(index) == len(expected)
    for node, position in expected.items():
        assert node in index
        assert index[node] == position, (type(node).__name__, position, index[node])
        assert index.get(node) == position


@pytest.mark.parametrize("name", sorted(ODD_SOURCES))
def test_positions_equal_libcsts_on_odd_sources(name):
    _same_positions(cst.parse_module(ODD_SOURCES[name]))


def test_positions_equal_libcsts_on_fixtures_and_memlints_own_source():
    assert len(SOURCES) > 100
    for path in SOURCES[::2]:
        _same_positions(cst.parse_module(path.read_text(encoding="utf-8")))


def test_a_node_of_another_module_is_not_in_the_index():
    index = SourceIndex(cst.parse_module("x = 1\n"))
    other = cst.parse_module("x = 1\n").body[0]
    assert other not in index
    assert index.get(other) is None
    with pytest.raises(KeyError):
        index[other]


_WHITESPACE = {"SimpleWhitespace", "ParenthesizedWhitespace", "TrailingWhitespace",
               "EmptyLine", "Newline", "Comment"}
_NODE_TYPES = [name for name, value in vars(cst).items()
               if inspect.isclass(value) and issubclass(value, cst.CSTNode)
               and not inspect.isabstract(value) and name not in _WHITESPACE]


def _recording_visitor():
    """A visitor with visit_/leave_ for every node kind but whitespace (whose order among
    its siblings libcst does not keep lexical); it skips lambdas' and classes' children."""
    def make(name):
        def visit(self, node):
            self.log.append(("visit", name, id(node)))
            return name not in ("Lambda", "ClassDef")

        def leave(self, node):
            self.log.append(("leave", name, id(node)))
        return visit, leave

    methods = {"__init__": lambda self: setattr(self, "log", [])}
    for name in _NODE_TYPES:
        methods[f"visit_{name}"], methods[f"leave_{name}"] = make(name)
    return type("Recorder", (cst.CSTVisitor,), methods)


def test_visits_follow_libcsts_order_on_modules_and_on_statements():
    recorder = _recording_visitor()
    for path in SOURCES[::3]:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        index = SourceIndex(module)
        ours, theirs = recorder(), recorder()
        index.visit(ours)
        module.visit(theirs)
        assert ours.log == theirs.log, path
        for statement in module.body[:6]:
            ours, theirs = recorder(), recorder()
            index.visit(ours, statement)
            statement.visit(theirs)
            assert ours.log == theirs.log, path


def test_visits_of_foreign_nodes_and_of_visitors_with_their_own_hooks_use_libcst():
    index = SourceIndex(cst.parse_module("x = f(1)\n"))
    other = cst.parse_module("y = g(2)\n")

    class Calls(cst.CSTVisitor):
        def __init__(self):
            self.seen = []

        def visit_Call(self, node):
            self.seen.append(node.func.value)

    calls = Calls()
    index.visit(calls, other.body[0])
    assert calls.seen == ["g"]

    class Everything(cst.CSTVisitor):
        def __init__(self):
            self.count = 0

        def on_visit(self, node):
            self.count += 1
            return True

    everything, reference = Everything(), Everything()
    index.visit(everything)
    cst.parse_module("x = f(1)\n").visit(reference)
    assert everything.count == reference.count > 5


def test_children_are_libcsts_children_without_layout():
    from memlint.source_index import _LAYOUT, children

    for path in SOURCES[::5]:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        stack = [module]
        while stack:
            node = stack.pop()
            expected = [c for c in node.children if not isinstance(c, _LAYOUT)]
            found = children(node)
            assert sorted(map(id, found)) == sorted(map(id, expected)), type(node).__name__
            stack.extend(expected)
