"""The abstract interpreter as a component: one test per evaluation feature on small snippets.

Each snippet runs through :class:`Interpreter` alone and the test reads the module's names
afterwards; expected values are what Python itself gives for the same code.
"""

from __future__ import annotations

import types

import libcst as cst
import pytest

from memlint.frontends.keras.interpreter import Interpreter
from memlint.frontends.keras.state import FileState
from memlint.frontends.keras.values import is_unknown


def run(source: str):
    state = FileState("snippet.py")
    interp = Interpreter(cst.parse_module(source), state)
    interp.run()
    return interp.globals, state


def names(source: str) -> dict:
    return run(source)[0]


def python(source: str) -> dict:
    """What CPython gives for the same snippet (only pure-Python snippets use this)."""
    scope: dict = {}
    exec(compile(source, "snippet", "exec"), scope)  # noqa: S102 - our own test snippet
    return scope


PURE_SNIPPETS = {
    "positional_keyword_default": (
        "def f(a, b=2, *, c=3):\n    return a + b * c\n"
        "r = (f(1), f(1, 4), f(1, c=10), f(b=0, a=5))\n"),
    "star_args_kwargs": (
        "def f(*args, scale=1, **kw):\n    return sum(args) * scale + len(kw)\n"
        "r = f(1, 2, 3, scale=2, x=1, y=2)\n"),
    "tuple_return_and_unpacking": (
        "def split(n):\n    return n // 2, n - n // 2\n"
        "a, b = split(7)\nr = (a, b)\n"),
    "nested_function_closure": (
        "def outer(k):\n    def inner(x):\n        return x * k\n    return inner(3)\n"
        "r = outer(5)\n"),
    "closure_returned": (
        "def make(k):\n    def add(x):\n        return x + k\n    return add\n"
        "r = make(4)(1)\n"),
    "recursion_with_depth": (
        "def depth(n):\n    return 0 if n <= 1 else 1 + depth(n // 2)\n"
        "r = depth(64)\n"),
    "if_elif_else_flags": (
        "USE = 'group'\nr = []\n"
        "for mode in ('batch', 'group', 'none'):\n"
        "    if mode == 'batch' and not USE:\n        r.append(1)\n"
        "    elif mode in ('group', 'layer') or USE is None:\n        r.append(2)\n"
        "    else:\n        r.append(3)\n"),
    "comparisons_chain": "r = (1 < 2 <= 2, 3 != 3, 'a' not in 'bc', None is None)\n",
    "for_range_list_tuple": (
        "r = []\nfor i in range(1, 7, 2):\n    r.append(i)\n"
        "for s in [10, 20]:\n    r.append(s)\nfor t in (7,):\n    r.append(t)\n"),
    "zip_enumerate_items": (
        "r = []\nfor i, (w, d) in enumerate(zip([8, 16], [1, 2])):\n    r.append(i * w + d)\n"
        "for k, v in {'a': 1, 'b': 2}.items():\n    r.append(k * v)\n"),
    "while_known_condition": "n, r = 64, 0\nwhile n > 4:\n    n //= 2\n    r += 1\n",
    "break_continue": (
        "r = []\nfor i in range(10):\n    if i % 2:\n        continue\n"
        "    if i > 6:\n        break\n    r.append(i)\n"),
    "list_comprehension_with_conditions": "r = [i * i for i in range(10) if i % 3 if i > 2]\n",
    "nested_comprehension": "r = [(i, j) for i in range(3) for j in range(i)]\n",
    "dict_comprehension": "r = {f'l{i}': w for i, w in enumerate((4, 8)) if w > 2}\n",
    "try_body": (
        "try:\n    r = 1\nexcept ImportError:\n    r = 2\nelse:\n    r += 10\n"
        "finally:\n    z = 3\n"),
    "try_missing_key_runs_the_handler": (
        "CFG = {'a': 1}\ntry:\n    u = CFG['units']\nexcept KeyError:\n    u = 4\n"
        "def get(k):\n    return [1, 2][k]\n"
        "try:\n    v = get(5)\nexcept (ValueError, LookupError):\n    v = -1\n"
        "try:\n    w = CFG['a']\nexcept Exception:\n    w = 0\nelse:\n    w += 10\n"
        "r = (u, v, w)\n"),
    "dict_update_copy_setdefault": (
        "H = {'units': 8}\nS = dict(H)\nS.update(units=4, depth=2)\nT = H.copy()\n"
        "T['units'] = 2\nT.setdefault('drop', 0.1)\nr = (H, S, T, [1, 2].copy())\n"),
    "isinstance_on_plain_values": (
        "v = 7\nr = (v // 2 if isinstance(v, int) else v, isinstance((1,), (list, tuple)),"
        " isinstance('x', int), isinstance(True, int), isinstance(2.0, (int, float)))\n"),
    "one_line_bodies": (
        "r = []\nfor i in range(3): r.append(i)\nif r: n = len(r); m = 2\n"
        "while n > 0: n -= 1\ntry: q = {}['a']\nexcept KeyError: q = 5\n"
        "def f(x): return x * 2\nz = f(4)\n"),
    "lambda_partial_map": (
        "import functools\nscale = lambda x, k=3: x * k\n"
        "def block(width, depth, expand=1):\n    return width * depth * expand\n"
        "wide = functools.partial(block, expand=4)\n"
        "r = (scale(2), scale(2, k=5), wide(8, 2), list(map(scale, [1, 2])),"
        " list(map(int, ['3', '4'])))\n"),
    "sequence_concatenation_and_repetition": (
        "a = [1, 2]\nalias = a\na += [3]\nb = a + [4] * 2\nc = (1,) + (2,)\n"
        "r = (a, alias, b, c, [0] * 3)\n"),
    "more_builtins": (
        "import math\nr = (divmod(17, 5), math.prod([2, 3, 4]), any([0, 2]), all([1, 0]))\n"),
    "string_methods": (
        "n = 'efficientnetv2-s'\nr = (n.split('-')[-1].startswith('b'), 'a_b_c'.rsplit('_', 1),"
        " '7'.zfill(3), ' x '.strip(), 'blk'.title(), 'a-b'.count('-'), 'L3'.endswith('3'))\n"),
    "sets_copies_and_more_builtins": (
        "import copy\nimport numpy as np\nw = None\n"
        "cfg = [{'repeats': 2, 'f': 16}, {'repeats': 1, 'f': 32}]\nmine = copy.deepcopy(cfg)\n"
        "n = mine[0].pop('repeats')\nextra = mine[1].pop('missing', 7)\n"
        "rates = [float(x) for x in np.linspace(0.0, 0.3, 4)]\n"
        "r = (w in {'imagenet', None}, 'x' in {'a'}, cfg, mine, n, extra, chr(97 + 2), ord('b'),"
        " len(rates), rates[0], rates[-1])\n"),
    "fstring_names": "i = 3\nr = (f'block{i}_conv', f'stage{i:02d}', f'{2.5:.1f}')\n",
    "percent_and_format_names": (
        "r = ('conv%d_%s' % (2, 'a'), 'dense_%d' % 5, '{}_{:03d}'.format('up', 7),"
        " '{name}{i}'.format(name='bn', i=1))\n"),
    "containers_index_slice_append_extend": (
        "a = [1, 2, 3]\na.append(4)\na.extend((5, 6))\nd = {'w': [32, 64]}\n"
        "r = (a[1:4], a[-1], a[::2], d['w'][1], len(a), len(d), (1, 2, 3)[1:])\n"),
    "starred_unpacking": "first, *rest = [1, 2, 3]\n*init, last = (4, 5, 6)\nr = (first, rest, init, last)\n",
    "arithmetic": "r = (7 // 2, 7 % 3, 2 ** 5, -7 // 2, 10 / 4, int('4'), int(3.9), round(2.6), round(2.5))\n",
    "max_min_sum": "r = (max(1, 9), min([3, 2]), sum([1, 2, 3]), max(8, int(0.75 * 30)))\n",
    "math_functions": (
        "import math\nr = (math.ceil(2.1), math.floor(2.9), math.sqrt(16), math.ceil(224 / 32))\n"),
    "boolean_operators_values": "r = (0 or 5, 3 and 4, not 0, None or 'x')\n",
    # Keras 2 YOLO code's compose(*funcs): functions folded into one with functools.reduce
    "functools_reduce_compose": (
        "from functools import reduce\n"
        "def compose(*funcs):\n"
        "    return reduce(lambda f, g: lambda *a, **kw: g(f(*a, **kw)), funcs)\n"
        "r = (compose(lambda x: x + 1, lambda x: x * 3)(2), reduce(lambda a, b: a * b, [2, 3, 4]),\n"
        "     reduce(lambda a, b: a + b, [], 7))\n"),
    # a guard that gives nothing back is not the path followed
    "return_none_guard": (
        "def wrap(n, batch):\n"
        "    if n == 0 or batch <= 0: return None\n"
        "    return batch * 2\n"
        "r = wrap(5, 16)\n"),
    # keras.io's OCR models: the characters of their labels as a sorted set
    "sets": (
        "characters = sorted(set('abcab0' + 'ba1'))\n"
        "r = (characters, len(frozenset([3, 1, 3])), sorted(set([2, 1, 2])))\n"),
}


