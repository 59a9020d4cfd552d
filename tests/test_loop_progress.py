"""``while`` loops that make no progress as memlint evaluates them stop at once, and what
they change becomes unknown (loop_progress.py); loops that make progress, by any route, run;
a ``for`` loop over an iterable not known is skipped, and what it changes becomes unknown."""

from __future__ import annotations

import libcst as cst

from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.state import FileState

HEADER = "import keras\nimport numpy as np\nfrom keras import layers\n"

SPINNING = HEADER + """
questions, seen = [], set()
while len(questions) < 50000:
    a = int(np.random.randint(0, 999))
    key = (a, a)
    if key in seen:
        continue
    seen.add(key)
    questions.append(str(a))

x = np.zeros((len(questions), 7, 12))
model = keras.Sequential([keras.Input((7, 12)), layers.LSTM(16), layers.Dense(4)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, np.zeros((len(questions), 4)), batch_size=32)
"""


def test_a_loop_spinning_on_undecidable_branches_stops_and_the_model_after_it_is_found():
    result = analyze_source(SPINNING, "spin.py")
    [note] = [d for d in result.diagnostics if d.code == "MEM903"]
    assert note.line == SPINNING.splitlines().index(
        "while len(questions) < 50000:") + 1
    assert "changed nothing memlint knows" in note.message
    assert "questions" in note.message and "seen" in note.message
    assert result.work["steps"] < 2_000
    [graph] = result.models
    assert graph.params == 16 * 4 * (12 + 16 + 1) + 16 * 4 + 4
    assert graph.setup.batch_size == 32  # fit's own batch size; the sample count is unknown


def values(source: str) -> dict:
    state = FileState("p.py")
    interp = Interpreter(cst.parse_module(source), state)
    interp.run()
    assert not [d for d in state.diagnostics if d.code == "MEM903"], state.diagnostics
    return interp.globals


def test_loops_that_make_progress_run_to_their_end():
    found = values("i = 0\nwhile i < 5:\n    i += 1\n"
                   "xs = []\nwhile len(xs) < 4:\n    xs.append(1)\n")
    assert found["i"] == 5 and found["xs"] == [1, 1, 1, 1]


def test_progress_made_inside_called_functions_and_objects_counts():
    found = values(
        "n = 0\n"
        "def step():\n    global n\n    n += 1\n"
        "while n < 3:\n    step()\n"
        "class Counter:\n    def __init__(self):\n        self.k = 0\n"
        "    def bump(self):\n        self.k += 1\n"
        "c = Counter()\n"
        "while c.k < 4:\n    c.bump()\n"
        "d = {'left': 3}\n"
        "while d['left'] > 0:\n    d['left'] -= 1\n")
    assert found["n"] == 3
    assert found["c"].attrs["k"] == 4
    assert found["d"] == {"left": 0}


def _skipped_loop(body: str):
    source = HEADER + "import json\nsizes = json.load(open('c.json'))['sizes']\n" + body + (
        "model.compile(optimizer='adam', loss='mse')\n"
        "model.fit(np.zeros((100, 8)), np.zeros((100, 2)), batch_size=10)\n")
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    result = analyze_text(source, "loop.py", Settings(gpu="1GiB"))
    return result, [d for d in result.diagnostics if d.code == "MEM005"]


def test_a_loop_over_an_unknown_iterable_leaves_what_it_builds_unknown():
    # its body was skipped and what it changes kept its value before it: the model kept
    # only the layers outside the loop and got a verdict as if complete
    # (a body that calls a model or a layer is read once; one that makes data is skipped)
    for body, read in [
        ("model = keras.Sequential([keras.Input((8,))])\n"
         "for s in sizes:\n"
         "    model.add(layers.Dense(s))\n"
         "model.add(layers.Dense(2))\n", "read once, for what it calls"),
        ("x = inp = keras.Input((8,))\n"
         "for s in sizes:\n"
         "    x = layers.Dense(s)(x)\n"
         "model = keras.Model(inp, layers.Dense(2)(x))\n", "read once, for what it calls"),
        ("words = set()\n"
         "for line in open('corpus.txt'):\n"
         "    words.update(line.split())\n"
         "model = keras.Sequential([keras.Input((8,)), layers.Embedding(len(words) + 1, 4),\n"
         "                          layers.Flatten(), layers.Dense(2)])\n", "skipped"),
    ]:
        result, mem005 = _skipped_loop(body)
        assert mem005, (body, [(d.code, d.message) for d in result.diagnostics])
        [note] = [d for d in result.diagnostics if d.message.startswith("for loop")]
        assert f"its body is {read}" in note.message
    _, mem005 = _skipped_loop(
        "model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])\n"
        "for path in open('files.txt'):\n"
        "    print(path)\n")
    assert not mem005  # a loop that changes nothing the model needs leaves it complete


def test_a_while_loop_on_an_unknown_condition_leaves_what_it_builds_unknown():
    result, mem005 = _skipped_loop(
        "model = keras.Sequential([keras.Input((8,))])\n"
        "n = 0\n"
        "while n < sizes:\n"
        "    model.add(layers.Dense(64))\n"
        "    n += 1\n"
        "model.add(layers.Dense(2))\n")
    assert mem005, [(d.code, d.message) for d in result.diagnostics]
    [note] = [d for d in result.diagnostics if d.message.startswith("while condition")]
    assert note.message.endswith("its body is read once, for what it calls, and n is unknown "
                                 "after it")
    assert any("its condition is not known statically" in d.message
               for d in result.diagnostics)


