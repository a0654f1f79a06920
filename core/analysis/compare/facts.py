"""Facts under memory configs: for each fact (marked by the user, or detected with
:func:`core.model.facts.extract_facts` in user messages), the turns where a statement of it is in
memory, the first turn at which none is, and a sentence such as "the user's name is lost at turn 7
with dify window 3; never with dify window 10".
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from core.memory.replay import Replay
from core.model.conversation import Conversation
from core.model.facts import extract_facts
from core.model.ledger import REASON_LABELS, SUMMARIZED, WORDS_SENT
from core.words import plural

from ..errors import CompareError
from ..timeline import Timeline
from .walk import walk_rows


@dataclass(frozen=True)
class TrackedFact:
    """A fact to follow through memory: the messages that state it, as ``(position, index)``,
    oldest first (a restatement is a later message stating the same fact)."""

    label: str
    messages: tuple[tuple[int, int], ...]
    key: str = ""
    value: str = ""

    def to_json(self) -> dict:
        return {"label": self.label, "messages": [list(m) for m in self.messages], "key": self.key, "value": self.value}


# In the third person, as MemLens speaks of the conversation: "the question is about the user's
# name", "the user's name is lost at turn 7 with window 3" (not "your name", which read as the
# reader's own).
_KEY_LABELS = {
    "name": "the user's name",
    "diet": "the user's diet",
    "allergy": "the user's allergy",
    "home": "where the user lives",
    "job": "the user's job",
    "like": "what the user likes",
    "dislike": "what the user dislikes",
    "remember": "what the user asked to remember",
}


_ID_KEYS = (
    "order",
    "booking",
    "reservation",
    "ticket",
    "account",
    "customer",
    "invoice",
    "case",
    "tracking",
    "confirmation",
)


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
    label: str  # the config's label
    stated_turn: int
    present: Timeline | list[bool | None]
    lost_turn: int | None  # first turn with no statement in memory; None: never
    lost_reason: str | None  # the newest statement's reason at that turn
    stated_label: str = ""  # those two turns as a person counts them (core.model.conversation.turn_label)
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
        back = f"back at {self.back_label}" + (
            f" and {plural(self.returns - 1, 'more time')}" if self.returns > 1 else ""
        )
        if self.gone_label is None:
            return f"{back}, still there at the newest turn"
        return f"{back}, gone again from {self.gone_label}"

    def after_loss(self) -> str:
        """The comeback for a table cell, reason included: "; back at turn 6, gone again from turn 9
        (outside window)"; empty when it never came back."""
        course = self.comeback_words()
        if not course:
            return ""
        return f"; {course}" + (
            f" ({REASON_LABELS.get(self.gone_reason or '', self.gone_reason)})"
            if self.gone_label and self.gone_reason
            else ""
        )

    def cell_text(self) -> str:
        """The fact under this config in a few words: "kept", or where and why it was lost, and
        where it came back when it was restated."""
        if self.lost_turn is None:
            return "kept"
        why = REASON_LABELS.get(self.lost_reason or "", self.lost_reason)
        return f"lost at {self.lost_label}" + (f" ({why})" if why else "") + self.after_loss()

    def to_json(self) -> dict:
        return {
            "fact": self.fact.label,
            "config": self.label,
            "stated_turn": self.stated_turn,
            "lost_turn": self.lost_turn,
            "lost_reason": self.lost_reason,
            "present": (
                self.present if isinstance(self.present, Timeline) else Timeline.from_values(self.present)
            ).to_json(),
            "stated_label": self.stated_label,
            "lost_label": self.lost_label,
            "returns": self.returns,
            "back_label": self.back_label,
            "gone_label": self.gone_label,
            "gone_reason": self.gone_reason,
            "has_it_now": self.has_it_now,
        }


def fact_course(present: Sequence[bool | None]) -> tuple[int | None, int | None, int | None, int]:
    """Where a fact's timeline (one entry per answered turn; ``None`` off its branches) first
    loses it, first gets it back, last loses it again (``None`` when its last entry has it), and
    how many times it came back: indices into ``present``. Compare's facts and "where did it go?"
    (:mod:`core.analysis.why`) both read a course from here."""
    lost = back = gone = None
    returns = 0
    had = True
    # A Timeline is read at its changes: between them nothing can change the course.
    for k, value in present.changes if isinstance(present, Timeline) else enumerate(present):
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


def _fact_row(
    reasons: Any, p: int, query_index: int | None, fact: TrackedFact, stated_turns: Sequence[int]
) -> tuple[bool | None, str | None]:
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
        out[p] = (
            _fact_row(reasons, p, turns[p].query_index, fact, stated)
            if first is not None and first <= p
            else (None, None)
        )
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


class EveryTurnFacts:
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


class ChainFacts:
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
        self.on_thread = 0  # turns before this one whose statements are indexed
        self.lo, self.exact = 0, True
        self.own: list[int] = []  # the facts the previous row's query states
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
