"""Vercel AI SDK UI messages (``useChat``'s ``{id, role, parts}``, as an app stores them) read as the
model messages they stand for: one assistant message per step, each tool part a call of its step
with its output as the call's result, reasoning as reasoning; sources and data parts are not sent.
The messages are written as AI SDK 5 and 4 document them."""

from __future__ import annotations

import json

from core.io import import_text
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT


def read(messages):
    return import_text(json.dumps(messages), name="chat.json").conversations[0]


def kinds(turn):
    return [(m.kind, m.content) for m in turn.messages]


def test_a_multi_step_answer_is_one_message_per_step_with_each_tools_result_after_it():
    conv = read(
        [
            {
                "id": "u1",
                "role": "user",
                "parts": [
                    {"type": "text", "text": "Weather in Porto?"},
                    {"type": "file", "mediaType": "image/png", "url": "data:…"},
                ],
            },
            {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "I should look it up."},
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool-getWeather",
                        "toolCallId": "call_1",
                        "state": "output-available",
                        "input": {"city": "Porto"},
                        "output": {"celsius": 20},
                    },
                    {"type": "step-start"},
                    {"type": "source-url", "sourceId": "s1", "url": "https://example.com"},
                    {"type": "data-weather", "data": {"ignored": True}},
                    {"type": "text", "text": "It is 20 °C in Porto."},
                ],
            },
        ]
    )
    (turn,) = conv.turns
    assert kinds(turn) == [
        (QUERY, "Weather in Porto?\n[image]"),
        (REASONING, "I should look it up."),
        (TOOL_CALL, "Let me check."),
        (TOOL_RESULT, '{"celsius": 20}'),
        (ANSWER, "It is 20 °C in Porto."),
    ]
    call = turn.messages[2].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == ("call_1", "getWeather", {"city": "Porto"})
    assert turn.messages[3].tool_call_id == "call_1"


def test_text_after_tool_calls_is_the_next_step_and_errors_and_dynamic_tools_are_results():
    conv = read(
        [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Book it"}]},
            {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {
                        "type": "dynamic-tool",
                        "toolName": "search",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {"q": "flights"},
                        "output": "2 flights",
                    },
                    {
                        "type": "tool-book",
                        "toolCallId": "c2",
                        "state": "output-error",
                        "input": {"id": 7},
                        "errorText": "sold out",
                    },
                    {"type": "text", "text": "That flight is sold out."},
                ],
            },
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Try again"}]},
            {
                "id": "a2",
                "role": "assistant",
                "parts": [{"type": "tool-book", "toolCallId": "c3", "state": "input-available", "input": {"id": 8}}],
            },
        ]
    )
    first, second = conv.turns
    assert kinds(first) == [
        (QUERY, "Book it"),
        (TOOL_CALL, ""),
        (TOOL_RESULT, "2 flights"),
        (TOOL_RESULT, "sold out"),
        (ANSWER, "That flight is sold out."),
    ]
    assert [c.name for c in first.messages[1].tool_calls] == ["search", "book"]
    assert [m.tool_call_id for m in first.messages[2:4]] == ["c1", "c2"]
    # A call still waiting for its result: the turn has no answer yet.
    assert kinds(second) == [(QUERY, "Try again"), (TOOL_CALL, "")] and second.answer_index is None


def test_ai_sdk_4_messages_with_content_and_tool_invocations():
    conv = read(
        {
            "id": "chat-1",
            "messages": [
                {"id": "u1", "role": "user", "content": "Weather?", "parts": [{"type": "text", "text": "Weather?"}]},
                {
                    "id": "a1",
                    "role": "assistant",
                    "content": "Sunny.",
                    "toolInvocations": [
                        {
                            "state": "result",
                            "toolCallId": "t1",
                            "toolName": "weather",
                            "args": {"city": "Porto"},
                            "result": "sunny",
                        }
                    ],
                },
                {"id": "u2", "role": "user", "content": "And tomorrow?"},
                {
                    "id": "a2",
                    "role": "assistant",
                    "content": "Rain.",
                    "parts": [
                        {
                            "type": "tool-invocation",
                            "toolInvocation": {
                                "state": "result",
                                "toolCallId": "t2",
                                "toolName": "weather",
                                "args": {"day": 2},
                                "result": "rain",
                            },
                        },
                        {"type": "text", "text": "Rain."},
                    ],
                },
            ],
        }
    )
    assert [kinds(t) for t in conv.turns] == [
        [(QUERY, "Weather?"), (TOOL_CALL, ""), (TOOL_RESULT, "sunny"), (ANSWER, "Sunny.")],
        [(QUERY, "And tomorrow?"), (TOOL_CALL, ""), (TOOL_RESULT, "rain"), (ANSWER, "Rain.")],
    ]
    assert [c.id for t in conv.turns for m in t.messages for c in m.tool_calls] == ["t1", "t2"]
