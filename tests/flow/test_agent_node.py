"""The tool-agent node in a flow: tools, the state after each call, a state cleared per run, stored tool messages."""

from __future__ import annotations

import json

import pytest

from core.flow.errors import FlowError
from core.flow.graph import Flow, load_flow
from core.flow.nodes.agent_loop import ModelPlanner, plan_tools, planner_for
from core.flow.records import ConversationState
from core.flow.runtime import run_conversation, run_turn
from core.llm.client import DemoClient, LLMReply, ToolCallRequest, ToolReply
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.conftest import ROOT

FLOW = ROOT / "sample_data" / "flows" / "agent-tools.yml"


def agent_flow(**node) -> Flow:
    data = load_flow(FLOW).to_dict()
    for n in data["nodes"]:
        if n["id"] == "agent":
            n.update(node)
    return Flow.from_dict(data)


def test_the_demo_planner_picks_tools_from_the_query_in_order():
    assert plan_tools("what is 12*7") == [("calculator", {"expression": "12*7"})]
    assert plan_tools("note: buy milk. Then look up flight AA100 and list my notes") == [
        ("note", {"text": "buy milk"}),
        ("lookup", {"key": "flight AA100"}),
        ("list_notes", {}),
    ]
    assert plan_tools("my flight is on 2024-05-15") == []  # a date is not arithmetic
    assert plan_tools("note: call Bob at 5-6 pm") == [("note", {"text": "call Bob at 5-6 pm"})]
    assert plan_tools("Hi, I'm Dana.") == []


def test_the_record_shows_the_state_after_each_tool_call():
    flow = load_flow(FLOW)
    record = run_turn(
        flow,
        ConversationState.new(flow),
        "note: buy milk. note: call Bob. What is 12*7? list my notes",
        llm=DemoClient(),
    )
    agent = record.node_run("agent")
    assert [(s["tool"], s["args"]) for s in agent.steps] == [
        ("note", {"text": "buy milk"}),
        ("note", {"text": "call Bob"}),
        ("calculator", {"expression": "12*7"}),
        ("list_notes", {"notes": ["buy milk", "call Bob"]}),
    ]  # filled from the state (inputs_from_state)
    assert [s["state"] for s in agent.steps] == [
        {"notes": ["buy milk"]},
        {"notes": ["buy milk", "call Bob"]},
        {"notes": ["buy milk", "call Bob"], "last_result": 84},
        {"notes": ["buy milk", "call Bob"], "last_result": 84},
    ]
    assert [s["messages"] for s in agent.steps] == [4, 5, 6, 7]  # system, query, the call, then one result each
    assert agent.outputs["notes"] == ["buy milk", "call Bob"] and agent.outputs["last_result"] == 84
    assert agent.outputs["exit_reason"] == "text" and agent.outputs["step_count"] == 2
    assert agent.outputs["tool_call_counts"] == {"note": 2, "calculator": 1, "list_notes": 1, "lookup": 0}
    assert record.answer == "Noted: buy milk. Noted: call Bob. 12*7 = 84. Your notes: buy milk; call Bob."


def test_the_state_is_cleared_at_the_end_of_each_run():
    flow = load_flow(FLOW)
    _, records = run_conversation(flow, ["note: buy milk", "list my notes"], llm=DemoClient())
    second = records[1].node_run("agent")
    assert second.steps[0]["args"] == {} and second.steps[0]["state"] == {}
    assert records[1].answer == "You have no notes in this run."
    assert "notes" not in second.outputs