@pytest.mark.parametrize("snippet", sorted(PURE_SNIPPETS))
def test_evaluates_like_python(snippet):
    source = PURE_SNIPPETS[snippet]
    got = names(source)
    expected = python(source)
    keys = [k for k in expected if not k.startswith("__") and not callable(expected[k])
            and not isinstance(expected[k], types.ModuleType)]
    assert keys, "the snippet must bind something to compare"
    for key in keys:
        assert got[key] == expected[key], f"{key}: memlint {got[key]!r}, Python {expected[key]!r}"


def test_tensor_shape_arithmetic():
    got = names(
        "import keras\nfrom keras import ops\n"
        "x = keras.Input((32, 32, 3))\n"
        "c = x.shape[-1]\n"
        "hw = keras.backend.int_shape(x)[1:3]\n"
        "s = ops.shape(x)[1] // 4\n"
        "full = x.shape\n")
    assert got["c"] == 3
    assert got["hw"] == (32, 32)
    assert got["s"] == 8
    assert tuple(got["full"]) == (None, 32, 32, 3)


def test_undecidable_condition_is_reported_once_with_the_path_taken():
    got, state = run(
        "import sys\nr = []\nfor i in range(3):\n"
        "    if sys.argv[1] == 'big':\n        r.append(1)\n    else:\n        r.append(2)\n")
    notes = [d for d in state.diagnostics if d.code == "MEM900"]
    assert len(notes) == 1
    assert notes[0].line == 4 and "first branch was followed" in notes[0].message
    # what a branch changes is unknown after the if (the other branch may have run)
    assert notes[0].message.endswith(", and r is unknown after it")
    assert is_unknown(got["r"])


