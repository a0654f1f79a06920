"""LibreChat conversation exports (``{conversationId, endpoint, title, exportAt, branches, recursive,
options?, messages}``, as LibreChat's Export → JSON writes them): flat or recursive, every branch kept
with the thread LibreChat shows by default active, an agent's content parts as the messages they
stand for, files and the custom instructions; a malformed export is refused naming the message."""

from __future__ import annotations

import copy
import json

import pytest

from core.io import FormatError, detect_format, import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import REASONING, TOOL_CALL, TOOL_RESULT, active_thread
from core.model.ledger import KEPT, OTHER_BRANCH

ROOT = "00000000-0000-0000-0000-000000000000"


def msg(mid, parent, text, at, user=False, **extra):
    return {
        "messageId": mid,
        "parentMessageId": parent,
        "conversationId": "c-1",
        "text": text,
        "sender": "User" if user else "GPT-4o",
        "isCreatedByUser": user,
        "createdAt": f"2025-01-01T10:{at:02d}:00.000Z",
        **extra,
    }


def messages():
    """Dana's chat: a regenerated first reply (the newer one shown), then an agent turn with thinking
    and a tool call, the question carrying an image."""
    return [
        msg("u1", ROOT, "Hi, I'm Dana.", 0, user=True),
        msg("a1", "u1", "Hello Dana!", 1, model="gpt-4o"),
        msg("a1b", "u1", "Hi Dana, how can I help?", 2, model="gpt-4o"),  # regenerated: the one shown
        msg(
            "u2",
            "a1b",
            "Book Lisbon.",
            3,
            user=True,
            files=[
                {"file_id": "f1", "filename": "ticket.png", "filepath": "/images/u/ticket.png", "type": "image/png"}
            ],
        ),
        msg(
            "a2",
            "u2",
            "",
            4,
            content=[
                {"type": "think", "think": "The user wants flights."},
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_call",
                    "tool_call": {
                        "id": "call_1",
                        "name": "search_flights",
                        "args": '{"to": "LIS"}',
                        "output": "3 flights",
                        "type": "tool_call",
                    },
                },
                {"type": "text", "text": {"value": "Found 3 flights to Lisbon."}},
            ],
        ),
    ]


def export(branches=True, recursive=False, **extra):
    out = {
        "conversationId": "c-1",
        "endpoint": "agents",
        "title": "Trip",
        "exportAt": "10:05:00 GMT+0000",
        "branches": branches,
        "recursive": recursive,
        "options": {"model": "gpt-4o", "promptPrefix": "You are a travel agent."},
        **extra,
    }
    flat = messages()
    if recursive:  # as buildMessageTree nests them: each message holds its replies in 'children'
        by_id = {m["messageId"]: {**m, "children": []} for m in flat}
        roots = []
        for m in flat:
            parent = by_id.get(m["parentMessageId"])
            (parent["children"] if parent else roots).append(by_id[m["messageId"]])
        out["messages"] = roots
    else:
        out["messages"] = flat
    return out


def read(doc) -> object:
    return import_text(json.dumps(doc), name="librechat.json").conversations[0]


@pytest.mark.parametrize("recursive", [False, True], ids=["flat", "recursive"])
def test_an_export_reads_every_branch_with_the_newest_sibling_s_thread_active(recursive):
    doc = export(recursive=recursive)
    assert detect_format(json.loads(json.dumps(doc))) == "librechat"
    conv = read(doc)
    assert (conv.id, conv.name, conv.system_prompt, conv.source_format) == (
        "c-1",
        "Trip",
        "You are a travel agent.",
        "librechat",
    )
    assert [(t.query, t.answer) for t in conv.turns] == [
        ("Hi, I'm Dana.", "Hello Dana!"),
        ("Hi, I'm Dana.", "Hi Dana, how can I help?"),
        ("Book Lisbon.", "Found 3 flights to Lisbon."),
    ]
    assert [conv.turns[i].answer for i in active_thread(conv)] == [
        "Hi Dana, how can I help?",
        "Found 3 flights to Lisbon.",
    ]
    assert conv.turns[1].meta["model"] == "gpt-4o"
    ledger = Replay(conv, MemoryConfig(window=10)).ledger_at(2)
    assert [e.reason for e in ledger.entries] == [OTHER_BRANCH, OTHER_BRANCH, KEPT, KEPT]


