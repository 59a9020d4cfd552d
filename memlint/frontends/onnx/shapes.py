"""Every tensor's shape and element type: ONNX shape inference, then memlint's own.

:func:`infer_shapes` binds the model's symbolic dimensions (``--dim name=value``; the first
dimension of each graph input is the batch and stays symbolic), runs
``onnx.shape_inference.infer_shapes`` with data propagation on a copy that holds no large
weights, and then walks the nodes in execution order with memlint's own inference
(:mod:`~memlint.frontends.onnx.infer_nn`, :mod:`~memlint.frontends.onnx.infer_tensor`) to fill
whatever ONNX left unknown.  What stays unknown is listed with node and tensor names.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

import memlint.frontends.onnx.infer_nn  # noqa: F401  (registers its operators)
import memlint.frontends.onnx.infer_tensor  # noqa: F401  (registers its operators)
from memlint.frontends.onnx.dims import BATCH, BOOL, INT64, is_known_dim, known, merge
from memlint.frontends.onnx.graphutil import label, subgraphs, topological
from memlint.frontends.onnx.registry import REGISTRY, NodeContext
from memlint.frontends.onnx.values import LIMIT, constant_attr, propagate, tensor_value
from memlint.records import record

BATCH_PARAM = "memlint_batch"  # the name given to an unnamed batch dimension
NO_LIMIT = 2 ** 31 - 1  # a Loop trip count this large means "no limit" (while loops)
# operators whose outputs are sequences or optionals, not tensors (no shape to report)
NON_TENSOR_OPS = frozenset({
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence",
    "SequenceMap", "Optional",
})


@record
class Tensor:
    """What is known about one tensor."""

    shape: Optional[list]  # dims (int, BATCH, unbound symbol name, None) or None: rank unknown
    elem_type: Optional[int]


@record
class ShapeResult:
    """Shapes of the main graph's tensors and what could not be determined."""

    tensors: dict  # name -> Tensor
    order: list  # NodeProtos in execution order
    labels: dict  # id(NodeProto) -> node label
    batch_symbols: set
    unplaced: list = field(default_factory=list)  # nodes in a cycle or reading unknown tensors
    unknown: list = field(default_factory=list)  # (node label, tensor name, reason)
    # tensors of an unknown shape, or computed from one (a Shape of it, the sizes taken
    # from that), and the unknown tensors among them whose shape follows from such an input
    tainted: set = field(default_factory=set)
    inherited: set = field(default_factory=set)
    invalid: list = field(default_factory=list)  # (node label, message): inputs the op refuses
    notes: list = field(default_factory=list)  # one-line remarks (ONNX inference failed ...)
    values: dict = field(default_factory=dict)  # name -> small constant value
    non_tensors: set = field(default_factory=set)  # sequences, maps, optionals


def _opsets(model) -> dict:
    found = {}
    for entry in model.opset_import:
        found[entry.domain or "ai.onnx"] = entry.version
    return found


def _dims_of(type_proto, batch_symbols: set, dims: dict) -> tuple:
    """(shape, elem_type) from an ONNX TypeProto (tensor types only)."""
    if not type_proto.HasField("tensor_type"):
        return None, None
    tensor = type_proto.tensor_type
    elem = tensor.elem_type or None
    if not tensor.HasField("shape"):
        return None, elem
    shape = []
    for dim in tensor.shape.dim:
        kind = dim.WhichOneof("value")
        if kind == "dim_value" and dim.dim_value >= 0:
            shape.append(int(dim.dim_value))
        elif kind == "dim_param" and dim.dim_param in dims:
            shape.append(int(dims[dim.dim_param]))
        elif kind == "dim_param" and (dim.dim_param in batch_symbols
                                      or dim.dim_param == BATCH_PARAM):
            shape.append(BATCH)
        elif kind == "dim_param":
            shape.append(dim.dim_param)
        else:
            shape.append(None)
    return shape, elem


def _batch_symbols(graph, initializers: set, dims: dict) -> set:
    """Names of the symbols that stand for the batch: the symbolic first dimension of each
    graph input, unless ``dims`` binds it."""
    found = set()
    for value in graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        if not value.type.tensor_type.HasField("shape") or not shape.dim:
            continue
        first = shape.dim[0]
        if first.WhichOneof("value") == "dim_param" and first.dim_param not in dims:
            found.add(first.dim_param)
    return found


def _stub(stub, name: str, data_type: int, dims) -> None:
    """Make ``stub`` a data-less (external) tensor with the given name, type and dims."""
    stub.name, stub.data_type = name, data_type
    stub.dims.extend(dims)
    stub.data_location = 1
    entry = stub.external_data.add()
    entry.key, entry.value = "location", "memlint-not-loaded"


