"""pandas data as model scripts prepare it: a table's rows and columns through the usual
selection and cleaning, until ``.values`` / ``.to_numpy()`` hands it to NumPy and Keras.

A table read from a file (``pd.read_csv``) has rows and columns memlint cannot know; selecting
columns by a list of labels (``df[["p (mbar)", "T (degC)"]]``, ``train[[0, 1, 2]]``,
``df.iloc[:, 1:8]``) fixes the columns, and those are what a model's input width comes from
(keras.io's weather forecast: seven selected features into ``timeseries_dataset_from_array``).
Nothing is read or computed: a :class:`Frame` is a number of rows and columns, each ``None``
where the code does not fix it.  Unknown sizes stay unknown (``df.shape[1]`` of a table read
from a file is not known), never guessed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from memlint.frontends.keras import arrays
from memlint.frontends.keras.values import Array, BoundMethod, Unknown, is_unknown
from memlint.frontends.keras.values import call_arg as _arg
from memlint.records import record

__all__ = ["Frame", "Indexer", "handles", "call", "get_attribute", "getitem", "call_method",
           "binary", "length", "is_frame", "data_of", "to_array", "train_test_split"]


@record(eq=False)
class Frame:
    """A DataFrame (``series=False``) or Series: its rows and columns (a Series has none),
    ``None`` where not known statically, and the dtype where the code fixes it."""

    rows: Optional[int]
    columns: Optional[int] = None
    series: bool = False
    dtype: Optional[str] = None


@record(eq=False)
class Indexer:
    """``df.loc`` (labels) or ``df.iloc`` (positions), waiting for its subscript."""

    frame: Frame
    positional: bool


_READERS = frozenset(f"pandas.read_{kind}" for kind in (
    "csv", "table", "excel", "parquet", "json", "feather", "pickle", "sql", "sql_query",
    "sql_table", "hdf", "fwf", "orc", "stata", "sas", "spss", "xml", "html", "clipboard"))
# methods that keep the table's columns; the rows too unless they may drop some
_SAME_ROWS = frozenset({"fillna", "ffill", "bfill", "interpolate", "copy", "replace", "clip",
                        "abs", "round", "sort_values", "sort_index", "rename", "shift",
                        "diff", "pct_change", "cumsum", "rank", "infer_objects",
                        "reindex_like", "where", "mask", "normalize"})
_FEWER_ROWS = frozenset({"dropna", "drop_duplicates", "sample", "query", "nlargest",
                         "nsmallest", "truncate"})
_REDUCTIONS = frozenset({"mean", "std", "var", "min", "max", "sum", "median", "prod", "sem",
                         "skew", "kurt", "count", "quantile"})


# DataFrame methods (what else ``df.name`` reads is the column of that name)
_METHODS = _SAME_ROWS | _FEWER_ROWS | _REDUCTIONS | frozenset({
    "to_numpy", "astype", "head", "tail", "reset_index", "set_index", "drop", "filter", "pop",
    "map", "apply", "applymap", "agg", "aggregate", "transform", "pipe", "unique",
    "value_counts", "info", "describe", "corr", "cov", "to_csv", "to_json", "to_excel",
    "to_parquet", "to_pickle", "to_dict", "to_string", "to_markdown", "to_records", "to_frame",
    "hist", "groupby", "rolling", "expanding", "ewm", "resample", "tolist", "to_list",
    "nunique", "isnull", "isna", "notnull", "notna", "any", "all", "iterrows", "items",
    "itertuples", "keys", "get", "merge", "join", "assign", "insert", "melt", "pivot",
    "pivot_table", "stack", "unstack", "explode", "duplicated", "select_dtypes", "idxmax",
    "idxmin", "cummax", "cummin", "cumprod", "isin", "between", "add", "sub", "mul", "div",
    "truediv", "floordiv", "mod", "pow", "dot", "eq", "ne", "lt", "gt", "le", "ge", "combine",
    "combine_first", "update", "copy", "reindex", "rename_axis", "set_axis", "transpose",
    "squeeze", "memory_usage", "equals", "convert_dtypes", "first", "last", "asfreq", "align",
    "first_valid_index", "last_valid_index", "nlargest", "nsmallest", "to_xarray", "bool"})


def is_frame(value: Any) -> bool:
    return isinstance(value, (Frame, Indexer))


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _labels(value: Any) -> Optional[int]:
    """How many labels a list (or tuple, array, range) of labels names."""
    if isinstance(value, (list, tuple, range)):
        return len(value)
    if isinstance(value, Array) and len(value.shape) == 1:
        return _count(value.shape[0])
    return None


def _sliced(size: Optional[int], key: slice) -> Optional[int]:
    """The length of ``key`` (positions) over ``size`` items, where it is fixed."""
    if not all(v is None or _count(v) is not None for v in (key.start, key.stop, key.step)):
        return None
    return len(range(*key.indices(size))) if size is not None else None


def _column(frame: Frame) -> Frame:
    return Frame(frame.rows, series=True)


def handles(name: str) -> bool:
    return name in _READERS or name in ("pandas.DataFrame", "pandas.Series", "pandas.concat",
                                        "pandas.get_dummies")


def call(name: str, args: list, kwargs: dict) -> Any:
    """``pd.read_csv(...)``, ``pd.DataFrame(data)``, ``pd.Series(data)``, ``pd.concat(...)``."""
    if name in _READERS:
        return Frame(None, _read_columns(kwargs))
    if name == "pandas.get_dummies":  # one column per value met in the data
        return Frame(None, None)
    if name == "pandas.concat":
        return _concat(_arg(args, kwargs, 0, "objs"), kwargs.get("axis", 0))
    data = _arg(args, kwargs, 0, "data")
    series = name == "pandas.Series"
    columns = _labels(kwargs.get("columns"))
    if isinstance(data, Frame):
        return Frame(data.rows, columns if columns is not None else data.columns,
                     series or data.series, data.dtype)
    if isinstance(data, Array) and data.shape:
        width = None if series else (data.shape[1] if len(data.shape) == 2 else None)
        return Frame(data.shape[0], columns if columns is not None else width, series,
                     data.dtype)
    if isinstance(data, dict) and not series:
        rows = {_labels(v) for v in data.values()}
        return Frame(rows.pop() if len(rows) == 1 else None, len(data))
    if isinstance(data, (list, tuple)) and series:
        return Frame(len(data), series=True)
    return Frame(None, columns, series)


def _read_columns(kwargs: dict) -> Optional[int]:
    """The columns a reader gives where its arguments fix them: ``usecols`` (or ``names``)
    less the ``index_col`` it takes out of them."""
    given = kwargs.get("usecols", kwargs.get("names"))
    if callable(given) or given is None:
        return None
    count = _labels(given)
    index = kwargs.get("index_col")
    if count is None or index is None or index is False:
        return count
    taken = 1 if isinstance(index, (int, str)) and not isinstance(index, bool) \
        else _labels(index)
    return count - taken if taken is not None and taken <= count else None


def train_test_split(args: list, kwargs: dict) -> Any:
    """scikit-learn's ``train_test_split`` over tables (and arrays beside them): each
    table's rows are split as an array's would be, its columns kept."""
    stand_ins = [Array((a.rows,), a.dtype) if isinstance(a, Frame) else a for a in args]
    parts = arrays.train_test_split(stand_ins, kwargs)
    if is_unknown(parts):
        return parts
    out = []
    for i, given in enumerate(args):
        for part in parts[2 * i:2 * i + 2]:
            out.append(replace(given, rows=part.shape[0]) if isinstance(given, Frame)
                       else part)
    return out


def _concat(objs: Any, axis: Any) -> Any:
    if not isinstance(objs, (list, tuple)) or not objs or \
            not all(isinstance(o, Frame) for o in objs):
        return Unknown("pd.concat() of tables not known statically")
    along, across = ("rows", "columns") if axis in (0, "index") else ("columns", "rows")
    sizes = [getattr(o, along) if not o.series or along == "rows" else 1 for o in objs]
    total = sum(sizes) if all(s is not None for s in sizes) else None
    others = {getattr(o, across) if not o.series or across == "rows" else 1 for o in objs}
    other = others.pop() if len(others) == 1 else None
    if along == "rows":
        return Frame(total, other, all(o.series for o in objs))
    return Frame(other, total)


def data_of(value: Any) -> Any:
    """What NumPy, Keras or scikit-learn make of ``value``: a table's values (``to_array``),
    anything else as it is."""
    return to_array(value) if isinstance(value, Frame) else value


def to_array(frame: Frame, dtype: Optional[str] = None) -> Any:
    """The NumPy array ``.values`` / ``.to_numpy()`` gives: its rows may be open (the
    samples), its columns (the features a model reads) must be known."""
    if frame.series:
        return Array((frame.rows,), dtype or frame.dtype)
    if frame.columns is None:
        return Unknown("the columns of a table read from a file are not known statically "
                       "(select them: df[[...]])")
    return Array((frame.rows, frame.columns), dtype or frame.dtype)


def length(frame: Frame) -> Any:
    return frame.rows if frame.rows is not None else Unknown(
        "the number of rows of a table read from a file is not known statically")


def get_attribute(value: Any, attr: str) -> Any:
    """``df.values``, ``df.shape``, ``df.loc`` / ``df.iloc``, ``df.T``; methods otherwise."""
    frame = value
    if attr == "values":
        return to_array(frame)
    if attr == "shape":
        dims = (frame.rows,) if frame.series else (frame.rows, frame.columns)
        return tuple(d if d is not None else Unknown(
            "a table dimension that is not known statically") for d in dims)
    if attr == "ndim":
        return 1 if frame.series else 2
    if attr in ("loc", "iloc"):
        return Indexer(frame, attr == "iloc")
    if attr == "T" and not frame.series:
        return Frame(frame.columns, frame.rows)
    if attr in ("columns", "index", "dtypes", "dtype", "empty", "size", "name", "str", "dt",
                "cat", "at", "iat", "axes", "attrs", "flags", "plot", "style"):
        return Unknown(f"a table's {attr} is not known statically")
    if not frame.series and not attr.startswith("_") and attr not in _METHODS:
        return _column(frame)  # ``df.Close``: the column of that name
    return BoundMethod(frame, attr)


def getitem(value: Any, key: Any) -> Any:
    """``df["col"]``, ``df[["a", "b"]]``, ``df[mask]``, ``df[10:]``, ``df.iloc[:, 1:8]``,
    ``df.loc[:, ["a", "b"]]``, ``df.iloc[0]``."""
    if isinstance(value, Indexer):
        return _located(value, key)
    frame = value
    if frame.series:
        if isinstance(key, slice):
            return Frame(_sliced(frame.rows, key), series=True)
        return Unknown("an element of a column is not known statically")
    if isinstance(key, slice):
        return Frame(_sliced(frame.rows, key), frame.columns)
    if isinstance(key, (str, int)) and not isinstance(key, bool):
        return _column(frame)
    if isinstance(key, tuple):  # one label of a column MultiIndex
        return Unknown("a column of a MultiIndex is not modelled")
    if isinstance(key, (Frame, Array)):  # a row mask: df[df["x"] > 0]
        return Frame(None, frame.columns)
    if isinstance(key, list) and key and all(isinstance(k, bool) for k in key):
        return Frame(sum(key), frame.columns)  # a list of bools: the rows it marks
    count = _labels(key)
    if count is not None:
        return Frame(frame.rows, count)
    return Unknown("the columns of this selection are not known statically")


def _located(indexer: Indexer, key: Any) -> Any:
    frame = indexer.frame
    rows_key, cols_key = key if isinstance(key, tuple) and len(key) == 2 else (key, slice(None))
    if frame.series:
        cols_key = None
    if isinstance(rows_key, slice):
        # label slices include their end and follow the index's labels: fixed only when
        # the whole table is taken
        whole = rows_key == slice(None)
        rows = frame.rows if whole else _sliced(frame.rows, rows_key) \
            if indexer.positional else None
        one_row = False
    elif isinstance(rows_key, (int, str)) and not isinstance(rows_key, bool):
        rows, one_row = None, True
    else:  # a mask or a list of labels
        count = _labels(rows_key)
        rows, one_row = (count if count is not None and not isinstance(rows_key, Array)
                         else None), False
    if frame.series:
        return Unknown("an element of a column is not known statically") if one_row \
            else Frame(rows, series=True)
    if isinstance(cols_key, slice):
        columns = frame.columns if cols_key == slice(None) else \
            _sliced(frame.columns, cols_key) if indexer.positional else None
        single = False
    elif isinstance(cols_key, (int, str)) and not isinstance(cols_key, bool):
        if indexer.positional and isinstance(cols_key, int) and frame.columns is not None \
                and not -frame.columns <= cols_key < frame.columns:
            return Unknown(f"column {cols_key} of a table of {frame.columns}: pandas raises "
                           "IndexError")
        columns, single = None, True
    else:
        columns, single = _labels(cols_key), False
    if one_row and single:
        return Unknown("an element of a table is not known statically")
    if one_row:  # one row: a Series over the columns
        return Frame(columns, series=True)
    if single:
        return Frame(rows, series=True)
    return Frame(rows, columns)


def call_method(frame: Frame, method: str, args: list, kwargs: dict) -> Any:
    """``df.to_numpy()``, ``df.dropna()``, ``df.drop(columns=[...])``, ``df.head(n)``,
    ``df.mean()``, ``df.astype("float32")``, ``df.pop("label")``, ..."""
    if method == "to_numpy":
        dtype = _arg(args, kwargs, 0, "dtype")
        return to_array(frame, arrays.dtype_name(dtype) if dtype is not None else None)
    if method == "astype":
        dtype = arrays.dtype_name(_arg(args, kwargs, 0, "dtype"))
        return replace(frame, dtype=dtype)
    if method in _SAME_ROWS:
        return replace(frame)
    if method in _FEWER_ROWS:
        return replace(frame, rows=None)
    if method in ("head", "tail"):
        n = _arg(args, kwargs, 0, "n", 5)
        if _count(n) is None or frame.rows is None:
            return replace(frame, rows=None)
        # a negative n leaves all rows but that many
        return replace(frame, rows=min(n, frame.rows) if n >= 0 else max(frame.rows + n, 0))
    if method == "reset_index":
        drop = kwargs.get("drop", False)
        if frame.series:
            return Frame(frame.rows, series=True) if drop is True else Frame(frame.rows, None)
        columns = frame.columns if drop is True else None  # the index becomes a column
        return Frame(frame.rows, columns, dtype=frame.dtype if drop is True else None)
    if method == "set_index":
        keys = _arg(args, kwargs, 0, "keys")
        taken = 1 if isinstance(keys, str) else _labels(keys)
        columns = frame.columns - taken if frame.columns is not None and taken is not None \
            and kwargs.get("drop", True) is True else None
        return Frame(frame.rows, columns)
    if method == "drop" and not frame.series:
        return _drop(frame, args, kwargs)
    if method == "filter" and not frame.series:  # df.filter(["Close"]): those columns
        if kwargs.get("axis", 1) not in (1, "columns"):  # rows chosen by their labels
            return Frame(None, frame.columns, dtype=frame.dtype)
        return Frame(frame.rows, _labels(_arg(args, kwargs, 0, "items")), dtype=frame.dtype)
    if method == "pop" and not frame.series and args:
        if frame.columns is not None:
            frame.columns -= 1
        return _column(frame)
    if method in _REDUCTIONS:
        axis = _arg(args, kwargs, 0, "axis", 0)
        if frame.series or axis is None:  # a number
            return Unknown(f"{method}() of a table is a number not known statically")
        if frame.series:
            return Unknown(f"{method}() of a column is not known statically")
        if axis in (1, "columns"):
            return Frame(frame.rows, series=True)
        return Frame(frame.columns, series=True)
    if method in ("map", "apply") and frame.series:
        return Frame(frame.rows, series=True)
    if method == "unique" and frame.series:
        return Array((None,))
    if method == "value_counts":
        return Frame(None, series=True)
    if method in ("info", "describe", "corr", "to_csv", "plot", "hist", "groupby",
                  "rolling", "tolist", "to_list", "to_dict", "nunique", "isnull", "isna",
                  "any", "all", "iterrows", "items"):
        return Unknown(f"{method}() of a table is not evaluated")
    return Unknown(f"table method {method}() is not evaluated")


def _drop(frame: Frame, args: list, kwargs: dict) -> Any:
    """``df.drop(columns=[...])``, ``df.drop(["a"], axis=1)``, ``df.drop(index=...)``."""
    columns = kwargs.get("columns")
    if columns is None and kwargs.get("axis", 0) in (1, "columns"):
        columns = _arg(args, kwargs, 0, "labels")
    if columns is None:  # rows dropped by label
        return Frame(None, frame.columns, dtype=frame.dtype)
    taken = 1 if isinstance(columns, (str, int)) and not isinstance(columns, bool) \
        else _labels(columns)
    left = frame.columns - taken if frame.columns is not None and taken is not None else None
    if left is not None and left < 0:
        return Unknown("drop() of more columns than the table has: pandas raises KeyError")
    return Frame(frame.rows, left, dtype=frame.dtype)


def binary(left: Any, right: Any) -> Any:
    """``df - mean``, ``(df - mean) / std``, ``df["x"] > 0``: the shape of the table (a
    Series against a table broadcasts over its columns)."""
    frames = [v for v in (left, right) if isinstance(v, Frame)]
    if any(is_unknown(v) for v in (left, right)) or not frames:
        return Unknown("arithmetic on a table with a value not known statically")
    table = next((f for f in frames if not f.series), frames[0])
    return Frame(table.rows, table.columns, table.series)