def test_tool_calls_and_results_are_stored_as_the_turns_intermediate_messages(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    conv = service.start(service.import_flow(FLOW).flow_id)
    record = service.send(conv.id, "What is 6*7 and look up order 4411")
    turn = service.conversation(conv.id).turns[0]
    assert [m.kind for m in turn.messages] == [QUERY, TOOL_CALL, TOOL_RESULT, TOOL_RESULT, ANSWER]
    call = turn.messages[1]
    assert [(c.name, json.loads(c.arguments)) for c in call.tool_calls] == [
        ("calculator", {"expression": "6*7"}),
        ("lookup", {"key": "order 4411"}),
    ]
    results = turn.messages[2:4]
    assert [m.tool_call_id for m in results] == [c.id for c in call.tool_calls]
    assert json.loads(results[0].content) == {"expression": "6*7", "result": 42}  # the result itself, as Haystack
    assert turn.answer == record.answer == "6*7 = 42. order 4411: shipped on Monday, arriving Thursday."
    assert len({m.ref for m in turn.messages}) == 5
    stored = next(r for r in service.node_runs(service.conversation(conv.id), turn.id) if r["node_id"] == "agent")
    assert [s["tool"] for s in stored["steps"]] == ["calculator", "lookup"]
    assert stored["granularity"] == "query_answer" and stored["granularity_source"] == "flow"
    db.dispose()


def test_a_plain_question_is_answered_by_the_demo_model_from_the_replayed_history():
    flow = load_flow(FLOW)
    _, records = run_conversation(flow, ["Hi, I'm Dana.", "what is 2+2", "What's my name?"], llm=DemoClient())
    assert records[0].node_run("agent").steps == []
    assert records[2].answer == "Your name is Dana."
    assert records[2].node_run("agent").model_called == "memlens/demo"


def test_a_tool_named_in_exit_conditions_ends_the_run_after_it():
    flow = agent_flow(exit_conditions=["text", "calculator"])
    record = run_turn(flow, ConversationState.new(flow), "what is 3*3", llm=DemoClient())
    agent = record.node_run("agent")
    assert agent.outputs["exit_reason"] == "calculator" and agent.outputs["step_count"] == 1
    assert json.loads(record.answer) == {"expression": "3*3", "result": 9}


def test_a_failing_tool_is_reported_to_the_planner_not_raised():
    flow = load_flow(FLOW)
    record = run_turn(flow, ConversationState.new(flow), "what is 1/0", llm=DemoClient())
    assert record.succeeded
    step = record.node_run("agent").steps[0]
    assert (
        step["error"]
        == ("Failed to invoke Tool `calculator` with parameters {'expression': '1/0'}. Error: division by zero")
        and step["result"] is None
    )
    assert record.answer == "The calculator tool failed: division by zero."


def test_a_lookup_table_and_custom_mappings_come_from_the_node():
    flow = agent_flow(
        lookup_table={"gate": "B12"},
        tools=[{"name": "lookup", "outputs_to_state": {"found": {"source": "value", "handler": "dedup_append"}}}],
        state_schema={"found": {"type": "list[str]"}},
    )
    record = run_turn(flow, ConversationState.new(flow), "look up gate and look up gate", llm=DemoClient())
    agent = record.node_run("agent")
    assert [s["state"]["found"] for s in agent.steps] == [["B12"], ["B12"]]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tools": ["calculator", "teleport"]}, "unknown tool 'teleport'"),
        ({"state_schema": {"x": {"type": "strng"}}}, "unknown type"),
        ({"state_schema": {"tools": {"type": "list"}}}, "reserved"),
        ({"state_schema": {"x": {"type": "int", "handler": "avg"}}}, "handler 'avg' is unknown"),
        ({"tools": [{"name": "note", "outputs_to_state": {"nowhere": {"source": "note"}}}]}, "does not declare"),
        ({"memory": {"strategy": "buffer", "granularity": "all_messages"}}, "granularity is set on the flow"),
        ({"memory": {"strategy": "telepathy"}}, "unknown memory strategy"),
        ({"max_agent_steps": 0}, "max_agent_steps"),
        ({"exit_conditions": ["text", "teleport"]}, "exit condition 'teleport'"),
        ({"system_prompt_fill": "jinja"}, "'system_prompt_fill' must be one of template, none, inputs"),
    ],
)
def test_a_malformed_agent_node_is_refused_when_the_flow_loads(change, message):
    with pytest.raises(FlowError, match=message):
        agent_flow(**change)


class ToolCallingModel:
    """A stand-in for a real model behind litellm: asks for one tool, then answers from its result."""

    def __init__(self):
        self.seen = []

    def route(self, model):
        return model, ""

    def complete(self, model, messages, max_tokens=None):
        return LLMReply("plain", 1, 1, model)

    def complete_tools(self, model, messages, tools, max_tokens=None):
        self.seen.append((messages, tools))
        if messages[-1]["role"] == "tool":
            return ToolReply("The answer is " + json.loads(messages[-1]["content"])["value"] + ".", 5, 3, model)
        return ToolReply("", 5, 3, model, tool_calls=(ToolCallRequest("call_x", "lookup", '{"key": "refund policy"}'),))


