"""What the Debugger shows of a captured (or threaded) conversation, computed without Streamlit.

Each node is a lens whose markers are observed: at a turn, its first call's ledger says which earlier
messages the payload held. Where the rule inferred for the node explains that call (its replay keeps the
same messages), the dropped messages carry that rule's reasons — "outside window of 6 messages" — so a
marker says why in the rule's words; where no rule does, they keep the observed ones. The receipt is the
payload exactly as sent, each message counted under the call's model. The inferred rule is a lens of its
own too, so the switchboard's what-ifs start from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from core.memory.config import MemoryConfig
from core.model.conversation import Conversation
from core.model.ledger import Ledger

from .calls import Node
from .inference import NodeInference, calls_of_runs, infer_conversation, node_replay
from .stored import nodes_of


@dataclass
class NodeView:
    """One node of a captured conversation: its inference and its calls, by turn position."""

    node: Node
    inference: NodeInference
    #: Per turn position, the node's first call there (its stored run, ledger unpacked), its number, and how many
    #: requests the node made in that turn.
    calls: dict[int, tuple[dict, int, int]] = field(default_factory=dict)

    @property
    def fit(self) -> str:
        return self.inference.fit()

    @property
    def rule(self) -> MemoryConfig | None:
        best = self.inference.best
        return best.rule.config if best is not None and best.explains else None

    @property
    def rule_label(self) -> str:
        best = self.inference.best
        return best.rule.full if best is not None and best.explains else ""


def captured_view(
    conversation: Conversation, meta: Mapping, runs_by_position: Mapping[int, Sequence[dict]]
) -> list[NodeView] | None:
    """The nodes of a captured conversation with their inferred rules (``None``: it holds no captured call).
    ``runs_by_position`` are its turns' stored node runs, their ledgers unpacked."""
    nodes = nodes_of(meta)
    calls = calls_of_runs(runs_by_position)
    if not nodes or not calls:
        return None
    inference = infer_conversation(conversation, nodes, calls)
    out = []
    for node_inference in inference.nodes:
        view = NodeView(node_inference.node, node_inference)
        for position, runs in runs_by_position.items():
            mine = [run for run in runs if run.get("node_id") == view.node.id]
            if mine:
                view.calls[position] = (mine[0], int(mine[0].get("call_number") or 0), len(mine))
        out.append(view)
    return out


def observed_run(conversation: Conversation, view: NodeView, position: int) -> dict | None:
    """The node's call at the turn at ``position`` in the shape :func:`core.analysis.debug_view.receipt`
    reads — its payload as sent, its ledger (the rule's reasons where the rule explains it) — or ``None``
    when the node made no call there."""
    found = view.calls.get(position)
    if found is None or not isinstance(found[0].get("ledger"), Ledger):
        return None
    run, number, requests = found
    observed: Ledger = run["ledger"]
    ledger, notes = observed, []
    best = view.inference.best
    explained = (
        best is not None
        and best.explains
        and next((ok for c, ok in zip(view.inference.calls, best.explained) if c.number == number), False)
    )
    if explained:
        replayed = node_replay(conversation, view.node, best.rule.config).ledger_at(position)
        ledger = Ledger(
            turn=observed.turn,
            entries=replayed.entries,
            prompt_tokens=observed.prompt_tokens,
            history_tokens=observed.history_tokens,
            budget=replayed.budget,
            budget_note=replayed.budget_note,
            config=replayed.config,
            context_size=observed.context_size,
            exceeds_context=observed.exceeds_context,
            synthetic=observed.synthetic,
        )
        notes.append(
            f"Observed: the payload below is what the bot sent. Explained by {best.rule.full}, which keeps "
            "exactly these messages; each dropped one's reason is that rule's."
        )
    else:
        notes.append(
            "Observed: the payload below is what the bot sent. No rule MemLens emulates explains this call; "
            "each dropped message's reason says where it was missing."
        )
    # Where a named platform's emulation first parts from what was observed, said at that call.
    notes += [d.sentence() for d in view.inference.differences if d.call == number]
    if run.get("status") != "succeeded":
        notes.append(f"This call {run.get('status')}: {run.get('error') or 'no reply'}.")
    if requests > 1:
        notes.append(f"The node made {requests} requests in this turn (a tool round); this is the first.")
    return {
        "node_id": view.node.id,
        "ledger": ledger,
        "prompt": run.get("prompt") or [],
        "model": run.get("model"),
        "reply": run.get("reply"),
        "notes": notes,
        "call_number": number,
    }


__all__ = ["NodeView", "captured_view", "observed_run"]
