"""Keras's layer order for functional models."""

from __future__ import annotations

from typing import Optional


def functional_order(inputs: list, outputs: list) -> list:
    """Layers of a functional model in Keras's order, each with the calls inside the model.

    Follows Keras's graph mapping: nodes are visited depth-first from the outputs, layers
    are grouped by depth (inputs deepest) and ordered within a depth by first visit.
    """
    op_index: dict = {}
    decreasing = functional_nodes(inputs, outputs, op_index)

    node_depth: dict = {}
    op_depth: dict = {}
    for layer, call_index in reversed(decreasing):
        node = (id(layer), call_index)
        depth = max(node_depth.setdefault(node, 0), op_depth.get(id(layer), 0))
        op_depth[id(layer)] = depth
        node_depth[node] = depth
        if layer.type == "InputLayer":
            continue
        for parent in layer.calls[call_index].parents:
            key = (id(parent[0]), parent[1])
            node_depth[key] = max(depth + 1, node_depth.get(key, 0))
    for tensor in inputs:
        layer = tensor.producer[0] if tensor.producer else None
        if layer is not None and id(layer) not in op_depth:
            op_depth[id(layer)] = 0
            op_index[id(layer)] = (-1, layer)
            decreasing.append((layer, 0))

    calls_by_layer: dict = {}
    for layer, call_index in decreasing:
        calls_by_layer.setdefault(id(layer), set()).add(call_index)
    layers = sorted(op_index.values(), key=lambda item: (-op_depth[id(item[1])], item[0]))
    return [(layer, calls_by_layer[id(layer)]) for _, layer in layers]


def functional_nodes(inputs: list, outputs: list, op_index: Optional[dict] = None) -> list:
    """The calls (layer, call index) that lead from ``inputs`` to ``outputs``, each after the
    calls that feed it (depth-first post-order from the outputs, as Keras visits them).
    ``op_index`` collects each layer's first-visit position."""
    op_index = {} if op_index is None else op_index
    input_ids = {t.producer for t in inputs if t.producer}
    finished: set = set()
    decreasing: list = []

    def visit(start) -> None:
        # depth-first, parents before the node (post-order), without Python recursion:
        # models thousands of layers deep are legitimate
        stack = [(start, None)]
        while stack:
            producer, parents = stack[-1]
            layer, call_index, _ = producer
            node = (id(layer), call_index)
            if parents is None:
                if node in finished:
                    stack.pop()
                    continue
                op_index.setdefault(id(layer), (len(op_index), layer))
                expand = layer.type != "InputLayer" and producer not in input_ids
                parents = iter(layer.calls[call_index].parents if expand else ())
                stack[-1] = (producer, parents)
            parent = next(parents, None)
            if parent is not None:
                if (id(parent[0]), parent[1]) not in finished:
                    stack.append((parent, None))
                continue
            stack.pop()
            if node not in finished:
                finished.add(node)
                decreasing.append((layer, call_index))

    for tensor in outputs:
        if tensor.producer:
            visit(tensor.producer)

    return decreasing
