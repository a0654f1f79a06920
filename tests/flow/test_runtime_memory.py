"""The runtime: per-node memory ledgers, failures, branches, events, what-if, records that round-trip."""

from __future__ import annotations

import json

import pytest

from core.flow.errors import RunError, TypeMismatchError
from core.flow.graph import Flow
from core.flow.nodes.if_else import evaluate_if_else
from core.flow.records import ConversationState, TurnRecord
from core.flow.runtime import run_conversation, run_turn
from core.flow.templates import VariablePool
from core.flow.what_if import what_if_ledger
from tests.flow.test_runtime_prompt import ScriptedClient, chat_flow

LONG = "Here is everything about our refund policy. " * 60


def two_node_flow() -> Flow:
    """Node A remembers 2 turns (a window of 3 rows in Dify 1.x: the current turn's row is one of
    them), node B has memory off; the Answer node stores A's reply."""
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "two-nodes",
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "a",
                    "type": "llm",
                    "title": "Responder",
                    "model": "memlens/demo",
                    "prompt_template": [{"role": "system", "text": "You are A."}],
                    "memory": {"window": 3},
                },
                {
                    "id": "b",
                    "type": "llm",
                    "title": "Summarizer",
                    "model": "memlens/demo",
                    "prompt_template": [
                        {"role": "system", "text": "You are B."},
                        {"role": "user", "text": "{{#sys.query#}}"},
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "{{#a.text#}}"},
            ],
            "edges": [["start", "a"], ["a", "b"], ["b", "answer"]],
        }
    )


def kept_refs(record, node):
    return [(e.turn, e.role) for e in record.node_run(node).ledger.entries if e.kept]


def reasons(record, node):
    return [(e.turn, e.role, e.reason) for e in record.node_run(node).ledger.entries]


def test_two_nodes_ledgers_show_exactly_what_each_saw_turn_by_turn():
    flow = two_node_flow()
    client = ScriptedClient({"You are A.": ["short one", LONG, "short three", "short four", "short five"]})
    _, records = run_conversation(flow, [f"question {i}" for i in range(1, 6)], llm=client)
    # Node A: the 2 turns before the current one (a window of 3 rows), over the stored answers.
    assert [kept_refs(r, "a") for r in records] == [
        [],
        [(1, "user"), (1, "assistant")],
        [(1, "user"), (1, "assistant"), (2, "user"), (2, "assistant")],
        [(2, "user"), (2, "assistant"), (3, "user"), (3, "assistant")],
        [(3, "user"), (3, "assistant"), (4, "user"), (4, "assistant")],
    ]
    assert reasons(records[3], "a")[:2] == [(1, "user", "outside_window"), (1, "assistant", "outside_window")]
    # The long answer of turn 2 fills A's history while it is in the window, and only then.
    history = [r.node_run("a").ledger.history_tokens for r in records]
    long_tokens = records[2].node_run("a").ledger.entries[3].tokens
    assert long_tokens > 400
    assert history[2] >= long_tokens and history[3] >= long_tokens and history[4] < long_tokens
    assert LONG in [m.content for m in records[3].node_run("a").prompt]
    assert LONG not in [m.content for m in records[4].node_run("a").prompt]
    # Node B: memory off, every turn: it saw its template and the query only.
    for i, r in enumerate(records, start=1):
        assert all(reason == "memory_off" for *_, reason in reasons(r, "b"))
        assert len(r.node_run("b").ledger.entries) == 2 * (i - 1)
        assert [(m.role, m.content) for m in r.node_run("b").prompt] == [
            ("system", "You are B."),
            ("user", f"question {i}"),
        ]
    assert records[2].node_run("b").memory["strategy"] == "off"
    assert records[2].node_run("a").memory["window"] == 3


