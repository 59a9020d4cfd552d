"""Training loops that only repeat model calls already seen stop early (loop_repeats.py),
and only those: work is asserted in the analysis's counted units, never in seconds."""

from __future__ import annotations

from memlint.frontends.keras import analyze_source, interpreter
from memlint.frontends.keras.loop_repeats import REPEATS

HEADER = "import keras\nimport numpy as np\nfrom keras import layers\n"
MODELS = """
gen = keras.Sequential([keras.Input((100,)), layers.Dense(784)])
disc = keras.Sequential([keras.Input((784,)), layers.Dense(1)])
disc.compile(optimizer="adam", loss="binary_crossentropy")
"""
AFTER = "after = keras.Sequential([keras.Input((8,)), layers.Dense(3)])\n"


def training_loop(epochs: int, extra: str = "") -> str:
    return HEADER + MODELS + f"""
def train(epochs, batch_size):
    half = batch_size // 2
    for epoch in range(epochs):
        noise = np.random.normal(0, 1, (half, 100))
        fake = gen.predict(noise)
        d_loss = disc.train_on_batch(fake, np.zeros((half, 1)))
        if epoch % 200 == 0:
            print(epoch, d_loss){extra}

train({epochs}, 64)
""" + AFTER


def limits(result) -> list:
    return [d.message for d in result.diagnostics if d.code == "MEM903"]


def test_a_long_training_loop_stops_after_its_repeats_and_the_analysis_goes_on():
    result = analyze_source(training_loop(30_000), "gan.py")
    [message] = limits(result)
    assert f"the last {REPEATS} only repeated calls of the models" in message
    assert result.work["loop_iterations"] <= REPEATS + 2
    assert len(result.models) == 3  # the model made after the loop is found
    disc = result.models[1]
    assert disc.setup.batch_size == 32  # what the loop trains it on
    assert disc.layers[-1].output_shape == (None, 1)


def test_the_stop_is_at_the_loop_and_costs_few_steps():
    source = training_loop(30_000)
    result = analyze_source(source, "gan.py")
    [diagnostic] = [d for d in result.diagnostics if d.code == "MEM903"]
    loop_line = source.splitlines().index("    for epoch in range(epochs):") + 1
    assert (diagnostic.line, diagnostic.column) == (loop_line, 5)
    assert result.work["steps"] < 5_000  # the loop alone would spend the 200,000 budget


def test_a_loop_that_fits_in_the_budget_runs_to_its_end():
    result = analyze_source(training_loop(60), "gan.py")
    assert limits(result) == []
    assert result.work["loop_iterations"] == 60


def test_a_loop_that_changes_a_model_is_never_stopped_for_repeating(monkeypatch):
    monkeypatch.setattr(interpreter, "MAX_STEPS", 20_000)
    schedule = ("\n        if epoch == 25000:\n"
                "            disc.compile(optimizer='sgd', loss='binary_crossentropy')")
    result = analyze_source(training_loop(30_000, schedule), "gan.py")
    [message] = limits(result)
    assert message.startswith("analysis stopped after 20,000 steps")
    assert len(result.models) == 2  # nothing after the loop: the budget ran out in it


def test_loops_without_model_calls_are_never_stopped_for_repeating(monkeypatch):
    """Building data in a loop calls no model: its length may be the data's shape."""
    monkeypatch.setattr(interpreter, "MAX_STEPS", 20_000)
    source = HEADER + MODELS + """
rows = []
for i in range(30_000):
    rows.append(np.zeros(784))
    disc.summary()
disc.fit(np.array(rows), np.zeros((len(rows), 1)), batch_size=16)
"""
    result = analyze_source(source, "data.py")
    [message] = limits(result)
    assert message.startswith("analysis stopped after 20,000 steps")


def test_calls_with_new_arguments_keep_the_loop_running(monkeypatch):
    """Every iteration trains on a new batch size: nothing repeats, nothing is stopped early."""
    monkeypatch.setattr(interpreter, "MAX_STEPS", 20_000)
    source = HEADER + MODELS + """
for step in range(30_000):
    disc.train_on_batch(np.zeros((step + 1, 784)), np.zeros((step + 1, 1)))
"""
    result = analyze_source(source, "grow.py")
    [message] = limits(result)
    assert message.startswith("analysis stopped after 20,000 steps")


def test_an_inner_loop_that_only_repeated_stops_early_when_its_outer_loop_runs_it_again():
    """The inner loop reads its variable, so it never reaches a fixed point (below)."""
    source = HEADER + MODELS + """
for epoch in range(3):
    disc.fit(np.zeros((64, 784)), np.zeros((64, 1)), batch_size=16)
    for i in range(100):
        disc.predict(np.zeros((1, 784)) + i)
""" + AFTER
    result = analyze_source(source, "nested.py")
    [message] = limits(result)
    assert "as its earlier runs did" in message
    assert result.work["loop_iterations"] == 100  # the first run of the inner loop, whole
    assert len(result.models) == 3


def test_an_inner_loop_whose_late_iterations_differ_runs_whole_every_time():
    source = HEADER + MODELS + """
for epoch in range(3):
    for i in range(100):
        disc.predict(np.zeros((1 if i < 90 else 2, 784)))
""" + AFTER
    result = analyze_source(source, "late.py")
    assert limits(result) == []
    assert result.work["loop_iterations"] == 100


