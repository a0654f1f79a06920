"""A memory that sends what a platform stored, in the shape it stored it, as a ledger.

n8n and Flowise do not send the conversation's messages: they send what their memory saved of each
turn (n8n: the question, one assistant message per tool call of the turn's last round, each before its
result, and the answer; Flowise: a question row and an answer row). Such a system lays out, per turn,
the :class:`Item` s its platform stored, picks the ones it sends, and hands them to :class:`StoredPlan`,
which writes the ledger: an earlier message sent as it is is ``kept``; one sent in another shape is
``rewritten`` and what was sent stands in its place (synthetic messages of origin ``stored``; a message
cut to its last lines is ``over_budget`` with a ``partial`` one); every other message has the reason the
system gives it (``omitted`` when the platform never stored it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.model.conversation import Message, ToolCall
from core.model.ledger import KEPT, OMITTED, OVER_BUDGET, PARTIAL, REWRITTEN, STORED, SyntheticMessage

from .base import Budget, PathView, Plan


@dataclass(frozen=True, slots=True)
class Item:
    """One message a platform's memory holds. It comes from the earlier message at ``source`` (a
    ``(position, index)``: whose ledger entry says whether it was sent) and is sent in the place of the
    message at ``anchor`` (the same, unless a round is laid out in its assistant message's place). It
    is that message itself (``as_is``) or a message of its own: ``role``, ``content``, ``calls``
    (``(id, name, arguments)`` each) and ``call_id``."""

    source: tuple[int, int]
    anchor: tuple[int, int]
    role: str
    content: str
    calls: tuple[tuple[str, str, str], ...] = ()
    call_id: str = ""
    as_is: bool = True
    origin: str = STORED

    @classmethod
    def of(cls, position: int, index: int, message: Message, anchor: tuple[int, int] | None = None) -> "Item":
        """The message at ``(position, index)`` as it is."""
        return cls((position, index), anchor or (position, index), message.role, message.content,
                   tuple((c.id, c.name, c.arguments) for c in message.tool_calls), message.tool_call_id or "")

    def shaped(self, **changes) -> "Item":
        """This item sent in another shape (``content=…``, ``calls=…``)."""
        return replace(self, as_is=False, **changes)

    @property
    def is_tool(self) -> bool:
        return self.role == "tool"

    @property
    def calls_tools(self) -> bool:
        """An assistant message that calls tools (LangChain's ``AIMessage`` with ``tool_calls``)."""
        return self.role == "assistant" and bool(self.calls)

    def message(self, kind: str, ref) -> Message:
        return Message(self.role, self.content, kind, ref, tool_calls=tuple(ToolCall(*c) for c in self.calls),
                       tool_call_id=self.call_id or None)


def window_start(length: int, k: float) -> int:
    """Where ``messages.slice(-2k)`` starts in ``length`` stored messages (JavaScript's slice: the
    argument truncated toward zero, a negative one counted from the end; ``-0`` is 0)."""
    if k != k:  # NaN: slice(NaN) is slice(0)
        return 0
    start = int(-2 * k)
    return max(length + start, 0) if start < 0 else min(start, length)


def stored_items(view: PathView, layout) -> list[Item]:
    """Every item the platform holds for the thread before the current turn, oldest first: ``layout(position)``
    gives a turn's."""
    return [item for position in view.positions for item in layout(position)]


class StoredPlan(Plan):
    """The ledger of one turn whose history is ``sent`` (items, in order). ``reasons`` gives why an earlier
    message none of whose items was sent was not (by ``(position, index)``; ``omitted`` when not given: the
    platform never stored it)."""

    def __init__(self, budget: Budget, sent: list[Item], reasons: dict[tuple[int, int], str], view: PathView,
                 replay):
        turns = replay.conversation.turns
        self.reasons = dict(reasons)
        by_anchor: dict[tuple[int, int], list[Item]] = {}
        for item in sent:
            by_anchor.setdefault(item.anchor, []).append(item)
        kept: set[tuple[int, int]] = set()
        self.stand_ins: dict[tuple[int, int], list[Item]] = {}
        for anchor, items in by_anchor.items():
            if len(items) == 1 and items[0].as_is and items[0].source == anchor:
                kept.add(anchor)
            else:
                self.stand_ins[anchor] = items
        for item in sent:
            if item.source not in kept:
                self.reasons[item.source] = OVER_BUDGET if item.origin == PARTIAL else REWRITTEN
        for source in kept:
            self.reasons[source] = KEPT
        self.turns = turns
        self.view = view
        self.counter = replay.counter
        self.numbers = replay.numbers
        self.tokens: dict[tuple[int, int, int], int] = {}
        history = sum(replay.message_tokens(p)[j] for p, j in kept)
        for anchor, items in self.stand_ins.items():
            for k, item in enumerate(items):
                kind = turns[anchor[0]].messages[anchor[1]].kind
                history += self.tokens.setdefault((*anchor, k), self.counter.message(item.message(kind, "")))
        oldest = min((item.source[0] for item in sent), default=None)
        super().__init__(budget, None, len(kept), history, None if oldest is None else replay.numbers[oldest])

    def reason(self, i, message):
        # (read before the view moves on: a ledger is built right after its plan)
        return self.reasons.get((self.view.seq_pos[i], self.view.seq_msg[i]), OMITTED)

    def synthetic(self, view, replay):
        out = []
        for (position, index), items in self.stand_ins.items():
            source = self.turns[position].messages[index]
            number = self.numbers[position]
            for k, item in enumerate(items):
                ref = f"{item.origin}:{source.ref}" + (f":{k + 1}" if len(items) > 1 else "")
                out.append(SyntheticMessage(role=item.role, content=item.content,
                                            tokens=self.tokens[(position, index, k)], origin=item.origin, turn=number,
                                            covers=(number,), replaces=(position, index), ref=ref, calls=item.calls,
                                            call_id=item.call_id))
        return out


__all__ = ["Item", "StoredPlan", "stored_items", "window_start"]
