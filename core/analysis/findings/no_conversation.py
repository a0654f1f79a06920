"""``no_conversation``: memory switched on where no conversation exists — an LLM node with a memory block
in a Workflow app, which Dify ignores (spec §8 #15)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import NO_CONVERSATION, WARNING, Finding, quoted

if TYPE_CHECKING:
    from core.flow.graph import Node
    from core.flow.nodes.llm import MemorySettings


def no_conversation_finding(node: Node, memory: MemorySettings) -> Finding:
    """The finding for a node of a Workflow app whose memory block is on."""
    return Finding(
        NO_CONVERSATION,
        f"{quoted(node.label)} has memory switched on ({memory.label()}), but this "
        f"is a Workflow app: there is no conversation, so no history ever "
        f"reaches it.",
        node.label,
        None,
        node.id,
        WARNING,
        "Dify shows the memory setting only in Chatflows and ignores it in a Workflow. Make "
        "the app a Chatflow, or pass what the node must know as an input.",
        {"window": memory.window_size},
    )
