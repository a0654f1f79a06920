"""``dominant_message``: one message filling most of a node's kept history (Dify#36717)."""

from __future__ import annotations

from typing import Sequence

from core.memory.replay import turn_numbers
from core.model.conversation import Conversation
from core.words import plural

from .base import DOMINANT_MESSAGE, WARNING, Finding, excerpt, quoted, turn_namer
from .turns import MemoryTurn

#: A message "fills" a node's window when it holds more than this share of the kept history…
DOMINANT_SHARE = 0.5


#: …and at least this many tokens (half of a short history is no surprise).
DOMINANT_MIN_TOKENS = 256


def dominant_messages(
    subject: str, turns: Sequence[MemoryTurn], conversation: Conversation, node_id: str | None = None
) -> list[Finding]:
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
        text = (
            f"One message fills {share:.0%} of the history {quoted(subject)} keeps at {name(first.turn)}: "
            f"{name(numbers[q])}'s "
            f"{msg.role} message ({first.largest_tokens:,} of {first.history_tokens:,} tokens), "
            f"“{excerpt(msg.content or msg.kind)}”"
        )
        if len(hits) > 1:
            text += f"; it fills most of the history for {plural(len(hits), 'turn')}"
        detail = (
            "A long earlier reply or tool result crowds out everything else the node remembers, and can make "
            "later calls fail or return empty output (Dify#36717). Shorten what is stored, or keep it out of "
            "memory."
        )
        out.append(
            Finding(
                DOMINANT_MESSAGE,
                text + ".",
                subject,
                first.turn,
                node_id,
                WARNING,
                detail,
                {
                    "message": [q, j],
                    "turns": [t.turn for t in hits],
                    "share": round(share, 4),
                    "tokens": first.largest_tokens,
                },
            )
        )
    return out
