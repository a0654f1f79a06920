"""The interface every memory strategy implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import MemoryConfig, PathView
    from ..tokens import ModelFacts


@dataclass(frozen=True)
class Budget:
    """The token budget for history: ``limit`` None means no pruning applies."""

    limit: int | None
    note: str = ""
    context_size: int | None = None


class Strategy:
    name = ""
    #: Whether query_answer granularity applies (dify, buffer) or every message counts (window).
    uses_granularity = True
    #: Whether the strategy sends any history at all.
    remembers = True

    def window(self, view: "PathView", current: int, config: "MemoryConfig") -> tuple[int, int]:
        """(trimmed_before, window_start) as indices into ``view``'s message sequence.

        Messages before ``trimmed_before`` were removed permanently in earlier turns; those
        from there up to ``window_start`` fall outside the window now.
        """
        return 0, 0

    def mark(self, trimmed_before: int, window_start: int) -> int:
        """State remembered for this turn, read back by its thread's later turns."""
        return window_start

    def budget(self, config: "MemoryConfig", facts: "ModelFacts", fixed_prompt_tokens: int) -> Budget:
        return Budget(None, "", config.context_size or facts.context_size)
