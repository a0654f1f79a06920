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


def shape(conv, *, wrapped: bool = False):
    """Each turn's messages as (role, kind, text, calls); with ``wrapped``, a result's text as sent to Gemini."""
    def text(m):
        return as_sent(m.content) if wrapped and m.kind == TOOL_RESULT else m.content
    return (conv.system_prompt, [[(m.role, m.kind, text(m), [(c.name, json.loads(c.arguments or "{}"))
                                                            for c in m.tool_calls]) for m in t.messages]
                                 for t in conv.turns])


def test_tau_bench_conversations_sent_to_gemini_read_as_they_were_written():
    records = [json.loads(line) for line in TAU.read_text().splitlines() if line.strip()]
    calls = 0
    for record in records:
        openai_form = import_text(json.dumps(record), name="tau.json").conversations[0]
        gemini_form = import_text(json.dumps(gemini_body(record["messages"])), name="gemini.json").conversations[0]
        assert shape(gemini_form) == shape(openai_form, wrapped=True), record["task_id"]
        for t in gemini_form.turns:  # every result answers a call of its own turn
            ids = [c.id for m in t.messages for c in m.tool_calls]
            assert [m.tool_call_id for m in t.messages if m.kind == TOOL_RESULT] == ids[:len(
                [m for m in t.messages if m.kind == TOOL_RESULT])]
        calls += sum(m.kind == TOOL_CALL for t in gemini_form.turns for m in t.messages)
    assert calls >= 10  # the sample calls tools: the parts were read, not only the text


def test_gemini_contents_thoughts_ids_and_data_as_a_bare_history():
    conv = import_text(json.dumps([
        {"role": "user", "parts": [{"text": "What is in this picture?"},
                                   {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}]},
        {"role": "model", "parts": [{"text": "Let me think.", "thought": True},
                                    {"functionCall": {"id": "fc1", "name": "describe", "args": {"n": 1}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "fc1", "name": "describe",
                                                         "response": {"label": "a cat"}}}]},
        {"role": "model", "parts": [{"text": "A cat."}]}]), name="history.json").conversations[0]
    (turn,) = conv.turns
    assert [(m.kind, m.content) for m in turn.messages] == [
        (QUERY, "What is in this picture?\n[image]"), (REASONING, "Let me think."), (TOOL_CALL, ""),
        (TOOL_RESULT, '{"label": "a cat"}'), (ANSWER, "A cat.")]
    assert turn.messages[2].tool_calls[0].id == turn.messages[3].tool_call_id == "fc1"
