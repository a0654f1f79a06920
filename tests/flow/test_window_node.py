"""The Window Memory node in flows: every option, and each decision where its documentation is ambiguous."""

from __future__ import annotations

import json
import random

import pytest

from core.flow.errors import FlowError
from core.flow.graph import Flow, load_flow
from core.flow.nodes.window_memory import FAIL_BRANCH, HISTORY_SET, parse_overwrite, window_call
from core.flow.records import ConversationState
from core.flow.runtime import run_conversation, run_turn
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import (
    ANSWER,
    QUERY,
    TOOL_CALL,
    TOOL_RESULT,
    UUID_NIL,
    Conversation,
    Message,
    ToolCall,
    Turn,
)
from core.model.ledger import KEPT, OUTSIDE_WINDOW, SCOPE, TRIMMED_EARLIER
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.conftest import ROOT

FLOW = ROOT / "sample_data" / "flows" / "window-memory.yml"


def turn(tid: str, parent: str | None, *messages: Message) -> Turn:
    return Turn(tid, parent, tuple(messages), 0, len(messages) - 1)


def msg(role: str, text: str, kind: str, ref: str, **kw) -> Message:
    return Message(role, text, kind, ref, **kw)


def c6_conversation() -> Conversation:
    """u1,a1 | u2,a2 | u3, a tool call, its result, a3 | the current turn u4."""
    return Conversation(
        "c",
        [
            turn("1", None, msg("user", "u1", QUERY, "u1"), msg("assistant", "a1", ANSWER, "a1")),
            turn("2", "1", msg("user", "u2", QUERY, "u2"), msg("assistant", "a2", ANSWER, "a2")),
            turn(
                "3",
                "2",
                msg("user", "u3", QUERY, "u3"),
                msg("assistant", "", TOOL_CALL, "tc3", tool_calls=(ToolCall("c3", "lookup", "{}"),)),
                msg("tool", "tr3", TOOL_RESULT, "tr3", tool_call_id="c3"),
                msg("assistant", "a3", ANSWER, "a3"),
            ),
            turn("4", "3", msg("user", "u4", QUERY, "u4"), msg("assistant", "", ANSWER, "a4")),
        ],
    )


def window(n: int = 3, scope: str = "thread") -> MemoryConfig:
    return MemoryConfig(strategy="window", window=n, scope=scope, model="memlens/demo")


def flow_with(**options) -> Flow:
    data = load_flow(FLOW).to_dict()
    for node in data["nodes"]:
        if node["id"] == "memory":
            node.update(options)
            for key, value in list(node.items()):
                if value is None:
                    del node[key]
    return Flow.from_dict(data)


# -- ambiguity 1: the stored list -------------------------------------------------------------------


def test_the_store_after_a_call_is_the_last_n_of_the_old_store_plus_the_new_round():
    """C.6: N=3, stored [u1,a1,u2,a2], round [u3,tc3,tr3,a3] → stored [a1,u2,a2,u3,tc3,tr3,a3] (reading (a))."""
    call = window_call(c6_conversation(), 3, "memory", window(3))
    reasons = {e.ref: e.reason for e in call.ledger.entries}
    stored = [e.ref for e in call.ledger.entries if e.reason != TRIMMED_EARLIER]
    assert stored == ["a1", "u2", "a2", "u3", "tc3", "tr3", "a3"]  # reading (b) would keep only tc3, tr3, a3
    assert reasons["u1"] == TRIMMED_EARLIER
    # The call sees the last 3 of that store.
    assert [m.ref for m in call.messages] == ["tc3", "tr3", "a3"]
    assert [e.ref for e in call.ledger.entries if e.reason == OUTSIDE_WINDOW] == ["a1", "u2", "a2", "u3"]


# -- ambiguity 3: tool pairs --------------------------------------------------------------------------


def test_the_cut_is_a_pure_message_count_that_may_split_a_tool_call_from_its_result():
    conversation = c6_conversation()
    two = window_call(conversation, 3, "memory", window(2))
    assert [m.kind for m in two.messages] == [TOOL_RESULT, ANSWER]  # a leading tool result, not repaired
    one_before = window_call(conversation, 3, "memory", window(3))
    assert one_before.messages[0].kind == TOOL_CALL  # starts on a call whose user message is gone


# -- the core window strategy ---------------------------------------------------------------------------


