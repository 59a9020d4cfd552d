"""What is measured of a file before libcst sees it: its size, its tokens of code, its nesting.

libcst's parser and printer recurse once per nesting level and its cost follows the tokens of
code, so a file is refused (with a MEM903 note) when it is larger, longer or deeper than any
model script.  Tokens are counted by one regular expression that splits code as Python's
tokenizer does (names, numbers, strings, operators; comments, blank lines and indentation
are not code), at a fraction of ``tokenize``'s cost: the count is a bound on the work, and
the bracket depth it finds is the tokenizer's, since brackets inside strings and comments
are not counted.  Nesting is measured on the standard library's syntax tree (parsing never
runs the code).
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Optional

MAX_SOURCE_CHARS = 500_000  # larger files are not analysed (libcst needs ~10 s per MB)
# The whole pipeline (parse, positions, interpretation, rules) costs ~50 us per token of code,
# whatever the characters: 20,000 tokens (2,000+ dense lines, far beyond a model script) keep
# one file under ~1-2 s.  Comments, blank lines and indentation are not counted.
MAX_TOKENS = 20_000
MAX_NESTING = 100  # syntax nesting (expressions in expressions ...) beyond any real model script

_TOKEN = re.compile(r"""
    (?P<skip> [ \t\f\r\n]+ | \#[^\r\n]* | \\\r?\n )
  | (?P<string> (?:[rRbBuUfF]{1,2})?
                (?: '''(?:[^\\]|\\[\s\S])*?''' | \"\"\"(?:[^\\]|\\[\s\S])*?\"\"\"
                  | '(?:[^\\'\r\n]|\\[\s\S])*' | "(?:[^\\"\r\n]|\\[\s\S])*" ) )
  | (?P<number> (?: 0[xXoObB][0-9a-fA-F_]+
                  | (?:\d[\d_]*(?:\.[\d_]*)? | \.\d[\d_]*) (?:[eE][+-]?\d[\d_]*)? ) [jJ]? )
  | (?P<name> \w+ )
  | (?P<op> \*\*=? | //=? | >>=? | <<=? | -> | := | \.\.\. | [-+*/%&|^@<>=!]= | [^\s\w] )
""", re.VERBOSE)


def measure(source: str) -> tuple:
    """(why the file is too large or too deeply nested to analyse, or None; its tokens of
    code, 0 when it was not counted)."""
    if len(source) > MAX_SOURCE_CHARS:
        return f"the file has more than {MAX_SOURCE_CHARS:,} characters; it is not " \
               "analysed", 0
    # brackets first: CPython refuses more than 200 levels with a SyntaxError, libcst does not
    # (and its parser can overflow the C stack on thousands)
    depth, tokens = bracket_depth_and_tokens(source)
    if depth > MAX_NESTING:
        return f"the file nests brackets more than {MAX_NESTING} levels deep; it is not " \
               "analysed", tokens
    if tokens > MAX_TOKENS:
        return f"the file has more than {MAX_TOKENS:,} tokens of code; it is not analysed", \
            tokens
    return _ast_nesting_problem(source), tokens


def bracket_depth_and_tokens(source: str) -> tuple:
    """The deepest nesting of (), [] and {} in the file and its number of tokens of code
    (names, operators, numbers, strings)."""
    depth = deepest = tokens = 0
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        if kind == "skip":
            continue
        tokens += 1
        if kind == "op":
            text = match.group()
            if text in "([{":
                depth += 1
                if depth > deepest:
                    deepest = depth
            elif text in ")]}":
                depth -= 1
    return deepest, tokens


def _ast_nesting_problem(source: str) -> Optional[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except SyntaxError:
        return None  # libcst reports it with its position
    except (RecursionError, MemoryError, ValueError):
        return "the file nests expressions too deeply to analyse"
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"the file nests expressions more than {MAX_NESTING} levels deep; " \
                   "it is not analysed"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None
