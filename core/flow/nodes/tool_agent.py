"""The ``tool-agent`` node: an agent with tools and a per-run state, run as Haystack's Agent runs it
(spec/memory-models.md §A); its settings and its run in a flow.

The agent's parts live beside it: its state (:mod:`core.flow.nodes.agent_state`), its tools and their
state mappings (:mod:`core.flow.nodes.agent_tools`) and the run loop with its planners
(:mod:`core.flow.nodes.agent_loop`). ``haystack_version`` picks the rules: ``3`` (default) follows
haystack-ai 3.4.1, ``2`` the newest 2.x (2.31.0). How earlier turns are replayed into a run is the
history granularity (:mod:`core.flow.granularity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from core.memory.errors import ConfigError
from core.memory.strategies import OFF
from core.memory.strategies.buffer import BufferStrategy

from ..errors import StateError, ToolConfigError, node_error
from ..templates import VariablePool, render, selectors_in
from .agent_loop import DEFAULT_MAX_STEPS
from .agent_state import DEFAULT_HAYSTACK_VERSION, HANDLERS, HAYSTACK_VERSIONS, NODE_OUTPUTS, RESERVED_KEYS, State, parse_type
from .agent_tools import DEMO_SCHEMA, Tool, demo_tools
from .llm import litellm_model

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

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
            raise node_error(node, f"state key {key!r}: handler {handler!r} is unknown; expected one of "
                                   f"{', '.join(HANDLERS)}")
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
                raise node_error(node, f"tool {tool.name}: outputs_to_state must map state keys to "
                                       "{source, handler}")
            for v in outs.values():
                if (v or {}).get("handler") is not None and (v or {})["handler"] not in HANDLERS:
                    raise node_error(node, f"tool {tool.name}: handler {v['handler']!r} is unknown; expected one "
                                           f"of {', '.join(HANDLERS)}")
            outs = {k: {kk: (HANDLERS[vv] if kk == "handler" and vv is not None else vv)
                        for kk, vv in (v or {}).items()} for k, v in outs.items()}
        try:
            tool = tool.with_mappings(ins, outs)
        except ToolConfigError as e:
            raise node_error(node, str(e)) from None
        for key in list(tool.inputs_from_state or {}) + list(tool.outputs_to_state):
            if key not in schema and key != "messages":
                raise node_error(node, f"tool {tool.name} maps state key {key!r}, which the state schema does not "
                                       f"declare; add it to state_schema")
        tools.append(tool)
    memory = data.get("memory", {"strategy": AGENT_DEFAULT})
    if memory in (None, False, OFF, "none"):
        memory = {"strategy": OFF}
    if not isinstance(memory, Mapping):
        raise node_error(node, "'memory' must be {strategy: buffer|dify|window|…, window: N} or off")
    memory = dict(memory)
    if "granularity" in memory:
        raise node_error(node, "granularity is set on the flow (history: {granularity: …}) or on the request, "
                               "not on the node")
    memory.setdefault("strategy", AGENT_DEFAULT)
    from core.memory.replay import MemoryConfig

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
    return AgentSettings(model=model, system_prompt=prompt, tools=tuple(tools), schema=schema, memory=memory,
                         max_agent_steps=steps, exit_conditions=tuple(exits), memory_node=memory_node,
                         haystack_version=version, system_prompt_fill=fill)


__all__ = ["AGENT_DEFAULT", "AgentSettings", "PROMPT_FILLS", "agent_settings", "system_text", "template_selectors"]