UNDECIDED = (
    "import json\nimport numpy as np\nimport keras\nfrom keras import layers\n"
    "cfg = json.load(open('cfg.json'))\n")
FIT = ("model.compile(optimizer='adam', loss='mse')\n"
       "model.fit(np.zeros((100, 8)), np.zeros((100, 2)), batch_size=10)\n")


def _undecided(body: str):
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    return analyze_text(UNDECIDED + body + FIT, "cfg.py", Settings(gpu="1GiB"))


def test_a_model_chosen_by_a_condition_not_known_gets_no_estimate():
    # the first branch's small model was estimated ("fits") for a script whose config may
    # choose the big one
    result = _undecided(
        "if cfg['size'] == 'small':\n"
        "    model = keras.Sequential([keras.Input((8,)), layers.Dense(2)])\n"
        "else:\n"
        "    model = keras.Sequential([keras.Input((8,)), layers.Dense(99999), layers.Dense(2)])\n")
    assert result.models == []
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert "model 'sequential': it is built in a branch of the if at line 6, whose condition " \
           "is not known statically, and another branch may build another: not estimated" \
           in notes, notes


def test_what_a_branch_not_decided_changes_is_unknown_after_it():
    # an optional pooling: following it fixed the smaller shape
    result = _undecided(
        "inp = keras.Input((8,))\n"
        "x = layers.Dense(64)(inp)\n"
        "if cfg['narrow']:\n"
        "    x = layers.Dense(4)(x)\n"
        "model = keras.Model(inp, layers.Dense(2)(x))\n")
    assert [d for d in result.diagnostics if d.code == "MEM005"]
    # a Sequential a branch adds to gets a layer memlint cannot know
    result = _undecided(
        "model = keras.Sequential([keras.Input((8,)), layers.Dense(64)])\n"
        "if cfg['deep']:\n"
        "    model.add(layers.Dense(64))\n"
        "model.add(layers.Dense(2))\n")
    assert [d for d in result.diagnostics if d.code == "MEM005"]


def test_a_model_built_in_a_branch_with_no_alternative_is_estimated():
    # the only model the script can build (trained when no weights are saved); imports
    # guarded by a condition keep the first branch's module
    result = _undecided(
        "import os\n"
        "if cfg['legacy']:\n"
        "    from tensorflow.keras import layers as L\n"
        "else:\n"
        "    from keras import layers as L\n"
        "if not os.path.exists('weights.h5'):\n"
        "    model = keras.Sequential([keras.Input((8,)), L.Dense(2)])\n" + FIT.replace(
            "model.", "    model."))
    [graph] = result.models
    assert (graph.params, graph.setup.batch_size) == (18, 10)


