"""The Window Memory node: last N messages, every message counts, permanent trimming, scopes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.base import ChainView, PathView, window_at
from core.memory.strategies.window import DEFAULT_WINDOW, size_at
from core.model.ledger import KEPT, OUTSIDE_WINDOW, SCOPE, TRIMMED_EARLIER
from tests.builders import linear, openai

WINDOW = MemoryConfig(strategy="window")


def tool_conversation():
    """t1: u1 a1 · t2: u2 a2 · t3: u3 tc3 tr3 a3 · t4: u4 a4 — the vectors of spec §C.6."""
    call = {"id": "c3", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return openai(
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "u3"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c3", "content": "tr3"},
            {"role": "assistant", "content": "a3"},
            {"role": "user", "content": "u4"},
            {"role": "assistant", "content": "a4"},
        ]
    )


def reasons(ledger):
    return {e.ref: e.reason for e in ledger.entries}


def test_store_after_a_tool_round_is_last_n_of_old_store_plus_the_new_round():
    # Reading 1(a) of spec §C.1: N=3, stored [u1,a1,u2,a2] + round [u3,tc3,tr3,a3]
    # → stored [a1,u2,a2,u3,tc3,tr3,a3]; the call sees its last 3: [tc3,tr3,a3].
    ledger = Replay(tool_conversation(), WINDOW.with_(window=3)).ledger(4)
    r = reasons(ledger)
    assert r[1] == TRIMMED_EARLIER  # u1: cut at turn 3, gone for good
    assert [r[i] for i in (2, 3, 4, 5)] == [OUTSIDE_WINDOW] * 4  # a1 u2 a2 u3: in the store, outside the window
    assert [r[i] for i in (6, 7, 8)] == [KEPT] * 3  # tc3 tr3 a3


def test_the_cut_may_start_the_window_on_a_tool_call_without_its_user_message():
    ledger = Replay(tool_conversation(), WINDOW.with_(window=3)).ledger(4)
    first = ledger.kept[0]
    assert first.role == "assistant" and first.kind == "tool_call"


def test_tool_calls_and_results_consume_window_slots():
    ledger = Replay(tool_conversation(), WINDOW.with_(window=4)).ledger(4)
    assert [e.ref for e in ledger.kept] == [5, 6, 7, 8]  # u3 tc3 tr3 a3: four slots for one turn


def test_window_growing_mid_conversation_does_not_bring_trimmed_messages_back():
    conv = linear(8)
    grows = WINDOW.with_(window=2, window_changes=((6, 20),))
    ledger = Replay(conv, grows).ledger(8)
    r = {e.ref: e.reason for e in ledger.entries}
    # Up to turn 5 the store kept 2 messages; at turn 6 N became 20 but the trimmed ones stay gone.
    assert all(r[f"{i}:{k}"] == TRIMMED_EARLIER for i in (1, 2, 3) for k in ("query", "answer"))
    assert all(r[f"{i}:{k}"] == KEPT for i in (4, 5, 6, 7) for k in ("query", "answer"))
    always_20 = Replay(conv, WINDOW.with_(window=20)).ledger(8)
    assert len(always_20.kept) == 14


def test_a_message_is_outside_window_when_cut_then_trimmed_earlier_afterwards():
    conv = linear(4)
    replay = Replay(conv, WINDOW.with_(window=2))
    assert reasons(replay.ledger(3))["1:query"] == OUTSIDE_WINDOW
    assert reasons(replay.ledger(4))["1:query"] == TRIMMED_EARLIER


@pytest.mark.parametrize("scope", ["session", "call"])
def test_session_and_call_scopes_see_nothing_from_earlier_turns(scope):
    ledger = Replay(linear(3), WINDOW.with_(scope=scope)).ledger(3)
    assert ledger.entries and {e.reason for e in ledger.entries} == {SCOPE}


def test_no_thread_behaves_like_session_scope():
    ledger = Replay(linear(3), WINDOW, has_thread=False).ledger(3)
    assert {e.reason for e in ledger.entries} == {SCOPE}


def test_thread_scope_default_window_is_ten_messages():
    ledger = Replay(linear(8), WINDOW).ledger(8)
    assert len(ledger.kept) == 10


@pytest.mark.parametrize("n", [0, 201, -3])
def test_window_size_out_of_range_is_rejected_with_a_clear_message(n):
    with pytest.raises(ConfigError, match="1..200"):
        MemoryConfig(strategy="window", window=n).validate()


@settings(max_examples=300, deadline=None)
@given(
    window=st.one_of(st.none(), st.integers(1, 9)),
    changes=st.lists(st.tuples(st.integers(-2, 25), st.integers(1, 9)), max_size=4).map(tuple),
    first=st.integers(0, 3),
    n=st.integers(0, 30),
)
def test_every_turns_window_size_at_once_is_its_size_turn_by_turn(window, changes, first, n):
    """Changes may start before the first turn, after the last, or at the same turn as another."""
    settings_ = MemoryConfig(strategy="window", window=window, window_changes=changes).settings
    numbers = np.arange(first, first + n, dtype=np.int64)
    at_once = np.broadcast_to(size_at(ChainView(numbers, numbers), settings_, numbers), n).tolist()
    assert (
        at_once
        == [size_at(PathView, settings_, k) for k in numbers.tolist()]
        == [window_at(settings_, k) or DEFAULT_WINDOW for k in numbers.tolist()]
    )
