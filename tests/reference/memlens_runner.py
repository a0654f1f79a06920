"""Runs a case of :mod:`tests.reference.haystack_cases` through MemLens's :func:`core.flow.nodes.agent_loop.run_agent`,
giving the outcome in the shape :func:`tests.reference.haystack_runner.outcome` gives Haystack's."""

from __future__ import annotations

from core.flow.errors import StateError, ToolConfigError
from core.flow.nodes.agent_loop import PlannerReply, ToolRequest, run_agent
from core.flow.nodes.agent_state import State
from core.flow.nodes.agent_tools import Tool
from tests.reference.haystack_runner import USAGE, encode, schema_of, tool_specs


class ScriptedPlanner:
    def __init__(self, replies: list[dict]):
        self.replies = replies
        self.calls = 0

    def step(self, messages, tools, call_id) -> PlannerReply:
        reply = self.replies[self.calls]
        self.calls += 1
        calls = tuple(
            ToolRequest(f"call_{self.calls}_{i}", name, dict(args))
            for i, (name, args) in enumerate(reply.get("calls") or [])
        )
        return PlannerReply(reply.get("text") or "", calls, usage=dict(USAGE))


def outcome(case: dict, version: int) -> dict:
    try:
        tools = [
            Tool(s["name"], s["name"], s["parameters"], s["function"], s["inputs_from_state"], s["outputs_to_state"])
            for s in tool_specs(case)
        ]
        State(schema_of(case))
        result = run_agent(
            "go",
            tools=tools,
            planner=ScriptedPlanner(case["replies"]),
            schema=schema_of(case),
            system_prompt="sys",
            state_inputs=case.get("state_inputs"),
            max_agent_steps=case.get("max_agent_steps", 100),
            exit_conditions=case.get("exit_conditions") or ("text",),
            version=version,
        )
    except (StateError, ToolConfigError) as e:
        return {"refused": "ValueError", "message": str(e)}
    errors = {s.call_id: s.error is not None for s in result.steps}
    messages = []
    for m in result.messages[2:]:
        entry = {"role": m.role, "text": m.content}
        if m.tool_calls:
            entry["calls"] = [[c.name, __import__("json").loads(c.arguments)] for c in m.tool_calls]
        if m.role == "tool":
            entry["tool"] = m.name
            entry["error"] = errors[m.tool_call_id]
        messages.append(entry)
    skip = {"messages", "last_message", "step_count", "token_usage", "tool_call_counts", "exit_reason"}
    out = {"messages": messages, "state": {k: encode(v) for k, v in result.outputs.items() if k not in skip}}
    for key in ("step_count", "token_usage", "tool_call_counts", "exit_reason"):
        if key in result.outputs:
            out[key] = encode(result.outputs[key])
    return out
