"""The langgraph_trim memory: LangGraph's documented pre_model_hook trim and its empty-trim fallback, on
thread states written here (the recorded threads of the real packages: tests/memory/test_platform_memories.py).

Approximate counting: a message is ceil((content + role + name characters) / 4) + 3 tokens. Every question
here is 12 characters ("user": 7 tokens), every answer 11 ("assistant": 8 tokens)."""

import json
import subprocess
import sys

import pytest

from core.io import import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.words import explain
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET
from tests.conftest import ROOT


def human(text):
    return {"type": "human", "content": text}


def ai(text, *calls):
    return {"type": "ai", "content": text, "tool_calls": [{"id": c, "name": "weather", "args": {}} for c in calls]}


def tool(call_id, text):
    return {"type": "tool", "content": text, "tool_call_id": call_id, "name": "weather"}


def thread(*messages):
    return json.dumps(
        {"values": {"messages": list(messages)}, "next": [], "config": {"configurable": {"thread_id": "t"}}}
    )


PLAIN = thread(
    human("question one"),
    ai("answer one!"),
    human("question two"),
    ai("answer two!"),
    human("question ten"),
    ai("answer ten!"),
)


def last_turn(text, **settings):
    conv = import_text(text, name="thread.json", fmt="langgraph-checkpoint").conversations[0]
    replay = Replay(conv, MemoryConfig("langgraph_trim", **settings).validate())
    ledger = replay.ledger_at(conv.answered_turns()[-1])
    return [m.content for m in replay.history_messages(ledger)], [e.reason for e in ledger.entries], ledger


@pytest.mark.parametrize(
    "limit, history, reasons",
    [
        # q1 a1 q2 a2 and the question q3: 7 + 8 + 7 + 8 + 7 = 37 tokens.
        (37, ["question one", "answer one!", "question two", "answer two!"], [KEPT] * 4),
        (2000, ["question one", "answer one!", "question two", "answer two!"], [KEPT] * 4),
        (36, ["question two", "answer two!"], [OVER_BUDGET, OUTSIDE_WINDOW, KEPT, KEPT]),  # a1 fits: start_on drops it
        (22, ["question two", "answer two!"], [OVER_BUDGET, OVER_BUDGET, KEPT, KEPT]),
        (21, [], [OVER_BUDGET] * 3 + [OUTSIDE_WINDOW]),  # a2 and q3 fit; a2 is not human
        (7, [], [OVER_BUDGET] * 4),  # the question alone
    ],
)
def test_the_trim_keeps_the_newest_that_fit_with_the_question_then_starts_on_a_human_message(limit, history, reasons):
    got, got_reasons, _ = last_turn(PLAIN, max_history_tokens=limit)
    assert (got, got_reasons) == (history, reasons)


@pytest.mark.parametrize("limit", [6, 1, 0])
def test_a_question_over_the_limit_alone_empties_the_trim_and_the_agent_sends_everything(limit):
    history, reasons, ledger = last_turn(PLAIN, max_history_tokens=limit)
    assert history == ["question one", "answer one!", "question two", "answer two!"]
    assert reasons == [KEPT] * 4
    assert ledger.budget_note == (
        f"the trim kept nothing (max_tokens {limit:,}, the question alone 7 approximate "
        f"tokens): the agent sent every message instead (llm_input_messages or messages)"
    )


def test_a_tool_result_never_opens_the_kept_part():
    # The result is ceil((5 + 4 + 7 + 2) / 4) + 3 = 8 tokens (its text, role, tool name and call id): within
    # 23, the result, a1 and the question fit, and start_on drops the result and a1.
    text = thread(
        human("question one"),
        ai("", "c1"),
        tool("c1", "sunny"),
        ai("answer one!"),
        human("question ten"),
        ai("answer ten!"),
    )
    history, reasons, _ = last_turn(text, max_history_tokens=23)
    assert history == []
    assert reasons == [OVER_BUDGET, OVER_BUDGET, OUTSIDE_WINDOW, OUTSIDE_WINDOW]
    history, reasons, _ = last_turn(text, max_history_tokens=1000)
    assert history == ["question one", "", "sunny", "answer one!"]


def test_a_system_message_is_the_system_prompt_and_changes_nothing():
    with_system = thread(
        {"type": "system", "content": "You are a travel assistant."}, *json.loads(PLAIN)["values"]["messages"]
    )
    for limit in (37, 36, 21, 6):
        assert last_turn(with_system, max_history_tokens=limit)[:2] == last_turn(PLAIN, max_history_tokens=limit)[:2]