def _large_constant(node):
    """The value tensor of a Constant node holding more than LIMIT elements, else None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
        return None
    for attr in node.attribute:
        if attr.name == "value" and attr.HasField("t"):
            size = 1
            for d in attr.t.dims:
                size *= d
            return attr.t if size > LIMIT else None
    return None


def _light_copy(model, initializers: set, dims: dict, batch_symbols: set):
    """A copy of ``model`` for ONNX shape inference: large initializers as data-less stubs,
    bound symbols replaced by their values, unnamed batch dimensions named."""
    import onnx

    copy = onnx.ModelProto()
    graph = model.graph
    for name in ("ir_version", "producer_name", "domain", "model_version"):
        setattr(copy, name, getattr(model, name))
    copy.opset_import.extend(model.opset_import)
    copy.functions.extend(model.functions)
    target = copy.graph
    target.name = graph.name
    for node in graph.node:
        big = _large_constant(node)
        if big is None:
            target.node.append(node)
        else:  # a weight held in a Constant node: ONNX only needs its type and dims
            _stub(target.initializer.add(), node.output[0], big.data_type, big.dims)
    target.input.extend(graph.input)
    target.output.extend(graph.output)
    target.value_info.extend(graph.value_info)
    for tensor in graph.initializer:
        size = 1
        for d in tensor.dims:
            size *= d
        if size <= LIMIT or tensor.data_location == 1:
            target.initializer.append(tensor)
        else:
            _stub(target.initializer.add(), tensor.name, tensor.data_type, tensor.dims)
    for value in target.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            kind = dim.WhichOneof("value")
            if kind == "dim_param" and dim.dim_param in dims:
                dim.dim_value = int(dims[dim.dim_param])
            elif i == 0 and (kind is None or kind == "dim_value" and dim.dim_value < 0):
                dim.dim_param = BATCH_PARAM
            elif kind == "dim_value" and dim.dim_value < 0:
                dim.Clear()
    return copy


def _onnx_inference(model, initializers, dims, batch_symbols, result) -> dict:
    """name -> (shape, elem_type) from ONNX's own inference (empty if it fails)."""
    import onnx

    copy = _light_copy(model, initializers, dims, batch_symbols)
    try:
        inferred = onnx.shape_inference.infer_shapes(copy, check_type=False, strict_mode=False,
                                                     data_prop=True)
    except Exception as exc:  # ONNX inference refuses some models: fall back to memlint's
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result.notes.append(f"ONNX shape inference failed ({first[:200]}); "
                            "memlint's own inference used alone")
        inferred = copy
    found = {}
    graph = inferred.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if value.type.WhichOneof("value") not in (None, "tensor_type"):
            result.non_tensors.add(value.name)
            continue
        shape, elem = _dims_of(value.type, batch_symbols, dims)
        if value.name in found:
            old_shape, old_elem = found[value.name]
            shape, elem = merge(old_shape, shape), old_elem or elem
        found[value.name] = (shape, elem)
    return found


def _declared(graph, batch_symbols, dims) -> dict:
    found = {}
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        found[value.name] = _dims_of(value.type, batch_symbols, dims)
    return found


def _node_attrs(node) -> dict:
    from onnx import helper

    attrs = {}
    for attr in node.attribute:
        if attr.type in (5, 10, 11, 12, 13):  # GRAPH(S), SPARSE_TENSOR(S), TYPE_PROTOS...
            continue
        try:
            attrs[attr.name] = helper.get_attribute_value(attr)
        except Exception:  # an attribute of a kind memlint does not read
            continue
    if node.op_type == "Constant":
        value, elem, shape = constant_attr(node)
        attrs["__value__"], attrs["__type__"], attrs["__dims__"] = value, elem, shape
    elif node.op_type == "ConstantOfShape":
        for attr in node.attribute:
            if attr.name == "value":
                attrs["__type__"] = attr.t.data_type
                attrs["__fill__"] = tensor_value(attr.t)
    return attrs


