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

from core.memory.strategies import remembers
from core.memory.words import explain, reason_words
from core.model.conversation import Conversation, message_text, thread_number
from core.model.facts import extract_facts
from core.model.ledger import (
    CLEARED,
    MEMORY_OFF,
    PIPELINE,
    REWRITTEN,
    SUMMARIZED,
    Ledger,
    LedgerEntry,
    is_dropped,
    turn_ranges,
)
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
    """The dropped user messages the line names, oldest first: the newest that state a fact, then the newest
    (``dropped``: the newest dropped entries, in order)."""
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
        return LeftOut(
            node_id,
            title,
            "memory off: sends no earlier message",
            explain(LedgerEntry(0, 0, "user", 0, False, MEMORY_OFF), config, title),
            0,
        )
    if not count:
        return LeftOut(node_id, title, "nothing earlier to leave out (first turn)", "", 0)
    # Read from the ledger's runs where it has them: a long conversation drops tens of thousands of messages.
    dropping = [r for r in PIPELINE if is_dropped(r) and r not in _SENT_OTHERWISE]
    order = [r for r in dropping if ledger.positions_with([r])]
    parts = []
    if order:

        def turns(reasons) -> str:
            return turn_ranges(thread_number(conversation, p) for p in ledger.positions_with(reasons))

        newest = ledger.last_entries_with(dropping, 3 * SCAN)
        named = ", ".join(
            f"“{excerpt(message_text(conversation.turns[e.position].messages[e.index]))}”"
            for e in _named(conversation, newest)
        )
        why = (
            reason_words(order[0], config)
            if len(order) == 1
            else ", ".join(f"{turns([r])} {reason_words(r, config)}" for r in order)
        )
        parts.append(" — ".join(x for x in (f"dropped {turns(order)}", named, why) if x))
        hover = " · ".join(explain(ledger.last_entries_with([r], 1)[0], config, title) for r in order)
        dropped = ledger.dropped_count() - len(ledger.entries_with(_SENT_OTHERWISE))
    else:
        kept = len(ledger.kept)
        parts.append(f"dropped nothing: kept all {kept:,} earlier" if kept else "sends no earlier message")
        hover, dropped = "", 0
    folded = ledger.positions_with([SUMMARIZED])
    if folded:
        parts.append(f"summarized {turn_ranges(thread_number(conversation, p) for p in folded)}")
        hover = " · ".join(
            x for x in (hover, explain(ledger.last_entries_with([SUMMARIZED], 1)[0], config, title)) if x
        )
    return LeftOut(node_id, title, "; ".join(parts), hover, dropped)
