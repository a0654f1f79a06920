"""compaction, both profiles: what a turn's receipt says (the target with the trigger and max_tokens
it was made from, the budget left for history, the context, the oldest turn kept, what a summary
costs) and which messages the exact profile's summariser is given — the settings a what-if changes
must reach every one of them."""

from __future__ import annotations

import pytest

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.compaction import TOOL_PLACEHOLDER
from core.memory.summarize import OFFLINE, SECTIONS_OFFLINE
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn
from core.model.ledger import CLEARED, KEPT, SUMMARIZED, SUMMARY
from tests.memory.test_compaction import RecordingSummarizer, agent_chat, compaction, full_history, summarising_case
from tests.memory.test_compaction_shipped import FIXTURES, recorded, simulate


def test_a_target_of_zero_at_another_trigger_rejects_the_config_and_names_that_trigger():
    conv = agent_chat(2)
    with pytest.raises(ConfigError, match=r"^compaction target is 0 tokens: 40% of the 2-token context"):
        Replay(conv, compaction(context_size=2, compaction_trigger=0.4))
    assert Replay(conv, compaction(context_size=2)).ledger(3).budget == 0, "a target of 1 token is accepted"


def test_the_exact_receipt_names_the_target_from_the_trigger_and_max_tokens_and_the_budget_left():
    conv = agent_chat(3)
    replay = Replay(conv, compaction(context_size=100_000, max_tokens=30_000, compaction_trigger=0.5))
    ledger = replay.ledger(4)
    fixed = replay.fixed_prompt_tokens(replay.position_of(4))
    assert ledger.budget == 50_000 - fixed and ledger.context_size == 100_000
    assert ledger.budget_note == (
        f"compaction target 50,000 (50% of 100,000, at most context − 30,000 max_tokens) − {fixed:,} prompt"
    )
    capped = Replay(conv, compaction(context_size=100_000, max_tokens=60_000)).ledger(4)
    assert capped.budget == 40_000 - fixed
    plain = Replay(conv, compaction(context_size=100_000)).ledger(4)
    assert plain.budget_note == f"compaction target 80,000 (80% of 100,000) − {fixed:,} prompt"


def test_a_fixed_prompt_over_the_target_leaves_no_budget_in_either_profile():
    conv = agent_chat(2)
    for profile in ("exact", "shipped"):
        ledger = Replay(
            conv, compaction(context_size=20).with_(compaction_profile=profile), system_prompt="You are an agent. " * 40
        ).ledger(3)
        assert ledger.budget == 0, profile


def test_the_exact_profile_summarises_with_the_fact_summariser_and_the_shipped_one_with_sections():
    conv, config = summarising_case()
    exact = Replay(conv, config)
    assert exact.summarizer is OFFLINE
    summary = next(s for s in exact.ledger(11).synthetic if s.origin == SUMMARY)
    assert "Your name is Dana." in summary.content and "## Intent" not in summary.content
    assert summary.tokens == exact.counter.chat("system", summary.content)
    assert Replay(conv, config.with_(compaction_profile="shipped")).summarizer is SECTIONS_OFFLINE


