"""A replay's per-turn summaries held as columns: what they read back is what was computed."""

import pickle

import pytest

from core.analysis.compare import turn_series
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.ledger import TurnSummaries, TurnSummary
from tests.builders import branched, dify, linear, openai, record


def test_columns_give_back_every_value_with_none_and_zero_kept_apart():
    a = TurnSummary(1, 0, 0, 0, 0, 17, 0, None)  # a budget of 0: nothing fits, nothing kept
    b = TurnSummary(2, 2, 0, 4, 11, 30, None, 1)  # no budget (counting off), the oldest kept turn 1
    c = TurnSummary(4, 1, 5, 2, 9, 28, 1_000_000, 3)
    summaries = TurnSummaries(5)
    for position, s in ((0, a), (2, b), (4, c)):
        summaries.put(position, s)
    summaries.keep()
    assert len(summaries) == 3 and list(summaries) == [a, b, c]
    assert summaries[0] == a and summaries[-1] == c and summaries[1:] == [b, c]
    assert summaries.column("budget") == [0, None, 1_000_000]
    assert summaries.column("oldest_kept_turn") == [None, 1, 3]
    assert summaries.column("kept") == [0, 2, 1] and summaries.column("turn") == [1, 2, 4]
    assert summaries.column("dropped") == [0, 0, 5] and summaries.column("not_eligible") == [0, 4, 2]
    assert summaries == [a, b, c] and summaries == (a, b, c)
    assert summaries != [a, b] and summaries != [a, c, b] and summaries != "abc" and summaries != 3
    assert pickle.loads(pickle.dumps(summaries)) == summaries
    assert "TurnSummary(turn=2" in repr(summaries)
    with pytest.raises(IndexError):
        summaries[3]


@pytest.mark.parametrize(
    "config",
    [
        MemoryConfig(fidelity="documented", window=3, context_size=60),  # prunes: budgets and drops
        MemoryConfig(window=2),  # Dify as shipped: no budget (None)
        MemoryConfig(strategy="window", window=3),
        MemoryConfig(strategy="off"),  # nothing kept: no oldest turn
        MemoryConfig(strategy="summary_buffer", max_history_tokens=40),  # a planning strategy's own walk
    ],
    ids=lambda c: c.label(),
)
def test_a_replay_s_summaries_equal_each_turn_s_own_on_a_branched_conversation(config):
    conv = branched(40)
    replay = Replay(conv, config)
    summaries = replay.summaries()
    alone = Replay(conv, config).summaries_at(range(len(conv.turns)))
    assert list(summaries) == [alone[p] for p in sorted(alone)]
    assert [s.turn for s in summaries] == sorted(s.turn for s in summaries)
    series = turn_series(replay)
    assert (
        series.turns,
        series.kept,
        series.history_tokens,
        series.budget,
        series.prompt_tokens,
        series.oldest_kept_turn,
    ) == tuple(
        list(x)
        for x in zip(
            *[(s.turn, s.kept, s.history_tokens, s.budget, s.prompt_tokens, s.oldest_kept_turn) for s in summaries]
        )
    )


def test_a_budget_of_zero_reads_back_as_zero_and_no_budget_as_none():
    conv = linear(4, answer=lambda i: "a long answer " * 20)
    tight = Replay(conv, MemoryConfig(fidelity="documented", context_size=1)).summaries()
    # Dify keeps the newest message even when it alone is over: the previous turn's answer.
    assert [s.budget for s in tight] == [0, 0, 0, 0] and [s.kept for s in tight] == [0, 1, 1, 1]
    assert [s.oldest_kept_turn for s in tight] == [None, 1, 2, 3]
    shipped = Replay(conv, MemoryConfig(window=3)).summaries()
    assert [s.budget for s in shipped] == [None] * 4
    assert [s.oldest_kept_turn for s in shipped] == [None, 1, 1, 2]


def test_a_turn_without_a_query_has_no_summary():
    conv = openai(
        [
            {"role": "assistant", "content": "Welcome!"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye"},
        ]
    )
    for config in (MemoryConfig(), MemoryConfig(strategy="summary_buffer")):
        assert [s.turn for s in Replay(conv, config).summaries()] == [1, 2]


def test_an_empty_conversation_has_no_summaries():
    summaries = Replay(dify([]), MemoryConfig()).summaries()
    assert len(summaries) == 0 and list(summaries) == [] and summaries == []
    one = Replay(dify([record("1", None, "q", "a")]), MemoryConfig()).summaries()
    assert one == [TurnSummary(1, 0, 0, 0, 0, one[0].prompt_tokens, None, None)]


def test_summaries_made_from_written_columns_read_them_back_and_refuse_a_wrong_shape():
    from array import array

    columns = [
        array("q", [1, 0, 3]),
        array("q", [0, 0, 2]),
        array("q", [0, 0, 4]),
        array("q", [0, 0, 1]),
        array("q", [0, 0, 30]),
        array("q", [9, 0, 50]),
        array("q", [-1, 0, 100]),
        array("q", [-1, 0, 1]),
    ]
    summaries = TurnSummaries(3, columns).keep()
    assert list(summaries) == [TurnSummary(1, 0, 0, 0, 0, 9, None, None), TurnSummary(3, 2, 4, 1, 30, 50, 100, 1)]
    with pytest.raises(ValueError, match="8 columns of 3 values"):
        TurnSummaries(3, columns[:-1])
    with pytest.raises(ValueError, match="8 columns of 2 values"):
        TurnSummaries(2, columns)
