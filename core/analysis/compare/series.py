"""The per-turn series of one config — kept messages, history tokens against the budget, the oldest
turn still remembered — straight from :meth:`core.memory.replay.Replay.summaries`.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.memory.replay import Replay


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
        return {
            "label": self.label,
            "turns": self.turns,
            "kept": self.kept,
            "history_tokens": self.history_tokens,
            "budget": self.budget,
            "prompt_tokens": self.prompt_tokens,
            "oldest_kept_turn": self.oldest_kept_turn,
        }


def turn_series(replay: Replay, label: str | None = None) -> Series:
    s = replay.summaries()
    return Series(
        label or replay.config.label(),
        *(s.column(name) for name in ("turn", "kept", "history_tokens", "budget", "prompt_tokens", "oldest_kept_turn")),
    )
