"""Comparing memory configs on one conversation: the data behind the compare page.

Given a conversation and 2–6 labelled memory configs, this module computes, per config:

* the **retention matrix** for the heatmap — rows are answered turns, columns every message of
  the conversation in order, a cell is the ledger's reason for that message at that turn
  (``kept`` or the drop reason), ``None`` where the message is not earlier than the row's turn;
* the **per-turn series** — kept messages, history tokens against the budget, the oldest turn
  still remembered — straight from :meth:`Replay.summaries`;
* **facts** — for each fact (marked by the user, or detected with :func:`core.model.facts.extract_facts`
  in user messages), the first turn at which no statement of it is in memory, and a sentence
  such as "the user's name is lost at turn 7 with dify window 3; never with dify window 10";
* the **turn diff** of one config — what entered and left the context from the previous turn
  of the thread to this one, with the token delta.

Cost. Series come from the summaries (one walk of the turn tree per config). The matrix cells
and the fact timelines are read during one more walk per config: at each turn the engine's
thread view and decision say where every message of the thread stands, so a cell costs O(1)
instead of a full ledger per row (a ledger at turn 2,000 lists ~5,000 messages). Cells are
computed exactly as :meth:`Replay.ledger_at` computes reasons; the tests check every cell
against the ledgers.

Heatmap window. A 2,000-turn conversation has ~2,000 rows × ~5,000 columns — ten million
cells per config, which no heatmap can show or hover. The matrix is therefore computed for a
window: at most :data:`HEATMAP_ROWS` consecutive answered turns (by default the last ones) and
the latest :data:`HEATMAP_COLUMNS` messages before the window's last row. Within the window every
cell is exact; for each row the matrix also says how many kept messages lie before the first
column (``hidden_kept``), so nothing kept is silently off-screen. A short conversation fits in
one window and is shown whole. The page moves the window; it never down-samples cells.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from core.limits import check_fact_work, check_turns
from core.llm.client import DemoClient, LLMClient, LLMReply
from core.memory.errors import ConfigError
from core.memory.replay import Decision, MemoryConfig, PathView, Replay, turn_number, turn_numbers
from core.model.conversation import Conversation, Message, message_text, turn_label
from core.model.facts import extract_facts
from core.model.ledger import (EMPTY, GRANULARITY, KEPT, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET, REASON_LABELS,
                               SUMMARIZED, TRIMMED_EARLIER, WORDS_SENT, Ledger, LedgerEntry)
from core.memory.words import explain
from core.words import distinct, plural

from .errors import CompareError
from .timeline import Timeline

MIN_CONFIGS = 2
MAX_CONFIGS = 6
#: Heatmap window: rows (answered turns) and columns (earlier messages) computed at a time.
HEATMAP_ROWS = 60
HEATMAP_COLUMNS = 240
_TEXT_WIDTH = 48


# -- configs ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NamedConfig:
    """A memory config with the label the comparison shows for it."""

    label: str
    config: MemoryConfig

    def to_dict(self) -> dict:
        return {"label": self.label, **self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "NamedConfig":
        if not isinstance(data, dict):
            raise ConfigError("a saved memory config must be an object of settings")
        values = dict(data)
        label = values.pop("label", None)
        config = MemoryConfig.from_dict(values)
        return cls(str(label) if label else config.label(), config)


def named_configs(configs: Iterable[MemoryConfig | NamedConfig | dict]) -> list[NamedConfig]:
    """Labelled configs, each validated; repeated labels get " (2)", " (3)"… so every column of
    the comparison has a distinct name (:func:`core.words.distinct`)."""
    out: list[NamedConfig] = []
    for c in configs:
        if isinstance(c, dict):
            c = NamedConfig.from_dict(c)
        elif isinstance(c, MemoryConfig):
            c = NamedConfig(c.label(), c)
        elif not isinstance(c, NamedConfig):
            raise CompareError(f"expected a memory config, not {type(c).__name__}")
        c.config.validate()
        out.append(c)
    labels = distinct(dict(enumerate(c.label for c in out)))
    return [c if c.label == labels[i] else NamedConfig(labels[i], c.config) for i, c in enumerate(out)]


# -- columns and the heatmap window ---------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """One message of the conversation: a heatmap column."""

    column: int     # index among all messages of the conversation, in order
    position: int   # its turn's position
    index: int      # its index within the turn
    turn: int       # its turn's number
    role: str
    kind: str
    ref: int | str
    text: str       # the first words, for labels and hovers
    label: str = ""  # its turn as a person counts it (core.model.conversation.turn_label): "turn 6 · 2/3"

    def to_json(self) -> dict:
        return {"column": self.column, "turn": self.turn, "role": self.role, "kind": self.kind, "ref": self.ref,
                "text": self.text, "turn_label": self.label}


def _short(text: str, width: int = _TEXT_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _message_text(m: Message) -> str:
    return _short(message_text(m)) or "(empty)"


def message_columns(conversation: Conversation, first: int = 0, last: int | None = None) -> list[Column]:
    """The messages of the conversation in order, each a heatmap column: every one, or those from
    column ``first`` up to (not including) ``last`` — a window's, made without the others."""
    turns = conversation.turns
    before = _messages_before(conversation)
    last = before[-1] if last is None else min(last, before[-1])
    out: list[Column] = []
    p = max(bisect_right(before, first) - 1, 0)
    while p < len(turns) and before[p] < last:
        label, number = turn_label(conversation, p), turn_number(conversation, p)
        for j, m in enumerate(turns[p].messages):
            column = before[p] + j
            if first <= column < last:
                out.append(Column(column, p, j, number, m.role, m.kind, m.ref, _message_text(m), label))
        p += 1
    return out


