"""Findings: memory surprises in plain words, each linked to the turn (and node) where it shows.

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

What :func:`history_variables` detects statically (and what it cannot): a conversation
variable holds the chat history when an assigner appends/extends it with text that comes —
directly or through template, code or aggregator nodes — from ``sys.query`` or an LLM/agent
node's output, or rewrites it from its own value plus such text (a rolling transcript), or when
its name says so (``history``, ``chat_log``, ``transcript``, ``messages``, ``dialog``…). History
assembled outside the flow (an HTTP call, a code node reading a store) is not detected.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from core.limits import DIFY_ROW_CAP
from core.memory.replay import MemoryConfig, Replay, budgeted_prompt, turn_numbers
from core.memory.strategies import remembers, strategy_of
from core.memory.strategies.base import PathView, window_at, window_sizes
from core.memory.strategies.window import grows, size_at as window_size
from core.memory.words import explain
from core.model.conversation import ANSWER, Conversation, turn_label
from core.model.facts import asked_keys
from core.model.ledger import (EMPTY, GRANULARITY, KEPT, MEMORY_OFF, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET, SCOPE,
                               SUMMARY, TRIMMED_EARLIER, Ledger, LedgerEntry)
from core.words import plural

from .platform_findings import ANALYSES as PLATFORM_ANALYSES, TITLES as PLATFORM_TITLES

if TYPE_CHECKING:
    from core.flow.graph import Flow, Node
    from core.flow.nodes.llm import MemorySettings
    from core.flow.runtime import NodeRun, TurnRecord
    from core.memory.strategies.base import PathView
    from core.analysis.source import Source

    from .compare import Comparison, NamedConfig

    #: What a compare takes for a memory config (see :func:`core.analysis.compare.named_configs`).
    ConfigLike = MemoryConfig | NamedConfig | dict

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

KINDS = (FACT_NOT_SEEN, FOREIGN_ANSWERS, NO_CONVERSATION, WINDOW_ZERO, SILENT_PRUNING, DOMINANT_MESSAGE,
         TRIMMED_WINDOW, HISTORY_TWICE, COMPACTION_IN_TOOL_LOOP, SUMMARY_PILE_UP, FIRST_MESSAGE_RESUMMARISED,
         DOCS_VS_CODE, PLATFORM_RULE, *PLATFORM_TITLES)
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

#: A message "fills" a node's window when it holds more than this share of the kept history…
DOMINANT_SHARE = 0.5
#: …and at least this many tokens (half of a short history is no surprise).
DOMINANT_MIN_TOKENS = 256

_NOT_CANDIDATES = frozenset({MEMORY_OFF, SCOPE, OTHER_BRANCH, GRANULARITY})
_HISTORY_NAME = re.compile(r"hist|chat_?log|transcript|dialog|messages|conversation|memory|对话|历史|记忆|聊天",
                           re.I)
_SELECTOR = re.compile(r"\{\{#([a-zA-Z0-9_]{1,50}(?:\.[a-zA-Z_][a-zA-Z0-9_]{0,29}){1,10})#\}\}")


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
        return {"kind": self.kind, "title": self.title, "text": self.text, "subject": self.subject,
                "turn": self.turn, "node_id": self.node_id, "severity": self.severity, "detail": self.detail,
                "data": dict(self.data)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Finding":
        return cls(kind=str(data.get("kind") or ""), text=str(data.get("text") or ""),
                   subject=str(data.get("subject") or ""), turn=data.get("turn"), node_id=data.get("node_id"),
                   severity=str(data.get("severity") or WARNING), detail=str(data.get("detail") or ""),
                   data=dict(data.get("data") or {}))


def findings_at(findings: Iterable[Finding], turn: int) -> list[Finding]:
    """The findings that link to one turn (a presentation's captions)."""
    return [f for f in findings if f.turn == turn]


def _order(findings: list[Finding]) -> list[Finding]:
    """Flow-wide findings first, then by turn; warnings before notes on the same turn."""
    return sorted(findings, key=lambda f: (f.turn is not None, f.turn or 0, f.severity != WARNING,
                                           KINDS.index(f.kind) if f.kind in KINDS else len(KINDS)))


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


def _named_ranges(name: TurnNamer, turns: Iterable[int]) -> str:
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


def _excerpt(text: str, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- what one node's (or config's) memory did at one turn ----------------------------------------------

@dataclass(frozen=True)
class MemoryTurn:
    """The numbers the ledger-based findings need, for one turn of one node or config.

    ``candidates`` counts the thread's messages eligible for this memory (everything but other
    branches, scope, memory off and granularity); ``in_window`` those at or after the window's
    start (kept, pruned by the budget, or empty). ``largest`` is the ``(position, index)`` of the
    largest kept message.
    """

    turn: int
    position: int
    kept: int
    history_tokens: int
    budget: int | None
    pruned: int
    trimmed: int
    outside: int
    candidates: int
    in_window: int
    largest_tokens: int = 0
    largest: tuple[int, int] | None = None


def memory_turn(ledger: Ledger, position: int) -> MemoryTurn:
    """A turn's numbers read from its ledger."""
    counts: Counter = Counter()
    largest: LedgerEntry | None = None
    for e in ledger.entries:
        counts[e.reason] += 1
        if e.kept and (largest is None or e.tokens > largest.tokens):
            largest = e
    candidates = sum(n for r, n in counts.items() if r not in _NOT_CANDIDATES)
    return MemoryTurn(turn=ledger.turn, position=position, kept=counts[KEPT], history_tokens=ledger.history_tokens,
                      budget=ledger.budget, pruned=counts[OVER_BUDGET], trimmed=counts[TRIMMED_EARLIER],
                      outside=counts[OUTSIDE_WINDOW], candidates=candidates,
                      in_window=counts[KEPT] + counts[OVER_BUDGET] + counts[EMPTY],
                      largest_tokens=largest.tokens if largest else 0,
                      largest=(largest.position, largest.index) if largest else None)


#: Tokens per block of :class:`_FlatTokens`' block maxima.
_BLOCK = 64


class _FlatTokens:
    """The token count of every message of the walk's current thread view, as one flat list kept
    in step with the depth-first walk, with the maximum of each block of :data:`_BLOCK` counts,
    so the largest kept message of a turn costs C-speed maxima over the blocks, not over every
    message of a history that keeps everything."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.positions: list[int] = []
        self.blocks: list[int] = []

    def sync(self, view: PathView) -> list[int]:
        k = min(len(self.positions), len(view.positions))
        # A thread is fixed by its last turn, so equal last turns mean equal prefixes.
        while k and self.positions[k - 1] != view.positions[k - 1]:
            k -= 1
        keep = view.starts[k] if k < len(view.starts) else view.length
        tokens = self.tokens
        del tokens[keep:]
        first = len(tokens) // _BLOCK  # the blocks from here on changed
        prefix = view.prefix
        tokens.extend(prefix[i + 1] - prefix[i] for i in range(len(tokens), view.length))
        del self.positions[k:]
        self.positions.extend(view.positions[k:])
        del self.blocks[first:]
        self.blocks.extend(max(tokens[b * _BLOCK:(b + 1) * _BLOCK]) for b in range(first, -(-len(tokens) // _BLOCK)))
        return tokens

    def largest(self, lo: int, hi: int) -> tuple[int, int]:
        """The largest count in ``tokens[lo:hi]`` (not empty) and the index of its first occurrence."""
        tokens = self.tokens
        b0, b1 = -(-lo // _BLOCK), hi // _BLOCK  # the whole blocks inside the range
        if b1 - b0 < 2:
            best = max(tokens[lo:hi])
            return best, tokens.index(best, lo, hi)
        head_end, tail_start = b0 * _BLOCK, b1 * _BLOCK
        head = max(tokens[lo:head_end], default=-1)
        middle = max(self.blocks[b0:b1])
        tail = max(tokens[tail_start:hi], default=-1)
        best = max(head, middle, tail)
        if head == best:
            start, end = lo, head_end
        elif middle == best:
            b = self.blocks.index(best, b0, b1)
            start, end = b * _BLOCK, (b + 1) * _BLOCK
        else:
            start, end = tail_start, hi
        return best, tokens.index(best, start, end)


def memory_turns(replay: Replay) -> list[MemoryTurn]:
    """Every answered turn's numbers for one config, in turn order.

    Read from the engine's walk where it offers one (O(1) a turn for window strategies, plus a
    slice for the largest kept message); strategies that plan their own decision are read
    message by message along the thread; without a walk, from each turn's ledger.
    """
    conv = replay.conversation
    turns = conv.turns
    walk = getattr(replay, "_walk", None)
    if walk is None:
        return [memory_turn(replay.ledger_at(p), p) for p in conv.answered_turns()]
    budgets = {s.turn: s for s in replay.summaries()}
    flat = _FlatTokens()
    out: dict[int, MemoryTurn] = {}
    for p, view, d in walk():
        if turns[p].query_index is None:
            continue
        number = replay.numbers[p]
        summary = budgets[number]
        if d.blocked:
            out[p] = MemoryTurn(number, p, 0, 0, summary.budget, 0, 0, 0, 0, 0)
            continue
        if d.plan is not None:
            counts: Counter = Counter()
            best, best_at = 0, None
            for i in range(view.length):
                q, j = view.seq_pos[i], view.seq_msg[i]
                msg = turns[q].messages[j]
                r = d.plan.reason(i, msg)
                if r == KEPT and msg.is_empty and replay.drops_empty:
                    r = EMPTY
                counts[r] += 1
                if r == KEPT:
                    t = view.prefix[i + 1] - view.prefix[i]
                    if t > best:
                        best, best_at = t, (q, j)
            out[p] = MemoryTurn(number, p, summary.kept, summary.history_tokens, summary.budget, counts[OVER_BUDGET],
                                counts[TRIMMED_EARLIER], counts[OUTSIDE_WINDOW], view.length,
                                counts[KEPT] + counts[OVER_BUDGET] + counts[EMPTY], best, best_at)
            continue
        best, best_at = 0, None
        if d.end > d.budget_cut:
            flat.sync(view)
            best, i = flat.largest(d.budget_cut, d.end)
            best_at = (view.seq_pos[i], view.seq_msg[i])
        out[p] = MemoryTurn(number, p, summary.kept, summary.history_tokens, summary.budget,
                            d.budget_cut - d.window_start, d.trimmed_before, d.window_start - d.trimmed_before,
                            d.end, d.end - d.window_start, best if summary.kept else 0,
                            best_at if summary.kept else None)
    return [out[p] for p in sorted(out)]


# -- findings from one subject's turns ------------------------------------------------------------------

def compaction_findings(subject: str, ledgers: Sequence[Ledger], node_id: str | None = None, *,
                        name: TurnNamer) -> list[Finding]:
    """The surprises of Dify 1.17's agent compaction, read from a subject's ledgers in turn order
    (``name``: :func:`turn_namer` of their conversation)."""
    out: list[Finding] = []
    events = [c for ledger in ledgers for c in ledger.compactions]
    loop = [c for c in events if c.get("in_tool_loop")]
    if loop:
        first = loop[0]
        what = " then ".join(t.replace("_", " ") for t in first.get("tiers") or [])
        text = (f"Compaction fired inside the tool loop at step {first['request']} of {name(first['turn'])}: "
                f"{quoted(subject)}'s history was estimated at {first['estimate']:,} tokens "
                f"({first['estimated_by']}), over "
                f"its {first['target']:,}-token target, and compacted ({what}) before the model's next request")
        if len(loop) > 1:
            text += f"; {plural(len(loop) - 1, 'more compaction')} inside tool loops follow"
        out.append(Finding(COMPACTION_IN_TOOL_LOOP, text + ".", subject, first["turn"], node_id, INFO,
                           "Dify checks before every model request, not once per turn: during a long tool run the "
                           "agent loses old tool output (and may summarise its own earlier steps) mid-run.",
                           {"at": [[c["turn"], c["request"]] for c in loop]}))
    piled = next((ledger for ledger in ledgers
                  if sum(1 for s in ledger.synthetic if s.origin == SUMMARY) >= 2), None)
    if piled is not None:
        n = sum(1 for s in piled.synthetic if s.origin == SUMMARY)
        out.append(Finding(SUMMARY_PILE_UP, f"A summary of a summary is still in {quoted(subject)}'s history: at "
                                            f"{name(piled.turn)} it sends {n} summaries, the older ones riding along "
                                            f"with the first user message.", subject, piled.turn, node_id, INFO,
                           "On reload the stored summary is merged into the first user message; the next compaction "
                           "keeps that message whole and puts a new summary in front, so every compaction adds one — "
                           "and the summariser is handed the oldest summary to update, not the newest.",
                           {"summaries": n}))
    resent = [c for c in events if c.get("first_user_resent")]
    if len(resent) > 1:
        again = resent[1]
        out.append(Finding(FIRST_MESSAGE_RESUMMARISED,
                           f"The first user message was re-summarised {plural(len(resent) - 1, 'time')} by "
                           f"{quoted(subject)}: it is kept and also sent to the summariser at every compaction (again at "
                           f"{name(again['turn'])}).", subject, again["turn"], node_id, INFO,
                           "Its content is counted twice — verbatim and inside each summary — and weighs on every "
                           "summary written.", {"times": len(resent) - 1, "turns": [c["turn"] for c in resent]}))
    return out


def _silent_pruning(subject: str, turns: Sequence[MemoryTurn], name: TurnNamer, config: Mapping[str, Any],
                    node_id: str | None = None) -> Finding | None:
    """``config``: the stored config the turns ran under (``MemoryConfig.to_dict``), whose memory system
    says what its pruning means (:meth:`core.memory.strategies.base.Strategy.pruning_words`)."""
    hit = [t for t in turns if t.pruned]
    if not hit:
        return None
    first = hit[0]
    worst = max(hit, key=lambda t: t.pruned)
    budget = f" of {first.budget:,} tokens" if first.budget is not None else ""
    text = (f"Budget exceeded at {name(first.turn)}: {plural(first.pruned, 'oldest message')} pruned silently "
            f"by {quoted(subject)} to fit its token budget{budget}")
    if len(hit) > 1:
        text += f"; pruning goes on at {plural(len(hit) - 1, 'later turn')}"
        if worst.pruned > first.pruned:
            text += f", up to {plural(worst.pruned, 'message')} at {name(worst.turn)}"
    detail, silent = strategy_of(config).pruning_words(config)
    severity = WARNING if silent else INFO
    return Finding(SILENT_PRUNING, text + ".", subject, first.turn, node_id, severity, detail,
                   {"turns": [t.turn for t in hit], "pruned": [t.pruned for t in hit], "budget": first.budget})


def _dominant(subject: str, turns: Sequence[MemoryTurn], conversation: Conversation,
              node_id: str | None = None) -> list[Finding]:
    groups: dict[tuple[int, int], list[MemoryTurn]] = {}
    for t in turns:
        if t.largest is None or t.kept < 2 or t.history_tokens <= 0:
            continue
        if t.largest_tokens < DOMINANT_MIN_TOKENS or t.largest_tokens <= DOMINANT_SHARE * t.history_tokens:
            continue
        groups.setdefault(t.largest, []).append(t)
    name = turn_namer(conversation)
    numbers = turn_numbers(conversation)
    out = []
    for (q, j), hits in groups.items():
        first = hits[0]
        msg = conversation.turns[q].messages[j]
        share = first.largest_tokens / first.history_tokens
        text = (f"One message fills {share:.0%} of the history {quoted(subject)} keeps at {name(first.turn)}: "
                f"{name(numbers[q])}'s "
                f"{msg.role} message ({first.largest_tokens:,} of {first.history_tokens:,} tokens), "
                f"“{_excerpt(msg.content or msg.kind)}”")
        if len(hits) > 1:
            text += f"; it fills most of the history for {plural(len(hits), 'turn')}"
        detail = ("A long earlier reply or tool result crowds out everything else the node remembers, and can make "
                  "later calls fail or return empty output (Dify#36717). Shorten what is stored, or keep it out of "
                  "memory.")
        out.append(Finding(DOMINANT_MESSAGE, text + ".", subject, first.turn, node_id, WARNING, detail,
                           {"message": [q, j], "turns": [t.turn for t in hits], "share": round(share, 4),
                            "tokens": first.largest_tokens}))
    return out


def _window_zero(subject: str, turns: Sequence[MemoryTurn], name: TurnNamer, node_id: str | None = None) -> Finding:
    first = next((t for t in turns if t.kept), None)
    text = f"Window = 0, but history was included: Dify reads a window of 0 as no limit (its {DIFY_ROW_CAP}-turn cap)"
    if first is not None:
        text += f", so at {name(first.turn)} {quoted(subject)} still receives {plural(first.kept, 'earlier message')}"
    else:
        text += f", so {quoted(subject)} will receive every earlier turn"
    detail = "To switch memory off, turn the memory block off; to keep a few turns, set the window to 1 or more."
    return Finding(WINDOW_ZERO, text + ".", subject, first.turn if first else None, node_id, WARNING, detail)


def _trimmed_window(subject: str, config: MemoryConfig, turns: Sequence[MemoryTurn], name: TurnNamer,
                    baseline: Mapping[int, MemoryTurn] | None = None) -> Finding | None:
    for t in turns:
        size = window_size(PathView, config.settings, t.turn)
        would = min(size, t.candidates)
        if t.trimmed and t.in_window < would:
            lost = would - t.in_window
            before = baseline.get(t.turn) if baseline else None
            if before is not None and before.in_window == t.in_window:
                gain = "keeps nothing more than before"
            elif before is not None:
                gain = f"keeps {t.in_window} instead of {before.in_window}, not {would}"
            else:
                gain = f"keeps only {t.in_window}"
            text = (f"At {name(t.turn)} {quoted(subject)} has a window of {size} messages, but it {gain}: "
                    f"{plural(lost, 'message')} trimmed in earlier turns {'is' if lost == 1 else 'are'} gone for good")
            detail = ("The Window Memory node trims permanently: its store holds only the last N messages of the "
                      "previous turn plus the new round, so a larger N cannot bring back what a smaller N cut. "
                      "Start a new conversation, or set the larger window before the history grows.")
            return Finding(TRIMMED_WINDOW, text + ".", subject, t.turn, None, WARNING, detail,
                           {"window": size, "in_window": t.in_window, "would_keep": would, "trimmed": t.trimmed})
    return None


def larger_window_what_if(conversation: Conversation, config: MemoryConfig, window: int, from_turn: int, *,
                          system_prompt: str | None = None) -> Finding | None:
    """What raising a Window Memory node's N to ``window`` at ``from_turn`` would bring: a
    :data:`TRIMMED_WINDOW` finding when permanent trimming keeps it from keeping ``window``
    messages, ``None`` when the larger window fills up at once."""
    if TRIMMED_WINDOW not in config.system.finding_kinds(config):
        return None
    changed = config.with_(window_changes=tuple(config.settings.window_changes) + ((from_turn, window),)).validate()
    base = memory_turns(Replay(conversation, config, system_prompt=system_prompt))
    after = memory_turns(Replay(conversation, changed, system_prompt=system_prompt))
    baseline = {t.turn: t for t in base}
    name = turn_namer(conversation)
    return _trimmed_window(changed.label() + f" → {window} at {name(from_turn)}", changed,
                           [t for t in after if t.turn >= from_turn], name, baseline)


# -- Dify's docs versus Dify's code ----------------------------------------------------------------------

#: Causes of a docs-vs-code difference, in the order they are named.
CAUSE_PLACEHOLDER = "placeholder_row"
CAUSE_SIBLINGS = "other_branch_rows"
CAUSE_NOT_COUNTED = "tokens_not_counted"
CAUSE_BUDGET = "different_budget"
CAUSE_WINDOW_SETTING = "window_read_when_off"


@dataclass(frozen=True)
class ProfileCut:
    """What one profile did at one turn: the earlier thread turns inside its window, the
    messages it pruned by tokens, its budget, and the turns it sent."""

    window_turns: int
    pruned: int
    budget: int | None
    kept_turns: tuple[int, ...] = ()


@dataclass(frozen=True)
class Difference:
    """How Dify's docs and Dify 1.x differ for one node at one turn, and why."""

    turn: int
    causes: tuple[str, ...]
    text: str
    docs: ProfileCut
    code: ProfileCut
    only_docs: tuple[int, ...]  # turns the docs would send and the code does not
    only_code: tuple[int, ...]

    def to_json(self) -> dict:
        return {"turn": self.turn, "causes": list(self.causes), "text": self.text,
                "docs_kept_turns": list(self.docs.kept_turns), "code_kept_turns": list(self.code.kept_turns),
                "only_docs": list(self.only_docs), "only_code": list(self.only_code)}