def random_conversation(seed: int) -> Conversation:
    rnd = random.Random(seed)
    turns = []
    for i in range(rnd.randint(1, 10)):
        parent = None if i == 0 else rnd.choice([str(rnd.randrange(i)), str(i - 1), str(i - 1), UUID_NIL])
        messages = [msg("user", f"q{i}", QUERY, f"{i}:q")]
        for k in range(rnd.choice([0, 0, 1, 2])):
            messages.append(msg("assistant", "", TOOL_CALL, f"{i}:c{k}", tool_calls=(ToolCall(f"{i}{k}", "t", "{}"),)))
            messages.append(msg("tool", "42", TOOL_RESULT, f"{i}:r{k}", tool_call_id=f"{i}{k}"))
        messages.append(msg("assistant", rnd.choice(["", f"a{i}"]), ANSWER, f"{i}:a"))
        turns.append(turn(str(i), parent, *messages))
    return Conversation("c", turns)


def listed_store(conversation: Conversation, position: int, n: int, inputs: dict, blocked: bool):
    """The node's rule written as the plain list its documentation describes: per call of the
    thread, an input replaces the store, the call sees its last ``n``, the store becomes those
    plus the call's round. Returns (refs the call sees, refs written over, refs outside its window)."""
    store: list[tuple[str, Message]] = []
    written_over: list[str] = []
    thread = [] if blocked else conversation.tree.thread(position)[:-1]
    for p in [*thread, position]:
        if p in inputs:
            written_over += [ref for ref, _ in store if not ref.startswith("input")]
            store = [(f"input:{p}:{j}", m) for j, m in enumerate(inputs[p])]
        if p == position:
            break
        store = store[-n:] + [(m.ref, m) for m in conversation.turns[p].messages]
    seen = [ref for ref, m in store[-n:] if not m.is_empty]
    outside = [ref for ref, _ in store[:-n] if not ref.startswith("input")] if len(store) > n else []
    return seen, written_over, outside


def test_the_node_keeps_what_its_documented_list_rule_keeps_with_and_without_inputs():
    """The strategy's two-index bookkeeping against the rule written as a list, on random threads
    with inputs written over the store now and then (the current call's and earlier turns')."""
    for seed in range(300):
        rnd = random.Random(seed)
        conversation = random_conversation(seed)
        n, scope = rnd.randint(1, 6), rnd.choice(["thread", "thread", "session", "call"])
        has_thread = rnd.random() > 0.2
        blocked = scope != "thread" or not has_thread
        inputs = {
            p: [
                msg(rnd.choice(["user", "assistant"]), rnd.choice(["", f"i{p}.{j}"]), "intermediate", f"input:{p}:{j}")
                for j in range(rnd.randint(0, 4))
            ]
            for p in range(len(conversation.turns))
            if rnd.random() < 0.3
        }
        turns = [
            t
            if p not in inputs or blocked
            else Turn(
                t.id,
                t.parent_id,
                t.messages,
                t.query_index,
                t.answer_index,
                meta={"window_overwrites": {"memory": [m.to_openai() for m in inputs[p]]}},
            )
            for p, t in enumerate(conversation.turns)
        ]
        conversation = Conversation("c", turns)
        for position in range(len(conversation.turns)):
            call = window_call(
                conversation,
                position,
                "memory",
                window(n, scope),
                overwrite=inputs.get(position),
                has_thread=has_thread,
                prompt_tokens=11,
            )
            seen, written_over, outside = listed_store(conversation, position, n, inputs, blocked)
            assert [m.content if m.ref.startswith("input") else m.ref for m in call.messages] == [
                r if not r.startswith("input") else inputs[int(r.split(":")[1])][int(r.split(":")[2])].content
                for r in seen
            ]
            reasons = {e.ref: e.reason for e in call.ledger.entries}
            assert [r for r in reasons if reasons[r] == OUTSIDE_WINDOW] == outside
            assert {reasons[r] for r in written_over} <= {TRIMMED_EARLIER}
            assert call.ledger.history_tokens == sum(e.tokens for e in call.ledger.entries if e.kept) + sum(
                s.tokens for s in call.ledger.synthetic
            )
            assert call.ledger.prompt_tokens == 11 + call.ledger.history_tokens
            if written_over:
                assert f"{len(written_over)} earlier message" in call.ledger.budget_note


