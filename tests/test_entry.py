"""``--entry NAME(...)``: analysing the model a function or class of the file builds."""

from __future__ import annotations

import textwrap

import pytest

from memlint.analysis import analyze_file, analyze_text
from memlint.cli import main
from memlint.config import ConfigError, Settings, settings_from_table
from memlint.frontends.keras import analyze_source
from memlint.frontends.keras.entry import EntryError, parse_entry
from tests.conftest import FIXTURES

FACTORY = FIXTURES / "project_resnet" / "factory.py"

SOURCE = textwrap.dedent("""
    import keras
    from keras import layers


    def build_mlp(units=8, classes=3, input_dim=4):
        inputs = keras.Input(shape=(input_dim,))
        x = layers.Dense(units, activation="relu")(inputs)
        return keras.Model(inputs, layers.Dense(classes)(x), name="mlp")


    def build_twice(width):
        return build_mlp(units=width)


    def helper(x):
        return x + 1


    class Net(keras.Model):
        def __init__(self, units=6, **kwargs):
            super().__init__(**kwargs)
            self.hidden = layers.Dense(units)
            self.out = layers.Dense(1)

        def call(self, x):
            return self.out(self.hidden(x))
""")


def mlp_params(units, classes, input_dim):
    return input_dim * units + units + units * classes + classes


@pytest.mark.parametrize("text, expected", [
    ("build", ("build", (), {})),
    (" build() ", ("build", (), {})),
    ("build(10, input_shape=(32, 32, 3))", ("build", (10,), {"input_shape": (32, 32, 3)})),
    ("f(a=[1, 2], b={'x': None}, c=-1.5, d='s', e=True)",
     ("f", (), {"a": [1, 2], "b": {"x": None}, "c": -1.5, "d": "s", "e": True})),
])
def test_parse_entry(text, expected):
    assert parse_entry(text) == expected


@pytest.mark.parametrize("text", ["", "build(", "mod.build", "build(x)", "build(*a)",
                                  "build(**k)", "build(__import__('os'))", "1 + 2",
                                  "build()()", "build(a={1, 2})"])
def test_parse_entry_rejects(text):
    with pytest.raises(EntryError):
        parse_entry(text)


def test_entry_with_defaults_and_arguments(tmp_path):
    path = tmp_path / "factories.py"
    path.write_text(SOURCE, encoding="utf-8")
    (model,) = analyze_source(SOURCE, str(path), entry="build_mlp").models
    assert model.name == "mlp" and model.variable == "build_mlp"
    assert model.params == mlp_params(8, 3, 4)
    (model,) = analyze_source(SOURCE, str(path), entry="build_mlp(16, input_dim=5)").models
    assert model.params == mlp_params(16, 3, 5)
    (model,) = analyze_source(SOURCE, str(path), entry="build_twice(2)").models
    assert model.params == mlp_params(2, 3, 4)


def test_entry_class_with_input_shape():
    settings = Settings(entry="Net(units=5)", input_shape=(7,))
    report = analyze_text(SOURCE, "net.py", settings)
    (model,) = report.models
    assert model.kind == "Net"
    assert model.params == (7 * 5 + 5) + (5 + 1)


def test_without_entry_factories_are_listed():
    result = analyze_source(SOURCE, "factories.py")
    assert result.models == []
    (note,) = [d for d in result.diagnostics if "factories" in d.message]
    assert note.code == "MEM900" and note.severity == "info"
    assert "build_mlp(units=..., classes=..., input_dim=...)" in note.message
    assert "build_twice(width)" in note.message and "Net" in note.message
    assert "helper" not in note.message
    assert "--entry build_mlp" in note.message
    assert note.line == 6  # the first factory


def test_factories_are_returned_with_whether_they_need_arguments():
    report = analyze_text(SOURCE, "factories.py", Settings())
    assert report.entries == [("build_mlp", False), ("build_twice", True), ("Net", False)]
    assert analyze_text(SOURCE + "\nm = build_mlp()\n", "f.py", Settings()).entries == []