@dataclass(frozen=True)
class HeatmapWindow:
    """Which rows and columns a retention matrix covers.

    ``rows`` are positions of consecutive answered turns; columns ``first_column`` up to (not
    including) ``last_column`` are shown, ``last_column`` being the number of messages before
    the last row's turn.
    """

    rows: tuple[int, ...]
    first_column: int
    last_column: int
    total_rows: int
    total_columns: int

    @property
    def whole(self) -> bool:
        """True when the window shows the whole conversation."""
        return len(self.rows) == self.total_rows and self.first_column == 0

    def to_json(self) -> dict:
        return {"rows": list(self.rows), "first_column": self.first_column, "last_column": self.last_column,
                "total_rows": self.total_rows, "total_columns": self.total_columns, "whole": self.whole}


def _messages_before(conversation: Conversation) -> list[int]:
    acc, out = 0, []
    for t in conversation.turns:
        out.append(acc)
        acc += len(t.messages)
    out.append(acc)
    return out


def heatmap_window(conversation: Conversation, *, last_turn: int | None = None, max_rows: int = HEATMAP_ROWS,
                   max_columns: int = HEATMAP_COLUMNS) -> HeatmapWindow:
    """The window ending at ``last_turn`` (a turn number; default the last answered turn): up to
    ``max_rows`` answered turns and the latest ``max_columns`` messages before its last row."""
    if max_rows < 1 or max_columns < 1:
        raise CompareError("a heatmap window needs at least one row and one column")
    answered = conversation.answered_turns()
    before = _messages_before(conversation)
    if not answered:
        return HeatmapWindow((), 0, 0, 0, before[-1])
    numbers = turn_numbers(conversation)
    if last_turn is None:
        end = len(answered)
    else:
        try:
            end = [numbers[p] for p in answered].index(last_turn) + 1
        except ValueError:
            raise CompareError(f"turn {last_turn} is not an answered turn of this conversation; it has turns "
                               f"{numbers[answered[0]]}..{numbers[answered[-1]]}") from None
    rows = tuple(answered[max(0, end - max_rows):end])
    last_column = before[rows[-1]]
    return HeatmapWindow(rows, max(0, last_column - max_columns), last_column, len(answered), before[-1])


# -- reading reasons during one walk ------------------------------------------------------------------

# Reasons given by position alone (the thread's first i messages): every older message shares them.
_CUT_OFFS = frozenset((TRIMMED_EARLIER, OUTSIDE_WINDOW, OVER_BUDGET))


class _RowReasons:
    """Where each earlier message stands at one turn, read from the engine's thread view and
    decision — the same rules, in the same order, as :meth:`Replay.ledger_at`."""

    __slots__ = ("replay", "view", "decision", "plan", "drops_empty", "depth", "turns", "eligible_at",
                 "drops_older")

    def __init__(self, replay: Replay, view: PathView, decision: Decision, eligible_at: list[dict[int, int] | None]):
        self.replay = replay
        self.view = view
        self.decision = decision
        self.plan = getattr(decision, "plan", None)
        self.drops_empty = replay.drops_empty
        self.depth = replay.conversation.tree.depth
        self.turns = replay.conversation.turns
        self.eligible_at = eligible_at
        # The reasons that leave out every older message of the thread too: the memory's own block,
        # and a cut-off by position when nothing prunes by a per-message plan.
        blocked = decision.blocked
        self.drops_older = frozenset((blocked,)) if blocked else _CUT_OFFS if self.plan is None else frozenset()

    def reason(self, q: int, j: int) -> str:
        return self.decision.blocked or self.thread_reason(q, j) or OTHER_BRANCH

    def sent_from(self) -> tuple[int, bool]:
        """``(lo, exact)``: no message of the thread below sequence index ``lo`` is sent; ``exact``: each
        one from ``lo`` on is sent or not by itself alone (its eligibility and emptiness), so only a
        message ``lo`` moves past changes. A cut is exact; a plan is bounded by its oldest kept turn."""
        d, end = self.decision, self.view.length
        if d.blocked:
            return end, True
        if self.plan is None:
            return max(d.trimmed_before, d.window_start, d.budget_cut), True
        oldest = self.plan.oldest_kept_turn
        if oldest is None:
            return end, False
        q = oldest - self.replay.numbers[0]
        k = self.depth[q] - 1 if 0 <= q < len(self.depth) else -1
        positions = self.view.positions
        return (self.view.starts[k] if 0 <= k < len(positions) and positions[k] == q else 0), False

    def thread_reason(self, q: int, j: int) -> str | None:
        """:meth:`reason` of a message on the turn's thread; ``None`` for one that is not."""
        k = self.depth[q] - 1  # a turn at depth k + 1 is on the thread when the view holds it there
        positions = self.view.positions
        if k >= len(positions) or positions[k] != q:
            return None
        return self.decision.blocked or self._placed(q, j)

    def _placed(self, q: int, j: int) -> str:
        """Where a message of the thread stands, the memory not blocked."""
        table = self.eligible_at[q]  # message index -> offset among the turn's eligible messages
        if table is None:
            table = self.eligible_at[q] = {m: k for k, m in enumerate(self.replay.eligible(q))}
        offset = table.get(j)
        if offset is None:
            return GRANULARITY
        return self._at(self.view.starts[self.depth[q] - 1] + offset, self.turns[q].messages[j])

    def _at(self, i: int, msg: Message) -> str:
        """The reason of ``msg``, at sequence index ``i`` of the thread."""
        if self.plan is not None:
            r = self.plan.reason(i, msg)
            return EMPTY if r == KEPT and msg.is_empty and self.drops_empty else r
        d = self.decision
        if i < d.trimmed_before:
            return TRIMMED_EARLIER
        if i < d.window_start:
            return OUTSIDE_WINDOW
        if i < d.budget_cut:
            return OVER_BUDGET
        if msg.is_empty and self.drops_empty:
            return EMPTY
        return KEPT

    @property
    def budget(self) -> int | None:
        return self.decision.budget.limit

    def sent_texts(self) -> Iterator[str]:
        """The texts this turn's memory sends: each earlier message kept as it is, then what is sent in
        place of others (a summary, a scratchpad); what the ledger's kept entries and synthetic
        messages hold, without listing every earlier message."""
        if self.decision.blocked:
            return
        view, turns = self.view, self.turns
        for i in range(self.sent_from()[0], view.length):
            msg = turns[view.seq_pos[i]].messages[view.seq_msg[i]]
            if self._at(i, msg) == KEPT:
                yield msg.content
        if self.plan is not None:
            for s in self.plan.synthetic(view, self.replay):
                yield s.content


