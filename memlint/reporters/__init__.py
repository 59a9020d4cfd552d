"""Reporters: the same diagnostics and models printed as text, JSON or GitHub annotations."""

from memlint.reporters import github, json_format, text

FORMATS = {"text": text, "json": json_format, "github": github}
