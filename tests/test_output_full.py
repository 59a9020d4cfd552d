"""The ``full`` output format (source lines and a marker under each span, the default) and
``concise`` (one line per finding, also spelled ``text``)."""

from __future__ import annotations

import re
from pathlib import Path

from memlint.cli import main
from memlint.diagnostics import Diagnostic
from memlint.reporters.full import snippet

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "seed_gtx960_keras1.py"
LINE = re.compile(r"^(?P<path>\S+):(?P<line>\d+):(?P<col>\d+): (?P<code>MEM\d{3}) ")


def run(capsys, *args) -> str:
    main(["check", *map(str, args), "--no-cache"])
    return capsys.readouterr().out


def diag(line, column, end_line=None, end_column=None, node=None):
    return Diagnostic("MEM003", "deep-stack-on-tiny-input", "warning", "msg", "f.py", line,
                      column, end_line, end_column, node=node)


def test_default_is_full_and_keeps_the_concise_lines(capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    full = run(capsys, SEED, "--gpu", "2GiB")
    concise = run(capsys, SEED, "--gpu", "2GiB", "--output-format", "concise")
    assert run(capsys, SEED, "--gpu", "2GiB", "--output-format", "text") == concise
    assert run(capsys, SEED, "--gpu", "2GiB", "--output-format", "full") == full
    heads = [line for line in concise.splitlines() if LINE.match(line)]
    assert heads and len(heads) == len(concise.splitlines()) - 1  # + the summary line
    assert [line for line in full.splitlines() if LINE.match(line)] == heads
    assert full.splitlines()[-1] == concise.splitlines()[-1]
    source = SEED.read_text().splitlines()
    blocks = full.split("\n\n")
    for head in heads:  # each finding shows its own line, with the marker under its column
        m = LINE.match(head)
        block = next(b for b in blocks if b.startswith(head))
        number, column = int(m["line"]), int(m["col"])
        shown = f"{number} | {source[number - 1]}".rstrip()
        rows = block.splitlines()
        at = next(i for i, row in enumerate(rows) if row.strip().endswith(shown.strip())
                  and row.lstrip().startswith(str(number)))
        marker = rows[at + 1]
        bar = marker.index("|") + 2
        assert marker[bar + column - 1] == "^" and set(marker[bar:bar + column - 1]) <= {" "}


def test_snippet_marks_the_span_with_context():
    source = "a = 1\nmodel = Sequential()\nb = 2\n"
    out = snippet(diag(2, 9, 2, 21), source)
    assert out == ["  |", "1 | a = 1", "2 | model = Sequential()",
                   "  |         ^^^^^^^^^^^^ MEM003", "3 | b = 2", "  |"]


def test_snippet_multiline_span_and_tabs():
    source = "x = f(\n\ty,\n\tz)\n"
    out = snippet(diag(1, 5, 3, 4), source)
    rows = [r for r in out if "^" in r]
    assert len(rows) == 3 and rows[-1].endswith(" MEM003")
    assert out[3] == "2 |         y,"  # the tab expanded
    assert rows[1] == "  |         ^^"  # from the first character after the indentation


def test_snippet_long_span_is_elided_and_nodes_have_none():
    source = "\n".join(f"line{i}" for i in range(1, 31))
    out = snippet(diag(2, 1, 20, 3), source)
    assert any(row.startswith("..") for row in out)
    assert sum("^" in row for row in out) == 6
    assert snippet(diag(1, 1, node="Conv_0"), source) == []
    assert snippet(diag(99, 1), source) == []
