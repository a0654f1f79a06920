"""ChatGPT and Claude exports: every branch kept, the active path as the active thread, hidden and
tool nodes handled, bad trees refused with a clear line."""

import json

import pytest

from core.analysis.debug_view import fitting_config
from core.io import FormatError, import_text, parse_conversations, read_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT, source_model
from core.service.sessions import ConversationService
from core.service.transfer import store_conversations
from core.store.db import Database
from tests.conftest import FIXTURES

E = FIXTURES / "exports"
CHATGPT = E / "chatgpt__conversations.json"
CLAUDE = E / "claude__conversations.json"


def _ids(conv, positions):
    return [conv.turns[i].id for i in positions]


def _chatgpt():
    return json.loads(CHATGPT.read_text(encoding="utf-8"))


def test_chatgpt_export_is_detected_and_every_conversation_read():
    result = import_text(CHATGPT.read_text(encoding="utf-8"), "conversations.json")
    assert result.format == "chatgpt"
    assert [c.name for c in result.conversations] == ["Lisbon trip", "Powers of two"]
    assert result.conversations[0].id == "c0ffee00-0000-4000-8000-000000000001"


def test_chatgpt_edits_and_regenerations_become_sibling_turns():
    conv = read_conversations(CHATGPT)[0]
    tree = conv.tree
    by_id = {t.id: t for t in conv.turns}
    assert set(by_id) == {"a1", "a2a", "a2b", "a2c", "a3"}
    # The edited question: two user nodes under one answer are two branches from turn a1.
    assert by_id["a2a"].query == "Add a day trip to Sintra."
    assert by_id["a2b"].query == by_id["a2c"].query == "Add a day trip to Cascais instead."
    assert _ids(conv, tree.siblings(conv.index_of("a2a"))) == ["a2a", "a2b", "a2c"]
    assert by_id["a2b"].answer != by_id["a2c"].answer
    assert by_id["a3"].parent_id == "a2c"


def test_chatgpt_current_node_is_the_active_thread_and_each_branch_is_its_own_thread():
    conv = read_conversations(CHATGPT)[0]
    assert conv.meta["active_turn_id"] == "a3"
    assert conv.turns[-1].id == "a3"
    assert _ids(conv, conv.tree.thread(conv.index_of("a3"))) == ["a1", "a2c", "a3"]
    assert _ids(conv, conv.tree.thread(conv.index_of("a2a"))) == ["a1", "a2a"]
    assert _ids(conv, conv.tree.thread_through(0)) == ["a1", "a2c", "a3"]


def test_chatgpt_uploads_stay_with_their_message():
    data = _chatgpt()[0]
    user = next(
        n["message"]
        for n in data["mapping"].values()
        if n.get("message") and n["message"]["author"]["role"] == "user" and "parts" in n["message"]["content"]
    )
    user.setdefault("metadata", {})["attachments"] = [
        {"id": "file-1", "name": "itinerary.pdf", "mime_type": "application/pdf", "size": 84487},
        {"id": "file-2", "name": "map.png", "mime_type": "image/png"},
    ]
    conv = parse_conversations(json.dumps(data))[0]
    files = [m.files for t in conv.turns for m in t.messages if m.content == _text_of(user)]
    assert files and all(
        [(f.type, f.id, f.name) for f in found]
        == [("document", "file-1", "itinerary.pdf"), ("image", "file-2", "map.png")]
        for found in files
    )
    user["metadata"]["attachments"] = "itinerary.pdf"
    with pytest.raises(FormatError, match="'metadata.attachments' must be a list"):
        parse_conversations(json.dumps(data))


def _text_of(message):
    return "\n".join(p for p in message["content"]["parts"] if isinstance(p, str) and p)


def test_chatgpt_older_branch_as_current_node_comes_last_and_is_active():
    data = _chatgpt()[0]
    data["current_node"] = "a2a"
    conv = parse_conversations(json.dumps(data))[0]
    assert conv.meta["active_turn_id"] == "a2a" and conv.turns[-1].id == "a2a"
    assert _ids(conv, conv.tree.thread_through(0)) == ["a1", "a2a"]
    assert _ids(conv, conv.tree.thread(conv.index_of("a3"))) == ["a1", "a2c", "a3"]


def test_chatgpt_hidden_system_and_custom_instructions_are_the_system_prompt_not_turns():
    conv = read_conversations(CHATGPT)[0]
    assert conv.system_prompt == "I live in Porto.\n\nAnswer briefly."
    assert all(m.role in ("user", "assistant") for t in conv.turns for m in t.messages)
    assert conv.turns[0].parent_id is None and conv.turns[0].query == "Plan three days in Lisbon."