class _LedgerReasons:
    """The same questions answered from a built ledger (when the engine offers no walk)."""

    drops_older = frozenset()  # a built ledger makes no promise about order

    def __init__(self, replay: Replay, position: int):
        self.ledger = replay.ledger_at(position)
        self.turns = replay.conversation.turns
        self.by_key = {(e.position, e.index): e.reason for e in self.ledger.entries}
        tree = replay.conversation.tree
        self.thread = set(tree.thread(position)[:-1])

    def reason(self, q: int, j: int) -> str:
        return self.by_key[(q, j)]

    def thread_reason(self, q: int, j: int) -> str | None:
        return self.by_key[(q, j)] if q in self.thread else None

    def sent_from(self) -> tuple[int, bool]:
        return 0, False

    @property
    def budget(self) -> int | None:
        return self.ledger.budget

    def sent_texts(self) -> Iterator[str]:
        turns = self.turns
        for e in self.ledger.kept:
            yield turns[e.position].messages[e.index].content
        for s in self.ledger.synthetic:
            yield s.content


def _engine_walk(replay: Replay) -> Any:
    """The engine's depth-first walk over (position, thread view, decision), if it offers one.

    It is what makes a cell O(1); without it every row falls back to a full ledger, which is
    exact but costs O(turns) per row.
    """
    return getattr(replay, "_walk", None)


def walk_rows(replay: Replay) -> Iterator[tuple[int, Any]]:
    """(position, reasons) for every answered turn, in depth-first order of the turn tree (turn order for
    a conversation that never branched). The reasons object answers what that turn's ledger would say
    without listing every earlier message: ``reason(position, index)`` of any earlier message,
    ``thread_reason`` (``None`` off the turn's thread), ``sent_texts()`` and ``budget``.

    The reasons object is valid only until the next item: it reads the walk's live view.
    """
    turns = replay.conversation.turns
    walk = _engine_walk(replay)
    if walk is None:
        for p in replay.conversation.answered_turns():
            yield p, _LedgerReasons(replay, p)
        return
    eligible_at: list[dict[int, int] | None] = [None] * len(turns)
    for p, view, decision in walk():
        if turns[p].query_index is None:
            continue
        plan = getattr(decision, "plan", None)
        if plan is not None and not hasattr(plan, "reason"):
            yield p, _LedgerReasons(replay, p)
        else:
            yield p, _RowReasons(replay, view, decision, eligible_at)


# -- the retention matrix -------------------------------------------------------------------------

@dataclass
class RetentionMatrix:
    """One config's heatmap data over a window. ``cells[r][c]`` is the reason for column
    ``columns[c]`` at row ``rows[r]``; ``None`` where that message is not earlier than the turn."""

    label: str
    config: dict
    window: HeatmapWindow
    rows: list[int]                     # turn numbers
    row_positions: list[int]
    columns: list[Column]
    tokens: list[int]                   # per column, counted for this config's model
    cells: list[list[str | None]]
    hidden_kept: list[int]              # per row: kept messages before the first column
    budgets: list[int | None]           # per row: the history budget (for hover texts)

    def message(self, c: int) -> str:
        """Column ``c``'s message in a line: its turn, role, tokens and first words."""
        col = self.columns[c]
        return f"{col.label or f'turn {col.turn}'} · {col.role} · {self.tokens[c]:,} tokens · {col.text}"

    def why(self, r: int, c: int) -> str:
        """The reason of cell ``(r, c)`` in plain words (the ledger's :func:`core.model.ledger.explain`)."""
        reason = self.cells[r][c]
        if reason is None:
            return "not yet written at this turn"
        col = self.columns[c]
        entry = LedgerEntry(ref=col.ref, turn=col.turn, role=col.role, tokens=self.tokens[c], kept=reason == KEPT,
                            reason=reason, kind=col.kind, position=col.position, index=col.index)
        return explain(entry, {**self.config, "budget": self.budgets[r]})

    def hover(self, r: int, c: int) -> str:
        """What a hover shows: the message, its tokens and the reason in plain words."""
        return f"{self.message(c)} — {self.why(r, c)}"

    def to_json(self) -> dict:
        return {"label": self.label, "config": self.config, "window": self.window.to_json(), "rows": self.rows,
                "columns": [c.to_json() for c in self.columns], "tokens": self.tokens, "cells": self.cells,
                "hidden_kept": self.hidden_kept, "budgets": self.budgets}


def retention_matrix(replay: Replay, window: HeatmapWindow | None = None, *, label: str | None = None,
                     columns: Sequence[Column] | None = None) -> RetentionMatrix:
    """The heatmap data of one replay over a window (default: :func:`heatmap_window`); ``columns``: the
    window's (:func:`message_columns` of its first and last column), when already made."""
    return _Pass(replay, window or heatmap_window(replay.conversation), [], label=label, columns=columns).matrix


# -- facts ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrackedFact:
    """A fact to follow through memory: the messages that state it, as ``(position, index)``,
    oldest first (a restatement is a later message stating the same fact)."""

    label: str
    messages: tuple[tuple[int, int], ...]
    key: str = ""
    value: str = ""

    def to_json(self) -> dict:
        return {"label": self.label, "messages": [list(m) for m in self.messages], "key": self.key,
                "value": self.value}


# In the third person, as MemLens speaks of the conversation: "the question is about the user's
# name", "the user's name is lost at turn 7 with window 3" (not "your name", which read as the
# reader's own).
_KEY_LABELS = {"name": "the user's name", "diet": "the user's diet", "allergy": "the user's allergy",
               "home": "where the user lives", "job": "the user's job", "like": "what the user likes",
               "dislike": "what the user dislikes", "remember": "what the user asked to remember"}


_ID_KEYS = ("order", "booking", "reservation", "ticket", "account", "customer", "invoice", "case", "tracking",
            "confirmation")


