"""A conversation that never branched is decided for all its turns at once (``Replay._chain_summaries``:
each strategy's one window rule read over a ``ChainView``): the same summaries as the turn-by-turn walk,
for every strategy that places a window and every setting that changes a decision."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies import STRATEGIES
from core.memory.strategies.base import ChainView, PathView
from core.model.conversation import (
    ANSWER,
    INTERMEDIATE,
    QUERY,
    TOOL_CALL,
    TOOL_RESULT,
    Conversation,
    Message,
    ToolCall,
    Turn,
)
from core.model.tokens import TokenCounter
from tests.builders import branched, linear
from tests.memory.declared import declared_configs

MODEL = "gpt-4o-mini"
WORDS = "memory window token budget turn branch answer query model context node ledger".split()


def _windowing() -> list[str]:
    """The strategies a replay without inputs decides by a window (the rest plan their own turns)."""
    conv = linear(2)
    return [name for name in STRATEGIES if not Replay(conv, MemoryConfig(strategy=name, model=MODEL)).plans]


def test_every_strategy_that_places_a_window_is_decided_in_columns_on_a_chain():
    assert set(_windowing()) == {"dify", "window", "buffer", "off"}


@st.composite
def chains(draw) -> Conversation:
    """A conversation that never branched: maybe an opening turn without a query (or without any
    message), records without messages, steps logged before a question; tool rounds, empty and
    missing answers, texts of any length."""
    n = draw(st.integers(1, 40))
    opening = draw(st.booleans())
    text = st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join)
    turns = []
    for i in range(n):
        mid = f"t{i}"
        if i == 0 and opening:  # an assistant's opening, or a record holding no message at all
            said = draw(st.sampled_from([(Message("assistant", draw(text), ANSWER, f"{mid}:a"),), ()]))
            turns.append(
                Turn(id=mid, parent_id=None, messages=said, query_index=None, answer_index=0 if said else None)
            )
            continue
        if draw(st.integers(0, 9)) == 0:  # a record holding no message at all
            turns.append(Turn(id=mid, parent_id=f"t{i - 1}" if i else None, messages=(), query_index=None))
            continue
        # Sometimes a step the turn logged before its question (the query is not the turn's first message).
        msgs = [Message("assistant", draw(text), INTERMEDIATE, f"{mid}:s")] if draw(st.booleans()) else []
        query = len(msgs)
        msgs.append(Message("user", draw(text), QUERY, f"{mid}:q"))
        if draw(st.booleans()):
            call = ToolCall(f"c{i}", "lookup", '{"id": %d}' % i)
            msgs.append(Message("assistant", "", TOOL_CALL, f"{mid}:c", tool_calls=(call,)))
            msgs.append(Message("tool", draw(text), TOOL_RESULT, f"{mid}:r", tool_call_id=call.id))
        answered = draw(st.sampled_from(["text", "empty", "none"]))
        if answered != "none":
            msgs.append(Message("assistant", draw(text) if answered == "text" else "", ANSWER, f"{mid}:a"))
        turns.append(
            Turn(
                id=mid,
                parent_id=f"t{i - 1}" if i else None,
                messages=tuple(msgs),
                query_index=query,
                answer_index=len(msgs) - 1 if answered != "none" else None,
            )
        )
    return Conversation(id="chain", turns=turns, system_prompt=draw(st.sampled_from(["", "You are helpful."])))


def configs():
    window = st.one_of(st.none(), st.integers(-3, 12), st.sampled_from([499, 500, 501, 2_000]))
    dify = st.builds(
        MemoryConfig,
        strategy=st.just("dify"),
        window=window,
        fidelity=st.sampled_from(["code", "documented"]),
        model=st.just(MODEL),
        context_size=st.one_of(st.none(), st.integers(1, 400)),
        max_tokens=st.integers(0, 60),
        granularity=st.sampled_from(["query_answer", "all_messages"]),
        scope=st.sampled_from(["thread", "thread", "session"]),
        plugin_token_counting=st.booleans(),
        prompt_reserve=st.one_of(st.none(), st.integers(0, 50)),
        history_budget=st.one_of(st.none(), st.integers(0, 300)),
        sends_empty=st.booleans(),
        history_as_text=st.booleans(),
        query_after_budget=st.booleans(),
    )
    changes = st.lists(st.tuples(st.integers(1, 30), st.integers(1, 8)), max_size=3).map(tuple)
    window_node = st.builds(
        MemoryConfig,
        strategy=st.just("window"),
        window=st.one_of(st.none(), st.integers(1, 8)),
        window_changes=changes,
        model=st.just(MODEL),
        scope=st.sampled_from(["thread", "thread", "call"]),
        sends_empty=st.booleans(),
    )
    others = st.builds(
        MemoryConfig,
        strategy=st.sampled_from(["buffer", "off"]),
        model=st.just(MODEL),
        context_size=st.one_of(st.none(), st.integers(1, 400)),
        granularity=st.sampled_from(["query_answer", "all_messages"]),
        sends_empty=st.booleans(),
    )
    return st.one_of(dify, window_node, others)


def _walked(conv: Conversation, config: MemoryConfig, **kwargs):
    """The summaries of the turn-by-turn walk (what a branched conversation gets)."""
    replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1), **kwargs)
    counting = replay._tokens_in_order()
    try:
        return replay._fast_walk(counting).keep()
    finally:
        counting.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv=chains(), config=configs(), has_thread=st.booleans())
def test_a_chain_decided_in_columns_gets_the_walks_summaries(conv, config, has_thread):
    replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1), has_thread=has_thread)
    summaries = replay.summaries()
    assert list(summaries) == list(_walked(conv, config, has_thread=has_thread))
    # ... and each turn's own ledger, built on its own, says the same.
    for s in summaries:
        ledger = replay.ledger(s.turn)
        assert (s.kept, s.history_tokens) == (len(ledger.kept), ledger.history_tokens)


@settings(max_examples=60, deadline=None)
@given(conv=chains(), config=configs())
def test_a_chain_with_its_own_prompt_tokens_gets_the_walks_summaries(conv, config):
    prompt = lambda p: 7 * p % 90 + 3  # noqa: E731 - a prompt that differs from turn to turn
    replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1), prompt_tokens=prompt)
    assert list(replay.summaries()) == list(_walked(conv, config, prompt_tokens=prompt))


@settings(max_examples=200, deadline=None)
@given(conv=chains(), config=configs())
def test_every_strategys_window_for_a_whole_chain_is_its_window_turn_by_turn(conv, config):
    replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1))
    strategy, n = replay.strategy, len(conv.turns)
    view = PathView(replay.numbers)
    expected = []
    for k in range(n):
        trimmed, start = strategy.window(view, k, config)
        expected.append((trimmed, start))
        view.push(k, start, replay.eligible(k), replay.message_tokens(k), replay._empties(k))
    starts = np.array([view.turn_start(k) for k in range(n)], dtype=np.int64)
    columns = ChainView(starts, np.array(replay.numbers, dtype=np.int64))
    trimmed, start = (np.broadcast_to(x, n) for x in strategy.window(columns, columns.turn_count, config))
    assert list(zip(trimmed.tolist(), start.tolist())) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), conv=chains())
def test_every_registered_window_rule_decides_a_chain_in_columns_as_the_walk_does(data, conv):
    """Whatever memory system places a window — today's, or one registered later — its one rule read over
    a chain's columns gives the summaries its rule gives turn by turn, for settings drawn from its own
    declarations; and each turn's ledger says the same."""
    name = data.draw(st.sampled_from(_windowing()))
    config = data.draw(declared_configs(name, MODEL))
    replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1))
    summaries = replay.summaries()
    assert list(summaries) == list(_walked(conv, config))
    for s in summaries:
        assert (s.kept, s.history_tokens) == (len(replay.ledger(s.turn).kept), replay.ledger(s.turn).history_tokens)


