"""Flowise's chat message export (View Messages → Export) read as the questions and answers Flowise replays."""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, import_bytes, import_file, import_text
from core.model.conversation import source_platform
from tests.builders import too_deep
from tests.conftest import FIXTURES

EXPORT = FIXTURES / "platforms" / "flowise_messages.json"


def chats():
    return json.loads(EXPORT.read_text(encoding="utf-8"))


def test_each_chat_reads_as_its_questions_and_answers():
    result = import_file(EXPORT)
    assert result.format == "flowise-messages" and not result.problems
    ui, api = result.conversations
    assert ui.id == "5b0c2e2a-3f4e-4a5d-9d7e-1c2b3a4d5e6f" and api.id == "c8f1d6a0-77b2-4e3c-8a91-0f2e6d5c4b3a"
    assert [(m.role, m.kind, m.content) for t in ui.turns for m in t.messages] == [
        (m["role"] == "bot" and "assistant" or "user", "answer" if m["role"] == "bot" else "query", m["content"])
        for m in chats()[0]["messages"]
    ]
    assert [len(c.turns) for c in result.conversations] == [4, 2]


def test_a_tool_the_answer_used_is_not_a_message_of_its_own():
    ui = import_file(EXPORT).conversations[0]
    assert all(m.role in ("user", "assistant") and not m.tool_calls for t in ui.turns for m in t.messages)


def test_an_empty_answer_stays_an_empty_message():
    ui = import_file(EXPORT).conversations[0]
    assert ui.turns[1].answer_message.content == "" and ui.turns[1].answer_index == 1


def test_the_chat_s_source_session_and_memory_are_kept_and_it_says_it_came_from_flowise():
    ui, api = import_file(EXPORT).conversations
    assert ui.meta == {"source": "UI", "session_id": ui.id, "memory_type": "Buffer Window Memory"}
    assert api.meta == {"source": "API/Embed", "session_id": "customer-1043"}
    assert {source_platform(c.source_format) for c in (ui, api)} == {"flowise"}


def test_a_single_chat_reads_too():
    conv = import_text(json.dumps(chats()[1]), "chat.json").conversations[0]
    assert conv.source_format == "flowise-messages" and len(conv.turns) == 2


@pytest.mark.parametrize(
    "change, field, words",
    [
        (
            lambda c: c["messages"][2].update(role="apiMessage"),
            "message 2",
            "message 2 has role 'apiMessage'; a Flowise export's messages are 'user' or 'bot'",
        ),
        (
            lambda c: c["messages"][1].update(content={"text": "x"}),
            "message 1",
            "message 1: 'content' must be text, not dict",
        ),
        (lambda c: c["messages"].__setitem__(3, "hi"), "message 3", "message 3 is not an object"),
        (lambda c: c.update(messages="none"), "messages", "'messages' must be a list of messages"),
        (lambda c: c.update(messages=[]), "messages", "the chat has no message"),
    ],
)
def test_a_bad_chat_is_named_by_record_and_field_and_nothing_is_imported(change, field, words):
    export = chats()
    change(export[0])
    with pytest.raises(FormatError) as err:
        import_text(json.dumps(export), "export.json")
    (problem,) = err.value.problems
    assert (problem.record, problem.field) == (0, field) and words in problem.text and "\n" not in problem.text
    assert problem.conversation == "5b0c2e2a-3f4e-4a5d-9d7e-1c2b3a4d5e6f"
    kept = import_text(json.dumps(export), "export.json", skip_bad=True)
    assert [c.id for c in kept.conversations] == ["c8f1d6a0-77b2-4e3c-8a91-0f2e6d5c4b3a"]


def test_a_chat_nested_deeper_than_the_limit_is_refused():
    export = chats()
    export[0]["messages"][1]["usedTools"] = [too_deep()]
    with pytest.raises(FormatError) as err:
        import_text(json.dumps(export), "export.json")
    assert err.value.problems[0].record == 0 and "nested more than" in err.value.problems[0].text


def test_an_export_larger_than_the_import_limit_is_refused_before_reading():
    data = EXPORT.read_bytes()
    with pytest.raises(FormatError, match="flowise_messages.json is"):
        import_bytes(data, "flowise_messages.json", max_bytes=len(data) - 1)


def test_an_openai_messages_file_is_not_taken_for_a_flowise_export():
    result = import_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}), "chat.json")
    assert result.format == "openai"
