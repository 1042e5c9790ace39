"""The error of the value rules: :class:`ValueRuleError`, for a value that no rule gives.

Every refusal of the plain-Python rules (a record that does not fit its schema, an expression
without a value rule) raises it, with a message naming the column or the expression.
"""

from __future__ import annotations

__all__ = ["ValueRuleError"]


class ValueRuleError(ValueError):
    """A value that no rule gives: a record that does not fit its schema, or an expression
    whose value is runtime-specific (``hash``) or fails in the engine."""
