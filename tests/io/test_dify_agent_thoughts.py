"""A Dify Agent app's logged thoughts become the messages its runner replays (``organize_agent_history``)."""

from __future__ import annotations

import json

from core.io.readers.dify_messages import dify_turn
from core.model.conversation import (
    AGENT_THOUGHTS,
    ANSWER,
    INTERMEDIATE,
    QUERY,
    SHOWN_ANSWER,
    TOOL_CALL,
    TOOL_RESULT,
    Message,
    ToolCall,
)


def record(thoughts, answer="It ships today.", **extra):
    return {"id": "m1", "query": "Where is order 4411?", "answer": answer, "agent_thoughts": thoughts, **extra}


def test_a_step_with_two_tools_is_one_call_message_then_one_result_per_tool():
    turn = dify_turn(
        record(
            [
                {
                    "id": "t2",
                    "position": 2,
                    "thought": "It ships today.",
                    "tool": "",
                    "tool_input": "",
                    "observation": "",
                },
                {
                    "id": "t1",
                    "position": 1,
                    "thought": "Let me check.",
                    "tool": "orders;weather",
                    "tool_input": json.dumps({"orders": {"id": "4411", "city": "Zürich"}}, ensure_ascii=False),
                    "observation": json.dumps({"orders": "shipped", "weather": "sunny"}),
                },
            ],
            answer="Let me check.\nIt ships today.",
        )
    )
    assert turn.messages == (
        Message("user", "Where is order 4411?", QUERY, "m1:query"),
        Message(
            "assistant",
            "Let me check.",
            TOOL_CALL,
            "m1:thought1",
            tool_calls=(
                ToolCall("t1.1", "orders", '{"id": "4411", "city": "Z\\u00fcrich"}'),
                ToolCall("t1.2", "weather", "{}"),
            ),
        ),
        Message("tool", "shipped", TOOL_RESULT, "m1:observation1.1", tool_call_id="t1.1"),
        Message("tool", "sunny", TOOL_RESULT, "m1:observation1.2", tool_call_id="t1.2"),
        Message("assistant", "It ships today.", ANSWER, "m1:answer"),
    )
    assert (turn.query_index, turn.answer_index) == (0, 4)
    # Dify replays the last thought, not the answer that joins every step's text: that is kept aside.
    assert turn.meta == {AGENT_THOUGHTS: 2, SHOWN_ANSWER: "Let me check.\nIt ships today."}
    assert turn.shown_answer == "Let me check.\nIt ships today." and turn.answer == "It ships today."


def test_inputs_and_observations_that_are_not_json_objects_fall_back_as_dify_falls_back():
    turn = dify_turn(
        record(
            [
                {
                    "id": "t1",
                    "position": 1,
                    "thought": None,
                    "tool": "search;search2;",
                    "tool_input": "not json",
                    "observation": "plain text",
                },
                {
                    "id": "t2",
                    "position": 2,
                    "thought": "",
                    "tool": "lookup",
                    "tool_input": json.dumps(["a"]),
                    "observation": json.dumps({"other": "x"}),
                },
                {
                    "id": "t3",
                    "position": 3,
                    "thought": "done",
                    "tool": "calc",
                    "tool_input": json.dumps({"calc": [1, 2]}),
                    "observation": json.dumps({"calc": {"sum": 3, "unit": "°C"}}),
                },
                {"id": "t4", "position": 4, "thought": "", "tool": "x", "observation": None},
            ],
            answer="",
        )
    )
    calls = [m for m in turn.messages if m.kind == TOOL_CALL]
    assert [(c.content, [(t.name, t.arguments) for t in c.tool_calls]) for c in calls] == [
        ("", [("search", "{}"), ("search2", "{}"), ("", "{}")]),
        ("", [("lookup", "{}")]),
        ("done", [("calc", "[1, 2]")]),
        ("", [("x", "{}")]),
    ]
    assert [(m.content, m.tool_call_id) for m in turn.messages if m.kind == TOOL_RESULT] == [
        ("plain text", "t1.1"),
        ("plain text", "t1.2"),
        ("plain text", "t1.3"),
        ('{"other": "x"}', "t2.1"),
        ('{"sum": 3, "unit": "°C"}', "t3.1"),
        ("", "t4.1"),
    ]
    # The run ended on a tool step: Dify replays no final message, so the turn has no answer.
    assert turn.messages[-1].kind == TOOL_RESULT
    assert turn.answer_index is None
    assert turn.meta == {AGENT_THOUGHTS: 4, SHOWN_ANSWER: ""}


