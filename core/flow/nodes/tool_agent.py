"""The ``tool-agent`` node: an agent with tools and a per-run state, run as Haystack's Agent runs it
(spec/memory-models.md §A); its settings and its run in a flow.

The agent's parts live beside it: its state (:mod:`core.flow.nodes.agent_state`), its tools and their
state mappings (:mod:`core.flow.nodes.agent_tools`) and the run loop with its planners
(:mod:`core.flow.nodes.agent_loop`). ``haystack_version`` picks the rules: ``3`` (default) follows
haystack-ai 3.4.1, ``2`` the newest 2.x (2.31.0). How earlier turns are replayed into a run is the
history granularity (:mod:`core.flow.granularity`).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from core.llm.errors import LLMError
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import OFF
from core.memory.strategies.buffer import BufferStrategy
from core.memory.strategies.compaction import ShippedRunHook, recorded_summaries
from core.memory.summarize import ModelSectionSummarizer
from core.model.conversation import QUERY, Message
from core.model.origins import CURRENT_QUERY, LONG_TERM_MEMORY, SYSTEM
from core.model.tokens import counter_for, model_supports_vision

from ..context import node_history
from ..errors import GranularityError, NodeFailed, StateError, ToolConfigError, node_error
from ..granularity import resolve_granularity
from ..node_memory import agent_replays_system, node_memory_config
from ..prompt import CHAT, PromptFrame, PromptMessage, history_messages, message
from ..templates import MISSING, NONE, VariablePool, render, selectors_in
from .agent_loop import DEFAULT_MAX_STEPS, DemoPlanner, ModelPlanner, planner_for, run_agent
from .agent_state import (
    DEFAULT_HAYSTACK_VERSION,
    HANDLERS,
    HAYSTACK_VERSIONS,
    NODE_OUTPUTS,
    RESERVED_KEYS,
    State,
    parse_type,
)
from .agent_tools import DEMO_SCHEMA, Tool, demo_tools
from .llm import litellm_model
from .window_memory import window_source

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun

#: An agent's memory when its node names none: the whole thread.
AGENT_DEFAULT = BufferStrategy.name


@dataclass(frozen=True)
class AgentSettings:
    """A ``tool-agent`` node's settings (see :func:`agent_settings`)."""

    model: str
    system_prompt: str
    tools: tuple[Tool, ...]
    schema: dict
    memory: dict  # MemoryConfig fields for replaying earlier turns (granularity excluded)
    max_agent_steps: int
    exit_conditions: tuple[str, ...]
    memory_node: str | None = None
    haystack_version: int = DEFAULT_HAYSTACK_VERSION
    system_prompt_fill: str = "template"  # one of PROMPT_FILLS


#: How a ``tool-agent`` node's ``system_prompt`` becomes its system message (``system_prompt_fill``):
#: ``template`` renders it as a workflow template (``{{#node.var#}}``); ``none`` sends it as written, as a
#: Dify Agent app's function-calling runner sends its instruction; ``inputs`` replaces each start input's
#: ``{{name}}``, as that app's ReAct runner does (:func:`system_text`).
PROMPT_FILLS = ("template", "none", "inputs")


def system_text(settings: AgentSettings, pool: VariablePool, inputs: Mapping[str, Any]) -> str:
    """The system message an agent sends: its ``system_prompt`` filled as ``system_prompt_fill`` says.
    ``inputs`` is the start form's values as the run took them. For ``inputs`` this is Dify's
    ``CotAgentRunner._fill_in_inputs_from_external_data_tools``: every input in form order, its
    ``{{name}}`` replaced by ``str(value)`` — so an optional input not given and without a default
    reads ``None`` — and nothing else (a ``{{#…#}}`` stays as written)."""
    prompt = settings.system_prompt
    if not prompt or settings.system_prompt_fill == "none":
        return prompt
    if settings.system_prompt_fill == "inputs":
        for name, value in inputs.items():
            prompt = prompt.replace(f"{{{{{name}}}}}", str(value))
        return prompt
    return render(prompt, pool)


def template_selectors(settings: AgentSettings) -> list[tuple[str, ...]]:
    """The variables an agent's system prompt reads when rendered (none unless it is a template)."""
    return selectors_in(settings.system_prompt) if settings.system_prompt_fill == "template" else []


