"""A what-if with the settings a turn was recorded with gives exactly what was recorded.

For every sample flow (sample_data/flows and the Dify DSL fixtures) and every memory strategy an
LLM node can run with, a short conversation with a branch is recorded on the demo model; then, turn
by turn and node by node, the what-if ledger (the switchboard's engine, replayed from the stored
conversation without a model) and the what-if prompt (the recorded prompt rebuilt with that
ledger's history) must equal the recorded ledger and prompt. Agent nodes take the same per-node
override through the same code path and are checked the same way.
"""

from __future__ import annotations

import pytest

from core.flow.graph import load_flow
from core.flow.node_types import NODE_TYPES, OVERRIDABLE_TYPES
from core.flow.nodes.window_memory import history_inputs
from core.flow.records import ConversationState
from core.flow.runtime import run_turn
from core.flow.what_if import what_if_ledger, what_if_prompt
from core.llm.client import DemoClient
from tests.conftest import FIXTURES, ROOT
from tests.flow.test_flow_dsl_samples import required_inputs

FLOWS = sorted((ROOT / "sample_data" / "flows").glob("*.yml")) + sorted((FIXTURES / "dify_dsl").glob("*.yml"))
#: The node types whose runs record a Dify memory ledger (LLM, Question Classifier, Parameter Extractor).
MODEL_TYPES = {name for name, kind in NODE_TYPES.items() if kind.dify_memory}
QUERIES = [
    "Hi, I'm Dana and my order number is 4411.",
    "What is 12*7?",
    "What's my name?",
    "How many earlier messages can you see?",
]

#: Every strategy an LLM node can be switched to, with settings small enough to bite in four turns.
STRATEGIES = {
    "as configured": {},
    "dify shipped, window 2": {"strategy": "dify", "window": 2},
    "dify shipped, token counting": {
        "strategy": "dify",
        "window": 3,
        "plugin_token_counting": True,
        "context_size": 600,
    },
    "dify as documented": {"strategy": "dify", "window": 3, "fidelity": "documented", "context_size": 600},
    "window 3 messages": {"strategy": "window", "window": 3},
    "buffer": {"strategy": "buffer"},
    "off": {"strategy": "off"},
    "summary buffer": {"strategy": "summary_buffer", "max_history_tokens": 60},
    "compaction, shipped": {
        "strategy": "compaction",
        "context_size": 400,
        "max_tokens": 0,
        "compaction_profile": "shipped",
    },
    "compaction, exact": {
        "strategy": "compaction",
        "context_size": 400,
        "max_tokens": 0,
        "compaction_profile": "exact",
    },
    "trim": {"strategy": "trim", "max_history_tokens": 60},
    "dify agent app, token counting": {"strategy": "dify_agent", "plugin_token_counting": True, "context_size": 600},
    "trim messages from human": {
        "strategy": "trim",
        "max_history_tokens": 3,
        "trim_counter": "messages",
        "start_on": "human",
    },
}


def record(flow, overrides):
    """Four turns, the third regenerated from the first (a branch), each recorded as the service does."""
    state = ConversationState.new(flow)
    inputs = required_inputs(flow)
    records = []
    for i, query in enumerate(QUERIES):
        kwargs = {"parent_id": records[0].id} if i == 2 else {}
        records.append(
            run_turn(flow, state, query, inputs, llm=DemoClient(), node_memory_overrides=overrides, **kwargs)
        )
        state = state.apply(records[-1])
    return state.conversation, records


def check_what_ifs(flow, override) -> int:
    """Records a conversation with ``override`` on every LLM and agent node; checks every node with a
    memory that ran; returns how many node runs were checked."""
    overrides = {node.id: override for node in flow.nodes if node.type in OVERRIDABLE_TYPES} if override else None
    conversation, records = record(flow, overrides)
    checked = 0
    for position, rec in enumerate(records):
        for run in rec.node_runs:
            if run.type in OVERRIDABLE_TYPES and run.ledger is not None:
                where = f"{run.node_id} at turn {rec.turn}"
                # The switchboard's what-if: no record, the prompt size stored with the turn.
                ledger = what_if_ledger(flow, conversation, position, run.node_id, override or None)
                assert ledger == run.ledger, where
                assert (
                    what_if_ledger(flow, conversation, position, run.node_id, override or None, record=rec)
                    == run.ledger
                ), where
                recorded_prompt = [m.to_dict() for m in run.prompt]
                assert (
                    what_if_prompt(flow, conversation, position, run.node_id, recorded_prompt, ledger)
                    == recorded_prompt
                ), where
                checked += 1
    return checked


@pytest.mark.parametrize("path", FLOWS, ids=lambda p: p.name)
def test_a_what_if_with_the_recorded_settings_equals_the_recorded_ledgers_and_prompts(path):
    flow = load_flow(path)
    if not check_what_ifs(flow, {}):
        # Some shared DSL samples route these queries past every LLM node (their branches test
        # form inputs or variables); MemLens's own samples all reach one.
        assert path.parent.name == "dify_dsl", f"{path.name}: no node with a memory ran"
        return
    for name, override in STRATEGIES.items():
        if override and any(n.type in OVERRIDABLE_TYPES for n in flow.nodes):
            assert check_what_ifs(flow, override), f"{path.name} with {name}: no LLM or agent node ran"


