"""The ``dify_agent`` strategy: a Dify Agent app's history as its runner builds it.

The oracle below is Dify's two steps written out literally — ``organize_agent_history`` (the
thread's messages, a thoughtless turn's empty answer left out) and
``AgentHistoryPromptTransform.get_prompt`` (the whole list when it fits, else rounds walked
newest first, recounting the list at each user message and dropping the round that overflows) —
counted as Dify's OpenAI plugin counts a list: each message, plus 3.
"""

from __future__ import annotations

import json
import random

import pytest

from core.io.readers.dify_messages import dify_turn
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies.dify_agent import left_out
from core.memory.words import explain
from core.model.conversation import (
    AGENT_THOUGHTS,
    ANSWER,
    QUERY,
    TOOL_CALL,
    TOOL_RESULT,
    Conversation,
    Message,
    ToolCall,
    Turn,
)
from core.model.tokens import REPLY_PRIMING, TokenCounter, model_facts
from tests.builders import dify, linear

COUNTER = TokenCounter("gpt-4o-mini")


def agent_record(i: int, parent: str | None, rng: random.Random) -> dict:
    """A Dify message record of an Agent app: a run of none, one or two tool steps and a final step,
    its text sometimes empty; now and then a record with no thoughts (a run that failed before its
    first step), its answer often empty."""
    thoughts = []
    answer = "" if rng.random() < 0.15 else "answer " * rng.randint(1, 30)
    if rng.random() < 0.2:
        answer = rng.choice(("", "", "answer " * rng.randint(1, 30)))
    else:
        for s in range(rng.choice((0, 1, 2))):
            tools = rng.choice(("orders", "orders;weather"))
            thoughts.append(
                {
                    "id": f"t{i}.{s}",
                    "position": s + 1,
                    "thought": rng.choice(("", "Let me check.")),
                    "tool": tools,
                    "tool_input": json.dumps({t: {"q": i} for t in tools.split(";")}),
                    "observation": json.dumps({t: "row " * rng.randint(1, 40) for t in tools.split(";")}),
                }
            )
        thoughts.append({"id": f"t{i}.f", "position": len(thoughts) + 1, "thought": answer, "tool": ""})
    return {
        "id": f"m{i}",
        "parent_message_id": parent,
        "query": "question " * rng.randint(1, 20),
        "answer": answer,
        "agent_thoughts": thoughts,
        "created_at": 1_700_000_000 + i,
    }


def agent_conversation(n: int, seed: int, branches: bool = True) -> Conversation:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        parent = None if i == 0 else f"m{rng.randrange(max(0, i - 3), i) if branches else i - 1}"
        records.append(agent_record(i, parent, rng))
    return Conversation(id="c", turns=[dify_turn(r) for r in records], system_prompt="You are a shop's agent.")


def thread_of(conv: Conversation, position: int) -> list[int]:
    out, p = [], conv.tree.thread_parent[position]
    while p is not None:
        out.append(p)
        p = conv.tree.thread_parent[p]
    return out[::-1]


def dify_history(conv: Conversation, position: int, config: MemoryConfig) -> tuple[list[str], int | None]:
    """The refs Dify's agent runner sends as history for the turn at ``position``, and its limit. The
    system message leads the list when the app has an instruction (``_init_system_message``)."""
    system = [Message("system", conv.system_prompt, "", "system")] if conv.system_prompt else []
    history = list(system)
    for p in thread_of(conv, position):
        turn = conv.turns[p]
        for m, msg in enumerate(turn.messages):
            if not left_out(turn, m):
                history.append(msg)
    if not config.settings.plugin_token_counting:
        return [m.ref for m in history[len(system) :]], None

    def count(msgs):  # 0 with counting off; the OpenAI plugin's list count on
        return sum(COUNTER.message(m) for m in msgs) + REPLY_PRIMING

    query = conv.turns[position].messages[0]
    context = config.context_size or model_facts(config.model).context_size
    limit = max(context - config.max_tokens - count([query]), 0) if context else 2000
    if count(history) <= limit:
        return [m.ref for m in history[len(system) :]], limit
    kept = list(system)
    num = 0
    for msg in history[::-1]:
        if msg.role == "system":
            continue
        kept.append(msg)
        num += 1
        if msg.role == "user":
            if count(kept) > limit:
                kept = kept[:-num]
                break
            num = 0
    return [m.ref for m in kept[len(system) :][::-1]], limit


