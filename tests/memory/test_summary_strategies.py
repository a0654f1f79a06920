"""summary_buffer, the offline summariser, synthetic messages in ledgers, and the replay CLI for
the strategies that rewrite history (summary_buffer, compaction, trim)."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.summarize import NO_FACTS, OFFLINE, FactSummarizer, Summarizer
from core.memory.words import explain
from core.model.conversation import Message
from core.model.ledger import EMPTY, KEPT, SUMMARIZED, SUMMARY
from core.model.tokens import REPLY_PRIMING, chat_model_message_tokens
from tests.builders import dify, linear, record
from tests.conftest import FIXTURES, ROOT
from tests.memory.test_ledger_pipeline import conversations, tool_turn

TAU = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
FACTS = {1: "Hi, I'm Dana.", 2: "I'm vegetarian, by the way.", 3: "My order number is 4411."}


def fact_conversation(n=8, filler="and some more words to fill the buffer " * 2):
    return linear(n, query=lambda i: FACTS.get(i, f"question {i} {filler}"))


def summary_buffer(limit, **kw):
    return MemoryConfig(strategy="summary_buffer", max_history_tokens=limit, **kw)


def user(text):
    return Message("user", text, "query", 0)


class RecordingSummarizer:
    """Wraps the offline summariser and records every call."""

    name = "recording"

    def __init__(self):
        self.calls = []

    def summarize(self, messages, previous_summary=""):
        text = OFFLINE.summarize(messages, previous_summary)
        self.calls.append(([m.ref for m in messages], previous_summary, text))
        return text


# -- the offline summariser -----------------------------------------------------------------------


def test_offline_summary_keeps_the_stated_facts_of_user_messages_only():
    text = OFFLINE.summarize(
        [
            user("Hi, I'm Dana."),
            Message("assistant", "I'm Bot, I live in Paris.", "answer", 1),
            user("I'm vegetarian and I live in Porto."),
        ]
    )
    assert text == "Your name is Dana. You are vegetarian. You live in Porto."


def test_offline_summary_extends_the_previous_summary_and_a_newer_value_replaces_the_older_in_place():
    first = OFFLINE.summarize([user("My order number is 4411."), user("I'm Dana.")])
    assert first == "Your order is 4411. Your name is Dana."
    second = OFFLINE.summarize([user("Sorry, my order number is 5120."), user("I love jazz.")], first)
    assert second == "Your order is 5120. Your name is Dana. You like jazz."


def test_offline_summary_without_facts_says_so_and_the_summariser_protocol_is_met():
    assert OFFLINE.summarize([user("How is the weather?")]) == NO_FACTS
    assert OFFLINE.summarize([user("How is the weather?")], "Your name is Dana.") == "Your name is Dana."
    assert isinstance(FactSummarizer(), Summarizer)


# -- summary_buffer ---------------------------------------------------------------------------------


def langchain_summary_buffer(conv, limit, count):
    """ConversationSummaryBufferMemory, literally: save a turn, then pop the oldest while over (the chat
    model's counter adds its reply priming to every list it counts)."""
    buffer, folded, after = [], [], []
    for turn in conv.turns:
        buffer += [turn.query_message, turn.answer_message]
        while REPLY_PRIMING + sum(count(m) for m in buffer) > limit:
            folded.append(buffer.pop(0))
        after.append(([m.ref for m in buffer], [m.ref for m in folded]))
    return after


@pytest.mark.parametrize("limit", [15, 40, 80, 130])
def test_summary_buffer_keeps_exactly_what_langchains_loop_keeps_at_every_turn(limit):
    conv = fact_conversation(9)
    replay = Replay(conv, summary_buffer(limit))
    expected = langchain_summary_buffer(conv, limit, lambda m: chat_model_message_tokens(replay.counter, m))
    for turn in range(2, 10):
        ledger = replay.ledger(turn)
        buffer, folded = expected[turn - 2]
        assert [e.ref for e in ledger.kept] == buffer
        assert [e.ref for e in ledger.entries if e.reason == SUMMARIZED] == folded


def test_summary_buffer_folds_the_oldest_turns_and_the_summary_names_them_and_keeps_their_facts():
    replay = Replay(fact_conversation(), summary_buffer(80))
    ledger = replay.ledger(8)
    folded = [e for e in ledger.entries if e.reason == SUMMARIZED]
    assert [e.turn for e in folded] == [1, 1, 2, 2, 3, 3, 4, 4, 5]  # turn 5's answer is still buffered
    [summary] = ledger.synthetic
    assert summary.origin == SUMMARY and summary.role == "system" and summary.covers == (1, 2, 3, 4, 5)
    assert summary.content == "Summary of turns 1–5: Your name is Dana. You are vegetarian. Your order is 4411."
    assert summary.tokens == replay.counter.chat("system", summary.content)


def test_summary_buffer_history_starts_with_the_system_summary_then_the_buffer():
    replay = Replay(fact_conversation(), summary_buffer(80))
    ledger = replay.ledger(8)
    sent = replay.history_messages(ledger)
    assert sent[0].role == "system" and sent[0].content == ledger.synthetic[0].content
    assert [m.ref for m in sent[1:]] == [e.ref for e in ledger.kept]
    assert ledger.history_tokens == sum(e.tokens for e in ledger.kept) + ledger.synthetic[0].tokens
    assert ledger.prompt_tokens == replay.fixed_prompt_tokens(7) + ledger.history_tokens


@pytest.mark.parametrize("limit", [20, 45, 80, 200])
def test_after_every_save_the_buffer_is_within_the_limit_and_a_summary_is_sent_iff_something_was_folded(limit):
    replay = Replay(fact_conversation(10), summary_buffer(limit))
    for s in replay.summaries():
        ledger = replay.ledger(s.turn)
        assert sum(e.tokens for e in ledger.kept) <= limit
        folded = any(e.reason == SUMMARIZED for e in ledger.entries)
        sent = replay.history_messages(ledger)
        assert (bool(sent) and sent[0].role == "system") == folded
        assert len(ledger.synthetic) == int(folded)


def test_buffer_pops_one_message_at_a_time_so_it_can_start_on_an_assistant_message():
    conv = linear(4, query=lambda i: "q " * 30, answer=lambda i: "a")
    counter = Replay(conv, summary_buffer(3)).counter
    pair = sum(chat_model_message_tokens(counter, m) for m in conv.turns[0].messages) + REPLY_PRIMING
    replay = Replay(conv, summary_buffer(pair - 1))  # a whole turn is one token over the limit
    ledger = replay.ledger(4)
    assert ledger.kept[0].role == "assistant"  # turn 3's query was popped, its answer stays
    assert [e.reason for e in ledger.entries if e.turn == 3] == [SUMMARIZED, KEPT]


def test_messages_popped_after_a_turn_go_into_one_summary_call_with_the_previous_summary():
    conv, config = fact_conversation(7), summary_buffer(60)
    recorder = RecordingSummarizer()
    Replay(conv, config, summarizer=recorder).ledger(7)
    plain = Replay(conv, config)
    folded_per_turn, before = [], []
    for turn in range(2, 8):
        now = [e.ref for e in plain.ledger(turn).entries if e.reason == SUMMARIZED]
        if now != before:
            folded_per_turn.append(now[len(before) :])
        before = now
    assert len(folded_per_turn) >= 2, "the conversation overflows the buffer more than once"
    assert [refs for refs, _, _ in recorder.calls] == folded_per_turn
    assert recorder.calls[0][1] == ""
    for (_, _, text), (_, previous, _) in zip(recorder.calls, recorder.calls[1:]):
        assert previous == text


def test_folding_is_destructive_once_summarised_a_message_stays_summarised():
    replay = Replay(fact_conversation(10), summary_buffer(60))
    summarised_before = set()
    for s in replay.summaries():
        now = {e.ref for e in replay.ledger(s.turn).entries if e.reason == SUMMARIZED}
        assert summarised_before <= now
        summarised_before = now


def test_each_branch_carries_its_own_summary():
    rows = [
        ("1", None, "I'm Dana.", "hi"),
        ("2", "1", "I'm vegetarian. " + "x " * 40, "ok"),
        ("3", "2", "q3", "a3"),
        ("4", "1", "I live in Porto. " + "y " * 40, "ok"),
        ("5", "4", "q5", "a5"),
        ("6", "5", "q6", "a6"),
    ]
    replay = Replay(dify(rows), summary_buffer(30))
    ledger6 = replay.ledger(6)
    assert {e.ref for e in ledger6.entries if e.reason == "other_branch"} == {
        "2:query",
        "2:answer",
        "3:query",
        "3:answer",
    }
    assert "vegetarian" not in ledger6.synthetic[0].content and "Porto" in ledger6.synthetic[0].content
    assert "vegetarian" in replay.ledger(3).synthetic[0].content


def test_summary_buffer_applies_granularity_and_sends_empty_messages_as_stored():
    conv = dify([tool_turn("1", None), record("2", "1", "q2", ""), record("3", "2")])
    ledger = Replay(conv, summary_buffer(1000)).ledger(3)
    reasons = {e.ref: e.reason for e in ledger.entries}
    assert reasons["1:call"] == "granularity" and reasons["2:answer"] == KEPT
    assert EMPTY not in reasons.values()


def test_summarised_entries_explain_the_buffer_limit():
    ledger = Replay(fact_conversation(), summary_buffer(80)).ledger(8)
    e = next(e for e in ledger.entries if e.reason == SUMMARIZED)
    assert explain(e, ledger.config) == "folded into the running summary (buffer over 80 tokens)"


def test_json_ledger_lists_the_summary_as_an_entry_of_the_documented_shape_where_it_is_sent():
    ledger = Replay(fact_conversation(), summary_buffer(80)).ledger(8)
    rows = ledger.to_json()["ledger"]
    assert all(set(r) == {"ref", "turn", "role", "tokens", "kept", "reason"} for r in rows)
    i = next(i for i, r in enumerate(rows) if r["ref"] == "summary")
    assert rows[i] == {
        "ref": "summary",
        "turn": 5,
        "role": "system",
        "tokens": ledger.synthetic[0].tokens,
        "kept": True,
        "reason": KEPT,
    }
    assert rows[i - 1]["reason"] == SUMMARIZED and rows[i + 1]["kept"]
    assert sum(r["tokens"] for r in rows if r["kept"]) == ledger.history_tokens


def test_the_demo_memory_still_knows_the_name_once_its_message_is_summarised():
    replay = Replay(fact_conversation(12), summary_buffer(60))
    ledger = replay.ledger(12)
    assert "1:query" not in {e.ref for e in ledger.kept}
    assert "Your name is Dana." in replay.history_messages(ledger)[0].content


# -- one engine for every strategy: fast summaries equal full ledgers ------------------------------

rewriting_configs = st.builds(
    MemoryConfig,
    strategy=st.sampled_from(["summary_buffer", "compaction", "trim"]),
    context_size=st.one_of(st.none(), st.integers(60, 600)),
    max_tokens=st.integers(0, 30),
    granularity=st.sampled_from(["query_answer", "all_messages"]),
    scope=st.sampled_from(["thread", "thread", "call"]),
    max_history_tokens=st.one_of(st.none(), st.integers(3, 200)),
    trim_strategy=st.sampled_from(["last", "first"]),
    trim_counter=st.sampled_from(["tokens", "messages", "approximate"]),
    start_on=st.sampled_from([None, "human", "ai"]),
    end_on=st.sampled_from([None, "human", "ai", "tool"]),
    include_system=st.booleans(),
    allow_partial=st.booleans(),
    compaction_keep_messages=st.integers(0, 6),
    compaction_keep_tool_results=st.integers(0, 3),
).map(
    lambda c: (
        c.with_(start_on=None, include_system=False) if getattr(c.settings, "trim_strategy", None) == "first" else c
    )
)


@settings(max_examples=300, deadline=None)
@given(conversations(), rewriting_configs)
def test_summaries_equal_the_full_ledgers_for_the_rewriting_strategies(conv, config):
    replay = Replay(conv, config)
    for summary in replay.summaries():
        ledger = replay.ledger(summary.turn)
        kept = ledger.kept
        assert summary.kept == len(kept)
        assert summary.dropped == ledger.dropped_count()
        assert summary.not_eligible == ledger.not_eligible_count()
        synthetic = sum(s.tokens for s in ledger.synthetic)
        assert summary.history_tokens == ledger.history_tokens == sum(e.tokens for e in kept) + synthetic
        assert summary.prompt_tokens == ledger.prompt_tokens
        assert summary.budget == ledger.budget
        assert summary.oldest_kept_turn == (min(e.turn for e in kept) if kept else None)
        sent = replay.history_messages(ledger)
        assert len(sent) == len(kept) + len(ledger.synthetic)
        assert sum(replay.counter.message(m) for m in sent) == ledger.history_tokens


# -- configuration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"strategy": "summary_buffer", "max_history_tokens": -1}, "max_history_tokens -1 is out of range"),
        ({"strategy": "summary_buffer", "max_history_tokens": 2}, "counts even an empty buffer as 3 tokens"),
        ({"strategy": "trim", "trim_strategy": "middle"}, "unknown trim strategy 'middle'; expected last or first"),
        ({"strategy": "trim", "trim_counter": "words"}, "unknown trim counter 'words'"),
        ({"strategy": "trim", "start_on": "user"}, "unknown message type 'user' for start_on"),
        ({"strategy": "trim", "end_on": "bot"}, "unknown message type 'bot' for end_on"),
        ({"strategy": "trim", "trim_strategy": "first", "start_on": "human"}, "apply only to trim strategy 'last'"),
        ({"strategy": "trim", "trim_strategy": "first", "include_system": True}, "apply only to trim strategy 'last'"),
        ({"strategy": "compaction", "compaction_trigger": 0.0}, "compaction trigger 0.0 is out of range"),
        ({"strategy": "compaction", "compaction_trigger": 1.5}, "compaction trigger 1.5 is out of range"),
        ({"strategy": "compaction", "compaction_keep_messages": -1}, "compaction_keep_messages -1 is out of range"),
        ({"strategy": "compaction", "compaction_keep_tool_results": -2}, "compaction_keep_tool_results -2"),
    ],
)
def test_bad_settings_of_the_rewriting_strategies_are_rejected_with_a_clear_message(changes, needle):
    with pytest.raises(ConfigError) as info:
        MemoryConfig(**changes).validate()
    assert needle in str(info.value)


