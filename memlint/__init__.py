"""memlint: a static GPU-memory linter for deep-learning model code."""

__version__ = "0.1.0"
