"""A Google Gemini request reads as the OpenAI conversation it was translated from.

The Gemini bodies are written by litellm's own translation (``_gemini_convert_messages_with_history``,
the ``contents`` it sends Gemini for OpenAI-format messages; the system messages go in
``systemInstruction``): tool calls become ``function_call`` parts, their results ``function_response``
parts in a user turn, which must not start a turn of their own. Gemini has no call ids before 2.x,
so a result pairs with the oldest call still waiting, and its response object is sent as JSON.
"""

from __future__ import annotations

import json

from litellm.llms.vertex_ai.gemini.transformation import _gemini_convert_messages_with_history

from core.io import import_text
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT
from tests.builders import translated_reads_alike
from tests.conftest import FIXTURES

TAU = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"


def gemini_body(messages: list[dict]) -> dict:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [m for m in messages if m["role"] != "system"]
    return {"systemInstruction": {"parts": [{"text": system}]}, "contents": _gemini_convert_messages_with_history(rest)}


def as_sent(result: str) -> str:
    """A tool result's text as litellm sends it to Gemini: a JSON object as that object, any other
    text wrapped as ``{"content": …}``."""
    try:
        value = json.loads(result)
    except ValueError:
        value = None
    return json.dumps(value if isinstance(value, dict) else {"content": result}, ensure_ascii=False)


def test_tau_bench_conversations_sent_to_gemini_read_as_they_were_written():
    # Gemini has no call ids here: each result pairs with the oldest call waiting (checked below).
    assert translated_reads_alike(gemini_body, ids=False, as_sent=as_sent) >= 10


def test_each_result_answers_the_oldest_call_waiting_in_its_turn():
    record = json.loads(TAU.read_text().splitlines()[0])
    conv = import_text(json.dumps(gemini_body(record["messages"])), name="gemini.json").conversations[0]
    results = 0
    for t in conv.turns:
        ids = [c.id for m in t.messages for c in m.tool_calls]
        answered = [m.tool_call_id for m in t.messages if m.kind == TOOL_RESULT]
        assert answered == ids[: len(answered)]
        results += len(answered)
    assert results


def test_gemini_contents_thoughts_ids_and_data_as_a_bare_history():
    conv = import_text(
        json.dumps(
            [
                {
                    "role": "user",
                    "parts": [
                        {"text": "What is in this picture?"},
                        {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}},
                    ],
                },
                {
                    "role": "model",
                    "parts": [
                        {"text": "Let me think.", "thought": True},
                        {"functionCall": {"id": "fc1", "name": "describe", "args": {"n": 1}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"id": "fc1", "name": "describe", "response": {"label": "a cat"}}}],
                },
                {"role": "model", "parts": [{"text": "A cat."}]},
            ]
        ),
        name="history.json",
    ).conversations[0]
    (turn,) = conv.turns
    assert [(m.kind, m.content) for m in turn.messages] == [
        (QUERY, "What is in this picture?\n[image]"),
        (REASONING, "Let me think."),
        (TOOL_CALL, ""),
        (TOOL_RESULT, '{"label": "a cat"}'),
        (ANSWER, "A cat."),
    ]
    assert turn.messages[2].tool_calls[0].id == turn.messages[3].tool_call_id == "fc1"
