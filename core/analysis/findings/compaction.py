"""The surprises of Dify 1.17's agent compaction (``compaction_in_tool_loop``, ``summary_pile_up``,
``first_message_resummarised``), read from a subject's ledgers.
"""

from __future__ import annotations

from typing import Sequence

from core.model.ledger import SUMMARY, Ledger
from core.words import plural

from .base import COMPACTION_IN_TOOL_LOOP, FIRST_MESSAGE_RESUMMARISED, INFO, SUMMARY_PILE_UP, Finding, TurnNamer, quoted


def compaction_findings(
    subject: str, ledgers: Sequence[Ledger], node_id: str | None = None, *, name: TurnNamer
) -> list[Finding]:
    """The surprises of Dify 1.17's agent compaction, read from a subject's ledgers in turn order
    (``name``: :func:`turn_namer` of their conversation)."""
    out: list[Finding] = []
    events = [c for ledger in ledgers for c in ledger.compactions]
    loop = [c for c in events if c.get("in_tool_loop")]
    if loop:
        first = loop[0]
        what = " then ".join(t.replace("_", " ") for t in first.get("tiers") or [])
        text = (
            f"Compaction fired inside the tool loop at step {first['request']} of {name(first['turn'])}: "
            f"{quoted(subject)}'s history was estimated at {first['estimate']:,} tokens "
            f"({first['estimated_by']}), over "
            f"its {first['target']:,}-token target, and compacted ({what}) before the model's next request"
        )
        if len(loop) > 1:
            text += f"; {plural(len(loop) - 1, 'more compaction')} inside tool loops follow"
        out.append(
            Finding(
                COMPACTION_IN_TOOL_LOOP,
                text + ".",
                subject,
                first["turn"],
                node_id,
                INFO,
                "Dify checks before every model request, not once per turn: during a long tool run the "
                "agent loses old tool output (and may summarise its own earlier steps) mid-run.",
                {"at": [[c["turn"], c["request"]] for c in loop]},
            )
        )
    piled = next((ledger for ledger in ledgers if sum(1 for s in ledger.synthetic if s.origin == SUMMARY) >= 2), None)
    if piled is not None:
        n = sum(1 for s in piled.synthetic if s.origin == SUMMARY)
        out.append(
            Finding(
                SUMMARY_PILE_UP,
                f"A summary of a summary is still in {quoted(subject)}'s history: at "
                f"{name(piled.turn)} it sends {n} summaries, the older ones riding along "
                f"with the first user message.",
                subject,
                piled.turn,
                node_id,
                INFO,
                "On reload the stored summary is merged into the first user message; the next compaction "
                "keeps that message whole and puts a new summary in front, so every compaction adds one — "
                "and the summariser is handed the oldest summary to update, not the newest.",
                {"summaries": n},
            )
        )
    resent = [c for c in events if c.get("first_user_resent")]
    if len(resent) > 1:
        again = resent[1]
        out.append(
            Finding(
                FIRST_MESSAGE_RESUMMARISED,
                f"The first user message was re-summarised {plural(len(resent) - 1, 'time')} by "
                f"{quoted(subject)}: it is kept and also sent to the summariser at every compaction (again at "
                f"{name(again['turn'])}).",
                subject,
                again["turn"],
                node_id,
                INFO,
                "Its content is counted twice — verbatim and inside each summary — and weighs on every "
                "summary written.",
                {"times": len(resent) - 1, "turns": [c["turn"] for c in resent]},
            )
        )
    return out


def compaction_config_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    return compaction_findings(label, [replay.ledger_at(p) for p in replay.conversation.answered_turns()], name=name)
