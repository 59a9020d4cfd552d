"""The pre-parse count of tokens of code and of bracket depth (source_limits.py) equals what
Python's tokenizer gives, on every fixture and on memlint's own source, and on the corners a
regular expression could get wrong."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from memlint.frontends.keras.source_limits import bracket_depth_and_tokens
from tests.conftest import FIXTURES

_COUNTED = {tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING}
ROOT = Path(__file__).resolve().parents[1]


def tokenizer_counts(source: str) -> tuple:
    depth = deepest = tokens = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        tokens += token.type in _COUNTED
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
    return deepest, tokens


CORNERS = {
    "numbers": "x = [1, 1.5, .5, 5., 1e-3, 1_000, 0x1F, 0o17, 0b101, 3j, 1.5e+10j]\n",
    "operators": "a **= b // c >> 2 << 1 -> d; e := f; g[...] != h <= i >= j == k @ l\n",
    "strings": "s = (rb'a\\'(' + f\"{x}[\" + '''(\n''' + \"\"\"[\\\"\"\"\" + u'}')\n",
    "comments": "x = [1,  # ( [ {\n     2]  \\\n    + 3\n",
    "prefixes": "rb = br = f = 1\nx = rb + br + f + Rb'x' + BR\"y\" + F'z'\n",
}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corners_count_as_the_tokenizer_counts(name):
    assert bracket_depth_and_tokens(CORNERS[name]) == tokenizer_counts(CORNERS[name])


def test_every_fixture_and_memlint_module_counts_as_the_tokenizer_counts():
    files = sorted(FIXTURES.rglob("*.py")) + sorted((ROOT / "memlint").rglob("*.py"))
    differ = []
    for path in files:
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            expected = tokenizer_counts(source)
        except (tokenize.TokenError, SyntaxError):
            continue  # invalid fixtures: the tokenizer itself stops
        if bracket_depth_and_tokens(source) != expected:
            differ.append(path.name)
    assert len(files) > 250 and differ == []
