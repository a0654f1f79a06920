"""The langmem_summary memory: langmem's summarize_messages before every model call, on thread states written
here (the recorded threads of the real packages: tests/memory/test_platform_memories.py).

Approximate counting: a message is ceil((content + role + name characters) / 4) + 3 tokens. Every question
here is 12 characters ("user": 7 tokens), every answer 11 ("assistant": 8 tokens), a reply that only calls
the weather tool 22 and its result 8."""

import json

import pytest

from core.io import import_text
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.langmem_summary import fold_until, with_results
from core.memory.words import explain
from core.model.conversation import Message, ToolCall
from core.model.ledger import KEPT, SUMMARIZED, SUMMARY
from tests.memory.test_langgraph_trim import PLAIN, ai, human, thread, tool
from tests.memory.test_platform_memories import replay_turns


def turns(text, **settings):
    """Per turn, what is sent before the question (a summary as ``summary_of`` its messages) and whether the
    question is sent, as the replay command gives them (``--set name=value``)."""
    return [
        (t["history"], t["query_sent"])
        for t in replay_turns("langmem_summary", {k: str(v) for k, v in settings.items()}, text, "langgraph-checkpoint")
    ]


def q(text):
    return {"role": "user", "text": text}


def a(text):
    return {"role": "assistant", "text": text}


def summary(n):
    return {"role": "system", "summary_of": n}


def test_below_max_tokens_nothing_is_summarised():
    assert turns(PLAIN, max_history_tokens=2000, max_summary_tokens=256) == [
        ([], True),
        ([q("question one"), a("answer one!")], True),
        ([q("question one"), a("answer one!"), q("question two"), a("answer two!")], True),
    ]


def test_the_fold_waits_for_max_tokens_before_summary_and_stops_where_the_rest_fits():
    # max_tokens 30, summary 10: 20 tokens may follow the summary. Without a threshold of its own a summary
    # waits for 30 tokens: turn 3's 37 fold q1 a1 q2 a2 (30), leaving the question (7).
    assert turns(PLAIN, max_history_tokens=30, max_summary_tokens=10) == [
        ([], True),
        ([q("question one"), a("answer one!")], True),
        ([summary(4)], True),
    ]
    # With 10 before a summary, turn 2 folds q1 a1 (15, the question's 7 left), turn 3 q2 a2 on top.
    assert turns(PLAIN, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=10) == [
        ([], True),
        ([summary(2)], True),
        ([summary(4)], True),
    ]
    # A threshold of 0: the first message reaches it, and nothing after it is left to fit: turn 1's question
    # is folded at once; turn 2 folds a1 (the question fits), turn 3 q2 (a2 and the question, 15, fit).
    assert turns(PLAIN, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=0) == [
        ([summary(1)], False),
        ([summary(2)], True),
        ([summary(3), a("answer two!")], True),
    ]


def test_a_reply_with_tool_calls_is_folded_with_its_results_and_a_tool_step_summarises_too():
    text = thread(
        human("question one"),
        ai("", "c1"),
        tool("c1", "sunny"),
        ai("answer one!"),
        human("question two"),
        ai("answer two!"),
    )
    # Turn 1's first call (the question, 7) folds nothing below 8; its call after the tool step (37) folds the
    # question and the reply calling the tool (29, the result's 8 left), and the result with that reply. So
    # turn 2 starts from a1: 8 reached, the question left: a1 is folded too.
    assert turns(text, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=8) == [
        ([], True),
        ([summary(4)], True),
    ]


def test_the_question_itself_is_folded_when_the_system_message_leaves_exactly_no_room():
    # The system message: ceil((6 + 62) / 4) + 3 = 20 tokens; 30 - 10 - 20 = 0 tokens may follow the summary.
    exact = thread({"type": "system", "content": "s" * 62}, *json.loads(PLAIN)["values"]["messages"])
    assert turns(exact, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=1) == [
        ([summary(1)], False),
        ([summary(3)], False),
        ([summary(5)], False),
    ]
    # One token more of system message: no cut ever fits, nothing is summarised, everything is sent.
    over = thread({"type": "system", "content": "s" * 66}, *json.loads(PLAIN)["values"]["messages"])
    assert turns(over, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=1)[2] == (
        [q("question one"), a("answer one!"), q("question two"), a("answer two!")],
        True,
    )


