"""Real conversations: Dify's recorded prompts, and tau-bench tool-using trajectories."""

import pytest

from core.io import read_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.ledger import GRANULARITY, KEPT
from tests.conftest import FIXTURES

T = FIXTURES / "transcripts"
STRATEGIES = [
    MemoryConfig(),
    MemoryConfig(window=3),
    MemoryConfig(window=3, fidelity="code"),
    MemoryConfig(strategy="window", window=5),
    MemoryConfig(strategy="buffer"),
    MemoryConfig(strategy="off"),
    MemoryConfig(granularity="all_messages", context_size=2000),
]


def test_every_recorded_dify_prompt_equals_our_history_plus_the_turn():
    conv = read_conversations(T / "dify-web__realWorldMessages.json")[0]
    replay = Replay(conv, MemoryConfig())
    checked = 0
    for position, turn in enumerate(conv.turns):
        log = turn.meta.get("log")
        assert log, f"answer {turn.id} has no recorded log"
        ledger = replay.ledger_at(position)
        ours = [(m.role, m.content) for m in replay.history_messages(ledger)]
        ours += [("user", turn.query), ("assistant", turn.answer)]
        assert ours == [(m["role"], m["text"]) for m in log], turn.id
        checked += 1
    assert checked == 7  # including the second root thread and both "3306" siblings


def test_regenerated_3306_sees_only_its_own_thread():
    conv = read_conversations(T / "dify-web__realWorldMessages.json")[0]
    replay = Replay(conv, MemoryConfig())
    second = conv.index_of("684b5396-4e91-4043-88e9-aabe48b21acc")
    ledger = replay.ledger_at(second)
    assert [e.ref for e in ledger.kept] == [
        "cd5affb0-7bc2-4a6f-be7e-25e74595c9dd:query",
        "cd5affb0-7bc2-4a6f-be7e-25e74595c9dd:answer",
    ]
    sibling = "324bce32-c98c-435d-a66b-bac974ebb5ed"
    assert {e.reason for e in ledger.entries if str(e.ref).startswith(sibling)} == {"other_branch"}


TAU = read_conversations(T / "taubench__gpt-4o-airline.sample.jsonl")


def test_tau_bench_sample_has_its_six_trajectories_and_user_turns():
    assert [len(c.answered_turns()) for c in TAU] == [30, 26, 4, 13, 15, 14]
    assert all(c.system_prompt.startswith("# Airline Agent Policy") for c in TAU)


@pytest.mark.parametrize("config", STRATEGIES, ids=lambda c: c.label())
@pytest.mark.parametrize("index", range(6))
def test_tau_bench_replays_under_every_strategy(index, config):
    replay = Replay(TAU[index], config)
    summaries = replay.summaries()
    assert len(summaries) == len(TAU[index].answered_turns())
    last = replay.ledger(summaries[-1].turn)
    assert len(last.entries) == sum(len(t.messages) for t in TAU[index].turns[:-1])


def test_tau_bench_tool_messages_are_classified():
    conv = TAU[2]  # 27 tool calls
    kinds = [m.kind for t in conv.turns for m in t.messages]
    assert kinds.count("tool_result") == sum(1 for t in conv.turns for m in t.messages if m.role == "tool") > 0
    assert kinds.count("tool_call") > 0
    ledger = Replay(conv, MemoryConfig()).ledger(4)
    for e in ledger.entries:
        if e.kind in ("tool_call", "tool_result"):
            assert e.reason == GRANULARITY
        elif e.kind in ("query", "answer") and e.turn < 4:
            assert e.reason == KEPT
    window = Replay(conv, MemoryConfig(strategy="window", window=200)).ledger(4)
    assert all(e.kept for e in window.entries if e.kind in ("tool_call", "tool_result"))


def test_tool_result_messages_point_back_to_their_calls():
    conv = TAU[3]
    calls = {c.id for t in conv.turns for m in t.messages for c in m.tool_calls}
    results = [m for t in conv.turns for m in t.messages if m.kind == "tool_result"]
    assert results and all(m.tool_call_id in calls for m in results)
