"""Models used as layers, opened up for the walk: each call of a nested model (or of a layer
class of the file) whose inside is known (:class:`~memlint.ir.InnerCalls`) is replaced by the
layer calls it runs, so that each of them keeps what its own kind keeps for backward (a
convolution's input, a ReLU's mask, pooling indices) instead of the outputs alone.

A nested layer called twice becomes inner layers called twice (their weights count once, as
a shared layer's do); a frozen nested model makes every layer inside frozen.  The opened
graph is the walk's only: tables and rules keep the layers as Keras lists them."""

from __future__ import annotations

import itertools
from dataclasses import replace

from memlint.ir import ModelGraph, Weight, as_shape_list

_TOP = "top"  # a reference to a call of the graph's own layers, resolved at the end


def opened(graph: ModelGraph) -> ModelGraph:
    """``graph`` with every nested call whose inside is known replaced by its calls, and
    the operations on tensors (``graph.operations``) walked as nodes of their own."""
    if not any(any(c is not None for c in layer.inner_calls) for layer in graph.layers):
        if not graph.operations:
            return graph
        return replace(graph, layers=list(graph.layers) + list(graph.operations), sized=None,
                       operations=[])
    opener = _Opener()
    top = {}
    for node in list(graph.layers) + list(graph.operations):
        for c in range(max(len(node.output_shapes), 1)):
            inbound = node.inbound[c] if c < len(node.inbound) else []
            refs = [(_TOP, name, call, out) for name, call, out in inbound]
            top[(node.name, c)] = opener.visit(node, c, refs, False)
    layers = opener.nodes(top)
    # the model's outputs as the opened calls make them (a nested model's output is its
    # inner layer's); none where one of them is not a layer call's
    outputs = tuple(opener.resolve((_TOP,) + tuple(key)) for key in graph.outputs)
    if None in outputs:
        outputs = ()
    # a layer inside whose tensors nothing reads is no model output, unless it makes an
    # output of the nested call (a model that ends in a nested model)
    own = {node.name for node in graph.layers} | {node.name for node in graph.operations}
    inside = tuple(layer.name for layer in layers
                   if layer.name not in own and layer.name not in opener.exposed)
    return replace(graph, layers=layers, sized=None, opened_inner=inside, operations=[],
                   opened_unmapped=tuple(sorted(opener.unmapped - opener.exposed)),
                   outputs=outputs)


def as_registry_kinds(graph: ModelGraph) -> ModelGraph:
    """``graph`` with each layer whose class derives from a registry layer (``LayerNode.kind``)
    walked as that registry class: a ``ScaledConv2D(Conv2D)`` keeps what a Conv2D keeps; a
    derived class that builds itself has no registry kind (its name may be a registry
    class's, ``class DepthwiseConv2D(Conv2D)``, while its config is not that class's)."""
    if not any(layer.kind is not None for layer in graph.layers):
        return graph
    layers = [replace(layer, type=layer.kind or "Layer") if layer.kind is not None else layer
              for layer in graph.layers]
    return replace(graph, layers=layers)


