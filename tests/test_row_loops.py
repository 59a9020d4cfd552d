"""Loops of unknown length that fill lists row by row (``memlint.frontends.keras.row_loops``):
sliding windows cut from a series read from a file, as Kaggle and tutorial scripts make
their samples; the window's length is fixed by the slice, the number of windows by the file."""

from __future__ import annotations

import libcst as cst
import pytest

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.state import FileState
from memlint.frontends.keras.values import Array, is_unknown
from tests.conftest import model_matches_keras

HEAD = """\
import numpy as np
import pandas as pd
data = pd.read_csv("prices.csv").filter(["Close"]).values
"""


def names(source: str) -> dict:
    interp = Interpreter(cst.parse_module(HEAD + source), FileState("snippet.py"))
    interp.run()
    return interp.globals


def test_windows_of_a_series_are_open_rows_of_the_window():
    got = names("x, y = [], []\n"
                "for i in range(60, len(data)):\n"
                "    x.append(data[i - 60:i, 0])\n"
                "    y.append(data[i, 0])\n"
                "x, y = np.array(x), np.array(y)\n"
                "x3 = np.reshape(x, (x.shape[0], x.shape[1], 1))\n")
    assert isinstance(got["x"], Array) and got["x"].shape == (None, 60)
    assert got["y"].shape == (None,)
    assert got["x3"].shape == (None, 60, 1)
    assert is_unknown(got["i"])  # the loop's index is not known after it


@pytest.mark.parametrize("expr", ["bool(x)", "str(x)", "len(x)", "x[0]", "max(x)"])
def test_what_a_loop_of_unknown_length_filled_is_not_known_beyond_its_rows(expr):
    # the list may be empty, and its elements and length are the data's
    got = names("x = []\nfor i in range(60, len(data)):\n    x.append(data[i - 60:i, 0])\n"
                f"v = {expr}\n")
    assert is_unknown(got["v"])


def test_a_function_that_cuts_windows_of_its_look_back():
    got = names("def create_dataset(dataset, look_back=1):\n"
                "    dataX, dataY = [], []\n"
                "    for i in range(len(dataset) - look_back - 1):\n"
                "        a = dataset[i:(i + look_back), 0]\n"
                "        dataX.append(a)\n"
                "        dataY.append(dataset[i + look_back, 0])\n"
                "    return np.array(dataX, dtype='float32'), np.array(dataY)\n"
                "trainX, trainY = create_dataset(data, 3)\n")
    assert got["trainX"].shape == (None, 3) and got["trainX"].dtype == "float32"
    assert got["trainY"].shape == (None,)


@pytest.mark.parametrize("body", [
    "    x.append(data[i - 60:i, 0])\n    model_fit(x)\n",  # a call of the file's: not a window
    "    x.append(data[i - 60:i, 0])\n    x[0] = 1\n",  # a store into the list
    "    x.append(data[i - 60:i, 0])\n    if i > 3:\n        x.append(data[i])\n",
])
def test_other_loops_of_unknown_length_still_forget_what_they_change(body):
    got = names("def model_fit(v):\n    return v\n"
                "x = []\nfor i in range(60, len(data)):\n" + body + "x = np.array(x)\n")
    assert is_unknown(got["x"])


def test_a_list_that_held_rows_before_the_loop_is_forgotten():
    got = names("x = [data[0:60, 0]]\nfor i in range(60, len(data)):\n"
                "    x.append(data[i - 60:i, 0])\nx = np.array(x)\n")
    assert is_unknown(got["x"])


STOCK = """\
# oracle-data: csv prices.csv rows=100 columns=Date,Close,Volume
import numpy as np
import pandas as pd
from keras.models import Sequential
from keras.layers import Dense, LSTM

df = pd.read_csv("prices.csv")
dataset = df.filter(["Close"]).values
dataset = (dataset - dataset.min()) / (dataset.max() - dataset.min())
training_data_len = int(np.ceil(len(dataset) * 0.8))
train_data = dataset[0:training_data_len, :]
x_train = []
y_train = []
for i in range(20, len(train_data)):
    x_train.append(train_data[i - 20:i, 0])
    y_train.append(train_data[i, 0])
x_train, y_train = np.array(x_train), np.array(y_train)
x_train = np.reshape(x_train, (x_train.shape[0], x_train.shape[1], 1))
model = Sequential()
model.add(LSTM(50, return_sequences=True, input_shape=(x_train.shape[1], 1)))
model.add(LSTM(50, return_sequences=False))
model.add(Dense(25))
model.add(Dense(1))
model.compile(optimizer="adam", loss="mean_squared_error")
model.fit(x_train, y_train, batch_size=4, epochs=1)
"""


def test_a_stock_lstm_script_is_sized_by_its_windows(tmp_path):
    """A Kaggle stock-price LSTM: 20-step windows of the 'Close' column of a CSV; the first
    LSTM reads (20, 1) (it had no input shape: no estimate).  Real Keras runs the script on
    a 100-row stand-in file: the same layers, shapes, counts and fed batch."""
    graph = analyze_source(STOCK, "stock.py").models[0]
    assert graph.input_shapes == [(None, 20, 1)]
    assert graph.setup.batch_size == 4
    _path, expected = model_matches_keras(tmp_path, STOCK)
    fed = expected["fed"]["model"]
    assert (fed["batch_size"], fed["input_shapes"]) == (4, [[20, 1]])