def sent_refs(ledger) -> list[str]:
    return [e.ref for e in ledger.entries if e.kept]


@pytest.mark.parametrize("seed", range(12))
def test_every_turn_sends_what_dify_agent_runner_sends(seed):
    conv = agent_conversation(40, seed)
    rng = random.Random(seed)
    for config in (
        MemoryConfig(strategy="dify_agent"),
        MemoryConfig(
            strategy="dify_agent",
            plugin_token_counting=True,
            context_size=rng.randint(150, 2500),
            max_tokens=rng.choice((0, 100, 256)),
        ),
        MemoryConfig(strategy="dify_agent", plugin_token_counting=True),
    ):
        replay = Replay(conv, config)
        summaries = {s.turn: s for s in replay.summaries()}
        for position in range(len(conv.turns)):
            ledger = replay.ledger_at(position)
            expected, limit = dify_history(conv, position, config)
            assert sent_refs(ledger) == expected, (config.label(), position)
            assert ledger.budget == limit
            s = summaries[replay.numbers[position]]
            assert (s.kept, s.history_tokens) == (len(expected), ledger.history_tokens)
            assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept)


def test_the_oldest_turns_go_whole_and_the_budget_counts_the_system_message_and_the_list():
    conv = dify(
        [(str(i), str(i - 1) if i > 1 else None, f"q{i}", "word " * 20) for i in range(1, 7)],
        system="You are a helpful agent.",
    )
    per_turn = sum(COUNTER.message(m) for m in conv.turns[0].messages)
    system = COUNTER.chat("system", conv.system_prompt)
    query = COUNTER.message(conv.turns[5].messages[0]) + REPLY_PRIMING
    # Room for exactly three earlier turns with the system message and the list's +3; one token less: two.
    for room, kept_turns in ((3 * per_turn, [3, 4, 5]), (3 * per_turn - 1, [4, 5])):
        context = room + system + REPLY_PRIMING + query + 50
        ledger = Replay(
            conv, MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=context, max_tokens=50)
        ).ledger(6)
        assert ledger.budget == context - 50 - query
        assert sorted({e.turn for e in ledger.entries if e.kept}) == kept_turns
        assert {e.reason for e in ledger.entries if not e.kept} == {"over_budget"}
        assert ledger.budget_note == (
            f"{context:,} context − 50 max_tokens − {query} query (counted as a list); the "
            f"system message ({system}) and the history are counted as one list (+3) and "
            f"cut by whole turns, newest first"
        )


def test_a_newest_turn_too_long_on_its_own_leaves_no_history():
    """TokenBufferMemory keeps the last message whatever its size; the agent's transform drops the round."""
    conv = dify([("1", None, "q1", "short"), ("2", "1", "q2", "long " * 400), ("3", "2", "q3", "")])
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=300)).ledger(3)
    assert sent_refs(ledger) == []
    assert [e.reason for e in ledger.entries] == ["over_budget"] * 4
    assert ledger.history_tokens == 0
    dify_ledger = Replay(conv, MemoryConfig(strategy="dify", plugin_token_counting=True, context_size=300)).ledger(3)
    assert sent_refs(dify_ledger) == ["2:answer"]


def test_counting_off_sends_the_whole_thread_with_no_row_cap():
    conv = linear(520)
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent")).ledger(520)
    assert len(sent_refs(ledger)) == 2 * 519
    assert ledger.budget is None
    assert ledger.budget_note == (
        "plugin token counting is off (Dify ships it off), so the agent's history is never pruned by tokens"
    )
    # Dify's LLM-node memory fetches 500 rows, the current turn's among them.
    assert len(sent_refs(Replay(conv, MemoryConfig()).ledger(520))) == 2 * 499


