"""Imports of the user's own modules: read with libcst and interpreted, never imported."""

from __future__ import annotations

import sys
import textwrap

from memlint.analysis import analyze_file
from memlint.config import Settings, settings_for
from memlint.frontends.keras import analyze_source
from tests.conftest import FIXTURES

BLOCKS = """
from keras import layers

UNITS = 8

def dense_block(x, units=UNITS):
    x = layers.Dense(units)(x)
    return layers.Activation("relu")(x)
"""

# Dense(4 -> 8): 40 params, then Dense(8 -> 2): 18 params
MAIN_TAIL = """
inputs = keras.Input(shape=(4,))
x = {call}(inputs)
outputs = keras.layers.Dense(2)(x)
model = keras.Model(inputs, outputs)
"""


def write(folder, files: dict):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def analyse(path, **kwargs):
    return analyze_source(path.read_text(encoding="utf-8"), str(path), **kwargs)


def one_model(result):
    assert len(result.models) == 1, [d.message for d in result.diagnostics]
    return result.models[0]


def main_with(imports: str, call: str) -> str:
    return "import keras\n" + imports + "\n" + MAIN_TAIL.format(call=call)


def test_relative_from_import(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS,
                     "pkg/model.py": main_with("from .blocks import dense_block", "dense_block")})
    result = analyse(tmp_path / "pkg" / "model.py")
    model = one_model(result)
    assert [layer.name for layer in model.layers] == ["input_layer", "dense", "activation",
                                                      "dense_1"]
    assert model.params == 40 + 18
    assert result.diagnostics == []
    # the layers made inside the imported function are located at the call in this file
    assert {layer.location.path for layer in model.layers} == {str(tmp_path / "pkg" /
                                                                   "model.py")}
    assert model.layers[1].location.line == 5


def test_from_dot_import_module(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS,
                     "pkg/model.py": main_with("from . import blocks", "blocks.dense_block")})
    assert one_model(analyse(tmp_path / "pkg" / "model.py")).params == 58


def test_absolute_imports_of_a_project_package(tmp_path):
    files = {"mypkg/__init__.py": "", "mypkg/blocks.py": BLOCKS}
    cases = {
        "a.py": main_with("from mypkg.blocks import dense_block", "dense_block"),
        "b.py": main_with("import mypkg.blocks as b", "b.dense_block"),
        "c.py": main_with("import mypkg.blocks", "mypkg.blocks.dense_block"),
        "d.py": main_with("from mypkg import blocks", "blocks.dense_block"),
        "e.py": main_with("from mypkg.blocks import UNITS, dense_block as block",
                          "(lambda t: block(t, UNITS))"),
    }
    write(tmp_path, {**files, **cases})
    for name in cases:
        if name == "e.py":
            continue  # lambdas are not evaluated; checked below without one
        assert one_model(analyse(tmp_path / name)).params == 58, name
    write(tmp_path, {"e.py": main_with("from mypkg.blocks import UNITS, dense_block as block",
                                       "block")})
    assert one_model(analyse(tmp_path / "e.py")).params == 58


def test_sibling_module_and_namespace_folder(tmp_path):
    write(tmp_path, {"blocks.py": BLOCKS, "parts/blocks.py": BLOCKS,
                     "one.py": main_with("from blocks import dense_block", "dense_block"),
                     "two.py": main_with("from parts import blocks", "blocks.dense_block")})
    assert one_model(analyse(tmp_path / "one.py")).params == 58
    assert one_model(analyse(tmp_path / "two.py")).params == 58


def test_package_root_above_the_file_is_searched(tmp_path):
    write(tmp_path, {"proj/__init__.py": "", "proj/common/__init__.py": "",
                     "proj/common/blocks.py": BLOCKS, "proj/apps/__init__.py": "",
                     "proj/apps/model.py": main_with("from proj.common.blocks import "
                                                     "dense_block", "dense_block"),
                     "proj/apps/rel.py": main_with("from ..common.blocks import dense_block",
                                                   "dense_block")})
    assert one_model(analyse(tmp_path / "proj" / "apps" / "model.py")).params == 58
    assert one_model(analyse(tmp_path / "proj" / "apps" / "rel.py")).params == 58


def test_config_root_is_searched(tmp_path):
    write(tmp_path, {"lib/blocks.py": BLOCKS,
                     "scripts/model.py": main_with("from lib.blocks import dense_block",
                                                   "dense_block")})
    path = tmp_path / "scripts" / "model.py"
    assert analyse(path).models[0].params != 58  # lib/ is not next to the file
    assert one_model(analyse(path, roots=(str(tmp_path),))).params == 58
    # through the configuration file's folder
    (tmp_path / ".git").mkdir()
    (tmp_path / ".memlint.yaml").write_text("batch-size: 8\n", encoding="utf-8")
    settings = settings_for(path, {})
    assert settings.source == str(tmp_path / ".memlint.yaml")
    (model,) = analyze_file(str(path), settings).models
    assert model.params == 58