def _explain_difference(window: int | None, docs: ProfileCut, code: ProfileCut, siblings: int,
                        counting: bool, fixed_prompt_tokens: int | None,
                        off_in_docs: bool = False, reserve: int | None = None,
                        fixed: int | None = None) -> tuple[tuple[str, ...], str]:
    """The causes of a difference and the sentence that names them (one rule for every caller).
    ``off_in_docs``: the docs read no window where the code reads ``window`` (a Question Classifier
    whose window is switched off: Dify 1.x reads its size anyway). ``reserve``: the config's
    ``prompt_reserve`` (a node that budgets after its own prompt; ``None``: the LLM node's rule);
    ``fixed``: its ``history_budget`` (a node that passes its memory no limit: both profiles' budget)."""
    from core.memory.strategies.dify import EMPTY_LIST_TOKENS, row_limit

    causes: list[str] = []
    parts: list[str] = []
    if off_in_docs:
        causes.append(CAUSE_WINDOW_SETTING)
        parts.append(f"Dify's docs say this node's window is switched off, so "
                     f"{plural(docs.window_turns, 'earlier turn')} would be sent; Dify 1.x reads the window's size anyway ({plural(row_limit(window), 'row')}, "
                     f"the current turn's one of them) and sends {code.window_turns}")
    elif code.window_turns != docs.window_turns:
        n = row_limit(window)
        causes.append(CAUSE_PLACEHOLDER)
        text = (f"Dify's docs say the window holds {plural(n, 'turn')}, so {plural(docs.window_turns, 'earlier turn')} "
                f"would be sent; Dify 1.x sends {code.window_turns} — the current turn's row is one of the {n} fetched")
        if siblings:
            causes.append(CAUSE_SIBLINGS)
            # Rows of other branches: a regenerated reply, or a turn an edit left behind on the old thread.
            text += (f", and {plural(siblings, 'turn')} on another branch (regenerated, or left by an edit) "
                     f"used {'a window row' if siblings == 1 else f'{siblings} window rows'}")
        parts.append(text)
    if docs.pruned and not counting:
        causes.append(CAUSE_NOT_COUNTED)
        budget = f"{docs.budget:,} tokens" if docs.budget is not None else "the budget"
        parts.append(f"the docs say older messages are pruned to fit {budget} ({plural(docs.pruned, 'message')} "
                     f"here); Dify as shipped does not count tokens (plugin token counting is off), so nothing "
                     f"was pruned")
    elif counting and (docs.pruned or code.pruned) and fixed is not None and docs.pruned != code.pruned:
        causes.append(CAUSE_BUDGET)
        parts.append(f"both budgets are a fixed {fixed:,} tokens (the node passes its memory no limit); the docs "
                     f"count the history's messages, pruning {plural(docs.pruned, 'message')}, and Dify 1.x counts "
                     f"it as a list (+{EMPTY_LIST_TOKENS}), pruning {plural(code.pruned, 'message')}")
    elif counting and (docs.pruned or code.pruned) and (docs.pruned != code.pruned or docs.budget != code.budget):
        causes.append(CAUSE_BUDGET)
        prompt = f"the prompt ({fixed_prompt_tokens:,} tokens)" if fixed_prompt_tokens is not None else "the prompt"
        subtracts = (f"subtracts only {EMPTY_LIST_TOKENS} (it counts an empty list) and" if reserve is None else
                     "subtracts the prompt too" + (f" and {reserve:,} tokens more" if reserve else "") + ", then")
        parts.append(f"the docs' budget subtracts {prompt} and is {docs.budget:,} tokens, pruning "
                     f"{plural(docs.pruned, 'message')}; Dify 1.x {subtracts} compares the history counted as "
                     f"a list with {code.budget:,} tokens, pruning {plural(code.pruned, 'message')}")
    if not parts:
        parts.append("Dify's docs and Dify 1.x send different history")
    sentence = "; ".join(parts)
    return tuple(causes), sentence[0].upper() + sentence[1:] + "."