def test_a_call_sees_exactly_what_replaying_its_strategy_with_the_recorded_inputs_gives():
    """One engine: the node's call and a replay of the ``window`` strategy agree (what-if == recorded)."""
    for seed in range(100):
        rnd = random.Random(seed)
        conversation = random_conversation(seed)
        config = window(rnd.randint(1, 6), rnd.choice(["thread", "thread", "session", "call"]))
        has_thread = rnd.random() > 0.2
        replay = Replay(conversation, config, system_prompt="", has_thread=has_thread, prompt_tokens=lambda _: 11)
        for position in range(len(conversation.turns)):
            node = window_call(conversation, position, "memory", config, has_thread=has_thread, prompt_tokens=11).ledger
            assert node == replay.ledger_at(position)


# -- scopes -------------------------------------------------------------------------------------------


def test_scope_call_and_session_start_every_turn_empty_and_thread_remembers():
    for scope, remembers in (("call", False), ("session", False), ("thread", True)):
        _, records = run_conversation(flow_with(scope=scope), ["Hi, I'm Dana.", "What's my name?"], llm=DemoClient())
        ledger = records[1].node_run("responder").ledger
        if remembers:
            assert [e.reason for e in ledger.entries] == [KEPT, KEPT] and records[1].answer == "Your name is Dana."
        else:
            assert [e.reason for e in ledger.entries] == [SCOPE, SCOPE] and "I don't know" in records[1].answer


def test_without_a_chat_thread_two_calls_in_one_run_share_the_store_and_a_new_run_starts_empty():
    """C.6: scope thread without a thread id behaves like session (a workflow app has no chat thread)."""
    data = flow_with().to_dict()
    data["mode"] = "workflow"
    ask = [{"role": "user", "text": "What's my name?"}]
    for node in data["nodes"]:
        if node["id"] == "responder":
            node["prompt_template"] = ask
    data["nodes"].append(
        {"id": "second", "type": "llm", "model": "memlens/demo", "memory_node": "memory", "prompt_template": ask}
    )
    data["edges"] = [e for e in data["edges"] if e["target"] != "answer"] + [
        {"source": "responder", "target": "second"},
        {"source": "second", "target": "answer"},
    ]
    flow = Flow.from_dict(data)
    state = ConversationState.new(flow)
    first = run_turn(
        flow, state, "", {"history": history(("user", "I'm Bob."), ("assistant", "Hi Bob."))}, llm=DemoClient()
    )
    for node in ("responder", "second"):
        assert [m.content for m in first.node_run(node).prompt if m.origin == "memory history"] == [
            "I'm Bob.",
            "Hi Bob.",
        ]
        assert "Your name is Bob." in first.node_run(node).reply
    second = run_turn(flow, state.apply(first), "", llm=DemoClient())
    assert {e.reason for e in second.node_run("responder").ledger.entries} == {SCOPE}
    assert second.node_run("responder").reply.startswith("I don't know your name")


# -- ambiguity 2: system messages -------------------------------------------------------------------


def test_the_system_prompt_is_never_stored_or_counted_and_input_system_messages_are_dropped():
    _, records = run_conversation(flow_with(window=2), ["one", "two"], llm=DemoClient())
    responder = records[1].node_run("responder")
    assert [e.role for e in responder.ledger.entries] == ["user", "assistant"]  # no system message in the store
    assert [m.origin for m in responder.prompt] == ["system", "memory history", "memory history", "current query"]
    messages, notes = parse_overwrite([{"role": "system", "content": "be terse"}, {"role": "user", "content": "hi"}])
    assert [m.role for m in messages] == ["user"] and "system message in the input dropped" in notes[0]


# -- ambiguity 4: N out of range ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 201, -1, "10", True, 2.5])
def test_a_window_outside_1_to_200_is_refused_when_the_flow_loads(bad):
    with pytest.raises(FlowError, match="out of range: the Window Memory node keeps 1..200"):
        flow_with(window=bad)


def test_the_edges_of_the_range_and_the_default_are_accepted():
    assert flow_with(window=1) and flow_with(window=200)
    assert (
        window_call(c6_conversation(), 3, "m", MemoryConfig(strategy="window", model="memlens/demo")).messages[0].ref
        == "u1"
    )  # default 10: everything fits


