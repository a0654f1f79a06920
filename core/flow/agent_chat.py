"""A Dify Agent app export (``app.mode: agent-chat``) read as the one-agent Chatflow Dify runs.

An Agent app has no graph: its ``model_config`` holds a model, an instruction (``pre_prompt``), the
inputs' form, the app's features and ``agent_mode`` — the tools and a strategy. Dify picks the
runner in two steps:

* ``AgentConfigManager.convert`` (``api/core/app/app_config/easy_ui_based_app/agent/manager.py``):
  ``agent_mode.strategy`` ``function_call`` is function calling; ``cot`` and ``react`` are ReAct;
  any other value (older apps) is function calling when the model's provider is ``openai``, else
  ReAct. An ``agent_mode`` without ``enabled`` or without a strategy, or with the strategy
  ``router`` or ``react_router``, makes no agent at all, and every call of the app fails.
* ``AgentChatAppRunner.run`` (``api/core/app/apps/agent_chat/app_runner.py``): a model whose schema
  lists tool calling runs function calling whatever the export says. MemLens reads that from
  litellm's model map (:func:`core.model.tokens.model_supports_tool_calls`); for a model the map does
  not know, the export's strategy stands and a warning says so.

The runner's first model call is the one MemLens runs (a ``tool-agent`` node with memory strategy
``dify_agent`` and that runner as its ``agent_strategy``, :mod:`core.memory.strategies.dify_agent`):
the instruction as the system message, the history as that runner sends it, then the query.

* Function calling (``fc_agent_runner.py``, ``_organize_prompt_messages``): the instruction is sent
  as written, its ``{{name}}`` slots not filled (the node's ``system_prompt_fill: none``).
* ReAct (``cot_agent_runner.py``, ``_fill_in_inputs_from_external_data_tools``): each input's
  ``{{name}}`` slot is replaced by ``str`` of its value — ``None`` for an optional input given no value
  and no default — and nothing else is filled (``system_prompt_fill: inputs``). Dify then writes the
  instruction into its ReAct prompt with the tools' descriptions; that prompt is not sent here (a
  warning says so), so the budget shown is larger than Dify's by its size. A ReAct agent on a
  completion model writes its history as text in Dify's own template, which MemLens does not
  emulate: refused.

The app's tools are Dify's (search engines, plugins, knowledge): none is run, and the model answers
without them. The Service API serves an Agent app as Dify does: streaming only (blocking is 400
``Agent Chat App does not support blocking mode``), the answer in ``agent_message`` events, and an
unknown conversation id 404 (:mod:`core.api.routes.chat`).
"""

from __future__ import annotations

from typing import Any, Mapping

from core.memory.strategies.dify_agent import FUNCTION_CALL, REACT, DifyAgentStrategy
from core.model.tokens import model_supports_tool_calls

from .basic_chat import app_features, not_run, read_form
from .errors import FlowError
from .nodes.llm import litellm_model

#: The app mode of an Agent app export.
AGENT_CHAT = "agent-chat"
#: Dify's refusal of a blocking request to an Agent app (HTTP 400 ``invalid_param``).
BLOCKING_REFUSED = "Agent Chat App does not support blocking mode"
#: ``agent_mode.strategy`` values with which Dify builds no agent.
_ROUTERS = ("router", "react_router")
_RUNNER_WORDS = {FUNCTION_CALL: "function-calling", REACT: "ReAct"}


def runner_of(agent_mode: Mapping[str, Any], provider: str, model: str) -> tuple[str, str | None]:
    """Which runner Dify gives an Agent app, ``(agent_strategy, warning or None)``; ``model`` is the
    litellm name its tool calling is looked up by."""
    exported = agent_mode.get("strategy")  # the export's runner, not a memory system
    if exported == "function_call":
        chosen = FUNCTION_CALL
    elif exported in ("cot", "react"):
        chosen = REACT
    else:  # an older app's value: function calling for OpenAI's models
        chosen = FUNCTION_CALL if provider == "openai" else REACT
    calls_tools = model_supports_tool_calls(model)
    if calls_tools:
        return FUNCTION_CALL, None
    if calls_tools is None and chosen == REACT:
        return REACT, (
            f"MemLens does not know whether {model} calls tools: run with the export's strategy, "
            f"ReAct; Dify runs function calling for a model that calls tools (choose it as the agent "
            f"runner in the config editor)"
        )
    return chosen, None