def _difference(turn: int, window: int | None, docs: ProfileCut, code: ProfileCut, siblings: int, counting: bool,
                fixed_prompt_tokens: int | None, off_in_docs: bool = False, reserve: int | None = None,
                fixed: int | None = None) -> Difference:
    causes, text = _explain_difference(window, docs, code, siblings, counting, fixed_prompt_tokens, off_in_docs,
                                       reserve, fixed)
    d, c = set(docs.kept_turns), set(code.kept_turns)
    return Difference(turn, causes, text, docs, code, tuple(sorted(d - c)), tuple(sorted(c - d)))


def _cut_from_ledger(ledger: Ledger) -> ProfileCut:
    windowed = ledger.entries_with((KEPT, OVER_BUDGET, EMPTY))  # inside the window: not the whole listing
    in_window = {e.turn for e in windowed}
    pruned = sum(1 for e in windowed if e.reason == OVER_BUDGET)
    kept = tuple(sorted({e.turn for e in ledger.kept}))
    return ProfileCut(len(in_window), pruned, ledger.budget, kept)


def ledger_difference(code: Ledger, docs: Ledger, position: int, query_tokens: int = 0) -> Difference | None:
    """How the two profiles' ledgers of one node at one turn differ (``None``: they agree).

    ``position`` is the turn's position in the conversation: the rows of other branches among
    the newest window rows are the entries ``other_branch`` from there on. ``query_tokens``: the
    current query's tokens, which a ledger's prompt holds and the budget of a node whose query
    joins after the budget (``query_after_budget``) does not subtract."""
    # One turn's two ledgers list the same earlier messages: they agree when they keep the same ones
    # (read from the kept entries, so a ledger kept as runs is not listed whole to find that out).
    if [(e.position, e.index) for e in code.kept] == [(e.position, e.index) for e in docs.kept]:
        return None
    from core.memory.strategies.dify import row_limit

    window = code.config.get("window")
    first_row = position - row_limit(window) + 1
    siblings = len({e.position for e in code.entries_at(range(max(first_row, 0), position)) if e.reason == OTHER_BRANCH})
    fixed = budgeted_prompt(docs.prompt_tokens - docs.history_tokens, query_tokens,
                            bool(docs.config.get("query_after_budget")))
    return _difference(code.turn, window, _cut_from_ledger(docs), _cut_from_ledger(code), siblings,
                       bool(code.config.get("plugin_token_counting")), fixed,
                       window is not None and docs.config.get("window") is None, code.config.get("prompt_reserve"),
                       code.config.get("history_budget"))


