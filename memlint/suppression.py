"""In-line suppression: ``# noqa``, ``# noqa: MEM001,MEM004``, ``# memlint: ignore[MEM001]``."""

from __future__ import annotations

import re
from functools import lru_cache

_CODES = r"[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*"


@lru_cache(maxsize=1)
def _patterns() -> tuple:
    """The two comment forms (compiled only for a file that has one of their words)."""
    return (re.compile(r"#\s*noqa(?::\s*(?P<codes>" + _CODES + "))?", re.IGNORECASE),
            re.compile(r"#\s*memlint:\s*ignore(?:\[(?P<codes>[A-Za-z0-9,\s]*)\])?",
                       re.IGNORECASE))


def suppressions(source: str) -> dict:
    """Line number -> set of suppressed codes (``{"*"}`` for all) found in comments."""
    out: dict = {}
    lowered = source.lower()
    if "noqa" not in lowered and "memlint" not in lowered:
        return out
    for number, line in enumerate(source.splitlines(), start=1):
        if "#" not in line:
            continue
        for pattern in _patterns():
            for match in pattern.finditer(line):
                codes = match.group("codes")
                found = {c.strip().upper() for c in codes.split(",") if c.strip()} if codes \
                    else {"*"}
                out.setdefault(number, set()).update(found or {"*"})
    return out


def is_suppressed(diagnostic, table: dict) -> bool:
    codes = table.get(diagnostic.line)
    return bool(codes) and ("*" in codes or diagnostic.code in codes)