def infer_shapes(model, dims: Optional[dict] = None, use_onnx: bool = True) -> ShapeResult:
    """Shapes and element types of every tensor in the main graph of ``model``; the batch
    stays symbolic (:data:`BATCH`), ``dims`` binds other symbols by name."""
    dims = dict(dims or {})
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    batch_symbols = _batch_symbols(graph, initializers, dims)
    order, unplaced = topological(graph)
    labels = {id(n): label(n, i) for i, n in enumerate(graph.node)}
    result = ShapeResult({}, order, labels, batch_symbols, unplaced=unplaced)
    tensors = result.tensors
    values = result.values

    for tensor in graph.initializer:
        tensors[tensor.name] = Tensor([int(d) for d in tensor.dims], tensor.data_type)
        value = tensor_value(tensor)
        if value is not None:
            values[tensor.name] = value
    for sparse in graph.sparse_initializer:
        tensors[sparse.values.name] = Tensor([int(d) for d in sparse.dims],
                                             sparse.values.data_type)
    for value in graph.input:
        if value.name in initializers:
            continue
        shape, elem = _dims_of(value.type, batch_symbols, dims)
        if shape and shape[0] is None:
            shape[0] = BATCH
        tensors[value.name] = Tensor(shape, elem)
        if value.type.HasField("tensor_type") and not known(shape):
            names = sorted({d for d in shape or [] if isinstance(d, str) and d != BATCH})
            why = (f"graph input with symbolic dimension(s) {', '.join(names)} not bound "
                   "(use --dim NAME=VALUE)" if names else
                   "graph input with unknown dimensions (give its shape)")
            result.unknown.append((value.name, value.name, why))
            result.tainted.add(value.name)

    onnx_shapes = _onnx_inference(model, initializers, dims, batch_symbols, result) \
        if use_onnx else {}
    declared = _declared(graph, batch_symbols, dims) if use_onnx else {}
    walker = _Walker(_opsets(model), onnx_shapes, declared, batch_symbols, dims)
    walker.walk(order, labels, tensors, values, result)
    for node in unplaced:
        result.notes.append(f"node '{labels[id(node)]}' ({node.op_type}) is in a cycle or "
                            "reads a tensor nothing produces")
    return result


