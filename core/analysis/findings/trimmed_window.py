"""``trimmed_window``: a Window Memory node whose permanent trimming makes a larger window useless —
what the smaller window cut stays gone.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies.base import PathView
from core.memory.strategies.window import grows
from core.memory.strategies.window import size_at as window_size
from core.model.conversation import Conversation
from core.words import plural

from .base import TRIMMED_WINDOW, WARNING, Finding, TurnNamer, quoted, turn_namer
from .turns import MemoryTurn, memory_turns


def trimmed_window_finding(
    subject: str,
    config: MemoryConfig,
    turns: Sequence[MemoryTurn],
    name: TurnNamer,
    baseline: Mapping[int, MemoryTurn] | None = None,
) -> Finding | None:
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
            text = (
                f"At {name(t.turn)} {quoted(subject)} has a window of {size} messages, but it {gain}: "
                f"{plural(lost, 'message')} trimmed in earlier turns {'is' if lost == 1 else 'are'} gone for good"
            )
            detail = (
                "The Window Memory node trims permanently: its store holds only the last N messages of the "
                "previous turn plus the new round, so a larger N cannot bring back what a smaller N cut. "
                "Start a new conversation, or set the larger window before the history grows."
            )
            return Finding(
                TRIMMED_WINDOW,
                text + ".",
                subject,
                t.turn,
                None,
                WARNING,
                detail,
                {"window": size, "in_window": t.in_window, "would_keep": would, "trimmed": t.trimmed},
            )
    return None


def larger_window_what_if(
    conversation: Conversation, config: MemoryConfig, window: int, from_turn: int, *, system_prompt: str | None = None
) -> Finding | None:
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
    return trimmed_window_finding(
        changed.label() + f" → {window} at {name(from_turn)}",
        changed,
        [t for t in after if t.turn >= from_turn],
        name,
        baseline,
    )


def trimmed_window_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """A store that trims for good and a window that grows later: what the smaller one cut stays gone."""
    found = trimmed_window_finding(label, config, turns, name) if grows(config.settings) else None
    return [found] if found else []
