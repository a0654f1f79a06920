"""What-if: the ledger and the prompt a node would have had at a recorded turn under other memory
settings, without calling a model. The history is recomputed from the stored conversation with the
node's config (:func:`core.flow.node_memory.node_memory_config`, the one runs take), and the rest of
the prompt is the recorded one, else rebuilt with the frame builders the runs use — so a what-if with
the recorded settings gives back exactly what the run recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from core.memory.config import MemoryConfig
from core.memory.entries import history_of
from core.memory.strategies import remembers
from core.memory.strategies.dify import DEFAULT_FIDELITY
from core.model.conversation import Conversation
from core.model.ledger import Ledger
from core.model.origins import CURRENT_QUERY
from core.model.tokens import DEMO_MODEL, counter_for, model_supports_vision

from .errors import RunError
from .node_memory import agent_replays_system, node_memory_config, node_replay
from .nodes.llm import llm_settings, node_frame
from .nodes.plugin_agent import plugin_agent_frame, plugin_agent_settings
from .nodes.text_memory import text_frame
from .nodes.tool_agent import agent_settings, system_text, tool_agent_frame, tool_agent_prompt
from .prompt import CHAT, HISTORY_SLOT, HUMAN_AI, TEXT_HISTORY, PromptFrame
from .templates import FileList, VariablePool, render_message

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Flow
    from .records import TurnRecord


def what_if_ledger(
    flow: Flow,
    conversation: Conversation,
    position: int,
    node_id: str,
    override: Mapping[str, Any] | None = None,
    *,
    fidelity: str = DEFAULT_FIDELITY,
    plugin_token_counting: bool = False,
    record: TurnRecord | None = None,
    lazy: bool = False,
) -> Ledger:
    """The ledger node ``node_id`` would have had at the turn at ``position`` under other memory settings.

    No model is called: the history is recomputed from the stored conversation. The rest of the
    prompt (template, query) is taken from ``record``'s run of the node when given, else from the
    turn's stored prompt size (``Turn.meta["prompt_tokens"]``), else estimated by rendering the
    node's template with the turn's query. ``lazy`` as :meth:`Replay.ledger_at` takes it.
    """
    if not 0 <= position < len(conversation.turns):
        raise RunError(
            f"turn position {position} is out of range: the conversation has {len(conversation.turns)} turns"
        )
    ran = record is not None and record.ran(node_id)
    config = node_memory_config(
        flow,
        node_id,
        fidelity=fidelity,
        plugin_token_counting=plugin_token_counting,
        granularity=record.node_run(node_id).granularity if ran else None,
        override=override,
    )
    fixed = _fixed_tokens(flow, conversation, position, node_id, config, record)
    system_prompt = ""
    if flow.node(node_id).type == "tool-agent" and agent_replays_system(config):
        prompt = record.node_run(node_id).prompt if ran else None
        if prompt is not None:
            system_prompt = next((m.content for m in prompt if m.role == "system"), "")
        else:
            frame = _estimated_agent_frame(flow, conversation, position, node_id, counter_for(config.model))
            system_prompt = frame.before[0].content if frame.before else ""
    return node_replay(
        flow, conversation, node_id, config, lambda _position: fixed, system_prompt=system_prompt
    ).ledger_at(position, lazy=lazy)


def _fixed_tokens(
    flow: Flow, conversation: Conversation, position: int, node_id: str, config: MemoryConfig, record: TurnRecord | None
) -> int:
    counter = counter_for(config.model)
    if record is not None and record.ran(node_id):
        run = record.node_run(node_id)
        if (
            run.prompt is not None
            and (run.memory or {}).get("model") == config.model
            and run.fixed_prompt_tokens is not None
        ):
            return run.fixed_prompt_tokens
        if run.prompt is not None and _node_mode(flow, node_id) == CHAT:
            # Another model counts the recorded messages with its own tokenizer.
            return PromptFrame.recorded([m.to_dict() for m in run.prompt], CHAT, counter).fixed_tokens()
        if run.fixed_prompt_tokens is not None:
            return run.fixed_prompt_tokens
    stored = (conversation.turns[position].meta or {}).get("prompt_tokens", {}).get(node_id)
    if stored is not None:
        return int(stored)
    if flow.node(node_id).type == "tool-agent":
        return _estimated_agent_frame(flow, conversation, position, node_id, counter).fixed_tokens()
    if flow.node(node_id).type == "agent":
        return _estimated_plugin_agent_frame(
            flow,
            conversation,
            position,
            node_id,
            counter,
            file_upload=flow.file_upload,
            vision=model_supports_vision(config.model),
        ).fixed_tokens()
    if _text_memory(flow, node_id):
        return _estimated_text_frame(
            flow, conversation, position, node_id, counter, with_history=config.remembers and flow.is_chat
        ).fixed_tokens()
    sys_query = None
    if config.remembers:
        settings = flow.llm(node_id)
        qpt = settings.memory.query_prompt_template if settings.memory is not None else None
        sys_query = qpt or conversation.turns[position].query
    return _estimated_frame(flow, conversation, position, node_id, counter, sys_query).fixed_tokens()


def _node_mode(flow: Flow, node_id: str) -> str:
    """How a node's prompt is laid out: an agent always chats; a Question Classifier puts its history
    as text in its prompt; an LLM node as its model's mode says."""
    node = flow.node(node_id)
    if _text_memory(flow, node_id):
        return TEXT_HISTORY
    return CHAT if node.type in ("tool-agent", "agent") else llm_settings(node).mode