def test_no_context_size_means_a_budget_of_2000():
    conv = linear(3)
    ledger = Replay(
        conv, MemoryConfig(strategy="dify_agent", model="unknown/model", plugin_token_counting=True)
    ).ledger(3)
    assert ledger.budget == 2000
    assert ledger.budget_note.startswith("context size of unknown/model unknown: Dify's default budget of 2,000 tokens")


def test_an_empty_answer_is_left_out_only_from_a_turn_without_agent_thoughts():
    step = Message("assistant", "", TOOL_CALL, "2:call", tool_calls=(ToolCall("c", "orders", "{}"),))
    turns = [
        Turn(
            "1",
            None,
            (Message("user", "q1", QUERY, "1:query"), Message("assistant", "", ANSWER, "1:answer")),
            answer_index=1,
        ),
        # A logged run whose only thought was empty: Dify sends that empty thought.
        Turn(
            "2",
            "1",
            (Message("user", "q2", QUERY, "2:query"), Message("assistant", "", ANSWER, "2:answer")),
            answer_index=1,
            meta={AGENT_THOUGHTS: 1},
        ),
        # A recorded run with a tool step and an empty answer: its steps are thoughts too.
        Turn(
            "3",
            "2",
            (
                Message("user", "q3", QUERY, "3:query"),
                step,
                Message("tool", "ok", TOOL_RESULT, "3:result", tool_call_id="c"),
                Message("assistant", "", ANSWER, "3:answer"),
            ),
            answer_index=3,
        ),
        Turn(
            "4",
            "3",
            (Message("user", "q4", QUERY, "4:query"), Message("assistant", "fine", ANSWER, "4:answer")),
            answer_index=1,
        ),
        Turn("5", "4", (Message("user", "q5", QUERY, "5:query"),), answer_index=None),
    ]
    conv = Conversation(id="c", turns=turns)
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent")).ledger(5)
    assert {e.ref: e.reason for e in ledger.entries} == {
        "1:query": "kept",
        "1:answer": "empty",
        "2:query": "kept",
        "2:answer": "kept",
        "3:query": "kept",
        "2:call": "kept",
        "3:result": "kept",
        "3:answer": "kept",
        "4:query": "kept",
        "4:answer": "kept",
    }
    assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept)
    assert [left_out(t, i) for t in turns for i in range(len(t.messages))] == [
        False,
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
    ]


def test_an_over_budget_turn_with_a_left_out_answer_is_over_budget_and_the_oldest_kept_turn_skips_it():
    conv = dify([("1", None, "q1 " * 200, "a1"), ("2", "1", "q2", ""), ("3", "2", "q3", "a3"), ("4", "3", "q4", "")])
    replay = Replay(conv, MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=120))
    ledger = replay.ledger(4)
    assert [(e.ref, e.reason) for e in ledger.entries] == [
        ("1:query", "over_budget"),
        ("1:answer", "over_budget"),
        ("2:query", "kept"),
        ("2:answer", "empty"),
        ("3:query", "kept"),
        ("3:answer", "kept"),
    ]
    summary = replay.summaries()[-1]
    assert (summary.kept, summary.dropped, summary.oldest_kept_turn) == (3, 3, 2)
    # The left-out answer is the only message of the window's oldest turn after its query.
    conv = dify([("1", None, "q1", ""), ("2", "1", "q2", "a2"), ("3", "2", "q3", "")])
    summary = Replay(conv, MemoryConfig(strategy="dify_agent")).summaries()[-1]
    assert (summary.kept, summary.oldest_kept_turn) == (3, 1)


