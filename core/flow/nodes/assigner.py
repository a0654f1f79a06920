"""The Variable Assigner (v1 and v2): its settings, checked when a flow is read, and its run, whose
writes to conversation variables are applied when the node finishes and stay if a later node fails
(spec/dify-memory.md §3.2). The operations themselves are in :mod:`core.flow.variables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.limits import LimitError, check_value

from ..errors import AssignerError, NodeFailed, VariableError, node_error
from ..variables import VariableChange, check_assigner_data, copy_value, run_assigner_v1, run_assigner_v2

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


def assigner_settings(node: Node) -> None:
    try:
        check_assigner_data(node.data)
    except VariableError as e:
        raise node_error(node, str(e)) from None


def run_assigner(node: Node, ctx: RunContext, run: NodeRun) -> None:
    version = str(node.data.get("version") or "1")
    try:
        if version == "2":
            result = run_assigner_v2(node.data.get("items") or [], ctx.flow.variables, ctx.variables, ctx.pool.get)
        else:
            result = run_assigner_v1(node.data, ctx.flow.variables, ctx.variables, ctx.pool.get)
    except AssignerError as e:
        raise NodeFailed(str(e)) from None
    for name, _, _, new in result.changes:
        try:  # NaN and infinities (1e308 *= 10) have no JSON spelling: no store, export or answer could carry one
            check_value(new, f"conversation.{name}")
        except LimitError as e:
            raise NodeFailed(f"{e}; nothing was written") from None
    run.notes.extend(result.notes)
    changes = [
        VariableChange(
            turn=ctx.turn_number, node_id=node.id, operation=op, name=name, old=old, new=new, turn_id=ctx.turn_id
        )
        for name, op, old, new in result.changes
    ]
    # Dify persists an assigner's writes when the node finishes, whatever happens later (§3.2).
    ctx.variables = result.values
    ctx.pool.conversation = copy_value(result.values)
    ctx.changes.extend(changes)
    run.outputs = {}
    if changes and ctx.on_variables_updated is not None:
        ctx.on_variables_updated(node.id, list(changes))


__all__ = ["assigner_settings", "run_assigner"]
