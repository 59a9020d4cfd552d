"""Configuration discovery and precedence, and in-line suppression comments."""

import pytest

from memlint.config import ConfigError, settings_for, settings_from_table
from memlint.suppression import suppressions


def test_pyproject_table_is_found_walking_up(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.memlint]\ngpu = "t4"\nbatch-size = 8\nignore = ["MEM004"]\n'
        '[tool.memlint.rules.MEM002]\nactivation-share = 0.5\n')
    (tmp_path / "pkg").mkdir()
    model = tmp_path / "pkg" / "model.py"
    model.write_text("")
    settings = settings_for(model, {})
    assert settings.gpu == "t4" and settings.batch_size == 8
    assert not settings.enabled("MEM004") and settings.enabled("MEM001")
    assert settings.rule_options("MEM002", {"activation-share": 0.25}) == {"activation-share": 0.5}


@pytest.mark.parametrize("text", [
    '[tool.memlint]\ngpu = "t4"\n',
    '[tool."memlint"]\ngpu = "t4"\n',
    '[project]\nname = "x"\n\n[tool]\nmemlint = { gpu = "t4" }\n',
    '[tool]\nmemlint.gpu = "t4"\n',
    'tool.memlint.gpu = "t4"\n',
    'tool = { memlint = { gpu = "t4" } }\n',
])
def test_every_toml_spelling_of_the_memlint_table_is_read(tmp_path, text):
    """A pyproject.toml is parsed only when it may configure memlint; every TOML form of
    ``tool.memlint`` still is."""
    (tmp_path / "pyproject.toml").write_text(text)
    model = tmp_path / "model.py"
    model.write_text("")
    assert settings_for(model, {}).gpu == "t4"


def test_a_pyproject_that_only_names_memlint_configures_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\ndependencies = ["memlint"]\n[tool.ruff]\nline-length = 99\n')
    model = tmp_path / "model.py"
    model.write_text("")
    assert settings_for(model, {}).gpu is None


def test_memlint_yaml_with_per_file_overrides_and_cli_precedence(tmp_path):
    (tmp_path / ".memlint.yaml").write_text(
        "gpu: 2GiB\nper-file-overrides:\n  'experiments/*.py':\n    gpu: 80GiB\n    mode: infer\n")
    (tmp_path / "experiments").mkdir()
    big = tmp_path / "experiments" / "big.py"
    big.write_text("")
    small = tmp_path / "small.py"
    small.write_text("")
    assert settings_for(small, {}).gpu == "2GiB"
    assert settings_for(big, {}).gpu == "80GiB" and settings_for(big, {}).mode == "infer"
    assert settings_for(big, {"gpu": "16GiB", "batch_size": None}).gpu == "16GiB"


@pytest.mark.parametrize("table", [{"batch-size": 0}, {"mode": "fly"}, {"gpux": 1},
                                   {"input-shape": "a,b"}, {"fail-on": "fatal"}])
def test_bad_settings_name_the_key(table):
    with pytest.raises(ConfigError, match=list(table)[0]):
        settings_from_table(table, "cfg")


def test_input_shape_forms():
    assert settings_from_table({"input-shape": "16,16,1"}, "x").input_shape == (16, 16, 1)
    assert settings_from_table({"input-shape": [None, 8]}, "x").input_shape == (None, 8)


def test_named_input_forms():
    # --input NAME=SHAPE (repeatable) and the inputs table of a config file, merged
    cli = settings_from_table({"inputs": ["encoder_inputs=20", "image=224,224,3"]}, "x")
    assert cli.inputs == {"encoder_inputs": (20,), "image": (224, 224, 3)}
    table = settings_from_table({"inputs": {"tokens": [128]}}, "x", base=cli)
    assert table.inputs == {"encoder_inputs": (20,), "image": (224, 224, 3), "tokens": (128,)}
    for bad in (["20"], ["=20"], ["tokens=a"], 5):
        with pytest.raises(ConfigError, match="input"):
            settings_from_table({"inputs": bad}, "x")


def test_suppression_comments():
    table = suppressions(
        "a = 1  # noqa: MEM001, MEM004 because reasons\n"
        "b = 2  # noqa\n"
        "c = 3  # memlint: ignore[MEM003]\n"
        "d = 4  # memlint: ignore\n"
        "e = 5  # an ordinary comment\n")
    assert table[1] == {"MEM001", "MEM004"}
    assert table[2] == {"*"}
    assert table[3] == {"MEM003"}
    assert table[4] == {"*"}
    assert 5 not in table