def test_each_compaction_of_the_exact_profile_folds_only_what_is_new_and_a_kept_tool_result_as_it_is():
    """Tool calls in the first turns, then a long chat: the newest three results are older than the
    kept messages, so they are folded — with their content, not as placeholders — and a later
    compaction is given only the messages folded since the previous one."""
    conv = agent_chat(5, tools_per_turn=1, result="row " * 20, answer="detail " * 40)
    chat = [m for t in conv.turns for m in t.messages]
    for k in range(12):
        chat += [
            Message("user", f"and question {k}?", QUERY, f"u{k}"),
            Message("assistant", "answer " * 60, ANSWER, f"a{k}"),
        ]
    turns, start = [], 0
    for i, m in enumerate(chat):
        if m.role == "user" and i > start:
            turns.append(chat[start:i])
            start = i
    turns.append(chat[start:])
    conversation = Conversation(
        "c",
        [
            Turn(str(k), str(k - 1) if k else None, tuple(t), query_index=0, answer_index=len(t) - 1)
            for k, t in enumerate(turns)
        ],
    )
    fixed, full = full_history(conversation, len(turns))
    recorder = RecordingSummarizer()
    config = compaction(context_size=int((fixed + full.history_tokens // 2) / 0.8), compaction_keep_messages=6)
    ledger = Replay(conversation, config, summarizer=recorder).ledger(len(turns))
    assert len(recorder.calls) >= 2
    folded = [[m.ref for m in messages] for messages, _ in recorder.calls]
    assert all(not set(a) & set(b) for k, a in enumerate(folded) for b in folded[k + 1 :]), "nothing folded twice"
    tools = [m for messages, _ in recorder.calls for m in messages if m.role == "tool"]
    assert len(tools) == 5
    assert [m.content == TOOL_PLACEHOLDER for m in tools] == [True, True, False, False, False]
    assert sum(e.reason == SUMMARIZED for e in ledger.entries) == sum(len(f) for f in folded) - 1  # the first query
    assert ledger.entries[0].reason == KEPT and ledger.entries[0].role == "user"


def opening_conversation(turns: int, answer: str = "") -> Conversation:
    opening = Turn(
        "0",
        None,
        (Message("assistant", "Welcome! Ask me anything.", ANSWER, "0:answer"),),
        query_index=None,
        answer_index=0,
    )
    return Conversation(
        "c",
        [opening]
        + [
            Turn(
                str(k),
                str(k - 1),
                (
                    Message("user", f"question {k}: " + "words " * 30, QUERY, f"{k}:query"),
                    Message("assistant", f"answer {k} " + answer, ANSWER, f"{k}:answer"),
                ),
                query_index=0,
                answer_index=1,
            )
            for k in range(1, turns + 1)
        ],
    )


@pytest.mark.parametrize("profile", ["exact", "shipped"])
def test_an_opening_message_before_the_first_query_is_history_like_any_other(profile):
    conversation = opening_conversation(3)
    ledger = Replay(conversation, compaction(context_size=100_000).with_(compaction_profile=profile)).ledger(3)
    assert [(e.position, e.index, e.reason) for e in ledger.entries][:2] == [(0, 0, KEPT), (1, 0, KEPT)]


def test_after_an_opening_message_the_first_query_is_the_message_kept_apart():
    conversation = opening_conversation(12, answer="more " * 40)
    fixed, full = full_history(conversation, 12)
    config = compaction(context_size=int((fixed + full.history_tokens // 2) / 0.8), compaction_keep_messages=6)
    ledger = Replay(conversation, config).ledger(12)
    assert [(e.position, e.reason) for e in ledger.entries[:2]] == [(0, SUMMARIZED), (1, KEPT)]
    assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept) + sum(
        s.tokens for s in ledger.synthetic
    )


def test_when_the_cut_falls_on_the_first_query_it_is_kept_once():
    conversation = opening_conversation(3, answer="more " * 200)
    fixed, full = full_history(conversation, 3)
    config = compaction(
        context_size=int((fixed + full.history_tokens // 2) / 0.8), compaction_keep_messages=4
    )  # the opening, then query 1 first among the newest 4
    replay = Replay(conversation, config)
    ledger = replay.ledger(3)
    assert [e.reason for e in ledger.entries] == [SUMMARIZED, KEPT, KEPT, KEPT, KEPT]
    assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept) + sum(
        s.tokens for s in ledger.synthetic
    )
    overview = {s.turn: s for s in replay.summaries()}[3]
    assert (overview.kept, overview.history_tokens) == (4, ledger.history_tokens), "the overview counts it once too"


# -- the shipped profile's receipt ------------------------------------------------------------------------


def test_the_shipped_receipt_follows_the_trigger_and_has_no_max_tokens_clause_without_max_tokens():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    replay = Replay(conversation, MemoryConfig(strategy="compaction", context_size=3000, compaction_trigger=0.5))
    ledger = replay.ledger(2)
    assert ledger.budget_note.startswith(
        "Dify 1.17 as shipped: compaction target 1,500 for the whole request (50% of 3,000); estimated "
    )
    assert ledger.context_size == 3000 and ledger.budget == 1500 - (ledger.prompt_tokens - ledger.history_tokens)
    half = Replay(conversation, MemoryConfig(strategy="compaction", context_size=2000, compaction_trigger=0.5))
    checks = [c for n in range(1, 15) for c in half.ledger(n).compactions]
    assert checks and {c["target"] for c in checks} == {1000}, "every check inside the tool loop too"


def test_the_shipped_receipt_names_both_tiers_when_both_ran_before_the_first_request():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    replay = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"]))
    both = [
        replay.ledger(n)
        for n in range(1, len(fixture["turns"]) + 1)
        if replay.ledger(n).compactions
        and replay.ledger(n).compactions[0]["request"] == 1
        and replay.ledger(n).compactions[0]["tiers"] == ["clear_tool_results", "summarize"]
    ]
    assert both
    assert "compacted by clear_tool_results then summarize to about " in both[0].budget_note


def test_a_shipped_what_if_keeps_as_many_tool_results_as_it_says():
    fixture = FIXTURES["clearing_is_enough"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    config = MemoryConfig(strategy="compaction", context_size=fixture["context_window"])
    for keep in (3, 1):  # turn 6 clears at its first request
        ledger = Replay(conversation, config.with_(compaction_keep_tool_results=keep)).ledger(6)
        assert [e.reason for e in ledger.entries if e.role == "tool"] == [CLEARED] * (10 - keep) + [KEPT] * keep


def test_the_shipped_overview_names_the_oldest_turn_still_sent_as_it_was():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    replay = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"]))
    seen = set()
    for s in replay.summaries():
        ledger = replay.ledger(s.turn)
        kept = [e.turn for e in ledger.entries if e.reason == KEPT]
        assert s.oldest_kept_turn == (min(kept) if kept else None), s.turn
        seen.add(s.oldest_kept_turn)
    assert seen == {None, 1}, "turn 1 has no history; after it the first query is always sent"


def test_a_branch_walked_after_another_costs_its_own_placeholders():
    """The overview walks a branch, steps back and walks the other: a placeholder's cost (its tool's
    name is sent with it) must then be the other branch's, as a ledger of that branch alone has it."""
    from dataclasses import replace

    from tests.memory.test_compaction import branched

    conv, config = summarising_case(turns=10, tools=2)
    conv = branched(conv, 4)
    names = ["lookup", "get_the_weather_forecast_for_a_city", "f", "search_all_the_flight_bookings_by_reference"]
    conv = replace(
        conv,
        turns=[
            replace(
                t,
                messages=tuple(
                    replace(m, name=names[(p + k) % 4]) if m.role == "tool" else m for k, m in enumerate(t.messages)
                ),
            )
            for p, t in enumerate(conv.turns)
        ],
    )
    config = config.with_(compaction_keep_tool_results=1)
    overview = {s.turn: s for s in Replay(conv, config).summaries()}
    replay = Replay(conv, config)
    cleared = 0
    for position in conv.answered_turns():
        ledger = Replay(conv, config).ledger_at(position)
        assert overview[replay.numbers[position]].history_tokens == ledger.history_tokens, replay.numbers[position]
        cleared += any(e.reason == CLEARED for e in ledger.entries)
    assert cleared > 3


def test_when_clearing_brings_the_history_exactly_to_the_budget_nothing_is_summarised():
    conv, config = summarising_case()
    unfoldable = Replay(conv, config.with_(compaction_keep_messages=1000))  # only clearing can run
    fixed = unfoldable.fixed_prompt_tokens(unfoldable.position_of(11))
    cleared = unfoldable.ledger(11)
    assert any(e.reason == CLEARED for e in cleared.entries) and cleared.history_tokens > cleared.budget
    context = 10_000_000
    for room, folds in ((cleared.history_tokens, False), (cleared.history_tokens - 1, True)):
        at = Replay(conv, config.with_(context_size=context, max_tokens=context - fixed - room)).ledger(11)
        assert at.budget == room
        assert any(e.reason == SUMMARIZED for e in at.entries) == folds, room
        assert any(e.reason == CLEARED for e in at.entries)


def test_a_cleared_result_at_the_very_start_is_not_the_oldest_turn_kept():
    from tests.builders import openai
    from tests.memory.test_compaction import BIG

    msgs = [{"role": "tool", "tool_call_id": "c0", "content": "result 0: " + BIG}]  # an opening with a stray result
    for i in range(1, 5):
        msgs += [
            {"role": "user", "content": f"please look up item {i}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}: {BIG}"},
            {"role": "assistant", "content": f"Item {i} is in stock."},
        ]
    msgs.append({"role": "user", "content": "anything else?"})
    conv = openai(msgs)
    last = len(conv.turns) - 1  # the opening is turn 0
    fixed, full = full_history(conv, last)
    config = compaction(
        context_size=int((fixed + full.history_tokens * 2 // 3) / 0.8),
        compaction_keep_tool_results=1,
        compaction_keep_messages=1000,
    )
    replay = Replay(conv, config)
    ledger = replay.ledger(last)
    assert ledger.entries[0].role == "tool" and ledger.entries[0].reason == CLEARED
    assert not any(e.reason == SUMMARIZED for e in ledger.entries)
    overview = {s.turn: s for s in replay.summaries()}
    assert overview[last].oldest_kept_turn == ledger.entries[1].turn != ledger.entries[0].turn


def test_a_cut_on_a_tool_result_moves_back_just_to_its_call():
    conv, config = summarising_case(turns=10, tools=1)
    moved = 0
    for keep in range(4, 12):
        entries = Replay(conv, config.with_(compaction_keep_messages=keep)).ledger(11).entries
        plain = len(entries) - keep
        expected = plain - 1 if entries[plain].role == "tool" else plain
        assert next(i for i in range(1, len(entries)) if entries[i].reason != SUMMARIZED) == expected, keep
        assert entries[expected].role != "tool"
        moved += expected != plain
    assert moved == 2
