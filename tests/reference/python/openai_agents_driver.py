"""Runs the generated cases (``tests/reference/platform_cases.py``) through the OpenAI Agents SDK.

Each case is one ``SQLiteSession`` (a database file, the case's ``limit`` as its ``SessionSettings``) and
one ``Agent`` whose model is the SDK's own ``ScriptedModel`` (``agents.testing``): for every turn,
``Runner.run(agent, question, session=session)`` runs the real loop — the session's items read and
prepared for the model (``prepare_input_with_session``: the limit, the orphan pass), the tool rounds,
the items saved — and the model answers with the turn's scripted outputs: a ``reasoning`` item before a
round that has one, a ``message`` for the text written beside the calls, one ``function_call`` per call,
and the answer as a ``message`` (an empty answer a message with empty text). Tools answer with the
call's ``result``. A call with an ``approval`` needs one (``needs_approval``): the run stops at it;
``never`` leaves it so, ``after_next`` approves it after the next turn has run (``RunState.approve``,
the run resumed on the same session).

Reads ``{"cases": [{name, mode, settings, turns}]}`` on stdin and prints ``{"versions", "outcomes"}``:
per case, per turn, ``sent`` — the items the model received at the turn's first call, as the SDK sent
them (the turn's question last), each recorded as its position in ``stored`` when it is that item
(:mod:`.recording`) — and ``stopped`` when the run stopped at an approval; and ``stored``, the session's
items at the end (``get_items()`` without a limit), what an import of the session reads.
Plain Python beside the SDK: it runs in the SDK's own environment.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from tests.reference.python.recording import refer

SYSTEM = "You are a travel assistant."


def _round_output(calls: list[dict], turn: int, number: int) -> list:
    first = calls[0]
    out: list = []
    if first.get("reasoning"):
        out.append(
            ResponseReasoningItem(
                id=f"rs_{turn}_{number}",
                type="reasoning",
                summary=[Summary(text=first["reasoning"], type="summary_text")],
            )
        )
    if first.get("text"):
        out.append(assistant_message(first["text"], item_id=f"msg_{turn}_{number}_text"))
    out.extend(function_call(c["name"], c["args"], call_id=c["id"], item_id=f"fc_{c['id']}") for c in calls)
    return out


def _tools(turns: list[dict]) -> list:
    results = {c["id"]: c["result"] for t in turns for calls in t["rounds"] for c in calls}
    waiting = {c["id"] for t in turns for calls in t["rounds"] for c in calls if c.get("approval")}

    async def needs_approval(_ctx: Any, _params: dict, call_id: str) -> bool:
        return call_id in waiting

    def make(name: str):
        async def tool(ctx: ToolContext, city: str, day: int) -> str:
            return results[ctx.tool_call_id]

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        return function_tool(tool, name_override=name, needs_approval=needs_approval)

    return [make(name) for name in sorted({c["name"] for t in turns for calls in t["rounds"] for c in calls})]


async def run_case(case: dict, folder: Path) -> dict:
    settings = case["settings"]
    turns = case["turns"]
    model = ScriptedModel()
    agent = Agent(name="assistant", instructions=SYSTEM, model=model, tools=_tools(turns))
    path = folder / f"{case['name']}.db"
    session = SQLiteSession("conversation", path, session_settings=SessionSettings(limit=settings["limit"]))
    keep = settings.get("input_callback") == "keep"
    config = RunConfig(session_input_callback=(lambda history, new: history + new) if keep else None)
    out_turns: list[dict] = []
    waiting: list[tuple[Any, dict, int]] = []  # (an interrupted run's result, its turn, its number) to approve later

    async def finish(result: Any, turn: dict, number: int) -> None:
        state = result.to_state()
        for interruption in result.interruptions:
            state.approve(interruption)
        model.extend(
            [_round_output(calls, number, r) for r, calls in enumerate(turn["rounds"][1:], 1)]
            + [[assistant_message(turn["output"], item_id=f"msg_{number}")]]
        )
        await Runner.run(agent, state, session=session, run_config=config)

    for number, turn in enumerate(turns, 1):
        stops = any(c.get("approval") for c in (turn["rounds"][0] if turn["rounds"] else []))
        steps = [_round_output(calls, number, r) for r, calls in enumerate(turn["rounds"])]
        model.extend(steps[:1] if stops else steps + [[assistant_message(turn["output"], item_id=f"msg_{number}")]])
        first = len(model.calls)
        result = await Runner.run(agent, turn["input"], session=session, run_config=config)
        record: dict = {"sent": model.calls[first].input}
        if result.interruptions:
            record["stopped"] = True
        out_turns.append(record)
        for earlier in [w for w in waiting if w[2] < number]:
            waiting.remove(earlier)
            await finish(*earlier)
        if stops and turn["rounds"][0][0]["approval"] == "after_next":
            waiting.append((result, turn, number))
    model.assert_complete()
    stored = await SQLiteSession("conversation", path).get_items()
    session.close()
    for record in out_turns:
        record["sent"] = refer(record["sent"], stored)
    return {"turns": out_turns, "stored": stored}


def main() -> int:
    payload = json.load(sys.stdin)
    with tempfile.TemporaryDirectory(prefix="memlens-agents-") as scratch:
        outcomes = {case["name"]: asyncio.run(run_case(case, Path(scratch))) for case in payload["cases"]}
    json.dump(
        {"versions": {"openai-agents": version("openai-agents"), "openai": version("openai")}, "outcomes": outcomes},
        sys.stdout,
        ensure_ascii=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