class _Walker:
    """memlint's own inference over nodes in execution order, merged with ONNX's shapes."""

    def __init__(self, opsets, onnx_shapes, declared, batch_symbols, dims):
        self.opsets, self.onnx_shapes, self.declared = opsets, onnx_shapes, declared
        self.batch_symbols, self.dims = batch_symbols, dims
        self.depth = 0

    def walk(self, order, labels, tensors, values, result) -> None:
        for node in order:
            self.node(node, labels[id(node)], tensors, values, result)

    def node(self, node, node_label, tensors, values, result) -> None:
        inputs = list(node.input)
        ctx = NodeContext(
            node=node,
            opset=self.opsets.get(node.domain or "ai.onnx", self.opsets.get("ai.onnx", 1)),
            shapes=[_get(tensors, n).shape for n in inputs],
            types=[_get(tensors, n).elem_type for n in inputs],
            values=[values.get(n) for n in inputs],
            attrs=_node_attrs(node),
        )
        own, invalid = None, None
        fn = REGISTRY.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            own = [(ctx.attrs.get("__dims__"), ctx.attrs.get("__type__"))]
        elif node.op_type == "If" and node.domain in ("", "ai.onnx"):
            own = self.branches(node, tensors, values)
        elif node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
            own = self.loop(node, tensors, values)
        elif fn is not None:
            try:
                own = fn(ctx)
            except ValueError as exc:
                invalid = str(exc)
            except (TypeError, IndexError, KeyError, ZeroDivisionError) as exc:
                result.notes.append(f"node '{node_label}' ({node.op_type}): memlint's "
                                    f"inference failed ({type(exc).__name__}: {exc})")
        outputs = []
        onnx_knows = True
        for i, name in enumerate(node.output):
            if not name:
                outputs.append((None, None))
                continue
            mine = own[i] if own is not None and i < len(own) else (None, None)
            theirs = self.onnx_shapes.get(name) or self.declared.get(name) or (None, None)
            onnx_knows = onnx_knows and known(theirs[0])
            shape = theirs[0] if known(theirs[0]) else merge(theirs[0], mine[0])
            elem = theirs[1] or mine[1]
            tensors[name] = Tensor(None if shape is None else list(shape), elem)
            outputs.append((tensors[name].shape, elem))
        if invalid is not None and not (onnx_knows and node.output):
            result.invalid.append((node_label, invalid))  # ONNX accepted it otherwise
        if node.op_type == "Constant" and ctx.attrs.get("__value__") is not None:
            values[node.output[0]] = ctx.attrs["__value__"]
        else:
            for name, value in zip(node.output, propagate(ctx, outputs)):
                if name and value is not None and value.size <= LIMIT:
                    values[name] = value
        if node.op_type in NON_TENSOR_OPS:
            result.non_tensors.update(node.output)
        reads_unknown = any(n in result.tainted for n in node.input if n)
        for name in node.output:
            if not name or name in result.non_tensors:
                continue
            shape = tensors[name].shape
            if reads_unknown or not known(shape):
                result.tainted.add(name)
            if reads_unknown and not known(shape):
                result.inherited.add(name)
            if shape is None:
                why = ("no shape inference for operator "
                       f"{node.domain + '.' if node.domain else ''}{node.op_type}"
                       if own is None else "rank unknown")
                result.unknown.append((node_label, name, why))
            elif not known(shape):
                bad = [d for d in shape if not is_known_dim(d)]
                names = sorted({d for d in bad if isinstance(d, str)})
                why = (f"symbolic dimension(s) {', '.join(names)} not bound (use --dim)"
                       if names else "dimension(s) unknown")
                result.unknown.append((node_label, name, why))

    def subgraph(self, graph, tensors, values, bound=None) -> list:
        """(shape, elem_type) of each output of ``graph`` inferred with the outer tensors in
        scope and ``bound`` (name -> Tensor) giving its inputs."""
        inner, inner_values = dict(tensors), dict(values)
        for value in graph.input:
            shape, elem = _dims_of(value.type, self.batch_symbols, self.dims)
            given = (bound or {}).get(value.name, _NO_TENSOR)
            inner[value.name] = Tensor(merge(given.shape, shape), given.elem_type or elem)
            inner_values.pop(value.name, None)
        for tensor in graph.initializer:
            inner[tensor.name] = Tensor([int(d) for d in tensor.dims], tensor.data_type)
            value = tensor_value(tensor)
            if value is not None:
                inner_values[tensor.name] = value
        order, rest = topological(graph)
        labels = {id(n): label(n, i) for i, n in enumerate(graph.node)}
        self.walk(order + rest, labels, inner, inner_values, ShapeResult({}, [], {}, set()))
        outs = []
        for value in graph.output:
            declared = _dims_of(value.type, self.batch_symbols, self.dims)
            computed = inner.get(value.name, _NO_TENSOR)
            shape = computed.shape if known(computed.shape) else merge(
                declared[0], computed.shape)
            outs.append((shape, computed.elem_type or declared[1]))
        return outs

    def branches(self, node, tensors, values) -> list:
        """An If node's outputs: each branch inferred with the outer tensors in scope; where
        the branches disagree on a dimension it is unknown."""
        if self.depth > 8:
            return None
        self.depth += 1
        try:
            found = [self.subgraph(graph, tensors, values) for graph in subgraphs(node)]
        finally:
            self.depth -= 1
        if not found:
            return None
        return [_agree([outs[i] for outs in found if i < len(outs)])
                for i in range(len(node.output))]

    def loop(self, node, tensors, values) -> list:
        """A Loop node's outputs from its body: a loop-carried value keeps the body's shape
        where it agrees with the initial value's (a dimension that changes between iterations
        is unknown); a scan output gets a leading dimension, the trip count when it is a
        constant (an upper bound when the condition can end the loop early)."""
        bodies = subgraphs(node)
        if self.depth > 8 or len(bodies) != 1:
            return None
        body = bodies[0]
        carried = list(node.input[2:])
        initial = [_get(tensors, name) for name in carried]
        bound = {value.name: tensor for value, tensor in zip(body.input[2:], initial)}
        bound.update(zip([v.name for v in body.input[:2]],
                         [Tensor([], INT64), Tensor([], BOOL)]))
        self.depth += 1
        try:
            outs = self.subgraph(body, tensors, values, bound)[1:]
        finally:
            self.depth -= 1
        trip = values.get(node.input[0]) if node.input and node.input[0] else None
        trip = int(trip.reshape(-1)[0]) if trip is not None and trip.dtype != object \
            and trip.size == 1 else None
        if trip is not None and trip >= NO_LIMIT:
            trip = None  # a while loop: only the condition ends it
        found = [_agree([out, (tensor.shape, tensor.elem_type)])
                 for out, tensor in zip(outs, initial)]
        for shape, elem in outs[len(initial):]:
            found.append((None if shape is None else [trip] + list(shape), elem))
        return found


def _agree(column) -> tuple:
    """One (shape, elem_type) from several that should be equal: a dimension on which they
    disagree is unknown, and so is the rank when that differs."""
    shapes = [c[0] for c in column]
    elem = next((c[1] for c in column if c[1]), None)
    if not shapes or any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return (None, elem)
    return ([d if all(s[j] == d for s in shapes) else None
             for j, d in enumerate(shapes[0])], elem)


_NO_TENSOR = Tensor(None, None)


def _get(tensors: dict, name: str) -> Tensor:
    return tensors.get(name, _NO_TENSOR) if name else _NO_TENSOR
