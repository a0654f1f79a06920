"""A chat history LangChain stored reads as the messages LangChain sends for it.

The histories are written by langchain-core itself (``messages_to_dict``, what its file, Redis and SQL
histories store; ``dumpd``, what LangGraph checkpoints hold), and what is expected is what
langchain-openai sends OpenAI for the same messages (its own conversion), read by MemLens's OpenAI
reader: the two imports must agree message by message.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_openai.chat_models.base import _convert_message_to_dict as sent_to_openai

from core.io import FormatError, import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay

HISTORY = [
    SystemMessage("You are a travel assistant. Be brief."),
    HumanMessage("Hi, I'm Dana. What's the weather in Porto and Lisbon?", name="dana"),
    AIMessage(
        "",
        tool_calls=[
            {"name": "weather", "args": {"city": "Porto"}, "id": "call_1"},
            {"name": "weather", "args": {"city": "Lisbon"}, "id": "call_2"},
        ],
    ),
    ToolMessage("sunny, 24°C", tool_call_id="call_1", name="weather"),
    ToolMessage("rain, 17°C", tool_call_id="call_2", name="weather"),
    AIMessage([{"type": "text", "text": "Sunny in Porto, "}, {"type": "text", "text": "rain in Lisbon."}]),
    HumanMessage("Book the Porto train then."),
    AIMessage("Booked: the 9:00 train to Porto.", additional_kwargs={"reasoning_content": "The user chose Porto."}),
    HumanMessage([{"type": "text", "text": "And my name?"}]),
    AIMessageChunk("You are Dana."),
]


def shape(conv):
    return (
        conv.system_prompt,
        [
            [
                (
                    m.role,
                    m.kind,
                    m.content,
                    m.name,
                    [(c.id, c.name, json.loads(c.arguments)) for c in m.tool_calls],
                    m.tool_call_id,
                )
                for m in t.messages
            ]
            for t in conv.turns
        ],
    )


def expected():
    return import_text(json.dumps([sent_to_openai(m) for m in HISTORY]), name="sent.json").conversations[0]


@pytest.mark.parametrize("layout", ["messages_to_dict", "dumpd", "json lines", "messages key"])
def test_a_stored_langchain_history_reads_as_the_messages_langchain_sends(layout):
    stored = messages_to_dict(HISTORY) if layout != "dumpd" else [dumpd(m) for m in HISTORY]
    text = {
        "json lines": "\n".join(json.dumps(m) for m in stored),
        "messages key": json.dumps({"messages": stored}),
    }.get(layout, json.dumps(stored))
    result = import_text(text, name="history.jsonl" if layout == "json lines" else "history.json")
    assert result.format == "openai" and len(result.conversations) == 1
    conv, want = result.conversations[0], expected()
    assert shape(conv) == shape(want)
    assert len(conv.turns) == 3 and [m.kind for m in conv.turns[0].messages] == [
        "query",
        "tool_call",
        "tool_result",
        "tool_result",
        "answer",
    ]
    # The reasoning LangChain keeps beside a reply is not sent with the history, so it is not read.
    assert [m.kind for m in conv.turns[1].messages] == ["query", "answer"]
    # Memory replays it like any other conversation: the last turn keeps what the window holds (Dify's
    # window of 2 rows, the current turn's one of them).
    ledger = Replay(conv, MemoryConfig(window=2)).ledger_at(2)
    assert [(e.turn, e.role) for e in ledger.kept] == [(2, "user"), (2, "assistant")]


def test_langchain_s_older_shapes_read_too():
    """A function message (before tool calls) is a tool result; a chat message keeps its own role; tool
    calls kept only in ``additional_kwargs`` (older OpenAI integrations) are the calls."""
    openai_call = {"id": "call_9", "type": "function", "function": {"name": "calc", "arguments": '{"x": 6}'}}
    history = [
        HumanMessage("6 times 7?"),
        AIMessage("", additional_kwargs={"tool_calls": [openai_call]}),
        FunctionMessage("42", name="calc"),
        ChatMessage("It is 42.", role="assistant"),
    ]
    conv = import_text(json.dumps(messages_to_dict(history)), name="old.json").conversations[0]
    (turn,) = conv.turns
    assert [(m.role, m.kind, m.content) for m in turn.messages] == [
        ("user", "query", "6 times 7?"),
        ("assistant", "tool_call", ""),
        ("tool", "tool_result", "42"),
        ("assistant", "answer", "It is 42."),
    ]
    assert [(c.id, c.name, c.arguments) for c in turn.messages[1].tool_calls] == [("call_9", "calc", '{"x": 6}')]
    assert turn.messages[2].tool_call_id == "call_9"


def test_a_langchain_message_with_a_role_no_model_takes_is_refused_naming_it():
    stored = messages_to_dict([HumanMessage("hi"), ChatMessage("harsh", role="critic")])
    with pytest.raises(FormatError, match="message 1 has an unknown role 'critic'"):
        import_text(json.dumps(stored), name="h.json")
