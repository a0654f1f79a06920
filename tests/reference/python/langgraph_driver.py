"""Runs the generated cases (``tests/reference/platform_cases.py``) through LangGraph's prebuilt agent.

Each case is one ``create_react_agent`` graph with an ``InMemorySaver`` checkpointer, invoked turn by turn
on one thread with the turn's question (the first turn's input led by the system message when the case
has one), and a ``pre_model_hook`` that runs before every model call:

* ``summary`` — langmem's ``SummarizationNode`` (``max_tokens``, ``max_tokens_before_summary``,
  ``max_summary_tokens``, approximate counting) writing ``llm_input_messages``, its running summary kept
  in the state's ``context`` as langmem's documentation sets it up; the summariser is a stub chat model
  that answers ``summary N`` (the N-th summary it wrote);
* ``trim`` — LangGraph's documented trim: ``trim_messages(messages, strategy="last", max_tokens=…,
  token_counter=count_tokens_approximately, start_on="human", end_on=("human", "tool"))`` as
  ``llm_input_messages``.

The agent's model is a stub chat model answering with the turn's scripted replies (a round's tool calls
in one ``AIMessage`` with the text written beside them, the answer as text, "" when it answered
nothing); the tools answer with the call's ``result``. Every message carries an id of its own (the
question ``h<turn>``, replies ``ai<turn>_<round>``, results ``tool_<call id>``), so runs repeat exactly.

Reads ``{"cases": [{name, mode, settings, turns}]}`` on stdin and prints ``{"versions", "outcomes"}``:
per case, per turn, ``calls`` — the messages the model received at each of the turn's model calls (each
recorded as its position in the stored messages when it is one of them: :mod:`.recording`; a summary
as itself) — and ``stored``, the thread's state as LangGraph's API gives it (``values.messages`` as their
``model_dump()``, ``next``, the thread id).
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langmem.short_term import SummarizationNode
from pydantic import Field

from tests.reference.python.recording import refer

warnings.filterwarnings("ignore")  # create_react_agent's deprecation notice (langchain.agents.create_agent)
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph.prebuilt.chat_agent_executor import AgentState  # noqa: E402

THREAD = "conversation"


class Scripted(BaseChatModel):
    """A chat model answering from a list of replies (or ``summary N``), recording what each call received."""

    replies: list[AIMessage] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    summaries: int | None = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "Scripted":
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.received.append([m.model_copy(deep=True) for m in messages])
        if self.summaries is not None:
            self.summaries += 1
            reply = AIMessage(f"summary {self.summaries}")
        else:
            reply = self.replies.pop(0)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def dump(message: BaseMessage) -> dict:
    """A message as LangGraph's API writes it in a thread's state: its ``model_dump()``, as JSON."""
    return json.loads(json.dumps(message.model_dump(), default=str))


def _tools(turns: list[dict]) -> list:
    results = {c["id"]: c["result"] for t in turns for calls in t["rounds"] for c in calls}

    def make(name: str):
        def run(city: str, day: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
            return ToolMessage(results[tool_call_id], tool_call_id=tool_call_id, name=name, id=f"tool_{tool_call_id}")

        run.__name__ = name
        return tool(name, description=f"The {name} tool.")(run)

    return [make(n) for n in sorted({c["name"] for t in turns for calls in t["rounds"] for c in calls})]


class SummaryState(AgentState):
    context: dict[str, Any]


def run_case(case: dict) -> dict:
    settings = case["settings"]
    turns = case["turns"]
    model = Scripted()
    if case["mode"] == "summary":
        hook: Any = SummarizationNode(
            model=Scripted(summaries=0),
            max_tokens=settings["max_tokens"],
            max_tokens_before_summary=settings["max_tokens_before_summary"],
            max_summary_tokens=settings["max_summary_tokens"],
            token_counter=count_tokens_approximately,
            output_messages_key="llm_input_messages",
        )
        graph = create_react_agent(
            model, _tools(turns), pre_model_hook=hook, state_schema=SummaryState, checkpointer=InMemorySaver()
        )
    else:

        def hook(state: dict) -> dict:
            return {
                "llm_input_messages": trim_messages(
                    state["messages"],
                    strategy="last",
                    max_tokens=settings["max_tokens"],
                    token_counter=count_tokens_approximately,
                    start_on="human",
                    end_on=("human", "tool"),
                )
            }

        graph = create_react_agent(model, _tools(turns), pre_model_hook=hook, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": THREAD}}
    out_turns = []
    for number, turn in enumerate(turns, 1):
        model.replies = [
            AIMessage(
                calls[0].get("text", ""),
                id=f"ai{number}_{r}",
                tool_calls=[{"id": c["id"], "name": c["name"], "args": dict(c["args"])} for c in calls],
            )
            for r, calls in enumerate(turn["rounds"])
        ]
        model.replies.append(AIMessage(turn["output"], id=f"ai{number}_{len(turn['rounds'])}"))
        first = len(model.received)
        fed: list[BaseMessage] = [HumanMessage(turn["input"], id=f"h{number}")]
        if number == 1 and settings.get("system"):
            fed.insert(0, SystemMessage(settings["system"], id="system"))
        graph.invoke({"messages": fed}, config)
        out_turns.append({"calls": [[dump(m) for m in call] for call in model.received[first:]]})
    state = graph.get_state(config)
    messages = [dump(m) for m in state.values["messages"]]
    for record in out_turns:
        record["calls"] = [refer(call, messages) for call in record["calls"]]
    return {
        "turns": out_turns,
        "stored": {
            "values": {"messages": messages},
            "next": list(state.next),
            "config": {"configurable": {"thread_id": THREAD}},
        },
    }


def main() -> int:
    payload = json.load(sys.stdin)
    outcomes = {case["name"]: run_case(case) for case in payload["cases"]}
    json.dump(
        {
            "versions": {
                name: version(name) for name in ("langgraph", "langgraph-prebuilt", "langmem", "langchain-core")
            },
            "outcomes": outcomes,
        },
        sys.stdout,
        ensure_ascii=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