def test_a_long_answer_over_the_token_budget_is_pruned_oldest_message_first():
    flow = two_node_flow()
    client = ScriptedClient({"You are A.": ["short", LONG, "short", "short"]})
    override = {"a": {"context_size": 300, "window": 4, "plugin_token_counting": True}}
    _, records = run_conversation(flow, ["q1", "q2", "q3"], llm=client, node_memory_overrides=override)
    led = records[2].node_run("a").ledger
    assert led.budget == 300 - 0 - 3  # Dify 1.x with token counting: context − max_tokens − count([])
    # Dify pops single messages while over budget, but always keeps the last one, however long.
    assert [(e.turn, e.role, e.reason) for e in led.entries] == [
        (1, "user", "over_budget"),
        (1, "assistant", "over_budget"),
        (2, "user", "over_budget"),
        (2, "assistant", "kept"),
    ]
    assert led.history_tokens > led.budget


def test_the_documented_profile_gives_the_window_one_turn_more_than_dify_as_shipped():
    flow = two_node_flow()
    queries = ["q1", "q2", "q3", "q4"]
    _, shipped = run_conversation(flow, queries, llm=ScriptedClient())
    _, documented = run_conversation(flow, queries, llm=ScriptedClient(), fidelity="documented")
    assert kept_refs(shipped[3], "a") == [(2, "user"), (2, "assistant"), (3, "user"), (3, "assistant")]
    assert kept_refs(documented[3], "a") == [(1, "user"), (1, "assistant")] + kept_refs(shipped[3], "a")
    assert shipped[3].node_run("a").memory["fidelity"] == "code" and shipped[3].fidelity == "code"
    assert documented[3].node_run("a").memory["fidelity"] == "documented"


def failing_flow(fail_on: str = "llm") -> Flow:
    return Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "fails",
            "variables": [
                {"name": "count", "type": "number", "default": 0},
                {"name": "log", "type": "array[string]", "default": []},
            ],
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "count_turn",
                    "type": "assigner",
                    "version": "2",
                    "items": [
                        {
                            "variable_selector": ["conversation", "count"],
                            "input_type": "constant",
                            "operation": "+=",
                            "value": 1,
                        },
                        {
                            "variable_selector": ["conversation", "log"],
                            "input_type": "variable",
                            "operation": "append",
                            "value": ["sys", "query"],
                        },
                    ],
                },
                {
                    "id": "llm",
                    "type": "llm",
                    "model": "memlens/demo",
                    "prompt_template": [{"role": "system", "text": "S"}],
                    "memory": {"window": 5},
                },
                {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
            ],
            "edges": [["start", "count_turn"], ["count_turn", "llm"], ["llm", "answer"]],
        }
    )


def test_a_failing_node_keeps_the_turn_failed_with_its_error_an_empty_answer_and_earlier_variable_writes():
    flow = failing_flow()
    state = ConversationState.new(flow)
    writes = []
    record = run_turn(
        flow,
        state,
        "hello",
        llm=ScriptedClient(fail="openai/gpt-4o: cannot reach the provider"),
        on_variables_updated=lambda node, changes: writes.append((node, changes)),
    )
    assert (record.status, record.error, record.answer) == ("failed", "openai/gpt-4o: cannot reach the provider", "")
    assert record.variables == {"count": 1, "log": ["hello"]}
    assert [r.node_id for r in record.node_runs] == ["start", "count_turn", "llm"]
    assert record.node_run("llm").status == "failed" and record.node_run("llm").ledger is not None
    assert [(n, [c.name for c in cs]) for n, cs in writes] == [("count_turn", ["count", "log"])]
    assert state.variables == {"count": 0, "log": []} and state.conversation.turns == []  # input untouched
    state = state.apply(record)
    turn = state.conversation.turns[0]
    assert (turn.status, turn.error, turn.answer, turn.answer_tokens) == ("error", record.error, "", 0)
    # The next turn counts the failed one and replays its query with an empty (dropped) answer.
    nxt = run_turn(flow, state, "again", llm=ScriptedClient(["fine"]))
    assert nxt.status == "succeeded" and nxt.dialogue_count == 2 and nxt.variables["count"] == 2
    assert reasons(nxt, "llm") == [(1, "user", "kept"), (1, "assistant", "empty")]