def test_an_array_filled_by_a_loop_over_an_unknown_iterable_keeps_its_shape():
    # a Sequence's batch: X = np.empty((batch, 32, 32, 1)); X[i,] = np.load(path) for
    # each ID of a shuffled list: the array's shape and dtype do not change
    got = values(HEADER + "import json\nids = json.load(open('ids.json'))\n"
                 "X = np.empty((8, 32, 32, 1))\nfor i, ID in enumerate(ids):\n"
                 "    X[i,] = np.load(ID + '.npy')\n")
    assert (got["X"].shape, got["X"].dtype) == ((8, 32, 32, 1), "float64")


def test_a_loop_skipped_on_every_call_of_its_function_is_noted_once():
    # the first call makes pairs and labels unknown, later calls find them unknown already:
    # one note, naming them (Keras 2's siamese example builds its pairs this way)
    result = analyze_source(HEADER + """
def make_pairs(groups):
    pairs, labels = [], []
    n = min(len(g) for g in groups) - 1
    for d in range(10):
        for i in range(n):
            pairs += [[groups[d][i], groups[d][i + 1]]]
            labels += [1]
    return pairs, labels

groups = [np.where(np.load('y.npy') == i)[0] for i in range(10)]
train = make_pairs(groups)
test = make_pairs(groups)
model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
""", "m.py")
    notes = [d.message for d in result.diagnostics if d.message.startswith("for loop")]
    assert notes == ["for loop: the loop's iterable is not known statically; its body is "
                     "skipped, and labels, pairs are unknown after it"], notes


def test_a_model_run_only_in_a_skipped_loop_is_estimated_for_that_use():
    # keras.io's video classifier extracts features frame by frame of files it lists: the
    # extractor is predicted on, never trained (it was assumed trained at batch 32)
    result = analyze_source(HEADER + """
import glob
extractor = keras.Sequential([keras.Input((64, 64, 3)), layers.Conv2D(8, 3),
                              layers.GlobalAveragePooling2D()])
features = []
for path in glob.glob("frames/*.npy"):
    frame = np.load(path)
    features.append(extractor.predict(frame[None], verbose=0))
""", "m.py")
    (graph,) = result.models
    assert graph.setup.mode == "infer"
    assert graph.setup.mode_source == "predict() at line 11"
    # a model trained only in such a loop: its batch is the loop's, not known
    result = analyze_source(HEADER + """
model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
model.compile("adam", "mse")
for x, y in make_batches("data.csv"):
    model.train_on_batch(x, y)
""", "m.py")
    (graph,) = result.models
    assert graph.setup.mode == "train" and graph.setup.batch_size is None
    assert graph.setup.mode_source == "train_on_batch() at line 8"
    assert "not known statically" in graph.setup.batch_source


def test_a_skipped_loop_s_call_keeps_the_arguments_it_does_not_change():
    # the epochs come from the command line: the loop is skipped, the batch size it gives
    # fit() is the code's, the data too (the loop changes neither)
    result = analyze_source(HEADER + """
import sys
x = np.zeros((1000, 8))
y = np.zeros((1000, 2))
model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
model.compile("adam", "mse")
for epoch in range(int(sys.argv[1])):
    model.fit(x, y, batch_size=64, epochs=1)
""", "m.py")
    (graph,) = result.models
    assert (graph.setup.mode, graph.setup.batch_size) == ("train", 64)
    assert graph.setup.mode_source == "fit() at line 11"
    assert not [d for d in result.diagnostics if "line 11" in d.message], result.diagnostics


def test_a_loop_over_an_unknown_iterable_that_returns_is_still_skipped():
    # a body that returns may not run at all: reading it once would decide the function's
    # result
    result = analyze_source(HEADER + """
import json
def first_size(sizes):
    for s in sizes:
        return s
    return 4
model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])
n = first_size(json.load(open('c.json')))
""", "m.py")
    notes = [d.message for d in result.diagnostics if d.message.startswith("for loop")]
    assert notes and all("its body is skipped" in n for n in notes), notes


def test_a_loop_of_unknown_length_inside_a_long_loop_stays_within_the_budget():
    # Keras 2's ConvLSTM example makes 1,200 movies, each of np.random.randint(3, 8)
    # squares drawn over 15 frames: a body that makes data is skipped; one that calls code
    # of the file is read once on at most MAX_RUNS_ONCE of the outer loop's iterations
    from memlint.frontends.keras.interpreter import MAX_RUNS_ONCE
    for call in ("np.random.randint(0, 3)", "shift(t)"):
        result = analyze_source(HEADER + f"""
def shift(t):
    return t + 1
movies = np.zeros((1200, 15, 40, 40, 1))
for i in range(1200):
    for j in range(np.random.randint(3, 8)):
        for t in range(15):
            d = {call}
            movies[i, t, 10:20, 10:20, 0] += 1
model = keras.Sequential([keras.Input((15, 40, 40, 1)), layers.Flatten(), layers.Dense(2)])
model.compile("adam", "mse")
model.fit(movies, np.zeros((1200, 2)), batch_size=10)
""", "m.py")
        assert not [d for d in result.diagnostics if d.code == "MEM903"], call
        [graph] = result.models
        assert graph.setup.batch_size == 10
        notes = {d.message for d in result.diagnostics if d.message.startswith("for loop")}
        if call == "shift(t)":  # one note, though the last iterations skip the body
            [note] = notes
            assert "its body is read once" in note
        else:
            assert not notes  # a loop making data only: not run at all (slicing.py)
    assert MAX_RUNS_ONCE * 15 * 3 < 1200