def test_other_branches_are_not_sent_and_each_branch_keeps_its_own_sums():
    conv = dify(
        [
            ("1", None, "q1", "a1"),
            ("2", "1", "q2", ""),
            ("3", "1", "q3", "a3"),
            ("4", "3", "q4", "a4"),
            ("5", "2", "q5", "a5"),
        ]
    )
    replay = Replay(conv, MemoryConfig(strategy="dify_agent"))
    assert [(e.ref, e.reason) for e in replay.ledger(5).entries] == [
        ("1:query", "kept"),
        ("1:answer", "kept"),
        ("2:query", "kept"),
        ("2:answer", "empty"),
        ("3:query", "other_branch"),
        ("3:answer", "other_branch"),
        ("4:query", "other_branch"),
        ("4:answer", "other_branch"),
    ]
    assert [(s.turn, s.kept, s.history_tokens) for s in replay.summaries()] == [
        (s.turn, len(sent_refs(replay.ledger(s.turn))), replay.ledger(s.turn).history_tokens)
        for s in replay.summaries()
    ]
    assert [s.kept for s in replay.summaries()] == [0, 2, 2, 4, 3]


def test_label_and_reasons_in_words():
    assert MemoryConfig(strategy="dify_agent").label() == "dify agent app"
    assert MemoryConfig(strategy="dify_agent", plugin_token_counting=True).label() == "dify agent app + token counting"
    conv = dify([("1", None, "q1 " * 300, "a1"), ("2", "1", "q2", "a2")])
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=100)).ledger(2)
    entry = ledger.entries[0]
    assert entry.reason == "over_budget"
    assert explain(entry, ledger.config) == f"token budget {ledger.budget:,}: older turns pruned whole"
    assert explain(entry, {"strategy": "dify_agent"}) == "token budget: older turns pruned whole"
    assert explain(entry, {"strategy": "dify", "budget": 5}) == "token budget 5: oldest pruned"
    empty = Replay(dify([("1", None, "q1", ""), ("2", "1", "q2", "")]), MemoryConfig(strategy="dify_agent")).ledger(2)
    assert explain(empty.entries[1], empty.config) == (
        "empty answer of a run with no agent step: Dify's agent history leaves it out"
    )
    assert explain(empty.entries[1], {"strategy": "dify"}) == "empty message, dropped before the call"


def test_the_random_agent_conversations_meet_every_reason():
    """The oracle comparison above is only as strong as its cases: together they cut turns for the
    budget, leave out empty answers and pass over other branches."""
    reasons = set()
    for seed in range(12):
        conv = agent_conversation(40, seed)
        rng = random.Random(seed)
        config = MemoryConfig(
            strategy="dify_agent",
            plugin_token_counting=True,
            context_size=rng.randint(150, 2500),
            max_tokens=rng.choice((0, 100, 256)),
        )
        replay = Replay(conv, config)
        reasons |= {e.reason for p in range(len(conv.turns)) for e in replay.ledger_at(p).entries}
    assert reasons == {"kept", "over_budget", "empty", "other_branch"}


def test_an_agent_apps_log_is_known_by_its_thoughts_and_opens_under_this_strategy():
    from core.analysis.debug_view import default_lens
    from core.memory.strategies import agent_app

    assert agent_app(agent_conversation(3, 1, branches=False))
    assert not agent_app(linear(3))
    assert default_lens(agent=True).config == MemoryConfig(strategy="dify_agent")
    assert default_lens(agent=True).title == "Default · dify agent app"
    assert default_lens(4).config == MemoryConfig(window=4)


def test_the_sample_agent_log_loses_its_first_turn_whole_on_a_small_context():
    from core.io import read_conversations
    from core.memory.strategies import agent_app
    from tests.conftest import ROOT

    [conv] = read_conversations(ROOT / "sample_data" / "conversations" / "shop-agent.json")
    assert agent_app(conv)
    config = MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=560, max_tokens=256)
    ledger = Replay(conv, config).ledger(5)
    assert {e.turn: e.reason for e in ledger.entries if e.turn == 1} == {1: "over_budget"}
    assert [e.reason for e in ledger.entries if e.turn == 1] == ["over_budget"] * 4
    assert [(e.ref, e.reason) for e in ledger.entries if e.turn == 3] == [
        ("msg-3:query", "kept"),
        ("msg-3:answer", "empty"),
    ]
    assert sent_refs(ledger) == dify_history(conv, conv.index_of("msg-5"), config)[0]
    assert "Priya" not in " ".join(
        conv.turns[p].messages[i].content for p, i in ((e.position, e.index) for e in ledger.entries if e.kept)
    )
    # Dify's LLM-node memory, with queries and answers only, would still send turn 1 and its name.
    shipped = Replay(conv, MemoryConfig(plugin_token_counting=True, context_size=560, max_tokens=256)).ledger(5)
    assert [e.ref for e in shipped.entries if e.kept][:2] == ["msg-1:query", "msg-1:answer"]


