"""Convolution and pooling windows of ONNX nodes in the layer-config terms the rules read.

MEM003 (deep stack on tiny input) looks at ``kernel_size`` / ``pool_size``, ``strides``,
``dilation_rate``, ``padding`` and ``data_format`` in a layer's config, as Keras names them.
ONNX keeps the same facts in node attributes (``kernel_shape``, ``strides``, ``dilations``,
``pads``, ``auto_pad``) and lays tensors out channels first.  Explicit pads that equal
TensorFlow's 'same' padding (or none at all) map to 'same' / 'valid'; any other padding is
left out, so the rule only judges such a node by its collapsed-map finding.
"""

from __future__ import annotations

from typing import Optional

CONVOLUTIONS = frozenset({"Conv", "ConvInteger", "QLinearConv"})
POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})


def window_config(node, weight_shape: Optional[list]) -> dict:
    """``kernel_size``/``pool_size``, ``strides``, ``dilation_rate``, ``padding`` and
    ``data_format`` for a Conv or pooling node; {} for other nodes or unknown kernels."""
    if node.op_type not in CONVOLUTIONS | POOLS:
        return {}
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    kernel = attrs.get("kernel_shape")
    if kernel is None and weight_shape and all(isinstance(d, int) for d in weight_shape[2:]):
        kernel = weight_shape[2:]
    if not kernel:
        return {}
    kernel = tuple(int(k) for k in kernel)
    rank = len(kernel)
    strides = tuple(int(s) for s in attrs.get("strides") or (1,) * rank)
    dilations = tuple(int(d) for d in attrs.get("dilations") or (1,) * rank)
    config = {"strides": strides, "data_format": "channels_first"}
    config["pool_size" if node.op_type in POOLS else "kernel_size"] = kernel
    if node.op_type not in POOLS:
        config["dilation_rate"] = dilations
    padding = _padding(attrs, kernel, strides, dilations)
    if padding is not None:
        config["padding"] = padding
    return config


def _padding(attrs: dict, kernel: tuple, strides: tuple, dilations: tuple) -> Optional[str]:
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return "same"
    if auto == "VALID":
        return "valid"
    pads = [int(p) for p in attrs.get("pads") or (0,) * (2 * len(kernel))]
    if not any(pads):
        return "valid"
    rank = len(kernel)
    if all(s == 1 for s in strides):
        same = all(pads[i] == ((k - 1) * d) // 2 and pads[i + rank] == (k - 1) * d - pads[i]
                   for i, (k, d) in enumerate(zip(kernel, dilations)))
        if same:
            return "same"
    return None
