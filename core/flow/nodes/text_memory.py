"""What the Question Classifier and the Parameter Extractor share: a model block, Dify's memory read
as text lines into their prompt, and one window rule — which Dify's plugin Agent node follows too
(:class:`ShippedWindowNode`).

Dify as shipped (graphon ``QuestionClassifierNode``, ``ParameterExtractorNode``; Dify's
``AgentRuntimeSupport.build_parameters``) fetches their history with the window's ``size`` as the
row limit whenever the node has a memory block, whether the window is enabled or not; the LLM node
reads the size only when the window is enabled. Without a size, 500 rows. The documented
behaviour, a window that is off keeping every turn up to 500, is the ``documented`` fidelity
(:meth:`ShippedWindowNode.window`).

Their runs share one model call (:func:`shipped_call`): the node's memory config, its ledger and the
prompt its frame builds around the history, recorded on the run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.model.origins import CURRENT_QUERY
from core.model.tokens import DEMO_MODEL, counter_for, model_supports_vision

from ..context import complete, node_history
from ..errors import NodeFailed
from ..node_memory import node_memory_config
from ..prompt import HISTORY_SLOT, HUMAN_AI, TEXT_HISTORY, PromptFrame, message
from ..templates import MISSING, NONE, VariablePool, render, value_text
from .llm import MemorySettings, ModelBlock

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


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
            return (
                f"window {self.memory.window_size} turns (its window is switched off, but Dify as shipped reads "
                f"the size anyway; documented: {self.memory.label()})"
            )
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

    def frame(
        self, pool: VariablePool, query: str, instruction: str, counter, *, with_history: bool, **options: Any
    ) -> PromptFrame:
        """What the node sends besides its history, for ``query`` and its rendered ``instruction``."""
        raise NotImplementedError


def text_history_frame(
    body: list[str],
    query: str,
    counter,
    *,
    mode: str,
    with_history: bool,
    query_label: str,
    file_upload: bool,
    vision: bool,
) -> PromptFrame:
    """The layout both nodes send: a chat model gets one system message — with history, its lines
    under "Earlier conversation", then ``body`` — and the query as the user's message (none when the
    query is empty); a completion model one text with ``query_label: query`` at its end."""
    lines = ["Earlier conversation:", HISTORY_SLOT, ""] if with_history else []
    text = "\n".join(lines + body)
    if mode == "chat":
        after = (message("user", query, CURRENT_QUERY, counter),) if query else ()
        return PromptFrame(
            TEXT_HISTORY,
            counter,
            template=text,
            template_role="system",
            after=after,
            role_prefix=HUMAN_AI,
            file_upload=file_upload,
            vision=vision,
        )
    return PromptFrame(
        TEXT_HISTORY,
        counter,
        template=f"{text}\n{query_label}: {query}",
        role_prefix=HUMAN_AI,
        file_upload=file_upload,
        vision=vision,
    )


# -- their runs -------------------------------------------------------------------------------------


def node_query(settings: TextMemoryNode, pool: VariablePool) -> str:
    """The text a Question Classifier sorts or a Parameter Extractor reads: the value at its selector, as text."""
    selector = settings.query_selector
    value = pool.get(list(selector)) if selector else MISSING
    return "" if value is MISSING or value is NONE or value is None else value_text(value)


def text_frame(
    settings: TextMemoryNode, pool: VariablePool, counter, *, with_history: bool, query: str = "", **options: Any
) -> PromptFrame:
    """The frame of a Question Classifier's or Parameter Extractor's prompt, its settings rendered with
    ``pool``; ``query`` stands in when the node's own query reads as nothing (an estimate without its run)."""
    return settings.frame(
        pool,
        node_query(settings, pool) or query,
        render(settings.instruction, pool),
        counter,
        with_history=with_history,
        **options,
    )


def text_memory_call(node: Node, settings: TextMemoryNode, ctx: RunContext, run: NodeRun):
    """The model call of a node whose memory goes into its prompt as text (:func:`shipped_call`)."""
    return shipped_call(
        node,
        settings,
        ctx,
        run,
        lambda counter, with_history, **options: text_frame(
            settings, ctx.pool, counter, with_history=with_history, **options
        ),
    )


def shipped_call(
    node: Node, settings: ShippedWindowNode, ctx: RunContext, run: NodeRun, frame_of: Callable[..., PromptFrame]
):
    """The model call of a node with Dify's memory and the window rule of :class:`ShippedWindowNode`: its
    config, ledger and prompt recorded on ``run``, the reply returned (a failed call fails the node).
    ``frame_of(counter, with_history, file_upload=…, vision=…)`` builds what it sends besides its history."""
    override = ctx.overrides.get(node.id)
    config = node_memory_config(
        ctx.flow, node.id, fidelity=ctx.fidelity, plugin_token_counting=ctx.plugin_token_counting, override=override
    )
    run.memory = config.to_dict()
    run.memory_override = copy.deepcopy(dict(override)) if override else None
    run.model = settings.model or DEMO_MODEL
    frame = frame_of(
        counter_for(config.model),
        config.remembers and ctx.flow.is_chat,
        file_upload=ctx.flow.file_upload,
        vision=model_supports_vision(config.model),
    )
    run.ledger, history, _ = node_history(ctx, config, None, frame.fixed_tokens())
    run.prompt = frame.build(history)
    if not run.prompt:
        raise NodeFailed("the node has nothing to send to its model: no instruction, no query and no history")
    model = config.model if override and "model" in override else settings.model
    return complete(ctx, run, model, run.prompt, settings.max_tokens)


__all__ = [
    "ShippedWindowNode",
    "TextMemoryNode",
    "node_query",
    "shipped_call",
    "text_frame",
    "text_history_frame",
    "text_memory_call",
]