def test_its_words_and_label():
    _, _, ledger = last_turn(PLAIN, max_history_tokens=36)
    assert (
        explain(ledger.entries[0], ledger.config)
        == "over the hook's trim_messages max_tokens (36 approximate tokens with the question): oldest dropped"
    )
    assert (
        explain(ledger.entries[1], ledger.config)
        == 'dropped so the kept part starts on a human message (start_on="human")'
    )
    assert ledger.budget_note == "trim_messages max_tokens 36 approximate tokens, the question's 7 included"
    assert MemoryConfig("langgraph_trim").label() == "langgraph trim 2,000 tok"
    assert MemoryConfig("langgraph_trim", max_history_tokens=300).label() == "langgraph trim 300 tok"


def test_the_replay_command_trims_an_imported_thread(tmp_path):
    path = tmp_path / "thread.json"
    path.write_text(PLAIN)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "replay",
            str(path),
            "--input-format",
            "langgraph-checkpoint",
            "--memory",
            "langgraph_trim",
            "--set",
            "max_history_tokens=22",
            "--format",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [e["reason"] for e in json.loads(proc.stdout)["turns"][-1]["ledger"]] == [OVER_BUDGET] * 2 + [KEPT] * 2


def test_an_empty_trim_is_a_finding_at_the_first_turn_it_sends_everything():
    from core.analysis.findings import PLATFORM_RULE, config_findings

    conv = import_text(PLAIN, name="thread.json", fmt="langgraph-checkpoint").conversations[0]
    [found] = [
        f
        for f in config_findings(conv, [MemoryConfig("langgraph_trim", max_history_tokens=6)])
        if f.kind == PLATFORM_RULE
    ]
    # Turn 1 has no earlier message to send: turn 2 is the first where the fallback sends the thread.
    assert (found.turn, found.data) == (2, {"turns": [2, 3]})
    assert found.text == (
        "At turn 2 “langgraph trim 6 tok”: the question alone is over the trim's max_tokens (6), so "
        "the trim came back empty and the agent sent all 2 earlier messages instead (langgraph "
        "#8925) (1 later turn too)."
    )
    assert not [
        f
        for f in config_findings(conv, [MemoryConfig("langgraph_trim", max_history_tokens=7)])
        if f.kind == PLATFORM_RULE
    ]


def test_hook_trim_ends_on_a_human_or_tool_message_and_starts_on_a_human_one():
    from core.memory.strategies.langgraph_trim import hook_trim

    kinds = ["human", "ai", "tool", "human", "ai", "ai"]
    cost = lambda i, j: 10 * (j - i)  # noqa: E731
    kept = hook_trim(len(kinds), cost, kinds.__getitem__, 1000)
    assert kept.kept_range() == (0, 4)  # the trailing replies go (end_on), the first human opens it
    assert hook_trim(len(kinds), cost, kinds.__getitem__, 30).kept_range() == (3, 4)  # tool, human fit: start_on
    assert hook_trim(len(kinds), cost, kinds.__getitem__, 9) is None


def test_a_turn_without_a_question_is_trimmed_too():
    # The thread opens with a reply of its own (a turn without a question); a later turn's trim reads it.
    text = thread(ai("hello there"), human("question one"), ai("answer one!"), human("question ten"), ai("answer ten!"))
    history, reasons, _ = last_turn(text, max_history_tokens=2000)
    assert history == ["question one", "answer one!"] and reasons == [OUTSIDE_WINDOW, KEPT, KEPT]


def test_each_turn_s_numbers_count_what_the_trim_or_the_fallback_sends():
    from core.memory.replay import Replay

    conv = import_text(PLAIN, name="thread.json", fmt="langgraph-checkpoint").conversations[0]
    trimmed = Replay(conv, MemoryConfig("langgraph_trim", max_history_tokens=22)).summaries()
    assert [(s.kept, s.dropped, s.oldest_kept_turn, s.budget) for s in trimmed] == [
        (0, 0, None, 22),
        (2, 0, 1, 22),
        (2, 2, 2, 22),
    ]
    everything = Replay(conv, MemoryConfig("langgraph_trim", max_history_tokens=6))
    summaries = everything.summaries()
    assert [(s.kept, s.dropped, s.oldest_kept_turn) for s in summaries] == [(0, 0, None), (2, 0, 1), (4, 0, 1)]
    ledger = everything.ledger(3)
    assert summaries[2].history_tokens == ledger.history_tokens == sum(e.tokens for e in ledger.entries)
    assert (ledger.budget, ledger.context_size) == (6, 128_000)
    assert Replay(conv, MemoryConfig("langgraph_trim", context_size=8_000)).ledger(3).context_size == 8_000


def test_what_its_pruning_means_in_a_finding():
    from core.memory.strategies import STRATEGIES

    assert STRATEGIES["langgraph_trim"].pruning_words({"strategy": "langgraph_trim"}) == (
        "The pre_model_hook's trim drops the oldest messages over max_tokens; when the question alone is over it, "
        "the trim is empty and the agent sends the whole thread instead.",
        False,
    )
