"""Rules: one module per rule, each a :class:`~memlint.checks.base.Rule` subclass.

A rule's id, name, default severity, options and examples live in ``rules/<ID>.yaml``; the
module holds only the check.  Importing this package registers every rule.
"""

from memlint.checks import (  # noqa: F401  (importing a rule module registers it)
    mem001_over_budget_parameters,
    mem002_oversized_feature_map,
    mem003_deep_stack_on_tiny_input,
    mem004_missing_allow_growth,
    mem005_unknown_activation_size,
    mem006_dataset_in_host_memory,
)
from memlint.checks.base import RULES, Rule, RuleContext

__all__ = ["RULES", "Rule", "RuleContext"]