def test_an_assigner_error_fails_the_turn_and_writes_nothing_from_that_node():
    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "bad-assign",
            "variables": [{"name": "n", "type": "number", "default": 5}],
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "div",
                    "type": "assigner",
                    "version": "2",
                    "items": [
                        {
                            "variable_selector": ["conversation", "n"],
                            "input_type": "constant",
                            "operation": "+=",
                            "value": 1,
                        },
                        {
                            "variable_selector": ["conversation", "n"],
                            "input_type": "constant",
                            "operation": "/=",
                            "value": 0,
                        },
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "{{#conversation.n#}}"},
            ],
            "edges": [["start", "div"], ["div", "answer"]],
        }
    )
    _, (record,) = run_conversation(flow, ["x"], llm=ScriptedClient())
    assert (record.status, record.error, record.answer) == ("failed", "Invalid input value 0", "")
    assert record.variables == {"n": 5} and record.variable_changes == []


def test_events_arrive_in_difys_order_and_the_message_deltas_make_the_answer():
    flow = two_node_flow()
    events = []
    record = run_turn(flow, ConversationState.new(flow), "hi", llm=ScriptedClient(), on_event=events.append)
    names = [e["event"] for e in events]
    # The Answer node streams its text between its node_started and node_finished, as Dify does.
    assert names == ["workflow_started"] + ["node_started", "node_finished"] * 3 + [
        "node_started",
        "message",
        "node_finished",
        "message_end",
        "workflow_finished",
    ]
    assert "".join(e["answer"] for e in events if e["event"] == "message") == record.answer
    assert {e["message_id"] for e in events} == {record.id}
    assert events[-1]["data"]["status"] == "succeeded"
    llm_done = [e for e in events if e["event"] == "node_finished" and e["data"]["node_id"] == "a"][0]
    assert llm_done["data"]["process_data"]["prompts"][0] == {"role": "system", "text": "You are A."}
    json.dumps(events)  # a server can stream them as they are


def test_a_failed_turn_ends_its_events_with_workflow_finished_failed_then_error():
    flow = failing_flow()
    events = []
    run_turn(flow, ConversationState.new(flow), "hi", llm=ScriptedClient(fail="boom"), on_event=events.append)
    assert [e["event"] for e in events][-3:] == ["node_finished", "workflow_finished", "error"]
    assert events[-2]["data"]["status"] == "failed"
    assert events[-1]["message"] == "Run failed: boom"


def test_turn_records_round_trip_through_json_losslessly():
    flow = failing_flow()
    state, records = run_conversation(flow, ["one", "two"], llm=ScriptedClient(["first", "second"]))
    failed = run_turn(flow, state, "three", llm=ScriptedClient(fail="down"))
    for record in records + [failed]:
        doc = json.loads(json.dumps(record.to_dict()))
        again = TurnRecord.from_dict(doc)
        assert again == record
        assert again.to_dict() == record.to_dict()
        assert again.node_run("llm").ledger.entries == record.node_run("llm").ledger.entries


def test_a_turn_can_branch_from_any_earlier_turn_and_memory_follows_its_thread():
    flow = two_node_flow()
    client = ScriptedClient()
    state, (t1, t2, t3) = run_conversation(flow, ["q1", "q2", "q3"], llm=client)
    branch = run_turn(flow, state, "q2 edited", parent_id=t1.id, llm=client)
    assert branch.parent_id == t1.id and branch.dialogue_count == 2
    # Dify 1.x fetches the 3 newest rows — the branch's own, then turns 3 and 2 of the other branch —
    # before it walks the thread, so turn 1 is outside the window although it is the branch's parent.
    assert reasons(branch, "a") == [
        (1, "user", "outside_window"),
        (1, "assistant", "outside_window"),
        (2, "user", "other_branch"),
        (2, "assistant", "other_branch"),
        (3, "user", "other_branch"),
        (3, "assistant", "other_branch"),
    ]
    documented = run_turn(flow, state, "q2 edited", parent_id=t1.id, llm=client, fidelity="documented")
    assert kept_refs(documented, "a") == [(1, "user"), (1, "assistant")]
    root = run_turn(flow, state, "fresh start", parent_id=None, llm=client)
    assert root.dialogue_count == 1 and kept_refs(root, "a") == []
    latest = run_turn(flow, state, "q4", llm=client)
    assert latest.parent_id == t3.id and latest.dialogue_count == 4
    with pytest.raises(RunError, match="parent turn 'nope' is not in conversation"):
        run_turn(flow, state, "x", parent_id="nope", llm=client)


