"""XLA's own liveness of a compiled step, beside its buffer plan: the most bytes of the
program's temporaries alive at once, from the text XLA dumps after buffer assignment.

``memory_analysis()`` gives the size of the temporary allocation XLA packs its buffers into
(``temp``).  That size is at least the largest sum of temporaries alive at one moment (the
*live* temporaries, what a walk through the step in XLA's order would add up) and more where
the best-fit packing leaves holes.  The difference tells which part of a miss is the schedule
and what each value holds (memlint's walk models those) and which is where XLA places the
buffers in one allocation (it does not).  Harness only: memlint never imports this.

How: the step is compiled with ``xla_dump_to`` (a per-compilation option), and two of the
files XLA writes for the entry module after optimisation are read:
``*-buffer-assignment.txt`` (each allocation and the values assigned to it, with their
sizes) and ``*-live-range.txt`` (each value's live range over the schedule).  Values of
loop bodies and other nested computations have no live range in the entry's file: their
bytes are not in the sum (a lower bound for programs with loops).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

DUMP_OPTIONS = {"xla_dump_hlo_as_text": True, "xla_dump_hlo_pass_re": "^$"}

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+), (.*)$")
_VALUE = re.compile(r"^ value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\)")
_RANGE = re.compile(r"^\s+(\S+):(\d+)-(\d+)\s*$")


def temp_values(text: str) -> dict:
    """{value name: (offset, bytes)} of the values in the program's temporary allocation
    (``preallocated-temp``) of a ``*-buffer-assignment.txt``."""
    values: dict = {}
    in_temp = False
    for line in text.splitlines():
        head = _ALLOCATION.match(line)
        if head:
            in_temp = "preallocated-temp" in head.group(3)
            continue
        if not line.startswith(" value:"):
            if line and not line.startswith(" "):
                in_temp = False
            continue
        value = _VALUE.match(line)
        if in_temp and value:
            values[value.group(1)] = (int(value.group(3)), int(value.group(2)))
    return values


def live_ranges(text: str) -> dict:
    """{value name: (first, last) position} of a ``*-live-range.txt``'s BufferLiveRange."""
    ranges: dict = {}
    inside = False
    for line in text.splitlines():
        if line.strip() == "BufferLiveRange:":
            inside = True
            continue
        if inside:
            found = _RANGE.match(line)
            if not found:
                if line.strip():
                    break
                continue
            name = found.group(1)  # "name{}" for an array, "name{i}" for a tuple's element
            name = name[:-2] if name.endswith("{}") else name
            ranges[name] = (int(found.group(2)), int(found.group(3)))
    return ranges


def max_live(places: dict, ranges: dict) -> int:
    """The most bytes of one allocation in use at one position: the union of the byte spans
    (``places``: name -> (offset, size)) of the values whose ``ranges`` (inclusive) cover
    it.  A value that takes over the bytes of one it replaces (an in-place update) is not
    counted twice where their ranges meet."""
    starts: dict = {}
    for name, (offset, size) in places.items():
        span = ranges.get(name)
        if span is not None and size:
            starts.setdefault(span[0], []).append((span[1], offset, offset + size))
    alive: list = []
    best = 0
    for position in sorted(starts):
        alive = [v for v in alive if v[0] >= position] + starts[position]
        used = covered_to = 0
        for _, lo, hi in sorted(alive, key=lambda v: v[1]):
            if hi > covered_to:
                used += hi - max(lo, covered_to)
                covered_to = hi
        best = max(best, used)
    return best


def live_temp(folder: Path, module: str) -> Optional[int]:
    """The live temporaries of the module whose name contains ``module`` (``train_step``,
    ``predict_step``) dumped into ``folder``; None when XLA wrote no such files."""
    folder = Path(folder)
    assignments = sorted(folder.glob(f"*{module}*after_optimizations-buffer-assignment.txt"))
    ranges = sorted(folder.glob(f"*{module}*after_optimizations-live-range.txt"))
    if not assignments or not ranges:
        return None
    return max_live(temp_values(assignments[-1].read_text()),
                    live_ranges(ranges[-1].read_text()))
