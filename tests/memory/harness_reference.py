"""Runs a compaction fixture through pydantic-ai-harness itself, wired as Dify 1.17's agent runtime
wires it, and records what the model is sent at every request.

The reference side of the differential tests (tests/memory/test_compaction_shipped.py): a ``FunctionModel``
plays the fixture's scripted replies, a ``TieredCompaction`` of ``ClearToolResults(keep_pairs=3)``
then ``SummarizingCompaction(keep_messages=20)`` checks before every model request against
``context × 4 // 5`` (or ``context − max_tokens`` when that is smaller), and each turn's run
starts from the history the previous run left — exactly what the Dify agent runtime stores
between turns. The summariser calls reach the same ``FunctionModel``; they are answered with the
fixture's summary text and their prompt is recorded.

A fixture (JSON)::

    {"context_window": 1200, "max_tokens": 0, "instructions": "...", "summary_chars": 120,
     "turns": [{"prompt": "...", "steps": [
         {"calls": [{"id": "t1a", "name": "lookup", "args": "{...}", "result": "..."}], "usage": [310, 12],
          "text": "optional words said before the calls"},
         {"text": "...", "usage": null}]}]}

``usage`` is what the provider reports for that reply (input, output tokens); ``"auto"`` reports
:func:`provider_input_tokens` of what was sent; ``null`` reports none (so no reply anchors the
estimate).
"""

from __future__ import annotations

import asyncio
import json
import re
from importlib.metadata import version
from pathlib import Path

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from pydantic_ai_harness.compaction import ClearToolResults, SummarizingCompaction, TieredCompaction

from tests.memory.compaction_fixtures import provider_input_tokens, reply_tokens, summary_text, target

SUMMARISER_MARK = "context summarization assistant"
VERSIONS = {"pydantic-ai-harness": version("pydantic-ai-harness"), "pydantic-ai-slim": version("pydantic-ai-slim")}


def normalise(messages) -> list[dict]:
    """pydantic-ai messages as plain data: one dict per message, its parts in order."""
    out = []
    for m in messages:
        parts = []
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                parts.append(["system", p.content])
            elif isinstance(p, UserPromptPart):
                parts.append(["user", p.content if isinstance(p.content, str) else str(p.content)])
            elif isinstance(p, ToolReturnPart):
                parts.append(["tool_return", p.tool_call_id, str(p.content)])
            elif isinstance(p, TextPart):
                parts.append(["text", p.content])
            elif isinstance(p, ToolCallPart):
                parts.append(["tool_call", p.tool_call_id, p.tool_name, p.args])
        out.append({"kind": "request" if isinstance(m, ModelRequest) else "response", "parts": parts})
    return out


def run_fixture(fixture: dict) -> dict:
    """Every model request of every turn: what was sent (after compaction), and every summariser prompt."""
    steps: list[dict] = []
    summaries: list[dict] = []
    script: list[dict] = []
    where = {"turn": 0, "step": 0}

    def model(messages, info: AgentInfo):
        if info.instructions and SUMMARISER_MARK in info.instructions:
            prompt = messages[-1].parts[-1].content
            block = re.search(r"<messages>\n(.*)\n</messages>", prompt, re.S)
            previous = re.search(r"<previous-summary>\n(.*)\n</previous-summary>", prompt, re.S)
            summaries.append(
                {
                    "turn": where["turn"],
                    "step": where["step"],
                    "lines": block.group(1).split("\n") if block and block.group(1) else [],
                    "previous": previous.group(1) if previous else None,
                }
            )
            text = summary_text(len(summaries), fixture.get("summary_chars", 120))
            return ModelResponse(parts=[TextPart(text)], usage=RequestUsage(input_tokens=0, output_tokens=1))
        steps.append({"turn": where["turn"], "step": where["step"], "messages": normalise(messages)})
        reply = script[where["step"]]
        where["step"] += 1
        usage = reply.get("usage")
        if usage == "auto":
            usage = [provider_input_tokens(steps[-1]["messages"], fixture.get("instructions", "")), reply_tokens(reply)]
        usage = RequestUsage(input_tokens=usage[0], output_tokens=usage[1]) if usage else RequestUsage(output_tokens=0)
        if "calls" in reply:
            parts = [TextPart(reply["text"])] if reply.get("text") else []
            parts += [ToolCallPart(c["name"], c["args"], tool_call_id=c["id"]) for c in reply["calls"]]
        else:
            parts = [TextPart(reply["text"])]
        response = ModelResponse(parts=parts, usage=usage)
        if not usage.has_values():
            # FunctionModel fills in its own guess when nothing is reported; "none reported" means none.
            response.usage = RequestUsage()
            response.usage.unmeasured_requests = 1  # type: ignore[attr-defined]
        return response

    results = {c["id"]: c["result"] for t in fixture["turns"] for s in t["steps"] for c in s.get("calls", [])}
    agent = Agent(
        FunctionModel(model),
        instructions=fixture.get("instructions") or None,
        capabilities=[
            TieredCompaction(
                tiers=[
                    ClearToolResults(max_tokens=1, keep_pairs=3),
                    SummarizingCompaction(max_messages=1, keep_messages=20),
                ],
                target_tokens=target(fixture),
            )
        ],
    )
    names = sorted({c["name"] for t in fixture["turns"] for s in t["steps"] for c in s.get("calls", [])})
    for name in names:

        def tool(ctx: RunContext[None], key: str = "") -> str:
            return results[ctx.tool_call_id]

        agent.tool(name=name)(tool)

    history: list = []
    stored: list[list[dict]] = []
    for number, turn in enumerate(fixture["turns"], 1):
        where.update(turn=number, step=0)
        script[:] = turn["steps"]
        result = asyncio.run(
            agent.run(turn["prompt"], message_history=history, usage_limits=UsageLimits(request_limit=None))
        )
        history = result.all_messages()
        stored.append(normalise(history))
    return {"versions": VERSIONS, "steps": steps, "summaries": summaries, "stored": stored}


if __name__ == "__main__":  # pragma: no cover - a debugging aid: print one fixture's recording
    import sys

    print(json.dumps(run_fixture(json.loads(Path(sys.argv[1]).read_text())), indent=1))