def test_an_agent_s_content_parts_are_its_thinking_its_call_with_the_output_and_its_answer():
    conv = read(export())
    agent = conv.turns[2]
    assert [(m.role, m.kind, m.content) for m in agent.messages] == [
        ("user", "query", "Book Lisbon."),
        ("assistant", REASONING, "The user wants flights."),
        ("assistant", TOOL_CALL, "Let me look."),
        ("tool", TOOL_RESULT, "3 flights"),
        ("assistant", "answer", "Found 3 flights to Lisbon."),
    ]
    call = agent.messages[2].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_1", "search_flights", '{"to": "LIS"}')
    assert agent.messages[3].tool_call_id == "call_1"
    image = agent.query_message.files[0]
    assert (image.type, image.id, image.name, image.url) == ("image", "f1", "ticket.png", "")  # a server path, no URL


def test_an_assistants_function_call_and_a_call_without_output_yet():
    doc = export()
    doc["messages"][4]["content"] = [
        {
            "type": "tool_call",
            "tool_call": {
                "id": "c9",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}', "output": "sunny"},
            },
        },
        {"type": "tool_call", "tool_call": {"id": "c10", "name": "book", "args": {"flight": 2}, "type": "tool_call"}},
        {"type": "text", "text": "Sunny; booking."},
    ]
    agent = read(doc).turns[2]
    assert [(m.kind, [c.name for c in m.tool_calls], m.content) for m in agent.messages[1:]] == [
        (TOOL_CALL, ["get_weather"], ""),
        (TOOL_RESULT, [], "sunny"),
        (TOOL_CALL, ["book"], ""),
        ("answer", [], "Sunny; booking."),
    ]
    assert agent.messages[3].tool_calls[0].arguments == '{"flight": 2}'


def test_an_export_of_the_shown_branch_only_and_an_older_messages_tree():
    doc = export(branches=False, recursive=True)
    doc["messagesTree"] = doc.pop("messages")
    doc["messagesTree"][0]["children"].pop(0)  # the older reply was not exported
    conv = read(doc)
    assert [t.answer for t in conv.turns] == ["Hi Dana, how can I help?", "Found 3 flights to Lisbon."]
    assert [conv.turns[i].answer for i in active_thread(conv)] == [t.answer for t in conv.turns]


def test_a_librechat_chat_opens_under_what_librechat_sends_the_whole_branch():
    from core.analysis.debug_view import fitting_config

    config = fitting_config(read(export()))
    assert (config.strategy, config.granularity, config.model) == ("buffer", "all_messages", "gpt-4o")


def test_a_long_recursive_export_is_a_long_thread_not_a_value_nested_too_deep():
    """Each reply nests inside the message before it, so 150 messages are 300 levels of JSON: the
    depth limit is held per message, and a message nested too deeply is still refused."""
    flat = [msg(f"m{i}", f"m{i - 1}" if i else ROOT, f"message {i}", i % 60, user=i % 2 == 0) for i in range(150)]
    for i, m in enumerate(flat):
        m["createdAt"] = f"2025-01-01T{10 + i // 60:02d}:{i % 60:02d}:00.000Z"
    root = {**flat[0], "children": []}
    node = root
    for m in flat[1:]:
        child = {**m, "children": []}
        node["children"].append(child)
        node = child
    conv = read({"conversationId": "long", "title": "Long", "recursive": True, "messages": [root]})
    assert len(conv.turns) == 75 and conv.turns[-1].answer == "message 149"
    deep: object = "x"
    for _ in range(150):
        deep = [deep]
    node["extra"] = deep
    with pytest.raises(FormatError, match="nested more than 100 levels deep"):
        read({"conversationId": "long", "title": "Long", "recursive": True, "messages": [root]})


@pytest.mark.parametrize(
    "change,problem",
    [
        (lambda d: d["messages"][1].pop("messageId"), "message 1 has no 'messageId'"),
        (lambda d: d["messages"][1].update(messageId="u1"), "share the 'messageId'"),
        (lambda d: d["messages"][1].pop("isCreatedByUser"), "message 1 has no 'isCreatedByUser'"),
        (lambda d: d["messages"][1].update(text=5), "message 1: 'text' must be a string"),
        (lambda d: d["messages"][1].update(files="x.png"), "message 1: 'files' must be a list"),
        (lambda d: d["messages"][4]["content"].append("x"), "message 4: content part 4 is not an object"),
        (lambda d: d["messages"][0].update(parentMessageId="a2"), "form a cycle"),  # u1 under a2, under u1
        (lambda d: d.update(messages=[]), "the export has no message"),
    ],
)
def test_a_malformed_export_is_refused_naming_what_is_wrong(change, problem):
    doc = copy.deepcopy(export())
    change(doc)
    with pytest.raises(FormatError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read(doc)
