"""trim: LangChain-core trim_messages semantics (spec/memory-models.md §D.1, the §D.4 vectors), as a
pure function and as a strategy over a turn's history."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.errors import TrimError
from core.memory.replay import Replay
from core.memory.strategies.trim import message_type, split_lines, trim_messages
from core.memory.words import explain
from core.model.conversation import TOOL_CALL, TOOL_RESULT, Message, ToolCall
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET, PARTIAL
from core.model.tokens import REPLY_PRIMING, approximate_message_tokens, chat_model_message_tokens, counter_for
from tests.builders import linear, openai
from tests.memory.test_ledger_pipeline import conversations

S = Message("system", "You are helpful.", "intermediate", "S")
H1, A1 = Message("user", "hi", "query", "H1"), Message("assistant", "hello", "answer", "A1")
H2, A2 = Message("user", "how are you", "query", "H2"), Message("assistant", "fine", "answer", "A2")
H = Message("user", "look it up", "query", "H")
AITC = Message("assistant", "", TOOL_CALL, "AItc", tool_calls=(ToolCall("c1", "lookup", "{}"),))
T = Message("tool", "42", TOOL_RESULT, "T", tool_call_id="c1")
A = Message("assistant", "It is 42.", "answer", "A")


def refs(messages):
    return [m.ref for m in messages]


# -- the §D.4 one-liners, token_counter=len ------------------------------------------------------------


def test_last_with_include_system_keeps_the_system_message_and_the_newest_that_fit():
    kept = trim_messages([S, H1, A1, H2, A2], max_tokens=3, token_counter=len, strategy="last", include_system=True)
    assert refs(kept) == ["S", "H2", "A2"]


def test_start_on_human_with_three_keeps_the_last_exchange():
    kept = trim_messages(
        [S, H1, A1, H2, A2], max_tokens=3, token_counter=len, strategy="last", include_system=True, start_on="human"
    )
    assert refs(kept) == ["S", "H2", "A2"]


def test_start_on_human_with_two_keeps_only_the_system_message():
    # Budget 1 after the system message keeps only A2, which start_on then drops.
    kept = trim_messages(
        [S, H1, A1, H2, A2], max_tokens=2, token_counter=len, strategy="last", include_system=True, start_on="human"
    )
    assert refs(kept) == ["S"]


def test_last_without_start_on_breaks_a_tool_pair():
    assert refs(trim_messages([H, AITC, T, A], max_tokens=2, token_counter=len, strategy="last")) == ["T", "A"]


def test_first_with_include_system_is_a_value_error():
    with pytest.raises(ValueError):
        trim_messages([S, H1, A1], max_tokens=2, token_counter=len, strategy="first", include_system=True)
    with pytest.raises(TrimError, match="only to trim strategy 'last'"):
        trim_messages([S, H1, A1], max_tokens=2, token_counter=len, strategy="first", start_on="human")


# -- more of §D.1 ------------------------------------------------------------------------------------


def test_first_keeps_the_longest_prefix_then_end_on_drops_from_its_end():
    assert refs(trim_messages([H1, A1, H2, A2], max_tokens=3, token_counter=len, strategy="first")) == [
        "H1",
        "A1",
        "H2",
    ]
    assert refs(trim_messages([H1, A1, H2, A2], max_tokens=3, token_counter=len, strategy="first", end_on="ai")) == [
        "H1",
        "A1",
    ]


def test_end_on_applies_even_when_everything_fits():
    assert refs(trim_messages([H1, A1, H2], max_tokens=10, token_counter=len, strategy="first", end_on="ai")) == [
        "H1",
        "A1",
    ]
    assert refs(trim_messages([H1, A1, H2], max_tokens=10, token_counter=len, end_on="ai")) == ["H1", "A1"]


def test_the_system_message_is_kept_even_if_it_alone_exceeds_the_budget():
    big = Message("system", "rules " * 50, "intermediate", "S")
    count = lambda ms: sum(len(m.content) for m in ms)  # noqa: E731 - a per-character counter
    assert refs(trim_messages([big, H1, A1], max_tokens=5, token_counter=count, include_system=True)) == ["S"]


def test_no_start_on_message_in_the_window_gives_an_empty_result():
    assert trim_messages([H, AITC, T, A], max_tokens=2, token_counter=len, start_on="human") == []


def test_allow_partial_keeps_the_last_lines_of_the_message_that_did_not_fit():
    long = Message("assistant", "line one\nline two\nline three", "answer", "L")
    count = lambda ms: sum(len(m.content) for m in ms)  # noqa: E731
    kept = trim_messages(
        [H1, long, H2], max_tokens=len("how are you") + len("line three"), token_counter=count, allow_partial=True
    )
    assert [m.content for m in kept] == ["line three", "how are you"]
    first = trim_messages(
        [long, H2], max_tokens=len("line one\nline two\n"), token_counter=count, strategy="first", allow_partial=True
    )
    assert [m.content for m in first] == ["line one\nline two\n"]


def test_split_lines_keeps_the_newlines_like_langchains_default_splitter():
    assert split_lines("a\nb\n\nc") == ["a\n", "b\n", "\n", "c"]


def test_message_types_are_langchains():
    assert [message_type(m) for m in (S, H1, A1, T)] == ["system", "human", "ai", "tool"]


# -- the strategy: trim_messages over a turn's history ---------------------------------------------------


def trim(**kw):
    return MemoryConfig(strategy="trim", **kw)


def chat(*pairs, system="You are helpful."):
    msgs = [{"role": "system", "content": system}] if system else []
    for q, a in pairs:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": "and now?"})
    return openai(msgs)


def test_the_strategy_reproduces_the_d4_vectors_when_counting_messages():
    conv = chat(("hi", "hello"), ("how are you", "fine"))
    ledger = Replay(conv, trim(max_history_tokens=3, trim_counter="messages", include_system=True)).ledger(3)
    assert [e.ref for e in ledger.kept] == [3, 4]  # H2, A2; the system prompt is sent apart and took one slot
    assert ledger.budget == 2
    ledger = Replay(
        conv, trim(max_history_tokens=2, trim_counter="messages", include_system=True, start_on="human")
    ).ledger(3)
    assert ledger.kept == []
    assert {e.ref: e.reason for e in ledger.entries} == {
        1: OVER_BUDGET,
        2: OVER_BUDGET,
        3: OVER_BUDGET,
        4: OUTSIDE_WINDOW,
    }


def test_the_strategy_keeps_a_tool_result_first_unless_start_on_human():
    conv = openai(
        [
            {"role": "user", "content": "look it up"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "It is 42."},
            {"role": "user", "content": "thanks"},
        ]
    )
    config = trim(max_history_tokens=2, trim_counter="messages", granularity="all_messages")
    ledger = Replay(conv, config).ledger(2)
    assert [e.role for e in ledger.kept] == ["tool", "assistant"]
    assert Replay(conv, config.with_(start_on="human")).ledger(2).kept == []


def test_last_drops_the_oldest_over_the_token_budget_and_first_the_newest():
    conv = linear(6)
    replay = Replay(conv, trim(max_history_tokens=30))
    ledger = replay.ledger(6)
    assert sum(e.tokens for e in ledger.kept) <= 30 < sum(e.tokens for e in ledger.entries)
    assert [e.reason for e in ledger.entries] == sorted(
        (e.reason for e in ledger.entries), key=[OVER_BUDGET, KEPT].index
    )
    first = Replay(conv, trim(max_history_tokens=30, trim_strategy="first")).ledger(6)
    assert first.kept[0].ref == "1:query"
    assert [e.reason for e in first.entries] == sorted((e.reason for e in first.entries), key=[KEPT, OVER_BUDGET].index)
    e = first.entries[-1]
    assert explain(e, first.config) == "over trim_messages max_tokens (30 tokens): newest dropped"


def test_include_system_takes_the_system_prompts_tokens_off_the_budget():
    conv = chat(("hi", "hello"), ("how are you", "fine"))
    with_system = Replay(conv, trim(max_history_tokens=40, include_system=True))
    # LangChain counts the system message as a list of its own: its tokens and the reply priming.
    system = Message("system", conv.system_prompt, "intermediate", "S")
    assert with_system.ledger(3).budget == 40 - chat_model_message_tokens(with_system.counter, system) - REPLY_PRIMING
    assert Replay(conv, trim(max_history_tokens=40)).ledger(3).budget == 40


def test_start_on_and_end_on_drops_are_outside_the_window_and_say_why():
    conv = linear(5)
    ledger = Replay(conv, trim(max_history_tokens=3, trim_counter="messages", start_on="human", end_on="human")).ledger(
        5
    )
    # end_on pops 4:answer; the last 3 are 3:query, 3:answer, 4:query; start_on keeps them.
    reasons = {e.ref: e.reason for e in ledger.entries}
    assert reasons["4:answer"] == OUTSIDE_WINDOW and [e.ref for e in ledger.kept] == ["3:query", "3:answer", "4:query"]
    assert (
        explain(next(e for e in ledger.entries if e.ref == "4:answer"), ledger.config)
        == "dropped so the kept part starts on a human message and ends on a human message"
    )


def test_a_partial_message_is_over_budget_and_what_was_sent_of_it_stands_in_its_place():
    long_answer = "first line of the answer\nsecond line of it\nthird and last line"
    conv = chat(("tell me", long_answer), ("ok", "good"), system="")
    replay = Replay(conv, trim(allow_partial=True, max_history_tokens=1))
    tail = Message("assistant", "third and last line", "answer", 1)
    sent_tokens = sum(replay.counter.message(m) for m in (*conv.turns[1].messages, tail))
    # The chat model's counter: 3 + role + content a message, and its priming once for the counted list.
    budget = sum(chat_model_message_tokens(replay.counter, m) for m in (*conv.turns[1].messages, tail)) + REPLY_PRIMING
    ledger = Replay(conv, trim(allow_partial=True, max_history_tokens=budget)).ledger(3)
    assert {e.ref: e.reason for e in ledger.entries} == {0: OVER_BUDGET, 1: OVER_BUDGET, 2: KEPT, 3: KEPT}
    [part] = ledger.synthetic
    assert (part.origin, part.content, part.replaces, part.ref) == (PARTIAL, "third and last line", (0, 1), "partial:1")
    sent = Replay(conv, trim(allow_partial=True, max_history_tokens=budget)).history_messages(ledger)
    assert [m.content for m in sent] == ["third and last line", "ok", "good"]
    assert ledger.history_tokens == sent_tokens


def test_counting_messages_never_keeps_a_message_partially():
    conv = chat(("tell me", "a\nb\nc"), ("ok", "good"))
    ledger = Replay(conv, trim(allow_partial=True, max_history_tokens=3, trim_counter="messages")).ledger(3)
    assert ledger.synthetic == [] and len(ledger.kept) == 3


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(1, 12), st.sampled_from(["tokens", "messages"]), st.booleans())
def test_with_start_on_human_the_kept_history_never_starts_on_a_tool_result(conv, limit, counter, partial):
    config = trim(
        max_history_tokens=limit,
        trim_counter=counter,
        start_on="human",
        granularity="all_messages",
        allow_partial=partial,
    )
    replay = Replay(conv, config)
    for s in replay.summaries():
        sent = replay.history_messages(replay.ledger(s.turn))
        assert not sent or sent[0].role == "user"


def test_a_partial_turns_summary_counts_the_part_sent_and_names_the_oldest_turn_kept():
    long_answer = "first line of the answer\nsecond line of it\nthird and last line"
    conv = chat(("tell me", long_answer), ("ok", "good"), system="")
    tail = Message("assistant", "third and last line", "answer", 1)
    budget = (
        sum(chat_model_message_tokens(counter_for("gpt-4o-mini"), m) for m in (*conv.turns[1].messages, tail))
        + REPLY_PRIMING
    )
    replay = Replay(conv, trim(allow_partial=True, max_history_tokens=budget))
    ledger = replay.ledger(3)
    [part] = ledger.synthetic
    assert part.turn == 1 and part.covers == (1,)  # the partly sent answer is turn 1's
    summary = next(s for s in replay.summaries() if s.turn == 3)
    assert (summary.kept, summary.history_tokens, summary.oldest_kept_turn) == (2, ledger.history_tokens, 2)
    assert ledger.history_tokens == sum(e.tokens for e in ledger.kept) + part.tokens


def test_the_pure_trim_keeps_no_part_unless_asked_and_a_kept_tail_stays_in_order():
    long = Message("assistant", "one\ntwo\nthree", "answer", "L")
    last = Message("user", "go", "query", "U")

    def count(msgs):
        return sum(len(m.content) for m in msgs)

    assert refs(trim_messages([long, last], max_tokens=10, token_counter=count)) == ["U"]
    assert refs(trim_messages([long, last], max_tokens=4, token_counter=count, allow_partial=True)) == ["U"]
    kept = trim_messages([long, last], max_tokens=10, token_counter=count, allow_partial=True)
    assert [m.content for m in kept] == ["three", "go"]
    kept = trim_messages([long, last], max_tokens=12, token_counter=count, allow_partial=True)
    assert [m.content for m in kept] == ["two\nthree", "go"]
    first = trim_messages([long, last], max_tokens=6, token_counter=count, strategy="first", allow_partial=True)
    assert [m.content for m in first] == ["one\n"]


@pytest.mark.parametrize("strategy", ["trim", "summary_buffer"])
@pytest.mark.parametrize("counter", ["tokens", "approximate", "messages"])
def test_a_branch_is_counted_as_its_own_thread_whatever_was_counted_on_the_branch_before(strategy, counter):
    from tests.builders import dify

    long, short = "a long answer " * 6, "ok"
    rows = [
        ("1", None, "q1", long),
        ("2", "1", "q2", short),
        ("3", "2", "q3", long),
        ("4", "3", "q4", long),
        ("5", "2", "q5 on a branch", short),
        ("6", "5", "q6", long),
        ("7", "6", "q7", short),
    ]
    tree = dify(rows)
    alone = dify([r for r in rows if r[0] in ("1", "2", "5", "6", "7")])
    # The smallest limit that keeps the branch's whole history at its last turn: one token less of
    # room (or counts borrowed from the other branch, whose messages are longer) would drop some.
    limit = next(
        n
        for n in range(3, 400)
        if Replay(alone, MemoryConfig(strategy=strategy, max_history_tokens=n, trim_counter=counter))
        .summaries()[-1]
        .kept
        == 8
    )
    config = MemoryConfig(strategy=strategy, max_history_tokens=limit, trim_counter=counter)
    on_tree = Replay(tree, config).summaries()
    by_itself = Replay(alone, config).summaries()
    # The branch (positions 5-7 of the tree, 3-5 by itself) is walked after the first thread; it must not
    # reuse that thread's counts. ("dropped" also counts the other branch on the tree, and turns are
    # numbered by their place in the file, so those differ.)
    for t, s in zip(on_tree[4:], by_itself[2:]):
        assert (t.kept, t.history_tokens) == (s.kept, s.history_tokens)
    # A ledger asked for on its own, right after one of the other branch.
    replay = Replay(tree, config)
    replay.ledger(4)
    assert [e.ref for e in replay.ledger(7).kept] == [e.ref for e in Replay(alone, config).ledger(5).kept]


@pytest.mark.parametrize("counter, unit", [("tokens", "tokens"), ("approximate", "tokens"), ("messages", "messages")])
def test_the_budget_note_names_the_limit_its_unit_and_the_system_messages_share(counter, unit):
    conv = chat(("hi", "hello"), ("how are you", "fine"))
    ledger = Replay(conv, trim(max_history_tokens=40, trim_counter=counter, include_system=True)).ledger(3)
    system = 40 - ledger.budget
    prompt = Message("system", conv.system_prompt, "intermediate", "S")
    assert (
        system
        == {
            "messages": 1,
            "approximate": approximate_message_tokens(prompt),
            "tokens": chat_model_message_tokens(counter_for("gpt-4o-mini"), prompt) + REPLY_PRIMING,
        }[counter]
    )
    assert (
        ledger.budget_note == f"trim_messages max_tokens 40 {unit}, strategy last, minus the system message ({system})"
    )
    assert ledger.context_size == 128000
    assert (
        Replay(conv, trim(max_history_tokens=40, trim_counter=counter, context_size=5000)).ledger(3).context_size
        == 5000
    )