def test_input_shape_fills_an_input_whose_shape_is_unknown():
    source = textwrap.dedent("""
        import keras
        from keras.src.models import Functional
        from keras.src import layers
        from somewhere import shape_for


        def build(input_shape=None):
            inputs = layers.Input(shape=shape_for(input_shape))
            x = layers.Conv2D(4, 3, name="conv")(inputs)
            return Functional(inputs, x, name="net")
        """)
    unknown = analyze_text(source, "net.py", Settings(entry="build"))
    (model,) = unknown.models
    assert model.layers[1].output_shape is None
    assert any("pass --input-shape" in d.message for d in unknown.diagnostics)
    given = analyze_text(source, "net.py", Settings(entry="build", input_shape=(9, 9, 2)))
    (model,) = given.models
    assert model.kind == "Functional"
    assert [layer.output_shape for layer in model.layers] == [(None, 9, 9, 2), (None, 7, 7, 4)]
    assert model.params == 3 * 3 * 2 * 4 + 4
    (note,) = [d for d in given.diagnostics if "--input-shape gives" in d.message]
    assert note.severity == "info" and "(9, 9, 2)" in note.message


def test_an_input_of_sizes_read_from_data_says_which_and_is_noted_once():
    # keras.io's character-level text generator: Input((maxlen, len(chars))) with chars
    # read from a downloaded corpus; the Sequential it starts has no note of its own, and
    # --dim 'len(chars)=SIZE' gives every len(chars) of the file
    source = textwrap.dedent("""
        import keras
        from keras import layers
        chars = sorted(set(open("corpus.txt").read()))
        rows = open("rows.txt").read().split()
        model = keras.Sequential([keras.Input(shape=(40, len(chars))), layers.LSTM(8),
                                  layers.Dense(len(chars))])
        other = keras.Input((len(rows) // 2, 3))
        """)
    result = analyze_text(source, "gen.py", Settings())
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert [n for n in notes if "Input" in n or "input shape" in n] == [
        "Input 'input_layer': its shape (40, ?) is not known statically (len() of a value "
        "not known statically); --dim 'len(chars)=SIZE' gives it",
        "Input 'input_layer_1': its shape (?, 3) is not known statically (arithmetic on "
        "values not known statically); pass --input-shape SIZE,3"], notes
    assert any(n.endswith("(--dim 'len(chars)=SIZE' gives it a value)") for n in notes), notes
    given = analyze_text(source, "gen.py", Settings(dims={"len(chars)": 57}))
    model = next(m for m in given.models if m.variable == "model")
    assert [layer.output_shape for layer in model.layers] == [(None, 8), (None, 57)]
    assert model.setup.given_values == ["len(chars) = 57 (--dim, first used at line 6)"]


def test_a_layer_sized_by_an_unknown_input_asks_for_the_input_shape():
    # keras.io's timeseries transformer: Conv1D(filters=inputs.shape[-1]) in each block of
    # a model whose Input shape is read from downloaded data; each note named the input's
    # shape as a value to name and pass with --dim, and from the second block on said only
    # "subscript of a value not known statically"
    source = textwrap.dedent("""
        import keras
        from keras import layers
        from somewhere import load
        x_train = load()
        def block(inputs):
            x = layers.Conv1D(4, 1, activation="relu")(inputs)
            return layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x) + inputs
        inputs = keras.Input(shape=x_train.shape[1:])
        x = block(block(inputs))
        model = keras.Model(inputs, layers.Dense(2)(layers.GlobalAveragePooling1D()(x)))
        """)
    result = analyze_text(source, "ts.py", Settings())
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert [n for n in notes if "filters" in n] == [
        f"Conv1D 'conv1d_{i}': argument 'filters': model input shape unknown "
        "(--input-shape gives it)" for i in (1, 3)], notes
    (model,) = analyze_text(source, "ts.py", Settings(input_shape=(500, 1))).models
    assert model.layers[-1].output_shape == (None, 2) and model.params == 2 * (8 + 5) + 4