def test_a_branched_conversation_is_walked_and_a_chain_is_not(monkeypatch):
    walked = []
    real = Replay._fast_walk
    monkeypatch.setattr(Replay, "_fast_walk", lambda self, counting: walked.append(1) or real(self, counting))
    config = MemoryConfig(strategy="dify", window=4, model=MODEL)
    Replay(linear(30), config).summaries()
    assert walked == []
    Replay(branched(30), config).summaries()
    assert walked == [1]


def test_a_chain_of_one_turn_and_one_with_only_an_opening_are_decided():
    conv = linear(1)
    assert [(s.turn, s.kept, s.dropped) for s in Replay(conv, MemoryConfig(model=MODEL)).summaries()] == [(1, 0, 0)]
    opening = Conversation(
        id="o",
        turns=[
            Turn(
                id="a",
                parent_id=None,
                messages=(Message("assistant", "Hello!", ANSWER, "a:a"),),
                query_index=None,
                answer_index=0,
            )
        ],
    )
    assert list(Replay(opening, MemoryConfig(model=MODEL)).summaries()) == []


def test_a_budget_that_cuts_at_every_possible_token_gets_the_walks_cut():
    """Every context size from one that leaves no room to one that fits the whole thread: the budget's
    cut lands on each message boundary and one token either side of it."""
    conv = linear(6, answer=lambda i: "an answer of some words " * i)
    for context in range(1, 700):
        for fidelity in ("code", "documented"):
            config = MemoryConfig(
                strategy="dify", fidelity=fidelity, model=MODEL, context_size=context, plugin_token_counting=True
            )
            replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=1))
            assert list(replay.summaries()) == list(_walked(conv, config)), (context, fidelity)