def _fact_label(key: str, value: str) -> str:
    if key in _ID_KEYS:
        return f"the user's {key} number"
    if key in _KEY_LABELS:
        base = _KEY_LABELS[key]
        return f"{base} ({value})" if key in ("like", "dislike", "remember") else base
    return f"the user's {key}"


def detect_facts(conversation: Conversation) -> list[TrackedFact]:
    """Facts the user states, found by :func:`core.model.facts.extract_facts` in every user message;
    the same key and value stated again is a restatement of one fact."""
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    values: dict[tuple[str, str], str] = {}
    for p, t in enumerate(conversation.turns):
        for j, m in enumerate(t.messages):
            if m.role != "user" or not m.content:
                continue
            for f in extract_facts(m.content):
                k = (f.key, f.value.casefold())
                found.setdefault(k, []).append((p, j))
                values.setdefault(k, f.value)
    labels: dict[str, int] = {}
    for key, _ in found:
        labels[key] = labels.get(key, 0) + 1
    out = []
    for (key, folded), where in found.items():
        value = values[(key, folded)]
        label = _fact_label(key, value)
        if labels[key] > 1 and key not in ("like", "dislike", "remember"):
            label = f"{label} ({value})"
        out.append(TrackedFact(label, tuple(dict.fromkeys(where)), key, value))
    return out


def _address(conversation: Conversation, message: Any) -> tuple[int, int]:
    """A message given as ``(position, index)`` or by its ``ref``."""
    turns = conversation.turns
    if isinstance(message, tuple) and len(message) == 2 and all(isinstance(x, int) for x in message):
        p, j = message
        if 0 <= p < len(turns) and 0 <= j < len(turns[p].messages):
            return p, j
        raise CompareError(f"message {message} does not exist in this conversation")
    for p, t in enumerate(turns):
        for j, m in enumerate(t.messages):
            if m.ref == message:
                return p, j
    raise CompareError(f"no message with ref {message!r} in this conversation; mark a fact on one of its messages")


def track_facts(conversation: Conversation, marks: Iterable[Any]) -> list[TrackedFact]:
    """Facts the user marked: each a ``(message, label)`` pair, a :class:`TrackedFact`, or a
    ``{"ref", "label"}`` dict (as readers store in ``Conversation.meta["facts"]``). ``message`` is a
    ref or a ``(position, index)`` pair; marks with the same label are one fact stated several times."""
    grouped: dict[str, list[tuple[int, int]]] = {}
    ready: list[TrackedFact] = []
    for mark in marks:
        if isinstance(mark, TrackedFact):
            ready.append(mark)
            continue
        if isinstance(mark, dict):
            message, label = mark.get("ref"), mark.get("label")
        else:
            try:
                message, label = mark
            except (TypeError, ValueError):
                raise CompareError(f"a fact mark must be (message, label), not {mark!r}") from None
        if not label:
            raise CompareError(f"the fact on message {message!r} has no label; name what it states")
        grouped.setdefault(str(label), []).append(_address(conversation, message))
    for label, where in grouped.items():
        ready.append(TrackedFact(label, tuple(sorted(dict.fromkeys(where)))))
    return ready


@dataclass
class FactFate:
    """One fact under one config. ``present`` has one entry per answered turn (in turn order):
    ``True`` when a statement of the fact is in memory (or in the turn's own query), ``False``
    when none is, ``None`` before the fact is stated or on a branch that never stated it — held
    as a :class:`~core.analysis.timeline.Timeline` (its JSON: ``[[k, value], …]``, the value from
    answered turn ``k`` on)."""

    fact: TrackedFact
    label: str                       # the config's label
    stated_turn: int
    present: Timeline | list[bool | None]
    lost_turn: int | None            # first turn with no statement in memory; None: never
    lost_reason: str | None          # the newest statement's reason at that turn
    stated_label: str = ""           # those two turns as a person counts them (core.model.conversation.turn_label)
    lost_label: str | None = None
    # Restated after the loss, the fact came back: ``returns`` times, the first at ``back_label``;
    # ``gone_label`` / ``gone_reason`` say where it left for the last time when the newest turn it
    # is followed on is without it again (``None`` when that turn has it).
    returns: int = 0
    back_label: str | None = None
    gone_label: str | None = None
    gone_reason: str | None = None

    @property
    def has_it_now(self) -> bool:
        """Whether the newest turn the fact is followed on has it in memory."""
        return self.lost_turn is None or (self.returns > 0 and self.gone_label is None)

    @property
    def state(self) -> str:
        """At a glance: "kept" throughout, "back" in memory at the newest turn after a loss, or "lost"."""
        return "kept" if self.lost_turn is None else "back" if self.has_it_now else "lost"

    def comeback_words(self) -> str:
        """What happened after the first loss, in a clause: "back at turn 6, gone again from turn 9";
        empty when it never came back (the first loss alone would read as gone for good)."""
        if not self.returns:
            return ""
        back = f"back at {self.back_label}" + (f" and {plural(self.returns - 1, 'more time')}"
                                                if self.returns > 1 else "")
        if self.gone_label is None:
            return f"{back}, still there at the newest turn"
        return f"{back}, gone again from {self.gone_label}"

    def after_loss(self) -> str:
        """The comeback for a table cell, reason included: "; back at turn 6, gone again from turn 9
        (outside window)"; empty when it never came back."""
        course = self.comeback_words()
        if not course:
            return ""
        return f"; {course}" + (f" ({REASON_LABELS.get(self.gone_reason or '', self.gone_reason)})"
                                if self.gone_label and self.gone_reason else "")

    def cell_text(self) -> str:
        """The fact under this config in a few words: "kept", or where and why it was lost, and
        where it came back when it was restated."""
        if self.lost_turn is None:
            return "kept"
        why = REASON_LABELS.get(self.lost_reason or "", self.lost_reason)
        return f"lost at {self.lost_label}" + (f" ({why})" if why else "") + self.after_loss()

    def to_json(self) -> dict:
        return {"fact": self.fact.label, "config": self.label, "stated_turn": self.stated_turn,
                "lost_turn": self.lost_turn, "lost_reason": self.lost_reason,
                "present": (self.present if isinstance(self.present, Timeline)
                            else Timeline.from_values(self.present)).to_json(),
                "stated_label": self.stated_label, "lost_label": self.lost_label, "returns": self.returns,
                "back_label": self.back_label, "gone_label": self.gone_label, "gone_reason": self.gone_reason,
                "has_it_now": self.has_it_now}


