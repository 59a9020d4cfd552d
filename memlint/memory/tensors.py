"""Sizes of the tensors a model makes: shared by the walk, the ONNX liveness and the reports."""

from __future__ import annotations

from typing import Optional

from memlint.ir import as_shape_list, shape_size

# Layers whose output is a view of their input (no new buffer is kept); "Input" and the
# ONNX op types are the ONNX frontend's graph inputs and view operators.
VIEW_LAYERS = frozenset({"InputLayer", "Flatten", "Reshape", "Input", "Squeeze", "Unsqueeze",
                         "Identity"})
INPUT_TYPES = frozenset({"InputLayer", "Input"})
# Slices of a tensor (``x[:, 0]``, ``x[..., :2]``): the backward pads the output's gradient
# into the input's shape, reading nothing of the forward
SLICES = frozenset({"GetItem"})


def tensor_bytes(shape, batch_size: int, element_bytes: int) -> Optional[int]:
    n = shape_size(shape, batch_size)
    return None if n is None else n * element_bytes


def output_bytes(layer, out, batch_size: int, element_bytes: int) -> list:
    """Bytes of each tensor of one call's output ``out`` (None where unknown).  A layer from
    an ONNX graph gives each output's bytes per element (``output_itemsizes``) and, for a
    leading dimension that is k times the batch, ``batch_factors``; outputs that are
    parameters or shape-only constants take no activation memory (0)."""
    config = layer.config
    itemsizes = config.get("output_itemsizes") or []
    factors = config.get("batch_factors") or []
    names = config.get("outputs") or []
    skip = set(config.get("parameter_outputs", [])) | set(config.get("shape_only_outputs", []))
    sizes = []
    for i, shape in enumerate(as_shape_list(out)):
        if i < len(names) and names[i] in skip:
            sizes.append(0)
            continue
        count = shape_size(shape, batch_size)
        if count is not None and shape and shape[0] is None and i < len(factors):
            count *= factors[i] or 1
        size = itemsizes[i] if i < len(itemsizes) and itemsizes[i] else element_bytes
        sizes.append(None if count is None else count * size)
    return sizes


def layer_activation_bytes(layer, batch_size: int, element_bytes: int) -> Optional[int]:
    """Bytes of all outputs of all calls of ``layer`` at ``batch_size`` (times the batches a
    call holds, ``call_batches``); None if unknown (a layer with no known output, as after a
    layer memlint cannot follow, included); 0 for a layer the step never runs."""
    if layer.idle:
        return 0
    if not layer.output_shapes or any(out is None for out in layer.output_shapes):
        return None
    total = 0
    for call, out in enumerate(layer.output_shapes):
        if layer.batches_of(call) == 0:  # a number of batches not known
            return None
        for size in output_bytes(layer, out, batch_size * layer.batches_of(call),
                                 element_bytes):
            if size is None:
                return None
            total += size
    return total