def read_agent_chat(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The parts of a :class:`core.flow.graph.Flow` an Agent app export makes: ``nodes`` (raw node data
    by id), ``edges``, ``features`` and ``warnings``; a :class:`FlowError` when it cannot be run."""
    config = data.get("model_config")
    if not isinstance(config, Mapping):
        raise FlowError(f"{name}: an Agent app export (app.mode agent-chat) needs a 'model_config' mapping")
    model = config.get("model")
    if not isinstance(model, Mapping) or not model.get("name"):
        raise FlowError(f"{name}: 'model_config.model' must name the agent's model (provider, name, mode)")
    agent_mode = config.get("agent_mode")
    if (
        not isinstance(agent_mode, Mapping)
        or "enabled" not in agent_mode
        or not agent_mode.get("strategy")
        or agent_mode.get("strategy") in _ROUTERS
    ):
        raise FlowError(
            f"{name}: 'model_config.agent_mode' needs 'enabled' and a strategy (function_call or react), "
            f"without which Dify makes no agent and fails every call: choose the agent's mode in Dify "
            f"and export the app again"
        )
    instruction = config.get("pre_prompt") or ""
    if not isinstance(instruction, str):
        raise FlowError(f"{name}: 'model_config.pre_prompt' (the agent's instruction) must be text")
    provider, model_name = str(model.get("provider") or ""), str(model["name"])
    runner, doubt = runner_of(agent_mode, provider.split("/")[-1], litellm_model(provider, model_name))
    if runner == REACT and (model.get("mode") or "chat") != "chat":
        raise FlowError(
            f"{name}: this agent runs ReAct on a completion model, whose history Dify writes into its own "
            f"prompt template, which MemLens does not emulate; choose a chat model for the agent in Dify"
        )
    variables, warnings = read_form(config.get("user_input_form"), name)
    max_tokens = (model.get("completion_params") or {}).get("max_tokens") or 0
    agent = {
        "type": "tool-agent",
        "title": "Agent",
        "model": {"provider": provider, "name": model_name},
        # Function calling sends the instruction as written; ReAct fills each input's {{name}} slot.
        "system_prompt": instruction,
        "system_prompt_fill": "inputs" if runner == REACT else "none",
        "tools": [],
        "memory": {"strategy": DifyAgentStrategy.name, "agent_strategy": runner, "max_tokens": max_tokens},
    }
    nodes = {
        "start": {"type": "start", "title": "Start", "variables": variables},
        "agent": agent,
        "answer": {"type": "answer", "title": "Answer", "answer": "{{#agent.text#}}"},
    }
    warnings.insert(
        0,
        f"a Dify Agent app: run as its {_RUNNER_WORDS[runner]} agent's first model call — the "
        f"instruction as the system message, then the history as that runner sends it (memory "
        f"dify_agent), then the query",
    )
    if doubt:
        warnings.append(doubt)
    if runner == REACT:
        warnings.append(
            "Dify writes the instruction into its ReAct prompt with the tools' descriptions; that prompt "
            "is not sent here, so the budget shown is larger than Dify's by its size"
        )
    # A tool as Dify reads one: four keys or more (an older knowledge entry has one) and enabled.
    tools = [t for t in agent_mode.get("tools") or [] if isinstance(t, Mapping) and len(t) >= 4 and t.get("enabled")]
    if tools:
        names = ", ".join(str(t.get("tool_name")) for t in tools)
        warnings.append(
            f"its {len(tools)} tool{'s' if len(tools) != 1 else ''} ({names}) not run: the model "
            f"answers without {'them' if len(tools) != 1 else 'it'}"
        )
    return {
        "nodes": nodes,
        "edges": [("start", "agent"), ("agent", "answer")],
        "features": app_features(config),
        "warnings": warnings + not_run(config),
    }
