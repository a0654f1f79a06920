"""What every node's run shares within one turn: the :class:`RunContext` (the flow, the conversation
with the new turn's placeholder, the variable pool, the model client, what earlier nodes left for later
ones) and the two steps every model-calling node takes — its ledger and history (:func:`node_history`)
and its timed model call (:func:`complete`).

A node type's runner is ``run(node, ctx, run) -> handle | None``: it reads ``ctx``, records what it did
on its :class:`core.flow.records.NodeRun` and fails the node by raising :class:`core.flow.errors.NodeFailed`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from core.llm.client import LLMClient, default_client
from core.llm.errors import LLMError
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.turn_memory import TurnMemory
from core.model.conversation import Conversation, Message
from core.model.ledger import Ledger

from .errors import NodeFailed
from .nodes.window_memory import window_call
from .templates import VariablePool
from .variables import VariableChange

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Flow
    from .prompt import PromptMessage
    from .records import NodeRun


@dataclass
class RunContext:
    """One turn's run, as every node's runner sees it."""

    flow: Flow
    conversation: Conversation  # with the placeholder turn appended
    position: int
    turn_id: str
    turn_number: int
    pool: VariablePool
    variables: dict
    fidelity: str
    llm: LLMClient | None
    overrides: dict
    on_variables_updated: Callable[[str, list[VariableChange]], None] | None
    emit: Callable[..., None]
    changes: list[VariableChange] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    long_term: Any = None  # a core.memory.long_term.LongTermMemory, or None when no store is connected
    granularity: str | None = None  # the request's history granularity (None: the flow's, else the default)
    recalled: dict = field(default_factory=dict)  # memory-retrieve node id → its results (dicts)
    window_calls: dict = field(default_factory=dict)  # window-memory node id → (config, overwrite or None)
    window_overwrites: dict = field(default_factory=dict)  # persisted inputs (thread scope)
    intermediate: list = field(default_factory=list)  # Messages agent nodes added to the turn
    plugin_token_counting: bool = False
    memories: dict | None = None  # the conversation's TurnMemory per memory config, kept between its turns
    inputs: dict = field(default_factory=dict)  # the start node's inputs, as checked

    def client(self) -> LLMClient:
        if self.llm is None:
            self.llm = default_client()
        return self.llm


def node_history(
    ctx: RunContext, config: MemoryConfig, window, fixed_tokens: int
) -> tuple[Ledger, list[Message], Replay | None]:
    """The node's ledger and the history it sends: from a Window Memory node it reads, or its own memory;
    and the replay that made it (``None`` for a Window Memory node's)."""
    if window is not None:
        call = window_call(
            ctx.conversation,
            ctx.position,
            window[0],
            config,
            overwrite=window[2],
            has_thread=ctx.flow.is_chat,
            prompt_tokens=fixed_tokens,
        )
        return call.ledger, call.messages, None
    if ctx.memories is None:
        memory = TurnMemory(config, has_thread=ctx.flow.is_chat)
    else:
        key = (json.dumps(config.to_dict(), sort_keys=True, default=str), ctx.flow.is_chat)
        memory = ctx.memories.get(key)
        if memory is None:
            memory = ctx.memories[key] = TurnMemory(config, has_thread=ctx.flow.is_chat)
    ledger, history = memory.ledger(ctx.conversation, ctx.position, fixed_tokens)
    return ledger, history, memory.replay


def complete(ctx: RunContext, run: NodeRun, model: str, prompt: Sequence[PromptMessage], max_tokens: int):
    """The model call of an LLM or Question Classifier node: timed, its reply, usage and stand-in note
    recorded on ``run``; a failed call fails the node."""
    started = time.perf_counter()
    try:
        reply = ctx.client().complete(model, [m.wire() for m in prompt], max_tokens or None)
    except LLMError as e:
        run.latency_ms = (time.perf_counter() - started) * 1000
        raise NodeFailed(str(e)) from None
    run.latency_ms = (time.perf_counter() - started) * 1000
    run.reply = reply.text
    run.usage = reply.usage
    run.model_called = reply.model
    if reply.note:
        run.notes.append(reply.note)
    return reply


__all__ = ["RunContext", "complete", "node_history"]
