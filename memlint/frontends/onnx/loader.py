"""Reading an ``.onnx`` file without its external weights, and refusing what is not ONNX.

:func:`load_model` parses the protobuf with ``load_external_data=False``: memlint needs the
shapes of the weights, never their values, so files named by external-data references are
not opened.  A reference that points outside the model's folder (an absolute path or a
``..`` that escapes it) is reported and never followed.  Files that are empty, truncated,
corrupt or not ONNX at all raise :class:`OnnxLoadError` with a one-line message.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath, PureWindowsPath


class OnnxLoadError(Exception):
    """The file cannot be read as an ONNX model (the CLI reports it and exits 2)."""


def _escapes_folder(location: str) -> bool:
    """True when an external-data location is absolute or climbs out of the model folder."""
    if not location:
        return False
    if location.startswith(("/", "\\")) or PureWindowsPath(location).drive:
        return True
    depth = 0
    for part in PurePosixPath(location.replace("\\", "/")).parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in (".", ""):
            depth += 1
    return False


def _graphs(graph):
    """``graph`` and every subgraph in its nodes' attributes, depth first."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        for node in current.node:
            for attr in node.attribute:
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)


def external_locations(model) -> list:
    """(tensor name, location) for every initializer whose data lives in another file."""
    found = []
    for graph in _graphs(model.graph):
        for tensor in list(graph.initializer) + [s.values for s in graph.sparse_initializer]:
            if tensor.data_location != 1:  # TensorProto.EXTERNAL
                continue
            entries = {e.key: e.value for e in tensor.external_data}
            found.append((tensor.name, entries.get("location", "")))
    return found


def _check_references(graph) -> None:
    """Raise when a node of the main graph reads a tensor nothing defines (a cut-off file)."""
    known = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    known |= {s.values.name for s in graph.sparse_initializer}
    for node in graph.node:
        known.update(node.output)
    for node in graph.node:
        for name in node.input:
            if name not in known:
                label = node.name or node.op_type
                raise OnnxLoadError(
                    f"truncated or invalid ONNX model: node '{label}' reads tensor '{name}' "
                    "that no node, input or initializer defines")
    for out in graph.output:
        if out.name not in known:
            raise OnnxLoadError(f"truncated or invalid ONNX model: graph output '{out.name}' "
                                "is never produced")


def load_model(path) -> tuple:
    """``(ModelProto, diagnostics)`` for the file at ``path``; the diagnostics (MEM900) name
    external-data references that memlint refused to follow.  Raises :class:`OnnxLoadError`."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise OnnxLoadError("no such file") from None
    except OSError as exc:
        raise OnnxLoadError(f"cannot read ({exc.strerror})") from None
    if os.path.isdir(path):
        raise OnnxLoadError("is a directory")
    if size == 0:
        raise OnnxLoadError("not an ONNX model: empty file")
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(os.fspath(path), load_external_data=False)
    except (DecodeError, ValueError, TypeError, RuntimeError, UnicodeDecodeError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OnnxLoadError(f"not an ONNX model: protobuf parse failed ({detail})") from None
    except OSError as exc:
        raise OnnxLoadError(f"cannot read ({exc.strerror})") from None
    except Exception as exc:  # protobuf backends raise their own error types
        raise OnnxLoadError(f"not an ONNX model: protobuf parse failed "
                            f"({type(exc).__name__})") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise OnnxLoadError("not an ONNX model: no graph or IR version in the file")
    if not model.opset_import and model.ir_version >= 3:
        raise OnnxLoadError("not an ONNX model: no operator set imported")
    _check_references(model.graph)
    from memlint.diagnostics import Diagnostic

    notes = []
    for name, location in external_locations(model):
        if _escapes_folder(location):
            notes.append(Diagnostic(
                "MEM900", "unresolved-value", "info",
                f"initializer '{name}' keeps its data at '{location}', outside the model's "
                "folder; memlint did not follow it (shapes come from the model file)",
                os.fspath(path), data={"tensor": name, "location": location}))
    return model, notes
