"""compaction, the "exact estimate" profile (MemLens's own): Dify 1.17's thresholds — the target,
clearing old tool results first, then summarising older history, with the newest messages and
tool results intact — on an exact token count checked once per turn. The default profile, Dify
1.17 as shipped, is tested against pydantic-ai-harness in tests/memory/test_compaction_shipped.py."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.io import read_conversations
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.compaction import (
    DEFAULT_KEEP_MESSAGES,
    DEFAULT_KEEP_TOOL_RESULTS,
    DEFAULT_TRIGGER,
    TOOL_PLACEHOLDER,
    compaction_target,
)
from core.memory.summarize import OFFLINE
from core.memory.words import explain
from core.model.ledger import CLEARED, KEPT, PLACEHOLDER, SUMMARIZED, SUMMARY
from tests.builders import openai
from tests.conftest import FIXTURES

TAU = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
BIG = "row " * 150


def agent_chat(turns, tools_per_turn=1, result=BIG, facts=None, answer=""):
    """An agent conversation: each turn asks, calls tools, reads their results, answers."""
    facts = facts or {}
    msgs = [{"role": "system", "content": "You are an agent."}]
    for i in range(1, turns + 1):
        msgs.append({"role": "user", "content": facts.get(i, f"please look up item {i}")})
        for k in range(tools_per_turn):
            cid = f"c{i}_{k}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": f'{{"item": {i}}}'}}
                    ],
                }
            )
            msgs.append({"role": "tool", "tool_call_id": cid, "content": f"result {i}.{k}: {result}"})
        msgs.append({"role": "assistant", "content": f"Item {i} is in stock. {answer}"})
    msgs.append({"role": "user", "content": "anything else?"})
    return openai(msgs)


def context_for(target):
    """The smallest context size whose compaction target is at least ``target``."""
    ctx = math.ceil(target / DEFAULT_TRIGGER)
    while compaction_target(ctx, 0) < target:
        ctx += 1
    return ctx


def compaction(**kw):
    return MemoryConfig(strategy="compaction", compaction_profile="exact", **kw)


def full_history(conv, turn):
    """Fixed prompt tokens and the uncompacted history of a turn."""
    replay = Replay(conv, compaction(context_size=10_000_000))
    ledger = replay.ledger(turn)
    return replay.fixed_prompt_tokens(replay.position_of(turn)), ledger


class RecordingSummarizer:
    name = "recording"

    def __init__(self):
        self.calls = []

    def summarize(self, messages, previous_summary=""):
        self.calls.append((list(messages), previous_summary))
        return OFFLINE.summarize(messages, previous_summary)


# -- thresholds --------------------------------------------------------------------------------------


def test_thresholds_are_eighty_percent_three_tool_results_and_twenty_messages():
    assert (DEFAULT_TRIGGER, DEFAULT_KEEP_TOOL_RESULTS, DEFAULT_KEEP_MESSAGES) == (0.8, 3, 20)
    config = compaction()
    assert (
        config.settings.compaction_trigger,
        config.settings.compaction_keep_tool_results,
        config.settings.compaction_keep_messages,
    ) == (0.8, 3, 20)
    assert MemoryConfig(strategy="compaction").settings.compaction_profile == "shipped", "the default is what Dify runs"
    assert TOOL_PLACEHOLDER == "[tool result cleared]"


@pytest.mark.parametrize(
    "context,max_tokens,target",
    [
        (128_000, 0, 102_400),  # floor(window × 0.8)
        (128_000, 4_096, 102_400),  # min(floor(window × 0.8), window − max_tokens)
        (10_000, 3_000, 7_000),
        (16_385, 0, 13_108),
        (1_000, 1_000, 0),
    ],
)
def test_the_target_is_eighty_percent_of_the_context_capped_by_context_minus_max_tokens(context, max_tokens, target):
    assert compaction_target(context, max_tokens) == target


def test_a_target_of_zero_rejects_the_config_and_an_unknown_context_never_compacts():
    conv = agent_chat(3)
    with pytest.raises(ConfigError, match="compaction target is 0 tokens"):
        Replay(conv, compaction(context_size=1000, max_tokens=1000))
    ledger = Replay(conv, compaction(model="acme/model-x")).ledger(4)
    assert ledger.budget is None and "unknown" in ledger.budget_note
    assert all(e.kept for e in ledger.entries) and ledger.synthetic == []


def test_under_the_target_nothing_is_compacted():
    conv = agent_chat(5)
    fixed, full = full_history(conv, 6)
    ledger = Replay(conv, compaction(context_size=context_for(fixed + full.history_tokens))).ledger(6)
    assert all(e.reason == KEPT for e in ledger.entries) and ledger.synthetic == []
    assert ledger.prompt_tokens <= compaction_target(ledger.context_size, 0)


# -- tier 1: clear old tool results ---------------------------------------------------------------


def test_over_the_target_old_tool_results_are_cleared_first_and_the_newest_three_stay():
    conv = agent_chat(6)
    fixed, full = full_history(conv, 7)
    replay = Replay(conv, compaction(context_size=context_for(fixed + full.history_tokens - 1)))
    ledger = replay.ledger(7)
    tools = [e for e in ledger.entries if e.role == "tool"]
    assert [e.reason for e in tools] == [CLEARED, CLEARED, CLEARED, KEPT, KEPT, KEPT]
    assert not any(e.reason == SUMMARIZED for e in ledger.entries), "clearing was enough: no summary"
    assert all(e.kept for e in ledger.entries if e.role != "tool"), "calls keep their arguments"
    placeholders = [s for s in ledger.synthetic if s.origin == PLACEHOLDER]
    assert [s.replaces for s in placeholders] == [(e.position, e.index) for e in tools[:3]]
    assert ledger.prompt_tokens <= compaction_target(ledger.context_size, 0)


def test_a_cleared_tool_result_is_still_sent_as_a_placeholder_answering_its_call():
    conv = agent_chat(6)
    fixed, full = full_history(conv, 7)
    replay = Replay(conv, compaction(context_size=context_for(fixed + full.history_tokens - 1)))
    ledger = replay.ledger(7)
    sent = replay.history_messages(ledger)
    cleared = [m for m in sent if m.content == TOOL_PLACEHOLDER]
    assert [m.tool_call_id for m in cleared] == ["c1_0", "c2_0", "c3_0"] and all(m.role == "tool" for m in cleared)
    assert len(sent) == len(ledger.entries)  # nothing dropped, three contents replaced
    e = next(e for e in ledger.entries if e.reason == CLEARED)
    assert explain(e, ledger.config) == "content replaced by a placeholder, which is still sent"
    assert ledger.history_tokens == sum(replay.counter.message(m) for m in sent)


# -- tier 2: summarise older history ---------------------------------------------------------------

FACTS = {1: "Hi, I'm Dana and I'm vegetarian.", 2: "My booking reference is AB12 for this."}


def summarising_case(turns=10, tools=2):
    """Long answers as well as big tool results: clearing alone cannot reach the target."""
    conv = agent_chat(turns, tools_per_turn=tools, facts=FACTS, answer="detail " * 80)
    fixed, full = full_history(conv, turns + 1)
    return conv, compaction(context_size=context_for(fixed + full.history_tokens // 3))


def test_still_over_after_clearing_older_history_is_summarised_keeping_twenty_messages_and_the_first_query():
    conv, config = summarising_case()
    replay = Replay(conv, config)
    ledger = replay.ledger(11)
    reasons = [e.reason for e in ledger.entries]
    assert SUMMARIZED in reasons
    assert ledger.entries[0].reason == KEPT and ledger.entries[0].role == "user"  # the first user message
    assert all(r != SUMMARIZED for r in reasons[-DEFAULT_KEEP_MESSAGES:])
    [summary] = [s for s in ledger.synthetic if s.origin == SUMMARY]
    assert summary.role == "system" and summary.content.startswith("Summary of previous conversation (turns 1–")
    assert "Your name is Dana." in summary.content and "You are vegetarian." in summary.content
    assert "Your booking is AB12." in summary.content
    sent = replay.history_messages(ledger)
    assert sent[0].content == summary.content and sent[1].content == FACTS[1]
    folded = next(e for e in ledger.entries if e.reason == SUMMARIZED)
    assert (
        explain(folded, ledger.config)
        == "folded into the compaction summary (the prompt was over the compaction target)"
    )


def test_tool_results_are_cleared_before_anything_is_summarised():
    conv, config = summarising_case()
    recorder = RecordingSummarizer()
    Replay(conv, config, summarizer=recorder).ledger(11)
    folded_tools = [m for messages, _ in recorder.calls for m in messages if m.role == "tool"]
    assert folded_tools and all(m.content == TOOL_PLACEHOLDER for m in folded_tools)


def test_the_cut_before_the_kept_messages_never_lands_on_a_tool_result():
    for tools in (1, 2, 3):
        conv, config = summarising_case(tools=tools)
        ledger = Replay(conv, config).ledger(11)
        kept_part = [e for e in ledger.entries[1:] if e.reason != SUMMARIZED]
        assert kept_part[0].role != "tool"
        first = ledger.entries.index(kept_part[0])
        assert all(e.reason == SUMMARIZED for e in ledger.entries[1:first])


def test_the_last_turn_is_intact_and_older_recent_turns_lose_only_tool_results_beyond_the_newest_three():
    conv, config = summarising_case(turns=10, tools=2)
    ledger = Replay(conv, config).ledger(11)
    assert all(e.reason == KEPT for e in ledger.entries if e.turn == 10)
    turn9 = [e for e in ledger.entries if e.turn == 9]  # within the newest 20 messages: never summarised
    assert [e.reason for e in turn9 if e.role != "tool"] == [KEPT] * 4
    assert [e.reason for e in turn9 if e.role == "tool"] == [CLEARED, KEPT]  # the 4th newest tool result


def test_compaction_is_stored_so_later_turns_keep_it_and_update_the_summary():
    conv, _ = summarising_case(turns=12)
    config = compaction(context_size=context_for(1200))  # about three turns' worth: it compacts again and again
    recorder = RecordingSummarizer()
    replay = Replay(conv, config, summarizer=recorder)
    replay.ledger(13)
    assert len(recorder.calls) >= 2 and recorder.calls[0][1] == ""
    assert all(previous for _, previous in recorder.calls[1:]), "later summaries update the previous one"
    plain = Replay(conv, config)
    before = {}
    for turn in range(2, 14):
        now = {e.ref: e.reason for e in plain.ledger(turn).entries}
        for ref, reason in before.items():
            if reason in (SUMMARIZED, CLEARED):
                assert now[ref] in (SUMMARIZED, CLEARED), (turn, ref)
            if reason == SUMMARIZED:
                assert now[ref] == SUMMARIZED
        before = now


def test_every_message_counts_whatever_the_granularity():
    conv = agent_chat(3)
    for granularity in ("query_answer", "all_messages"):
        ledger = Replay(conv, compaction(granularity=granularity)).ledger(4)
        assert {e.role for e in ledger.kept} == {"user", "assistant", "tool"}


# -- invariants on a real tool-using transcript ------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5), st.integers(2500, 9000), st.integers(0, 25), st.integers(0, 4))
def test_tau_bench_compaction_keeps_pairs_valid_and_the_newest_messages_intact(index, context, keep, keep_tools):
    conv = read_conversations(TAU)[index]
    config = compaction(context_size=context, compaction_keep_messages=keep, compaction_keep_tool_results=keep_tools)
    replay = Replay(conv, config)
    for s in replay.summaries():
        ledger = replay.ledger(s.turn)
        entries = ledger.entries
        if keep:
            assert all(e.reason != SUMMARIZED for e in entries[-keep:])
        tools = [e for e in entries if e.role == "tool"]
        if keep_tools:  # the newest tool results are never cleared (older than the kept messages, they fold)
            assert all(e.reason != CLEARED for e in tools[-keep_tools:])
        sent = replay.history_messages(ledger)
        called = set()
        for m in sent:
            called |= {c.id for c in m.tool_calls}
            if m.role == "tool":
                assert m.tool_call_id in called, "a tool result is never sent without its call"
        pinned = 1 if any(e.reason == SUMMARIZED for e in entries) else 0
        rest = [m for m in sent if m.role != "system"][pinned:]
        assert not rest or rest[0].role != "tool"


# -- the summary message and branches ---------------------------------------------------------------


def test_the_summary_message_covers_every_folded_turn_and_is_dated_at_the_newest_of_them():
    conv, config = summarising_case(turns=10, tools=2)
    ledger = Replay(conv, config).ledger(11)
    summary = next(s for s in ledger.synthetic if s.origin == SUMMARY)
    folded = sorted({e.turn for e in ledger.entries if e.reason == SUMMARIZED})
    assert summary.covers == tuple(folded) and summary.turn == folded[-1]
    assert summary.ref == "summary" and summary.role == "system"
    assert summary.content.startswith(f"Summary of previous conversation (turns {folded[0]}–{folded[-1]}):\n\n")


def branched(conv, at):
    """``conv`` and a second branch: copies of its turns from position ``at`` on, answering the same
    parent again (a regenerated turn and what followed it), listed after the first branch."""
    from dataclasses import replace as copy_message
    from dataclasses import replace as copy_turn

    from core.model.conversation import Conversation

    turns = [
        copy_turn(
            t,
            messages=tuple(
                copy_message(m, content=m.content[: 40 + 97 * ((p * 7 + k) % 5)]) if m.role == "tool" else m
                for k, m in enumerate(t.messages)
            ),
        )
        for p, t in enumerate(conv.turns)
    ]  # tool results of different sizes, so sums tell them apart
    ids = {t.id: f"{t.id}-again" for t in turns[at:]}
    again = [copy_turn(t, id=ids[t.id], parent_id=ids.get(t.parent_id, t.parent_id)) for t in turns[at:]]
    return Conversation(conv.id, turns + again, conv.system_prompt, conv.source_format)


@pytest.mark.parametrize("profile,keep_tools", [("exact", 3), ("exact", 0), ("shipped", 3)])
def test_every_turns_overview_on_a_branched_conversation_agrees_with_its_own_ledger(profile, keep_tools):
    conv, config = summarising_case(turns=10, tools=2)
    conv = branched(conv, 4)
    config = config.with_(compaction_keep_tool_results=keep_tools)
    replay = Replay(conv, config.with_(compaction_profile=profile))
    overview = {s.turn: s for s in replay.summaries()}
    for position in conv.answered_turns():
        ledger = Replay(conv, config.with_(compaction_profile=profile)).ledger_at(position)
        number = replay.numbers[position]
        assert (overview[number].history_tokens, overview[number].prompt_tokens) == (
            ledger.history_tokens,
            ledger.prompt_tokens,
        ), number


@pytest.mark.parametrize("keep_tools", [3, 0])
def test_a_turns_history_is_what_its_kept_messages_placeholders_and_summary_cost_and_the_overview_agrees(keep_tools):
    conv, config = summarising_case(turns=10, tools=2)
    config = config.with_(compaction_keep_tool_results=keep_tools)
    replay = Replay(conv, config)
    overview = {s.turn: s for s in replay.summaries()}
    compacted = 0
    for turn in range(2, 12):
        ledger = replay.ledger(turn)
        kept = [e for e in ledger.entries if e.reason == KEPT]
        assert ledger.history_tokens == sum(e.tokens for e in kept) + sum(s.tokens for s in ledger.synthetic)
        assert overview[turn].kept == len(kept) and overview[turn].history_tokens == ledger.history_tokens
        assert overview[turn].oldest_kept_turn == min(e.turn for e in kept)
        cleared = {(e.position, e.index): e for e in ledger.entries if e.reason == CLEARED}
        placeholders = [s for s in ledger.synthetic if s.origin == PLACEHOLDER]
        assert sorted(s.replaces for s in placeholders) == sorted(cleared)
        for s in placeholders:
            entry = cleared[s.replaces]
            assert (s.role, s.turn, s.covers, s.ref, s.content) == (
                "tool",
                entry.turn,
                (entry.turn,),
                f"cleared:{entry.ref}",
                TOOL_PLACEHOLDER,
            )
        compacted += bool(ledger.synthetic)
    assert compacted >= 3