def test_new_settings_round_trip_through_dicts_and_label_the_config():
    config = MemoryConfig(strategy="trim", max_history_tokens=300, start_on="human", include_system=True)
    assert MemoryConfig.from_dict(config.to_dict()) == config
    assert config.label() == "trim last 300 tok from human"
    assert MemoryConfig(strategy="summary_buffer").label() == "summary buffer 2,000 tok"
    assert MemoryConfig(strategy="compaction").label() == "compaction at 80% of context, Dify 1.17 as shipped"


# -- python -m core replay --------------------------------------------------------------------------


def run(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "core", "replay", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_replays_summary_buffer_and_shows_the_summary_in_the_table_and_the_json():
    code, out, err = run(
        TAU, "--index", "1", "--memory", "summary_buffer", "--max-history-tokens", "300", "--turn", "20"
    )
    assert code == 0, err
    assert "memory: summary buffer 300 tok" in out
    assert "+ summary" in out and "Summary of turns 1–" in out and "summarized" in out
    code, out, err = run(
        TAU,
        "--index",
        "1",
        "--memory",
        "summary_buffer",
        "--max-history-tokens",
        "300",
        "--turn",
        "20",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 0 and doc["memory"] == "summary_buffer"
    [turn] = doc["turns"]
    assert turn["budget"] == 300
    assert [r["ref"] for r in turn["ledger"]].count("summary") == 1
    assert turn["history_tokens"] == sum(r["tokens"] for r in turn["ledger"] if r["kept"])


def test_cli_replays_compaction_and_trim_with_their_options():
    code, out, err = run(
        TAU,
        "--index",
        "3",
        "--memory",
        "compaction",
        "--context-size",
        "5000",
        "--compaction-trigger",
        "0.5",
        "--compaction-keep-messages",
        "10",
        "--compaction-keep-tool-results",
        "2",
        "--format",
        "jsonl",
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["budget"] == 2500 - (lines[-1]["prompt_tokens"] - lines[-1]["history_tokens"])
    code, out, err = run(TAU, "--index", "3", "--memory", "compaction", "--context-size", "5000", "--turn", "13")
    assert code == 0 and "+ placeholder" in out and "[tool result cleared]" in out and "cleared" in out
    # 4 messages, one of them the system prompt: the last 3 are [a11, q12, a12], then start_on drops a11.
    code, out, err = run(
        TAU,
        "--index",
        "3",
        "--memory",
        "trim",
        "--max-history-tokens",
        "4",
        "--trim-counter",
        "messages",
        "--start-on",
        "human",
        "--include-system",
        "--turn",
        "13",
        "--format",
        "json",
    )
    assert code == 0, err
    rows = json.loads(out)["turns"][0]["ledger"]
    assert [(r["turn"], r["role"]) for r in rows if r["kept"]] == [(12, "user"), (12, "assistant")]
    assert [r["reason"] for r in rows if r["turn"] == 11 and r["role"] != "tool"][-1] == "outside_window"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--memory", "trim", "--trim-strategy", "first", "--start-on", "human"], "apply only to trim strategy 'last'"),
        (["--memory", "compaction", "--compaction-trigger", "2"], "--compaction-trigger 2 is out of range"),
        (["--memory", "compaction", "--compaction-trigger", "x"], "--compaction-trigger must be a number"),
        (["--memory", "summary_buffer", "--max-history-tokens", "-1"], "--max-history-tokens -1 is out of range"),
        (["--memory", "summary_buffer", "--max-history-tokens", "0"], "counts even an empty buffer as 3 tokens"),
        (["--memory", "trim", "--start-on", "user"], "invalid choice: 'user'"),
        (["--memory", "compaction", "--context-size", "1000", "--max-tokens", "1000"], "compaction target is 0 tokens"),
    ],
)
def test_cli_rejects_bad_rewriting_options_in_one_line(args, needle):
    code, out, err = run(TAU, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err, err
