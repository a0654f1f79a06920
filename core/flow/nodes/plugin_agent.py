"""Dify's Agent node (``type: agent``): an agent strategy from a plugin, handed Dify's memory.

Read from Dify's source (``api/core/workflow/nodes/agent/runtime_support.py``,
``AgentRuntimeSupport.build_parameters``) and the strategies of the ``langgenius/agent`` plugin
(``agent-strategies/cot_agent/strategies/function_calling.py``):

* The node's ``agent_parameters`` map each strategy parameter to an input: ``constant`` or
  ``mixed`` is a template rendered with the variable pool, ``variable`` a selector whose value is
  taken as it is (a missing variable fails the node).
* Memory: when the node has a ``memory`` block, its model-selector parameter gets
  ``history_prompt_messages`` from ``TokenBufferMemory.get_history_prompt_messages(message_limit=
  memory.window.size or None)`` — the window's size is read whether the window is enabled or not,
  the Question Classifier's rule (:class:`core.flow.nodes.text_memory.ShippedWindowNode`) — and no
  token limit, so the memory's default of 2,000 tokens is the budget whatever the model's context
  (``MemoryConfig.history_budget``; counted only with plugin token counting on, as for every node).
* The ``function_calling`` strategy sends a system message with the instruction, the history, then
  the query as the user's message, then its own tool rounds (:func:`agent_frame`). Nothing filters
  the history on the way: a failed turn's empty answer is sent as an empty message, where the LLM
  node's filter drops it (``MemoryConfig.sends_empty``).

What MemLens does not emulate, and says so on every run (:func:`agent_notes`): tool calls (its
model client has no tools, so the reply is the model's first answer, without tools), and the
wording of other strategies' prompts (``ReAct`` turns the same history into its scratchpad format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from core.model.origins import CURRENT_QUERY
from core.model.tokens import DEFAULT_HISTORY_BUDGET

from ..errors import NodeFailed, node_error
from ..prompt import CHAT, PromptFrame, message
from ..templates import MISSING, NONE, VariablePool, render, value_text
from .llm import memory_settings, read_model_block
from .text_memory import ShippedWindowNode, shipped_call

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun

#: The strategy whose prompt layout MemLens sends (the ``langgenius/agent`` plugin's default).
FUNCTION_CALLING = "function_calling"
#: The budget of the Agent node's memory: it passes no limit, so TokenBufferMemory's default applies.
AGENT_HISTORY_BUDGET = DEFAULT_HISTORY_BUDGET
#: How an input reads its value.
TEMPLATE, VARIABLE = "template", "variable"


@dataclass(frozen=True)
class AgentInput:
    """One of the node's ``agent_parameters``: a template (``constant``, ``mixed``) or a selector (``variable``)."""

    kind: str
    template: str = ""
    selector: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginAgentSettings(ShippedWindowNode):
    """The parts of an Agent node's data that decide what its strategy is handed."""

    strategy: str
    instruction: AgentInput | None
    query: AgentInput | None
    tools: tuple[str, ...]  # the enabled tools' names
    history_budget: ClassVar[int | None] = AGENT_HISTORY_BUDGET
    sends_empty: ClassVar[bool] = True  # the strategy sends the memory's messages as it gets them


def _input(node: "Node", name: str, raw: Any) -> AgentInput:
    if not isinstance(raw, Mapping):
        raise node_error(node, f"agent parameter {name!r} must be {{type, value}}")
    kind = raw.get("type")
    value = raw.get("value")
    if kind == "variable":
        if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
            raise node_error(
                node,
                f"agent parameter {name!r} is a variable, so its value must be a selector such as ['sys', 'query']",
            )
        return AgentInput(VARIABLE, selector=tuple(value))
    if kind in ("constant", "mixed"):
        if not isinstance(value, str):  # the strategy's text parameters (Dify's plugin refuses other values)
            raise node_error(node, f"agent parameter {name!r} must be text")
        return AgentInput(TEMPLATE, template=value)
    raise node_error(node, f"agent parameter {name!r} has type {kind!r}; expected constant, mixed or variable")


def _model_value(raw: Mapping) -> Mapping | None:
    value = raw.get("value") if isinstance(raw, Mapping) else None
    selector = isinstance(value, Mapping) and (
        value.get("type") == "model-selector" or "model" in value and "provider" in value
    )
    return value if selector else None