def fact_course(present: Sequence[bool | None]) -> tuple[int | None, int | None, int | None, int]:
    """Where a fact's timeline (one entry per answered turn; ``None`` off its branches) first
    loses it, first gets it back, last loses it again (``None`` when its last entry has it), and
    how many times it came back: indices into ``present``. Compare's facts and "where did it go?"
    (:mod:`core.analysis.why`) both read a course from here."""
    lost = back = gone = None
    returns = 0
    had = True
    # A Timeline is read at its changes: between them nothing can change the course.
    for k, value in (present.changes if isinstance(present, Timeline) else enumerate(present)):
        if value is None or value == had:
            continue
        had = value
        if not value:
            if lost is None:
                lost = k
            gone = k
        else:
            returns += 1
            back = k if back is None else back
    if had:
        gone = None
    elif returns == 0:
        gone = None  # never back: the first loss says it all
    return lost, back, gone, returns


def _fact_row(reasons: Any, p: int, query_index: int | None, fact: TrackedFact,
              stated_turns: Sequence[int]) -> tuple[bool | None, str | None]:
    """Whether a statement of the fact is in memory at turn ``p``, and if none is, the reason of
    the newest statement on the thread (the one that left last). ``stated_turns``: the turn of each
    of the fact's statements (:func:`_stated_turns`)."""
    relevant = False
    newest_reason = None
    messages, thread_reason, drops_older = fact.messages, reasons.thread_reason, reasons.drops_older
    for k in range(bisect_right(stated_turns, p) - 1, -1, -1):  # newest first: the likeliest to be kept
        q, j = messages[k]  # (statements written after turn p are not there yet)
        if q == p:
            if j == query_index:
                return True, None  # stated (again) in the turn's own query: the model sees it
            continue  # written later in this turn: not there yet
        r = thread_reason(q, j)
        if r is None:
            continue  # another branch's
        if r in WORDS_SENT:  # as it is, or inside a scratchpad
            return True, None
        if not relevant:
            relevant, newest_reason = True, r
        if r in drops_older:  # every older statement is left out too
            break  # a fact restated on every few turns would otherwise cost the square of its statements
    return (False, newest_reason) if relevant else (None, None)


def _stated_turns(fact: TrackedFact) -> list[int]:
    """The turn position of each of the fact's statements, in their order (bisected by turn)."""
    return [q for q, _ in fact.messages]


def fact_presence(replay: Replay, fact: TrackedFact) -> dict[int, tuple[bool | None, str | None]]:
    """Per answered turn position: whether a statement of ``fact`` is in that turn's memory under
    ``replay`` (``None`` before it is stated or on a branch that never stated it), and when none is,
    the reason of the newest statement on the thread. One walk of the replay, the same reasons as
    its ledgers."""
    turns = replay.conversation.turns
    first = fact.messages[0][0] if fact.messages else None
    stated = _stated_turns(fact)
    out: dict[int, tuple[bool | None, str | None]] = {}
    for p, reasons in walk_rows(replay):
        out[p] = _fact_row(reasons, p, turns[p].query_index, fact, stated) if first is not None and first <= p \
            else (None, None)
    return out


def fact_sentence(fates: Sequence[FactFate]) -> str:
    """One fact across configs, in plain words: "the user's name is lost at turn 7 with window 3;
    never with window 10"."""
    if not fates:
        return ""
    name = fates[0].fact.label
    lost = sorted((f for f in fates if f.lost_turn is not None), key=lambda f: f.lost_turn)
    never = [f.label for f in fates if f.lost_turn is None]
    if not lost:
        return f"{name} stays in memory with {_join(never, 'and')}"
    groups: list[tuple[str, list[str]]] = []  # consecutive configs that lose it the same way
    for f in lost:
        verb = "folded into a summary" if f.lost_reason == SUMMARIZED else "lost"
        where = f"at {f.lost_label or f'turn {f.lost_turn}'} with {f.label}"
        course = f.comeback_words()
        if course:
            where += f" ({course})"
        if groups and groups[-1][0] == verb:
            groups[-1][1].append(where)
        else:
            groups.append((verb, [where]))
    text = f"{name} is " + "; ".join(f"{verb} {_join(wheres, 'and')}" for verb, wheres in groups)
    if never:
        text += f"; never with {_join(never, 'or')}"
    return text


def _join(items: list[str], word: str) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]


# -- series ---------------------------------------------------------------------------------------------

@dataclass
class Series:
    """Per answered turn, for one config: the line charts' data."""

    label: str
    turns: list[int]
    kept: list[int]
    history_tokens: list[int]
    budget: list[int | None]
    prompt_tokens: list[int]
    oldest_kept_turn: list[int | None]

    def to_json(self) -> dict:
        return {"label": self.label, "turns": self.turns, "kept": self.kept, "history_tokens": self.history_tokens,
                "budget": self.budget, "prompt_tokens": self.prompt_tokens,
                "oldest_kept_turn": self.oldest_kept_turn}


def turn_series(replay: Replay, label: str | None = None) -> Series:
    s = replay.summaries()
    return Series(label or replay.config.label(), *(s.column(name) for name in
                                                    ("turn", "kept", "history_tokens", "budget", "prompt_tokens",
                                                     "oldest_kept_turn")))


# -- one pass per config --------------------------------------------------------------------------------

