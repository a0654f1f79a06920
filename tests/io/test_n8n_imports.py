"""n8n's chat history table (CSV or JSON rows) and an n8n execution's memory node read as n8n stored them.

The table fixtures hold the rows LangChain JS's Postgres history wrote for two generated conversations
(tests/fixtures/platforms/SOURCES.md), so what is read is checked against what n8n's own code stored
for them, as recorded in tests/fixtures/reference/n8n-2.41.1.json.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from core.io import FormatError, import_bytes, import_file, import_text
from core.model.conversation import source_platform
from tests.builders import too_deep
from tests.conftest import FIXTURES
from tests.reference.platform_outcomes import recorded

P = FIXTURES / "platforms"
ROWS_CSV, ROWS_JSON, EXECUTIONS = P / "n8n_chat_histories.csv", P / "n8n_chat_histories.json", P / "n8n_executions.json"
#: The recorded cases whose Postgres rows the table fixtures hold, by session.
SESSIONS = {"chat-7f3a": "window-mixed-postgres1.3-k3", "chat-91bc": "window-single_tools-postgres1.3-k3"}


def plain(conv) -> list[dict]:
    """A conversation's messages in the shape the reference drivers record them."""
    out = []
    for turn in conv.turns:
        for m in turn.messages:
            entry = {"role": m.role, "text": m.content}
            if m.tool_calls:
                entry["calls"] = [{"id": c.id, "name": c.name, "args": json.loads(c.arguments)} for c in m.tool_calls]
            if m.role == "tool":
                entry["call_id"] = m.tool_call_id
            out.append(entry)
    return out


def rows():
    return json.loads(ROWS_JSON.read_text(encoding="utf-8"))


def as_csv(table: list[dict], columns=("id", "session_id", "message")) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in table:
        writer.writerow([row[c] if not isinstance(row[c], dict) else json.dumps(row[c]) for c in columns])
    return buf.getvalue()


# -- the table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [ROWS_CSV, ROWS_JSON])
def test_each_session_reads_as_the_messages_n8n_stored(path):
    result = import_file(path)
    assert result.format == "n8n-chat-histories" and not result.problems
    outcomes = recorded("n8n")["outcomes"]
    assert {c.id: plain(c) for c in result.conversations} == {
        session: outcomes[case]["stored"] for session, case in SESSIONS.items()
    }


def test_the_csv_s_rows_are_read_in_id_order_not_file_order():
    text = ROWS_CSV.read_text(encoding="utf-8")
    first_data_line = text.splitlines()[1]
    assert first_data_line.startswith("38,")  # the export lists the newest row first
    conv = next(c for c in import_text(text, "rows.csv").conversations if c.id == "chat-91bc")
    assert conv.turns[0].query.startswith("question 1:") and len(conv.turns) == 7


def test_a_tool_round_reads_as_one_assistant_message_per_call_each_with_its_result():
    conv = next(c for c in import_file(ROWS_CSV).conversations if c.id == "chat-7f3a")
    turn = conv.turns[1]
    assert [(m.role, m.kind) for m in turn.messages] == [
        ("user", "query"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "answer"),
    ]
    assert [m.tool_call_id for m in turn.messages if m.role == "tool"] == ["call_2_0_0", "call_2_0_1"]


def test_the_conversation_says_it_came_from_n8n():
    for conv in import_file(ROWS_CSV).conversations:
        assert conv.source_format == "n8n-chat-histories" and source_platform(conv.source_format) == "n8n"
        assert conv.meta == {"session_id": conv.id}


def test_langchain_s_type_and_data_form_and_message_text_read_too():
    table = rows()
    for i, row in enumerate(table):
        message = dict(row["message"])
        kind = message.pop("type")
        row["message"] = {"type": kind, "data": message} if i % 2 else json.dumps({"type": kind, **message})
    result = import_text(json.dumps(table), "rows.json")
    assert {c.id: plain(c) for c in result.conversations} == {
        c.id: plain(c) for c in import_file(ROWS_JSON).conversations
    }


