"""What the Question Classifier and the Parameter Extractor share: a model block, Dify's memory read
as text lines into their prompt, and one window rule.

Dify as shipped (graphon ``QuestionClassifierNode``, ``ParameterExtractorNode``) fetches their history
with the window's ``size`` as the row limit whenever the node has a memory block, whether the window
is enabled or not; the LLM node reads the size only when the window is enabled. Without a size, 500
rows. The documented behaviour, a window that is off keeping every turn up to 500, is the
``documented`` fidelity (:meth:`TextMemoryNode.window`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.memory.replay import DEFAULT_FIDELITY

from .llm import MemorySettings, ModelBlock


@dataclass(frozen=True)
class TextMemoryNode:
    """The settings every node that reads its memory as text has."""

    block: ModelBlock
    memory: MemorySettings | None
    query_selector: tuple[str, ...]  # the text the node reads (its query)
    instruction: str  # may hold variable templates, rendered at run time
    #: Tokens the history's budget keeps free besides the prompt (``MemoryConfig.prompt_reserve``).
    prompt_reserve: ClassVar[int] = 0

    @property
    def model(self) -> str:
        return self.block.model

    @property
    def max_tokens(self) -> int:
        return self.block.max_tokens

    @property
    def mode(self) -> str:
        return self.block.mode

    def memory_label(self) -> str:
        """Its memory in a few words, as shipped, with the documented reading when the two differ."""
        if self.memory is None:
            return "off"
        if not self.memory.window_enabled and self.memory.window_size:
            return (f"window {self.memory.window_size} turns (its window is switched off, but Dify as shipped reads "
                    f"the size anyway; documented: {self.memory.label()})")
        return self.memory.label()

    def window(self, fidelity: str = DEFAULT_FIDELITY) -> int | None:
        """Turns of history its memory reads (``None``: the 500-row cap): as shipped (``code``) the
        window's size whether it is enabled or not; ``documented``, the size only when enabled."""
        if self.memory is None:
            return None
        if fidelity == DEFAULT_FIDELITY:
            return self.memory.window_size or None
        return self.memory.window


__all__ = ["TextMemoryNode"]