def agent_settings(node: "Node") -> AgentSettings:
    """Read a ``tool-agent`` node::

    - id: agent
      type: tool-agent
      model: memlens/demo
      system_prompt: You are a helpful agent.      # a template ({{#retrieve.text#}} works)
      system_prompt_fill: template                 # none: as written; inputs: {{name}} of start inputs
      tools: [calculator, note, list_notes, lookup]  # or {name, inputs_from_state, outputs_to_state}
      state_schema: {visits: {type: int, handler: add_numbers}}  # added to the demo tools' keys
      lookup_table: {flight AA100: on time}
      memory: {strategy: buffer}                   # how earlier turns are replayed; `off` for none
      max_agent_steps: 10
      exit_conditions: [text]
      haystack_version: 3                          # 2: the newest Haystack 2.x's rules
    """
    data = node.data
    model = data.get("model") or "memlens/demo"
    if isinstance(model, Mapping):
        model = litellm_model(str(model.get("provider") or ""), str(model.get("name") or "")) or "memlens/demo"
    if not isinstance(model, str):
        raise node_error(node, "'model' must be a model name such as memlens/demo or openai/gpt-4o-mini")
    prompt = data.get("system_prompt", "")
    if not isinstance(prompt, str):
        raise node_error(node, "'system_prompt' must be text")
    fill = data.get("system_prompt_fill", "template")
    if fill not in PROMPT_FILLS:
        raise node_error(node, f"'system_prompt_fill' must be one of {', '.join(PROMPT_FILLS)}")
    table = data.get("lookup_table")
    if table is not None and not isinstance(table, Mapping):
        raise node_error(node, "'lookup_table' must be a mapping of keys to values")
    available = demo_tools(table)
    raw_tools = data.get("tools", list(available))
    if not isinstance(raw_tools, list):
        raise node_error(node, "'tools' must be a list of tool names or {name, inputs_from_state, outputs_to_state}")
    schema: dict[str, dict[str, Any]] = {k: dict(v) for k, v in DEMO_SCHEMA.items()}
    raw_schema = data.get("state_schema") or {}
    if not isinstance(raw_schema, Mapping):
        raise node_error(node, "'state_schema' must map state keys to {type, handler}")
    for key, spec in raw_schema.items():
        if key in RESERVED_KEYS or key in NODE_OUTPUTS:
            raise node_error(node, f"state key {key!r} is reserved; choose another name")
        if not isinstance(spec, Mapping) or "type" not in spec:
            raise node_error(node, f"state key {key!r} needs {{type: ...}} (e.g. list[str], int, str | None)")
        try:
            t = parse_type(str(spec["type"]))
        except StateError as e:
            raise node_error(node, f"state key {key!r}: {e}") from None
        handler = spec.get("handler")
        if handler is not None and handler not in HANDLERS:
            raise node_error(
                node, f"state key {key!r}: handler {handler!r} is unknown; expected one of {', '.join(HANDLERS)}"
            )
        schema[str(key)] = {"type": t, "handler": HANDLERS[handler] if handler else None}
    try:
        State(schema)
    except StateError as e:
        raise node_error(node, str(e)) from None
    tools = []
    for item in raw_tools:
        spec = {"name": item} if isinstance(item, str) else item
        if not isinstance(spec, Mapping) or spec.get("name") not in available:
            name = spec.get("name") if isinstance(spec, Mapping) else spec
            raise node_error(node, f"unknown tool {name!r}; the demo tools are {', '.join(available)}")
        tool = available[spec["name"]]
        ins = spec.get("inputs_from_state")
        outs = spec.get("outputs_to_state")
        if ins is not None and not isinstance(ins, Mapping):
            raise node_error(node, f"tool {tool.name}: inputs_from_state must map state keys to parameter names")
        if outs is not None:
            if not isinstance(outs, Mapping) or not all(isinstance(v, Mapping) or v is None for v in outs.values()):
                raise node_error(node, f"tool {tool.name}: outputs_to_state must map state keys to {{source, handler}}")
            for v in outs.values():
                if (v or {}).get("handler") is not None and (v or {})["handler"] not in HANDLERS:
                    raise node_error(
                        node,
                        f"tool {tool.name}: handler {v['handler']!r} is unknown; expected one of {', '.join(HANDLERS)}",
                    )
            outs = {
                k: {kk: (HANDLERS[vv] if kk == "handler" and vv is not None else vv) for kk, vv in (v or {}).items()}
                for k, v in outs.items()
            }
        try:
            tool = tool.with_mappings(ins, outs)
        except ToolConfigError as e:
            raise node_error(node, str(e)) from None
        for key in list(tool.inputs_from_state or {}) + list(tool.outputs_to_state):
            if key not in schema and key != "messages":
                raise node_error(
                    node,
                    f"tool {tool.name} maps state key {key!r}, which the state schema does not "
                    f"declare; add it to state_schema",
                )
        tools.append(tool)
    memory = data.get("memory", {"strategy": AGENT_DEFAULT})
    if memory in (None, False, OFF, "none"):
        memory = {"strategy": OFF}
    if not isinstance(memory, Mapping):
        raise node_error(node, "'memory' must be {strategy: buffer|dify|window|…, window: N} or off")
    memory = dict(memory)
    if "granularity" in memory:
        raise node_error(
            node, "granularity is set on the flow (history: {granularity: …}) or on the request, not on the node"
        )
    memory.setdefault("strategy", AGENT_DEFAULT)
    from core.memory.config import MemoryConfig

    try:
        MemoryConfig.from_dict({**memory, "model": memory.get("model", model)})
    except (ConfigError, TypeError) as e:
        raise node_error(node, f"memory: {e}") from None
    steps = data.get("max_agent_steps", DEFAULT_MAX_STEPS)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise node_error(node, f"max_agent_steps {steps!r} must be a whole number, 1 or more")
    exits = data.get("exit_conditions", ["text"])
    if not isinstance(exits, list) or not exits or not all(isinstance(x, str) for x in exits):
        raise node_error(node, "exit_conditions must be a list such as [text] or [text, calculator]")
    unknown = [x for x in exits if x != "text" and x not in {t.name for t in tools}]
    if unknown:
        raise node_error(node, f"exit condition {unknown[0]!r} is neither 'text' nor one of the node's tools")
    memory_node = data.get("memory_node")
    if memory_node is not None and not isinstance(memory_node, str):
        raise node_error(node, "'memory_node' must be the id of a window-memory node")
    version = data.get("haystack_version", DEFAULT_HAYSTACK_VERSION)
    if isinstance(version, str) and version.strip().isdigit():
        version = int(version)
    if isinstance(version, bool) or version not in HAYSTACK_VERSIONS:
        raise node_error(node, f"haystack_version {version!r} is unknown; expected 3 (default) or 2")
    return AgentSettings(
        model=model,
        system_prompt=prompt,
        tools=tuple(tools),
        schema=schema,
        memory=memory,
        max_agent_steps=steps,
        exit_conditions=tuple(exits),
        memory_node=memory_node,
        haystack_version=version,
        system_prompt_fill=fill,
    )