def test_rows_without_ids_keep_the_file_s_order():
    table = [
        {"session_id": "s", "message": {"type": t, "content": c}}
        for t, c in (("human", "first"), ("ai", "one"), ("human", "second"), ("ai", "two"))
    ]
    conv = import_text(as_csv(table, ("session_id", "message")), "rows.csv").conversations[0]
    assert [t.query for t in conv.turns] == ["first", "second"]


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda r: r.update(session_id=""), "session_id", "'session_id' is missing or empty"),
        (lambda r: r.update(message="{not json"), "message", "'message' is not valid JSON"),
        (
            lambda r: r.update(message={"type": "robot", "content": "x"}),
            "message",
            "'message' has type 'robot'; expected one of human, ai, system, tool, function",
        ),
        (lambda r: r.update(message={"type": "human"}), "message", "'message' has no 'content'"),
        (
            lambda r: r.update(message={"type": "human", "content": 7}),
            "message",
            "'message': 'content' must be a string or a list of parts, not int",
        ),
        (lambda r: r.update(message=[1, 2]), "message", "'message' is not an object"),
    ],
)
def test_a_bad_row_is_named_by_record_and_field_and_nothing_is_imported(change, field, words):
    table = rows()
    change(table[5])
    with pytest.raises(FormatError) as err:
        import_text(json.dumps(table), "rows.json")
    (problem,) = err.value.problems
    assert (problem.record, problem.field) == (5, field) and words in problem.text
    assert "\n" not in problem.text and "nothing was imported" in str(err.value)


def test_skipping_bad_rows_leaves_their_session_out_whole():
    table = rows()
    bad = next(i for i, r in enumerate(table) if r["session_id"] == "chat-91bc")
    table[bad]["message"] = "{not json"
    result = import_text(as_csv(table), "rows.csv", skip_bad=True)
    assert [c.id for c in result.conversations] == ["chat-7f3a"]
    assert result.problems[0].text.startswith(f"record {bad} (conversation 'chat-91bc'): 'message' is not valid JSON")


def test_a_csv_row_with_another_number_of_fields_is_a_bad_record():
    text = ROWS_CSV.read_text(encoding="utf-8").splitlines()
    text.insert(3, "99,chat-91bc")
    with pytest.raises(FormatError) as err:
        import_text("\n".join(text), "rows.csv")
    (problem,) = err.value.problems
    assert problem.text == "record 2: line 4 has 2 fields; the header has 3 (id, session_id, message)"


def test_a_message_nested_deeper_than_the_limit_is_refused():
    deep = {"type": "human", "content": "hi", "additional_kwargs": too_deep()}
    table = rows()
    table[2]["message"] = json.dumps(deep)  # as a CSV cell: JSON text, held to the limit when parsed
    with pytest.raises(FormatError) as err:
        import_text(as_csv(table), "rows.csv")
    assert err.value.problems[0].field == "message" and "nested more than" in err.value.problems[0].text
    table[2]["message"] = deep  # as a JSON export's object: the whole row is held to the limit
    with pytest.raises(FormatError) as err:
        import_text(json.dumps(table), "rows.json")
    assert err.value.problems[0].record == 2 and "nested more than" in err.value.problems[0].text


def test_a_table_larger_than_the_import_limit_is_refused_before_reading():
    data = ROWS_CSV.read_bytes()
    with pytest.raises(FormatError, match="n8n_chat_histories.csv is"):
        import_bytes(data, "n8n_chat_histories.csv", max_bytes=len(data) - 1)


def test_another_csv_table_is_not_taken_for_an_n8n_table():
    with pytest.raises(FormatError, match=r"unknown format \(found a CSV table with columns role, content\)"):
        import_text("role,content\nuser,hi\n", "chat.csv")
    with pytest.raises(FormatError, match="chat.csv is a CSV table; the openai format is read from JSON"):
        import_text("role,content\nuser,hi\n", "chat.csv", fmt="openai")


def test_broken_json_is_still_reported_as_json():
    with pytest.raises(FormatError, match="is not JSON or JSON Lines"):
        import_text('{"session_id": "a", "message": \n', "rows.json")


# -- an execution -------------------------------------------------------------------------------------