class _Pass:
    """One walk of one replay that fills the matrix window and every fact's timeline."""

    def __init__(self, replay: Replay, window: HeatmapWindow, facts: Sequence[TrackedFact], *,
                 label: str | None = None, columns: Sequence[Column] | None = None,
                 labels: dict[int, str] | None = None):
        conv = replay.conversation
        self.replay = replay
        label = label or replay.config.label()
        visible = list(columns) if columns is not None else message_columns(conv, window.first_column,
                                                                            window.last_column)
        labels = {} if labels is None else labels  # turn labels by position, shared by every config's pass

        def turn_label_of(p: int) -> str:
            text = labels.get(p)
            if text is None:
                text = labels[p] = turn_label(conv, p)
            return text
        summaries = {s.turn: s for s in replay.summaries()}
        row_index = {p: r for r, p in enumerate(window.rows)}
        numbers = replay.numbers
        answered = conv.answered_turns()
        answered_index = {p: k for k, p in enumerate(answered)}
        cells: list[list[str | None]] = [[] for _ in window.rows]
        before = _messages_before(conv)
        follow = (_ChainFacts if conv.one_thread() else _EveryTurnFacts)(replay, facts, len(answered))
        for p, reasons in walk_rows(replay):
            r = row_index.get(p)
            if r is not None:
                limit = before[p]
                cells[r] = [reasons.reason(c.position, c.index) if c.column < limit else None for c in visible]
            follow.row(answered_index[p], p, reasons)
        tokens = [replay.message_tokens(c.position)[c.index] for c in visible]
        hidden = []
        budgets = []
        for r, p in enumerate(window.rows):
            s = summaries[numbers[p]]
            hidden.append(s.kept - sum(1 for x in cells[r] if x == KEPT))
            budgets.append(s.budget)
        self.matrix = RetentionMatrix(label, replay.config.to_dict(), window, [numbers[p] for p in window.rows],
                                      list(window.rows), visible, tokens, cells, hidden, budgets)
        self.fates: list[FactFate] = []
        for f, fact in enumerate(facts):
            present = follow.timeline(f)
            lost, back, gone, returns = fact_course(present)
            stated = numbers[fact.messages[0][0]] if fact.messages else 0
            stated_label = turn_label_of(fact.messages[0][0]) if fact.messages else ""
            fate = FactFate(fact, label, stated, present, None, None, stated_label, returns=returns)
            if lost is not None:
                fate.lost_turn, fate.lost_reason = numbers[answered[lost]], follow.reason(f, lost)
                fate.lost_label = turn_label_of(answered[lost])
            if back is not None:
                fate.back_label = turn_label_of(answered[back])
            if gone is not None:
                fate.gone_label, fate.gone_reason = turn_label_of(answered[gone]), follow.reason(f, gone)
            self.fates.append(fate)


class _EveryTurnFacts:
    """Every fact asked at every answered turn: a branched conversation's walk goes depth first, so the
    turn it reads next is not the next in turn order (its cost is bounded by ``limits.check_fact_work``)."""

    def __init__(self, replay: Replay, facts: Sequence[TrackedFact], answered: int):
        self.turns = replay.conversation.turns
        # Each fact with a statement, with the turn of each statement (the first is when it is stated).
        self.stated = [(f, fact, turns) for f, fact in enumerate(facts) for turns in [_stated_turns(fact)] if turns]
        self.present: list[list[bool | None]] = [[None] * answered for _ in facts]
        self.reasons: list[list[str | None]] = [[None] * answered for _ in facts]

    def row(self, k: int, p: int, reasons: Any) -> None:
        query_index = self.turns[p].query_index
        for f, fact, turns in self.stated:
            if turns[0] <= p:
                self.present[f][k], self.reasons[f][k] = _fact_row(reasons, p, query_index, fact, turns)

    def timeline(self, f: int) -> Timeline:
        return Timeline.from_values(self.present[f])

    def reason(self, f: int, k: int) -> str | None:
        return self.reasons[f][k]


class _ChainFacts:
    """The facts of a conversation that never branched, asked only where they may have changed: a
    fact's value moves only when one of its statements joins the thread, is the turn's own query, or
    is passed by where the memory starts sending (:meth:`_RowReasons.sent_from`). Each row costs
    what changed, so a conversation that states something in every turn is followed in time and
    memory that grow with its length, not its square."""

    def __init__(self, replay: Replay, facts: Sequence[TrackedFact], answered: int):
        self.replay, self.facts, self.answered = replay, facts, answered
        self.turns = replay.conversation.turns
        self.stated = [_stated_turns(fact) for fact in facts]
        self.by_turn: dict[int, list[tuple[int, int]]] = {}  # position -> (message index, fact), in order
        for f, fact in enumerate(facts):
            for q, j in fact.messages:
                self.by_turn.setdefault(q, []).append((j, f))
        for items in self.by_turn.values():
            items.sort()
        self.indices: list[int] = []  # the sequence index of each statement on the thread, ascending
        self.of_fact: list[int] = []  # and its fact
        self.on_thread = 0            # turns before this one whose statements are indexed
        self.lo, self.exact = 0, True
        self.own: list[int] = []      # the facts the previous row's query states
        self.value: list[bool | None] = [None] * len(facts)
        self.changes: list[list[tuple[int, bool | None]]] = [[] for _ in facts]
        self.why: list[dict[int, str | None]] = [{} for _ in facts]

    def row(self, k: int, p: int, reasons: Any) -> None:
        touched = set(self.own)
        view = getattr(reasons, "view", None)  # (a row read from a built ledger has none: it is asked whole)
        for q in range(self.on_thread, p):  # turns that joined the thread: their statements are there now
            start, eligible = view.starts[q] if view is not None else 0, self.replay.eligible(q)
            for j, f in self.by_turn.get(q, ()):
                touched.add(f)
                # Where the statement is in the thread's sequence (one left out by granularity: where it would be).
                self.indices.append(start + bisect_left(eligible, j))
                self.of_fact.append(f)
        self.on_thread = p
        query_index = self.turns[p].query_index
        self.own = [f for j, f in self.by_turn.get(p, ()) if j == query_index]
        touched.update(self.own)
        lo, exact = reasons.sent_from()
        indices = self.indices
        if view is None:  # no sequence to place statements in: every one is asked
            touched.update(self.of_fact)
        else:  # a cut moved from self.lo to lo: only the statements it passed change; else every one from there on
            hi = max(lo, self.lo) if exact and self.exact else (indices[-1] + 1 if indices else 0)
            for i in range(bisect_left(indices, min(lo, self.lo)), bisect_left(indices, hi)):
                touched.add(self.of_fact[i])
        self.lo, self.exact = lo, exact
        for f in touched:
            value, why = _fact_row(reasons, p, query_index, self.facts[f], self.stated[f])
            if value != self.value[f]:
                self.value[f] = value
                self.changes[f].append((k, value))
                if value is False:
                    self.why[f][k] = why

    def timeline(self, f: int) -> Timeline:
        return Timeline(self.changes[f], self.answered)

    def reason(self, f: int, k: int) -> str | None:
        return self.why[f].get(k)


