"""The if-else node (graphon's condition processor, spec §5.2): its cases, read and checked when a
flow is read (a malformed node is a :class:`core.flow.errors.FlowError` naming it), and its run, which
takes the handle of the first case whose conditions hold (:mod:`core.flow.conditions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ..conditions import COMPARISON_OPERATORS, OPERATOR_ALIASES, condition_holds
from ..errors import node_error

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun
    from ..templates import VariablePool


def if_else_cases(node: "Node") -> list[dict]:
    """The cases of an if-else node; old exports keep one condition list at the top (case ``true``)."""
    cases = node.data.get("cases")
    if cases is None and node.data.get("conditions") is not None:
        cases = [
            {
                "case_id": "true",
                "logical_operator": node.data.get("logical_operator") or "and",
                "conditions": node.data.get("conditions") or [],
            }
        ]
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
            if (
                not isinstance(cond, Mapping)
                or not isinstance(cond.get("comparison_operator"), str)
                or not isinstance(cond.get("variable_selector") or [], list)
            ):
                raise node_error(node, "each condition needs a 'comparison_operator' and a 'variable_selector' list")
            op = OPERATOR_ALIASES.get(cond.get("comparison_operator"), cond.get("comparison_operator"))
            if op not in COMPARISON_OPERATORS:
                raise node_error(
                    node,
                    f"comparison operator {cond.get('comparison_operator')!r} is unknown; "
                    f"expected one of {', '.join(COMPARISON_OPERATORS)}",
                )


def evaluate_if_else(node: Node, pool: VariablePool) -> str:
    """The handle an if-else takes: the first true case's id, or ``false`` (the else branch)."""
    for case in if_else_cases(node):
        logic = case.get("logical_operator", "and")
        result = logic == "and"
        for cond in case.get("conditions") or []:
            ok = condition_holds(cond, pool)
            if logic == "and" and not ok:
                result = False
                break
            if logic == "or" and ok:
                result = True
                break
        else:
            result = logic == "and"  # Dify: all([]) / any([]) when no condition decided early
        if result:
            return str(case.get("case_id") or case.get("id") or "true")
    return "false"


def run_if_else(node: Node, ctx: RunContext, run: NodeRun) -> str:
    branch = evaluate_if_else(node, ctx.pool)
    run.outputs = {"result": branch != "false", "selected_case_id": branch}
    return branch


__all__ = ["check_if_else", "evaluate_if_else", "if_else_cases", "run_if_else"]