def test_a_node_memory_override_changes_one_node_for_one_run():
    flow = two_node_flow()
    state, _ = run_conversation(flow, ["q1", "q2", "q3"], llm=ScriptedClient())
    off = run_turn(flow, state, "q4", llm=ScriptedClient(), node_memory_overrides={"a": {"strategy": "off"}})
    assert {e.reason for e in off.node_run("a").ledger.entries} == {"memory_off"}
    assert off.node_run("a").memory_override == {"strategy": "off"}
    on = run_turn(
        flow, state, "q4", llm=ScriptedClient(), node_memory_overrides={"b": {"strategy": "dify", "window": 2}}
    )
    assert kept_refs(on, "b") == [(3, "user"), (3, "assistant")]
    assert [m.origin for m in on.node_run("b").prompt][-1] == "current query"
    with pytest.raises(RunError, match="no LLM or agent node with that id"):
        run_turn(flow, state, "q4", node_memory_overrides={"answer": {"window": 1}})
    with pytest.raises(RunError, match="unknown setting"):
        run_turn(flow, state, "q4", node_memory_overrides={"a": {"windw": 1}})
    with pytest.raises(RunError, match="out of range"):
        run_turn(flow, state, "q4", node_memory_overrides={"a": {"window": 9_000_000}})


def test_what_if_recomputes_a_recorded_turns_ledger_without_calling_a_model():
    flow = two_node_flow()
    state, records = run_conversation(flow, [f"q{i}" for i in range(1, 6)], llm=ScriptedClient())
    conv = state.conversation
    recorded = records[4].node_run("a").ledger
    assert what_if_ledger(flow, conv, 4, "a", record=records[4]).entries == recorded.entries
    assert what_if_ledger(flow, conv, 4, "a").prompt_tokens == recorded.prompt_tokens  # from the stored turn
    wider = what_if_ledger(flow, conv, 4, "a", {"window": 5})
    assert [e.turn for e in wider.entries if e.kept] == [1, 1, 2, 2, 3, 3, 4, 4]
    off = what_if_ledger(flow, conv, 4, "a", {"strategy": "off"})
    assert {e.reason for e in off.entries} == {"memory_off"}
    b_on = what_if_ledger(flow, conv, 4, "b", {"strategy": "dify", "window": 2})
    # The same settings in a real run give the same ledger.
    rerun = run_turn(
        flow,
        ConversationState(conversation=type(conv)(id=conv.id, turns=conv.turns[:4])),
        "q5",
        llm=ScriptedClient(),
        node_memory_overrides={"b": {"strategy": "dify", "window": 2}},
    )
    assert [(e.turn, e.role, e.reason) for e in b_on.entries] == reasons(rerun, "b")


def test_a_workflow_app_has_no_conversation_so_memory_is_out_of_scope():
    flow = chat_flow(
        {"prompt_template": [{"role": "user", "text": "{{#start.query#}}"}], "memory": {"window": 3}},
        mode="workflow",
        start_variables=[{"variable": "query", "label": "Q", "type": "paragraph", "required": True}],
    )
    _, records = run_conversation(flow, ["first", "second"], llm=ScriptedClient(["r1", "r2"]))
    assert [e.reason for e in records[1].node_run("llm").ledger.entries] == ["scope", "scope"]
    assert records[1].node_run("end").outputs == {"text": "r2"}
    assert records[1].answer == ""