def test_with_a_real_model_the_tool_calls_come_from_the_model():
    client = ToolCallingModel()
    assert isinstance(planner_for(client, "openai/gpt-4o-mini"), ModelPlanner)
    flow = agent_flow(model="openai/gpt-4o-mini")
    record = run_turn(flow, ConversationState.new(flow), "anything", llm=client)
    agent = record.node_run("agent")
    assert [s["tool"] for s in agent.steps] == ["lookup"] and agent.steps[0]["call_id"] == "call_x"
    assert record.answer == "The answer is full refund within 30 days of delivery."
    offered = [t["function"]["name"] for t in client.seen[0][1]]
    assert offered == ["calculator", "note", "list_notes", "lookup"]
    list_notes = next(t for t in client.seen[0][1] if t["function"]["name"] == "list_notes")
    assert list_notes["function"]["parameters"]["properties"] == {}  # filled from the state, not by the model
    assert agent.usage == {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16}


def test_the_panel_shows_the_state_after_each_call_and_which_setting_decided_the_granularity():
    from ui.memories_panel import granularity_line, steps_frame

    flow = load_flow(FLOW)
    record = run_turn(
        flow, ConversationState.new(flow), "note: buy milk. What is 2*3?", llm=DemoClient(), granularity="all_messages"
    )
    run = record.node_run("agent").to_dict()
    frame = steps_frame(run["steps"])
    assert list(frame["tool"]) == ["note", "calculator"] and list(frame["ran"]) == ["1", "2"]
    assert [json.loads(s) for s in frame["state after"]] == [
        {"notes": ["buy milk"]},
        {"notes": ["buy milk"], "last_result": 6},
    ]
    assert granularity_line(run) == "history granularity all_messages — set on the request"


def test_haystack_version_2_prepares_every_call_before_any_runs_so_a_reader_misses_the_writer():
    query = "list my notes and note: buy milk"
    three = agent_flow()
    record = run_turn(three, ConversationState.new(three), query, llm=DemoClient())
    agent = record.node_run("agent")
    assert [(s["tool"], s["ran"]) for s in agent.steps] == [("list_notes", 2), ("note", 1)]  # the writer ran first
    assert record.answer == "Your notes: buy milk. Noted: buy milk."
    two = agent_flow(haystack_version=2)
    record = run_turn(two, ConversationState.new(two), query, llm=DemoClient())
    agent = record.node_run("agent")
    assert agent.steps[0]["args"] == {} and record.answer == "You have no notes in this run. Noted: buy milk."
    results = [m["content"] for m in record.intermediate if m["kind"] == TOOL_RESULT]
    assert results == ["{'notes': [], 'count': 0}", "{'note': 'buy milk', 'saved': True}"]  # 2.x writes str()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"haystack_version": 4}, "haystack_version 4 is unknown"),
        (
            {"tools": [{"name": "list_notes", "inputs_from_state": {"notes": "nothing"}}]},
            "inputs_from_state maps 'notes' to 'nothing', which is not one of its parameters",
        ),
    ],
)
def test_a_bad_haystack_version_or_a_mapping_to_a_missing_parameter_is_refused_when_the_flow_loads(change, message):
    with pytest.raises(FlowError, match=message):
        agent_flow(**change)


def test_a_text_reply_ends_the_run_even_when_exit_conditions_name_only_tools():
    flow = agent_flow(exit_conditions=["calculator"])
    record = run_turn(flow, ConversationState.new(flow), "hello there", llm=DemoClient())
    agent = record.node_run("agent")
    assert agent.outputs["exit_reason"] == "text" and agent.outputs["step_count"] == 1
    assert record.answer and record.answer == agent.outputs["text"]


@pytest.mark.parametrize(
    "fill, sent",
    [
        ("template", "Help look up gate; age {{age}}."),  # a workflow template: selectors rendered
        ("none", "Help {{#sys.query#}}; age {{age}}."),  # as written
        ("inputs", "Help {{#sys.query#}}; age None."),  # only the start inputs' {{name}}, as str(value)
    ],
)
def test_the_system_prompt_is_filled_as_system_prompt_fill_says(fill, sent):
    flow = agent_flow(system_prompt="Help {{#sys.query#}}; age {{age}}.", system_prompt_fill=fill)
    data = flow.to_dict()
    next(n for n in data["nodes"] if n["id"] == "start")["variables"] = [
        {"variable": "age", "label": "Age", "type": "number", "required": False}
    ]
    flow = Flow.from_dict(data)
    record = run_turn(flow, ConversationState.new(flow), "look up gate", llm=DemoClient())
    first = record.node_run("agent").prompt[0].to_dict()
    assert (first["role"], first["content"]) == ("system", sent)
