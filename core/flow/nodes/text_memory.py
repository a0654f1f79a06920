"""What the Question Classifier and the Parameter Extractor share: a model block, Dify's memory read
as text lines into their prompt, and one window rule — which Dify's plugin Agent node follows too
(:class:`ShippedWindowNode`).

Dify as shipped (graphon ``QuestionClassifierNode``, ``ParameterExtractorNode``; Dify's
``AgentRuntimeSupport.build_parameters``) fetches their history with the window's ``size`` as the
row limit whenever the node has a memory block, whether the window is enabled or not; the LLM node
reads the size only when the window is enabled. Without a size, 500 rows. The documented
behaviour, a window that is off keeping every turn up to 500, is the ``documented`` fidelity
(:meth:`ShippedWindowNode.window`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.memory.strategies.dify import DEFAULT_FIDELITY

from ..prompt import CURRENT_QUERY, HISTORY_SLOT, HUMAN_AI, TEXT_HISTORY, PromptFrame, message
from .llm import MemorySettings, ModelBlock


@dataclass(frozen=True)
class ShippedWindowNode:
    """A node with a model block whose memory window's size is read even when the window is off. Its
    budget and history layout (``MemoryConfig``'s fields of the same names) are its type's."""

    block: ModelBlock
    memory: MemorySettings | None
    #: Tokens the history's budget keeps free besides the prompt (``None``: the prompt is not subtracted).
    prompt_reserve: ClassVar[int | None] = None
    #: A fixed history budget in place of one worked out from the context (``None``: none).
    history_budget: ClassVar[int | None] = None
    #: Whether the history goes into the prompt as text lines.
    history_as_text: ClassVar[bool] = False
    #: Whether an empty message of the history is sent as it is (no chat filter).
    sends_empty: ClassVar[bool] = False

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


@dataclass(frozen=True)
class TextMemoryNode(ShippedWindowNode):
    """The settings every node that reads its memory as text has."""

    query_selector: tuple[str, ...]  # the text the node reads (its query)
    instruction: str  # may hold variable templates, rendered at run time
    prompt_reserve: ClassVar[int | None] = 0
    history_as_text: ClassVar[bool] = True


def text_history_frame(body: list[str], query: str, counter, *, mode: str, with_history: bool, query_label: str,
                       file_upload: bool, vision: bool) -> PromptFrame:
    """The layout both nodes send: a chat model gets one system message — with history, its lines
    under "Earlier conversation", then ``body`` — and the query as the user's message (none when the
    query is empty); a completion model one text with ``query_label: query`` at its end."""
    lines = ["Earlier conversation:", HISTORY_SLOT, ""] if with_history else []
    text = "\n".join(lines + body)
    if mode == "chat":
        after = (message("user", query, CURRENT_QUERY, counter),) if query else ()
        return PromptFrame(TEXT_HISTORY, counter, template=text, template_role="system", after=after,
                           role_prefix=HUMAN_AI, file_upload=file_upload, vision=vision)
    return PromptFrame(TEXT_HISTORY, counter, template=f"{text}\n{query_label}: {query}", role_prefix=HUMAN_AI,
                       file_upload=file_upload, vision=vision)


__all__ = ["ShippedWindowNode", "TextMemoryNode", "text_history_frame"]
