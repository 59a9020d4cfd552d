"""Reporters: the same diagnostics and models printed as text, JSON, GitHub annotations or SARIF."""

from memlint.reporters import github, json_format, sarif, text

FORMATS = {"text": text, "json": json_format, "github": github, "sarif": sarif}