def test_required_start_inputs_are_checked_before_anything_runs():
    flow = chat_flow(
        {"prompt_template": [{"role": "user", "text": "{{#sys.query#}}"}]},
        start_variables=[
            {"variable": "lang", "label": "Language", "type": "select", "required": True, "options": ["en", "fr"]}
        ],
    )
    state = ConversationState.new(flow)
    with pytest.raises(RunError, match="input 'lang' \\(Language\\) is required"):
        run_turn(flow, state, "hi", llm=ScriptedClient())
    with pytest.raises(RunError, match="must be one of the following"):
        run_turn(flow, state, "hi", {"lang": "de"}, llm=ScriptedClient())
    assert run_turn(flow, state, "hi", {"lang": "fr"}, llm=ScriptedClient()).node_run("start").outputs == {"lang": "fr"}


def test_start_inputs_are_taken_as_dify_validates_them():
    """``BaseAppGenerator._validate_inputs``: only a missing value takes the default (else stays None);
    an empty text is a value; numbers are parsed, checkboxes read, NUL characters removed."""
    fields = [
        {"variable": "greeting", "type": "text-input", "default": "Hello"},
        {"variable": "nick", "type": "text-input"},
        {"variable": "name", "type": "text-input", "required": True},
        {"variable": "age", "type": "number"},
        {"variable": "vip", "type": "checkbox"},
        {"variable": "tier", "type": "select", "options": ["a", "b"]},
        {"variable": "cv", "type": "file"},
    ]
    flow = chat_flow(
        {"prompt_template": [{"role": "user", "text": "[{{#start.nick#}}] {{#sys.query#}}"}]}, start_variables=fields
    )
    state = ConversationState.new(flow)

    def outputs(inputs):
        return run_turn(flow, state, "hi", inputs, llm=ScriptedClient()).node_run("start").outputs

    assert outputs({"name": ""}) == {
        "greeting": "Hello",
        "nick": None,
        "name": "",
        "age": None,
        "vip": None,
        "tier": None,
        "cv": None,
    }
    assert outputs({"name": "Dana\x00", "greeting": "", "age": "3.5", "vip": "yes", "tier": "b", "cv": ""}) == {
        "greeting": "",
        "nick": None,
        "name": "Dana",
        "age": 3.5,
        "vip": True,
        "tier": "b",
        "cv": None,
    }
    checked = outputs({"name": "x", "age": "41", "vip": 0})
    assert (checked["age"], checked["vip"]) == (41, False)
    assert outputs({"name": "x", "age": " "})["age"] is None
    record = run_turn(flow, state, "hi", {"name": "x"}, llm=ScriptedClient())
    assert record.node_run("llm").prompt[0].content == "[] hi"  # a None input renders as nothing
    for bad, message in (
        ({}, "input 'name' \\(name\\) is required"),
        ({"name": 5}, "input 'name' must be text"),
        ({"name": "x", "age": "1e3"}, "input 'age' must be a valid number, not '1e3'"),
        ({"name": "x", "age": [1]}, "input 'age' must be a number"),
        ({"name": "x", "tier": ""}, "input 'tier' must be one of the following: \\['a', 'b'\\]"),
    ):
        with pytest.raises(RunError, match=message):
            run_turn(flow, state, "hi", bad, llm=ScriptedClient())


@pytest.mark.parametrize(
    "kind, extra, value, expected",
    [
        ("text-input", {}, "a\x00b", "ab"),
        ("paragraph", {}, "", ""),
        ("select", {"options": ["a"]}, "a", "a"),
        ("text-input", {"max_length": 3}, "abc", "abc"),
        ("text-input", {"max_length": 0}, "abcd", "abcd"),
        ("number", {}, "", None),
        ("number", {}, " ", None),
        ("number", {}, "2", 2),
        ("number", {}, "2.5", 2.5),
        ("number", {}, 7, 7),
        ("number", {}, 1.5, 1.5),
        ("checkbox", {}, " YES ", True),
        ("checkbox", {}, "true", True),
        ("checkbox", {}, "1", True),
        ("checkbox", {}, "on", True),
        ("checkbox", {}, "False", False),
        ("checkbox", {}, "0", False),
        ("checkbox", {}, "no", False),
        ("checkbox", {}, "off", False),
        ("checkbox", {}, "maybe", "maybe"),
        ("checkbox", {}, 1, True),
        ("checkbox", {}, 0, False),
        ("checkbox", {}, 1.0, True),
        ("checkbox", {}, 2, 2),
        ("checkbox", {}, True, True),
        ("json_object", {}, {"a": 1}, {"a": 1}),
        ("json_object", {}, "", ""),
        ("json_object", {}, {}, {}),
        ("file", {}, "", None),
        ("file-list", {}, "", None),
        ("file", {"required": True}, "", ""),
        ("file", {}, {"id": "f"}, {"id": "f"}),
        ("text-input", {}, None, None),
    ],
)
def test_a_start_value_is_converted_as_dify_converts_it(kind, extra, value, expected):
    from core.flow.nodes.start import _input_value

    result = _input_value("x", kind, {"variable": "x", **extra}, value)
    assert result == expected and type(result) is type(expected)  # 0 is not False here, nor 1.0 True


