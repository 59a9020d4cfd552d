"""Bad, hostile or pathological input comes back with diagnostics, never an exception, having
spent no more than the analysis's bounded work, and nothing in the analysed file is ever
imported or executed.

No test here reads a clock: work is measured in deterministic units the analysis reports
(``FrontendResult.work``: tokens, interpreter steps, elements allocated by bulk operations,
call depth, loop iterations, project modules) against their bounds (``work_bounds()``), and
the values the interpreter keeps are checked against the size caps.  Seconds live in
``benchmarks/``.
"""

import builtins
import sys

import libcst as cst
import pytest

from memlint.frontends.keras import _nesting_problem, analyze_source, work_bounds
from memlint.frontends.keras import interpreter as frontend_interpreter
from memlint.frontends.keras import models as frontend_models
from memlint.frontends.keras import state as frontend_state
from memlint.frontends.keras.expressions import MAX_INT_BITS
from memlint.frontends.keras.interpreter import MAX_STEPS, Interpreter
from memlint.frontends.keras.state import MAX_ALLOCATED, MAX_SEQUENCE, FileState

CASES = {
    "loop_over_huge_range": "for i in range(10**12):\n    x = i\n",
    "materialised_ranges": "a = list(range(10**12))\nb = sum(range(10**12))\n"
                           "c = sorted(range(10**12))\nd = max(range(10**12))\n"
                           "e = list(zip(range(10**12), range(10**12)))\n",
    "string_bombs": "a = 'a' * 10**10\nb = '%0999999999d' % 1\nc = '{:>999999999}'.format(1)\n"
                    "s = 'a' * 90000\nd = s.replace('a', s)\ne = s.join([s] * 50)\n",
    "power_tower": "x = 2 ** 10 ** 10\ny = 10 ** 10 ** 10 ** 10\n",
    "doubling_list": "l = [1]\nfor i in range(60):\n    l.extend(l)\n    l = l + l\n",
    "many_medium_lists": "d = {}\nfor i in range(10000):\n    d[i] = [i] * 10000\n",
    "nested_comprehension": "x = [[i * j for i in range(10**6)] for j in range(10**6)]\n",
    "recursion": "def f(n):\n    return f(n + 1) + f(n + 2)\nx = f(0)\n",
    "fan_out": "def f(n):\n    for i in range(1000):\n        f(n)\nf(0)\n",
    "while_true": "while True:\n    pass\n",
    "long_chain": "x = " + " + ".join(["1"] * 20000) + "\n",
    "deep_lists": "x = " + "[" * 300 + "1" + "]" * 300 + "\n",
    "deep_calls": "x = " + "f(" * 300 + "1" + ")" * 300 + "\n",
    "deep_model": "import keras\nx = inp = keras.Input((4,))\nfor i in range(3000):\n"
                  "    x = keras.layers.Dense(4)(x)\nm = keras.Model(inp, x)\n",
    "odd_calls": "import math\na = math.sqrt(-1)\nb = [].pop()\nc = {}.get([1])\nd = int('x')\n"
                 "e = range(1, 2, 0)\nf = len(5)\ng = 'x'.format(**{1: 2})\n",
    "odd_layers": "import keras\nx = keras.Input((8,))\n"
                  "y = keras.layers.Flatten([1, 2])(x)\n"
                  "z = keras.layers.Dense('wide')(x)\n"
                  "w = keras.layers.Conv2D(-1, 3)(x)\n"
                  "m = keras.Model(x, [y, z, w])\n",
    "model_cycles": "import keras\na = keras.Sequential()\nb = keras.Sequential([a])\na.add(b)\n"
                    "a.add(a)\na.trainable = False\nx = keras.Input((3,))\n"
                    "m = keras.Model(x, a(x))\n",
    "control_flow_outside": "return 5\n",
    "generators_and_classes": "def g():\n    yield 1\nx = list(g())\n"
                              "class M:\n    pass\nm = M()\n",
}


def over_bounds(work: dict) -> list:
    """The work units over their bound.  A file refused before parsing may have more tokens
    than the bound (they were only counted, never parsed)."""
    bounds = work_bounds()
    assert set(work) == set(bounds), f"work units {sorted(work)} vs bounds {sorted(bounds)}"
    return [f"{unit}: {work[unit]:,} > {bound:,}" for unit, bound in bounds.items()
            if work[unit] > bound and not (unit == "tokens" and not work["parsed"])]


def value_size_problems(values) -> list:
    """What the interpreter kept that breaks its size caps: an int over MAX_INT_BITS, a
    string or sequence over MAX_SEQUENCE, or more elements in all than the bulk allocation
    budget plus one per step."""
    problems, seen, total = [], set(), 0
    stack = list(values)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            problems.append(f"int of {value.bit_length():,} bits")
        elif isinstance(value, (str, bytes, list, tuple, dict, set)):
            total += len(value)
            if len(value) > MAX_SEQUENCE:
                problems.append(f"{type(value).__name__} of {len(value):,} items")
            if isinstance(value, dict):
                stack.extend(value.values())
            elif not isinstance(value, (str, bytes)):
                stack.extend(value)
    if total > MAX_ALLOCATED + MAX_STEPS:
        problems.append(f"{total:,} elements in all")
    return problems


