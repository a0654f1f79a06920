"""An Anthropic Messages API request reads as the OpenAI conversation it was translated from.

The Anthropic bodies are written by litellm's own translation (``anthropic_messages_pt``, what it
sends Anthropic for OpenAI-format messages; the system messages go beside them, as litellm's
Anthropic config puts them): tool calls become ``tool_use`` blocks, their results ``tool_result``
blocks in a user message. Imported, both forms must give the same turns, calls and results.
"""

from __future__ import annotations

import json

import pytest
from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

from core.io import FormatError, import_text
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT
from tests.builders import translated_reads_alike


def anthropic_body(messages: list[dict]) -> dict:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [m for m in messages if m["role"] != "system"]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": system,
        "messages": anthropic_messages_pt(rest, model="claude-sonnet-4-5", llm_provider="anthropic"),
    }


def shape(conv):
    return (
        conv.system_prompt,
        [
            [
                (
                    m.role,
                    m.kind,
                    m.content,
                    [(c.id, c.name, json.loads(c.arguments or "{}")) for c in m.tool_calls],
                    m.tool_call_id,
                )
                for m in t.messages
            ]
            for t in conv.turns
        ],
    )


def test_tau_bench_conversations_sent_to_anthropic_read_as_they_were_written():
    calls = translated_reads_alike(anthropic_body)
    assert calls >= 10  # the sample calls tools: the blocks were read, not only the text


def test_anthropic_blocks_thinking_parallel_calls_and_text_beside_results():
    body = {
        "system": [{"type": "text", "text": "You are a travel assistant."}],
        "messages": [
            {"role": "user", "content": "Weather in Porto and Lisbon?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two cities.", "signature": "sig"},
                    {"type": "text", "text": "Checking both."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Porto"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Lisbon"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "rain"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": False},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Sunny in Porto, rain in Lisbon."}]},
        ],
    }
    conv = import_text(json.dumps(body), name="claude-request.json").conversations[0]
    assert conv.system_prompt == "You are a travel assistant."
    (turn,) = conv.turns
    assert [(m.kind, m.content, m.tool_call_id, m.ref) for m in turn.messages] == [
        (QUERY, "Weather in Porto and Lisbon?", None, 0),
        (REASONING, "Two cities.", None, "1:reasoning"),
        (TOOL_CALL, "Checking both.", None, 1),
        (TOOL_RESULT, "rain", "toolu_2", 2),
        (TOOL_RESULT, "sunny", "toolu_1", "2:result1"),
        (ANSWER, "Sunny in Porto, rain in Lisbon.", None, 3),
    ]
    assert [(c.id, json.loads(c.arguments)) for c in turn.messages[2].tool_calls] == [
        ("toolu_1", {"city": "Porto"}),
        ("toolu_2", {"city": "Lisbon"}),
    ]
    # What the user writes beside a result is a question of its own, after the result.
    body["messages"][2]["content"].append({"type": "text", "text": "Only Porto matters, actually."})
    conv = import_text(json.dumps(body), name="claude-request.json").conversations[0]
    assert [[(m.role, m.content, m.ref) for m in t.messages] for t in conv.turns][1] == [
        ("user", "Only Porto matters, actually.", 2),
        ("assistant", "Sunny in Porto, rain in Lisbon.", 3),
    ]
    assert [(m.content, m.ref) for m in conv.turns[0].messages if m.kind == TOOL_RESULT] == [
        ("rain", "2:result0"),
        ("sunny", "2:result1"),
    ]


def test_a_tool_use_block_without_a_name_is_refused_naming_it():
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]},
        ]
    }
    with pytest.raises(FormatError, match="message 1: content part 0 \\(tool_use\\) has no 'name'"):
        import_text(json.dumps(body), name="a.json")