def test_a_thought_with_no_tool_before_the_last_is_an_intermediate_message_and_order_follows_position():
    turn = dify_turn(
        record(
            [
                {"id": "b", "position": 3, "thought": "It ships today.", "tool": ""},
                {"id": "a", "position": 1, "thought": "Thinking.", "tool": None},
                "not a thought",
                {"id": "c", "position": 2, "thought": "", "tool": "orders", "tool_input": "{}", "observation": "{}"},
            ]
        )
    )
    assert [(m.role, m.kind, m.ref, m.content) for m in turn.messages] == [
        ("user", QUERY, "m1:query", "Where is order 4411?"),
        ("assistant", INTERMEDIATE, "m1:thought1", "Thinking."),
        ("assistant", TOOL_CALL, "m1:thought2", ""),
        ("tool", TOOL_RESULT, "m1:observation2.1", "{}"),
        ("assistant", ANSWER, "m1:answer", "It ships today."),
    ]
    # The final thought is the answer as shown: nothing is kept aside.
    assert turn.meta == {AGENT_THOUGHTS: 3}


def test_thoughts_without_positions_keep_their_order_and_are_numbered_in_it():
    turn = dify_turn(
        record(
            [
                {"id": "z", "thought": "", "tool": "b", "tool_input": "{}", "observation": json.dumps({"b": 2})},
                {
                    "id": "y",
                    "position": 1,
                    "thought": "",
                    "tool": "a",
                    "tool_input": "{}",
                    "observation": json.dumps({"a": 1}),
                },
                {"thought": "It ships today."},
            ]
        )
    )
    assert [(m.kind, m.ref, m.content) for m in turn.messages[1:]] == [
        (TOOL_CALL, "m1:thought1", ""),
        (TOOL_RESULT, "m1:observation1.1", "2"),
        (TOOL_CALL, "m1:thought2", ""),
        (TOOL_RESULT, "m1:observation2.1", "1"),
        (ANSWER, "m1:answer", "It ships today."),
    ]
    assert [m.tool_calls[0].id for m in turn.messages if m.kind == TOOL_CALL] == ["z.1", "y.1"]
    # A thought with no id takes the message's id and its number.
    third = dify_turn(record([{"thought": "", "tool": "a", "tool_input": "{}", "observation": "{}"}]))
    assert third.messages[1].tool_calls[0].id == "m1-1.1"


def test_a_record_without_thoughts_is_its_query_and_answer():
    turn = dify_turn(record([], answer=""))
    assert turn.messages == (
        Message("user", "Where is order 4411?", QUERY, "m1:query"),
        Message("assistant", "", ANSWER, "m1:answer"),
    )
    assert turn.answer_index == 1
    assert AGENT_THOUGHTS not in turn.meta
    assert dify_turn(record(["junk"])).meta == {}


def test_the_answers_files_stay_with_the_answer_a_run_replays():
    files = [
        {"id": "f1", "type": "image", "url": "https://files.example/chart.png", "belongs_to": "assistant"},
        {"id": "f2", "type": "image", "url": "https://files.example/photo.png", "belongs_to": "user"},
    ]
    turn = dify_turn(
        record([{"id": "t1", "position": 1, "thought": "It ships today.", "tool": ""}], message_files=files)
    )
    assert [f.id for f in turn.messages[0].files] == ["f2"]
    assert [f.id for f in turn.messages[-1].files] == ["f1"] and turn.messages[-1].kind == ANSWER
    plain = dify_turn(record([], message_files=files))
    assert [f.id for f in plain.messages[-1].files] == ["f1"]


def test_a_step_that_only_calls_tools_reads_as_its_calls_not_as_empty():
    from core.analysis.debug_view import transcript
    from core.model.conversation import Conversation, message_text

    turn = dify_turn(
        record(
            [
                {
                    "id": "t1",
                    "position": 1,
                    "thought": "",
                    "tool": "orders;weather",
                    "tool_input": json.dumps({"orders": {"id": 1}}),
                    "observation": "{}",
                },
                {
                    "id": "t2",
                    "position": 2,
                    "thought": "Checking.",
                    "tool": "orders",
                    "tool_input": "{}",
                    "observation": "{}",
                },
                {"id": "t3", "position": 3, "thought": "It ships today.", "tool": ""},
            ]
        )
    )
    assert [message_text(m) for m in turn.messages] == [
        "Where is order 4411?",
        '→ orders({"id": 1}) → weather({})',
        "{}",
        "{}",
        "Checking. → orders({})",
        "{}",
        "It ships today.",
    ]
    views = transcript(Conversation(id="c", turns=[turn]), [0], 0, {}, {})
    assert views[1].text == '→ orders({"id": 1}) → weather({})'
