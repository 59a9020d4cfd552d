"""Small text helpers shared by the rules' messages."""

from __future__ import annotations


def line_range(first: int, last: int) -> str:
    """``lines 9-30``, or ``line 14`` when every layer comes from one line (a loop)."""
    return f"line {first}" if first == last else f"lines {first}-{last}"


def source_span(first, last=None) -> str:
    """``line 14`` / ``lines 9-30`` for layers from source; "" when there are no source lines
    (ONNX nodes: the message names them) or no location."""
    last = last or first
    if first is None or last is None or first.node is not None:
        return ""
    return line_range(first.line, last.line)


def percent(share: float) -> str:
    """A share as a whole percentage that never rounds to a misleading 0% or 100%."""
    if 0.995 <= share < 1:
        return "over 99%"
    if 0 < share < 0.01:
        return "under 1%"
    return f"{share:.0%}"
