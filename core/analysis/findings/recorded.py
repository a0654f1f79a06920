"""A flow's recorded turns, read per node: what the findings from recorded runs share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from core.memory.replay import turn_numbers
from core.model.conversation import Conversation

from .base import TurnNamer, turn_namer

if TYPE_CHECKING:
    from core.flow.graph import Flow
    from core.flow.runtime import NodeRun, TurnRecord


@dataclass
class Recorded:
    """The turns recorded from ``flow`` over ``conversation``, in the conversation's order.

    ``by_node`` holds, for each node whose runs carry a Dify memory's ledger (LLM, Question
    Classifier, Parameter Extractor), its ``(position, record, run)`` turn by turn.
    """

    flow: Flow
    conversation: Conversation
    records: list[TurnRecord]
    position: dict[str, int]
    numbers: list[int]
    name: TurnNamer
    by_node: dict[str, list[tuple[int, TurnRecord, NodeRun]]] = field(default_factory=dict)

    @classmethod
    def of(cls, flow: Flow, conversation: Conversation, records: Sequence[TurnRecord]) -> "Recorded":
        from core.flow.node_types import NODE_TYPES

        position = {t.id: i for i, t in enumerate(conversation.turns)}
        recs = sorted((r for r in records if r.id in position), key=lambda r: position[r.id])
        ledger_types = {name for name, kind in NODE_TYPES.items() if kind.dify_memory}
        by_node: dict[str, list[tuple[int, TurnRecord, NodeRun]]] = {}
        for rec in recs:
            for run in rec.node_runs:
                if run.type in ledger_types and run.ledger is not None:
                    by_node.setdefault(run.node_id, []).append((position[rec.id], rec, run))
        return cls(flow, conversation, recs, position, turn_numbers(conversation), turn_namer(conversation), by_node)

    def label(self, node_id: str) -> str:
        """A node's title, or its id when the flow no longer has it."""
        return self.flow.node(node_id).label if self.flow.has_node(node_id) else node_id

    def run_at(self, node_id: str, position: int) -> NodeRun | None:
        """The node's run at the turn at ``position``, if it ran there."""
        return next((run for p, _, run in self.by_node.get(node_id, []) if p == position), None)
