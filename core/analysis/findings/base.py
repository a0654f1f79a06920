"""A finding: one memory surprise in plain words, linked to the turn (and node) where it shows; the kinds,
their titles, and how a finding names turns and subjects.
Findings: memory surprises in plain words, each linked to the turn (and node) where it shows.

A ledger explains one message; a finding explains a pattern across a conversation — the kind of
thing a builder only notices after a user complains. Every finding names its subject (an LLM
node of a flow, or a memory config of a comparison) and, wherever one exists, the turn to look
at. The kinds, and where each is computed from:

``fact_not_seen``
    A node no longer has — or never had — the turn where a fact or a variable was set, at a
    turn that needs it: a later question asks for the fact (:func:`core.model.facts.asked_keys`) and
    no statement of it, nor its value restated, is in memory; or a variable written by a node
    at turn T is neither rendered into the node's prompt nor is turn T in its memory. From
    ledgers (node runs, or a config replayed).
``foreign_answers``
    One node's answers in another node's memory. Dify stores one answer per turn — the Answer
    node's output — and every LLM node with memory replays it as its own past reply
    (spec/dify-memory.md §7, Dify#4548). Observed from node runs (the stored answer contains
    text another LLM node produced), or predicted from the flow (an Answer node renders another
    LLM node's output) when there are no runs.
``no_conversation``
    Memory switched on where no conversation exists: an LLM node with a memory block in a
    Workflow app (Dify ignores it; spec §8 #15). From the flow.
``window_zero``
    A window of 0: Dify reads it as no limit (the 500-turn cap), so history is included
    (Flowise#2920 reports the same surprise). From the flow or a config, linked to the first
    turn that sends history.
``silent_pruning``
    A token budget that pruned messages without saying so (Dify's TokenBufferMemory pops the
    oldest message while the history is over budget; spec §1.6). From ledgers.
``dominant_message``
    One message filling most of a node's kept history (more than :data:`DOMINANT_SHARE` of its
    tokens, and at least :data:`DOMINANT_MIN_TOKENS`; Dify#36717). From ledgers.
``trimmed_window``
    A Window Memory node whose permanent trimming makes a larger window useless: after N grows,
    the messages trimmed under the old N are gone, so the node keeps fewer than its new window.
    From a config with growing ``window_changes``, or the what-if :func:`larger_window_what_if`.
``compaction_in_tool_loop``
    Dify 1.17's agent compaction (as shipped) checks before every model request, so a long tool
    run compacts its own history mid-run: results cleared, older messages summarised, at step K
    of a turn. From ledgers (their compaction records).
``summary_pile_up``
    A summary of a summary still in the history: after a compaction the stored summary rides
    along with the first user message on reload, is kept with it at the next compaction, and
    another summary is put in front — one more per compaction. From ledgers.
``first_message_resummarised``
    The first user message is kept *and* sent to the summariser again at every compaction after
    the first. From ledgers (their compaction records).
``docs_vs_code``
    Dify's docs and Dify 1.x's code send a node different history at a turn, with the cause in
    plain words: the current turn's placeholder row taking a window slot, turns on other branches
    (regenerated replies, turns an edit left behind) using window rows, token pruning the docs promise and the shipped code does
    not do (plugin token counting off), or a different budget. From the two profiles' decisions
    (:func:`docs_vs_code`, per turn) or from a pair of ledgers (:func:`ledger_difference`, the
    debugger's receipt).
``history_twice``
    The conversation (or the current question) reaches one node twice: memory on, and the
    prompt also renders a conversation variable that holds the chat history, or renders
    ``{{#sys.query#}}`` while memory appends the query message again. From the flow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from core.memory.replay import turn_numbers
from core.model.conversation import Conversation, turn_label

from .platforms import TITLES as PLATFORM_TITLES

FACT_NOT_SEEN = "fact_not_seen"


FOREIGN_ANSWERS = "foreign_answers"


NO_CONVERSATION = "no_conversation"


WINDOW_ZERO = "window_zero"


SILENT_PRUNING = "silent_pruning"


DOMINANT_MESSAGE = "dominant_message"


TRIMMED_WINDOW = "trimmed_window"


HISTORY_TWICE = "history_twice"


COMPACTION_IN_TOOL_LOOP = "compaction_in_tool_loop"


#: Not a finding of its own: the shipped compaction's analyses (in the tool loop, pile-up, first message
#: summarised again), named as one by the memory systems they apply to.
COMPACTION = "compaction"


SUMMARY_PILE_UP = "summary_pile_up"


FIRST_MESSAGE_RESUMMARISED = "first_message_resummarised"


DOCS_VS_CODE = "docs_vs_code"


#: A platform's own rule at work where its users do not expect it, in its memory system's words
#: (:meth:`core.memory.strategies.base.Strategy.turn_surprise`).
PLATFORM_RULE = "platform_rule"


KINDS = (
    FACT_NOT_SEEN,
    FOREIGN_ANSWERS,
    NO_CONVERSATION,
    WINDOW_ZERO,
    SILENT_PRUNING,
    DOMINANT_MESSAGE,
    TRIMMED_WINDOW,
    HISTORY_TWICE,
    COMPACTION_IN_TOOL_LOOP,
    SUMMARY_PILE_UP,
    FIRST_MESSAGE_RESUMMARISED,
    DOCS_VS_CODE,
    PLATFORM_RULE,
    *PLATFORM_TITLES,
)


KIND_TITLES = {
    # A question its memory cannot answer, a marked fact leaving it, a variable set out of its reach: never
    # saw it, or no longer has it.
    FACT_NOT_SEEN: "A fact or variable its memory lacks",
    FOREIGN_ANSWERS: "Another node's answers in memory",
    NO_CONVERSATION: "Memory without a conversation",
    WINDOW_ZERO: "Window of 0",
    SILENT_PRUNING: "Budget pruned silently",
    DOMINANT_MESSAGE: "One message fills the window",
    TRIMMED_WINDOW: "Larger window, nothing more kept",
    HISTORY_TWICE: "Conversation sent twice",
    COMPACTION_IN_TOOL_LOOP: "Compacted inside the tool loop",
    SUMMARY_PILE_UP: "A summary of a summary",
    FIRST_MESSAGE_RESUMMARISED: "First message summarised again",
    DOCS_VS_CODE: "Dify's docs and code disagree",
    PLATFORM_RULE: "The platform's own rule at work",
    **PLATFORM_TITLES,
}


WARNING = "warning"


INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One warning in plain words. ``turn`` is the turn number to jump to (``None`` for a
    flow-wide finding); ``subject`` is the node's title or the config's label; ``node_id`` is the
    flow node's id when the subject is a node."""

    kind: str
    text: str
    subject: str = ""
    turn: int | None = None
    node_id: str | None = None
    severity: str = WARNING
    detail: str = ""
    data: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def title(self) -> str:
        return KIND_TITLES.get(self.kind, self.kind)

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "title": self.title,
            "text": self.text,
            "subject": self.subject,
            "turn": self.turn,
            "node_id": self.node_id,
            "severity": self.severity,
            "detail": self.detail,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Finding":
        return cls(
            kind=str(data.get("kind") or ""),
            text=str(data.get("text") or ""),
            subject=str(data.get("subject") or ""),
            turn=data.get("turn"),
            node_id=data.get("node_id"),
            severity=str(data.get("severity") or WARNING),
            detail=str(data.get("detail") or ""),
            data=dict(data.get("data") or {}),
        )