@pytest.mark.parametrize(
    "kind, extra, value, message",
    [
        ("text-input", {}, 5, "input 'x' must be text"),
        ("paragraph", {}, ["a"], "input 'x' must be text"),
        ("select", {"options": ["a"]}, 1, "input 'x' must be text"),
        ("select", {"options": ["a", "b"]}, "c", "input 'x' must be one of the following: ['a', 'b']"),
        ("select", {}, "c", "input 'x' must be one of the following: []"),
        ("text-input", {"max_length": 3}, "abcd", "input 'x' must be less than 3 characters"),
        ("paragraph", {"max_length": 1}, "ab", "input 'x' must be less than 1 characters"),
        ("number", {}, "x", "input 'x' must be a valid number, not 'x'"),
        ("number", {}, "1e3", "input 'x' must be a valid number, not '1e3'"),
        ("number", {}, {"n": 1}, "input 'x' must be a number"),
        ("number", {}, "1.5e400", "input 'x' must be a finite number, not inf"),
        (
            "number",
            {},
            "1" + "0" * 5000,
            "input 'x' must be a valid number, not '1000000000000000000000000000000000000000'… (5,001 characters)",
        ),
        ("json_object", {}, "text", "input 'x' must be an object"),
        ("json_object", {}, [1], "input 'x' must be an object"),
    ],
)
def test_a_start_value_dify_refuses_is_refused_with_what_was_wrong(kind, extra, value, message):
    from core.flow.nodes.start import _input_value

    with pytest.raises(RunError) as e:
        _input_value("x", kind, {"variable": "x", **extra}, value)
    assert str(e.value) == message


def test_an_optional_select_left_unset_with_a_default_that_is_no_option_fails_as_in_dify():
    """langgenius/dify#33069: an optional select whose default is '' fails the run when not given."""
    fields = [
        {"variable": "tone", "type": "select", "options": ["short", "warm"], "default": ""},
        {"variable": "lang", "type": "select", "options": ["en"]},
    ]
    flow = chat_flow({"prompt_template": [{"role": "user", "text": "{{#sys.query#}}"}]}, start_variables=fields)
    state = ConversationState.new(flow)
    with pytest.raises(RunError) as e:
        run_turn(flow, state, "hi", {}, llm=ScriptedClient())
    assert str(e.value) == (
        "input 'tone' must be one of the following: ['short', 'warm'] (not given, so its "
        "default '', which Dify refuses too)"
    )
    with pytest.raises(RunError) as e:
        run_turn(flow, state, "hi", {"tone": ""}, llm=ScriptedClient())
    assert str(e.value) == "input 'tone' must be one of the following: ['short', 'warm']"
    # With no default at all, the unset select is None, and the run goes on.
    assert run_turn(flow, state, "hi", {"tone": "warm"}, llm=ScriptedClient()).node_run("start").outputs == {
        "tone": "warm",
        "lang": None,
    }


def test_the_start_form_skips_a_field_without_a_name_reads_an_untyped_one_as_text_and_leaves_a_chat_query_field():
    fields = [{"label": "no variable"}, "not a field", {"variable": "a"}, {"variable": "query", "type": "paragraph"}]
    flow = chat_flow({"prompt_template": [{"role": "user", "text": "{{#sys.query#}}"}]}, start_variables=fields)
    state = ConversationState.new(flow)
    record = run_turn(flow, state, "hi", {"a": "x"}, llm=ScriptedClient())
    # A Chatflow's form field named query is not filled with the chat query (a Workflow app's is).
    assert record.node_run("start").outputs == {"a": "x", "query": None}
    with pytest.raises(RunError, match="^input 'a' must be text$"):
        run_turn(flow, state, "hi", {"a": 5}, llm=ScriptedClient())


