"""An ONNX file as a :class:`~memlint.ir.ModelGraph`: one layer per node, in execution order.

:func:`analyze_onnx` loads the file (never its external weights), infers every tensor's
shape, finds the parameters, and builds the IR the memory model and the rules read:

* graph inputs become layers of type ``"Input"`` (their shapes are ``graph.input_shapes``);
* each node becomes a layer named after the node (``<op_type>_<index>`` when unnamed), with
  the ONNX op type as its type, the parameters it owns as weights, and in ``config`` the
  op type, domain, input and output tensor names, the bytes per element of each output, the
  outputs that are graph outputs, and ``batch_factors``;
* shapes put the batch first as ``None`` where the model's batch dimension is symbolic.  A
  leading dimension that is ``k`` times the batch (``[batch * heads, ...]``) is ``k * batch``
  when ``batch_size`` is given; without it the shape has None and ``batch_factors`` says
  ``k``, so sizes scale by ``k`` (:func:`~memlint.memory.liveness.inference_peak`
  honours it).
"""

from __future__ import annotations

import os
from dataclasses import field
from typing import Optional

from memlint.diagnostics import Diagnostic
from memlint.frontends.onnx.dims import BATCH, FLOAT_TYPES, batch_factor, is_int, itemsize
from memlint.frontends.onnx.graphutil import node_reads
from memlint.frontends.onnx.loader import load_model
from memlint.frontends.onnx.params import collect_parameters
from memlint.frontends.onnx.shapes import infer_shapes
from memlint.frontends.onnx.windows import window_config
from memlint.ir import LayerNode, Location, ModelGraph, TrainingSetup, Unresolved
from memlint.records import record

INPUT_TYPE = "Input"
MAX_NOTES = 50  # MEM900 notes per file before they are summarised


@record
class OnnxResult:
    """What :func:`analyze_onnx` found in one file."""

    models: list = field(default_factory=list)  # one ModelGraph
    diagnostics: list = field(default_factory=list)  # list[Diagnostic]
    unresolved: list = field(default_factory=list)  # list[Unresolved]
    tensors: dict = field(default_factory=dict)  # tensor name -> (IR shape, itemsize)


def to_ir_shape(shape, batch_size: Optional[int] = None):
    """An inference shape in the IR's convention: the batch first as None; a batch elsewhere,
    or a multiple of the batch, becomes its value at ``batch_size`` (None when not given);
    unknown or unbound dims become None."""
    if shape is None:
        return None
    out = []
    for i, d in enumerate(shape):
        factor = batch_factor(d)
        if is_int(d):
            out.append(int(d))
        elif d == BATCH and i == 0:
            out.append(None)
        elif factor is not None and batch_size is not None:
            out.append(factor * batch_size)
        else:
            out.append(None)
    return tuple(out)


def _dtype_policy(model, shapes) -> str:
    """float16/bfloat16 when the model's float weights and inputs are mostly 16-bit."""
    counts: dict = {}
    for tensor in model.graph.initializer:
        if tensor.data_type in FLOAT_TYPES:
            size = 1
            for d in tensor.dims:
                size *= d
            counts[tensor.data_type] = counts.get(tensor.data_type, 0) + size
    if not counts:
        for value in model.graph.input:
            elem = shapes.tensors.get(value.name)
            if elem is not None and elem.elem_type in FLOAT_TYPES:
                counts[elem.elem_type] = counts.get(elem.elem_type, 0) + 1
    if not counts:
        return "float32"
    top = max(counts, key=counts.get)
    return {10: "float16", 16: "bfloat16", 11: "float64"}.get(top, "float32")


def _weight_shape(node, shapes) -> Optional[list]:
    """The shape of a Conv node's weight input (its kernel), when known."""
    if node.op_type not in ("Conv", "ConvInteger") or len(node.input) < 2:
        return None
    tensor = shapes.tensors.get(node.input[1])
    return list(tensor.shape) if tensor is not None and tensor.shape is not None else None