def test_after_a_chain_is_decided_a_ledger_sets_its_turns_counts_a_block_at_a_time(monkeypatch):
    """The columns leave each turn's counts unset; a ledger then asks for every earlier turn's, and
    gets them set COUNT_CHUNK turns at a time, not one call per turn."""
    from core.memory import replay as replay_module

    calls: list[int] = []
    real = Replay._set_counts
    monkeypatch.setattr(
        Replay, "_set_counts", lambda self, positions: calls.append(len(positions)) or real(self, positions)
    )
    conv = linear(2_500)
    config = MemoryConfig(strategy="buffer", model=MODEL)
    replay = Replay(conv, config)
    summaries = replay.summaries()
    assert calls == []  # decided without them
    assert replay.message_tokens(1_500) and calls == [replay_module.COUNT_CHUNK]  # its block alone: 1,024..2,047
    calls.clear()
    replay = Replay(conv, config)
    summaries = replay.summaries()
    ledger = replay.ledger(summaries[-1].turn)
    assert (len(ledger.kept), ledger.history_tokens) == (summaries[-1].kept, summaries[-1].history_tokens)
    assert calls == [replay_module.COUNT_CHUNK, replay_module.COUNT_CHUNK, 2_500 - 2 * replay_module.COUNT_CHUNK]
    # A replay that has not counted every text sets only the turn asked for.
    calls.clear()
    Replay(conv, config).ledger(summaries[-1].turn)
    assert set(calls) == {1} and len(calls) == 2_500


def test_a_chain_is_decided_without_building_its_tree_or_its_per_turn_tables():
    """What a chain's columns need is all a summary replay holds: no thread index (a twentieth of a long
    replay's memory) and no per-turn tables, until a ledger asks; then each is made and agrees."""
    conv = linear(40)
    config = MemoryConfig(strategy="dify", window=3, model=MODEL)
    replay = Replay(conv, config)
    summaries = list(replay.summaries())
    assert conv._tree is None and replay._tokens == replay._empty == replay._eligible == []
    fresh = Replay(linear(40), config)
    assert replay.ledger(40) == fresh.ledger(40) and conv._tree is not None
    assert len(replay._tokens) == len(replay._empty) == len(replay._eligible) == 40
    assert summaries == list(fresh.summaries())
    replay.conversation = linear(45)  # the conversation grew (as a ledger follower moves it on): the tables follow
    replay._per_turn()
    assert len(replay._tokens) == len(replay._empty) == len(replay._eligible) == 45
    assert replay._tokens[39] is not None and replay._tokens[40:] == [None] * 5  # what was set stays set
