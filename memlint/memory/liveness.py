"""Inference activation peak of an ONNX graph from tensor liveness.

Part of the memory model (it reads only the IR); the ONNX frontend re-exports
:func:`inference_peak`.

The layers of an ONNX :class:`~memlint.ir.ModelGraph` run in their (topological) order.  Each
tensor is allocated when its node runs and freed after its last consumer (graph outputs stay
to the end).  Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference Dropout) share
their input's buffer; elementwise operators (Relu, Add, Mul, Sigmoid, ...) write into an input
that dies at that node when it has the same size in bytes, as ONNX Runtime's allocation
planner does.  Parameters are excluded (they are counted as weights); each tensor counts with
its own bytes per element.  Graph inputs are included while they are alive.
"""

from __future__ import annotations

import itertools
from typing import Optional

from memlint.memory.tensors import output_bytes

# The ONNX operators that compute one element of their output from the same element of their
# inputs.  The ONNX frontend's unary, binary and comparison shape rules are registered for
# these same lists (the memory model must not import a frontend, so they live here).
UNARY = (
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Softplus",
    "Softsign", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Gelu",
    "FastGelu", "QuickGelu", "Mish", "ThresholdedRelu", "Shrink", "Clip", "Floor", "Ceil",
    "Round", "Reciprocal", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Sign", "Not", "BitwiseNot", "Identity", "Swish", "CumSum",
    "ReverseSequence", "Trilu", "Bernoulli", "PRelu",
)
BINARY = (
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Mod", "BitShift",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor",
)
COMPARE = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")

VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
IN_PLACE = frozenset(UNARY) | frozenset(BINARY) | frozenset(COMPARE) | frozenset(
    {"Where", "Cast", "Softmax", "LogSoftmax", "BatchNormalization", "QuantizeLinear",
     "DequantizeLinear"}) - VIEWS - {"CumSum", "ReverseSequence", "Trilu", "Bernoulli"}
DEFAULT_ITEMSIZE = 4


def _sizes(layer, batch_size: int) -> list:
    """Bytes of each output of ``layer`` (None where the shape is unknown)."""
    return output_bytes(layer, layer.output_shape, batch_size, DEFAULT_ITEMSIZE)


def inference_peak(graph, batch_size: int, unknown: Optional[list] = None,
                   at_peak: Optional[list] = None) -> tuple:
    """``(peak bytes, name of the node at the peak, [(node name, live bytes), ...])`` for
    activations at ``batch_size``.  Tensors of unknown size count as 0 and their names are
    appended to ``unknown`` when a list is given; ``at_peak``, when given, gets the buffers
    alive at the peak as ``(tensor name, bytes)``, largest first (a buffer that several
    tensors share named by the first)."""
    layers = graph.layers
    last_use: dict = {}
    for index, layer in enumerate(layers):
        for name in layer.config.get("inputs", []):
            last_use[name] = index
    keep = {n for layer in layers for n in layer.config.get("graph_outputs", [])}
    buffers: dict = {}  # buffer id -> bytes
    refs: dict = {}  # buffer id -> tensors using it
    owner: dict = {}  # tensor name -> buffer id
    live_bytes, peak, peak_node, per_node = 0, 0, None, []
    counter = itertools.count()

    def release(name: str) -> int:
        buf = owner.pop(name, None)
        if buf is None:
            return 0
        refs[buf] -= 1
        if refs[buf] == 0:
            del refs[buf]
            return buffers.pop(buf)
        return 0

    for index, layer in enumerate(layers):
        outputs = layer.config.get("outputs", [])
        params = set(layer.config.get("parameter_outputs", []))
        inputs = [n for n in layer.config.get("inputs", []) if n in owner]
        sizes = _sizes(layer, batch_size)
        op_type = layer.config.get("op_type", layer.type)
        for i, name in enumerate(outputs):
            size = sizes[i] if i < len(sizes) else None
            if name in params:
                continue
            if size is None:
                if unknown is not None:
                    unknown.append(name)
                size = 0
            shared = None
            if i == 0 and inputs and op_type in VIEWS:
                shared = owner[inputs[0]]
            elif i == 0 and op_type in IN_PLACE and len(outputs) == 1:
                for source in inputs:
                    buf = owner[source]
                    if (last_use.get(source) == index and source not in keep
                            and refs.get(buf) == 1 and buffers.get(buf) == size
                            and not _is_input(layers, source)):
                        shared = buf
                        break
            if shared is not None:
                owner[name] = shared
                refs[shared] += 1
            else:
                buf = next(counter)
                buffers[buf], refs[buf], owner[name] = size, 1, buf
                live_bytes += size
        per_node.append((layer.name, live_bytes))
        if live_bytes > peak or peak_node is None:
            peak, peak_node = live_bytes, layer.name
            if at_peak is not None:
                named: dict = {}
                for tensor, buf in owner.items():
                    named.setdefault(buf, tensor)
                at_peak[:] = sorted(((tensor, buffers[buf]) for buf, tensor in named.items()
                                     if buffers[buf]), key=lambda item: -item[1])
        for name in set(layer.config.get("inputs", [])):
            if last_use.get(name) == index and name not in keep:
                live_bytes -= release(name)
        for name in outputs:
            if name not in last_use and name not in keep and name in owner:
                live_bytes -= release(name)
    return peak, peak_node, per_node


def _is_input(layers, name: str) -> bool:
    """True when ``name`` is a graph input (the caller owns that buffer)."""
    for layer in layers:
        if layer.type != "Input":
            return False
        if name in layer.config.get("outputs", []):
            return True
    return False
