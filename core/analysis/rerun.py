"""What re-running a turn as a branch will keep, beside what the switchboard's what-if previews.

The what-if recomputes the inspected turn's memory over the conversation as recorded. A re-run of that
turn is another turn: a sibling of it, written as the conversation's newest. Under Dify as shipped its
window is the newest rows of the whole conversation, so the turns written after the original (which
the new branch leaves out) still take rows, and the re-run may keep less than the preview —
:func:`rerun_ledgers` computes the re-run's own ledgers (no model called) and :func:`rerun_note` says
the difference, with its reason, before the click. Replaying the conversation from its first turn
with the new settings (:mod:`core.service.replays`) gives what the preview shows.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from core.flow.what_if import what_if_ledger
from core.memory.config import config_of
from core.model.conversation import Conversation, thread_number, turn_label
from core.model.ledger import Ledger, turn_ranges
from core.words import plural

from .debug_view import rerun_rows_note

#: The id the re-run stands under while its ledgers are computed (never stored).
RERUN_ID = "memlens-rerun-preview"


def with_rerun(conversation: Conversation, position: int) -> Conversation:
    """The conversation with a re-run of the turn at ``position`` added as its newest turn: a sibling of
    it asking the same question (its answer is not part of its own memory)."""
    turn = conversation.turns[position]
    sibling = dataclasses.replace(turn, id=RERUN_ID)
    return Conversation(
        conversation.id,
        [*conversation.turns, sibling],
        system_prompt=conversation.system_prompt,
        source_format=conversation.source_format,
        name=conversation.name,
        meta=conversation.meta,
    )


def rerun_ledgers(
    flow,
    conversation: Conversation,
    position: int,
    overrides: Mapping[str, Mapping[str, Any]],
    *,
    fidelity: str,
    plugin_token_counting: bool = False,
) -> dict[str, Ledger]:
    """Each overridden node's ledger for a re-run of the turn at ``position`` under ``overrides``."""
    rerun = with_rerun(conversation, position)
    at = len(rerun.turns) - 1
    return {
        node_id: what_if_ledger(
            flow,
            rerun,
            at,
            node_id,
            override,
            fidelity=fidelity,
            plugin_token_counting=plugin_token_counting,
            lazy=True,
        )
        for node_id, override in overrides.items()
    }


def _kept(conversation: Conversation, ledger: Ledger) -> tuple[set, str]:
    kept = {(e.position, e.index) for e in ledger.kept}
    turns = turn_ranges(thread_number(conversation, p) for p, _ in kept) if kept else "nothing earlier"
    return kept, turns


def rerun_note(
    conversation: Conversation,
    position: int,
    previews: Mapping[str, Ledger],
    reruns: Mapping[str, Ledger],
    titles: Mapping[str, str],
) -> str | None:
    """What a re-run of the turn at ``position`` keeps where it differs from the preview's ``previews``
    (per node), and why; ``None`` when the re-run keeps what the preview shows."""
    parts = []
    for node_id, rerun in reruns.items():
        preview = previews.get(node_id)
        if preview is None:
            continue
        shown, shown_turns = _kept(conversation, preview)
        kept, kept_turns = _kept(conversation, rerun)
        if kept != shown:
            parts.append(
                f"{titles.get(node_id, node_id)} would keep {plural(len(kept), 'earlier message')} "
                f"({kept_turns}), not the {len(shown)} this preview shows ({shown_turns})"
            )
    if not parts:
        return None
    label = turn_label(conversation, position)
    later = len(conversation.turns) - 1 - position
    reason = rerun_rows_note(label, later, [config_of(r.config) for r in reruns.values()])
    return (
        f"Re-running {label} as a branch: "
        + "; ".join(parts)
        + "."
        + (f" {reason}" if reason else "")
        + " Replaying the conversation from turn 1 with these settings gives what the preview shows."
    )


__all__ = ["RERUN_ID", "with_rerun", "rerun_ledgers", "rerun_note"]
