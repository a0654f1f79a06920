"""The answer at a glance: what one node's memory left out at a turn, and why, in one line.

The inspector opens on it, one line per node that called a model, before the receipt::

    Responder: dropped turns 1–2 — “Hi, I'm Dana. My order…” — outside window of 4

The turns are counted as a person counts them on the thread (:func:`core.model.conversation.thread_number`);
the messages named are the newest dropped user messages that state a fact (:mod:`core.model.facts`: a
name, an order number…), else the newest dropped ones; the reason is the ledger's, in its short words
(:func:`core.memory.words.reason_words`), the whole sentence kept for the hover (:func:`explain`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.model.conversation import Conversation, message_text, thread_number
from core.model.facts import extract_facts
from core.memory.strategies import remembers
from core.memory.words import explain, reason_words
from core.model.ledger import (CLEARED, MEMORY_OFF, PIPELINE, REWRITTEN, SUMMARIZED, Ledger, LedgerEntry, is_dropped,
                               turn_ranges)
from core.words import excerpt

#: How many dropped messages the line names.
EXCERPTS = 2
#: How many of the newest dropped user messages are read for a fact (a long conversation drops thousands).
SCAN = 200
#: Reasons whose words still reach the model in another form: not "dropped" in the line.
_SENT_OTHERWISE = frozenset({SUMMARIZED, CLEARED, REWRITTEN})


@dataclass(frozen=True)
class LeftOut:
    """One node's line: ``text`` follows its title; ``hover`` is the long explanation of each reason."""

    node_id: str
    title: str
    text: str
    hover: str
    dropped: int

    @property
    def line(self) -> str:
        return f"{self.title}: {self.text}"


def _named(conversation: Conversation, dropped: list[LedgerEntry]) -> list[LedgerEntry]:
    """The dropped user messages the line names, oldest first: the newest that state a fact, then the newest."""
    users = [e for e in reversed(dropped) if e.role == "user"][:SCAN] or list(reversed(dropped))[:SCAN]
    stating = [e for e in users if extract_facts(message_text(conversation.turns[e.position].messages[e.index]))]
    picked = (stating + [e for e in users if e not in stating])[:EXCERPTS]
    return sorted(picked, key=lambda e: (e.position, e.index))


def left_out(conversation: Conversation, ledger: Ledger, title: str, node_id: str) -> LeftOut:
    """The line for one node's ledger at a turn (a what-if ledger gives the preview's line)."""
    config = ledger.config or {}
    count = ledger.entry_count()
    off = bool(config.get("strategy")) and not remembers(config)
    if off or (count and len(ledger.entries_with([MEMORY_OFF])) == count):
        return LeftOut(node_id, title, "memory off: sends no earlier message", explain(
            LedgerEntry(0, 0, "user", 0, False, MEMORY_OFF), config, title), 0)
    if not count:
        return LeftOut(node_id, title, "nothing earlier to leave out (first turn)", "", 0)
    dropped = [e for e in ledger.entries_with(r for r in PIPELINE if is_dropped(r)) if e.reason not in _SENT_OTHERWISE]
    folded = ledger.entries_with([SUMMARIZED])
    parts = []
    if dropped:
        by_reason: dict[str, list[LedgerEntry]] = {}
        for e in dropped:
            by_reason.setdefault(e.reason, []).append(e)
        order = sorted(by_reason, key=PIPELINE.index)
        turns = turn_ranges(thread_number(conversation, e.position) for e in dropped)
        named = ", ".join(f"“{excerpt(message_text(conversation.turns[e.position].messages[e.index]))}”"
                          for e in _named(conversation, dropped))
        if len(order) == 1:
            why = reason_words(order[0], config)
        else:
            why = ", ".join(f"{turn_ranges(thread_number(conversation, e.position) for e in by_reason[r])} "
                            f"{reason_words(r, config)}" for r in order)
        parts.append(" — ".join(x for x in (f"dropped {turns}", named, why) if x))
        hover = " · ".join(explain(by_reason[r][-1], config, title) for r in order)
    else:
        kept = len(ledger.kept)
        parts.append(f"dropped nothing: kept all {kept:,} earlier" if kept else "sends no earlier message")
        hover = ""
    if folded:
        parts.append(f"summarized {turn_ranges(thread_number(conversation, e.position) for e in folded)}")
        hover = " · ".join(x for x in (hover, explain(folded[-1], config, title)) if x)
    return LeftOut(node_id, title, "; ".join(parts), hover, len(dropped))