def analyze_onnx(path, batch_size: Optional[int] = None, dims: Optional[dict] = None,
                 use_onnx_inference: bool = True) -> OnnxResult:
    """Analyse the ONNX file at ``path``; raises
    :class:`~memlint.frontends.onnx.loader.OnnxLoadError` when it is not a readable model."""
    path = os.fspath(path)
    model, load_notes = load_model(path)
    return analyze_model(model, path, batch_size=batch_size, dims=dims,
                         use_onnx_inference=use_onnx_inference, diagnostics=load_notes)


def analyze_model(model, path: str, batch_size: Optional[int] = None,
                  dims: Optional[dict] = None, use_onnx_inference: bool = True,
                  diagnostics: Optional[list] = None) -> OnnxResult:
    """Analyse an already loaded ModelProto as if it were the file ``path``."""
    result = OnnxResult(diagnostics=list(diagnostics or []))
    shapes = infer_shapes(model, dims=dims, use_onnx=use_onnx_inference)
    params = collect_parameters(model, shapes.order + shapes.unplaced, shapes.values)
    graph = model.graph
    location = Location(path, 1)
    name = graph.name or os.path.splitext(os.path.basename(path))[0]
    setup = TrainingSetup(mode="infer", mode_source="ONNX default", batch_size=batch_size,
                          batch_source="configured batch size" if batch_size else
                          "assumed 1: the graph's batch dimension is symbolic; pass --batch-size",
                          dtype_policy=_dtype_policy(model, shapes), dtype_source="ONNX tensors")
    ir = ModelGraph(name=name, location=location, kind="ONNX", variable=None, setup=setup)
    result.models.append(ir)

    def ir_shape(tensor_name: str):
        tensor = shapes.tensors.get(tensor_name)
        return to_ir_shape(tensor.shape if tensor else None, batch_size)

    def factor_of(tensor_name: str) -> int:
        """k when the tensor's leading dimension is k times the batch (k > 1), else 1."""
        tensor = shapes.tensors.get(tensor_name)
        if tensor is None or not tensor.shape or batch_size is not None:
            return 1
        return batch_factor(tensor.shape[0]) or 1

    def size_of(tensor_name: str):
        tensor = shapes.tensors.get(tensor_name)
        return itemsize(tensor.elem_type) if tensor else None

    producer: dict = {}  # tensor -> (layer name, output index)
    initializers = {t.name for t in graph.initializer}
    graph_outputs = {v.name for v in graph.output}
    ir.open_dims = tuple(sorted({
        d for value in graph.input if value.name not in initializers
        and value.name in shapes.tensors for d in shapes.tensors[value.name].shape or []
        if isinstance(d, str) and d != BATCH}))
    for value in graph.input:
        if value.name in initializers:
            continue
        shape = ir_shape(value.name)
        ir.input_shapes.append(shape)
        ir.layers.append(LayerNode(
            name=value.name, type=INPUT_TYPE, location=Location(path, 1, node=value.name),
            config={"op_type": INPUT_TYPE, "inputs": [], "outputs": [value.name],
                    "output_itemsizes": [size_of(value.name)], "domain": "",
                    "graph_outputs": [value.name] if value.name in graph_outputs else []},
            input_shapes=[shape], output_shapes=[shape]))
        producer[value.name] = (value.name, 0)

    if ir.input_shapes and all(shape and shape[0] is not None for shape in ir.input_shapes):
        fixed = ir.input_shapes[0][0]
        setup.batch_size, setup.batch_source = fixed, "fixed by the graph's input shapes"
        if batch_size is not None and batch_size != fixed:
            result.diagnostics.append(Diagnostic(
                "MEM900", "unresolved-value", "info",
                f"the graph fixes the batch dimension of its inputs at {fixed}; "
                f"--batch-size {batch_size} does not change its shapes (export with a dynamic "
                "batch axis to analyse other sizes)", path, model=name))
    invalid = dict(shapes.invalid)
    for node in shapes.order + shapes.unplaced:
        label = shapes.labels[id(node)]
        reads = [n for n in node_reads(node)
                 if n not in params.tensors and n not in params.shape_only
                 and n not in initializers]
        outputs = [n for n in node.output if n]
        out_shapes = [ir_shape(n) for n in outputs]
        in_shapes = [ir_shape(n) for n in reads]
        layer = LayerNode(
            name=label, type=node.op_type, location=Location(path, 1, node=label),
            config={"op_type": node.op_type, "node": label, "domain": node.domain,
                    "inputs": reads, "outputs": outputs,
                    "output_itemsizes": [size_of(n) for n in outputs],
                    "batch_factors": [factor_of(n) for n in outputs],
                    "graph_outputs": [n for n in outputs if n in graph_outputs],
                    "parameter_outputs": [n for n in outputs if n in params.tensors],
                    "shape_only_outputs": [n for n in outputs if n in params.shape_only],
                    **window_config(node, _weight_shape(node, shapes))},
            weights=list(params.owned.get(id(node), [])),
            input_shapes=[in_shapes[0] if len(in_shapes) == 1 else in_shapes],
            output_shapes=[out_shapes[0] if len(out_shapes) == 1 else out_shapes],
            inbound=[[(producer[n][0], 0, producer[n][1]) for n in reads if n in producer]])
        if label in invalid:
            layer.unresolved = invalid[label]
        ir.layers.append(layer)
        for index, out in enumerate(node.output):
            if out:
                producer[out] = (label, index)

    for label, message in shapes.invalid:
        unresolved = Unresolved(f"node '{label}'", f"invalid inputs: {message}", location)
        result.unresolved.append(unresolved)
        result.diagnostics.append(Diagnostic(
            "MEM901", "invalid-layer", "error",
            f"node '{label}': ONNX would reject its inputs: {message}", path, model=name,
            data={"node": label}, node=label))
    notes = inherited = 0
    by_name = {layer.name: layer for layer in ir.layers}
    for label, tensor, why in shapes.unknown:
        result.unresolved.append(Unresolved(f"tensor '{tensor}' of node '{label}'", why,
                                            location))
        layer = by_name.get(label)
        if layer is not None and layer.unresolved is None:
            layer.unresolved = f"shape of '{tensor}' unknown: {why}"
        if tensor in shapes.inherited:  # it follows from one noted before it
            inherited += 1
            continue
        notes += 1
        if notes <= MAX_NOTES:
            result.diagnostics.append(Diagnostic(
                "MEM900", "unresolved-value", "info",
                (f"graph input '{tensor}'" if label == tensor else
                 f"node '{label}': shape of tensor '{tensor}'")
                + f" is unknown ({why}); left out of the memory estimate", path, model=name,
                data={"node": label, "tensor": tensor}, node=label))
    if notes > MAX_NOTES:
        result.diagnostics.append(Diagnostic(
            "MEM900", "unresolved-value", "info",
            f"{notes - MAX_NOTES} more tensors with unknown shapes", path, model=name))
    if inherited:
        result.diagnostics.append(Diagnostic(
            "MEM900", "unresolved-value", "info",
            f"{inherited} more tensor(s) computed from those above have unknown shapes too",
            path, model=name))
    for note in shapes.notes:
        result.diagnostics.append(Diagnostic("MEM900", "unresolved-value", "info", note, path,
                                             model=name))
    if params.unused:
        result.diagnostics.append(Diagnostic(
            "MEM900", "unresolved-value", "info",
            f"{len(params.unused)} initializer(s) read by no node (not counted): "
            + ", ".join(params.unused[:5]), path, model=name))
    ir.unresolved = list(result.unresolved)
    for tensor_name, tensor in shapes.tensors.items():
        result.tensors[tensor_name] = (to_ir_shape(tensor.shape, batch_size),
                                       itemsize(tensor.elem_type))
    return result