# -- its run ----------------------------------------------------------------------------------------


def tool_agent_frame(
    system_text: str, query: str, counter, *, recalled: bool = False, file_upload: bool = False, vision: bool = False
) -> PromptFrame:
    """What an agent node sends besides its history: its rendered system prompt (from long-term
    memory when it reads a memory-retrieve node) and the query message."""
    before = (message("system", system_text, LONG_TERM_MEMORY if recalled else SYSTEM, counter),) if system_text else ()
    return PromptFrame(
        CHAT,
        counter,
        before=before,
        after=(message("user", query, CURRENT_QUERY, counter),),
        file_upload=file_upload,
        vision=vision,
    )


def tool_agent_prompt(frame: PromptFrame, history: Sequence[Message]) -> list[PromptMessage]:
    """An agent node's first model request: its frame around the history, every message kept (an
    agent sends an empty query or a tool call's empty text as it is)."""
    return [
        *frame.before,
        *history_messages(history, frame.counter, file_upload=frame.file_upload, vision=frame.vision),
        *frame.after,
    ]


def run_tool_agent(node: Node, ctx: RunContext, run: NodeRun) -> None:
    settings = agent_settings(node)
    try:
        granularity, source = resolve_granularity(ctx.granularity, ctx.flow.history.get("granularity"))
    except GranularityError as e:
        raise NodeFailed(str(e)) from None
    run.granularity, run.granularity_source = granularity, source
    run.model = settings.model
    override = ctx.overrides.get(node.id)
    # A what-if override replays as usual, as an LLM node's does.
    window = window_source(node, ctx) if settings.memory_node and not override else None
    if window is not None:
        config = window[1].with_(model=settings.model)
    else:
        config = node_memory_config(
            ctx.flow,
            node.id,
            granularity=ctx.granularity,
            fidelity=ctx.fidelity,
            plugin_token_counting=ctx.plugin_token_counting,
            override=override,
        )
    run.memory = config.to_dict()
    run.memory_override = copy.deepcopy(dict(override)) if override else None
    counter = counter_for(config.model)
    instruction = system_text(settings, ctx.pool, ctx.inputs)
    raw_query = ctx.pool.get(["sys", "query"])
    query = "" if raw_query in (MISSING, NONE) else str(raw_query)
    read = {s[0] for s in template_selectors(settings)}
    recalled = bool(read & set(ctx.recalled))
    frame = tool_agent_frame(
        instruction,
        query,
        counter,
        recalled=recalled,
        file_upload=ctx.flow.file_upload,
        vision=model_supports_vision(config.model),
    )
    fixed_total = frame.fixed_tokens()
    compaction_hook = None
    planner = planner_for(ctx.client(), settings.model)
    if window is None and agent_replays_system(config):
        # Dify 1.17 checks before every model request: the ledger made the first check, the hook makes the rest.
        # A real model writes the summaries itself, as Dify's runtime has the run's model do.
        summarizer = (
            ModelSectionSummarizer(planner.client, settings.model) if isinstance(planner, ModelPlanner) else None
        )
        replay = Replay(
            ctx.conversation,
            config,
            system_prompt=instruction,
            has_thread=ctx.flow.is_chat,
            prompt_tokens=lambda _position: fixed_total,
            summarizer=summarizer,
        )
        ledger = replay.ledger_at(ctx.position)
        history = replay.history_messages(ledger)
        compaction_hook = ShippedRunHook(replay, ctx.position, Message("user", query, QUERY, "query"), instruction)
    else:
        ledger, history, _ = node_history(ctx, config, window, fixed_total)
    run.ledger = ledger
    run.prompt = tool_agent_prompt(frame, history)
    if recalled:
        run.recalled = [
            {
                "node_id": h,
                "id": r["id"],
                "memory": r["memory"],
                "score": r["score"],
                "tokens": counter.text(r["memory"]),
            }
            for h in sorted(read & set(ctx.recalled))
            for r in ctx.recalled[h]
        ]
    started = time.perf_counter()
    try:
        result = run_agent(
            query,
            tools=settings.tools,
            planner=planner,
            schema=settings.schema,
            system_prompt=instruction,
            history=history,
            max_agent_steps=settings.max_agent_steps,
            exit_conditions=settings.exit_conditions,
            ref_prefix=f"{ctx.turn_id}:{node.id}",
            version=settings.haystack_version,
            before_model=compaction_hook,
        )
    except LLMError as e:
        raise NodeFailed(str(e)) from None
    finally:
        run.latency_ms = (time.perf_counter() - started) * 1000
        if compaction_hook is not None:  # written before a failure too: they were sent
            run.summaries = copy.deepcopy(recorded_summaries(replay).written) or None
    run.steps = [s.to_dict() for s in result.steps]
    if compaction_hook is not None:
        for request, event in compaction_hook.events:
            record = {"turn": ctx.turn_number, "request": request, "in_tool_loop": True, **event.to_dict()}
            ledger.compactions.append(record)
            for step in run.steps:
                if step["step"] == request:  # the tool calls of the reply this compacted request got
                    step["compaction"] = record
    run.reply = result.text
    run.usage = result.usage
    run.model_called = "memlens/demo" if isinstance(planner, DemoPlanner) else settings.model
    run.notes.extend(result.notes)
    ctx.intermediate.extend(result.intermediate)
    # The state is gone after the run; its public keys are the node's outputs (Haystack's output dict).
    # Haystack 3.x outputs its run metadata itself; with 2.x MemLens reports the same facts.
    run.outputs = {
        "step_count": result.step_count,
        "exit_reason": result.exit_reason,
        "tool_call_counts": result.tool_call_counts,
        **result.outputs,
        "text": result.text,
        "usage": result.usage,
    }


__all__ = [
    "AGENT_DEFAULT",
    "AgentSettings",
    "PROMPT_FILLS",
    "agent_settings",
    "run_tool_agent",
    "system_text",
    "template_selectors",
    "tool_agent_frame",
    "tool_agent_prompt",
]
