"""Reason precedence, granularity, buffer/off, and the fast per-turn summaries agreeing with full ledgers."""

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import COUNT_CHUNK, Replay
from core.memory.strategies import STRATEGIES
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.model.ledger import (
    EMPTY,
    GRANULARITY,
    KEPT,
    MEMORY_OFF,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    PIPELINE,
    SCOPE,
    TRIMMED_EARLIER,
)
from core.model.tokens import TokenCounter
from tests.builders import dify, linear, openai, record
from tests.memory.declared import declared_configs

DIFY = MemoryConfig(fidelity="documented")  # the docs' profile: it always prunes to the budget


def tool_turn(mid, parent, query="q", answer="a"):
    call = ToolCall("c", "lookup", '{"id": 1}')
    msgs = (
        Message("user", query, QUERY, f"{mid}:query"),
        Message("assistant", "", TOOL_CALL, f"{mid}:call", tool_calls=(call,)),
        Message("tool", "result", TOOL_RESULT, f"{mid}:result", tool_call_id="c"),
        Message("assistant", answer, ANSWER, f"{mid}:answer"),
    )
    return Turn(id=mid, parent_id=parent, messages=msgs, query_index=0, answer_index=3)


def reasons(ledger):
    return {e.ref: e.reason for e in ledger.entries}


def test_pipeline_order_is_fixed():
    assert PIPELINE == (
        MEMORY_OFF,
        SCOPE,
        OTHER_BRANCH,
        GRANULARITY,
        TRIMMED_EARLIER,
        OUTSIDE_WINDOW,
        OVER_BUDGET,
        EMPTY,
    )


def test_memory_off_comes_before_everything():
    conv = dify([tool_turn("1", None), tool_turn("2", None), record("3", "1")])
    ledger = Replay(conv, MemoryConfig(strategy="off")).ledger(3)
    assert {e.reason for e in ledger.entries} == {MEMORY_OFF}


def test_scope_comes_before_other_branch():
    conv = dify([record("1", None), record("2", None), record("3", "2")])
    ledger = Replay(conv, DIFY.with_(scope="call")).ledger(3)
    assert {e.reason for e in ledger.entries} == {SCOPE}


def test_other_branch_comes_before_granularity():
    conv = dify([record("1", None), tool_turn("2", "1"), record("3", "1"), record("4", "3")])
    r = reasons(Replay(conv, DIFY).ledger(4))
    assert r["2:call"] == OTHER_BRANCH and r["2:result"] == OTHER_BRANCH


def test_granularity_comes_before_outside_window():
    conv = dify([tool_turn("1", None), record("2", "1"), record("3", "2")])
    r = reasons(Replay(conv, DIFY.with_(window=1)).ledger(3))
    assert r["1:call"] == GRANULARITY and r["1:query"] == OUTSIDE_WINDOW


def test_trimmed_earlier_comes_before_outside_window():
    r = reasons(Replay(linear(5), MemoryConfig(strategy="window", window=2)).ledger(5))
    assert r["1:query"] == TRIMMED_EARLIER and r["3:query"] == OUTSIDE_WINDOW


def test_outside_window_comes_before_over_budget_and_over_budget_before_empty():
    conv = dify(
        [
            record("1", None, "q1", ""),
            record("2", "1", "q2", ""),
            record("3", "2", "q3 " * 40, "a3"),
            record("4", "3", "q4", "a4"),
            record("5", "4", "now", ""),
        ]
    )
    fixed = Replay(conv, DIFY).fixed_prompt_tokens(4)
    # Budget for 3 small messages: the empty answer of turn 2 is pruned before it could be "empty".
    # (each message costs 3 + 1 for its role + its content)
    replay = Replay(conv, DIFY.with_(window=3, context_size=fixed + 3 + 5 + 6 + 4 + 3))
    r = reasons(replay.ledger(5))
    assert r["1:query"] == OUTSIDE_WINDOW and r["1:answer"] == OUTSIDE_WINDOW
    assert r["2:query"] == OVER_BUDGET and r["2:answer"] == OVER_BUDGET
    assert r["3:query"] == OVER_BUDGET
    assert r["4:query"] == KEPT


def test_empty_is_the_last_step():
    conv = dify([record("1", None, "q1", ""), record("2", "1", "q2", "a2")])
    assert reasons(Replay(conv, DIFY).ledger(2))["1:answer"] == EMPTY


# -- granularity ---------------------------------------------------------------------------------------


def test_query_answer_keeps_only_query_and_final_answer_of_tool_turns():
    conv = dify([tool_turn("1", None), record("2", "1")])
    r = reasons(Replay(conv, DIFY).ledger(2))
    assert r == {"1:query": KEPT, "1:call": GRANULARITY, "1:result": GRANULARITY, "1:answer": KEPT}


