"""Runs the generated cases (``tests/reference/platform_cases.py``) through LlamaIndex's agent workflow.

Each case is one ``FunctionAgent`` (system prompt set, not streaming) over one memory, run turn by turn
with ``agent.run(user_msg=question, memory=memory)``: the workflow puts the question into the memory,
reads it back (``aget``), calls the model, runs the tools and, at the end of the turn, puts the turn's
steps into the memory (``aput_messages``) — LlamaIndex's own code throughout. The memory is
``ChatMemoryBuffer.from_defaults(llm=…, token_limit=…)`` (mode ``buffer``; no limit: the default the
workflow itself creates, 0.75 of the model's context window) or ``Memory.from_defaults(token_limit=…,
chat_history_token_ratio=…, token_flush_size=…)`` (mode ``memory``), counting with LlamaIndex's global
tokenizer. The model is LlamaIndex's ``MockFunctionCallingLLM`` answering with the turn's scripted
replies: a round's tool calls as ``ToolCallBlock``s (beside a ``TextBlock`` when the model wrote
text), the answer as text ("" when it answered nothing).

Reads ``{"cases": [{name, mode, settings, turns}]}`` on stdin and prints ``{"versions", "outcomes"}``:
per case the memory's settings as it resolved them, per turn ``sent`` — the messages the model received
at the turn's first call (their JSON, each recorded as its position in the stored chat when it is one
of its messages: :mod:`.recording`) — and, for ``Memory``, ``archived_after`` (how many messages had
been flushed when the turn ended); and ``stored``, the whole chat as ``SimpleChatStore.persist`` writes it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.tools import FunctionTool

from tests.reference.python.recording import refer

SYSTEM = "You are a travel assistant."
KEY = "conversation"
#: Seconds between the moments a round's parallel calls finish (the order their results are stored in).
FINISH_STEP = 0.05


class Script:
    """The model's replies, turn by turn, and what it received at each turn's first call."""

    def __init__(self) -> None:
        self.replies: list[ChatMessage] = []
        self.first: list[ChatMessage] | None = None
        self.results: dict[tuple[str, str], str] = {}
        self.position: dict[tuple[str, str], int] = {}

    def start(self, turn: dict) -> None:
        self.first = None
        self.replies = []
        for calls in turn["rounds"]:
            blocks: list = [TextBlock(text=calls[0]["text"])] if calls[0].get("text") else []
            blocks += [
                ToolCallBlock(tool_call_id=c["id"], tool_name=c["name"], tool_kwargs=dict(c["args"])) for c in calls
            ]
            self.replies.append(ChatMessage(role="assistant", blocks=blocks))
            for p, c in enumerate(calls):
                key = (c["name"], json.dumps(c["args"], sort_keys=True))
                self.results[key] = c["result"]
                self.position[key] = p
        self.replies.append(ChatMessage(role="assistant", content=turn["output"]))

    def respond(self, messages: list[ChatMessage], **_: Any) -> ChatMessage:
        if self.first is None:
            self.first = [m.model_copy(deep=True) for m in messages]
        return self.replies.pop(0)

    def tool(self, name: str):
        async def run(city: str, day: int) -> str:
            key = (name, json.dumps({"city": city, "day": day}, sort_keys=True))
            # The workflow runs a round's calls at once and stores their results in the order they finish:
            # each call finishes a step after the one before it, so they are stored in call order.
            await asyncio.sleep(FINISH_STEP * self.position[key])
            return self.results[key]

        return FunctionTool.from_defaults(async_fn=run, name=name, description=f"The {name} tool.")


async def run_case(case: dict) -> dict:
    settings = case["settings"]
    script = Script()
    llm = MockFunctionCallingLLM(response_generator=script.respond)
    names = sorted({c["name"] for t in case["turns"] for calls in t["rounds"] for c in calls})
    agent = FunctionAgent(llm=llm, tools=[script.tool(n) for n in names], system_prompt=SYSTEM, streaming=False)
    if case["mode"] == "buffer":
        memory: Any = ChatMemoryBuffer.from_defaults(llm=llm, token_limit=settings["token_limit"])
        resolved = {"token_limit": memory.token_limit}
    else:
        memory = Memory.from_defaults(
            session_id=KEY,
            token_limit=settings["token_limit"],
            chat_history_token_ratio=settings["chat_history_token_ratio"],
            token_flush_size=settings["token_flush_size"],
        )
        resolved = {
            "token_limit": memory.token_limit,
            "chat_history_token_ratio": memory.chat_history_token_ratio,
            "token_flush_size": memory.token_flush_size,
        }
    turns = []
    for turn in case["turns"]:
        script.start(turn)
        await agent.run(user_msg=turn["input"], memory=memory)
        record: dict = {"sent": [m.model_dump(mode="json") for m in script.first or []]}
        if case["mode"] == "memory":
            record["archived_after"] = len(await memory.sql_store.get_messages(KEY, status=MessageStatus.ARCHIVED))
        turns.append(record)
    every = memory.get_all() if case["mode"] == "buffer" else await memory.aget_all()
    # What SimpleChatStore.persist writes. Its own serialiser fails under pydantic 2.14 (the app's pin), so
    # the messages are dumped one by one: the same JSON as persist writes under pydantic 2.13.
    stored = {"store": {KEY: [m.model_dump(mode="json") for m in every]}, "class_name": SimpleChatStore.class_name()}
    for record in turns:
        record["sent"] = refer(record["sent"], stored["store"][KEY])
    return {"settings": resolved, "turns": turns, "stored": stored}


def main() -> int:
    payload = json.load(sys.stdin)
    outcomes = {case["name"]: asyncio.run(run_case(case)) for case in payload["cases"]}
    json.dump(
        {"versions": {"llama-index-core": version("llama-index-core")}, "outcomes": outcomes},
        sys.stdout,
        ensure_ascii=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