# -- the turn diff --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DiffItem:
    ref: int | str
    turn: int
    role: str
    tokens: int
    reason: str    # the reason now (for what left) or "kept" (for what entered)
    text: str

    def to_json(self) -> dict:
        return {"ref": self.ref, "turn": self.turn, "role": self.role, "tokens": self.tokens, "reason": self.reason,
                "text": self.text}


@dataclass
class TurnDiff:
    """What one config's context gained and lost between the previous turn of the thread and
    this one. ``token_delta`` is the change of history tokens (summaries included)."""

    label: str
    turn: int
    previous_turn: int | None
    entered: list[DiffItem]
    left: list[DiffItem]
    stayed: int
    history_tokens: int
    previous_history_tokens: int
    token_delta: int

    def to_json(self) -> dict:
        return {"label": self.label, "turn": self.turn, "previous_turn": self.previous_turn,
                "entered": [x.to_json() for x in self.entered], "left": [x.to_json() for x in self.left],
                "stayed": self.stayed, "history_tokens": self.history_tokens,
                "previous_history_tokens": self.previous_history_tokens, "token_delta": self.token_delta}


def _sent(ledger: Ledger, replay: Replay) -> dict[tuple, DiffItem]:
    turns = replay.conversation.turns
    out: dict[tuple, DiffItem] = {}
    for e in ledger.entries:
        if e.kept:
            out[("message", e.position, e.index)] = DiffItem(e.ref, e.turn, e.role, e.tokens, KEPT,
                                                             _message_text(turns[e.position].messages[e.index]))
    for s in getattr(ledger, "synthetic", None) or []:
        key = ("synthetic", s.origin, s.replaces, s.ref, s.content)
        out[key] = DiffItem(s.ref or s.origin, s.turn, s.role, s.tokens, KEPT, _short(s.content))
    return out


def turn_diff(replay: Replay, turn_number: int, *, label: str | None = None) -> TurnDiff:
    """The context of ``turn_number`` against that of the previous answered turn on its thread
    (turn N−1 in a linear conversation; on a branch, the turn it continues)."""
    position = replay.position_of(turn_number)
    conv = replay.conversation
    if conv.turns[position].query_index is None:
        raise CompareError(f"turn {turn_number} has no query; pick an answered turn")
    thread = [p for p in conv.tree.thread(position)[:-1] if conv.turns[p].query_index is not None]
    now = replay.ledger_at(position)
    current = _sent(now, replay)
    if thread:
        before = replay.ledger_at(thread[-1])
        previous = _sent(before, replay)
        previous_turn, previous_tokens = replay.numbers[thread[-1]], before.history_tokens
    else:
        previous, previous_turn, previous_tokens = {}, None, 0
    reasons = {("message", e.position, e.index): e.reason for e in now.entries}
    entered = [item for key, item in current.items() if key not in previous]
    left = []
    for key, item in previous.items():
        if key not in current:
            reason = reasons.get(key, "replaced") if key[0] == "message" else "replaced"
            left.append(DiffItem(item.ref, item.turn, item.role, item.tokens, reason, item.text))
    stayed = sum(1 for key in current if key in previous)
    return TurnDiff(label or replay.config.label(), turn_number, previous_turn, entered, left, stayed,
                    now.history_tokens, previous_tokens, now.history_tokens - previous_tokens)


# -- replies -------------------------------------------------------------------------------------------

@dataclass
class ReplyGrid:
    """The conversation's queries re-asked under each config: ``replies[row][config]``. For a
    plain conversation the "flow" is one LLM node with that config's memory: its prompt is the
    system prompt, the ledger's history and the query."""

    labels: list[str]
    turns: list[int]
    queries: list[str]
    replies: list[list[str]]
    models: list[str]                       # per config: the model that answered
    skipped: int = 0                        # earlier answered turns left out (``max_turns``)

    def differing(self) -> list[int]:
        """Rows where the configs' replies are not all the same."""
        return [r for r, row in enumerate(self.replies) if len(set(row)) > 1]

    def to_json(self) -> dict:
        return {"labels": self.labels, "turns": self.turns, "queries": self.queries, "replies": self.replies,
                "models": self.models, "skipped": self.skipped}

    @classmethod
    def from_json(cls, data: dict) -> "ReplyGrid":
        return cls(list(data["labels"]), list(data["turns"]), list(data["queries"]),
                   [list(r) for r in data["replies"]], list(data.get("models") or []), int(data.get("skipped") or 0))


def reply_at(replay: Replay, position: int, client: LLMClient | None = None) -> LLMReply:
    """The reply to the query at ``position`` when the prompt is the system prompt, the history
    this replay's ledger keeps there, and the query (an :class:`core.llm.client.LLMReply`)."""
    conversation = replay.conversation
    history = replay.history_messages(replay.ledger_at(position))
    system = replay.system_prompt
    messages = ([{"role": "system", "content": system}] if system else []) + \
        [m.to_openai() for m in history] + [conversation.turns[position].query_message.to_openai()]
    return (client or DemoClient()).complete(replay.config.model, messages, replay.config.max_tokens or None)