def both_decisions(code: Ledger, docs: Ledger) -> dict[tuple[int, int], tuple[str, str]]:
    """``{(position, index): (docs reason, code reason)}`` for the messages the two profiles treat
    differently — what the UI shows as "docs: kept · code: dropped"."""
    # Kept by one of them only: the turns of those messages are all that is read of either ledger.
    turns = {e.position for e in code.kept} | {e.position for e in docs.kept}
    theirs = {(e.position, e.index): e.reason for e in docs.entries_at(turns)}
    return {(e.position, e.index): (theirs[(e.position, e.index)], e.reason) for e in code.entries_at(turns)
            if (e.position, e.index) in theirs and theirs[(e.position, e.index)] != e.reason
            and (theirs[(e.position, e.index)] == KEPT) != e.kept}


def docs_vs_code(conversation: Conversation, config: MemoryConfig, *, system_prompt: str | None = None,
                 has_thread: bool = True, prompt_tokens: Callable[[int], int] | None = None,
                 replay: Replay | None = None) -> list[Difference]:
    """Every answered turn where Dify's docs and Dify 1.x send different history under ``config``
    (a config whose memory system :attr:`~core.memory.strategies.base.Strategy.has_profiles`: Dify's; any
    other has no such difference), in turn order.

    Read from one walk, not a ledger per turn: the two profiles see the same thread view (the same
    messages and counts; Dify's window reads no marks, its reach being bounded), so the documented
    profile decides each turn on the view the shipped one walks. ``replay``: a replay of ``config``
    made with the same settings, whose counts are reused (it stands for one profile when its config
    is that profile's)."""
    profiles = config.system.profiles(config)
    if profiles is None:
        return []
    code_cfg, docs_cfg = profiles
    kwargs = {"system_prompt": system_prompt, "has_thread": has_thread, "prompt_tokens": prompt_tokens}
    prompt = conversation.system_prompt if system_prompt is None else system_prompt

    def replay_of(cfg: MemoryConfig) -> Replay:
        if replay is not None and replay.config == cfg and replay.conversation is conversation \
                and replay.system_prompt == prompt and replay.has_thread == has_thread \
                and replay._prompt_tokens is prompt_tokens:
            return replay
        return Replay(conversation, cfg, **kwargs)

    code_replay, docs_replay = replay_of(code_cfg), replay_of(docs_cfg)
    turns = conversation.turns
    numbers = code_replay.numbers
    from bisect import bisect_left, bisect_right

    from core.memory.strategies.dify import row_limit

    n = row_limit(config.settings.window)

    def sent_turns(view, dec) -> tuple[int, ...]:
        """The turns ``dec`` sends a message of: a non-empty one at or after its cut, as a ledger's
        kept entries list them (a turn the cut splits counts; one whose sent messages are all
        empty does not)."""
        cut, end, counts = dec.budget_cut, dec.end, view.count_prefix
        if counts[end] == counts[cut]:
            return ()
        starts, positions = view.starts, view.positions
        first, last = bisect_right(starts, cut) - 1, bisect_left(starts, end)
        if counts[end] - counts[cut] == end - cut:  # no empty message among them: every turn counts
            if positions[last - 1] - positions[first] == last - 1 - first:  # a stretch without branches:
                return tuple(range(numbers[positions[first]], numbers[positions[last - 1]] + 1))  # numbered on
            return tuple(map(numbers.__getitem__, positions[first:last]))
        return tuple(numbers[positions[i]] for i in range(first, last)
                     if counts[min(view.turn_start(i + 1), end)] > counts[max(starts[i], cut)])

    # Both profiles decide on the same view and send a suffix of its turns each, less the turns with
    # nothing to send, so the shorter tuple is the longer one's tail and what only one of them sends
    # is the head before it (turn numbers rise along a thread, so every tuple is in order). A
    # difference's text depends on a handful of numbers that repeat from turn to turn: each is
    # written once.
    explained: dict[tuple, tuple[tuple[str, ...], str]] = {}
    counting, window, reserve, fixed = (config.settings.plugin_token_counting, config.settings.window,
                                        config.prompt_reserve, config.history_budget)
    out: list[Difference] = []
    for _ in docs_replay._tokens_in_order():  # its counts set in batches, as its own walk would
        pass
    for p, view, c in code_replay._walk():
        if turns[p].query_index is None or c.blocked:
            continue
        d = docs_replay._decide(view, p)  # blocked alike: memory and scope do not depend on the profile
        if c.budget_cut == d.budget_cut:
            continue
        kept_c = view.count_prefix[c.end] - view.count_prefix[c.budget_cut]
        kept_d = view.count_prefix[d.end] - view.count_prefix[d.budget_cut]
        if kept_c == kept_d and view.kept_prefix[c.budget_cut] == view.kept_prefix[d.budget_cut]:
            continue  # only empty messages moved across the cut: the same history is sent
        first_row = p - n + 1
        on_thread = len(view.positions)
        on_thread_rows = on_thread - bisect_left(view.positions, max(first_row, 0))
        siblings = (p - max(first_row, 0)) - on_thread_rows
        counted = docs_replay.budget_prompt_tokens(p, d.fixed_prompt_tokens)  # what the docs' budget subtracts
        docs_sent, code_sent = sent_turns(view, d), sent_turns(view, c)
        docs_cut = ProfileCut(on_thread - bisect_left(view.starts, d.window_start), d.budget_cut - d.window_start,
                              d.budget.limit, docs_sent)
        code_cut = ProfileCut(on_thread - bisect_left(view.starts, c.window_start), c.budget_cut - c.window_start,
                              c.budget.limit, code_sent)
        key = (docs_cut.window_turns, docs_cut.pruned, docs_cut.budget, code_cut.window_turns, code_cut.pruned,
               code_cut.budget, siblings, counted)
        why = explained.get(key)
        if why is None:
            why = explained[key] = _explain_difference(window, docs_cut, code_cut, siblings, counting, counted,
                                                       reserve=reserve, fixed=fixed)
        extra = len(docs_sent) - len(code_sent)
        out.append(Difference(numbers[p], why[0], why[1], docs_cut, code_cut, docs_sent[:max(extra, 0)],
                              code_sent[:max(-extra, 0)]))
    return out


