"""``foreign_answers``: one node's answers in another node's memory. Dify stores one answer per turn — the
Answer node's output — and every LLM node with memory replays it as its own past reply (spec/dify-memory.md
§7, Dify#4548). Predicted from the flow (an Answer node renders another LLM node's output), or observed
from node runs (the stored answer holds text another LLM node produced)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.model.conversation import ANSWER

from .base import FOREIGN_ANSWERS, INFO, WARNING, Finding, quoted
from .flow_reads import MODEL_NODES, answer_producers

if TYPE_CHECKING:
    from core.flow.graph import Flow, Node

    from .recorded import Recorded


def predicted_foreign_answers(
    flow: Flow, replaying: dict[tuple[str, ...], list[Node]], producers: dict[str, set[str]]
) -> list[Finding]:
    """``replaying``: the writers (LLM/agent node ids) → the nodes with memory that will replay their answers;
    ``producers``: Answer node id → the nodes whose output it renders (:func:`answer_producers`)."""
    out = []
    for others, nodes in replaying.items():
        names = " and ".join(quoted(flow.node(a).label) for a in others)
        answers = ", ".join(quoted(flow.node(n).label) for n, ids in producers.items() if set(others) & ids)
        readers = ", ".join(n.label for n in nodes)  # the subject; named in quotes in the sentence
        quoted_readers = ", ".join(quoted(n.label) for n in nodes)
        out.append(
            Finding(
                FOREIGN_ANSWERS,
                f"The memory of {quoted_readers} will replay "
                f"answers written by {names}: Dify stores the Answer node's output "
                f"({answers}) as each turn's answer, and every node with memory reads it "
                f"as its own past reply.",
                readers,
                None,
                nodes[0].id,
                INFO,
                "Give each node its own history through a conversation variable, or switch memory off "
                "for the nodes that should not see it (Dify#4548).",
                {"writers": list(others), "nodes": [n.id for n in nodes]},
            )
        )
    return out


def observed_foreign_answers(recorded: Recorded) -> list[Finding]:
    """Each node whose kept memory replays an answer another model node wrote, once per set of writers."""
    producers: dict[int, set[str]] = {}
    templates = answer_producers(recorded.flow)
    for rec in recorded.records:
        ran = {run.node_id for run in rec.node_runs if run.type in MODEL_NODES and run.status == "succeeded"}
        wrote: set[str] = set()
        for run in rec.node_runs:
            if run.type == "answer" and (run.outputs or {}).get("answer"):
                wrote |= templates.get(run.node_id, set()) & ran
        producers[recorded.position[rec.id]] = wrote
    name, numbers, label = recorded.name, recorded.numbers, recorded.label
    out: list[Finding] = []
    reported: set[tuple[str, tuple[str, ...]]] = set()
    for node_id, runs in recorded.by_node.items():
        for p, rec, run in runs:
            for e in run.ledger.entries:
                if not e.kept or e.kind != ANSWER:
                    continue
                others = tuple(sorted(producers.get(e.position, set()) - {node_id}))
                if not others or (node_id, others) in reported:
                    continue
                reported.add((node_id, others))
                writers = " and ".join(quoted(label(a)) for a in others)
                text = (
                    f"{quoted(label(node_id))}'s memory contains replies written by {writers}: at {name(numbers[p])} it "
                    f"replays {name(numbers[e.position])}'s answer, which {writers} wrote, as its own past reply"
                )
                out.append(
                    Finding(
                        FOREIGN_ANSWERS,
                        text + ".",
                        label(node_id),
                        numbers[p],
                        node_id,
                        WARNING,
                        "Dify stores one answer per turn — the Answer node's output — and every LLM node "
                        "with memory replays it (Dify#4548). Give each node its own history through a "
                        "conversation variable, or switch memory off for this node.",
                        {"writers": list(others), "source_turn": numbers[e.position]},
                    )
                )
    return out