def test_all_messages_replays_tool_calls_and_results():
    conv = dify([tool_turn("1", None), record("2", "1")])
    ledger = Replay(conv, DIFY.with_(granularity="all_messages")).ledger(2)
    assert [e.ref for e in ledger.kept] == ["1:query", "1:call", "1:result", "1:answer"]


def test_buffer_applies_granularity_and_never_prunes_but_says_when_it_exceeds_the_context():
    conv = dify([tool_turn("1", None, answer="long " * 300), record("2", "1")])
    ledger = Replay(conv, MemoryConfig(strategy="buffer", context_size=50)).ledger(2)
    assert reasons(ledger)["1:call"] == GRANULARITY
    assert len(ledger.kept) == 2 and ledger.budget is None
    assert ledger.exceeds_context


# -- fast summaries agree with full ledgers ----------------------------------------------------------

WORDS = ["", "ok", "hello there", "a somewhat longer answer with several words in it", "x " * 60]


@st.composite
def conversations(draw):
    n = draw(st.integers(1, 14))
    turns = []
    for i in range(n):
        mid = str(i)
        kind = draw(st.sampled_from(["root", "prev", "older", "nil"]))
        parent = {
            "root": None,
            "nil": "00000000-0000-0000-0000-000000000000",
            "prev": str(i - 1) if i else None,
            "older": str(draw(st.integers(0, i - 1))) if i else None,
        }[kind]
        q, a = draw(st.sampled_from(WORDS[1:])), draw(st.sampled_from(WORDS))
        if draw(st.booleans()):
            turns.append(tool_turn(mid, parent, q, a))
        else:
            turns.append(record(mid, parent, q, a))
    return Conversation(id="h", turns=turns, system_prompt=draw(st.sampled_from(["", "Be brief."])))


configs = st.builds(
    MemoryConfig,
    strategy=st.sampled_from(["dify", "window", "buffer", "off"]),
    window=st.one_of(st.none(), st.integers(1, 6)),
    fidelity=st.sampled_from(["documented", "code"]),
    context_size=st.one_of(st.none(), st.integers(20, 400)),
    max_tokens=st.integers(0, 30),
    granularity=st.sampled_from(["query_answer", "all_messages"]),
    scope=st.sampled_from(["thread", "thread", "call"]),
    plugin_token_counting=st.booleans(),
    history_budget=st.one_of(st.none(), st.integers(0, 300)),
    sends_empty=st.booleans(),
)


#: A flow node's own prompt size per turn, as its runtime gives it (``prompt_tokens``): a fixed part
#: and one that varies from turn to turn; None for the default prompt (system prompt and query).
prompt_sizes = st.one_of(st.none(), st.tuples(st.integers(0, 300), st.integers(0, 40)))


@settings(max_examples=400, deadline=None)
@given(conversations(), configs, prompt_sizes)
def test_summaries_equal_what_the_full_ledgers_say(conv, config, prompt_size):
    prompt_tokens = None
    if prompt_size is not None:
        base, step = prompt_size
        prompt_tokens = lambda position: base + step * (position % 5)  # noqa: E731
    replay = Replay(conv, config, prompt_tokens=prompt_tokens)
    for summary in replay.summaries():
        ledger = replay.ledger(summary.turn)
        kept = ledger.kept
        assert summary.kept == len(kept)
        assert summary.dropped == ledger.dropped_count()
        assert summary.not_eligible == ledger.not_eligible_count()
        assert summary.history_tokens == ledger.history_tokens == sum(e.tokens for e in kept)
        assert summary.prompt_tokens == ledger.prompt_tokens
        if prompt_tokens is not None:  # the node's own prompt, not the default one
            assert summary.prompt_tokens == prompt_tokens(replay.position_of(summary.turn)) + summary.history_tokens
        assert summary.budget == ledger.budget
        assert summary.oldest_kept_turn == (min(e.turn for e in kept) if kept else None)
        # The kept history is within the budget unless only one message is left.
        if ledger.budget is not None and len(kept) > 1:
            pruned_pool = [e for e in ledger.entries if e.reason in (KEPT, EMPTY)]
            assert sum(e.tokens for e in pruned_pool) <= ledger.budget


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data(), conv=conversations())
def test_every_registered_systems_summaries_say_what_its_ledgers_say(data, conv):
    """Any memory system — one that plans its turns too, today's or one registered later — with settings
    drawn from its own declarations: its summaries (kept, dropped, tokens, oldest kept turn) are those of
    its full ledgers, turn by turn, over branched conversations with tool rounds."""
    name = data.draw(st.sampled_from(list(STRATEGIES)))
    config = data.draw(declared_configs(name, "gpt-4o-mini"))
    try:
        replay = Replay(conv, config)
    except ConfigError:  # a setting this model cannot run (compaction's target): refused before any turn
        assume(False)
    for summary in replay.summaries():
        ledger = replay.ledger(summary.turn)
        kept = ledger.kept
        assert (summary.kept, summary.dropped, summary.not_eligible) == (
            len(kept),
            ledger.dropped_count(),
            ledger.not_eligible_count(),
        )
        assert summary.history_tokens == ledger.history_tokens
        assert (summary.prompt_tokens, summary.budget) == (ledger.prompt_tokens, ledger.budget)