def ledger_of(text, turn, **settings):
    conv = import_text(text, name="t.json", fmt="langgraph-checkpoint").conversations[0]
    return Replay(conv, MemoryConfig("langmem_summary", **settings).validate()).ledger(turn)


def test_the_ledger_marks_the_folded_messages_and_the_summary_covers_a_swallowed_question():
    ledger = ledger_of(PLAIN, 3, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=10)
    assert [e.reason for e in ledger.entries] == [SUMMARIZED] * 4
    [made] = ledger.synthetic
    assert (made.origin, made.covers, made.ref) == (SUMMARY, (1, 2), SUMMARY)
    assert made.content.startswith("Summary of the conversation so far: ")
    assert (
        explain(ledger.entries[0], ledger.config)
        == "folded into langmem's running summary (max_tokens 30, counted approximately)"
    )
    assert "this call folded 2 messages" in ledger.budget_note
    exact = thread({"type": "system", "content": "s" * 62}, *json.loads(PLAIN)["values"]["messages"])
    first = ledger_of(exact, 1, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=1)
    assert first.entries == [] and first.synthetic[0].covers == (1,)
    assert "the question itself was folded into the summary" in first.budget_note
    over = thread({"type": "system", "content": "s" * 66}, *json.loads(PLAIN)["values"]["messages"])
    third = ledger_of(over, 3, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=1)
    assert [e.reason for e in third.entries] == [KEPT] * 4 and not third.synthetic
    assert "the system message leaves no room, so nothing is ever summarised" in third.budget_note


@pytest.mark.parametrize(
    "start, end, before, room, last",
    [
        (0, 4, 0, 100, 0),
        (0, 4, 10, 100, 1),
        (0, 4, 0, 5, 3),
        (0, 4, 0, 8, 2),
        (0, 4, 0, 0, 3),
        (0, 4, 0, -1, None),
        (0, 4, 31, 100, None),
        (0, 4, 30, 100, 3),
        (2, 4, 1, 100, 2),
        (4, 4, 0, 100, None),
    ],
)
def test_fold_until_finds_the_first_cut_that_reaches_the_threshold_and_leaves_what_fits(start, end, before, room, last):
    prefix = [0, 7, 15, 22, 30]  # q1 a1 q2 a2
    assert fold_until(prefix, start, end, before, room) == last


def test_with_results_takes_each_call_s_latest_result_in_call_order():
    messages = [
        Message("assistant", "", "", 0, tool_calls=(ToolCall("b", "t", "{}"), ToolCall("a", "t", "{}"))),
        Message("tool", "1", "", 1, tool_call_id="a"),
        Message("tool", "2", "", 2, tool_call_id="b"),
        Message("tool", "3", "", 3, tool_call_id="a"),
        Message("tool", "4", "", 4, tool_call_id="z"),
    ]
    assert with_results(messages.__getitem__, 0, 5, 0) == [2, 3]
    assert with_results(messages.__getitem__, 0, 3, 0) == [2, 1]
    assert with_results(messages.__getitem__, 0, 5, 1) == []
    assert with_results(messages.__getitem__, 2, 3, 0) == [2]  # a result before the messages read is not one


def test_settings_label_and_the_limit_langmem_refuses():
    assert MemoryConfig("langmem_summary").label() == "langmem summary 2,000 tok (summary 256)"
    assert (
        MemoryConfig(
            "langmem_summary", max_history_tokens=120, max_tokens_before_summary=60, max_summary_tokens=40
        ).label()
        == "langmem summary 120 tok after 60 (summary 40)"
    )
    with pytest.raises(
        ConfigError,
        match=r"max_summary_tokens 256 must be less than max_history_tokens \(langmem's "
        r"max_tokens\) 120",
    ):
        MemoryConfig("langmem_summary", max_history_tokens=120).validate()
    with pytest.raises(ConfigError, match="max_summary_tokens 40 must be less"):
        MemoryConfig("langmem_summary", max_history_tokens=40, max_summary_tokens=40).validate()
    MemoryConfig("langmem_summary", max_history_tokens=41, max_summary_tokens=40).validate()