class _Opener:
    def __init__(self):
        self.records = []  # (name, template node, frozen, input shape, output shape, refs)
        self.uids = itertools.count()
        self.exposed = set()  # the names of the layers inside that make a nested output
        self.unmapped = set()  # the layers called by a layer class's call() (InnerCalls)
        self.resolve = None  # a reference to a call's output, as the opened graph names it

    def visit(self, node, c: int, refs: list, frozen: bool, prefix: str = "",
              mapped: bool = True, batches: int = 1) -> list:
        """Emit one call of ``node`` (opened when its inside is known); its outputs as
        references.  ``mapped``: the call that runs it is a model's (a tensor map);
        ``batches``: how many batches the call that runs it holds (the calls inside hold as
        many times theirs)."""
        name = prefix + node.name
        batches *= node.batches_of(c)
        if not mapped:
            self.unmapped.add(name)
        inner = node.inner_calls[c] if c < len(node.inner_calls) else None
        if inner is not None and _same_weights(node, inner):
            frozen = frozen or not any(w.trainable for w in node.weights)
            made = {}  # (inner name, call id) -> the outputs of that call
            for sub, sid in zip(inner.nodes, inner.ids):
                raw = sub.inbound[0] if sub.inbound else []
                sub_refs = []
                for ref_name, ref_call, ref_out in raw:
                    if (ref_name, ref_call) in inner.inputs:
                        position = inner.inputs[(ref_name, ref_call)]
                        if position < len(refs):
                            sub_refs.append(refs[position])
                    elif (ref_name, ref_call) in made:
                        outs = made[(ref_name, ref_call)]
                        if outs:
                            sub_refs.append(outs[min(ref_out, len(outs) - 1)])
                    else:  # an operation outside the layers: the walk sizes it
                        sub_refs.append((name + "/" + ref_name, ref_call, ref_out))
                if not raw:
                    sub_refs = list(refs)
                made[(sub.name, sid)] = self.visit(sub, 0, sub_refs, frozen, name + "/",
                                                   inner.mapped, batches)
            outputs = []
            for out_name, out_call, out_index in inner.outputs:
                outs = made.get((out_name, out_call)) or []
                outputs.append(outs[min(out_index, len(outs) - 1)] if outs else None)
            self.exposed.update(ref[0] for ref in outputs if ref is not None)
            return outputs
        uid = next(self.uids)
        in_shape = node.input_shapes[c] if c < len(node.input_shapes) else None
        out_shape = node.output_shapes[c] if c < len(node.output_shapes) else None
        self.records.append((name, uid, node, frozen, in_shape, out_shape, refs, batches))
        count = max(len(as_shape_list(out_shape)), 1) if out_shape is not None else 1
        return [(name, uid, k) for k in range(count)]

    def nodes(self, top: dict) -> list:
        """The opened graph's nodes: one per name, with a call per record."""
        out, by_name, index = [], {}, {}
        for name, uid, node, frozen, in_shape, out_shape, _, batches in self.records:
            target = by_name.get(name)
            if target is None:
                target = replace(node, name=name, input_shapes=[], output_shapes=[],
                                 inbound=[], inner_calls=[], call_batches=[],
                                 weights=_frozen(node.weights) if frozen else node.weights)
                by_name[name] = target
                out.append(target)
            index[uid] = len(target.inbound)
            target.call_batches.append(batches)
            target.input_shapes.append(in_shape)
            if out_shape is not None:
                target.output_shapes.append(out_shape)
            target.inbound.append([])

        def resolve(ref):
            if ref is None:
                return None
            if ref[0] == _TOP:
                outs = top.get((ref[1], ref[2]))
                if outs is None:  # an operation outside the layers, as the graph named it
                    return (ref[1], ref[2], ref[3])
                ref = outs[min(ref[3], len(outs) - 1)] if outs else None
                if ref is None or ref[0] == _TOP:
                    return None
            if isinstance(ref[1], int) and ref[1] in index and ref[0] in by_name:
                return (ref[0], index[ref[1]], ref[2])
            return ref

        self.resolve = resolve
        for name, uid, _, _, _, _, refs, _ in self.records:
            resolved = [resolve(r) for r in refs]
            by_name[name].inbound[index[uid]] = [r for r in resolved if r is not None]
        for target in out:
            if all(b == 1 for b in target.call_batches):
                target.call_batches = []
        return out


def _same_weights(node, inner) -> bool:
    """The calls inside carry the nested layer's weights (nothing unknown was dropped)."""
    seen, total = set(), 0
    for sub in inner.nodes:
        if sub.name not in seen:
            seen.add(sub.name)
            total += sub.params
    return total == node.params


def _frozen(weights: list) -> list:
    return [replace(w, trainable=False) if isinstance(w, Weight) else w for w in weights]
