"""pandas tables as model scripts prepare data from them (``memlint.frontends.keras.frames``):
the rows and columns memlint infers, compared with real pandas running the same code on a
small table that stands for the file (pandas runs only in the test, never in memlint), and
keras.io's weather forecast, whose input width comes from columns selected out of a CSV."""

from __future__ import annotations

import libcst as cst
import pytest

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.frames import Frame
from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.state import FileState
from memlint.frontends.keras.values import Array, is_unknown

PRELUDE = """\
import numpy as np
import pandas as pd
df = pd.read_csv("table.csv")
small = df[["c0", "c1", "c2", "c3"]]
known = pd.DataFrame(np.zeros((5, 3)))
"""
# what the file holds, for the real run: 50 rows of 14 columns
STAND_IN = ('df = pd.DataFrame(np.arange(700.0).reshape(50, 14), '
            'columns=[f"c{i}" for i in range(14)])')


def memlint_value(expr: str, extra: str = ""):
    source = PRELUDE + extra + f"value = {expr}\n"
    interp = Interpreter(cst.parse_module(source), FileState("snippet.py"))
    interp.run()
    return interp.globals["value"]


def real_value(expr: str, extra: str = ""):
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    scope = {"np": np, "pd": pd}
    exec(PRELUDE.replace('pd.read_csv("table.csv")', STAND_IN.split(" = ", 1)[1])  # noqa: S102
         + extra + f"value = {expr}\n", scope)
    return scope["value"]


def dims(value):
    """(rows, columns) of a memlint table, a Series's (rows,), an array's shape."""
    if isinstance(value, Frame):
        return (value.rows,) if value.series else (value.rows, value.columns)
    if isinstance(value, Array):
        return tuple(value.shape)
    raise AssertionError(f"not data: {value!r}")


CASES = [  # expression, (statements before it), what memlint knows (None: open)
    ('df[["c0", "c1", "c5"]]', "", (None, 3)),
    ('df[["c0", "c1"]].values', "", (None, 2)),
    ('df["c3"]', "", (None,)),
    ('df["c3"].to_numpy()', "", (None,)),
    ("df.iloc[:, 1:8]", "", (None, None)),  # at most 7: the file may have fewer columns
    ("small.iloc[:, 1:3]", "", (None, 2)),
    ("small.iloc[:, -1]", "", (None,)),
    ("df.iloc[10:20, [0, 2]]", "", (None, 2)),
    ('df.loc[:, ["c0", "c2"]]', "", (None, 2)),
    ('df.loc[0:9, ["c0", "c2"]]', "", (None, 2)),
    ('df.loc[0:9][["c1"]]', "", (None, 1)),
    ('small.drop(columns=["c0"])', "", (None, 3)),
    ('small.drop("c1", axis=1)', "", (None, 3)),
    ('small.drop(["c1", "c2"], axis=1)', "", (None, 2)),
    ("small", 'label = small.pop("c2")\n', (None, 3)),
    ("small.mean()", "", (4,)),
    ("small.mean(axis=1)", "", (None,)),
    ("(small - small.mean()) / small.std()", "", (None, 4)),
    ("small.T", "", (4, None)),
    ("known", "", (5, 3)),
    ("known.head(2)", "", (2, 3)),
    ("known.tail(10)", "", (5, 3)),
    ("known.iloc[1:]", "", (4, 3)),
    ("known.iloc[1:3, 1:]", "", (2, 2)),
    ("known.iloc[0]", "", (3,)),
    ("known.head(-2)", "", (3, 3)),
    ("known[[True, False, True, False, True]]", "", (3, 3)),
    ("df.c1", "", (None,)),  # a column read as an attribute
    ("df.loc[df.c1 > 100]", "", (None, None)),
    ("small.loc[small.c2 > 100, ['c0', 'c1']]", "", (None, 2)),
    ("pd.concat([small, small], axis=1)", "", (None, 8)),
    ("pd.concat([small, small])", "", (None, 4)),
    ("pd.concat([known, known])", "", (10, 3)),
    ('small[small["c0"] > 100]', "", (None, 4)),
    ("small.dropna()", "", (None, 4)),
    ("small.fillna(0).astype('float32')", "", (None, 4)),
    ("small.reset_index()", "", (None, None)),
    ("small.reset_index(drop=True)", "", (None, 4)),
    ('small.set_index("c0")', "", (None, 3)),
    ("pd.DataFrame(small.values)", "", (None, 4)),
    ('pd.DataFrame({"a": [1, 2], "b": [3, 4]})', "", (2, 2)),
    ("np.asarray(small)", "", (None, 4)),
    ("np.zeros((100, 28, 28))[:split]", "split = len(df) // 2\n", (None, 28, 28)),
    ("x[:split, 1:3]", "x = np.zeros((100, 6))\nsplit = int(0.8 * len(df))\n", (None, 2)),
]


