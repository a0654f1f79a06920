"""“Where did X go?” — a word or phrase followed through memory, without calling a model.

Given a phrase ("Dana", "4411"), find the turns of a thread whose messages state it, then for
each subject (an LLM node, or a memory config) the first answered turn whose context no longer
holds any statement of it, and why — in the words of the ledger (window, budget, branch, trimmed
earlier, summarised…). The presence of the phrase at each turn is the compare page's fact
timeline (:func:`core.analysis.compare.facts.fact_presence`) and the reason is the ledger's own entry for the
newest statement, so the answer can never disagree with the markers or the receipt.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

from core.memory.replay import Replay
from core.memory.words import reason_words
from core.model.conversation import Conversation, turn_label
from core.words import plural

from .compare.facts import TrackedFact, fact_course, fact_presence
from .errors import WhyError

MAX_PHRASE = 200
_EXCERPT = 80


@dataclass(frozen=True)
class Subject:
    """What memory is asked about: an LLM node's replay (with its node id) or a config's."""

    label: str
    replay: Replay
    node_id: str | None = None
    #: The positions of the turns where the node ran (``None``: every turn, as a memory config replays them):
    #: its memory is asked only there, and a node that never ran is said to have never run.
    ran: frozenset[int] | None = None


@dataclass(frozen=True)
class Mention:
    position: int
    index: int
    turn: str
    role: str
    excerpt: str

    def to_json(self) -> dict:
        return {
            "position": self.position,
            "index": self.index,
            "turn": self.turn,
            "role": self.role,
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True)
class Comeback:
    """After its first loss the phrase came back into a subject's context (it was said again):
    ``returns`` times, the first at ``back_turn``. ``gone_*`` is where it left for the last time
    when the newest turn is without it again; all ``None`` when the newest turn has it."""

    returns: int
    back_turn: str
    gone_position: int | None = None
    gone_turn: str | None = None
    reason: str | None = None
    why: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Loss:
    """One subject's answer: where the phrase left its context (``lost_*`` are ``None`` when it never did)
    and, when it was said again, whether it came back (:class:`Comeback`)."""

    subject: str
    node_id: str | None
    lost_position: int | None
    lost_turn: str | None
    reason: str | None
    why: str | None
    last_kept_turn: str | None  # the newest turn before the loss whose context still held it
    comeback: Comeback | None = None
    #: The newest turn where the node ran, when it did not run at the thread's newest; ``never_ran`` when it
    #: ran at no turn after the phrase was first said.
    last_ran_turn: str | None = None
    never_ran: bool = False

    @property
    def never_had_it(self) -> bool:
        return self.lost_position is not None and self.last_kept_turn is None

    @property
    def has_it_now(self) -> bool:
        """Whether the newest turn's context holds it."""
        return self.lost_position is None or (self.comeback is not None and self.comeback.gone_position is None)

    def sentence(self, newest_turn: str) -> str:
        if self.never_ran:
            return f"{self.subject}: never ran after it was said, so its memory never had to hold it."
        if self.lost_position is None:
            if self.last_ran_turn is not None:
                return f"{self.subject}: still had it at {self.last_ran_turn}, the newest turn it ran."
            return f"{self.subject}: still has it at {newest_turn}, the newest turn."
        if self.never_had_it:
            out = f"{self.subject}: never had it — from {self.lost_turn} on it was not sent ({self.why})"
        else:
            out = f"{self.subject}: had it through {self.last_kept_turn}; gone from {self.lost_turn} — {self.why}"
        back = self.comeback
        if back is None:
            return out + "."
        # Said again, it came back: the first loss alone would read as gone for good.
        said = "said again" + (f"; back {plural(back.returns, 'time')} in all" if back.returns > 1 else "")
        if back.gone_position is None:
            if back.back_turn == newest_turn:
                return out + f". It is back at {newest_turn}, the newest turn ({said})."
            return out + (
                f". It came back at {back.back_turn} ({said}) and is still there at {newest_turn}, the newest turn."
            )
        return out + (
            f". It came back at {back.back_turn} ({said}) and is gone again from {back.gone_turn} — {back.why}."
        )

    def to_json(self) -> dict:
        return {
            "subject": self.subject,
            "node_id": self.node_id,
            "lost_position": self.lost_position,
            "lost_turn": self.lost_turn,
            "reason": self.reason,
            "why": self.why,
            "last_kept_turn": self.last_kept_turn,
            "has_it_now": self.has_it_now,
            "comeback": self.comeback.to_json() if self.comeback else None,
            "never_ran": self.never_ran,
        }