def test_each_memory_node_of_an_execution_is_a_conversation():
    result = import_file(EXECUTIONS)
    assert result.format == "n8n-execution"
    saved, loaded = result.conversations
    assert (saved.id, saved.name) == ("231:Simple Memory", "Travel desk · Simple Memory")
    assert saved.meta["memory_node"] == {
        "name": "Simple Memory",
        "type": "@n8n/n8n-nodes-langchain.memoryBufferWindow",
        "version": 1.3,
        "context_window_length": 4,
    }
    assert saved.meta["history"] == "stored" and loaded.meta["history"] == "loaded"
    assert "context_window_length" not in loaded.meta["memory_node"]  # left at n8n's default, 5
    assert result.notes == [
        "'Travel desk (Postgres) · Postgres Chat Memory': the history as the memory node loaded "
        "it for the agent (its window), not everything it stores"
    ]
    assert all(source_platform(c.source_format) == "n8n" for c in result.conversations)


def test_a_saved_history_is_everything_the_memory_stores():
    saved = import_file(EXECUTIONS).conversations[0]
    table = next(c for c in import_file(ROWS_CSV).conversations if c.id == "chat-91bc")
    assert plain(saved) == plain(table)


def test_the_memory_node_s_output_copied_from_the_editor_reads_too():
    execution = json.loads(EXECUTIONS.read_text(encoding="utf-8"))["data"][0]
    items = [
        run["data"]["ai_memory"][0][0]["json"] for run in execution["data"]["resultData"]["runData"]["Simple Memory"]
    ]
    conv = import_text(json.dumps(items), "output.json").conversations[0]
    assert conv.source_format == "n8n-execution" and conv.meta == {"history": "stored"}
    assert plain(conv) == plain(import_file(EXECUTIONS).conversations[0])
    first = import_text(json.dumps(items[:1]), "output.json")
    assert len(first.conversations[0].turns) == 3 and first.notes  # the window of 8 messages the agent loaded


@pytest.mark.parametrize(
    "change, field, words",
    [
        (
            lambda e: e["data"]["resultData"].pop("runData"),
            "data.resultData.runData",
            "has no 'data.resultData.runData': export the execution with its data (includeData=true)",
        ),
        (
            lambda e: e["data"]["resultData"]["runData"].pop("Simple Memory"),
            "data.resultData.runData",
            "no memory node ran in this execution",
        ),
        (
            lambda e: e["data"]["resultData"]["runData"]["Simple Memory"][1]["data"]["ai_memory"][0][0]["json"].update(
                chatHistory="none"
            ),
            "chatHistory",
            "node 'Simple Memory', run 1: 'chatHistory' is not a list of messages",
        ),
        (
            lambda e: e["data"]["resultData"]["runData"]["Simple Memory"][1]["data"]["ai_memory"][0][0]["json"][
                "chatHistory"
            ][3].update(id=["langchain_core", "messages", "RobotMessage"]),
            "chatHistory",
            "node 'Simple Memory', run 1: message 3 is not a message LangChain serialised",
        ),
    ],
)
def test_a_bad_execution_is_named_by_record_and_field(change, field, words):
    page = json.loads(EXECUTIONS.read_text(encoding="utf-8"))
    change(page["data"][0])
    with pytest.raises(FormatError) as err:
        import_text(json.dumps(page), "executions.json")
    (problem,) = err.value.problems
    assert (problem.record, problem.field, problem.conversation) == (0, field, "231") and words in problem.text
    assert "\n" not in problem.text
    kept = import_text(json.dumps(page), "executions.json", skip_bad=True)
    assert [c.id for c in kept.conversations] == ["232:Postgres Chat Memory"]


def test_an_execution_nested_deeper_than_the_limit_is_refused():
    execution = json.loads(EXECUTIONS.read_text(encoding="utf-8"))["data"][0]
    execution["data"]["resultData"]["x"] = too_deep()
    with pytest.raises(FormatError, match="nested more than"):
        import_text(json.dumps(execution), "execution.json")


def test_an_execution_larger_than_the_import_limit_is_refused_before_reading():
    data = EXECUTIONS.read_bytes()
    with pytest.raises(FormatError, match="n8n_executions.json is"):
        import_bytes(data, "n8n_executions.json", max_bytes=len(data) // 2)