def findings_at(findings: Iterable[Finding], turn: int) -> list[Finding]:
    """The findings that link to one turn (a presentation's captions)."""
    return [f for f in findings if f.turn == turn]


def ordered(findings: list[Finding]) -> list[Finding]:
    """Flow-wide findings first, then by turn; warnings before notes on the same turn."""
    return sorted(
        findings,
        key=lambda f: (
            f.turn is not None,
            f.turn or 0,
            f.severity != WARNING,
            KINDS.index(f.kind) if f.kind in KINDS else len(KINDS),
        ),
    )


#: Names a turn number (what a finding and a ledger link to) the way the text shows it.
TurnNamer = Callable[[int], str]


def turn_namer(conversation: Conversation) -> TurnNamer:
    """A finding's turns named as a person counts them (:func:`core.model.conversation.turn_label`):
    its place on its own thread and its sibling, so a regenerated answer to turn 6 reads
    "turn 6 · 2/2", not the creation-order number the finding links to."""
    numbers = turn_numbers(conversation)
    offset = numbers[0] if numbers else 0
    names: dict[int, str] = {}

    def name(number: int) -> str:
        if number not in names:
            p = number - offset
            names[number] = turn_label(conversation, p) if 0 <= p < len(numbers) else f"turn {number}"
        return names[number]

    return name


_LABEL = re.compile(r"turn (\d+)(?: · (\d+)/\d+)?")


def named_ranges(name: TurnNamer, turns: Iterable[int]) -> str:
    """Several turns in words, by their place on their threads: "turns 4–10, 11 · 1/2, 12".
    Plain turns in a row make a range; a turn with siblings stands alone; a place reached on
    two branches is named once."""
    labels = {name(n) for n in turns}
    keyed = sorted((int(m[1]), int(m[2] or 0), x) for x in labels if (m := _LABEL.fullmatch(x)))
    parts: list[list] = []  # [first, last] of plain turns in a row, or [label]
    for number, sibling, label in keyed:
        if not sibling and parts and len(parts[-1]) == 2 and parts[-1][1] == number - 1:
            parts[-1][1] = number
        else:
            parts.append([number, number] if not sibling else [label.removeprefix("turn ")])
    words = [str(p[0]) if len(p) == 1 or p[0] == p[1] else f"{p[0]}–{p[1]}" for p in parts]
    words += sorted(x for x in labels if not _LABEL.fullmatch(x))
    single = len(parts) == 1 and (len(parts[0]) == 1 or parts[0][0] == parts[0][1])
    return ("turn " if single else "turns ") + ", ".join(words)


def quoted(subject: str) -> str:
    """A subject named inside a finding's sentence — a node's title, a config's or a lens's label —
    in quotes, so "dify window 3" or "Default · dify no window" reads as one name."""
    return f"“{subject}”"


def excerpt(text: str, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"
