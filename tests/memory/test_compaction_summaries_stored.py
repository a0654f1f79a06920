"""compaction, "Dify 1.17 as shipped": the summary written at a compaction is stored with the turn
(the agent's node run, the turn's record and its compaction records), so reopening the conversation,
replaying it and what-if with the run's settings show the summary the model actually wrote — and the
model is not asked to write it again. With the demo model the offline summary is stored the same way."""

from __future__ import annotations

from core.flow.records import ConversationState
from core.flow.runtime import run_turn
from core.llm.client import DemoClient, LLMReply
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies.compaction import SUMMARIES_META, RecordedSummaries, stored_summaries, summary_key
from core.memory.strategies.shipped_compaction import SUMMARY_HEADER
from core.memory.summarize import SECTIONS_OFFLINE
from core.model.ledger import SUMMARY
from core.service.sessions import ConversationService
from core.store.db import Database
from core.store.errors import StoreError
from tests.memory.test_compaction_shipped import LongLookupModel, agent_flow_with_compaction

MODEL = "openai/gpt-4o-mini"


class SummarisingModel(LongLookupModel):
    """The litellm-style stand-in of the shipped tests, writing a different summary at every call
    (a real model would not write the same text twice)."""

    def __init__(self, calls, label):
        super().__init__(calls)
        self.label = label

    def complete(self, model, messages, max_tokens=None):
        self.summary_prompts.append(messages[-1]["content"])
        return LLMReply(f"## Intent\n- {self.label} summary {len(self.summary_prompts)}", 1, 1, model)


class NeverAsked:
    """A summariser that fails the test when it is asked: every summary must come from the store."""

    name = "never asked"

    def summarize(self, messages, previous_summary=""):
        raise AssertionError("a stored summary was written again")


def summaries_of(compactions):
    return [c["summary"] for c in compactions if "summarize" in c["tiers"]]


def test_a_real_models_summary_is_stored_with_the_turn_and_shown_after_reopening_in_replay_and_what_if(tmp_path):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    flow = agent_flow_with_compaction(2000)
    live = SummarisingModel(calls=30, label="first run's")
    service = ConversationService(Database(url), llm=live)
    info = service.start(service.import_flow(flow).flow_id)
    record = service.send(info.id, "Please check every item.")
    agent = record.node_run("agent")
    written = [f"## Intent\n- first run's summary {k}" for k in range(1, len(live.summary_prompts) + 1)]
    assert len(written) >= 2, "the fixture compacts more than once inside the tool loop"
    assert [s["summary"] for s in agent.summaries] == written
    assert {s["written_by"] for s in agent.summaries} == {MODEL}
    # Every compacted request still opens with the agent's instructions, then the summary.
    system_prompt = flow.node("agent").data["system_prompt"]
    for c in agent.ledger.compactions:
        if "summarize" in c["tiers"]:
            request = live.seen[c["request"] - 1]
            assert request[0] == {"role": "system", "content": system_prompt}
            assert request[1]["content"] == SUMMARY_HEADER + c["summary"]
    # The check's record in the ledger and in the step's state record carries the text it wrote.
    assert summaries_of(agent.ledger.compactions) == written
    assert summaries_of([s["compaction"] for s in agent.steps if "compaction" in s]) == written

    # Reopened in a new process: a new store handle and a model that would write other summaries.
    later = SummarisingModel(calls=30, label="second run's")
    reopened = ConversationService(Database(url), llm=later)
    conversation = reopened.conversation(info.id)
    assert [s["summary"] for s in stored_summaries(conversation.turns[0].meta)] == written
    stored_run = next(r for r in reopened.node_runs(conversation, record.id) if r["node_id"] == "agent")
    assert [s["summary"] for s in stored_run["summaries"]] == written
    # The replay (report, replay view) and what-if with the recorded settings give back the stored texts.
    recorded = MemoryConfig.from_dict(stored_run["memory"])
    replayed = Replay(conversation, recorded, system_prompt=system_prompt, summarizer=NeverAsked()).ledger(1)
    assert summaries_of(replayed.compactions) == written
    what_if = Replay(conversation, recorded.with_(compaction_keep_tool_results=3), system_prompt=system_prompt)
    assert summaries_of(what_if.ledger(1).compactions) == written
    # Other settings fold other messages: those summaries are written afresh (offline), not the stored ones.
    changed = Replay(conversation, recorded.with_(compaction_keep_messages=10), system_prompt=system_prompt)
    assert summaries_of(changed.ledger(1).compactions)
    assert not set(summaries_of(changed.ledger(1).compactions)) & set(written)

    # The next turn starts from the stored history: the first turn's last summary, never asked for again.
    second = reopened.send(info.id, "And once more, please.")
    sent = second.node_run("agent").ledger
    assert [m.content for m in sent.synthetic if m.origin == SUMMARY] == [SUMMARY_HEADER + written[-1]]
    assert not set(later.summary_prompts) & set(live.summary_prompts)
    # Its checks inside the tool loop started from that stored history too: its replay makes the same ones.
    loop = [(c["request"], c["tiers"], c["cleared"], c["summary"]) for c in sent.compactions if c["in_tool_loop"]]
    assert loop and any("summarize" in tiers for _, tiers, _, _ in loop)
    again = Replay(reopened.conversation(info.id), recorded, system_prompt=system_prompt, summarizer=NeverAsked())
    assert [
        (c["request"], c["tiers"], c["cleared"], c["summary"]) for c in again.ledger(2).compactions if c["in_tool_loop"]
    ] == loop