def _docs_vs_code_findings(subject: str, differences: Sequence[Difference], name: TurnNamer,
                           node_id: str | None = None) -> list[Finding]:
    """One finding per set of causes, linked to the first turn it shows at, listing the others."""
    groups: dict[tuple[str, ...], list[Difference]] = {}
    for diff in differences:
        groups.setdefault(diff.causes, []).append(diff)
    out = []
    for causes, diffs in groups.items():
        first = diffs[0]
        text = f"At {name(first.turn)}" + (f", {quoted(subject)}" if subject else "") + f": {first.text}"
        if len(diffs) > 1:
            text = text[:-1] + f"; the same happens at {plural(len(diffs) - 1, 'later turn')} "                                f"({_named_ranges(name, (d.turn for d in diffs[1:]))})."
        detail = ("MemLens follows Dify 1.x as shipped by default; Dify's docs describe a simpler memory. "
                  "Switch the Dify memory rules to \"as Dify's docs describe\" to see the docs' version.")
        out.append(Finding(DOCS_VS_CODE, text, subject, first.turn, node_id, INFO, detail,
                           {"causes": list(causes), "turns": [d.turn for d in diffs],
                            "differences": [d.to_json() for d in diffs[:50]]}))
    return out


# -- facts under memory configs -----------------------------------------------------------------------

#: A config's "question about a fact its memory lacks" findings listed one by one; one more counts the rest
#: (a conversation stating a fact in every turn would list one per fact, and the facts table has them all).
FACT_FINDINGS_LISTED = 25

def _value_kept(ledger: Ledger, conversation: Conversation, value: str) -> bool:
    """Whether a kept message (or a summary) restates the value, e.g. an answer repeating "4411"."""
    needle = (value or "").casefold()
    if not needle:
        return False
    turns = conversation.turns
    for e in ledger.kept:
        if needle in turns[e.position].messages[e.index].content.casefold():
            return True
    return any(needle in s.content.casefold() for s in ledger.synthetic)


def _newest_statement(ledger: Ledger, messages: Sequence[tuple[int, int]]) -> LedgerEntry | None:
    where = set(messages)
    found = [e for e in ledger.entries_at({q for q, _ in where}) if (e.position, e.index) in where]
    return found[-1] if found else None


def _fact_findings(conversation: Conversation, comparison: Comparison, replays: Sequence[Replay]) -> list[Finding]:
    answered = conversation.answered_turns()
    numbers = turn_numbers(conversation)
    name = turn_namer(conversation)
    questions: dict[str, list[int]] = {}  # fact key -> indices of the answered turns that ask for it
    if any(f.key for f in comparison.facts):
        for k, p in enumerate(answered):
            for key in asked_keys(conversation.turns[p].query):
                questions.setdefault(key, []).append(k)
    found: dict[tuple[int, int], tuple] = {}  # (fact, config) -> the first turn asking for it that lacks it
    for c, replay in enumerate(replays):
        found.update(_asked_without(conversation, comparison, c, replay, questions))
    out: list[Finding] = []
    listed = [0] * len(comparison.configs)
    unlisted: list[list[int]] = [[] for _ in comparison.configs]  # per config: the turns of the findings not listed
    for f, fact in enumerate(comparison.facts):
        if not fact.messages:
            continue
        stated = numbers[fact.messages[0][0]]
        for c, fate in enumerate(comparison.fates[f]):
            if (f, c) in found:
                if listed[c] < FACT_FINDINGS_LISTED:
                    listed[c] += 1
                    out.append(_fact_not_seen(comparison, f, c, *found[(f, c)], name=name, numbers=numbers))
                else:
                    unlisted[c].append(found[(f, c)][0])
            elif not fact.key and fate.lost_turn is not None:  # a fact the user marked: say when it goes
                subject = comparison.configs[c].label
                reason = fate.lost_reason
                why = f" ({reason.replace('_', ' ')})" if reason else ""
                course = fate.comeback_words()
                out.append(Finding(FACT_NOT_SEEN, f"{fact.label} ({name(stated)}) leaves {quoted(subject)}'s memory at "
                                                  f"{name(fate.lost_turn)}{why}" + (f"; {course}" if course else "")
                                   + ".", subject, fate.lost_turn,
                                   None, INFO, "", {"fact": fact.label, "stated_turn": stated}))
    for c, turns in enumerate(unlisted):
        if turns:
            subject = comparison.configs[c].label
            first = min(turns)
            out.append(Finding(FACT_NOT_SEEN, f"{quoted(subject)} also lacks {plural(len(turns), 'more fact')} when a "
                                              f"question is about them, the first at {name(numbers[first])} (the "
                                              f"first {FACT_FINDINGS_LISTED} are listed one by one).", subject,
                               numbers[first], None, WARNING, "Where each fact left memory is in the comparison's facts.",
                               {"facts": len(turns)}))
    return out


def _fact_not_seen(comparison: Comparison, f: int, c: int, p: int, q: int, said: int, why: str, seen_before: bool, *,
                   name: TurnNamer, numbers: Sequence[int]) -> Finding:
    """Turn ``p`` asks for fact ``f`` while config ``c``'s memory lacks it; its newest statement was at
    turn ``q`` (``why``: that statement's reason, in words), its first at ``said``."""
    fact, subject = comparison.facts[f], comparison.configs[c].label
    verb = "no longer has" if seen_before else "never saw"
    text = (f"At {name(numbers[p])} the question is about {fact.label}, but {quoted(subject)} {verb} "
            f"{name(numbers[q])}, where it was stated ({why})")
    return Finding(FACT_NOT_SEEN, text + ".", subject, numbers[p], None, WARNING,
                   "The model is asked for something its memory does not hold; it will guess or say it does not "
                   "know.", {"fact": fact.label, "stated_turn": numbers[said]})


def _asked_without(conversation: Conversation, comparison: Comparison, c: int, replay: Replay,
                   questions: Mapping[str, list[int]]) -> dict[tuple[int, int], tuple]:
    """For each fact with a key, the first turn that asks for it while config ``c``'s memory holds no
    statement of it, nor a message repeating its value (an answer restating "4411"). The turns where a
    fact is out of memory come from its timeline; each is looked at in one walk of the replay, in turn
    order, so a long conversation costs a walk, not a ledger per fact."""
    answered = conversation.answered_turns()
    one_thread = conversation.one_thread()
    heap: list[tuple[int, int, Iterator[int]]] = []  # (answered index, fact, that fact's later such turns)
    for f, fact in enumerate(comparison.facts):
        if fact.key and fact.messages and fact.key in questions:
            after_stated = bisect_right(answered, fact.messages[0][0])  # the first answered turn after it
            candidates = comparison.fates[f][c].present.where(False, questions[fact.key], after_stated)
            k = next(candidates, None)
            if k is not None:
                heapq.heappush(heap, (k, f, candidates))
    from .compare import walk_rows

    out: dict[tuple[int, int], tuple] = {}

    def ask(k: int, f: int, candidates: Iterator[int], row: Any, thread: set[int] | None) -> None:
        """Turn ``k`` for fact ``f``: its finding, or (its value restated) the fact's next such turn."""
        finding = _asked_at(comparison, replay, answered, f, c, k, row, thread)
        if finding is not None:
            out[(f, c)] = finding
        elif (later := next(candidates, None)) is not None:
            heapq.heappush(heap, (later, f, candidates))

    if one_thread:
        by_position = {p: k for k, p in enumerate(answered)} if heap else {}
        for p, row in (walk_rows(replay) if heap else ()):
            k = by_position[p]
            while heap and heap[0][0] == k:
                ask(k, *heapq.heappop(heap)[1:], row, None)
            if not heap:
                break
    # A branched conversation's walk goes depth first: its turns are asked for one by one instead.
    threads: dict[int, set[int]] = {}
    while heap:
        k, f, candidates = heapq.heappop(heap)
        p = answered[k]
        thread = threads.get(p)
        if thread is None:  # the same turns for every fact
            thread = threads[p] = set(conversation.tree.thread(p))
        ask(k, f, candidates, _LedgerRow(replay, p), thread)
    return out


class _LedgerRow:
    """A turn's ledger read as :func:`core.analysis.compare.walk_rows` reads a row."""

    def __init__(self, replay: Replay, position: int):
        self.ledger = replay.ledger_at(position, lazy=True)
        self.turns = replay.conversation.turns

    @property
    def budget(self) -> int | None:
        return self.ledger.budget

    def thread_reason(self, q: int, j: int) -> str | None:
        found = [e for e in self.ledger.entries_at((q,)) if e.index == j]
        return found[0].reason if found and found[0].reason != OTHER_BRANCH else None

    def sent_texts(self) -> Iterator[str]:
        for e in self.ledger.kept:
            yield self.turns[e.position].messages[e.index].content
        for s in self.ledger.synthetic:
            yield s.content