@pytest.mark.parametrize("expr, extra, want", CASES, ids=[c[0] for c in CASES])
def test_table_shapes_agree_with_pandas(expr, extra, want):
    got = dims(memlint_value(expr, extra))
    assert got == want
    real = real_value(expr, extra)
    real_dims = tuple(real.shape)
    assert len(real_dims) == len(got)
    # every size memlint states is pandas's; an open one is one the file decides
    assert all(g is None or g == r for g, r in zip(got, real_dims)), (got, real_dims)


@pytest.mark.parametrize("call, columns", [
    ('pd.read_csv("t.csv", usecols=["Date", "Close"])', 2),
    ('pd.read_csv("t.csv", usecols=["Date", "Close"], index_col="Date")', 1),
    ('pd.read_csv("t.csv", usecols=[0, 1, 2], index_col=[0, 1])', 1),
    ('pd.read_csv("t.csv", names=["a", "b", "c"], header=None)', 3),
    ('pd.read_csv("t.csv", index_col=0)', None),
    ('pd.read_csv("t.csv")', None),
])
def test_a_reader_s_columns_where_its_arguments_fix_them(call, columns, tmp_path):
    assert dims(memlint_value(call)) == (None, columns)
    pd = pytest.importorskip("pandas")
    path = tmp_path / "t.csv"
    path.write_text("Date,Close,Volume\n1,2.0,3\n4,5.0,6\n")
    real = eval(call.replace('"t.csv"', repr(str(path))), {"pd": pd})  # noqa: S307
    assert columns is None or real.shape[1] == columns


def test_sizes_the_file_decides_stay_unknown():
    assert all(is_unknown(d) for d in memlint_value("df.shape"))
    assert memlint_value("df[['c0', 'c1']].shape")[1] == 2
    assert is_unknown(memlint_value("df[['c0', 'c1']].shape")[0])
    assert is_unknown(memlint_value("len(df)"))
    assert memlint_value("len(known)") == 5
    assert is_unknown(memlint_value("df.columns"))
    # an array of open columns would reach a model as a shape of its own: none is made
    assert is_unknown(memlint_value("df.values"))
    assert is_unknown(memlint_value("df.to_numpy()"))
    assert memlint_value("small.values.astype('float32')").dtype == "float32"


WEATHER = """\
import pandas as pd
import keras

df = pd.read_csv("jena_climate_2009_2016.csv")
train_split = int(0.715 * int(df.shape[0]))
step = 6
past = 720
future = 72


def normalize(data, train_split):
    data_mean = data[:train_split].mean(axis=0)
    data_std = data[:train_split].std(axis=0)
    return (data - data_mean) / data_std


selected = [0, 1, 5, 7, 8, 10, 11]
feature_keys = ["p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)",
                "VPact (mbar)", "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)",
                "rho (g/m**3)", "wv (m/s)", "max. wv (m/s)", "wd (deg)"]
features = df[[feature_keys[i] for i in selected]]
features.index = df["Date Time"]
features = normalize(features.values, train_split)
features = pd.DataFrame(features)
train_data = features.loc[0 : train_split - 1]
start = past + future
end = start + train_split
x_train = train_data[[i for i in range(7)]].values
y_train = features.iloc[start:end][[1]]
dataset_train = keras.preprocessing.timeseries_dataset_from_array(
    x_train, y_train, sequence_length=int(past / step), sampling_rate=step, batch_size=256)
for batch in dataset_train.take(1):
    inputs, targets = batch
inputs = keras.layers.Input(shape=(inputs.shape[1], inputs.shape[2]))
lstm_out = keras.layers.LSTM(32)(inputs)
outputs = keras.layers.Dense(1)(lstm_out)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
model.fit(dataset_train, epochs=10)
"""