def test_unknown_comprehension_condition_gives_an_unknown_list():
    got = names("import sys\nr = [i for i in range(3) if sys.argv]\n")
    assert is_unknown(got["r"])


def test_recursion_is_bounded_with_a_note():
    got, state = run("def f(n):\n    return f(n + 1)\nr = f(0)\n")
    assert is_unknown(got["r"])
    assert any(d.code == "MEM903" and "nested calls" in d.message for d in state.diagnostics)


def test_library_decorators_are_ignored_with_a_note_and_known_ones_silently():
    got, state = run(
        "import keras\nimport wandb_utils\n"
        "@wandb_utils.timed\ndef width(n):\n    return n * 2\n"
        "@keras.saving.register_keras_serializable()\n"
        "class Block(keras.layers.Layer):\n    pass\n"
        "r = width(4)\n")
    assert got["r"] == 8
    notes = [d for d in state.diagnostics if "decorator" in d.message]
    assert [(d.line, d.severity) for d in notes] == [(3, "info")]
    assert "@wandb_utils.timed" in notes[0].message


def test_decorators_defined_in_the_file_are_applied():
    got, state = run(
        "import functools\nREGISTRY = {}\n"
        "def register(name):\n"
        "    def deco(fn):\n        REGISTRY[name] = fn\n        return fn\n    return deco\n"
        "def doubled(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def wrapper(*args, **kwargs):\n        return 2 * fn(*args, **kwargs)\n"
        "    return wrapper\n"
        "@register('w')\n@doubled\ndef width(n):\n    return n + 1\n"
        "r = (width(3), REGISTRY['w'](4))\n")
    assert got["r"] == (8, 10)
    assert not [d for d in state.diagnostics if "decorator" in d.message]


def test_huge_format_widths_are_not_evaluated():
    got = names("r = f'{1:>100000000}'\n")
    assert is_unknown(got["r"])


def test_pathological_loop_ends_with_an_info_quickly():
    got, state = run("n = 0\nfor i in range(10**12):\n    n += 1\n")
    assert any(d.code == "MEM903" and d.severity == "info" for d in state.diagnostics)


def test_a_handler_that_does_not_catch_the_lookup_never_runs():
    got, state = run("CFG = {}\ntry:\n    u = CFG['k']\nexcept ValueError:\n    u = 4\n")
    assert is_unknown(got["u"])


def test_an_undecidable_error_guard_takes_the_path_that_does_not_raise():
    got, state = run(
        "import sys\nw = 'imagenet'\n"
        "if sys.argv[1] == 'torch':\n    raise ValueError('no')\n"
        "if not (w in {'imagenet', None} or sys.path):\n    raise ValueError('bad weights')\n"
        "r = 1\n")
    assert got["r"] == 1
    (note,) = [d for d in state.diagnostics if d.code == "MEM900"]
    assert note.line == 3 and "branch that raises an error was not followed" in note.message


def test_a_factory_returning_a_model_chosen_by_a_condition_not_known():
    result = _undecided(
        "def build():\n"
        "    if cfg['size'] == 'small':\n"
        "        return keras.Sequential([keras.Input((8,)), layers.Dense(2)])\n"
        "    return keras.Sequential([keras.Input((8,)), layers.Dense(99999), layers.Dense(2)])\n"
        "model = build()\n")
    assert result.models == []
    notes = [d.message for d in result.diagnostics if d.code == "MEM900"]
    assert any("another branch may build another: not estimated" in n for n in notes), notes
    assert not any("never calls" in n for n in notes), notes


@pytest.mark.parametrize("branch,kept", [
    # the U-Net repository's adjustData(): scaled only where the data is not yet in [0, 1]
    ("    img = img / 255\n    mask = mask / 255\n    mask[mask > 0.5] = 1\n", True),
    ("    img = img[:, ::2]\n", False),  # a branch that changes the shape
    ("    img = img / 255\nelse:\n    img = img[:, ::2]\n", False),  # another branch binds it
])
def test_an_array_an_undecided_branch_leaves_with_its_shape_keeps_it(branch, kept):
    from memlint.frontends.keras.values import Array
    got, state = run("import numpy as np\n"
                     "img = np.zeros((2, 256, 256, 1), dtype='uint8')\n"
                     "mask = np.zeros((2, 256, 256, 1), dtype='float32')\n"
                     "import sys\n"
                     "if len(sys.argv) > 1:\n" + branch)
    if kept:  # uint8 / 255 is float64 on one path only: the dtype is not known after it
        assert (got["img"], got["mask"]) == (Array((2, 256, 256, 1), None),
                                             Array((2, 256, 256, 1), "float32"))
    else:
        assert is_unknown(got["img"])