def test_import_chain_and_module_level_constants(tmp_path):
    write(tmp_path, {
        "cfg.py": "WIDTHS = [8, 16]\n",
        "blocks.py": """
            from keras import layers
            from cfg import WIDTHS

            def tower(x):
                for w in WIDTHS:
                    x = layers.Dense(w)(x)
                return x
        """,
        "model.py": main_with("from blocks import tower", "tower"),
    })
    model = one_model(analyse(tmp_path / "model.py"))
    assert model.params == (4 * 8 + 8) + (8 * 16 + 16) + (16 * 2 + 2)


def test_import_cycle_terminates(tmp_path):
    write(tmp_path, {
        "a.py": """
            from keras import layers
            import b

            def block(x):
                return layers.Dense(8)(x)
        """,
        "b.py": """
            import a

            def helper(x):
                return a.block(x)
        """,
        "model.py": main_with("from b import helper", "helper"),
    })
    assert one_model(analyse(tmp_path / "model.py")).params == 58
    # the cycle through the analysed file itself
    write(tmp_path, {"c.py": "import model\n\ndef f(x):\n    return x\n",
                     "model.py": main_with("from c import f\nfrom blocks_x import g  # missing",
                                           "f")})
    result = analyse(tmp_path / "model.py")
    assert one_model(result).params == 4 * 2 + 2


def test_models_built_in_imported_modules_are_not_reported(tmp_path):
    write(tmp_path, {
        "pretrained.py": """
            import keras
            from keras import layers

            base = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(8)], name="base")
            while True:
                pass
            if unknown_name:
                base.compile(optimizer="adam")
        """,
        "model.py": """
            import keras
            from pretrained import base

            inputs = keras.Input(shape=(4,))
            outputs = keras.layers.Dense(2)(base(inputs))
            model = keras.Model(inputs, outputs)
        """,
    })
    result = analyse(tmp_path / "model.py")
    model = one_model(result)
    assert model.variable == "model"
    assert [layer.name for layer in model.layers] == ["input_layer_1", "base", "dense_1"]
    assert model.params == 40 + 18
    assert result.diagnostics == []  # nothing about pretrained.py's own code


def test_unreadable_module_is_one_note_at_the_import(tmp_path):
    write(tmp_path, {"broken.py": "def f(:\n", "model.py": main_with(
        "from broken import f", "f")})
    result = analyse(tmp_path / "model.py")
    notes = [d for d in result.diagnostics if d.code == "MEM900" and "broken" in d.message]
    assert len(notes) == 1
    assert notes[0].line == 2 and "cannot be parsed" in notes[0].message
    assert all(d.path == str(tmp_path / "model.py") for d in result.diagnostics)


def test_missing_relative_module_is_noted(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": main_with(
        "from .nowhere import f", "f")})
    result = analyse(tmp_path / "pkg" / "model.py")
    assert any("nowhere" in d.message and d.line == 2 for d in result.diagnostics)


def test_shared_step_budget_bounds_a_long_import_chain(tmp_path):
    files = {}
    for i in range(40):
        nxt = f"import m{i + 1}\n" if i < 39 else ""
        files[f"m{i}.py"] = nxt + "total = 0\nfor k in range(9000):\n    total = total + k\n"
    files["model.py"] = "import keras\nimport m0\n" + MAIN_TAIL.format(call="keras.layers.Dense(8)")
    write(tmp_path, files)
    result = analyse(tmp_path / "model.py")
    budget = [d for d in result.diagnostics if d.code == "MEM903"]
    assert budget and budget[0].line == 2  # stopped inside the chain, reported at the import


def test_library_names_and_text_without_a_file_are_not_followed(tmp_path):
    write(tmp_path, {"keras.py": "raise SystemExit\n", "numpy.py": "x = 1\n",
                     "model.py": main_with("import numpy as np", "keras.layers.Dense(8)")})
    assert one_model(analyse(tmp_path / "model.py")).params == 58
    source = main_with("from .blocks import dense_block", "dense_block")
    result = analyze_source(source, "not_a_file_on_disk.py")
    assert result.models  # the relative import is skipped, as before


def test_never_imports_project_modules(tmp_path):
    write(tmp_path, {"evil.py": "import sys\nsys.exit(3)\nraise SystemExit\n",
                     "model.py": main_with("import evil", "keras.layers.Dense(8)")})
    before = set(sys.modules)
    assert one_model(analyse(tmp_path / "model.py")).params == 58
    assert "evil" not in set(sys.modules) - before


def test_fixture_project_resnet():
    report = analyze_file(str(FIXTURES / "project_resnet" / "model.py"), Settings())
    (model,) = report.models
    assert model.variable == "model" and model.name == "project_resnet"
    assert model.params == 21_434 and len(model.layers) == 26
    assert [d.code for d in report.diagnostics if d.code.startswith("MEM9")] == []
    blocks = analyze_file(str(FIXTURES / "project_resnet" / "blocks.py"), Settings())
    assert blocks.models == []