def _asked_at(comparison: Comparison, replay: Replay, answered: Sequence[int], f: int, c: int, k: int, row: Any,
              thread: set[int] | None) -> tuple | None:
    """When answered turn ``k`` asks for fact ``f`` while config ``c``'s memory (``replay``, read at that
    turn as ``row``) lacks it, what :func:`_fact_not_seen` says of it; ``None`` when the memory restates
    its value after all, or (``thread``: the turn's thread, on a branched conversation) no statement of
    it is on the thread."""
    conversation, numbers, p = replay.conversation, replay.numbers, answered[k]
    fact, fate = comparison.facts[f], comparison.fates[f][c]
    # Only what this turn's own thread said: a fact stated on another branch (a regenerated or edited
    # line) was never told to this one.
    said = [m for m in fact.messages if m[0] < p and (thread is None or m[0] in thread)]
    if not said:
        return None
    needle = (fact.value or "").casefold()
    if needle and any(needle in text.casefold() for text in row.sent_texts()):
        return None
    q, j = said[-1]
    reason = row.thread_reason(q, j)
    if reason is None:
        why = "not on this branch"
    else:
        message = conversation.turns[q].messages[j]
        entry = LedgerEntry(ref=message.ref, turn=numbers[q], role=message.role, tokens=replay.message_tokens(q)[j],
                            kept=False, reason=reason, kind=message.kind, position=q, index=j)
        why = explain(entry, {**replay.config.to_dict(), "budget": row.budget})
    after = bisect_right(answered, said[0][0])
    seen_before = fate.present.true_in(after, k) if thread is None else any(
        fate.present[j] is True for j in range(after, k) if answered[j] in thread)
    return p, q, said[0][0], why, seen_before


def _zero_window_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """A Dify window of 0, set or changed to: Dify reads it as no limit."""
    if not any(n == 0 for n in window_sizes(config.settings)):
        return []
    return [_window_zero(label, [t for t in turns if window_at(config.settings, t.turn) == 0], name)]


def _trimmed_window_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """A store that trims for good and a window that grows later: what the smaller one cut stays gone."""
    found = _trimmed_window(label, config, turns, name) if grows(config.settings) else None
    return [found] if found else []


def _platform_findings(kind: str) -> Callable[..., list[Finding]]:
    """An n8n or Flowise surprise (:mod:`core.analysis.platform_findings`) as a finding of its kind."""
    analyse = PLATFORM_ANALYSES[kind]

    def findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
        note = analyse(quoted(label), config, replay, turns, name)
        return [] if note is None else [Finding(kind, note.text + ".", label, note.turn, None, WARNING, note.detail)]
    return findings


def _compaction_config_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    return compaction_findings(label, [replay.ledger_at(p) for p in replay.conversation.answered_turns()], name=name)


def _docs_vs_code_config_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    return _docs_vs_code_findings(label, docs_vs_code(replay.conversation, config, system_prompt=system_prompt,
                                                      replay=replay), name)


#: The analyses that apply to a memory config only when its memory system names their kind
#: (:meth:`core.memory.strategies.base.Strategy.finding_kinds`), each ``(label, config, replay, memory
#: turns, turn namer, system prompt) -> findings``.
def _platform_rule_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """The first turn whose ledger shows its memory system's surprising rule at work, in the system's words,
    and how many later turns do too."""
    system = config.system
    found = [(p, text) for p in replay.conversation.answered_turns()
             if (text := system.turn_surprise(replay, replay.ledger_at(p)))]
    if not found:
        return []
    position, text = found[0]
    turn = replay.numbers[position]
    more = f" ({plural(len(found) - 1, 'later turn')} too)" if len(found) > 1 else ""
    detail = system.pruning_words(config.to_dict())[0]
    return [Finding(PLATFORM_RULE, f"At {name(turn)} {quoted(label)}: {text}{more}.", label, turn, None, WARNING,
                    detail, {"turns": [replay.numbers[p] for p, _ in found]})]


SYSTEM_FINDINGS: dict[str, Callable[..., list[Finding]]] = {
    WINDOW_ZERO: _zero_window_findings,
    TRIMMED_WINDOW: _trimmed_window_findings,
    COMPACTION: _compaction_config_findings,
    DOCS_VS_CODE: _docs_vs_code_config_findings,
    PLATFORM_RULE: _platform_rule_findings,
    **{kind: _platform_findings(kind) for kind in PLATFORM_ANALYSES},
}


def config_findings(conversation: Conversation, configs: Iterable[ConfigLike], *, comparison: Comparison | None = None,
                    system_prompt: str | None = None) -> list[Finding]:
    """Findings for memory configs replayed over a plain conversation (the compare page).

    ``configs``: memory configs, labelled configs or dicts, as for :func:`core.analysis.compare.compare`;
    ``comparison``: that comparison, when already computed (its facts are used).
    """
    from .compare import named_configs

    named = comparison.configs if comparison is not None else named_configs(configs)
    replays = comparison.replays_for(conversation, system_prompt) if comparison is not None else \
        [Replay(conversation, c.config, system_prompt=system_prompt) for c in named]
    name = turn_namer(conversation)
    out: list[Finding] = []
    for c, replay in zip(named, replays):
        turns = memory_turns(replay)
        config = c.config
        found = _silent_pruning(c.label, turns, name, config.to_dict())
        if found:
            out.append(found)
        out.extend(_dominant(c.label, turns, conversation))
        for kind in config.system.finding_kinds(config):  # the analyses its memory system names
            out.extend(SYSTEM_FINDINGS[kind](c.label, config, replay, turns, name, system_prompt))
    if comparison is not None:
        out.extend(_fact_findings(conversation, comparison, replays))
    return _order(out)


# -- every finding of a source ---------------------------------------------------------------------------

def findings_for(source: Source | Conversation, configs: Iterable[ConfigLike] = (), *,
                 comparison: Comparison | None = None,
                 system_prompt: str | None = None) -> list[Finding]:
    """Every finding about a source (:class:`core.analysis.source.Source`, anything with its
    ``conversation``, ``flow`` and ``records``, or a bare :class:`Conversation`): its memory configs replayed over the conversation
    (:func:`config_findings`; none when ``configs`` is empty and no ``comparison`` is given), and
    for a conversation recorded from a flow the flow's own — from its recorded turns
    (:func:`run_findings`), or from the flow alone (:func:`flow_findings`) when they are not
    loaded. One call for every page and the report, so they never disagree on what they list."""
    conversation = source if isinstance(source, Conversation) else source.conversation
    out: list[Finding] = []
    if comparison is not None or configs:
        out += config_findings(conversation, configs, comparison=comparison, system_prompt=system_prompt)
    flow = getattr(source, "flow", None)
    if flow is not None:
        records = getattr(source, "records", None)
        out += run_findings(flow, conversation, records) if records else flow_findings(flow)
    return _order(out)


# -- flows: static checks ------------------------------------------------------------------------------