@pytest.mark.parametrize("config", [DIFY.with_(window=40, context_size=600), MemoryConfig(strategy="buffer")])
def test_a_conversation_longer_than_a_counting_chunk_is_counted_turn_by_turn_and_decided_alike(config):
    # More turns than COUNT_CHUNK, twice over and a part: every turn's tokens and emptiness are
    # set (an answer left empty now and then), and the one-walk summaries of turns in every chunk
    # equal those built for the turn alone.
    n = 2 * COUNT_CHUNK + 300
    conv = dify(
        [
            tool_turn(
                str(i),
                str(i - 1) if i > 1 else None,
                f"question {i}",
                "" if i % 9 == 0 else f"answer {i} " * (i % 5 + 1),
            )
            if i % 7 == 0
            else record(
                str(i),
                str(i - 1) if i > 1 else None,
                f"question {i} " * (i % 3 + 1),
                "" if i % 11 == 0 else f"answer {i}",
            )
            for i in range(1, n + 1)
        ]
    )
    counter = TokenCounter(shared=False)
    replay = Replay(conv, config, counter=counter)
    summaries = replay.summaries()
    assert len(summaries) == n
    for position, turn in enumerate(conv.turns):
        assert replay.message_tokens(position) == tuple(counter.message(m) for m in turn.messages)
        assert replay._empties(position) == tuple(m.is_empty for m in turn.messages)
    sample = [0, COUNT_CHUNK - 1, COUNT_CHUNK, COUNT_CHUNK + 1, 2 * COUNT_CHUNK + 7, n - 1]
    alone = Replay(conv, config, counter=TokenCounter(shared=False)).summaries_at(sample)
    assert {p: summaries[p] for p in sample} == alone


def test_openai_turns_number_from_one_and_an_opening_assistant_message_is_turn_zero():
    conv = openai(
        [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "Welcome!"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye"},
        ]
    )
    replay = Replay(conv, DIFY)
    assert [s.turn for s in replay.summaries()] == [1, 2]
    ledger = replay.ledger(2)
    assert [(e.turn, e.ref) for e in ledger.entries] == [(0, 1), (1, 2), (1, 3)]


def test_a_replay_makes_a_budget_once_per_prompt_size(monkeypatch):
    # Two query texts, so two prompt sizes: every turn's budget is one of two, made once each.
    conv = linear(12, query=lambda i: "same question" if i % 2 else "another, somewhat longer question here")
    config = MemoryConfig(fidelity="documented", context_size=500)
    replay = Replay(conv, config)
    made, limits = [], []
    budget, budget_limit = replay.strategy.budget, replay.strategy.budget_limit
    monkeypatch.setattr(replay.strategy, "budget", lambda *a: made.append(a[2]) or budget(*a))
    monkeypatch.setattr(replay.strategy, "budget_limit", lambda *a: limits.append(a[2]) or budget_limit(*a))
    ledgers = [replay.ledger_at(p) for p in range(12)]
    limits.clear()  # a budget reads its limit too
    summaries = replay.summaries()
    assert len(made) == len(set(made)) == 2 and len(limits) == len(set(limits)) == 2
    assert {ledger.budget for ledger in ledgers} == {s.budget for s in summaries} and len(
        {s.budget for s in summaries}
    ) == 2
    monkeypatch.undo()
    fresh = Replay(conv, config)
    assert [fresh.ledger_at(p).to_dict() for p in range(12)] == [ledger.to_dict() for ledger in ledgers]
    assert fresh.summaries() == summaries


def test_a_turns_thread_message_count_is_worked_out_once_for_every_turn():
    """How many earlier messages are on each turn's thread: one table for the replay, made on the first
    question and read after that (a turn's summary asks for its own)."""
    from tests.builders import branched

    conv = branched(12)
    replay = Replay(conv, MemoryConfig(window=2))
    first = replay.thread_messages_before(len(conv.turns) - 1)
    held = replay._thread_before
    assert [replay.thread_messages_before(p) for p in range(len(conv.turns))][-1] == first
    assert replay._thread_before is held  # not made again
    tree, before = conv.tree, replay.messages_before
    for p in range(len(conv.turns)):
        on_thread = sum(before(q + 1) - before(q) for q in tree.thread(p)[:-1])
        assert replay.thread_messages_before(p) == on_thread