@dataclass
class WhyAnswer:
    phrase: str
    thread: list[int]
    mentions: list[Mention]
    losses: list[Loss] = field(default_factory=list)
    elsewhere: list[Mention] = field(default_factory=list)  # stated only on other branches
    newest_turn: str = ""

    def sentences(self) -> list[str]:
        quoted = f"“{self.phrase}”"
        if not self.mentions:
            if self.elsewhere:
                where = ", ".join(m.turn for m in self.elsewhere[:3])
                return [f"{quoted} is not on this thread; it was said only on another branch ({where})."]
            return [f"{quoted} is not in any message of this conversation."]
        first = self.mentions[0]
        turns = list(dict.fromkeys(m.turn for m in self.mentions))
        lines = [
            f"{quoted} was first said at {first.turn} ({first.role}: “{first.excerpt}”)"
            + (
                f"; it is in {len(self.mentions)} messages ({', '.join(turns[:6])}{', …' if len(turns) > 6 else ''})."
                if len(self.mentions) > 1
                else "."
            )
        ]
        lines += [loss.sentence(self.newest_turn) for loss in self.losses]
        return lines

    def to_json(self) -> dict:
        return {
            "phrase": self.phrase,
            "mentions": [m.to_json() for m in self.mentions],
            "elsewhere": [m.to_json() for m in self.elsewhere],
            "losses": [x.to_json() for x in self.losses],
            "sentences": self.sentences(),
        }


