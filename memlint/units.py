"""Byte sizes: parsing ``2GiB`` / ``1536MiB`` / ``2GB`` and printing binary units."""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, allow_zero: bool = False) -> int:
    """Bytes in ``text``: ``2GiB`` and ``2G`` are binary, ``2GB`` decimal, a bare number bytes;
    ``allow_zero``: ``0`` too (a CUDA context or framework reserve of nothing).

    Raises ``ValueError`` with a message naming the accepted forms.
    """
    match = _SIZE.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (use e.g. 2GiB, 1536MiB, 8GB)")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value == 0 and not allow_zero:
        raise ValueError(f"memory size must be positive: {text!r}")
    return int(value)


def format_bytes(n: int | float | None) -> str:
    """``n`` bytes in binary units with three significant figures: ``826 MiB``, ``1.92 GiB``."""
    if n is None:
        return "?"
    n = float(n)
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{int(n)} B"
