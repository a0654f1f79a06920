"""Runs a case of :mod:`tests.reference.haystack_cases` through the installed Haystack Agent.

Works with haystack-ai 2.x and 3.x. The outcome is plain JSON data (see :func:`outcome`), the
same shape ``tests/flow/test_haystack_reference.py`` builds from a MemLens run.
"""

from __future__ import annotations

import json
from typing import Any

from haystack import component
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool

from tests.reference.haystack_cases import HANDLERS, TOOLS, TYPES

USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


@component
class ScriptedGenerator:
    """A chat generator that answers with the case's replies, one per call."""

    def __init__(self, replies: list[dict]):
        self.replies = replies
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **kwargs: Any) -> dict:
        reply = self.replies[self.calls]
        self.calls += 1
        calls = [
            ToolCall(tool_name=name, arguments=dict(args), id=f"call_{self.calls}_{i}")
            for i, (name, args) in enumerate(reply.get("calls") or [])
        ]
        message = ChatMessage.from_assistant(
            text=reply.get("text") or None, tool_calls=calls or None, meta={"usage": dict(USAGE)}
        )
        return {"replies": [message]}


def schema_of(case: dict) -> dict:
    out = {}
    for key, spec in case["schema"].items():
        entry: dict[str, Any] = {"type": TYPES[spec["type"]]}
        if spec.get("handler"):
            entry["handler"] = HANDLERS[spec["handler"]]
        out[key] = entry
    return out


def tool_specs(case: dict) -> list[dict]:
    """Each tool as ``{name, function, parameters, inputs_from_state, outputs_to_state}`` (handlers resolved)."""
    out = []
    for item in case["tools"]:
        spec = {"name": item} if isinstance(item, str) else item
        function, parameters, ins, outs = TOOLS[spec["name"]]
        ins = spec.get("inputs_from_state", ins)
        outs = spec.get("outputs_to_state", outs)
        outs = {k: {kk: (HANDLERS[vv] if kk == "handler" else vv) for kk, vv in v.items()} for k, v in outs.items()}
        out.append(
            {
                "name": spec["name"],
                "function": function,
                "parameters": parameters,
                "inputs_from_state": None if ins is None else dict(ins),
                "outputs_to_state": outs,
            }
        )
    return out


def encode(value: Any) -> Any:
    """A state value as comparable JSON data."""
    return json.loads(json.dumps(value, default=repr))


def outcome(case: dict) -> dict:
    try:
        tools = []
        for spec in tool_specs(case):
            kwargs = {"outputs_to_state": spec["outputs_to_state"] or None}
            if spec["inputs_from_state"] is not None:
                kwargs["inputs_from_state"] = spec["inputs_from_state"]
            tools.append(
                Tool(
                    name=spec["name"],
                    description=spec["name"],
                    parameters=spec["parameters"],
                    function=spec["function"],
                    **kwargs,
                )
            )
        agent = Agent(
            chat_generator=ScriptedGenerator(case["replies"]),
            tools=tools,
            system_prompt="sys",
            state_schema=schema_of(case),
            exit_conditions=case.get("exit_conditions"),
            max_agent_steps=case.get("max_agent_steps", 100),
        )
        if hasattr(agent, "warm_up"):
            agent.warm_up()
        result = agent.run(messages=[ChatMessage.from_user("go")], **case.get("state_inputs", {}))
    except (ValueError, TypeError) as e:
        return {"refused": type(e).__name__, "message": str(e)}
    messages = []
    for m in result["messages"][2:]:  # after the system prompt and the query
        entry: dict[str, Any] = {"role": m.role.value, "text": m.text or ""}
        if m.tool_calls:
            entry["calls"] = [[c.tool_name, c.arguments] for c in m.tool_calls]
        if m.tool_call_result is not None:
            entry["text"] = m.tool_call_result.result
            entry["tool"] = m.tool_call_result.origin.tool_name
            entry["error"] = bool(m.tool_call_result.error)
        messages.append(entry)
    skip = {"messages", "last_message", "step_count", "token_usage", "tool_call_counts", "exit_reason"}
    out = {"messages": messages, "state": {k: encode(v) for k, v in result.items() if k not in skip}}
    for key in ("step_count", "token_usage", "tool_call_counts", "exit_reason"):
        if key in result:
            out[key] = encode(result[key])
    return out