def test_with_the_demo_model_the_offline_summary_is_stored_the_same_way():
    flow = agent_flow_with_compaction(600)
    flow.node("agent").data["memory"]["compaction_keep_messages"] = 4
    state = ConversationState.new(flow)
    for k in range(8):
        record = run_turn(
            flow, state, f"Turn {k}: my order number is {4400 + k}. " + "Please note this. " * 12, llm=DemoClient()
        )
        state = state.apply(record)
    stored = [s for t in state.conversation.turns for s in stored_summaries(t.meta)]
    assert len(stored) >= 2, "the demo runs compacted more than once"
    assert {s["written_by"] for s in stored} == {SECTIONS_OFFLINE.name}
    assert all(s["summary"].startswith("## Intent") for s in stored)
    config = MemoryConfig.from_dict(record.node_run("agent").memory)
    replay = Replay(
        state.conversation, config, system_prompt=flow.node("agent").data["system_prompt"], summarizer=NeverAsked()
    )
    shown = [c["summary"] for n in range(1, 9) for c in replay.ledger(n).compactions if "summarize" in c["tiers"]]
    assert shown == [s["summary"] for s in stored]


def test_a_summary_is_given_back_only_for_the_same_model_and_the_same_input():
    from core.model.conversation import QUERY, Conversation, Message, Turn

    folded = [Message("user", "Ship order 7", QUERY, 1)]
    key = summary_key(MODEL, folded, "")
    assert key != summary_key("anthropic/claude-3-5-sonnet", folded, "")
    assert key != summary_key(MODEL, folded, "## Intent\n- earlier")
    assert key != summary_key(MODEL, [Message("user", "Ship order 8", QUERY, 1)], "")
    turn = Turn(
        "t1",
        None,
        (Message("user", "q", QUERY, "t1:query"),),
        meta={
            SUMMARIES_META: [
                {"key": key, "summary": "stored", "written_by": MODEL},
                {"key": 7, "summary": "damaged"},
                "not an entry",
            ]
        },
    )
    conversation = Conversation("c", [turn])
    recorded = RecordedSummaries(
        Replay(conversation, MemoryConfig(strategy="compaction", model=MODEL), summarizer=SECTIONS_OFFLINE)
    )
    assert recorded.summarize(folded, None) == "stored" and recorded.written == []
    assert recorded.summarize(folded, "## Intent\n- earlier") != "stored", "another previous summary is another input"
    recorded.written.clear()
    other = [Message("user", "Ship order 8", QUERY, 1)]
    fresh = recorded.summarize(other, None)
    assert fresh == SECTIONS_OFFLINE.summarize(other, "")
    assert recorded.written == [
        {"key": summary_key(MODEL, other, ""), "summary": fresh, "written_by": SECTIONS_OFFLINE.name}
    ]
    assert stored_summaries({SUMMARIES_META: "not a list"}) == [] and stored_summaries(None) == []


def test_the_stored_summaries_survive_export_and_import_and_a_bad_one_is_refused_in_one_line(tmp_path):
    import json

    import pytest

    from core.io.errors import BundleError

    flow = agent_flow_with_compaction(2000)
    service = ConversationService(Database(f"sqlite:///{tmp_path / 'a.db'}"), llm=SummarisingModel(30, "model's"))
    conv = service.start(service.import_flow(flow).flow_id).id
    service.send(conv, "Please check every item.")
    bundle = json.loads(json.dumps(service.export(conv)))
    written = bundle["turns"][0][SUMMARIES_META]
    assert written and [s["summary"] for s in written] == [
        s["summary"] for r in bundle["turns"][0]["node_runs"] if r["node_id"] == "agent" for s in r["summaries"]
    ]
    other = ConversationService(Database(f"sqlite:///{tmp_path / 'b.db'}"))
    other.import_(bundle)
    assert stored_summaries(other.conversation(conv).turns[0].meta) == written
    bad = json.loads(json.dumps(bundle))
    bad["conversation"]["id"] = "another"
    bad["turns"][0][SUMMARIES_META][0]["summary"] = ["not", "text"]
    with pytest.raises(BundleError, match=r"turn 0 compaction summary 0: 'summary' must be a string, not a list$"):
        other.import_(bad)
    with pytest.raises(StoreError, match="no conversation"):
        other.conversation("another")  # nothing of it was stored


def test_an_llm_nodes_shipped_compaction_stores_its_summaries_with_the_turn_as_an_agent_does():
    from core.flow.graph import load_flow
    from tests.conftest import ROOT

    flow = load_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml")
    override = {"llm": {"strategy": "compaction", "context_size": 300, "compaction_keep_messages": 4}}
    state = ConversationState.new(flow)
    for k in range(8):
        record = run_turn(
            flow,
            state,
            f"Turn {k}: my order number is {4400 + k}. " + "Please note this. " * 12,
            llm=DemoClient(),
            node_memory_overrides=override,
        )
        run = record.node_run("llm")
        assert [s["summary"] for s in run.summaries or ()] == summaries_of(run.ledger.compactions)
        state = state.apply(record)
        assert stored_summaries(state.conversation.turns[-1].meta) == (run.summaries or [])
    stored = [s for t in state.conversation.turns for s in stored_summaries(t.meta)]
    assert len(stored) >= 2, "the runs compacted more than once"
    assert {s["written_by"] for s in stored} == {SECTIONS_OFFLINE.name}
    config = MemoryConfig.from_dict(record.node_run("llm").memory)
    replay = Replay(state.conversation, config, system_prompt="", summarizer=NeverAsked())
    shown = [c["summary"] for n in range(1, 9) for c in replay.ledger(n).compactions if "summarize" in c["tiers"]]
    assert shown == [s["summary"] for s in stored]
