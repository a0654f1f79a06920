"""An OpenAI Agents SDK session (its SQLite database or its items), a LlamaIndex SimpleChatStore and a
LangGraph thread's state, each read as the conversations the platform kept, with the platform recorded.

The fixtures were written by the platforms' own code (tests/fixtures/platforms/SOURCES.md).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from core import limits
from core.io import FormatError, import_bytes, import_file, import_text
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT, source_platform
from tests.conftest import FIXTURES

PLATFORMS = FIXTURES / "platforms"
SESSION_DB = PLATFORMS / "openai_agents_session.db"


def kinds(turn):
    return [m.kind for m in turn.messages]


def rows(path=SESSION_DB) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, session_id, message_data FROM agent_messages ORDER BY id").fetchall()


def database(tmp_path, rows_in: list[tuple[str, str]], *, table: str = "agent_messages") -> bytes:
    """A SQLiteSession-shaped database holding ``(session_id, message_data)`` rows, as bytes."""
    path = tmp_path / "made.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TIMESTAMP, updated_at TIMESTAMP)"
        )
        conn.execute(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
            "message_data TEXT NOT NULL, created_at TIMESTAMP)"
        )
        conn.executemany(f"INSERT INTO {table} (session_id, message_data) VALUES (?, ?)", rows_in)
    return path.read_bytes()


# -- the Agents SDK's SQLite session database -----------------------------------------------------------


def test_a_session_database_is_detected_and_each_session_is_a_conversation_of_its_items():
    result = import_file(SESSION_DB)
    assert result.format == "openai-agents"
    assert [c.id for c in result.conversations] == ["travel-ann", "travel-bo"]
    every = rows()
    for conv in result.conversations:
        assert source_platform(conv.source_format) == "openai_agents"
        assert conv.meta["session_id"] == conv.id and conv.meta["created_at"]
        # One message per stored item: the session's limit counts what MemLens lists.
        assert sum(len(t.messages) for t in conv.turns) == sum(1 for _, s, _ in every if s == conv.id)


def test_a_call_left_unanswered_and_a_result_stored_a_turn_late_read_as_the_sdk_stored_them():
    ann = import_file(SESSION_DB).conversations[0]
    assert kinds(ann.turns[1]) == [QUERY, TOOL_CALL]  # the approval never given: no result, no answer
    late_call = ann.turns[3].messages[1].tool_calls[0].id  # approved after turn 5 ran
    # Turn 5 holds its own answer, then the late result and turn 4's answer, the last of them its answer.
    assert kinds(ann.turns[4]) == [QUERY, "intermediate", TOOL_RESULT, ANSWER]
    assert ann.turns[4].messages[2].tool_call_id == late_call == "call_4_0_0"
    assert ann.turns[4].messages[3].content.startswith("done with")


def test_reasoning_items_read_as_reasoning_messages_before_their_calls():
    bo = import_file(SESSION_DB).conversations[1]
    assert kinds(bo.turns[0]) == [QUERY, REASONING, TOOL_CALL, TOOL_RESULT, ANSWER]
    assert bo.turns[0].messages[1].content == "round 1 of question 1: look it up"


def test_a_renamed_items_table_is_found_by_its_columns(tmp_path):
    data = database(
        tmp_path,
        [
            ("s1", json.dumps({"content": "hi", "role": "user"})),
            (
                "s1",
                json.dumps(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": "msg_1",
                        "content": [{"type": "output_text", "text": "hello"}],
                    }
                ),
            ),
        ],
        table="support_items",
    )
    (conv,) = import_bytes(data, "renamed.db").conversations
    assert [m.content for m in conv.turns[0].messages] == ["hi", "hello"]


def test_a_row_that_is_not_json_is_named_by_its_row_and_field_and_nothing_is_imported(tmp_path):
    data = database(
        tmp_path,
        [
            ("good", json.dumps({"content": "hi", "role": "user"})),
            ("bad", json.dumps({"content": "hi", "role": "user"})),
            ("bad", "{not json"),
        ],
    )
    with pytest.raises(FormatError) as e:
        import_bytes(data, "broken.db")
    message = str(e.value)
    assert "\n" not in message and "row 3" in message and "'message_data'" in message and "'bad'" in message
    assert "nothing was imported" in message
    kept = import_bytes(data, "broken.db", skip_bad=True)
    assert [c.id for c in kept.conversations] == ["good"] and kept.skipped == 1


def test_an_item_that_stands_for_no_message_names_its_row(tmp_path):
    data = database(
        tmp_path,
        [
            ("s", json.dumps({"content": "hi", "role": "user"})),
            ("s", json.dumps({"type": "compaction_summary", "id": "cs_1"})),
        ],
    )
    with pytest.raises(FormatError, match=r"record 2 \(conversation 's'\): 'message_data': .*compaction_summary"):
        import_bytes(data, "odd.db")


def test_an_item_nested_too_deeply_is_refused_by_the_depth_limit(tmp_path):
    deep = {
        "content": "hi",
        "role": "user",
        "x": json.loads("[" * (limits.MAX_DEPTH + 5) + "]" * (limits.MAX_DEPTH + 5)),
    }
    data = database(tmp_path, [("s", json.dumps(deep))])
    with pytest.raises(FormatError, match="nested more than"):
        import_bytes(data, "deep.db")


def test_a_sqlite_file_of_another_schema_is_refused_in_one_line(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    with pytest.raises(FormatError) as e:
        import_file(path)
    assert "\n" not in str(e.value)
    assert "without one table of session items" in str(e.value) and "notes" in str(e.value)


def test_a_damaged_database_is_refused_in_one_line():
    data = SESSION_DB.read_bytes()[:4096] + b"\x00" * 64
    with pytest.raises(FormatError) as e:
        import_bytes(data, "cut.db")
    assert "\n" not in str(e.value) and "not a readable SQLite database" in str(e.value)


def test_a_binary_file_that_is_no_database_is_refused_in_one_line():
    with pytest.raises(FormatError, match=r"^photo\.png is not UTF-8 text nor a database MemLens reads; expected"):
        import_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "photo.png")
    with pytest.raises(FormatError, match="the openai-agents format"):
        import_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "photo.png", "openai-agents")


def test_a_database_over_the_size_limit_is_refused_before_it_is_read():
    data = SESSION_DB.read_bytes()
    with pytest.raises(FormatError, match="session.db"):
        import_bytes(data, "session.db", max_bytes=len(data) - 1)


def test_a_database_changes_nothing_on_disk(tmp_path):
    copy = tmp_path / "copy.db"
    copy.write_bytes(SESSION_DB.read_bytes())
    import_file(copy)
    assert copy.read_bytes() == SESSION_DB.read_bytes() and sorted(p.name for p in tmp_path.iterdir()) == ["copy.db"]


# -- the Agents SDK's items as JSON ---------------------------------------------------------------------


def test_a_session_s_items_read_as_the_agents_sdk_when_named_and_as_openai_when_detected():
    path = PLATFORMS / "openai_agents_items.json"
    named = import_file(path, "openai-agents")
    (conv,) = named.conversations
    assert conv.id == "openai_agents_items" and source_platform(conv.source_format) == "openai_agents"
    assert sum(len(t.messages) for t in conv.turns) == len(json.loads(path.read_text()))
    assert kinds(conv.turns[2]) == [QUERY, "intermediate", TOOL_CALL, TOOL_RESULT, ANSWER]
    detected = import_file(path)
    assert detected.format == "openai" and source_platform(detected.conversations[0].source_format) is None
    assert [m.content for t in detected.conversations[0].turns for m in t.messages] == [
        m.content for t in conv.turns for m in t.messages
    ]


def test_a_bad_item_is_named_by_its_record(tmp_path):
    items = [{"content": "hi", "role": "user"}, {"type": "function_call", "call_id": "c1"}]
    with pytest.raises(FormatError, match=r"record 1: 'item'.*function name"):
        import_text(json.dumps(items), "items.json", "openai-agents")
    with pytest.raises(FormatError, match="is one JSON value; expected a session's items"):
        import_text(json.dumps({"items": items}), "items.json", "openai-agents")


# -- LlamaIndex's SimpleChatStore ------------------------------------------------------------------------


def test_a_chat_store_is_detected_and_each_key_is_a_conversation():
    result = import_file(PLATFORMS / "llamaindex_chat_store.json")
    assert result.format == "llamaindex-chat-store"
    store = json.loads((PLATFORMS / "llamaindex_chat_store.json").read_text())["store"]
    assert [c.id for c in result.conversations] == list(store) == ["user-ann", "user-bo"]
    for conv in result.conversations:
        assert source_platform(conv.source_format) == "llamaindex"
        assert sum(len(t.messages) for t in conv.turns) == len(store[conv.id])


def test_a_reply_of_tool_calls_only_reads_as_an_assistant_step_without_text_and_results_pair_by_id():
    ann = import_file(PLATFORMS / "llamaindex_chat_store.json").conversations[0]
    turn = ann.turns[1]  # two parallel calls in one reply
    assert kinds(turn) == [QUERY, TOOL_CALL, TOOL_RESULT, TOOL_RESULT, ANSWER]
    step = turn.messages[1]
    assert step.content == "" and [c.id for c in step.tool_calls] == ["call_2_0_0", "call_2_0_1"]
    assert json.loads(step.tool_calls[0].arguments) == {"city": "Faro", "day": 1}
    assert [m.tool_call_id for m in turn.messages[2:4]] == ["call_2_0_0", "call_2_0_1"]


def test_an_empty_answer_stays_an_empty_answer():
    bo = import_file(PLATFORMS / "llamaindex_chat_store.json").conversations[1]
    assert bo.turns[1].messages[-1].kind == ANSWER and bo.turns[1].messages[-1].content == ""


def test_the_older_content_form_reads_too():
    store = {
        "store": {
            "chat": [
                {"role": "user", "content": "weather?", "additional_kwargs": {}},
                {
                    "role": "assistant",
                    "content": None,
                    "additional_kwargs": {
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": '{"city": "Porto"}'},
                            }
                        ]
                    },
                },
                {"role": "tool", "content": "sunny", "additional_kwargs": {"tool_call_id": "c1", "name": "weather"}},
                {"role": "chatbot", "content": "Sunny.", "additional_kwargs": {}},
            ]
        }
    }
    (conv,) = import_text(json.dumps(store), "old.json").conversations
    assert kinds(conv.turns[0]) == [QUERY, TOOL_CALL, TOOL_RESULT, ANSWER]
    assert conv.turns[0].messages[2].tool_call_id == "c1" and conv.turns[0].messages[3].content == "Sunny."


def test_a_bad_message_names_its_key_and_message():
    store = {
        "store": {
            "fine": [{"role": "user", "blocks": [{"block_type": "text", "text": "hi"}]}],
            "broken": [
                {"role": "user", "blocks": [{"block_type": "text", "text": "hi"}]},
                {"role": "narrator", "blocks": []},
            ],
        },
        "class_name": "SimpleChatStore",
    }
    with pytest.raises(FormatError) as e:
        import_text(json.dumps(store), "store.json")
    assert "\n" not in str(e.value)
    assert "record 1 (conversation 'broken'), message 1 has role 'narrator'" in str(e.value)
    assert [c.id for c in import_text(json.dumps(store), "store.json", skip_bad=True).conversations] == ["fine"]


def test_a_document_that_is_no_chat_store_is_refused_when_named():
    with pytest.raises(FormatError, match="is not a persisted SimpleChatStore"):
        import_text(json.dumps([{"role": "user", "content": "hi"}]), "x.json", "llamaindex-chat-store")


def test_a_chat_store_nested_too_deeply_is_refused():
    deep = json.loads("[" * (limits.MAX_DEPTH + 5) + "]" * (limits.MAX_DEPTH + 5))
    store = {"store": {"k": [{"role": "user", "content": "hi", "additional_kwargs": {"x": deep}}]}}
    with pytest.raises(FormatError, match="nested more than"):
        import_text(json.dumps(store), "deep.json")


# -- a LangGraph thread's state ---------------------------------------------------------------------------


def test_a_thread_state_is_detected_its_system_message_the_system_prompt():
    path = PLATFORMS / "langgraph_thread_state.json"
    state = json.loads(path.read_text())
    result = import_file(path)
    assert result.format == "langgraph-checkpoint"
    (conv,) = result.conversations
    assert conv.id == "trip-planning" and source_platform(conv.source_format) == "langgraph"
    assert conv.system_prompt == "You are a travel assistant."
    # The whole thread, not what the summary hook sent the model.
    assert sum(len(t.messages) for t in conv.turns) == len(state["values"]["messages"]) - 1
    assert kinds(conv.turns[0]) == [QUERY, TOOL_CALL, TOOL_RESULT, ANSWER]
    assert conv.turns[0].messages[2].tool_call_id == conv.turns[0].messages[1].tool_calls[0].id == "call_1_0_0"


def test_a_thread_s_history_reads_its_newest_state_once_with_a_note():
    state = json.loads((PLATFORMS / "langgraph_thread_state.json").read_text())
    older = {**state, "values": {"messages": state["values"]["messages"][:3]}}
    result = import_text(json.dumps([state, older]), "history.json")
    assert len(result.conversations) == 1 and len(result.conversations[0].turns) == 4
    assert result.notes == [
        "thread 'trip-planning': 2 states listed, the first read (a thread's history lists its newest state first)"
    ]


def test_a_checkpoint_s_channel_values_and_dumpd_messages_read_too():
    checkpoint = {
        "v": 4,
        "id": "1f0",
        "channel_versions": {},
        "channel_values": {
            "messages": [
                {
                    "lc": 1,
                    "type": "constructor",
                    "id": ["langchain", "schema", "messages", "HumanMessage"],
                    "kwargs": {"content": "hi", "id": "h1"},
                },
                {"type": "ai", "data": {"content": "hello", "id": "a1"}},
            ]
        },
    }
    (conv,) = import_text(json.dumps(checkpoint), "cp.json").conversations
    assert [m.content for m in conv.turns[0].messages] == ["hi", "hello"]


def test_a_message_that_is_no_langchain_message_is_named():
    state = {
        "values": {"messages": [{"type": "human", "content": "hi"}, {"type": "robot", "content": "x"}]},
        "next": [],
        "checkpoint": {"thread_id": "t1"},
    }
    with pytest.raises(FormatError, match=r"message 1 is not a LangChain message \(type 'robot'\)"):
        import_text(json.dumps(state), "state.json")
