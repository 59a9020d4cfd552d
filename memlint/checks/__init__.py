"""Rules: one module per rule, each a :class:`~memlint.checks.base.Rule` subclass.

A rule's id, name, default severity, options and examples live in ``rules/<ID>.yaml``; the
module holds only the check.  Importing this package registers every rule.
"""

from memlint.checks.base import RULES, Rule, RuleContext  # noqa: F401

_MODULES = (
    "mem001_over_budget_parameters",
    "mem002_oversized_feature_map",
    "mem003_deep_stack_on_tiny_input",
    "mem004_missing_allow_growth",
)

for _module in _MODULES:
    try:
        __import__(f"memlint.checks.{_module}")
    except ModuleNotFoundError as exc:  # a rule not written yet
        if exc.name != f"memlint.checks.{_module}":
            raise