def test_unsupported_nodes_run_as_pass_through_and_reading_their_output_gives_empty_text():
    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "pt",
            "variables": [{"name": "v", "type": "string", "default": "kept"}],
            "nodes": [
                {"id": "start", "type": "start"},
                {"id": "code", "type": "code", "code": "def main(): return {'result': 1}"},
                {
                    "id": "save",
                    "type": "assigner",
                    "version": "2",
                    "items": [
                        {
                            "variable_selector": ["conversation", "v"],
                            "input_type": "variable",
                            "operation": "over-write",
                            "value": ["code", "result"],
                        }
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "[{{#code.result#}}]"},
            ],
            "edges": [["start", "code"], ["code", "save"], ["save", "answer"]],
        }
    )
    _, (record,) = run_conversation(flow, ["x"], llm=ScriptedClient())
    code = record.node_run("code")
    assert code.emulated is False and code.outputs == {} and "not emulated" in code.notes[0]
    assert record.answer == "[]" and record.variables == {"v": "kept"}
    assert "left unchanged" in record.node_run("save").notes[0]


def test_live_edits_go_through_the_one_checked_function_and_are_logged():
    flow = failing_flow()
    state, _ = run_conversation(flow, ["one"], llm=ScriptedClient(["ok"]))
    with pytest.raises(
        TypeMismatchError, match="^Type mismatch: variable 'count' expects number, but got string type$"
    ):
        state.edit(flow, "count", "ten")
    assert state.variables["count"] == 1
    edited, change = state.edit(flow, "count", 10)
    assert edited.variables["count"] == 10 and state.variables["count"] == 1
    assert (change.node_id, change.old, change.new, change.turn) == ("user", 1, 10, 1)
    assert edited.history[-1] == change
    nxt = run_turn(flow, edited, "two", llm=ScriptedClient(["ok"]))
    assert nxt.variables["count"] == 11


# -- if-else -----------------------------------------------------------------------------------------


def if_node(op, selector, value=None, extra_cases=()):
    from core.flow.graph import Node

    cond = {"variable_selector": selector, "comparison_operator": op}
    if value is not None:
        cond["value"] = value
    return Node(
        id="check",
        type="if-else",
        data={
            "type": "if-else",
            "cases": [{"case_id": "yes", "logical_operator": "and", "conditions": [cond]}, *extra_cases],
        },
    )


POOL_VALUES = {"s": "hello world", "n": 4, "f": 2.5, "b": True, "arr": ["a", "b"], "empty": "", "obj": {"k": 1}}


def pool_for():
    p = VariablePool(system={"dialogue_count": 3, "query": "Hi there"}, conversation=dict(POOL_VALUES))
    p.mark_pass_through("code")
    return p


