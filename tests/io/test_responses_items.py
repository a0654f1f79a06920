"""An OpenAI Agents SDK session — Responses API items, one per row — reads as one message per item.

The items are built with the ``openai`` package's own Responses types and dumped as the SDK stores
them (its ``to_input_item``: the model's fields, unset ones left out), so their shapes are the real ones.
"""

from __future__ import annotations

import json

from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from core.io import import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT


def stored(item) -> dict:
    return item.model_dump(exclude_unset=True)


def reply(text: str, n: int) -> dict:
    return stored(
        ResponseOutputMessage(
            type="message",
            id=f"msg_{n}",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
    )


SESSION = [
    {"role": "user", "content": "Weather in Porto and Lisbon?"},
    stored(
        ResponseReasoningItem(
            type="reasoning", id="rs_1", summary=[{"type": "summary_text", "text": "Two cities: two lookups."}]
        )
    ),
    stored(
        ResponseFunctionToolCall(
            type="function_call",
            call_id="call_1",
            name="weather",
            id="fc_1",
            arguments=json.dumps({"city": "Porto"}),
            status="completed",
        )
    ),
    stored(
        ResponseFunctionToolCall(
            type="function_call",
            call_id="call_2",
            name="weather",
            id="fc_2",
            arguments=json.dumps({"city": "Lisbon"}),
            status="completed",
        )
    ),
    {"type": "function_call_output", "call_id": "call_2", "output": "rain, 17°C"},
    {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "sunny, 24°C"}]},
    reply("Sunny in Porto, rain in Lisbon.", 1),
    {"role": "user", "content": [{"type": "input_text", "text": "Any news about the Porto metro?"}]},
    stored(
        ResponseFunctionWebSearch(
            type="web_search_call",
            id="ws_1",
            status="completed",
            action={"type": "search", "query": "Porto metro news"},
        )
    ),
    reply("A new line opens in May.", 2),
]


def test_every_item_of_a_session_is_one_message_and_each_result_answers_its_call():
    result = import_text(json.dumps(SESSION), name="session.json")
    assert result.format == "openai"
    (conv,) = result.conversations
    messages = [m for t in conv.turns for m in t.messages]
    assert len(messages) == len(SESSION)  # a session's limit counts items: one message each
    first, second = conv.turns
    assert [m.kind for m in first.messages] == [
        QUERY,
        REASONING,
        TOOL_CALL,
        TOOL_CALL,
        TOOL_RESULT,
        TOOL_RESULT,
        ANSWER,
    ]
    assert first.messages[1].content == "Two cities: two lookups."
    calls = {m.tool_calls[0].id: m.tool_calls[0] for m in first.messages if m.tool_calls}
    assert {i: (c.name, json.loads(c.arguments)) for i, c in calls.items()} == {
        "call_1": ("weather", {"city": "Porto"}),
        "call_2": ("weather", {"city": "Lisbon"}),
    }
    # Results come back in their own order, each paired by its call_id.
    assert [(m.tool_call_id, m.content) for m in first.messages if m.kind == TOOL_RESULT] == [
        ("call_2", "rain, 17°C"),
        ("call_1", "sunny, 24°C"),
    ]
    assert first.answer == "Sunny in Porto, rain in Lisbon."
    # A hosted tool ran on OpenAI's side: its call is a step, its action the arguments.
    assert [m.kind for m in second.messages] == [QUERY, TOOL_CALL, ANSWER]
    search = second.messages[1].tool_calls[0]
    assert (search.id, search.name, json.loads(search.arguments)) == (
        "ws_1",
        "web_search",
        {"action": {"type": "search", "query": "Porto metro news"}},
    )
    assert second.query == "Any news about the Porto metro?"
    # Memory replays it: a window of 4 messages at the second turn keeps the first turn's last four items.
    ledger = Replay(conv, MemoryConfig(strategy="window", window=4)).ledger_at(1)
    assert [(e.kind, e.kept) for e in ledger.entries][-4:] == [
        (TOOL_CALL, True),
        (TOOL_RESULT, True),
        (TOOL_RESULT, True),
        (ANSWER, True),
    ]


def test_a_session_dumped_one_item_per_line_reads_the_same():
    lines = "\n".join(json.dumps(item) for item in SESSION)
    as_lines = import_text(lines, name="agent_messages.jsonl").conversations[0]
    as_array = import_text(json.dumps(SESSION), name="session.json").conversations[0]
    assert [
        [(m.role, m.kind, m.content, m.tool_calls, m.tool_call_id) for m in t.messages] for t in as_lines.turns
    ] == [[(m.role, m.kind, m.content, m.tool_calls, m.tool_call_id) for m in t.messages] for t in as_array.turns]
    # A window that starts on a result (a session's limit may cut a call from its output) still reads.
    tail = import_text(json.dumps(SESSION[4:]), name="tail.json").conversations[0]
    assert [m.kind for m in tail.turns[0].messages][:2] == [TOOL_RESULT, TOOL_RESULT]