def _selectors(value: Any, *, skip: frozenset = frozenset()) -> list[tuple[str, ...]]:
    """Every variable a node's data reads: ``{{#a.b#}}`` in any text and any ``…selector`` list."""
    out: list[tuple[str, ...]] = []
    if isinstance(value, str):
        out.extend(tuple(m.split(".")) for m in _SELECTOR.findall(value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if k in skip:
                continue
            if str(k).endswith("selector") and isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                out.append(tuple(v))
            else:
                out.extend(_selectors(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(_selectors(v))
    return out


_MODEL_NODES = ("llm", "agent")
_NODE_SKIP = frozenset({"memory", "model", "title", "desc", "type", "selected", "variable_selector",
                        "assigned_variable_selector", "vision"})


def _origins(flow: Flow, selector: tuple[str, ...], seen: set[str] | None = None) -> set[str]:
    """Where a value comes from: ``sys.query``, ``conversation.<name>`` or ``node:<id>`` of the
    LLM/agent nodes that wrote it, traced through template, code and aggregator nodes."""
    if not selector:
        return set()
    head = selector[0]
    if head in ("sys", "conversation", "env"):
        return {f"{head}.{selector[1]}" if len(selector) > 1 else head}
    if not flow.has_node(head):
        return set()
    node = flow.node(head)
    if node.type in _MODEL_NODES:
        return {f"node:{head}"}
    seen = set() if seen is None else seen
    if head in seen:
        return set()
    seen.add(head)
    out: set[str] = set()
    for s in _selectors(node.data, skip=_NODE_SKIP):
        out |= _origins(flow, s, seen)
    return out


def _assigner_writes(node: Node) -> list[tuple[str, str, tuple[str, ...] | None]]:
    """(target variable, operation, source selector) of an assigner node, v1 or v2."""
    data = node.data
    out = []
    if str(data.get("version") or "1") == "2":
        for item in data.get("items") or []:
            if not isinstance(item, Mapping):
                continue
            target = item.get("variable_selector") or []
            if len(target) < 2 or target[0] != "conversation":
                continue
            value = item.get("value")
            source = tuple(value) if item.get("input_type", "variable") == "variable" and isinstance(value, list) \
                else None
            out.append((str(target[1]), str(item.get("operation") or "over-write"), source))
    else:
        target = data.get("assigned_variable_selector") or []
        if len(target) >= 2 and target[0] == "conversation":
            source = data.get("input_variable_selector")
            out.append((str(target[1]), str(data.get("write_mode") or "over-write"),
                        tuple(source) if isinstance(source, list) else None))
    return out


def history_variables(flow: Flow) -> dict[str, str]:
    """Conversation variables that hold the chat history, each with why we think so (see the
    module docstring for what is detected)."""
    declared = {v.name: v for v in flow.variables}
    writers: dict[str, list[str]] = {}
    for node in flow.nodes:
        if node.type != "assigner":
            continue
        for target, op, source in _assigner_writes(node):
            if source is None:
                continue
            origins = _origins(flow, source)
            said = sorted(o for o in origins if o == "sys.query" or o.startswith("node:"))
            if not said:
                continue
            rolling = f"conversation.{target}" in origins
            if op in ("append", "extend") or rolling:
                what = " and ".join("the user's messages" if o == "sys.query"
                                    else f"{quoted(flow.node(o[5:]).label)}'s replies" for o in said)
                how = "appends" if op in ("append", "extend") else "rewrites it with"
                writers.setdefault(target, []).append(f"{quoted(node.label)} {how} {what}")
    out = {name: "; ".join(ways) + " every turn" for name, ways in writers.items()}
    for name, var in declared.items():
        if name not in out and _HISTORY_NAME.search(name) and (var.type.startswith("array") or var.type == "string"):
            out[name] = "its name says it holds the chat history"
    return out


def _memory_block(node: Node) -> MemorySettings | None:
    from core.flow.nodes.llm import llm_settings

    return llm_settings(node).memory if node.type == "llm" else None


def _query_template_has_query(memory: MemorySettings) -> bool:
    qpt = memory.query_prompt_template
    return not qpt or "sys.query" in {".".join(s) for s in _selectors(qpt)}


def _history_twice(flow: Flow, node: Node, memory: MemorySettings, histories: Mapping[str, str]) -> list[Finding]:
    from core.flow.nodes.llm import llm_settings

    out = []
    reads = set()
    for s in _selectors(node.data, skip=_NODE_SKIP):
        reads |= _origins(flow, s)
    for name, why in histories.items():
        if f"conversation.{name}" in reads:
            text = (f"{quoted(node.label)} gets the conversation twice: its memory replays the chat history, and its prompt "
                    f"also renders conversation.{name}, which holds the history ({why})")
            out.append(Finding(HISTORY_TWICE, text + ".", node.label, None, node.id, WARNING,
                               "Every earlier turn reaches the model twice: it costs tokens and can confuse the "
                               "model about what was said when. Keep one source: switch memory off, or stop rendering "
                               "the variable.", {"variable": name}))
    settings = llm_settings(node)
    template_reads = set()
    for item in settings.prompt:
        text = item.jinja2_text if item.edition_type == "jinja2" and item.jinja2_text else item.text
        template_reads |= {".".join(s) for s in _selectors(text)}
    for v in settings.jinja2_variables:
        sel = v.get("value_selector")
        if isinstance(sel, list):
            template_reads.add(".".join(map(str, sel)))
    if "sys.query" in template_reads and _query_template_has_query(memory):
        text = (f"{quoted(node.label)} receives the current question twice: its prompt renders {{{{#sys.query#}}}} and its "
                f"memory adds the query again as the last user message")
        out.append(Finding(HISTORY_TWICE, text + ".", node.label, None, node.id, WARNING,
                           "With memory on, Dify appends the memory's query template (default {{#sys.query#}}) after "
                           "the history; remove the query from the prompt template, or change the query template.",
                           {"variable": "sys.query"}))
    return out


def _answer_producers(flow: Flow) -> dict[str, set[str]]:
    """Answer node id → the LLM/agent nodes whose output it renders."""
    out = {}
    for node in flow.nodes:
        if node.type != "answer":
            continue
        origins: set[str] = set()
        for s in _selectors(node.data.get("answer") or ""):
            origins |= _origins(flow, s)
        out[node.id] = {o[5:] for o in origins if o.startswith("node:")}
    return out


def flow_findings(flow: Flow) -> list[Finding]:
    """What the flow file alone says: memory without a conversation, windows of 0, the
    conversation or the query reaching a node twice, and answers written by one node that
    another node's memory will replay."""
    out: list[Finding] = []
    histories = history_variables(flow)
    producers = _answer_producers(flow)
    replaying: dict[tuple[str, ...], list[Node]] = {}
    for node in flow.llm_nodes:
        if node.container:
            continue
        memory = _memory_block(node)
        if memory is None:
            continue
        if not flow.is_chat:
            out.append(Finding(NO_CONVERSATION, f"{quoted(node.label)} has memory switched on ({memory.label()}), but this "
                                                f"is a Workflow app: there is no conversation, so no history ever "
                                                f"reaches it.", node.label, None, node.id, WARNING,
                               "Dify shows the memory setting only in Chatflows and ignores it in a Workflow. Make "
                               "the app a Chatflow, or pass what the node must know as an input.",
                               {"window": memory.window_size}))
            continue
        if memory.window_enabled and memory.window_size == 0:
            out.append(_window_zero(node.label, [], str, node.id))  # no turns to name: a flow alone has none
        out.extend(_history_twice(flow, node, memory, histories))
        others = tuple(sorted({a for ids in producers.values() for a in ids} - {node.id}))
        if others:
            replaying.setdefault(others, []).append(node)
    for others, nodes in replaying.items():
        names = " and ".join(quoted(flow.node(a).label) for a in others)
        answers = ", ".join(quoted(flow.node(n).label) for n, ids in producers.items() if set(others) & ids)
        readers = ", ".join(n.label for n in nodes)  # the subject; named in quotes in the sentence
        quoted_readers = ", ".join(quoted(n.label) for n in nodes)
        out.append(Finding(FOREIGN_ANSWERS, f"The memory of {quoted_readers} will replay "
                                            f"answers written by {names}: Dify stores the Answer node's output "
                                            f"({answers}) as each turn's answer, and every node with memory reads it "
                                            f"as its own past reply.", readers, None, nodes[0].id, INFO,
                           "Give each node its own history through a conversation variable, or switch memory off "
                           "for the nodes that should not see it (Dify#4548).",
                           {"writers": list(others), "nodes": [n.id for n in nodes]}))
    return _order(out)


# -- flows: recorded turns -----------------------------------------------------------------------------

def _reads(flow: Flow, node: Node) -> set[str]:
    reads: set[str] = set()
    for s in _selectors(node.data, skip=_NODE_SKIP):
        reads |= _origins(flow, s)
    return reads


def run_findings(flow: Flow, conversation: Conversation, records: Sequence[TurnRecord]) -> list[Finding]:
    """Findings from a flow's recorded turns (:class:`core.flow.runtime.TurnRecord`, one per turn of
    ``conversation``, matched by id) — each node's ledgers, replies and the variables written —
    plus the flow's static findings, linked to the first turn where they show."""
    from core.flow.node_types import NODE_TYPES

    from .compare import detect_facts

    position = {t.id: i for i, t in enumerate(conversation.turns)}
    numbers = turn_numbers(conversation)
    name = turn_namer(conversation)
    recs = sorted((r for r in records if r.id in position), key=lambda r: position[r.id])
    static = flow_findings(flow)
    out: list[Finding] = []
    # LLM, Question Classifier and Parameter Extractor runs: each carries its Dify memory's ledger.
    ledger_types = {name for name, kind in NODE_TYPES.items() if kind.dify_memory}

    # Per node: its ledgers turn by turn.
    by_node: dict[str, list[tuple[int, TurnRecord, NodeRun]]] = {}  # node id -> [(position, record, run)]
    for rec in recs:
        for run in rec.node_runs:
            if run.type in ledger_types and run.ledger is not None:
                by_node.setdefault(run.node_id, []).append((position[rec.id], rec, run))

    def label(node_id: str) -> str:
        return flow.node(node_id).label if flow.has_node(node_id) else node_id

    # Static findings, linked to the first turn where they show.
    for f in static:
        if f.kind == FOREIGN_ANSWERS:
            continue  # observed below from the stored answers instead
        runs = by_node.get(f.node_id or "", [])
        turn = None
        if f.kind in (WINDOW_ZERO, HISTORY_TWICE):
            hit = next((p for p, _, run in runs if run.ledger.kept), None) if f.kind == WINDOW_ZERO \
                else (runs[0][0] if runs else None)
            turn = numbers[hit] if hit is not None else None
        if f.kind == WINDOW_ZERO and turn is not None:
            mt = next(memory_turn(run.ledger, p) for p, _, run in runs if run.ledger.kept)
            f = _window_zero(f.subject, [mt], name, f.node_id)
        elif turn is not None:
            f = Finding(f.kind, f.text, f.subject, turn, f.node_id, f.severity, f.detail, f.data)
        out.append(f)

    memory_on = {nid for nid, runs in by_node.items() if any(remembers(run.memory) for _, _, run in runs)}

    for node_id, runs in by_node.items():
        subject = label(node_id)
        turns = [memory_turn(run.ledger, p) for p, _, run in runs]
        memory = runs[-1][2].memory or {}
        found = _silent_pruning(subject, turns, name, memory, node_id)
        if found:
            out.append(found)
        out.extend(_dominant(subject, turns, conversation, node_id))

    # Agent nodes compacting as Dify 1.17 ships it.
    agents: dict[str, list[Ledger]] = {}
    for rec in recs:
        for run in rec.node_runs:
            if run.type == "tool-agent" and run.ledger is not None:
                agents.setdefault(run.node_id, []).append(run.ledger)
    for node_id, ledgers in agents.items():
        out.extend(compaction_findings(label(node_id), ledgers, node_id, name=name))

    # One node's answers in another node's memory.
    producers: dict[int, set[str]] = {}
    templates = _answer_producers(flow)
    for rec in recs:
        ran = {run.node_id for run in rec.node_runs if run.type in _MODEL_NODES and run.status == "succeeded"}
        wrote: set[str] = set()
        for run in rec.node_runs:
            if run.type == "answer" and (run.outputs or {}).get("answer"):
                wrote |= templates.get(run.node_id, set()) & ran
        producers[position[rec.id]] = wrote
    reported: set[tuple[str, tuple[str, ...]]] = set()
    for node_id, runs in by_node.items():
        for p, rec, run in runs:
            for e in run.ledger.entries:
                if not e.kept or e.kind != ANSWER:
                    continue
                others = tuple(sorted(producers.get(e.position, set()) - {node_id}))
                if not others or (node_id, others) in reported:
                    continue
                reported.add((node_id, others))
                writers = " and ".join(quoted(label(a)) for a in others)
                text = (f"{quoted(label(node_id))}'s memory contains replies written by {writers}: at {name(numbers[p])} it "
                        f"replays {name(numbers[e.position])}'s answer, which {writers} wrote, as its own past reply")
                out.append(Finding(FOREIGN_ANSWERS, text + ".", label(node_id), numbers[p], node_id, WARNING,
                                   "Dify stores one answer per turn — the Answer node's output — and every LLM node "
                                   "with memory replays it (Dify#4548). Give each node its own history through a "
                                   "conversation variable, or switch memory off for this node.",
                                   {"writers": list(others), "source_turn": numbers[e.position]}))

    # Variables: a node that does not have the turn where a variable it does not read was set.
    reported_vars: set[tuple[str, str, int]] = set()
    latest_set: dict[str, int] = {}  # variable -> position of the turn that last wrote it (by a node)
    for rec in recs:
        p = position[rec.id]
        for node_id, runs in by_node.items():
            if node_id not in memory_on:
                continue
            run = next((r for q, _, r in runs if q == p), None)
            if run is None or not remembers(run.memory):
                continue
            reads = _reads(flow, flow.node(node_id)) if flow.has_node(node_id) else set()
            kept_turns = {e.position for e in run.ledger.entries if e.kept}
            for var, q in latest_set.items():
                if f"conversation.{var}" in reads or q in kept_turns:
                    continue
                key = (node_id, var, q)
                if key in reported_vars:
                    continue
                reported_vars.add(key)
                entry = next((e for e in run.ledger.entries if e.position == q), None)
                why = explain(entry, run.ledger.config, label(node_id)) if entry else "not in its memory"
                had = any(any(e.position == q and e.kept for e in r.ledger.entries) for x, _, r in runs if x < p)
                verb = "no longer has" if had else "never saw"
                text = (f"{quoted(label(node_id))} {verb} {name(numbers[q])}, where `{var}` was set: at {name(numbers[p])} "
                        f"that turn is out of its memory ({why}), and its prompt does not read the variable")
                out.append(Finding(FACT_NOT_SEEN, text + ".", label(node_id), numbers[p], node_id, INFO,
                                   "If the node needs the value, render the variable in its prompt; memory alone "
                                   "will not carry it.", {"variable": var, "set_turn": numbers[q]}))
        for change in rec.variable_changes:
            if change.node_id != "user":
                latest_set[change.name] = p

    # Facts the user stated, asked for later, not in a node's memory.
    reported_facts: set[tuple[str, str]] = set()
    facts = [f for f in detect_facts(conversation) if f.messages and f.key]
    for rec in recs:
        p = position[rec.id]
        asked = asked_keys(rec.query or "")
        thread = set(conversation.tree.thread(p))  # what another branch said was never told to this one
        for fact in facts:
            earlier = [m for m in fact.messages if m[0] < p and m[0] in thread]
            if fact.key not in asked or not earlier:
                continue
            for node_id, runs in by_node.items():
                run = next((r for x, _, r in runs if x == p), None)
                if run is None or not remembers(run.memory) or (node_id, fact.label) in reported_facts:
                    continue
                where = set(earlier)
                if any(e.kept and (e.position, e.index) in where for e in run.ledger.entries) or \
                        _value_kept(run.ledger, conversation, fact.value):
                    continue
                reported_facts.add((node_id, fact.label))
                entry = _newest_statement(run.ledger, earlier)
                q = earlier[-1][0]
                why = explain(entry, run.ledger.config, label(node_id)) if entry else "not in its memory"
                had = any(any(e.kept and (e.position, e.index) in where for e in r.ledger.entries)
                          for x, _, r in runs if q < x < p and x in thread)
                verb = "no longer has" if had else "never saw"
                text = (f"At {name(numbers[p])} the question is about {fact.label}, but {quoted(label(node_id))} {verb} "
                        f"{name(numbers[q])}, where it was stated ({why})")
                out.append(Finding(FACT_NOT_SEEN, text + ".", label(node_id), numbers[p], node_id, WARNING,
                                   "The model is asked for something its memory does not hold; it will guess or say "
                                   "it does not know.", {"fact": fact.label, "stated_turn": numbers[q]}))
    return _order(out)


__all__ = ["Finding", "KINDS", "KIND_TITLES", "FACT_NOT_SEEN", "FOREIGN_ANSWERS", "NO_CONVERSATION", "WINDOW_ZERO",
           "SILENT_PRUNING", "DOMINANT_MESSAGE", "TRIMMED_WINDOW", "HISTORY_TWICE", "COMPACTION_IN_TOOL_LOOP",
           "SUMMARY_PILE_UP", "FIRST_MESSAGE_RESUMMARISED", "compaction_findings", "WARNING", "INFO",
           "DOMINANT_SHARE", "DOMINANT_MIN_TOKENS", "DOCS_VS_CODE", "Difference", "ProfileCut", "docs_vs_code",
           "ledger_difference", "both_decisions", "turn_namer", "TurnNamer", "MemoryTurn", "memory_turn", "memory_turns", "config_findings",
           "flow_findings", "run_findings", "findings_for", "history_variables", "larger_window_what_if", "findings_at"]