@pytest.mark.parametrize(
    "change, message",
    [
        ({"scope": "global"}, "scope 'global' is unknown"),
        ({"overwrite_from_input": ["history"]}, "overwrite_from_input must name a variable"),
        ({"expose_messages_output": "yes"}, "expose_messages_output must be true or false"),
    ],
)
def test_other_malformed_options_are_refused_when_the_flow_loads(change, message):
    with pytest.raises(FlowError, match=message):
        flow_with(**change)


# -- ambiguity 5 and overwrite_from_input -------------------------------------------------------------------


def history(*pairs) -> str:
    return json.dumps([{"role": role, "content": text} for role, text in pairs])


def test_an_overwrite_replaces_the_store_before_the_call_and_sets_the_history_signal():
    flow = flow_with()
    state = ConversationState.new(flow)
    first = run_turn(flow, state, "Hi, I'm Dana.", llm=DemoClient())
    assert first.node_run("memory").outputs["history_set"] is False
    state = state.apply(first)
    second = run_turn(
        flow,
        state,
        "What's my name?",
        {"history": history(("user", "I'm Bob."), ("assistant", "Hi Bob."))},
        llm=DemoClient(),
    )
    memory = second.node_run("memory")
    assert memory.outputs["history_set"] is True and memory.outputs["count"] == 2
    responder = second.node_run("responder")
    assert [e.reason for e in responder.ledger.entries] == [TRIMMED_EARLIER, TRIMMED_EARLIER]
    assert [(s.origin, s.content) for s in responder.ledger.synthetic] == [
        (HISTORY_SET, "I'm Bob."),
        (HISTORY_SET, "Hi Bob."),
    ]
    assert [m.content for m in responder.prompt if m.origin == "memory history"] == ["I'm Bob.", "Hi Bob."]
    assert second.answer == "Your name is Bob."
    assert responder.ledger.history_tokens == sum(s.tokens for s in responder.ledger.synthetic)
    # The input persists on the thread: later turns see it, then the rounds after it.
    state = state.apply(second)
    third = run_turn(flow, state, "What's my name?", llm=DemoClient())
    assert third.node_run("memory").outputs["history_set"] is False
    assert [m.content for m in third.node_run("responder").prompt if m.origin == "memory history"] == [
        "I'm Bob.",
        "Hi Bob.",
        "What's my name?",
        "Your name is Bob.",
    ]


def test_an_overwrite_longer_than_the_window_is_trimmed_to_its_last_n_for_good():
    flow = flow_with(window=4)
    state = ConversationState.new(flow)
    long = history(*[("user", f"message {i}") if i % 2 == 0 else ("assistant", f"reply {i}") for i in range(6)])
    first = run_turn(flow, state, "hello", {"history": long}, llm=DemoClient())
    seen = [m.content for m in first.node_run("responder").prompt if m.origin == "memory history"]
    assert seen == ["message 2", "reply 3", "message 4", "reply 5"]
    second = run_turn(flow, state.apply(first), "again", llm=DemoClient())
    later = [m.content for m in second.node_run("responder").prompt if m.origin == "memory history"]
    assert later == ["message 4", "reply 5", "hello", first.answer]  # message 0..reply 3 never come back


def test_an_empty_list_clears_the_history_and_an_empty_field_is_no_input():
    flow = flow_with()
    state = ConversationState.new(flow)
    state = state.apply(run_turn(flow, state, "Hi, I'm Dana.", llm=DemoClient()))
    unfilled = run_turn(flow, state, "What's my name?", {"history": ""}, llm=DemoClient())
    assert unfilled.node_run("memory").outputs["history_set"] is False and unfilled.answer == "Your name is Dana."
    cleared = run_turn(flow, state, "What's my name?", {"history": "[]"}, llm=DemoClient())
    assert cleared.node_run("memory").outputs == {"history_set": True, "count": 0, "messages": []}
    assert "I don't know your name" in cleared.answer


def test_with_session_scope_an_overwrite_is_this_calls_history_only():
    flow = flow_with(scope="session")
    state = ConversationState.new(flow)
    first = run_turn(flow, state, "What's my name?", {"history": history(("user", "I'm Bob."))}, llm=DemoClient())
    assert first.answer == "Your name is Bob." and first.window_overwrites == {}
    second = run_turn(flow, state.apply(first), "What's my name?", llm=DemoClient())
    assert "I don't know your name" in second.answer