@pytest.mark.parametrize(
    "op,selector,value,expected",
    [
        ("contains", ["conversation", "s"], "world", "yes"),
        ("not contains", ["conversation", "s"], "world", "false"),
        ("contains", ["conversation", "arr"], "a", "yes"),
        ("start with", ["conversation", "s"], "hell", "yes"),
        ("end with", ["conversation", "s"], "hell", "false"),
        ("is", ["sys", "query"], "Hi there", "yes"),
        ("is not", ["sys", "query"], "Hi there", "false"),
        ("empty", ["conversation", "empty"], None, "yes"),
        ("not empty", ["conversation", "arr"], None, "yes"),
        ("in", ["conversation", "s"], ["hello world", "x"], "yes"),
        ("not in", ["conversation", "s"], ["x"], "yes"),
        ("all of", ["conversation", "arr"], ["a", "b"], "yes"),
        ("=", ["sys", "dialogue_count"], "3", "yes"),
        ("≠", ["sys", "dialogue_count"], "3", "false"),
        (">", ["sys", "dialogue_count"], "2", "yes"),
        ("<", ["sys", "dialogue_count"], "3", "false"),
        ("≥", ["sys", "dialogue_count"], "3", "yes"),
        ("≤", ["sys", "dialogue_count"], "2", "false"),
        ("=", ["conversation", "f"], "2.5", "yes"),
        (">", ["conversation", "f"], "2", "yes"),
        ("is", ["conversation", "b"], "true", "yes"),
        ("null", ["code", "out"], None, "yes"),
        ("not null", ["conversation", "s"], None, "yes"),
        ("exists", ["code", "out"], None, "false"),
        ("not exists", ["code", "out"], None, "yes"),
        ("=", ["code", "out"], "1", "false"),
        ("not contains", ["code", "out"], "x", "yes"),
        (">=", ["sys", "dialogue_count"], "3", "yes"),
        ("=", ["sys", "dialogue_count"], "{{#conversation.n#}}", "false"),
    ],
)
def test_if_else_operators(op, selector, value, expected):
    assert evaluate_if_else(if_node(op, selector, value), pool_for()) == expected


def test_if_else_takes_the_first_true_case_in_order_and_or_logic():
    second = {
        "case_id": "second",
        "logical_operator": "or",
        "conditions": [
            {"variable_selector": ["sys", "dialogue_count"], "comparison_operator": "=", "value": "1"},
            {"variable_selector": ["sys", "dialogue_count"], "comparison_operator": "=", "value": "3"},
        ],
    }
    node = if_node("=", ["sys", "dialogue_count"], "9", extra_cases=[second])
    assert evaluate_if_else(node, pool_for()) == "second"


@pytest.mark.parametrize(
    "op,selector,value,message",
    [
        (">", ["conversation", "s"], "1", "Invalid actual value type: number"),
        ("=", ["conversation", "s"], "1", "Invalid actual value type: number or boolean"),
        ("is", ["conversation", "n"], "4", "Invalid actual value type: string or boolean"),
        ("=", ["ghost", "x"], "1", "Variable ['ghost', 'x'] not found"),
    ],
)
def test_if_else_errors_fail_the_node_with_difys_messages(op, selector, value, message):
    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "if",
            "variables": [
                {"name": k, "type": {"s": "string", "n": "number"}[k], "default": POOL_VALUES[k]} for k in ("s", "n")
            ],
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "check",
                    "type": "if-else",
                    "cases": [
                        {
                            "case_id": "true",
                            "logical_operator": "and",
                            "conditions": [{"variable_selector": selector, "comparison_operator": op, "value": value}],
                        }
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "x"},
            ],
            "edges": [["start", "check"], ["check", "answer", "true"]],
        }
    )
    _, (record,) = run_conversation(flow, ["q"], llm=ScriptedClient())
    assert (record.status, record.error) == ("failed", message)


def test_if_else_on_dialogue_count_routes_later_turns_to_the_true_branch_and_skips_the_other():
    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "route",
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "check",
                    "type": "if-else",
                    "cases": [
                        {
                            "case_id": "late",
                            "logical_operator": "and",
                            "conditions": [
                                {
                                    "variable_selector": ["sys", "dialogue_count"],
                                    "comparison_operator": "≥",
                                    "value": "3",
                                }
                            ],
                        }
                    ],
                },
                {"id": "early", "type": "answer", "answer": "early {{#sys.dialogue_count#}}"},
                {"id": "late", "type": "answer", "answer": "late {{#sys.dialogue_count#}}"},
            ],
            "edges": [["start", "check"], ["check", "late", "late"], ["check", "early", "false"]],
        }
    )
    _, records = run_conversation(flow, ["a", "b", "c", "d"], llm=ScriptedClient())
    assert [r.answer for r in records] == ["early 1", "early 2", "late 3", "late 4"]
    assert [r.node_runs[-1].node_id for r in records] == ["early", "early", "late", "late"]
    assert [r.node_run("check").branch for r in records] == ["false", "false", "late", "late"]
