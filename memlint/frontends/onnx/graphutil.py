"""Walking an ONNX graph: node labels, subgraphs, outer-scope reads and execution order."""

from __future__ import annotations

import heapq


def label(node, index: int) -> str:
    """The node's name, or ``<op_type>_<index>`` when the exporter left it empty."""
    return node.name or f"{node.op_type}_{index}"


def subgraphs(node) -> list:
    """The graphs held in a node's attributes (If branches, Loop and Scan bodies)."""
    found = []
    for attr in node.attribute:
        if attr.HasField("g"):
            found.append(attr.g)
        found.extend(attr.graphs)
    return found


def outer_reads(graph) -> list:
    """Names a (sub)graph reads without defining them: tensors of the enclosing scopes."""
    defined = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {s.values.name for s in graph.sparse_initializer}
    reads: list = []
    seen = set()
    for node in graph.node:
        names = list(node.input)
        for sub in subgraphs(node):
            names.extend(outer_reads(sub))
        for name in names:
            if name not in defined and name not in seen:
                seen.add(name)
                reads.append(name)
        defined.update(node.output)
    return [name for name in reads if name not in defined]


def node_reads(node) -> list:
    """Every tensor a node reads: its inputs (without empty optional ones), then the outer
    tensors its subgraphs use."""
    names = [n for n in node.input if n]
    for sub in subgraphs(node):
        for name in outer_reads(sub):
            if name not in names:
                names.append(name)
    return names


def topological(graph) -> tuple:
    """(nodes in an execution order, nodes that could not be placed).

    The file's order is kept wherever it is already valid (exporters write topologically
    sorted graphs); a node waits only for the producers of what it reads.
    """
    available = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    available |= {s.values.name for s in graph.sparse_initializer}
    producers = {}
    for node in graph.node:
        for out in node.output:
            producers.setdefault(out, node)
    waiting: dict = {}  # tensor -> nodes waiting for it
    missing: dict = {}  # id(node) -> count of unavailable reads
    order, ready = [], []
    nodes = list(graph.node)
    position = {id(n): i for i, n in enumerate(nodes)}
    for node in nodes:
        needs = {n for n in node_reads(node) if n not in available and n in producers}
        missing[id(node)] = len(needs)
        for name in needs:
            waiting.setdefault(name, []).append(node)
        if not needs:
            ready.append(node)
    heap = [(position[id(n)], id(n), n) for n in ready]
    heapq.heapify(heap)
    while heap:
        _, _, node = heapq.heappop(heap)
        order.append(node)
        for out in node.output:
            if out in available:
                continue
            available.add(out)
            for other in waiting.pop(out, []):
                missing[id(other)] -= 1
                if missing[id(other)] == 0:
                    heapq.heappush(heap, (position[id(other)], id(other), other))
    placed = {id(n) for n in order}
    return order, [n for n in nodes if id(n) not in placed]