def _turn_pool(conversation: Conversation, position: int) -> VariablePool:
    """The variables known at a turn without its run: the turn's query and system variables only
    (other nodes' outputs and the context are not known here)."""
    turn = conversation.turns[position]
    return VariablePool(
        system={
            "query": turn.query,
            "files": FileList(),
            "conversation_id": conversation.id,
            "dialogue_count": conversation.tree.depth[position],
        }
    )


def _estimated_frame(
    flow: Flow, conversation: Conversation, position: int, node_id: str, counter, sys_query: str | None, **options: Any
) -> PromptFrame:
    """An LLM node's frame at a turn without its recorded prompt: the template rendered with
    :func:`_turn_pool`."""
    pool = _turn_pool(conversation, position)
    return node_frame(
        flow.llm(node_id),
        lambda item: render_message(item.text, item.edition_type, pool, context=""),
        counter,
        sys_query,
        pool,
        **options,
    )


def _estimated_agent_frame(
    flow: Flow, conversation: Conversation, position: int, node_id: str, counter, **options: Any
) -> PromptFrame:
    """An agent node's frame at a turn without its recorded prompt: its system prompt filled with
    :func:`_turn_pool` and the inputs the turn was logged with, and the turn's query."""
    settings = agent_settings(flow.node(node_id))
    turn = conversation.turns[position]
    inputs = turn.meta.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    text = system_text(settings, _turn_pool(conversation, position), inputs)
    return tool_agent_frame(text, turn.query, counter, **options)


def _estimated_plugin_agent_frame(
    flow: Flow, conversation: Conversation, position: int, node_id: str, counter, **options: Any
) -> PromptFrame:
    """A Dify Agent node's frame at a turn without its recorded prompt: its inputs read with
    :func:`_turn_pool` (a variable not known there as nothing); its query there, else the turn's query."""
    settings = plugin_agent_settings(flow.node(node_id))
    return plugin_agent_frame(
        settings,
        _turn_pool(conversation, position),
        counter,
        strict=False,
        query=conversation.turns[position].query,
        **options,
    )


def _estimated_text_frame(
    flow: Flow, conversation: Conversation, position: int, node_id: str, counter, *, with_history: bool, **options: Any
) -> PromptFrame:
    """A Question Classifier's or Parameter Extractor's frame at a turn without its recorded prompt:
    its settings rendered with :func:`_turn_pool`; its query read there too, else the turn's query."""
    return text_frame(
        flow.settings(node_id),
        _turn_pool(conversation, position),
        counter,
        with_history=with_history,
        query=conversation.turns[position].query,
        **options,
    )


