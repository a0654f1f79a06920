"""Where a message of a sent prompt came from: the vocabulary of the context receipt.

Every prompt message a run records (:class:`core.flow.prompt.PromptMessage`), every receipt the
Debugger rebuilds from a replay or a captured payload, and every chip and bar the UI draws names
one of these origins. The runtime writes them, the store's codec keeps the history ones out of the
database (they are the ledger's kept messages), the analysis sums tokens per origin in
:data:`ORIGIN_ORDER`, and ``ui/`` colours and labels them from :data:`ORIGINS` — so a new origin is
one line here::

    >>> origin_rank(HISTORY) < origin_rank(CURRENT_QUERY)
    True
    >>> origin_colour("an origin nobody wrote") == OTHER_COLOUR
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from .ledger import SUMMARY

SYSTEM = "system"
TEMPLATE = "template"
CONVERSATION_VARIABLE = "conversation variable"
CONTEXT = "context"
LONG_TERM_MEMORY = "long-term memory"
#: The memory's history: the ledger's kept messages, not stored with the prompt (the ledger has them).
HISTORY = "memory history"
# SUMMARY: a summary the memory wrote in place of older messages, the ledger's synthetic message of that origin.
CURRENT_QUERY = "current query"
#: A captured payload's message that no turn of the thread holds.
PAYLOAD_ONLY_ORIGIN = "not from the thread"
#: A captured call's own tool round, after its query.
TOOL_ROUND = "this turn's tool round"

#: The colour of an origin this module does not list (a receipt read from an older export).
OTHER_COLOUR = "#374151"


@dataclass(frozen=True)
class Origin:
    """One origin: its name as stored, the colour of its chip and bar, and the words the chip shows."""

    name: str
    colour: str
    label: str


#: Every origin, in the order a receipt's budget bar stacks them: what the node's own prompt holds first,
#: then what memory brings, the query last; a captured call's own kinds after them.
ORIGINS: tuple[Origin, ...] = (
    Origin(SYSTEM, "#6b7280", SYSTEM),
    Origin(TEMPLATE, "#2563eb", TEMPLATE),
    Origin(CONVERSATION_VARIABLE, "#7c3aed", CONVERSATION_VARIABLE),
    Origin(CONTEXT, "#0891b2", CONTEXT),
    Origin(LONG_TERM_MEMORY, "#db2777", LONG_TERM_MEMORY),
    Origin(HISTORY, "#059669", HISTORY),
    Origin(SUMMARY, "#ca8a04", SUMMARY),
    Origin(CURRENT_QUERY, "#ea580c", CURRENT_QUERY),
    Origin(PAYLOAD_ONLY_ORIGIN, OTHER_COLOUR, PAYLOAD_ONLY_ORIGIN),
    Origin(TOOL_ROUND, OTHER_COLOUR, TOOL_ROUND),
)
ORIGIN_ORDER: tuple[str, ...] = tuple(o.name for o in ORIGINS)
ORIGIN_COLOUR: dict[str, str] = {o.name: o.colour for o in ORIGINS}
ORIGIN_LABEL: dict[str, str] = {o.name: o.label for o in ORIGINS}
#: The origins a flow run writes into a node's prompt (the rest come from replays and captures).
RUN_ORIGINS = (SYSTEM, TEMPLATE, CONVERSATION_VARIABLE, HISTORY, CURRENT_QUERY, CONTEXT, LONG_TERM_MEMORY)


def origin_rank(name: str) -> int:
    """Where ``name`` stacks in a receipt; an unknown origin after every known one."""
    return ORIGIN_ORDER.index(name) if name in ORIGIN_ORDER else len(ORIGIN_ORDER)


def origin_colour(name: str) -> str:
    return ORIGIN_COLOUR.get(name, OTHER_COLOUR)


def origin_label(name: str) -> str:
    """The words a chip shows for ``name``: an unknown origin shows its own name."""
    return ORIGIN_LABEL.get(name, name)


__all__ = [
    "CONTEXT",
    "CONVERSATION_VARIABLE",
    "CURRENT_QUERY",
    "HISTORY",
    "LONG_TERM_MEMORY",
    "ORIGINS",
    "ORIGIN_COLOUR",
    "ORIGIN_LABEL",
    "ORIGIN_ORDER",
    "OTHER_COLOUR",
    "Origin",
    "PAYLOAD_ONLY_ORIGIN",
    "RUN_ORIGINS",
    "SUMMARY",
    "SYSTEM",
    "TEMPLATE",
    "TOOL_ROUND",
    "origin_colour",
    "origin_label",
    "origin_rank",
]