def test_weather_forecast_input_comes_from_the_selected_columns():
    """keras.io's weather forecast: seven columns of the CSV, windows of 720 / 6 = 120 steps,
    batches of 256 (the input had no shape: no estimate); an LSTM(32) over seven features
    holds 4 * (32 * (7 + 32) + 32) = 5,120 parameters."""
    graph = analyze_source(WEATHER, "weather.py").models[0]
    assert graph.input_shapes == [(None, 120, 7)]
    assert graph.setup.batch_size == 256
    lstm = next(layer for layer in graph.layers if layer.type == "LSTM")
    assert sum(w.size for w in lstm.weights) == 5_120


TABULAR = """\
import pandas as pd
from tensorflow import keras
from sklearn.model_selection import train_test_split

df = pd.read_csv("heart.csv")
features = ["age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
            "oldpeak"]
X = df[features]
y = df["target"]
X = (X - X.mean()) / X.std()
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=42)
model = keras.Sequential([
    keras.layers.Dense(64, activation="relu", input_shape=(X_train.shape[1],)),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(X_train, y_train, epochs=50, batch_size=16)
"""


def test_a_model_sized_by_named_feature_columns_split_by_scikit_learn():
    """Ten named columns, split by train_test_split, give the first Dense its width
    (10 * 64 + 64 = 704 parameters); the model had no input shape."""
    graph = analyze_source(TABULAR, "heart.py").models[0]
    assert graph.input_shapes == [(None, 10)]
    assert sum(w.size for w in graph.layers[0].weights) == 704
    assert graph.setup.batch_size == 16


SCALED = """\
from sklearn.preprocessing import LabelEncoder, MinMaxScaler, OneHotEncoder, StandardScaler
from sklearn.decomposition import PCA
x = np.zeros((100, 6), dtype="float32")
scaler = MinMaxScaler(feature_range=(0, 1))
"""


@pytest.mark.parametrize("expr, want, dtype", [
    ("scaler.fit_transform(x)", (100, 6), "float32"),
    ("scaler.fit(x).transform(x[:10])", (10, 6), "float32"),
    ("scaler.inverse_transform(x)", (100, 6), "float32"),
    ("StandardScaler().fit_transform(np.zeros((5, 3), dtype='int64'))", (5, 3), "float64"),
    ("StandardScaler().fit_transform(small)", (None, 4), None),
    ("MinMaxScaler().fit_transform(df.filter(['c1']))", (None, 1), None),
    ("PCA(n_components=2).fit_transform(x)", (100, 2), "float32"),
    ("PCA(2).fit(x).transform(x)", (100, 2), "float32"),
    ("LabelEncoder().fit_transform(df['c0'])", (None,), "int64"),
])
def test_scikit_learn_transformers_keep_or_set_the_columns(expr, want, dtype):
    got = memlint_value(expr, SCALED)
    assert isinstance(got, Array) and tuple(got.shape) == want and got.dtype == dtype


@pytest.mark.parametrize("expr", [
    "OneHotEncoder().fit_transform(x)",  # a column per value met
    "PCA().fit_transform(x)",  # as many components as the data has
    "StandardScaler().fit_transform(df)",  # the file's columns
    "scaler.get_feature_names_out()",
])
def test_transformers_whose_output_the_data_decides_are_unknown(expr):
    assert is_unknown(memlint_value(expr, SCALED))


def test_filter_selects_the_named_columns():
    assert dims(memlint_value('df.filter(["c1", "c2"])')) == (None, 2)
    assert dims(memlint_value('df.filter(like="c")')) == (None, None)
    assert real_value('df.filter(["c1", "c2"])').shape == (50, 2)


@pytest.mark.parametrize("expr", [
    "known @ known.T",  # a product of tables: not followed
    "known.mean(axis=None)",  # a number
    "small.iloc[:, 5]",  # pandas raises IndexError
    "small.drop(columns=['c0', 'c1', 'c2', 'c3', 'c4'])",  # pandas raises KeyError
    "str(small)",  # the table's text is its values'
    "bool(known)",  # pandas raises: the truth of a table is ambiguous
])
def test_what_pandas_refuses_or_reduces_to_a_number_is_unknown(expr):
    assert is_unknown(memlint_value(expr))
