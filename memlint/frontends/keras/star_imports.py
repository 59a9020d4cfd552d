"""``from <module> import *``: the names a star import binds, as Python binds them.

A library module memlint knows the public names of (``keras.layers``, ``keras.models``,
``keras.optimizers`` in every spelling) binds those names in the importing namespace, as
references to the library objects; a later star import re-binds the names it exports, as in
Python, so ``from keras.layers import *`` followed by ``from keras.models import *`` leaves
``Sequential`` the model class.  A library module whose names are not known (or not all of
them: a layer class memlint has no kind for) is remembered in the namespace under
:data:`FALLBACK`, and a name that nothing else defines is looked up there, last import
first.  A project module's star import copies its ``__all__`` (or its public names) and its
own fallback modules (see :meth:`~.interpreter.Interpreter.import_from_project`).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from memlint.frontends.keras.names import canonical
from memlint.frontends.keras.values import Ref, Unknown

# namespace key of the library modules star-imported there whose names are not all known
# (not an identifier Python code can bind, and private: star imports do not copy it)
FALLBACK = "__star_modules__"

_MERGE_FUNCTIONS = ("add", "subtract", "multiply", "average", "maximum", "minimum",
                    "concatenate", "dot", "merge")
_LAYER_EXTRAS = ("Input", "InputLayer", "Layer", "InputSpec", "Wrapper", "Merge")
_MODELS = ("Sequential", "Model", "Input", "InputLayer", "load_model", "save_model",
           "model_from_json", "model_from_yaml", "model_from_config", "clone_model")
_OPTIMIZERS = ("SGD", "RMSprop", "Adagrad", "Adadelta", "Adam", "Adamax", "Nadam", "AdamW",
               "Ftrl", "Lion", "Adafactor", "Optimizer", "TFOptimizer")


def _layer_names() -> Iterable[str]:
    from memlint.layers import REGISTRY
    return (*REGISTRY, *_LAYER_EXTRAS, *_MERGE_FUNCTIONS)


def exports(module: str) -> tuple[dict, bool]:
    """``(names bound, complete)`` for ``from module import *`` of a library (``module`` in
    its canonical spelling); ``complete`` is False when the module may export more."""
    if module == "keras.layers" or module.startswith("keras.layers."):
        return {n: Ref(canonical(f"keras.layers.{n}")) for n in _layer_names()}, False
    if module in ("keras.models", "keras.engine.training", "keras.engine.topology"):
        return {n: Ref(canonical(f"keras.models.{n}")) for n in _MODELS}, True
    if module == "keras.optimizers":
        return {n: Ref(canonical(f"keras.optimizers.{n}")) for n in _OPTIMIZERS}, False
    return {}, False


def bind_library(namespace: dict, module: str) -> dict:
    """The names ``from module import *`` binds (to be set in the namespace), remembering the
    module in ``namespace[FALLBACK]`` when it may export names not listed."""
    names, complete = exports(module)
    if not complete:
        add_fallback(namespace, [module])
    return names


def add_fallback(namespace: dict, modules: list) -> None:
    """Remember library modules whose other names a lookup may find (later imports first)."""
    known = namespace.setdefault(FALLBACK, [])
    for module in modules:
        if module in known:
            known.remove(module)
        known.append(module)


def project_names(names: dict) -> dict:
    """What ``from project_module import *`` copies: the names in its ``__all__`` (when it
    is a list or tuple of strings), else every name not starting with an underscore."""
    listed = names.get("__all__")
    if isinstance(listed, (list, tuple)) and all(isinstance(n, str) for n in listed):
        return {n: names.get(n, Unknown(f"'{n}' is in __all__ but not defined (statically)"))
                for n in listed}
    return {k: v for k, v in names.items() if not k.startswith("_")}


def lookup(namespace: dict, name: str) -> Optional[Any]:
    """A name no statement defined, from the last library module star-imported into the
    namespace that may export it (None: there is none)."""
    modules = namespace.get(FALLBACK)
    if not modules or name.startswith("_"):  # a star import binds no private name
        return None
    return Ref(canonical(f"{modules[-1]}.{name}"))
