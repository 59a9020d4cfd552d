"""Which Keras backend a file trains with, read from its source (never executed).

Evidence, strongest first:

1. ``os.environ["KERAS_BACKEND"] = "jax"`` (also ``os.environ.setdefault(...)``,
   ``os.putenv(...)``) or ``keras.config.set_backend("torch")``: the backend Keras 3 loads;
2. TensorFlow's own Keras (``tf.keras``, ``tensorflow.keras``) or Keras 1/2's ``keras.backend``
   set-ups: TensorFlow;
3. an import of ``torch`` or ``jax`` (the file is written for that backend);
4. an import of ``tensorflow``: TensorFlow.

Nothing of that: None (memlint's v1 model, TensorFlow graph mode without the allocator).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from memlint.source_index import SourceIndex

_NAMES = {"jax": "jax", "torch": "torch", "tensorflow": "tf", "tf": "tf", "pytorch": "torch"}


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        left = _dotted(node.value)
        return f"{left}.{node.attr.value}" if left else ""
    return ""


def _string(node) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        try:
            return node.evaluated_value
        except Exception:  # noqa: BLE001 - bytes or odd prefixes: not a backend name
            return None
    return None


class _Finder(cst.CSTVisitor):
    def __init__(self, positions):
        self.positions = positions
        self.explicit: Optional[tuple] = None  # (backend, how, line)
        self.imports: dict = {}  # backend -> (how, line)

    def _line(self, node) -> int:
        return self.positions[node].start.line

    def _set(self, value, how, node):
        backend = _NAMES.get(str(value).lower()) if value else None
        if backend and self.explicit is None:
            self.explicit = (backend, how, self._line(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            sub = target.target
            if isinstance(sub, cst.Subscript) and _dotted(sub.value).endswith("environ"):
                index = sub.slice[0].slice if sub.slice else None
                if isinstance(index, cst.Index) and _string(index.value) == "KERAS_BACKEND":
                    self._set(_string(node.value), "KERAS_BACKEND set", node)

    def visit_Call(self, node: cst.Call) -> None:
        name = _dotted(node.func)
        args = [_string(a.value) for a in node.args]
        if name.endswith(("environ.setdefault", "putenv")) and args[:1] == ["KERAS_BACKEND"]:
            self._set(args[1] if len(args) > 1 else None, "KERAS_BACKEND set", node)
        elif name.endswith("set_backend") and args:
            self._set(args[0], f"{name}()", node)

    def _imported(self, module: str, node) -> None:
        top = module.split(".")[0]
        if module.startswith(("tensorflow.keras", "tensorflow.python.keras")):
            self.imports.setdefault("tf-keras", (f"import of {module}", self._line(node)))
        elif top in ("torch", "jax", "tensorflow"):
            self.imports.setdefault(top, (f"import of {top}", self._line(node)))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._imported(_dotted(alias.name), node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            self._imported(_dotted(node.module), node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if _dotted(node) == "tf.keras":
            self.imports.setdefault("tf-keras", ("use of tf.keras", self._line(node)))


def detect_backend(module: Optional[cst.Module], positions=None) -> tuple:
    """``(backend or None, where it came from)`` for a parsed file (``positions``: the
    module's :class:`~memlint.source_index.SourceIndex`, when the caller has it)."""
    if module is None:
        return None, "not stated in the code"
    index = positions if positions is not None else SourceIndex(module)
    finder = _Finder(index)
    index.visit(finder)
    if finder.explicit:
        backend, how, line = finder.explicit
        return backend, f"{how} at line {line}"
    for key, backend in (("tf-keras", "tf"), ("torch", "torch"), ("jax", "jax"),
                         ("tensorflow", "tf")):
        if key in finder.imports:
            how, line = finder.imports[key]
            return backend, f"{how} at line {line}"
    return None, "not stated in the code"