def test_no_note_when_a_model_is_built_or_nothing_is_a_factory():
    built = SOURCE + "\nmodel = build_mlp()\n"
    assert not [d for d in analyze_source(built, "f.py").diagnostics if "factor" in d.message]
    plain = "def f(x):\n    return x\n"
    assert analyze_source(plain, "f.py").diagnostics == []


def test_unknown_entry_is_noted():
    result = analyze_source(SOURCE, "f.py", entry="build_cnn(3)")
    assert result.models == []
    (note,) = result.diagnostics
    assert "build_cnn" in note.message and "build_mlp" in note.message
    result = analyze_source(SOURCE, "f.py", entry="keras")  # a name, not a factory
    assert result.models == [] and "keras" in result.diagnostics[0].message


def test_entry_on_the_fixture_project():
    (model,) = analyze_file(str(FACTORY), Settings(entry="build_resnet")).models
    assert model.name == "resnet_factory"
    assert model.params == 83_066 and len(model.layers) == 35  # real Keras: same
    (model,) = analyze_file(str(FACTORY),
                            Settings(entry="build_resnet(classes=5, widths=(8, 16))")).models
    assert model.params == 5_645 and len(model.layers) == 26  # real Keras: same


def test_entry_bounded_by_the_step_budget():
    source = "def build():\n    while_ = 0\n    for i in range(10**9):\n" \
             "        for j in range(10**9):\n            while_ = while_ + 1\n" \
             "    return while_\n"
    result = analyze_source(source, "f.py", entry="build")
    assert any(d.code == "MEM903" for d in result.diagnostics)


def test_config_entry():
    assert settings_from_table({"entry": "build(2)"}, "cfg").entry == "build(2)"
    with pytest.raises(ConfigError):
        settings_from_table({"entry": "build("}, "cfg")


def test_cli_entry(capsys):
    assert main(["report", "--entry", "build_resnet(classes=5, widths=(8, 16))",
                 str(FACTORY)]) == 0
    out = capsys.readouterr().out
    assert "Model 'resnet_factory'" in out and "Total params: 5,645" in out
    assert main(["check", "--entry", "build_resnet(", str(FACTORY)]) == 2
    assert "--entry" in capsys.readouterr().err
    assert main(["report", str(FACTORY)]) == 0
    out = capsys.readouterr().out
    assert "no Keras model built at module level" in out
    assert "--entry build_resnet" in out


def test_an_input_sized_by_a_name_not_known_asks_for_that_name():
    # Keras 2's bAbI memory network: Input((story_maxlen,)) with the length read from the
    # stories; its encoders, Sequentials with no input shape of their own, are sized by
    # the call on that Input (no note of theirs)
    source = textwrap.dedent("""
        import keras
        from keras import layers
        stories = load("babi.txt")
        story_maxlen = max(map(len, stories))
        story = keras.Input((story_maxlen,))
        encoder = keras.Sequential()
        encoder.add(layers.Embedding(40, 64))
        model = keras.Model(story, layers.Dense(2)(layers.Flatten()(encoder(story))))
        model.compile("rmsprop", "mse")
        """)
    notes = [d.message for d in analyze_text(source, "b.py", Settings()).diagnostics
             if d.code == "MEM900"]
    assert "Input 'input_layer': its shape (?) is not known statically (max() of a value " \
           "not known statically); --dim story_maxlen=SIZE gives it" in notes, notes
    assert not [n for n in notes if n.startswith("Sequential")], notes
    given = analyze_text(source, "b.py", Settings(dims={"story_maxlen": 68}))
    model = next(m for m in given.models if m.variable == "model")
    assert model.layers[-1].params == 68 * 64 * 2 + 2