def test_chatgpt_tool_call_result_and_reasoning_keep_their_kinds_and_pairing():
    conv = read_conversations(CHATGPT)[1]
    first = conv.turns[0]
    assert [m.kind for m in first.messages] == [QUERY, REASONING, TOOL_CALL, TOOL_RESULT, ANSWER]
    call, result = first.messages[2], first.messages[3]
    assert call.tool_calls[0].name == "python" and call.tool_calls[0].arguments == "print(2**10)"
    assert result.tool_call_id == call.tool_calls[0].id and result.content == "1024"
    assert first.answer == "2^10 = 1024."
    assert conv.turns[1].query == "[image]\nWhat is in this picture?"


def test_chatgpt_stored_conversation_keeps_the_active_branch(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    data = _chatgpt()[0]
    data["current_node"] = "a2a"
    conv = parse_conversations(json.dumps(data))[0]
    (cid,) = store_conversations(db, [conv], source="import")
    service = ConversationService(db)
    thread = service.active_thread(cid)
    stored = service.conversation(cid)
    assert [stored.turns[stored.index_of(t)].query for t in thread] == [
        "Plan three days in Lisbon.",
        "Add a day trip to Sintra.",
    ]
    db.dispose()


def _slugs(data, **slugs):
    for node_id, slug in slugs.items():
        data["mapping"][node_id]["message"]["metadata"]["model_slug"] = slug
    return data


def test_chatgpt_conversation_is_counted_for_the_model_of_the_newest_reply_chatgpt_shows():
    data = _slugs(_chatgpt()[0], a1="gpt-4", a2a="o3", a2c="gpt-4o", a3="gpt-5-thinking")
    conv = parse_conversations(json.dumps(data))[0]
    assert source_model(conv.meta) == "gpt-5-thinking"  # a mid-chat switch follows
    assert fitting_config(conv).model == "gpt-5-thinking"
    assert Replay(conv, fitting_config(conv)).counter.encoding_name == "o200k_base"
    data["current_node"] = "a2a"  # another branch shown: its own newest reply's model
    assert source_model(parse_conversations(json.dumps(data))[0].meta) == "o3"


def test_chatgpt_auto_names_no_model_and_the_default_slug_stands_in_for_replies_that_name_none():
    data = _slugs(_chatgpt()[0], a3="auto", a2c="gpt-4")
    assert source_model(parse_conversations(json.dumps(data))[0].meta) == "gpt-4"  # past the newest, 'auto'
    for node_id in ("a1", "a2a", "a2b", "a2c", "a3"):
        del data["mapping"][node_id]["message"]["metadata"]["model_slug"]
    data["default_model_slug"] = "gpt-4o"
    assert source_model(parse_conversations(json.dumps(data))[0].meta) == "gpt-4o"
    data["default_model_slug"] = "auto"  # ChatGPT's choice, message by message: no model is named
    conv = parse_conversations(json.dumps(data))[0]
    assert source_model(conv.meta) is None and fitting_config(conv).model == MemoryConfig().model
    assert source_model(read_conversations(CHATGPT)[1].meta) == "o1"  # no reply names one: the default


def test_chatgpt_model_is_kept_when_stored(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    conv = parse_conversations(json.dumps(_slugs(_chatgpt()[0], a3="gpt-4")))[0]
    (cid,) = store_conversations(db, [conv], source="import")
    assert source_model(ConversationService(db).conversation(cid).meta) == "gpt-4"
    db.dispose()


def test_chatgpt_parent_cycle_is_refused_naming_the_node():
    data = _chatgpt()[0]
    data["mapping"]["a1"]["parent"] = "a3"
    data["mapping"]["u1"]["parent"] = "a1"
    with pytest.raises(FormatError, match="'parent' links form a cycle") as info:
        parse_conversations(json.dumps([data]), name="conversations.json")
    assert "nothing was imported" in str(info.value)


def test_chatgpt_unknown_author_role_names_the_node():
    data = _chatgpt()[1]
    data["mapping"]["ans"]["message"]["author"]["role"] = "robot"
    with pytest.raises(FormatError, match="node 'ans' has an unknown author.role 'robot'"):
        parse_conversations(json.dumps([data]))


def test_chatgpt_bad_record_can_be_skipped_and_the_good_one_kept():
    good, bad = _chatgpt()
    bad["mapping"] = []
    result = import_text(json.dumps([good, bad]), "c.json", skip_bad=True)
    assert [c.name for c in result.conversations] == ["Lisbon trip"]
    assert result.problems[0].record == 1 and result.problems[0].conversation == "Powers of two"


def test_claude_linear_export_is_one_thread_with_files():
    result = import_text(CLAUDE.read_text(encoding="utf-8"), "conversations.json")
    assert result.format == "claude"
    conv = result.conversations[0]
    assert [(t.query, t.parent_id) for t in conv.turns] == [
        ("How often do I feed a sourdough starter?", None),
        ("And how much flour?", "m2"),
    ]
    assert conv.turns[1].query_message.files[0].id == "starter.jpg"
    assert conv.turns[0].created_at == 1714557610.0  # 2024-05-01T10:00:10Z, the answer's time


def test_claude_attachment_text_is_sent_with_its_message_and_counted():
    """A pasted or uploaded document's ``extracted_content`` reaches the model with its message: its
    words are in the message after the typed text, and the history counts them."""
    doc = "Program scope: " + "the pilot covers three clinics in Porto. " * 20
    chat = {
        "uuid": "c",
        "name": "Scope",
        "chat_messages": [
            {
                "uuid": "u1",
                "sender": "human",
                "text": "Summarise this.",
                "content": [{"type": "text", "text": "Summarise this."}],
                "attachments": [
                    {"file_name": "scope.txt", "file_type": "txt", "extracted_content": doc},
                    {"file_name": "empty.txt", "file_type": "txt", "extracted_content": ""},
                ],
                "files": [],
            },
            {"uuid": "a1", "sender": "assistant", "text": "Three clinics in Porto.", "content": []},
            {
                "uuid": "u2",
                "sender": "human",
                "text": "",
                "attachments": [{"file_name": "notes.txt", "extracted_content": "Only notes."}],
            },
            {"uuid": "a2", "sender": "assistant", "text": "Noted."},
        ],
    }
    conv = parse_conversations(json.dumps([chat]), name="conversations.json")[0]
    first, second = conv.turns
    assert first.query == f"Summarise this.\n\n{doc}" and second.query == "Only notes."
    assert [f.id for f in first.query_message.files] == ["scope.txt", "empty.txt"]
    plain = parse_conversations(
        json.dumps(
            [
                {
                    **chat,
                    "chat_messages": [
                        {k: v for k, v in m.items() if k != "attachments"} for m in chat["chat_messages"]
                    ],
                }
            ]
        ),
        name="c.json",
    )[0]
    counted, without = (Replay(c, MemoryConfig()).ledger_at(1) for c in (conv, plain))
    assert counted.entries[0].tokens - without.entries[0].tokens >= 20 * 8  # the document's words


def test_claude_messages_sharing_a_uuid_are_named():
    chat = {
        "uuid": "c",
        "name": "Dupes",
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "hi"},
            {"uuid": "m2", "sender": "assistant", "text": "hello"},
            {"uuid": "m1", "sender": "human", "text": "again"},
        ],
    }
    with pytest.raises(FormatError, match="messages 0 and 2 share the 'uuid' 'm1'; each message needs its own") as err:
        parse_conversations(json.dumps([chat]), name="conversations.json")
    assert err.value.problems[0].field == "message 2"