def test_a_window_memory_store_written_over_by_an_input_replays_as_recorded():
    """The sample Window Memory flow with its history input used: the input's messages are part
    of the recorded store, and a what-if reads them back from the stored turn."""
    flow = load_flow(ROOT / "sample_data" / "flows" / "window-memory.yml")
    state = ConversationState.new(flow)
    records = []
    history = '[{"role": "user", "content": "I\'m Bob."}, {"role": "assistant", "content": "Hi Bob."}]'
    for query, inputs in (
        ("Hi, I'm Dana.", None),
        ("hello", {"history": history}),
        ("What's my name?", None),
        ("again", None),
    ):
        records.append(run_turn(flow, state, query, inputs, llm=DemoClient()))
        state = state.apply(records[-1])
    assert history_inputs(state.conversation, "memory") is not None
    for position, rec in enumerate(records):
        run = rec.node_run("responder")
        ledger = what_if_ledger(flow, state.conversation, position, "responder")
        assert ledger == run.ledger
        recorded_prompt = [m.to_dict() for m in run.prompt]
        assert (
            what_if_prompt(flow, state.conversation, position, "responder", recorded_prompt, ledger) == recorded_prompt
        )
    assert any(s.origin == "history set" for s in records[2].node_run("responder").ledger.synthetic)


@pytest.mark.parametrize("template", ["Header\n#histories#\nFooter", "Answer well."])
def test_a_completion_model_node_replays_as_recorded_under_every_strategy(template):
    """Completion models get one text with the history inside: the what-if prompt rebuilds that text."""
    from tests.flow.test_runtime_prompt import completion_flow

    flow = completion_flow(
        template, {"window": {"enabled": True, "size": 3}, "role_prefix": {"user": "Human", "assistant": "Assistant"}}
    )
    for name, override in STRATEGIES.items():
        assert check_what_ifs(flow, override) == len(QUERIES), name


def test_what_ifs_read_from_the_store_equal_what_was_recorded(tmp_path):
    """As the debugger sees a conversation: turns, ledgers and prompts loaded back from the database."""
    from core.service.sessions import ConversationService
    from core.store.db import Database

    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    service = ConversationService(db, llm=DemoClient())
    checked = 0
    for path in sorted((ROOT / "sample_data" / "flows").glob("*.yml")):
        info = service.start(service.import_flow(path).flow_id)
        for query in QUERIES:
            service.send(info.id, query)
        flow = service.flow(info.flow_version_id)
        conversation = service.conversation(info.id)
        for position, turn in enumerate(conversation.turns):
            for run in service.node_runs(conversation, turn.id):
                if run["type"] not in MODEL_TYPES or run.get("ledger") is None:
                    continue
                ledger = what_if_ledger(flow, conversation, position, run["node_id"])
                assert ledger == run["ledger"], f"{path.name}: {run['node_id']} at turn {position + 1}"
                assert (
                    what_if_prompt(flow, conversation, position, run["node_id"], run["prompt"], ledger) == run["prompt"]
                ), f"{path.name}: {run['node_id']} at turn {position + 1}"
                checked += 1
    db.dispose()
    # minimal-chat, long-term-memory, window-memory, order-desk's extractor, trip-agent's agent: 4 each;
    # support-bot: 8
    assert checked >= 24


def test_an_agent_nodes_what_if_changes_what_it_receives_as_a_run_with_that_override_does():
    """The agent node's per-node override, as the switchboard makes it: unchanged settings give the
    recorded ledger and prompt; a shorter window gives a shorter history, exactly what a run of the
    last turn with that override sends."""
    flow = load_flow(ROOT / "sample_data" / "flows" / "agent-tools.yml")
    conversation, records = record(flow, None)
    position, last = len(records) - 1, records[-1]
    run = last.node_run("agent")
    recorded_prompt = [m.to_dict() for m in run.prompt]
    unchanged = what_if_ledger(flow, conversation, position, "agent", run.memory)
    assert unchanged == run.ledger
    assert what_if_prompt(flow, conversation, position, "agent", recorded_prompt, unchanged) == recorded_prompt

    override = {**run.memory, "strategy": "window", "window": 1}
    changed = what_if_ledger(flow, conversation, position, "agent", override)
    changed_prompt = what_if_prompt(flow, conversation, position, "agent", recorded_prompt, changed)
    histories = [[m for m in p if m["origin"] == "memory history"] for p in (recorded_prompt, changed_prompt)]
    assert len(histories[1]) == 1 < len(histories[0])
    assert changed.config["strategy"] == "window"

    # The same turn run for real with the override: the agent receives the what-if prompt.
    state = ConversationState.new(flow)
    for rec in records[:-1]:
        state = state.apply(rec)
    rerun = run_turn(
        flow,
        state,
        QUERIES[-1],
        required_inputs(flow),
        llm=DemoClient(),
        parent_id=last.parent_id,
        node_memory_overrides={"agent": override},
    )
    assert rerun.node_run("agent").memory_override == override
    assert [m.to_dict() for m in rerun.node_run("agent").prompt] == changed_prompt
    assert rerun.node_run("agent").ledger.to_dict() == changed.to_dict()
