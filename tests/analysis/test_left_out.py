"""The inspector's first line per node: what its memory left out at a turn, and why, in short words."""

from core.analysis.glance import left_out
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.words import explain, reason_words
from core.words import excerpt
from tests.builders import linear

QUERIES = {
    1: "Hi, I'm Dana. My order number is 4411.",
    2: "The delivery was due on Monday.",
    3: "Can you send it to my office?",
    4: "Thanks.",
    5: "What's my name?",
    6: "And my order?",
}


def _line(window, turn=6, **config):
    conv = linear(6, query=QUERIES.get)
    replay = Replay(conv, MemoryConfig(window=window, **config))
    return left_out(conv, replay.ledger(turn), "Responder", "responder")


def test_a_window_of_four_rows_at_turn_six_names_the_dropped_turns_the_name_and_the_window():
    line = _line(4)
    assert line.line == (
        "Responder: dropped turns 1–2 — “Hi, I'm Dana. My order…”, “The delivery was due on…” — outside window of 4"
    )
    assert line.dropped == 4  # both messages of turns 1 and 2: a window of 4 rows keeps 3 earlier turns
    assert "rows: the conversation's newest on any branch" in line.hover  # the long words are for the hover


def test_a_dropped_message_that_states_a_fact_is_named_before_newer_ones_that_state_none():
    line = _line(2)  # turns 1–4 dropped: turn 1 states the name and the order, 2–4 state nothing
    assert line.text.startswith("dropped turns 1–4 — “Hi, I'm Dana. My order…”, “Thanks.” —")


def test_nothing_dropped_says_so_and_the_first_turn_has_nothing_earlier():
    assert _line(10).text == "dropped nothing: kept all 10 earlier"
    assert _line(4, turn=1).text == "nothing earlier to leave out (first turn)"


def test_memory_off_says_it_sends_nothing():
    assert _line(None, strategy="off").text == "memory off: sends no earlier message"


def test_reasons_in_short_words_carry_the_setting_that_decided_them():
    assert reason_words("outside_window", {"strategy": "dify", "window": 4}) == "outside window of 4"
    assert reason_words("outside_window", {"strategy": "window", "window": 6}) == "outside window of 6 messages"
    assert reason_words("outside_window", {"strategy": "dify", "window": None}) == "past Dify's 500-row cap"
    assert reason_words("over_budget", {"strategy": "dify", "budget": 2000}) == "over token budget 2,000"
    assert reason_words("other_branch") == "on another branch"
    entry = Replay(linear(6), MemoryConfig(window=4)).ledger(6).entries[0]
    assert explain(entry, {"strategy": "dify", "window": 4}).startswith("outside window of 4 rows: ")


def test_an_excerpt_is_cut_at_a_word():
    assert excerpt("Hi, I'm Dana. My order number is 4411.") == "Hi, I'm Dana. My order…"
    assert excerpt("short") == "short"