def replay_replies(conversation: Conversation, configs: Iterable[MemoryConfig | NamedConfig | dict], *,
                   client: LLMClient | None = None, max_turns: int | None = 200, system_prompt: str | None = None) -> ReplyGrid:
    """Ask every answered turn's query again under each config (the last ``max_turns`` turns;
    ``None`` for all) and collect the replies. ``client`` is any :class:`core.llm.client.LLMClient`;
    the default is the offline demo model, so the grid needs no key and is the same every time.
    Each turn's prompt is built from its ledger, so this costs one ledger per turn and config."""
    client = client or DemoClient()
    named = named_configs(configs)
    answered = conversation.answered_turns()
    rows = answered if max_turns is None else answered[-max_turns:] if max_turns > 0 else []
    numbers = turn_numbers(conversation)
    replies: list[list[str]] = [[] for _ in rows]
    models = []
    for c in named:
        replay = Replay(conversation, c.config, system_prompt=system_prompt)
        answered_by = ""
        for r, p in enumerate(rows):
            reply = reply_at(replay, p, client)
            replies[r].append(reply.text)
            answered_by = reply.model
        models.append(answered_by or c.config.model)
    return ReplyGrid([c.label for c in named], [numbers[p] for p in rows],
                     [conversation.turns[p].query for p in rows], replies, models, len(answered) - len(rows))


# -- everything at once ---------------------------------------------------------------------------------

@dataclass
class Comparison:
    """Everything the compare page draws, for every config."""

    conversation_id: str
    configs: list[NamedConfig]
    columns: list[Column]                # the heatmap window's (all of a conversation shown whole)
    window: HeatmapWindow
    matrices: list[RetentionMatrix]
    series: list[Series]
    facts: list[TrackedFact]
    fates: list[list[FactFate]]          # fates[fact][config]
    sentences: list[str]                 # one per fact
    turns: list[int] = field(default_factory=list)   # answered turn numbers (the series' x axis)
    #: The replays it was computed with (one per config) and the system prompt they count, so
    #: findings on the same comparison reuse their token counts and summaries; never serialised.
    replays: list[Replay] = field(default_factory=list, repr=False, compare=False)
    system_prompt: str | None = field(default=None, repr=False, compare=False)

    def replays_for(self, conversation: Conversation, system_prompt: str | None = None) -> list[Replay]:
        """One replay per config over ``conversation``: the comparison's own (their counts and
        summaries already made) when it replayed that conversation with that system prompt, else new ones."""
        own = self.replays
        if len(own) == len(self.configs) and self.system_prompt == system_prompt and all(
                r.conversation is conversation and r.config == c.config for r, c in zip(own, self.configs)):
            return list(own)
        return [Replay(conversation, c.config, system_prompt=system_prompt) for c in self.configs]

    def to_json(self) -> dict:
        return {"conversation": self.conversation_id, "configs": [c.to_dict() for c in self.configs],
                "turns": self.turns, "window": self.window.to_json(),
                "matrices": [m.to_json() for m in self.matrices], "series": [s.to_json() for s in self.series],
                "facts": [f.to_json() for f in self.facts],
                "fates": [[x.to_json() for x in row] for row in self.fates], "sentences": self.sentences}


def compare(conversation: Conversation, configs: Iterable[MemoryConfig | NamedConfig | dict], *,
            facts: Iterable[Any] | None = None, window: HeatmapWindow | None = None,
            system_prompt: str | None = None) -> Comparison:
    """Replay 2–6 configs over one conversation and compute the heatmaps, series and facts.

    ``facts``: ``None`` uses the facts the file came with (``conversation.meta["facts"]``) or,
    failing that, the facts detected in user messages; otherwise marks as for
    :func:`track_facts` (an empty list tracks none).
    """
    named = named_configs(configs)
    if not MIN_CONFIGS <= len(named) <= MAX_CONFIGS:
        raise CompareError(f"compare needs {MIN_CONFIGS} to {MAX_CONFIGS} memory configs; got {len(named)}")
    answered = conversation.answered_turns()
    if not answered:
        raise CompareError("the conversation has no user turn to compare")
    check_turns(len(conversation.turns), "the conversation")  # what the machine holds, refused before any work
    if facts is None:
        marks = conversation.meta.get("facts") if isinstance(conversation.meta, dict) else None
        tracked = track_facts(conversation, marks) if marks else detect_facts(conversation)
    else:
        tracked = track_facts(conversation, facts)
    if not conversation.one_thread():  # each fact is asked at every turn (_EveryTurnFacts)
        check_fact_work(sum(1 for f in tracked if f.messages), len(answered), len(named))
    window = window or heatmap_window(conversation)
    columns = message_columns(conversation, window.first_column, window.last_column)
    matrices, series, fates, replays = [], [], [], []
    labels: dict[int, str] = {}
    for c in named:
        replay = Replay(conversation, c.config, system_prompt=system_prompt)
        run = _Pass(replay, window, tracked, label=c.label, columns=columns, labels=labels)
        matrices.append(run.matrix)
        series.append(turn_series(replay, c.label))
        fates.append(run.fates)
        replays.append(replay)
    by_fact = [[fates[c][f] for c in range(len(named))] for f in range(len(tracked))]
    numbers = turn_numbers(conversation)
    return Comparison(conversation.id, named, columns, window, matrices, series, tracked, by_fact,
                      [fact_sentence(row) for row in by_fact], [numbers[p] for p in conversation.answered_turns()],
                      replays, system_prompt)


__all__ = ["NamedConfig", "named_configs", "Column", "message_columns", "HeatmapWindow", "heatmap_window",
           "RetentionMatrix", "retention_matrix", "TrackedFact", "detect_facts", "track_facts", "FactFate",
           "fact_presence", "fact_sentence", "Series", "turn_series", "DiffItem", "TurnDiff", "turn_diff", "Comparison",
           "ReplyGrid", "replay_replies", "reply_at", "compare", "REASON_LABELS", "HEATMAP_ROWS", "HEATMAP_COLUMNS",
           "MIN_CONFIGS", "MAX_CONFIGS", "walk_rows"]
