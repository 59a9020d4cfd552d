"""scikit-learn's transformers on model data: the shape of what ``fit_transform``,
``transform`` and ``inverse_transform`` give (``StandardScaler().fit_transform(x)``: x's
shape; ``PCA(n_components=8)``: eight columns; ``LabelEncoder``: one label a row).

Scalers keep their input's shape and, as scikit-learn's ``check_array`` does, a float32
input's dtype (anything else becomes float64).  A transformer whose columns depend on the
values (``OneHotEncoder``, ``PolynomialFeatures``, an imputer that drops empty columns) gives
data of unknown shape.  Nothing is fitted: a :class:`Transformer` is the class and what it
was configured with.
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras import frames
from memlint.frontends.keras.values import Array, BoundMethod, Unknown
from memlint.frontends.keras.values import call_arg as _arg
from memlint.records import record

__all__ = ["Transformer", "handles", "create", "call_method", "get_attribute"]

# transformers whose output has their input's shape
_SAME_SHAPE = frozenset({"StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler",
                         "Normalizer", "QuantileTransformer", "PowerTransformer", "Binarizer"})
# transformers whose output has n_components columns
_COMPONENTS = frozenset({"PCA", "TruncatedSVD", "IncrementalPCA", "KernelPCA", "FastICA", "NMF"})
_MODULES = ("sklearn.preprocessing.", "sklearn.decomposition.")


@record(eq=False)
class Transformer:
    """A scikit-learn transformer of the analysed code: its class and, for a projection,
    its ``n_components`` (None: not given or not known)."""

    name: str
    components: Optional[int] = None


def handles(name: str) -> bool:
    """Whether ``name`` is a transformer class memlint models (any other of scikit-learn's
    ``preprocessing`` / ``decomposition`` classes is one of unknown output)."""
    return name.startswith(_MODULES) and name.rsplit(".", 1)[-1][:1].isupper()


def create(name: str, args: list, kwargs: dict) -> Transformer:
    short = name.rsplit(".", 1)[-1]
    components = _arg(args, kwargs, 0, "n_components") if short in _COMPONENTS else None
    whole = isinstance(components, int) and not isinstance(components, bool) \
        and components > 0
    return Transformer(short, components if whole else None)


def get_attribute(transformer: Transformer, attr: str) -> Any:
    return BoundMethod(transformer, attr)


def _float(dtype: Optional[str]) -> Optional[str]:
    return dtype if dtype in ("float32", "float64") else "float64" if dtype else None


def call_method(transformer: Transformer, method: str, args: list, kwargs: dict) -> Any:
    """``fit`` (the transformer itself), ``fit_transform`` / ``transform`` /
    ``inverse_transform`` (the data's new shape)."""
    if method in ("fit", "partial_fit", "set_params"):
        return transformer
    if method not in ("fit_transform", "transform", "inverse_transform"):
        return Unknown(f"{transformer.name}.{method}() is not evaluated")
    key = "y" if transformer.name == "LabelEncoder" else "X"
    data = frames.data_of(_arg(args, kwargs, 0, key))
    if not isinstance(data, Array) or not data.shape:
        return Unknown(f"{transformer.name}.{method}() of data not known statically")
    rows = data.shape[0]
    if transformer.name == "LabelEncoder":
        if method == "inverse_transform":
            return Array((rows,), None)
        return Array((rows,), "int64")
    if transformer.name in _SAME_SHAPE:
        return Array(tuple(data.shape), _float(data.dtype))
    if transformer.name in _COMPONENTS and transformer.components is not None \
            and method != "inverse_transform" and len(data.shape) == 2:
        return Array((rows, transformer.components), _float(data.dtype))
    return Unknown(f"the columns {transformer.name}.{method}() gives depend on the data")