def plugin_agent_settings(node: "Node") -> PluginAgentSettings:
    """Parse an Agent node's data; a malformed node is a :class:`core.flow.errors.FlowError` naming it."""
    data = node.data
    params = data.get("agent_parameters") or {}
    if not isinstance(params, Mapping):
        raise node_error(node, "'agent_parameters' must be a mapping of parameter name to {type, value}")
    model: Mapping = {}
    for raw in params.values():  # the model-selector parameter, whatever the strategy names it
        found = _model_value(raw)
        if found is not None:
            model = found
            break
    block = read_model_block(node, model, name_key="model", params_name="the agent's 'completion_params'")
    tools_raw = params.get("tools")
    tools: tuple[str, ...] = ()
    if isinstance(tools_raw, Mapping) and isinstance(tools_raw.get("value"), list):
        tools = tuple(
            str(t.get("tool_name") or "unnamed tool")
            for t in tools_raw["value"]
            if isinstance(t, Mapping) and t.get("enabled")
        )  # Dify passes enabled tools only
    instruction = _input(node, "instruction", params["instruction"]) if "instruction" in params else None
    query = _input(node, "query", params["query"]) if "query" in params else None
    return PluginAgentSettings(
        block, memory_settings(node), str(data.get("agent_strategy_name") or ""), instruction, query, tools
    )


def agent_frame(instruction: str, query: str, counter, *, file_upload: bool, vision: bool) -> PromptFrame:
    """What ``function_calling`` sends besides its history: the instruction as the system message,
    the history, then the query as the user's message. An empty instruction or query is left out;
    an empty history message (a failed turn's answer) is sent as it is: no filter runs between the
    memory and the strategy."""
    before = (message("system", instruction, "system", counter),) if instruction else ()
    after = (message("user", query, CURRENT_QUERY, counter),) if query else ()
    return PromptFrame(
        CHAT, counter, before=before, after=after, file_upload=file_upload, vision=vision, keep_empty=True
    )


def agent_notes(settings: PluginAgentSettings) -> list[str]:
    """What a run of this node does not do as Dify does, one line each."""
    notes = []
    if settings.strategy != FUNCTION_CALLING:
        named = f"is {settings.strategy!r}" if settings.strategy else "is not named"
        notes.append(
            f"its strategy {named}: MemLens sends function_calling's layout (the instruction, the history, "
            f"the query); the history is the same, its strategy's own wording is not emulated"
        )
    if settings.tools:
        notes.append(
            f"its tools are not called ({', '.join(settings.tools)}): MemLens's model client has none, so "
            f"the reply is the model's first answer"
        )
    return notes


# -- its run ----------------------------------------------------------------------------------------


def agent_input(value: AgentInput | None, pool: VariablePool, name: str, *, strict: bool = True) -> str:
    """An Agent node's instruction or query as its strategy gets it: a template rendered, or a
    variable's value as text. A missing variable fails the node, as in Dify (``strict``; an estimate
    without the run reads it as nothing)."""
    if value is None:
        return ""
    if value.kind != VARIABLE:
        return render(value.template, pool)
    found = pool.get(list(value.selector))
    if found is MISSING:
        if strict:
            raise NodeFailed(
                f"agent parameter {name!r} reads the variable {'.'.join(value.selector)}, which does not exist"
            )
        return ""
    return "" if found is NONE or found is None else value_text(found)


def plugin_agent_frame(
    settings: PluginAgentSettings, pool: VariablePool, counter, *, strict: bool = True, query: str = "", **options: Any
) -> PromptFrame:
    """A Dify Agent node's frame, its inputs read from ``pool``; ``query`` stands in when its own
    query reads as nothing (an estimate without its run)."""
    return agent_frame(
        agent_input(settings.instruction, pool, "instruction", strict=strict),
        agent_input(settings.query, pool, "query", strict=strict) or query,
        counter,
        **options,
    )


def run_plugin_agent(node: Node, ctx: RunContext, run: NodeRun) -> None:
    """The node's run: its memory's history handed to its strategy, laid out as ``function_calling``
    sends it, and one model call without tools."""
    settings = plugin_agent_settings(node)
    run.notes.extend(agent_notes(settings))
    reply = shipped_call(
        node,
        settings,
        ctx,
        run,
        lambda counter, with_history, **options: plugin_agent_frame(settings, ctx.pool, counter, **options),
    )
    run.outputs = {"text": reply.text, "usage": reply.usage, "files": [], "json": []}
    return None


__all__ = [
    "AGENT_HISTORY_BUDGET",
    "FUNCTION_CALLING",
    "AgentInput",
    "PluginAgentSettings",
    "agent_frame",
    "agent_input",
    "agent_notes",
    "plugin_agent_frame",
    "plugin_agent_settings",
    "run_plugin_agent",
]
