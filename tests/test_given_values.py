"""``--dim NAME=SIZE`` on a Keras script: the value of a name the code assigns where memlint
cannot know it (a vocabulary size counted from a file's texts), used in its place and listed
with the assumptions; the note on the layer that needs it says so."""

from __future__ import annotations

import json

from memlint.analysis import analyze_text
from memlint.config import Settings
from tests.test_cli import memlint

TWEETS = """\
import pandas as pd
from tensorflow.keras.preprocessing.text import Tokenizer
from tensorflow.keras.preprocessing.sequence import pad_sequences
from tensorflow.keras.models import Sequential
from tensorflow.keras.layers import Embedding, LSTM, Dense

df = pd.read_csv("tweets.csv")
texts = df["text"].values
labels = df["target"].values
tokenizer = Tokenizer(oov_token="<OOV>")
tokenizer.fit_on_texts(texts)
padded = pad_sequences(tokenizer.texts_to_sequences(texts), maxlen=100, padding="post")
vocab_size = len(tokenizer.word_index) + 1
model = Sequential([
    Embedding(vocab_size, 128, input_length=100),
    LSTM(64),
    Dense(1, activation="sigmoid"),
])
model.compile(loss="binary_crossentropy", optimizer="adam")
model.fit(padded, labels, epochs=5, batch_size=64)
"""


def test_a_vocabulary_counted_from_a_file_is_unknown_and_the_note_says_how_to_give_it():
    report = analyze_text(TWEETS, "tweets.py", Settings())
    assert not report.breakdowns[0].complete
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert any("argument 'input_dim'" in n and "--dim vocab_size=SIZE" in n for n in notes)


def test_an_expression_of_unknown_values_is_named_first_then_given():
    """``Embedding(len(tokenizer.word_index) + 1, 128)``: no name to give a value to, so the
    note says to name the expression; named as it says, ``--dim`` sizes the model."""
    inline = TWEETS.replace("vocab_size = len(tokenizer.word_index) + 1\n", "").replace(
        "Embedding(vocab_size, 128", "Embedding(len(tokenizer.word_index) + 1, 128")
    report = analyze_text(inline, "tweets.py", Settings())
    notes = [d.message for d in report.diagnostics if d.code == "MEM900"]
    assert any("e.g. `size = len(tokenizer.word_index) + 1`" in n and "--dim size=SIZE" in n
               for n in notes), notes
    named = inline.replace("Embedding(len(tokenizer.word_index) + 1, 128",
                           "Embedding(size, 128").replace(
        "model = Sequential", "size = len(tokenizer.word_index) + 1\nmodel = Sequential")
    report = analyze_text(named, "tweets.py", Settings(dims={"size": 20000}))
    assert report.breakdowns[0].complete
    assert report.models[0].layers[0].params == 20000 * 128


def test_dim_gives_the_name_its_value_and_the_report_lists_it():
    report = analyze_text(TWEETS, "tweets.py", Settings(dims={"vocab_size": 20000}))
    graph, breakdown = report.models[0], report.breakdowns[0]
    assert breakdown.complete
    # Embedding 20,000 x 128; LSTM(64) over 128 features: 4 * (64 * (128 + 64) + 64)
    assert [layer.params for layer in graph.layers] == [2_560_000, 49_408, 65]
    assert graph.setup.given_values == ["vocab_size = 20000 (--dim, line 13)"]
    assert not [d for d in report.diagnostics if d.code == "MEM900"]


def test_a_value_the_code_fixes_is_not_replaced():
    source = TWEETS.replace("vocab_size = len(tokenizer.word_index) + 1", "vocab_size = 5000")
    report = analyze_text(source, "tweets.py", Settings(dims={"vocab_size": 20000}))
    assert report.models[0].layers[0].params == 5000 * 128
    assert report.models[0].setup.given_values == []


def test_dim_on_the_command_line(tmp_path):
    path = tmp_path / "tweets.py"
    path.write_text(TWEETS)
    proc = memlint("report", path, "--dim", "vocab_size=20000", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    (model,) = json.loads(proc.stdout)["models"]
    assert model["given_values"] == ["vocab_size = 20000 (--dim, line 13)"]
    assert model["params"]["total"] == 2_560_000 + 49_408 + 65
    text = memlint("report", path, "--dim", "vocab_size=20000").stdout
    assert "  given:        vocab_size = 20000 (--dim, line 13)" in text
