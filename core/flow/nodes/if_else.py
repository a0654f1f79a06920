"""The if-else node's settings (graphon's condition processor, spec §5.2): its cases and the
comparison operators it knows; a malformed node is a :class:`core.flow.errors.FlowError` naming it.
Its cases are evaluated in :mod:`core.flow.runtime` (``evaluate_if_else``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ..errors import node_error

if TYPE_CHECKING:
    from ..graph import Node

COMPARISON_OPERATORS = ("contains", "not contains", "start with", "end with", "is", "is not", "empty", "not empty",
                        "in", "not in", "all of", "=", "≠", ">", "<", "≥", "≤", "null", "not null", "exists",
                        "not exists")
#: ASCII spellings some hand-written flows use for Dify's operators.
OPERATOR_ALIASES = {"==": "=", "!=": "≠", ">=": "≥", "<=": "≤"}


def if_else_cases(node: "Node") -> list[dict]:
    """The cases of an if-else node; old exports keep one condition list at the top (case ``true``)."""
    cases = node.data.get("cases")
    if cases is None and node.data.get("conditions") is not None:
        cases = [{"case_id": "true", "logical_operator": node.data.get("logical_operator") or "and",
                  "conditions": node.data.get("conditions") or []}]
    if cases is None:
        return []
    return list(cases) if isinstance(cases, (list, tuple)) else cases  # anything else is refused by the check


def check_if_else(node: "Node") -> None:
    cases = if_else_cases(node)
    if not isinstance(cases, list):
        raise node_error(node, "'cases' must be a list")
    for case in cases:
        if not isinstance(case, Mapping) or not isinstance(case.get("conditions", []), list):
            raise node_error(node, "each case needs a 'conditions' list")
        if case.get("logical_operator", "and") not in ("and", "or"):
            raise node_error(node, f"logical operator {case.get('logical_operator')!r} is unknown; expected and/or")
        for cond in case.get("conditions", []):
            if not isinstance(cond, Mapping) or not isinstance(cond.get("comparison_operator"), str) \
                    or not isinstance(cond.get("variable_selector") or [], list):
                raise node_error(node, "each condition needs a 'comparison_operator' and a 'variable_selector' list")
            op = OPERATOR_ALIASES.get(cond.get("comparison_operator"), cond.get("comparison_operator"))
            if op not in COMPARISON_OPERATORS:
                raise node_error(node, f"comparison operator {cond.get('comparison_operator')!r} is unknown; "
                                       f"expected one of {', '.join(COMPARISON_OPERATORS)}")
