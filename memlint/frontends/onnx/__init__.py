"""The ONNX frontend: exported ``.onnx`` graphs to :class:`~memlint.ir.ModelGraph` objects.

The ``onnx`` package is imported only when a file is analysed, so Keras-only runs never load
it.  :func:`analyze_onnx` is the entry point; :func:`inference_peak` (from
:mod:`memlint.memory.liveness`) computes the inference activation peak from tensor liveness
over the graph's execution order.
"""

from memlint.frontends.onnx.graph import OnnxResult, analyze_model, analyze_onnx
from memlint.frontends.onnx.loader import OnnxLoadError, load_model
from memlint.memory.liveness import inference_peak

__all__ = ["OnnxLoadError", "OnnxResult", "analyze_model", "analyze_onnx", "inference_peak",
           "load_model"]
