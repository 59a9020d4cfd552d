"""One pass over a parsed file, for everything that needs its nodes in code order.

:class:`SourceIndex` gives

* positions equal to libcst's ``PositionProvider`` (syntactic ranges: leading whitespace and
  comments excluded) node for node, made by the same code generation pass, but each node
  keeps two character offsets and becomes a ``CodeRange`` only when it is looked up (most
  never are): about a third of libcst's cost, whose per-token line splitting and per-node
  range objects made positions twice the cost of parsing the file;
* :meth:`SourceIndex.visit`: a ``CSTVisitor``'s ``visit_<Node>``/``leave_<Node>`` methods
  called over the recorded order, as ``node.visit(visitor)`` calls them, without libcst's
  traversal (which rebuilds every node it passes).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState  # the state every node's _codegen takes
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _Syntactic:
    """The context of ``record_syntactic_position``: the node's range without its whitespace
    (a class, not a generator context manager: it is entered once per node)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state, node, start_node, end_node):
        self.state, self.node = state, node
        self.start_node, self.end_node = start_node, end_node

    def __enter__(self):
        self.start = self.state.offset

    def __exit__(self, *exc) -> None:
        computed = self.state.computed
        start = computed[id(self.start_node)][0] if self.start_node is not None else self.start
        end = computed[id(self.end_node)][1] if self.end_node is not None else self.state.offset
        computed[id(self.node)] = (start, end)


class _OffsetState(CodegenState):
    """Code generation that records each node's (start, end) character offsets."""

    __slots__ = ("offset", "computed", "order", "ends", "_stack")

    def __init__(self, default_indent: str, default_newline: str):
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        self.computed: dict = {}
        self.order: list = []  # every node, in code order (pre-order)
        self.ends: list = []  # per entry of order: the index after its subtree
        self._stack: list = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        """Kept: the tokens only serve to find line starts, and offsets past the end of
        the code must fall on the line after its last newline, as libcst counts them."""

    def before_codegen(self, node) -> None:
        self._stack.append((self.offset, len(self.order)))
        self.order.append(node)
        self.ends.append(0)

    def after_codegen(self, node) -> None:
        start, index = self._stack.pop()
        self.ends[index] = len(self.order)
        key = id(node)  # CSTNode hashes by identity, in Python: id() is the same key, faster
        if key not in self.computed:  # a syntactic range recorded inside wins
            self.computed[key] = (start, self.offset)

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _Syntactic(self, node, start_node, end_node)


class SourceIndex:
    """One module's nodes: ``index[node]`` / ``index.get(node)`` give its ``CodeRange`` (as
    the mapping libcst's metadata gives), ``node in index`` whether it belongs to the
    module, :meth:`visit` runs a visitor over it or one of its nodes."""

    __slots__ = ("_module", "_offsets", "_line_starts", "_ranges", "_order", "_ends",
                 "_where")

    def __init__(self, module: cst.Module):
        self._module = module  # keeps every node alive: the offsets are keyed by id()
        state = _OffsetState(module.default_indent, module.default_newline)
        module._codegen(state)
        self._offsets = state.computed
        self._order, self._ends = state.order, state.ends
        self._where: Optional[dict] = None  # id(node) -> its index in _order, when needed
        code = "".join(state.tokens)
        self._line_starts = [0] + [match.end() for match in _NEWLINE.finditer(code)]
        self._ranges: dict = {}

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def __getitem__(self, node) -> CodeRange:
        key = id(node)
        found = self._ranges.get(key)
        if found is None:
            try:
                start, end = self._offsets[key]
            except KeyError:
                raise KeyError(node) from None  # a node of another module
            found = self._ranges[key] = CodeRange(self._position(start), self._position(end))
        return found

    def get(self, node, default: Optional[CodeRange] = None) -> Optional[CodeRange]:
        return self[node] if id(node) in self._offsets else default

    def __contains__(self, node) -> bool:
        return id(node) in self._offsets

    def __len__(self) -> int:
        return len(self._offsets)

    def visit(self, visitor: cst.CSTVisitor, node: Optional[cst.CSTNode] = None) -> None:
        """``node.visit(visitor)`` (the whole module by default) for a visitor that only
        defines ``visit_<Node>`` / ``leave_<Node>`` methods: a ``visit_`` returning False
        skips the node's children, its ``leave_`` is still called.  A node of another module
        is visited by libcst."""
        order, ends = self._order, self._ends
        kind = type(visitor)
        if kind.on_visit is not cst.CSTVisitor.on_visit or \
                kind.on_leave is not cst.CSTVisitor.on_leave:
            (node or self._module).visit(visitor)  # a visitor of its own kind: libcst's walk
            return
        if node is None:
            first = 0
        else:
            if self._where is None:
                self._where = {id(n): i for i, n in reversed(list(enumerate(order)))}
            first = self._where.get(id(node))
            if first is None or order[first] is not node:
                node.visit(visitor)
                return
        methods = _methods(type(visitor))
        stop = ends[first] if node is not None else len(order)
        leaving: list = []  # (end of subtree, leave_ function, node) of nodes with a leave_
        i = first
        while i < stop:
            while leaving and leaving[-1][0] <= i:
                _, on_leave, done = leaving.pop()
                on_leave(visitor, done)
            current = order[i]
            on_visit, on_leave = methods[type(current)]
            if on_leave is not None:
                leaving.append((ends[i], on_leave, current))
            i = ends[i] if on_visit is not None and on_visit(visitor, current) is False \
                else i + 1
        while leaving:
            _, on_leave, done = leaving.pop()
            on_leave(visitor, done)


def children(node: cst.CSTNode) -> list:
    """``node.children`` without whitespace and comments, read off the node's fields (libcst's
    property rebuilds the node to collect them; the order is the fields' order)."""
    names = _CHILD_FIELDS.get(type(node))
    if names is None:
        names = _CHILD_FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    found = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            if not isinstance(value, _LAYOUT):
                found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value
                         if isinstance(item, cst.CSTNode) and not isinstance(item, _LAYOUT))
    return found


_CHILD_FIELDS: dict = {}  # node type -> its field names
_LAYOUT = (cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine,
           cst.Newline, cst.Comment)
_NONE = (None, None)
_METHODS: dict = {}  # visitor class -> {node type: (visit_ function, leave_ function)}


def _methods(visitor_class) -> dict:
    found = _METHODS.get(visitor_class)
    if found is None:
        found = _METHODS[visitor_class] = _Methods(visitor_class)
    return found


class _Methods(dict):
    """A visitor class's ``visit_``/``leave_`` functions per node type, looked up once."""

    def __init__(self, visitor_class):
        super().__init__()
        self.visitor_class = visitor_class

    def __missing__(self, kind):
        name = kind.__name__
        pair = (getattr(self.visitor_class, f"visit_{name}", None),
                getattr(self.visitor_class, f"leave_{name}", None))
        self[kind] = pair if pair != _NONE else _NONE
        return self[kind]
