"""The answer node: its template rendered with the run's variables is (part of) the turn's answer,
streamed as a ``message`` event when it is not empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..templates import render

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


def run_answer(node: Node, ctx: RunContext, run: NodeRun) -> None:
    text = render(str(node.data.get("answer") or ""), ctx.pool)
    run.outputs = {"answer": text}
    ctx.answers.append(text)
    if text:
        ctx.emit("message", answer=text, from_variable_selector=[node.id, "answer"])


__all__ = ["run_answer"]