def test_turns_with_no_query_and_a_budget_with_no_room():
    """Turns that are only an empty answer (openers that failed) are left out whole, so the oldest
    turn sent is the next one; a turn with no query has no query to count; max_tokens over the
    context leaves a budget of 0 and no history."""

    def opener(tid, parent):
        return Turn(tid, parent, (Message("assistant", "", ANSWER, f"{tid}:answer"),), query_index=None, answer_index=0)

    rows = [
        opener("1", None),
        opener("2", "1"),
        opener("3", "2"),
        Turn(
            "4",
            "3",
            (Message("user", "q4", QUERY, "4:query"), Message("assistant", "a4", ANSWER, "4:answer")),
            answer_index=1,
        ),
        opener("5", "4"),
        Turn("6", "5", (Message("user", "q6", QUERY, "6:query"),), answer_index=None),
    ]
    conv = Conversation(id="c", turns=rows)
    config = MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=500)
    replay = Replay(conv, config)
    query = COUNTER.message(rows[3].messages[0]) + REPLY_PRIMING
    assert [tuple(s) for s in replay.summaries()] == [
        (3, 0, 3, 0, 0, query, 500 - query, None),
        (5, 2, 4, 0, 12, query + 12, 500 - query, 3),
    ]
    ledger = replay.ledger(5)
    assert [(e.ref, e.reason) for e in ledger.entries] == [
        ("1:answer", "empty"),
        ("2:answer", "empty"),
        ("3:answer", "empty"),
        ("4:query", "kept"),
        ("4:answer", "kept"),
        ("5:answer", "empty"),
    ]
    assert ledger.context_size == 500
    # A turn with no query (an opener's own call) counts no query: only the empty list's +3.
    assert replay.ledger_at(1).budget == 500 - REPLY_PRIMING
    tight = Replay(conv, config.with_(max_tokens=900)).ledger(5)
    assert (tight.budget, sent_refs(tight)) == (0, [])
    assert tight.budget_note.startswith("500 context − 900 max_tokens − ")


def test_the_ledger_knows_the_context_with_counting_off_too():
    ledger = Replay(linear(2), MemoryConfig(strategy="dify_agent")).ledger(2)
    assert (ledger.budget, ledger.context_size) == (None, 128_000)
    ledger = Replay(linear(2), MemoryConfig(strategy="dify_agent", plugin_token_counting=True)).ledger(2)
    assert ledger.context_size == 128_000


def test_the_finding_for_silent_pruning_says_what_the_agent_app_drops():
    from core.analysis.compare import NamedConfig
    from core.analysis.findings import findings_for
    from core.io import read_conversations
    from tests.conftest import ROOT

    [conv] = read_conversations(ROOT / "sample_data" / "conversations" / "shop-agent.json")
    config = MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=560, max_tokens=256)
    [finding] = findings_for(conv, [NamedConfig(config.label(), config)])
    assert (finding.kind, finding.severity, finding.turn) == ("silent_pruning", "warning", 3)
    assert finding.detail == (
        "Dify's Agent app drops the oldest whole turns — their tool calls and results too — while the system message "
        "and the history are over its budget (with plugin token counting on: context size − max_tokens − the query) "
        "and nothing in the run says so. Raise the context size or lower max_tokens, or keep tool results short."
    )
    assert findings_for(conv, [NamedConfig("off", config.with_(plugin_token_counting=False))]) == []