@pytest.mark.parametrize("name", sorted(CASES))
def test_pathological_input_stays_within_its_bounds(name):
    result = analyze_source(CASES[name], f"{name}.py")
    assert isinstance(result.diagnostics, list)
    assert not over_bounds(result.work), over_bounds(result.work)
    if result.work["steps"] == MAX_STEPS:  # the budget ran out: the user is told
        assert "MEM903" in {d.code for d in result.diagnostics}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pathological_input_keeps_small_values(name):
    source = CASES[name]
    if _nesting_problem(source) is not None:  # refused before parsing: nothing interpreted
        assert analyze_source(source, f"{name}.py").work["parsed"] == 0
        return
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return
    state = FileState(f"{name}.py")
    interp = Interpreter(module, state)
    interp.run()
    assert interp.steps <= MAX_STEPS
    assert not value_size_problems(interp.globals.values())


def used(source: str, name: str) -> str:
    """``source`` and a layer reading ``name``: code whose result a model depends on, which
    the analysis evaluates (code nothing reads is skipped, see test_frontend_slicing.py)."""
    return f"{source}import keras\nkeras.layers.Dense({name})\n"


NEEDED = {"while_true": used("n = 0\nwhile True:\n    n += 1\n", "n"),
          "recursion": CASES["recursion"], "fan_out": CASES["fan_out"],
          **{name: used(CASES[name], var) for name, var in (
              ("nested_comprehension", "x"), ("loop_over_huge_range", "x"),
              ("long_chain", "x"), ("many_medium_lists", "d"))}}


def test_the_step_budget_is_enforced_at_any_size(monkeypatch):
    monkeypatch.setattr(frontend_interpreter, "MAX_STEPS", 500)
    for name in ("while_true", "recursion", "fan_out", "nested_comprehension"):
        result = analyze_source(NEEDED[name], f"{name}.py")
        assert result.work["steps"] == 500, name
        assert "MEM903" in {d.code for d in result.diagnostics}, name


def test_the_allocation_budget_is_enforced_at_any_size(monkeypatch):
    monkeypatch.setattr(frontend_state, "MAX_ALLOCATED", 25_000)
    result = analyze_source(NEEDED["many_medium_lists"], "lists.py")
    assert result.work["allocated"] == 20_000  # two lists of 10,000; the third is refused
    assert "MEM903" in {d.code for d in result.diagnostics}


def test_limits_are_reported():
    for name in ("loop_over_huge_range", "recursion", "fan_out", "long_chain",
                 "many_medium_lists", "nested_comprehension"):
        codes = {d.code for d in analyze_source(NEEDED[name], "x.py").diagnostics}
        assert "MEM903" in codes, name


def test_a_deep_functional_model_is_analysed():
    graph = analyze_source(CASES["deep_model"], "x.py").models[0]
    assert len(graph.layers) == 3001
    assert graph.params == 3000 * (4 * 4 + 4)


def test_syntax_error():
    result = analyze_source("import keras\nmodel = keras.Sequential(\n", "broken.py")
    assert result.models == []
    assert [d.code for d in result.diagnostics] == ["MEM902"]


def test_a_python2_print_statement_is_named_as_python2():
    # Keras 1-era scripts print with statements: the parser's message alone listed the
    # tokens it expected
    source = ("from keras.models import Sequential\nmodel = Sequential()\n"
              "print \"built\"\nmodel.compile('sgd', 'mse')\n")
    (diag,) = analyze_source(source, "old.py").diagnostics
    assert diag.code == "MEM902" and diag.line == 3
    assert diag.message.endswith("(line 3 is Python 2, a print statement: memlint reads "
                                 "Python 3 source; convert the file first, e.g. with 2to3)")
    (plain,) = analyze_source("import keras\nmodel = keras.Sequential(\n",
                              "broken.py").diagnostics
    assert "Python 2" not in plain.message


def test_unknown_names_give_partial_results():
    result = analyze_source(
        "import keras\n"
        "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])\n"
        "model.add(make_layer())\n"
        "model.add(keras.layers.Dense(width))\n",
        "partial.py")
    graph = result.models[0]
    assert graph.layers[0].output_shape == (None, 4)
    assert graph.layers[0].params == 16
    assert any("make_layer" in d.message for d in result.diagnostics)
    assert any("width" in d.message for d in result.diagnostics)


def test_an_internal_error_skips_one_statement_only(monkeypatch):
    real = frontend_models.create_layer

    def broken(interp, type_name, *args):
        if type_name == "Dropout":
            raise RuntimeError("boom")
        return real(interp, type_name, *args)

    monkeypatch.setattr(frontend_models, "create_layer", broken)
    result = analyze_source(
        "import keras\n"
        "d = keras.layers.Dropout(0.5)\n"
        "m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n", "x.py")
    assert [graph.variable for graph in result.models] == ["m"]
    (error,) = result.internal_errors  # reported separately: the CLI exits 2 for it
    assert error.startswith("x.py:2: internal error") and "boom" in error


