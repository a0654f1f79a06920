"""What the flow file alone says: memory without a conversation, windows of 0, the conversation reaching
a node twice, and answers one node writes that another's memory replays."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Finding, ordered
from .flow_reads import answer_producers, history_variables
from .foreign_answers import predicted_foreign_answers
from .history_twice import history_twice_findings, memory_block
from .no_conversation import no_conversation_finding
from .window_zero import window_zero_finding

if TYPE_CHECKING:
    from core.flow.graph import Flow, Node


def flow_findings(flow: Flow) -> list[Finding]:
    """What the flow file alone says: memory without a conversation, windows of 0, the
    conversation or the query reaching a node twice, and answers written by one node that
    another node's memory will replay."""
    out: list[Finding] = []
    histories = history_variables(flow)
    producers = answer_producers(flow)
    replaying: dict[tuple[str, ...], list[Node]] = {}
    for node in flow.llm_nodes:
        if node.container:
            continue
        memory = memory_block(node)
        if memory is None:
            continue
        if not flow.is_chat:
            out.append(no_conversation_finding(node, memory))
            continue
        if memory.window_enabled and memory.window_size == 0:
            out.append(window_zero_finding(node.label, [], str, node.id))  # no turns to name: a flow alone has none
        out.extend(history_twice_findings(flow, node, memory, histories))
        others = tuple(sorted({a for ids in producers.values() for a in ids} - {node.id}))
        if others:
            replaying.setdefault(others, []).append(node)
    return ordered(out + predicted_foreign_answers(flow, replaying, producers))
