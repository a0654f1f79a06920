"""A node's conversation memory: the :class:`MemoryConfig` an LLM, Question Classifier, Parameter
Extractor or agent node runs with, a what-if override of it, and its replay over a recorded
conversation. Runs, the switchboard, what-if ledgers and the recorded-run checks all take a node's
config from :func:`node_memory_config`, so a what-if replays exactly what a run would have.

A node's settings are read through its type in the registry (:attr:`core.flow.graph.Node.kind`), so this
module imports no node type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from core.memory.config import MemoryConfig, setting_names
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import OFF, get_strategy
from core.memory.strategies.dify import DEFAULT_FIDELITY, DifyStrategy
from core.model.conversation import Conversation
from core.model.tokens import DEMO_MODEL

from .errors import GranularityError, RunError
from .granularity import resolve_granularity
from .nodes.window_memory import history_inputs, window_settings

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Flow, Node
    from .nodes.text_memory import ShippedWindowNode


def check_override(node_id: str, override: Mapping[str, Any]) -> dict:
    if not isinstance(override, Mapping):
        raise RunError(f"memory override for node {node_id!r} must be a mapping of memory settings")
    known = setting_names()
    unknown = set(override) - known
    if unknown:
        raise RunError(
            f"memory override for node {node_id!r}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"expected some of {', '.join(sorted(known))}"
        )
    return dict(override)


def node_memory_config(
    flow: Flow,
    node_id: str,
    *,
    fidelity: str = DEFAULT_FIDELITY,
    plugin_token_counting: bool = False,
    granularity: str | None = None,
    override: Mapping[str, Any] | None = None,
) -> MemoryConfig:
    """The memory config an LLM or agent node runs with; ``override`` replaces any of its fields for a
    what-if (runs, the switchboard and the recorded-run checks all take a node's config from here).

    An LLM node: ``dify`` with its window, ``off`` without a memory block, or the ``window`` of the
    window-memory node it reads (``memory_node``). A Question Classifier, Parameter Extractor or
    Dify Agent node: the same, with their own window rule (:meth:`ShippedWindowNode.window`) and
    budget (``prompt_reserve``, ``history_budget``). All read their history as text
    (``history_as_text``) when it goes into their prompt as lines: the Question Classifier and the
    Parameter Extractor always, an LLM node with a completion model. ``model`` is the node's configured model
    (``memlens/demo`` when none is set): its context size and tokenizer are what Dify would budget
    with, whichever model stands in to answer. ``max_tokens`` is the node's user-set completion
    parameter (0 when unset). ``fidelity`` and ``plugin_token_counting`` are the conversation's Dify
    profile (shipped code by default, token counting off as Dify ships it).

    A tool-agent node: its ``memory`` setting with its model, and the history ``granularity`` of the
    request (``None``: the flow's, else the default), or the window-memory node it reads.
    """
    node = flow.node(node_id)
    # The node's settings, flat: what its memory is, and the Dify profile its window and budget read,
    # which an override switching a memory on takes up (a setting its memory system lacks is left out).
    if node.type == "tool-agent":
        base = _agent_memory_config(flow, node, granularity, fidelity, plugin_token_counting)
        values = {"strategy": base.strategy, **base.values()}
    elif node.type != "llm" and (shipped := _shipped_window_settings(node)) is not None:
        # (An LLM node's settings are read once, below: they are not a ShippedWindowNode.)
        # Its window depends on the Dify profile: an override's profile (docs ↔ code) reads it its way.
        profile = (override or {}).get("fidelity", fidelity)
        values = dict(
            strategy=DifyStrategy.name if shipped.memory is not None else OFF,
            window=shipped.window(profile),
            fidelity=fidelity,
            plugin_token_counting=plugin_token_counting,
            model=shipped.model or DEMO_MODEL,
            max_tokens=shipped.max_tokens,
            history_as_text=shipped.history_as_text,
            prompt_reserve=shipped.prompt_reserve,
            history_budget=shipped.history_budget,
            sends_empty=shipped.sends_empty,
        )
    else:
        settings = flow.llm(node_id)
        # A basic Chatbot's call budgets after the prompt before its history, its query added later, and no filter
        # drops an empty history message (basic_chat).
        basic = settings.basic_chat
        values = dict(
            strategy=DifyStrategy.name if settings.memory is not None else OFF,
            window=settings.memory.window if settings.memory is not None else None,
            fidelity=fidelity,
            plugin_token_counting=plugin_token_counting,
            model=settings.model or DEMO_MODEL,
            max_tokens=settings.max_tokens,
            history_as_text=settings.mode != "chat",  # a completion prompt's history is text
            prompt_reserve=0 if basic else None,
            query_after_budget=basic,
            sends_empty=basic,
        )
        source = node.data.get("memory_node")
        if source and flow.has_node(source) and flow.node(source).type == "window-memory":
            # The node reads a Window Memory store: its window and scope (an overwrite input is not replayed here).
            store = window_settings(flow.node(source)).config(values["model"]).with_(max_tokens=values["max_tokens"])
            values = {"strategy": store.strategy, **store.values()}
    try:
        if override:
            values = {**values, **check_override(node_id, override)}
        return MemoryConfig(**values).validate()
    except ConfigError as e:
        raise RunError(f"memory settings for node {node_id!r}: {e}") from None
    except TypeError as e:
        raise RunError(f"memory override for node {node_id!r}: {e}") from None


def _agent_memory_config(
    flow: Flow, node: Node, granularity: str | None, fidelity: str, plugin_token_counting: bool
) -> MemoryConfig:
    """An agent node's memory as configured: the window-memory node it reads, or its ``memory``
    setting with its model and the history granularity (the request's, else the flow's, else the
    default); a Dify strategy takes the conversation's Dify profile unless the setting gives one
    (a Dify Agent app's node, :mod:`core.flow.agent_chat`)."""
    settings = node.kind.read(node)
    source = settings.memory_node
    if source and flow.has_node(source) and flow.node(source).type == "window-memory":
        return window_settings(flow.node(source)).config(settings.model)
    try:
        granularity, _ = resolve_granularity(granularity, flow.history.get("granularity"))
    except GranularityError as e:
        raise RunError(str(e)) from None
    profile = (
        {"fidelity": fidelity, "plugin_token_counting": plugin_token_counting}
        if get_strategy(settings.memory["strategy"]).follows_dify_profile
        else {}
    )
    return MemoryConfig.from_dict(
        {
            **profile,
            **settings.memory,
            "model": settings.memory.get("model", settings.model),
            "granularity": granularity,
        }
    )


def node_history_inputs(flow: Flow, conversation: Conversation, node_id: str):
    """For an LLM or agent node that reads a Window Memory node: what inputs wrote over that store
    before each turn's call, as recorded with the turns (for :class:`Replay`'s ``history_inputs``);
    ``None`` for a node with its own memory."""
    source = flow.node(node_id).data.get("memory_node")
    if source and flow.has_node(source) and flow.node(source).type == "window-memory":
        return history_inputs(conversation, source)
    return None


def node_replay(
    flow: Flow,
    conversation: Conversation,
    node_id: str,
    config: MemoryConfig,
    prompt_tokens: Callable[[int], int],
    *,
    system_prompt: str = "",
) -> Replay:
    """An LLM or agent node's memory replayed over a recorded conversation under ``config``, as its
    runs decided it: its flow's thread mode, the prompt sizes and any inputs written over its store
    (``system_prompt``: what an agent's shipped compaction counts besides them, see :func:`agent_replays_system`)."""
    return Replay(
        conversation,
        config,
        system_prompt=system_prompt,
        has_thread=flow.is_chat,
        prompt_tokens=prompt_tokens,
        history_inputs=node_history_inputs(flow, conversation, node_id),
    )


def agent_replays_system(config: MemoryConfig) -> bool:
    """An agent node under Dify 1.17's shipped compaction checks the whole request, its system prompt
    included (every other memory counts only the history against the prompt's size)."""
    return config.system.compacts_per_request(config)


def _shipped_window_settings(node: Node) -> ShippedWindowNode | None:
    """The settings of a node with Dify's memory and the window rule of :class:`ShippedWindowNode` (every
    such type but the LLM node's, whose settings are :class:`core.flow.nodes.llm.LLMSettings`), else ``None``."""
    kind = node.kind
    if kind is None or not kind.dify_memory or kind.read is None or node.type == "llm":
        return None
    return kind.read(node)


__all__ = ["agent_replays_system", "check_override", "node_history_inputs", "node_memory_config", "node_replay"]