def test_an_overwrite_survives_a_restart_of_the_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    conv = service.start(service.import_flow(FLOW).flow_id)
    service.send(conv.id, "Hi, I'm Dana.")
    service.send(conv.id, "hello", {"history": history(("user", "I'm Bob."), ("assistant", "Hi Bob."))})
    db.dispose()
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    record = service.send(conv.id, "What's my name?")
    assert record.answer == "Your name is Bob."
    ledger = record.node_run("responder").ledger
    assert [e.reason for e in ledger.entries][:2] == [TRIMMED_EARLIER, TRIMMED_EARLIER]
    assert [s.content for s in ledger.synthetic] == ["I'm Bob.", "Hi Bob."]
    db.dispose()


# -- expose_messages_output ------------------------------------------------------------------------------


def test_exposed_messages_are_what_the_reading_node_receives_and_other_nodes_can_read_them():
    data = flow_with(window=3).to_dict()
    for node in data["nodes"]:
        if node["id"] == "answer":
            node["answer"] = "{{#responder.text#}} | {{#memory.messages#}}"
    flow = Flow.from_dict(data)
    _, records = run_conversation(flow, ["Hi, I'm Dana.", "What's my name?", "again"], llm=DemoClient())
    last = records[-1]
    exposed = last.node_run("memory").outputs["messages"]
    received = [m for m in last.node_run("responder").prompt if m.origin == "memory history"]
    assert [(m["role"], m["content"]) for m in exposed] == [(m.role, m.content) for m in received]
    assert len(exposed) == 3
    assert json.loads(last.answer.split(" | ", 1)[1]) == exposed


def test_without_the_option_there_is_no_messages_output():
    flow = flow_with(expose_messages_output=False)
    record = run_turn(flow, ConversationState.new(flow), "hi", llm=DemoClient())
    assert "messages" not in record.node_run("memory").outputs


# -- expose_error_output ---------------------------------------------------------------------------------


def test_a_malformed_input_takes_the_error_path_instead_of_failing_the_turn():
    flow = flow_with()
    record = run_turn(flow, ConversationState.new(flow), "hi", {"history": "not json"}, llm=DemoClient())
    assert record.succeeded
    memory = record.node_run("memory")
    assert memory.status == "exception" and memory.branch == FAIL_BRANCH
    assert memory.outputs["error_type"] == "WindowInputError"
    assert not record.ran("responder") and record.ran("bad_history")
    assert record.answer.startswith("The history input was not usable: overwrite_from_input: the input is text")


def test_without_the_error_output_a_malformed_input_fails_the_turn():
    flow = flow_with(expose_error_output=False)
    record = run_turn(
        flow, ConversationState.new(flow), "hi", {"history": json.dumps([{"role": "robot"}])}, llm=DemoClient()
    )
    assert not record.succeeded and record.answer == ""
    assert record.error == "overwrite_from_input: message 1 has role 'robot'; expected user, assistant or tool"
    assert not record.ran("bad_history")


def test_on_success_only_the_success_path_runs():
    flow = flow_with()
    record = run_turn(flow, ConversationState.new(flow), "hi", llm=DemoClient())
    assert record.node_run("memory").branch == "source"
    assert record.ran("responder") and not record.ran("bad_history")


def test_a_node_reading_a_window_memory_that_did_not_run_fails_with_a_clear_message():
    data = flow_with().to_dict()
    # The memory runs after the node that reads it.
    data["edges"] = [
        {"source": "start", "target": "responder"},
        {"source": "responder", "target": "answer"},
        {"source": "answer", "target": "memory"},
        {"source": "memory", "target": "bad_history", "handle": "fail-branch"},
    ]
    flow = Flow.from_dict(data)
    record = run_turn(flow, ConversationState.new(flow), "hi", llm=DemoClient())
    assert (
        record.error == "window memory 'memory' has not run before 'responder' in this turn; connect it before "
        "'responder'"
    )


def test_a_what_if_on_a_node_reading_window_memory_starts_from_that_nodes_window():
    from core.flow.node_memory import node_memory_config
    from core.flow.what_if import what_if_ledger

    flow = flow_with(window=3)
    state, records = run_conversation(flow, ["one", "two", "three", "four"], llm=DemoClient())
    assert node_memory_config(flow, "responder").to_dict() | {"model": "memlens/demo"} == records[-1].node_run(
        "responder"
    ).memory | {"model": "memlens/demo"}
    position = len(state.conversation.turns) - 1
    same = what_if_ledger(flow, state.conversation, position, "responder", record=records[-1])
    assert same.entries == records[-1].node_run("responder").ledger.entries
    wider = what_if_ledger(flow, state.conversation, position, "responder", {"window": 6})
    assert sum(e.kept for e in wider.entries) == 6 > sum(e.kept for e in same.entries) == 3


