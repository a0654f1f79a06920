"""The turn diff of one config: what entered and left the context from the previous turn of the thread
to this one, with the token delta.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.memory.replay import Replay
from core.model.ledger import KEPT, Ledger

from ..errors import CompareError
from .heatmap import column_text, short_text


@dataclass(frozen=True)
class DiffItem:
    ref: int | str
    turn: int
    role: str
    tokens: int
    reason: str  # the reason now (for what left) or "kept" (for what entered)
    text: str

    def to_json(self) -> dict:
        return {
            "ref": self.ref,
            "turn": self.turn,
            "role": self.role,
            "tokens": self.tokens,
            "reason": self.reason,
            "text": self.text,
        }


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
        return {
            "label": self.label,
            "turn": self.turn,
            "previous_turn": self.previous_turn,
            "entered": [x.to_json() for x in self.entered],
            "left": [x.to_json() for x in self.left],
            "stayed": self.stayed,
            "history_tokens": self.history_tokens,
            "previous_history_tokens": self.previous_history_tokens,
            "token_delta": self.token_delta,
        }


def _sent(ledger: Ledger, replay: Replay) -> dict[tuple, DiffItem]:
    turns = replay.conversation.turns
    out: dict[tuple, DiffItem] = {}
    for e in ledger.entries:
        if e.kept:
            out[("message", e.position, e.index)] = DiffItem(
                e.ref, e.turn, e.role, e.tokens, KEPT, column_text(turns[e.position].messages[e.index])
            )
    for s in getattr(ledger, "synthetic", None) or []:
        key = ("synthetic", s.origin, s.replaces, s.ref, s.content)
        out[key] = DiffItem(s.ref or s.origin, s.turn, s.role, s.tokens, KEPT, short_text(s.content))
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
    return TurnDiff(
        label or replay.config.label(),
        turn_number,
        previous_turn,
        entered,
        left,
        stayed,
        now.history_tokens,
        previous_tokens,
        now.history_tokens - previous_tokens,
    )