def test_claude_edited_question_is_a_branch_and_the_current_leaf_is_active():
    conv = read_conversations(CLAUDE)[1]
    assert _ids(conv, conv.tree.siblings(conv.index_of("n4"))) == ["n4", "n6"]
    assert conv.meta["active_turn_id"] == "n6"
    assert _ids(conv, conv.tree.thread_through(0)) == ["n2", "n6"]
    first = conv.turns[0]
    assert [m.kind for m in first.messages] == [QUERY, REASONING, TOOL_CALL, TOOL_RESULT, ANSWER]
    assert first.messages[3].tool_call_id == first.messages[2].tool_calls[0].id == "toolu_1"
    assert json.loads(first.messages[2].tool_calls[0].arguments) == {"from": "Porto", "to": "Lisbon"}


def test_claude_unknown_sender_is_refused_naming_the_message():
    data = json.loads(CLAUDE.read_text(encoding="utf-8"))
    data[0]["chat_messages"][2]["sender"] = "system"
    with pytest.raises(FormatError, match="message 2 has an unknown 'sender' 'system'"):
        parse_conversations(json.dumps(data))


@pytest.mark.parametrize(
    "text, found",
    [
        ('{"foo": 1, "bar": []}', "found an object with keys foo, bar"),
        ('[{"title": "x", "nodes": {}}]', "found a JSON array whose first record is an object with keys title, nodes"),
        ('{"a": 1}\n{"b": 2}\n', "found JSON Lines whose first record is an object with keys a"),
    ],
)
def test_unknown_format_error_lists_what_was_found_and_the_accepted_formats(text, found):
    with pytest.raises(FormatError) as info:
        parse_conversations(text, name="odd.json")
    message = str(info.value)
    assert found in message
    assert "chatgpt" in message and "claude" in message and "sharegpt" in message