def test_what_a_stopped_loop_would_have_changed_is_unknown_after_it():
    import libcst as cst

    from memlint.frontends.keras.interpreter import Interpreter
    from memlint.frontends.keras.state import FileState
    from memlint.layers.base import Unknown

    source = HEADER + MODELS + """
losses = []
x_train = np.zeros((64, 784))
for step in range(30000):
    loss = disc.train_on_batch(x_train[:16], np.zeros((16, 1)))
    losses.append(loss)
    last = step
"""
    state = FileState("loop.py")
    interp = Interpreter(cst.parse_module(source), state)
    interp.run()
    [note] = [d for d in state.diagnostics if d.code == "MEM903"]
    assert "last, loss, losses, step unknown after it" in note.message
    for name in ("last", "loss", "losses", "step"):
        assert isinstance(interp.globals[name], Unknown), name
    assert interp.globals["x_train"].shape == (64, 784)  # only read: still known


# ---------------------------------------------------------------------- fixed points

GENERATION = HEADER + MODELS + """
def sample(preds, temperature):
    preds = np.log(preds) / temperature
    return np.argmax(np.random.multinomial(1, preds, 1))

x = np.zeros((512, 784))
y = np.zeros((512, 1))
for epoch in range(40):
    disc.fit(x, y, batch_size=128, epochs=1)
    print("epoch", epoch)
    for diversity in [0.2, 0.5, 1.0, 1.2]:
        sentence = "seed"
        for i in range(400):
            x_pred = np.zeros((1, 784))
            preds = disc.predict(x_pred, verbose=0)[0]
            sentence = sentence[1:] + str(sample(preds, diversity))
last = keras.Sequential([keras.Input((8,)), layers.Dense(epoch + int(diversity * 10))])
""" + AFTER


def test_a_loop_that_only_repeats_itself_ends_at_its_fixed_point_with_nothing_lost():
    """Every iteration repeats the model calls and leaves every value as the previous one
    did, and nothing that runs reads the loop variables: the rest would do the same."""
    result = analyze_source(GENERATION, "generate.py")
    assert limits(result) == []  # nothing is lost, so nothing is noted
    assert result.work["loop_iterations"] <= 4  # not 40 x 4 x 400
    assert result.work["steps"] < 5_000
    assert len(result.models) == 4
    assert result.models[1].setup.batch_size == 128
    assert result.models[2].layers[-1].output_shape == (None, 51)  # epoch 39, diversity 1.2


def test_a_loop_stopped_at_its_fixed_point_leaves_its_variable_at_the_last_item():
    import libcst as cst

    from memlint.frontends.keras.interpreter import Interpreter
    from memlint.frontends.keras.state import FileState

    state = FileState("generate.py")
    interp = Interpreter(cst.parse_module(GENERATION), state, slicing=True)
    interp.run()
    assert interp.globals["epoch"] == 39 and interp.globals["diversity"] == 1.2
    assert interp.globals["i"] == 399


def test_a_loop_whose_variable_is_read_runs_to_its_end():
    """``if epoch == 30: ...`` may do something new late: no fixed point is assumed."""
    source = HEADER + MODELS + """
x = np.zeros((512, 784))
for epoch in range(40):
    disc.fit(x, np.zeros((512, 1)), batch_size=128)
    if epoch == 30:
        late = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
"""
    result = analyze_source(source, "late.py")
    assert result.work["loop_iterations"] == 40
    assert len(result.models) == 3  # the model of the 31st epoch


def test_a_loop_variable_a_function_of_the_file_reads_is_live():
    source = HEADER + MODELS + """
def batch():
    return 64 if epoch < 30 else 128

x = np.zeros((512, 784))
for epoch in range(40):
    disc.fit(x, np.zeros((512, 1)), batch_size=batch())
"""
    result = analyze_source(source, "closure.py")
    assert result.work["loop_iterations"] == 40


def test_a_loop_that_changes_a_value_each_iteration_runs_to_its_end():
    source = HEADER + MODELS + """
x = np.zeros((512, 784))
seen = []
for epoch in range(40):
    disc.fit(x, np.zeros((512, 1)), batch_size=128)
    seen.append(1)
disc.fit(np.zeros((len(seen), 784)), np.zeros((len(seen), 1)), batch_size=len(seen))
"""
    result = analyze_source(source, "grows.py")
    assert result.work["loop_iterations"] == 40


HELPER = """
import keras
import numpy as np
from keras import layers

width = 8
model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
model.compile(optimizer="adam", loss="mse")


def widen():
    global width
    if step == 30:
        width = 16


for step in range(40):
    model.fit(np.zeros((8, 4)), np.zeros((8, 2)), batch_size=8)
    widen()
"""


def test_a_loop_of_an_imported_module_whose_variable_its_functions_read_runs_to_its_end(
        tmp_path):
    """The functions that may read a loop's variable are those of the loop's own module."""
    (tmp_path / "helper.py").write_text(HELPER, encoding="utf-8")
    main = tmp_path / "main.py"
    main.write_text("import keras\nfrom keras import layers\nfrom helper import width\n"
                    "m = keras.Sequential([keras.Input((4,)), layers.Dense(width)])\n",
                    encoding="utf-8")
    result = analyze_source(main.read_text(encoding="utf-8"), str(main))
    [model] = result.models
    assert model.layers[-1].output_shape == (None, 16)  # set by the 31st iteration
    # written in the analysed file itself, the same loop runs to its end too
    here = analyze_source(HELPER + "m = keras.Sequential([keras.Input((4,)), "
                                   "layers.Dense(width)])\n", "here.py")
    assert here.models[-1].layers[-1].output_shape == (None, 16)
