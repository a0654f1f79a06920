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
from core.model.ledger import KEPT, OMITTED, OUTSIDE_WINDOW, OVER_BUDGET, PARTIAL, REWRITTEN, STORED, SyntheticMessage

from .base import Budget, PathView, Plan, Strategy


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
        return cls(
            (position, index),
            anchor or (position, index),
            message.role,
            message.content,
            tuple((c.id, c.name, c.arguments) for c in message.tool_calls),
            message.tool_call_id or "",
        )

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
        return Message(
            self.role,
            self.content,
            kind,
            ref,
            tool_calls=tuple(ToolCall(*c) for c in self.calls),
            tool_call_id=self.call_id or None,
        )


def slice_start(k: float) -> int:
    """The argument of ``messages.slice(-2k)`` (JavaScript truncates it toward zero; ``-0`` and ``NaN`` are 0)."""
    return int(-2 * k) if k == k else 0


def window_start(length: int, start: int) -> int:
    """Where JavaScript's ``slice(start)`` of ``length`` messages starts: a negative ``start`` counts from the end."""
    return max(length + start, 0) if start < 0 else min(start, length)


def stored_items(view: PathView, layout) -> list[Item]:
    """Every item the platform holds for the thread before the current turn, oldest first: ``layout(position)``
    gives a turn's."""
    return [item for position in view.positions for item in layout(position)]


def sliced_items(view: PathView, layout, start: int) -> list[Item]:
    """``slice(start)`` of :func:`stored_items`, read from the newest turn back only as far as a negative
    ``start`` reaches (a window of the last 2k costs its own turns, not the thread's)."""
    if start >= 0:
        items = stored_items(view, layout)
        return items[window_start(len(items), start) :]
    chunks, held = [], 0
    for position in reversed(view.positions):
        chunk = layout(position)
        chunks.append(chunk)
        held += len(chunk)
        if held >= -start:
            break
    return [item for chunk in reversed(chunks) for item in chunk][start:]


class StoredPlan(Plan):
    """The ledger of one turn whose history is ``sent`` (items, in order). ``reasons`` gives why an earlier
    message none of whose items was sent was not (by ``(position, index)``); one it does not name is
    ``earlier`` when the platform stored it (``layout(position)``: a turn's items), else ``omitted``."""

    def __init__(
        self,
        budget: Budget,
        sent: list[Item],
        reasons: dict[tuple[int, int], str],
        view: PathView,
        replay,
        layout,
        earlier: str = OUTSIDE_WINDOW,
    ):
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
        self.layout, self.earlier = layout, earlier
        self.stored: dict[int, frozenset[int]] = {}  # by position: the indices of the messages it stored
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
        position, index = self.view.seq_pos[i], self.view.seq_msg[i]
        found = self.reasons.get((position, index))
        if found is not None:
            return found
        stored = self.stored.get(position)
        if stored is None:
            stored = self.stored[position] = frozenset(item.source[1] for item in self.layout(position))
        return self.earlier if index in stored else OMITTED

    def synthetic(self, view, replay):
        out = []
        for (position, index), items in self.stand_ins.items():
            source = self.turns[position].messages[index]
            number = self.numbers[position]
            for k, item in enumerate(items):
                ref = f"{item.origin}:{source.ref}" + (f":{k + 1}" if len(items) > 1 else "")
                out.append(
                    SyntheticMessage(
                        role=item.role,
                        content=item.content,
                        tokens=self.tokens[(position, index, k)],
                        origin=item.origin,
                        turn=number,
                        covers=(number,),
                        replaces=(position, index),
                        ref=ref,
                        calls=item.calls,
                        call_id=item.call_id,
                    )
                )
        return out


class StoredStrategy(Strategy):
    """A memory system that sends what its platform stored: it plans (:class:`StoredPlan`), every message
    of a turn is a candidate, and an empty message is sent as the platform sends it."""

    plans = True
    uses_granularity = False
    drops_empty = False


__all__ = ["Item", "StoredPlan", "StoredStrategy", "slice_start", "sliced_items", "stored_items", "window_start"]