def test_internal_error_exits_2_with_one_line_and_keeps_results(monkeypatch, capsys, tmp_path):
    from memlint import cli

    real = frontend_models.create_layer

    def broken(interp, type_name, *args):
        if type_name == "Dropout":
            raise RuntimeError("boom")
        return real(interp, type_name, *args)

    monkeypatch.setattr(frontend_models, "create_layer", broken)
    path = tmp_path / "x.py"
    path.write_text("import keras\n"
                    "d = keras.layers.Dropout(0.5)\n"
                    "m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n")
    assert cli.main(["check", str(path), "--output-format", "json"]) == 2
    out, err = capsys.readouterr()
    assert '"models"' in out and "dense" in out
    assert len(err.strip().splitlines()) == 1 and "internal error" in err and "boom" in err


def test_nothing_is_imported_or_executed(tmp_path, monkeypatch):
    marker = tmp_path / "executed"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "memlint_probe_module.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n")
    monkeypatch.syspath_prepend(str(package))

    def forbidden(*args, **kwargs):
        raise AssertionError("the analysed code must never be executed")

    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(builtins, "eval", forbidden)
    source = (
        "import os\n"
        "import memlint_probe_module\n"
        "from memlint_probe_module import thing\n"
        f"open({str(marker)!r}, 'w').write('opened')\n"
        f"os.system('touch {marker}')\n"
        f"exec(\"open({str(marker)!r}, 'w')\")\n"
        f"eval(\"open({str(marker)!r}, 'w')\")\n"
        f"__import__('os').system('touch {marker}')\n"
        "def f():\n"
        f"    open({str(marker)!r}, 'w')\n"
        "f()\n"
    )
    analyze_source(source, "hostile.py")
    assert not marker.exists()
    assert "memlint_probe_module" not in sys.modules


def test_formatting_with_argument_widths_is_not_evaluated():
    result = analyze_source(
        "a = '%*d' % (10**9, 1)\n"
        "b = '{:{w}}'.format(1, w=10**9)\n"
        "name = 'block%d_conv' % 3\n"
        "other = '{}_{:03d}'.format('layer', 7)\n"
        "import keras\n"
        "m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name=name + other)])\n",
        "fmt.py")
    assert result.work["allocated"] < 100  # no string of 10**9 characters was built
    assert result.models[0].layers[0].name == "block3_convlayer_007"


def test_huge_files_and_deep_brackets_are_refused_before_parsing():
    for source in ("x = 1\n" * 200_000,                       # over the size bound
                   "x = " + "[" * 50_000 + "1" + "]" * 50_000 + "\n",
                   "x = " + "(" * 5_000 + "\n"):                # unbalanced, too deep
        result = analyze_source(source, "big.py")
        assert [d.code for d in result.diagnostics] == ["MEM903"]
        assert result.work["parsed"] == 0 and result.work["steps"] == 0
    # over the size bound: not even tokenized
    assert analyze_source("x = 1\n" * 200_000, "big.py").work["tokens"] == 0


def test_files_with_too_many_tokens_are_refused_quickly():
    # found by the Keras source sweep: keras/src/ops/numpy_test.py (448 kB, under the size
    # bound) took 15 s; the cost follows the tokens of code, not the characters
    from memlint.frontends.keras.source_limits import MAX_SOURCE_CHARS, MAX_TOKENS

    source = "import keras\n" + "x = keras.layers.Dense(4)\n" * (MAX_TOKENS // 8 + 1)
    assert len(source) < MAX_SOURCE_CHARS
    result = analyze_source(source, "many_tokens.py")
    assert result.work["tokens"] > MAX_TOKENS
    assert result.work["parsed"] == 0 and result.work["steps"] == 0  # refused before libcst
    assert result.models == []
    (diag,) = result.diagnostics
    assert diag.code == "MEM903" and "tokens" in diag.message


def test_comments_and_docstrings_do_not_count_as_tokens():
    from memlint.frontends.keras.source_limits import MAX_TOKENS

    padding = ("# " + "c" * 70 + "\n") * 2_000 + '"""' + "d" * 100_000 + '"""\n'
    model = ("import keras\n"
             "m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n")
    result = analyze_source(padding + model, "commented.py")
    assert [graph.variable for graph in result.models] == ["m"]
    # just under the bound is analysed too
    filler = "a = 1\n" * ((MAX_TOKENS - 40) // 3)
    result = analyze_source(filler + model, "dense.py")
    assert [graph.variable for graph in result.models] == ["m"]


def test_a_long_chain_under_the_token_bound_is_refused_by_its_nesting():
    result = analyze_source("x = " + " + ".join(["1"] * 3_000) + "\n", "chain.py")
    (diag,) = result.diagnostics
    assert diag.code == "MEM903" and "nests" in diag.message