def test_a_swallowed_question_is_a_finding():
    from core.analysis.findings import PLATFORM_RULE, config_findings

    exact = thread({"type": "system", "content": "s" * 62}, *json.loads(PLAIN)["values"]["messages"])
    conv = import_text(exact, name="t.json", fmt="langgraph-checkpoint").conversations[0]
    config = MemoryConfig("langmem_summary", max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=1)
    [found] = [f for f in config_findings(conv, [config]) if f.kind == PLATFORM_RULE]
    assert (found.turn, found.data) == (1, {"turns": [1, 2, 3]})
    assert (
        "the question itself was folded into the summary, so the model got the summary but not the question"
        in found.text
    )
    # Without the system message the same limits fold turns 1 and 2 at turn 3 and send its question.
    plain = import_text(PLAIN, name="t.json", fmt="langgraph-checkpoint").conversations[0]
    quiet = MemoryConfig("langmem_summary", max_history_tokens=30, max_summary_tokens=10)
    assert not [f for f in config_findings(plain, [quiet]) if f.kind == PLATFORM_RULE]


def test_the_module_s_worked_example():
    # 100 tokens of history, then a question of 30; max_tokens 120 and a summary of 40 leave 80 after it.
    prefix = [0, 100, 130]
    assert fold_until(prefix, 0, 2, 120, 80) == 1  # no threshold of its own: the question is folded too
    assert fold_until(prefix, 0, 2, 60, 80) == 0  # 60 reached at the history; the question's 30 fit


class Recording:
    """The offline summariser, recording what each summary was written from."""

    name = "recording"

    def __init__(self):
        self.calls = []

    def summarize(self, messages, previous_summary=""):
        self.calls.append(([m.content for m in messages], previous_summary))
        return f"summary {len(self.calls)}"


def test_each_fold_summarises_only_what_it_folds_onto_the_previous_summary():
    conv = import_text(PLAIN, name="t.json", fmt="langgraph-checkpoint").conversations[0]
    recording = Recording()
    replay = Replay(
        conv,
        MemoryConfig("langmem_summary", max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=10),
        summarizer=recording,
    )
    ledger = replay.ledger(3)
    assert recording.calls == [(["question one", "answer one!"], ""), (["question two", "answer two!"], "summary 1")]
    [made] = ledger.synthetic
    assert (made.content, made.tokens) == (
        "Summary of the conversation so far: summary 2",
        replay.counter.chat("system", made.content),
    )
    summaries = replay.summaries()
    assert [(s.kept, s.dropped, s.oldest_kept_turn) for s in summaries] == [(0, 0, None), (0, 2, None), (0, 4, None)]
    assert summaries[2].history_tokens == made.tokens
    plain = Replay(conv, MemoryConfig("langmem_summary", max_history_tokens=30, max_summary_tokens=10)).summaries()
    assert [(s.kept, s.oldest_kept_turn, s.budget) for s in plain] == [(0, None, 30), (2, 1, 30), (0, None, 30)]


def test_a_reply_whose_tool_results_end_its_turn_is_folded_with_them_at_the_next_question():
    # Turn 1 stops after its tool result (no reply after it, so no call after the tool step): turn 2's call folds
    # q1 and the reply (29 tokens, 29 wanted) and, with the reply, its result; the question (7) is left.
    text = thread(human("question one"), ai("", "c1"), tool("c1", "sunny"), human("question two"), ai("answer two!"))
    assert turns(text, max_history_tokens=30, max_summary_tokens=10, max_tokens_before_summary=29)[1] == (
        [summary(3)],
        True,
    )


def test_what_its_pruning_means_in_a_finding_and_its_budget():
    from core.memory.strategies import STRATEGIES

    assert STRATEGIES["langmem_summary"].pruning_words({"strategy": "langmem_summary"}) == (
        "langmem folds the oldest messages into its summary before each model call, tool steps included; a long "
        "question can be folded itself, and a system message over the budget stops all summarising.",
        False,
    )
    ledger = ledger_of(PLAIN, 3, max_history_tokens=30, max_summary_tokens=10, context_size=7_000)
    assert (ledger.budget, ledger.context_size) == (30, 7_000)
    assert ledger.budget_note.startswith("langmem max_tokens 30 approximate tokens: 20 after the summary (10)")
