"""History granularity for an agent's replay of past turns: the precedence table and what each replays."""

from __future__ import annotations

import pytest

from core.flow.errors import FlowError, GranularityError, RunError
from core.flow.granularity import DEFAULT_GRANULARITY, FROM_DEFAULT, FROM_FLOW, FROM_REQUEST, resolve_granularity
from core.flow.graph import Flow, load_flow
from core.flow.records import ConversationState
from core.flow.runtime import run_turn
from core.io import read_conversations
from core.llm.client import DemoClient
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT
from core.model.ledger import GRANULARITY
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.conftest import FIXTURES, ROOT

TAU = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
FLOW = ROOT / "sample_data" / "flows" / "agent-tools.yml"

#: request value, the flow's history.granularity → the granularity used and which setting decided it.
PRECEDENCE = [
    (None, None, "query_answer", FROM_DEFAULT),
    (None, "query_answer", "query_answer", FROM_FLOW),
    (None, "all_messages", "all_messages", FROM_FLOW),
    ("query_answer", None, "query_answer", FROM_REQUEST),
    ("query_answer", "query_answer", "query_answer", FROM_REQUEST),
    ("query_answer", "all_messages", "query_answer", FROM_REQUEST),
    ("all_messages", None, "all_messages", FROM_REQUEST),
    ("all_messages", "query_answer", "all_messages", FROM_REQUEST),
    ("all_messages", "all_messages", "all_messages", FROM_REQUEST),
]


def flow_with(granularity: str | None) -> Flow:
    data = load_flow(FLOW).to_dict()
    data.pop("history", None)
    if granularity is not None:
        data["history"] = {"granularity": granularity}
    return Flow.from_dict(data)


def tau_conversation():
    """A tau-bench airline conversation whose agent called tools in several turns."""
    conversation = read_conversations(TAU)[3]
    assert sum(m.kind in (TOOL_CALL, TOOL_RESULT) for t in conversation.turns for m in t.messages) == 36
    return conversation


@pytest.mark.parametrize("request_value, flow_value, expected, source", PRECEDENCE)
def test_precedence_request_then_flow_then_default(request_value, flow_value, expected, source):
    assert resolve_granularity(request_value, flow_value) == (expected, source)
    assert DEFAULT_GRANULARITY == "query_answer"


@pytest.mark.parametrize("request_value, flow_value, expected, source", PRECEDENCE)
def test_the_agent_record_says_which_setting_decided_and_replays_accordingly(
    request_value, flow_value, expected, source
):
    conversation = tau_conversation()
    flow = flow_with(flow_value)
    record = run_turn(
        flow,
        ConversationState(conversation),
        "Can you summarise what we did so far?",
        llm=DemoClient(),
        granularity=request_value,
    )
    agent = record.node_run("agent")
    assert (agent.granularity, agent.granularity_source) == (expected, source)
    assert agent.memory["granularity"] == expected
    kept_kinds = {e.kind for e in agent.ledger.entries if e.kept}
    if expected == "query_answer":
        assert kept_kinds <= {QUERY, ANSWER}
    else:
        assert {TOOL_CALL, TOOL_RESULT} <= kept_kinds


def test_query_answer_replays_each_past_turns_query_and_answer_only_on_the_tau_bench_conversation():
    conversation = tau_conversation()
    record = run_turn(flow_with(None), ConversationState(conversation), "What is my reservation id?", llm=DemoClient())
    agent = record.node_run("agent")
    by_kind = {}
    for e in agent.ledger.entries:
        by_kind.setdefault(e.kind, set()).add(e.reason)
    assert by_kind[TOOL_CALL] == by_kind[TOOL_RESULT] == {GRANULARITY}
    expected = [
        (p, i)
        for p, t in enumerate(conversation.turns)
        for i in (t.query_index, t.answer_index)
        if i is not None and t.messages[i].content
    ]
    assert [(e.position, e.index) for e in agent.ledger.entries if e.kept] == expected
    history = [m for m in agent.prompt if m.origin == "memory history"]
    assert len(history) == len(expected) and {m.role for m in history} == {"user", "assistant"}


def test_all_messages_replays_tool_calls_and_results_in_order_on_the_tau_bench_conversation():
    conversation = tau_conversation()
    record = run_turn(
        flow_with("all_messages"), ConversationState(conversation), "What is my reservation id?", llm=DemoClient()
    )
    agent = record.node_run("agent")
    assert not [e for e in agent.ledger.entries if e.reason == GRANULARITY]
    kept = [e for e in agent.ledger.entries if e.kept]
    # 18 calls and 18 results; three results are empty text and are dropped as empty, like any empty message.
    assert sum(e.kind in (TOOL_CALL, TOOL_RESULT) for e in kept) == 33
    assert [e.kind for e in agent.ledger.entries if e.reason == "empty"] == [TOOL_RESULT] * 3
    expected = [(p, i) for p, t in enumerate(conversation.turns) for i, m in enumerate(t.messages) if not m.is_empty]
    assert [(e.position, e.index) for e in kept] == expected
    history = [m for m in agent.prompt if m.origin == "memory history"]
    roles = [m.role for m in history]
    assert roles.count("tool") == 15 and roles.count("assistant") == 18 + 12  # calls and the 12 answers
    # Every tool result follows the assistant message that called it, as the conversation stored them.
    first_call = next(i for i, e in enumerate(kept) if e.kind == TOOL_CALL)
    assert kept[first_call + 1].kind == TOOL_RESULT
    qa = run_turn(
        flow_with("query_answer"), ConversationState(conversation), "What is my reservation id?", llm=DemoClient()
    ).node_run("agent")
    assert agent.ledger.history_tokens > qa.ledger.history_tokens


def test_a_request_through_the_service_overrides_the_flow_and_is_stored_with_the_run(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    conv = service.start(service.import_flow(FLOW).flow_id)
    service.send(conv.id, "What is 6*7?")
    default = service.send(conv.id, "And what did you calculate?")
    override = service.send(conv.id, "And now?", granularity="all_messages")
    assert (default.node_run("agent").granularity_source, override.node_run("agent").granularity_source) == (
        FROM_FLOW,
        FROM_REQUEST,
    )
    assert [e.kind for e in default.node_run("agent").ledger.entries if e.kept] == [QUERY, ANSWER]
    assert [e.kind for e in override.node_run("agent").ledger.entries if e.kept] == [
        QUERY,
        TOOL_CALL,
        TOOL_RESULT,
        ANSWER,
        QUERY,
        ANSWER,
    ]
    conversation = service.conversation(conv.id)
    stored = service.node_runs(conversation, conversation.turns[-1].id)
    agent = next(r for r in stored if r["node_id"] == "agent")
    assert (agent["granularity"], agent["granularity_source"]) == ("all_messages", FROM_REQUEST)
    with pytest.raises(RunError, match="granularity 'everything' is unknown"):
        service.send(conv.id, "x", granularity="everything")
    assert len(service.conversation(conv.id).turns) == 3
    db.dispose()


def test_unknown_granularities_are_refused_in_flows_and_requests():
    with pytest.raises(FlowError, match="history granularity 'all' is unknown"):
        flow_with("all")
    # The request names the modes as Dify does (QUERY_ANSWER / ALL_MESSAGES), in any case.
    assert resolve_granularity("QUERY_ANSWER", None) == ("query_answer", "request")
    with pytest.raises(GranularityError):
        resolve_granularity("everything", None)
    flow = flow_with(None)
    with pytest.raises(RunError, match="expected query_answer or all_messages"):
        run_turn(flow, ConversationState.new(flow), "hi", llm=DemoClient(), granularity="ALL")