def test_a_what_if_of_a_node_reading_window_memory_replays_the_inputs_written_over_its_store():
    from core.analysis.debug_view import what_if
    from core.flow.node_memory import node_history_inputs, node_memory_config
    from core.flow.what_if import what_if_ledger

    flow = flow_with(window=3)
    state = ConversationState.new(flow)
    records = []
    for query, inputs in (
        ("Hi, I'm Dana.", None),
        ("hello", {"history": history(("user", "I'm Bob."), ("assistant", "Hi Bob."))}),
        ("What's my name?", None),
        ("again", None),
    ):
        records.append(run_turn(flow, state, query, inputs, llm=DemoClient()))
        state = state.apply(records[-1])
    conversation = state.conversation
    for position, record in enumerate(records):
        recorded = record.node_run("responder").ledger
        assert what_if_ledger(flow, conversation, position, "responder", record=record) == recorded
    assert [s.content for s in records[2].node_run("responder").ledger.synthetic] == ["Hi Bob."]
    config = node_memory_config(flow, "responder")
    unchanged = what_if(
        conversation, "responder", config, config, history_inputs=node_history_inputs(flow, conversation, "responder")
    )
    assert unchanged.differs == []
    without_inputs = what_if(
        conversation,
        "responder",
        config,
        config.with_(window=4),
        history_inputs=node_history_inputs(flow, conversation, "responder"),
    )
    assert without_inputs.kept_after[3] == without_inputs.kept_before[3] + 1


def test_the_fast_path_without_inputs_and_the_input_aware_plan_decide_alike():
    """Without inputs the window strategy runs on the engine's two-index fast path; with an input
    source that gives none it plans: ledgers and per-turn summaries must not tell them apart."""
    for seed in range(120):
        rnd = random.Random(seed)
        conversation = random_conversation(seed)
        changes = tuple(sorted({(rnd.randint(1, 10), rnd.randint(1, 6)) for _ in range(rnd.choice([0, 1, 2]))}))
        config = window(rnd.randint(1, 6), rnd.choice(["thread", "thread", "session"])).with_(window_changes=changes)
        has_thread = rnd.random() > 0.2
        fast = Replay(conversation, config, system_prompt="", has_thread=has_thread)
        planned = Replay(conversation, config, system_prompt="", has_thread=has_thread, history_inputs=lambda _: None)
        assert not fast.plans and planned.plans
        assert fast.summaries() == planned.summaries()
        for position in range(len(conversation.turns)):
            assert fast.ledger_at(position) == planned.ledger_at(position)


def test_an_inputs_messages_are_sent_as_history_set_messages_and_counted_in_every_summary():
    from core.model.ledger import SyntheticMessage
    from core.model.tokens import counter_for

    conversation = c6_conversation()
    written, _ = parse_overwrite(
        [
            {"role": "user", "content": "I'm Bob."},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": "Hi Bob."},
        ]
    )
    call = window_call(conversation, 3, "memory", window(3), overwrite=written)
    counter = counter_for("memlens/demo")
    assert call.ledger.synthetic == [
        SyntheticMessage(
            role="user",
            content="I'm Bob.",
            tokens=counter.message(written[0]),
            origin=HISTORY_SET,
            turn=4,
            ref="history-set:4:1",
        ),
        SyntheticMessage(
            role="assistant",
            content="Hi Bob.",
            tokens=counter.message(written[2]),
            origin=HISTORY_SET,
            turn=4,
            ref="history-set:4:3",
        ),
    ]
    # u1 was trimmed earlier; the store the input replaces is a1, u2, a2, u3, tc3, tr3, a3.
    assert (
        call.ledger.budget_note == "history set from the input: 3 messages; 7 earlier messages written over by an input"
    )
    replay = Replay(
        conversation,
        window(3),
        system_prompt="",
        prompt_tokens=lambda _: 5,
        history_inputs=lambda p: written if p == 3 else None,
    )
    summary = replay.summaries()[-1]
    assert summary.history_tokens == call.ledger.history_tokens == sum(s.tokens for s in call.ledger.synthetic) > 0