def what_if_prompt(
    flow: Flow,
    conversation: Conversation,
    position: int,
    node_id: str,
    recorded: Sequence[Mapping[str, Any]],
    ledger: Ledger,
) -> list[dict]:
    """The prompt node ``node_id`` would have sent at the turn at ``position`` with ``ledger``'s
    history (a what-if ledger), built by the builder runs use: the recorded prompt's frame — a chat
    prompt's messages around its history, a completion prompt's template with the query template and
    role prefixes the ledger's memory sets — with the what-if history put in. No model is called.

    A completion prompt recorded without its template is rebuilt from the node's template rendered
    with the turn's query only (as the fixed-token estimate does). An agent node's prompt is its
    recorded system prompt and query around the what-if history, as its run lays them out."""
    if flow.node(node_id).type == "tool-agent":
        model = ledger.config.get("model") or agent_settings(flow.node(node_id)).model
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        frame = (
            PromptFrame.recorded(recorded, CHAT, counter, **options)
            if recorded
            else _estimated_agent_frame(flow, conversation, position, node_id, counter, **options)
        )
        return [m.to_dict() for m in tool_agent_prompt(frame, history_of(conversation, ledger))]
    if flow.node(node_id).type == "agent":
        model = ledger.config.get("model") or DEMO_MODEL
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        frame = (
            PromptFrame.recorded(recorded, CHAT, counter, keep_empty=True, **options)
            if recorded
            else _estimated_plugin_agent_frame(flow, conversation, position, node_id, counter, **options)
        )
        return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]
    if _text_memory(flow, node_id):
        model = ledger.config.get("model") or flow.settings(node_id).model or DEMO_MODEL
        counter = counter_for(model)
        options = dict(file_upload=flow.file_upload, vision=model_supports_vision(model))
        with_history = remembers(ledger.config) and flow.is_chat
        frame = (
            PromptFrame.recorded(recorded, TEXT_HISTORY, counter, role_prefix=HUMAN_AI, **options) if recorded else None
        )
        if frame is None or (HISTORY_SLOT in frame.template) != with_history:
            # Memory switched on or off: the prompt's history part comes or goes with it.
            frame = _estimated_text_frame(
                flow, conversation, position, node_id, counter, with_history=with_history, **options
            )
        return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]
    settings = flow.llm(node_id)
    model = ledger.config.get("model") or settings.model or DEMO_MODEL
    counter = counter_for(model)
    memory_on = remembers(ledger.config)
    block = settings.memory if memory_on else None
    sys_query = None
    if memory_on:
        query = conversation.turns[position].query if flow.is_chat else None
        sys_query = (block.query_prompt_template if block is not None else None) or query
    options = dict(
        role_prefix=block.role_prefix if block is not None and flow.is_chat else None,
        file_upload=flow.file_upload,
        vision=model_supports_vision(model),
    )
    frame = PromptFrame.recorded(
        recorded, settings.mode, counter, sys_query=sys_query, keep_empty=settings.basic_chat, **options
    )
    if frame is None:
        frame = _estimated_frame(flow, conversation, position, node_id, counter, sys_query, **options)
    elif frame.mode == CHAT and any(m.origin == CURRENT_QUERY for m in frame.after) != bool(sys_query):
        # Memory switched on or off: the memory's query message comes or goes with it.
        after = tuple(m for m in frame.after if m.origin != CURRENT_QUERY)
        if sys_query:
            after = _estimated_frame(flow, conversation, position, node_id, counter, sys_query).after + after
        frame = replace(frame, after=after)
    return [m.to_dict() for m in frame.build(history_of(conversation, ledger))]


def _text_memory(flow: Flow, node_id: str) -> bool:
    """Whether the node puts its memory into its prompt as text lines (Question Classifier, Parameter Extractor)."""
    kind = flow.node(node_id).kind
    return kind is not None and kind.text_memory


__all__ = ["what_if_ledger", "what_if_prompt"]
