"""``window_zero``: a window of 0, which Dify reads as no limit (its row cap), so history is included."""

from __future__ import annotations

from typing import Sequence

from core.limits import DIFY_ROW_CAP
from core.memory.strategies.base import window_at, window_sizes
from core.words import plural

from .base import WARNING, WINDOW_ZERO, Finding, TurnNamer, quoted
from .turns import MemoryTurn


def window_zero_finding(
    subject: str, turns: Sequence[MemoryTurn], name: TurnNamer, node_id: str | None = None
) -> Finding:
    first = next((t for t in turns if t.kept), None)
    text = f"Window = 0, but history was included: Dify reads a window of 0 as no limit (its {DIFY_ROW_CAP}-turn cap)"
    if first is not None:
        text += f", so at {name(first.turn)} {quoted(subject)} still receives {plural(first.kept, 'earlier message')}"
    else:
        text += f", so {quoted(subject)} will receive every earlier turn"
    detail = "To switch memory off, turn the memory block off; to keep a few turns, set the window to 1 or more."
    return Finding(WINDOW_ZERO, text + ".", subject, first.turn if first else None, node_id, WARNING, detail)


def zero_window_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """A Dify window of 0, set or changed to: Dify reads it as no limit."""
    if not any(n == 0 for n in window_sizes(config.settings)):
        return []
    return [window_zero_finding(label, [t for t in turns if window_at(config.settings, t.turn) == 0], name)]
