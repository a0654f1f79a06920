"""Findings from a flow's recorded turns: each node's ledgers, replies and the variables written, plus
the flow's static findings linked to the first turn where they show."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from core.model.conversation import Conversation
from core.model.ledger import Ledger

from .base import FOREIGN_ANSWERS, HISTORY_TWICE, WINDOW_ZERO, Finding, ordered
from .compaction import compaction_findings
from .dominant_message import dominant_messages
from .fact_not_seen import unseen_facts, unseen_variables
from .flows import flow_findings
from .foreign_answers import observed_foreign_answers
from .recorded import Recorded
from .silent_pruning import silent_pruning_finding
from .turns import memory_turn
from .window_zero import window_zero_finding

if TYPE_CHECKING:
    from core.flow.graph import Flow
    from core.flow.runtime import TurnRecord


def run_findings(flow: Flow, conversation: Conversation, records: Sequence[TurnRecord]) -> list[Finding]:
    """Findings from a flow's recorded turns (:class:`core.flow.runtime.TurnRecord`, one per turn of
    ``conversation``, matched by id) — each node's ledgers, replies and the variables written —
    plus the flow's static findings, linked to the first turn where they show."""
    recorded = Recorded.of(flow, conversation, records)
    out = _linked_flow_findings(recorded)
    for node_id, runs in recorded.by_node.items():
        subject = recorded.label(node_id)
        turns = [memory_turn(run.ledger, p) for p, _, run in runs]
        found = silent_pruning_finding(subject, turns, recorded.name, runs[-1][2].memory or {}, node_id)
        if found:
            out.append(found)
        out.extend(dominant_messages(subject, turns, conversation, node_id))
    out += _agent_compactions(recorded)
    out += observed_foreign_answers(recorded)
    out += unseen_variables(recorded)
    out += unseen_facts(recorded)
    return ordered(out)


def _linked_flow_findings(recorded: Recorded) -> list[Finding]:
    """The flow's static findings, each linked to the first recorded turn where it shows; the predicted
    foreign answers are left out (:func:`observed_foreign_answers` reads them from the stored answers)."""
    out = []
    for f in flow_findings(recorded.flow):
        if f.kind == FOREIGN_ANSWERS:
            continue
        runs = recorded.by_node.get(f.node_id or "", [])
        turn = None
        if f.kind in (WINDOW_ZERO, HISTORY_TWICE):
            hit = (
                next((p for p, _, run in runs if run.ledger.kept), None)
                if f.kind == WINDOW_ZERO
                else (runs[0][0] if runs else None)
            )
            turn = recorded.numbers[hit] if hit is not None else None
        if f.kind == WINDOW_ZERO and turn is not None:
            mt = next(memory_turn(run.ledger, p) for p, _, run in runs if run.ledger.kept)
            f = window_zero_finding(f.subject, [mt], recorded.name, f.node_id)
        elif turn is not None:
            f = Finding(f.kind, f.text, f.subject, turn, f.node_id, f.severity, f.detail, f.data)
        out.append(f)
    return out


def _agent_compactions(recorded: Recorded) -> list[Finding]:
    """Agent nodes compacting as Dify 1.17 ships it, read from their ledgers in turn order."""
    agents: dict[str, list[Ledger]] = {}
    for rec in recorded.records:
        for run in rec.node_runs:
            if run.type == "tool-agent" and run.ledger is not None:
                agents.setdefault(run.node_id, []).append(run.ledger)
    return [
        f
        for node_id, ledgers in agents.items()
        for f in compaction_findings(recorded.label(node_id), ledgers, node_id, name=recorded.name)
    ]