def _excerpt(text: str, phrase: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _EXCERPT:
        return text
    at = text.casefold().find(phrase.casefold())
    start = max(0, min(at - _EXCERPT // 3, len(text) - _EXCERPT)) if at >= 0 else 0
    cut = text[start : start + _EXCERPT]
    return ("…" if start else "") + cut + ("…" if start + _EXCERPT < len(text) else "")


def _mentions(conversation: Conversation, phrase: str, positions: Sequence[int]) -> list[Mention]:
    needle = phrase.casefold()
    out = []
    for p in positions:
        for j, m in enumerate(conversation.turns[p].messages):
            if m.content and needle in m.content.casefold():
                out.append(Mention(p, j, turn_label(conversation, p), m.role, _excerpt(m.content, phrase)))
    return out


def where_did_it_go(
    conversation: Conversation, phrase: str, subjects: Sequence[Subject], *, thread: Sequence[int] | None = None
) -> WhyAnswer:
    """Follow ``phrase`` (case-insensitive, anywhere in a message) along ``thread`` (positions,
    oldest first; default: the thread of the newest turn) through each subject's memory."""
    phrase = (phrase or "").strip()
    if not phrase:
        raise WhyError("nothing to look for: give a word or phrase, e.g. a name or an order number")
    if len(phrase) > MAX_PHRASE:
        raise WhyError(f"the phrase is {len(phrase)} characters long; look for at most {MAX_PHRASE}")
    turns = conversation.turns
    if not turns:
        raise WhyError("the conversation has no turns")
    if thread is None:
        thread = conversation.tree.thread(len(turns) - 1)
    thread = list(thread)
    if any(not 0 <= p < len(turns) for p in thread):
        raise WhyError("the thread names a turn that is not in this conversation")
    mentions = _mentions(conversation, phrase, thread)
    answer = WhyAnswer(phrase, thread, mentions, newest_turn=turn_label(conversation, thread[-1]) if thread else "")
    if not mentions:
        on_thread = set(thread)
        answer.elsewhere = _mentions(conversation, phrase, [p for p in range(len(turns)) if p not in on_thread])
        return answer
    fact = TrackedFact(phrase, tuple((m.position, m.index) for m in mentions))
    # From the turn after the first statement: the stating turn itself sees it in its own messages.
    answered = [p for p in thread if turns[p].query_index is not None and p > mentions[0].position]
    for subject in subjects:
        asked = answered if subject.ran is None else [p for p in answered if p in subject.ran]
        if not asked:
            answer.losses.append(Loss(subject.label, subject.node_id, None, None, None, None, None, never_ran=True))
            continue
        last_ran = turn_label(conversation, asked[-1]) if asked[-1] != thread[-1] else None
        answer.losses.append(_loss(conversation, subject, fact, asked, last_ran))
    return answer


def _loss(
    conversation: Conversation, subject: Subject, fact: TrackedFact, answered: list[int], last_ran: str | None
) -> Loss:
    """One subject's course of the phrase over the turns where its memory was asked (``answered``)."""
    presence = fact_presence(subject.replay, fact)
    timeline = [presence.get(p, (None, None))[0] for p in answered]
    lost_k, back_k, gone_k, returns = fact_course(timeline)
    held = [k for k, present in enumerate(timeline[:lost_k]) if present]  # before the first loss
    last_kept = turn_label(conversation, answered[held[-1]]) if held else None
    lost = answered[lost_k] if lost_k is not None else None
    if lost is None:
        return Loss(subject.label, subject.node_id, None, None, None, None, last_kept, last_ran_turn=last_ran)
    reason, why = _reason_at(subject, fact, lost)
    comeback = None
    if back_k is not None:
        back = turn_label(conversation, answered[back_k])
        if gone_k is not None:  # the newest turn is without it again: where it left last, and why
            gone = answered[gone_k]
            comeback = Comeback(returns, back, gone, turn_label(conversation, gone), *_reason_at(subject, fact, gone))
        else:
            comeback = Comeback(returns, back)
    return Loss(
        subject.label,
        subject.node_id,
        lost,
        turn_label(conversation, lost),
        reason,
        why,
        last_kept,
        comeback,
        last_ran_turn=last_ran,
    )


def node_subjects(flow, conversation: Conversation, *, fidelity: str | None = None, overrides=None) -> list[Subject]:
    """One subject per LLM node of ``flow``, replayed with the memory settings it runs with (and
    ``overrides`` per node id, as the switchboard's what-if) — the engine of
    :func:`core.flow.what_if.what_if_ledger`."""
    from core.flow.node_memory import node_memory_config, node_replay

    from .debug_view import fixed_tokens_of

    out = []
    names = flow.node_names
    recorded = [(t.meta or {}).get("prompt_tokens") or {} for t in conversation.turns]
    known = any(recorded)  # a conversation whose turns say which nodes ran (a flow's; not an older record)
    for node in flow.model_nodes:
        extra = {} if fidelity is None else {"fidelity": fidelity}
        config = node_memory_config(flow, node.id, override=(overrides or {}).get(node.id) or None, **extra)
        replay = node_replay(flow, conversation, node.id, config, fixed_tokens_of(conversation, node.id))
        ran = frozenset(p for p, nodes in enumerate(recorded) if node.id in nodes) if known else None
        out.append(Subject(names[node.id], replay, node.id, ran))
    return out


def _reason_at(subject: Subject, fact: TrackedFact, position: int) -> tuple[str, str]:
    """The ledger's reason, in words, for the newest statement before ``position``."""
    ledger = subject.replay.ledger_at(position)
    entries = {(e.position, e.index): e for e in ledger.entries}
    for key in reversed(fact.messages):
        entry = entries.get(key)
        if entry is not None and key[0] < position:
            return entry.reason, reason_words(entry.reason, ledger.config)
    return "", "not in the history"


__all__ = ["Subject", "Mention", "Loss", "WhyAnswer", "where_did_it_go", "node_subjects", "MAX_PHRASE"]
