"""compaction, "Dify 1.17 as shipped": the single rules of the compactor, each against
pydantic-ai-harness's own function on many message lists (where the cut may fall, which tool
results are paired and cleared, the estimate), and the edge cases of one check that the agent
runs of tests/memory/test_compaction_shipped.py never reach (a cut on a call, a check exactly at
the target, an anchor smaller than what clearing frees, a history with no user message)."""

from __future__ import annotations

import asyncio
import random

import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage
from pydantic_ai_harness.compaction import ClearToolResults
from pydantic_ai_harness.compaction._shared import estimate_context_tokens, find_safe_cutoff, iter_tool_pairs

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.strategies.shipped_compaction import (
    BY_CHARS,
    BY_USAGE,
    REQUEST,
    RESPONSE,
    SUMMARY_HEADER,
    SYSTEM,
    TEXT,
    TOOL_CALL,
    TOOL_PLACEHOLDER,
    TOOL_RETURN,
    USER,
    Compactor,
    Group,
    Part,
    clear_tool_results,
    estimate,
    fold_cut,
    folded_messages,
    heuristic_tokens,
    target_tokens,
    to_groups,
    tool_pairs,
)
from core.model.conversation import ANSWER, INTERMEDIATE, QUERY, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.model.conversation import TOOL_CALL as TOOL_CALL_KIND
from core.model.ledger import KEPT
from tests.memory.harness_reference import normalise as harness_normalise
from tests.memory.test_compaction_shipped import normalise


def to_pydantic(groups: list[Group]) -> list:
    """Our messages as pydantic-ai's, part for part (a reply's usage as the provider reports it)."""
    out = []
    for g in groups:
        if g.kind == REQUEST:
            parts = []
            for p in g.parts:
                if p.kind == USER:
                    parts.append(UserPromptPart(p.content))
                elif p.kind == SYSTEM:
                    parts.append(SystemPromptPart(p.content))
                else:
                    parts.append(ToolReturnPart(p.name, p.content, tool_call_id=p.call_id))
            out.append(ModelRequest(parts=parts))
        else:
            parts = [
                TextPart(p.content) if p.kind == TEXT else ToolCallPart(p.name, p.content, tool_call_id=p.call_id)
                for p in g.parts
            ]
            usage = RequestUsage(input_tokens=g.usage[0], output_tokens=g.usage[1]) if g.usage else RequestUsage()
            out.append(ModelResponse(parts=parts, usage=usage))
    return out


def random_history(rng: random.Random) -> list[Group]:
    """A message list of the shapes an agent history takes and a few it rarely does: parallel calls,
    results that come back late or never, a call id used twice or not at all, a result nobody asked
    for, a reply first, usage reported or not."""
    ids = [f"c{k}" for k in range(rng.randint(2, 12))] + [""]
    pending: list[Part] = []
    groups: list[Group] = []
    kind = RESPONSE if rng.random() < 0.2 else REQUEST
    for _ in range(rng.randint(1, 32)):
        if kind == REQUEST:
            parts = []
            while pending and rng.random() < 0.7:
                call = pending.pop(rng.randrange(len(pending)))
                parts.append(
                    Part(TOOL_RETURN, f"result of {call.call_id} " * rng.randint(1, 30), call.call_id, call.name)
                )
            if rng.random() < 0.1:
                parts.append(Part(TOOL_RETURN, "unasked", rng.choice(ids), "lookup"))
            if not parts or rng.random() < 0.2:
                parts.append(Part(USER if rng.random() < 0.8 else SYSTEM, "words " * rng.randint(1, 40)))
            groups.append(Group(REQUEST, tuple(rng.sample(parts, len(parts)))))
            kind = RESPONSE
        else:
            parts = [Part(TEXT, "said " * rng.randint(0, 30))] if rng.random() < 0.6 else []
            for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
                parts.append(
                    Part(TOOL_CALL, '{"k": %d}' % rng.randint(0, 99), rng.choice(ids), rng.choice(("lookup", "price")))
                )
            pending += [p for p in parts if p.kind == TOOL_CALL]
            usage = None if rng.random() < 0.5 else (rng.choice((0, rng.randint(1, 5000))), rng.randint(0, 300))
            groups.append(Group(RESPONSE, tuple(parts) or (Part(TEXT, ""),), usage))
            kind = REQUEST
    return groups


HISTORIES = [random_history(random.Random(seed)) for seed in range(400)]


def test_the_cut_before_the_kept_messages_falls_where_the_harness_puts_it_on_any_history():
    splits = 0
    for groups in HISTORIES:
        messages = to_pydantic(groups)
        for keep in range(len(groups) + 2):
            assert fold_cut(groups, keep) == find_safe_cutoff(messages, keep), (keep, normalise(groups))
            splits += 0 < keep < len(groups) and fold_cut(groups, keep) != len(groups) - keep
    assert splits > 100, "the histories put many cuts on a call and its result"


def test_the_tool_results_paired_and_cleared_are_the_harness_ones_on_any_history():
    cleared_some = 0
    for groups in HISTORIES:
        messages = to_pydantic(groups)
        assert tool_pairs(groups) == [p.tool_call_id for p in iter_tool_pairs(messages)]
        for keep in (0, 1, 3):
            out, cleared = clear_tool_results(groups, keep)
            theirs = asyncio.run(ClearToolResults(keep_pairs=keep, max_messages=1).compact(messages, None))
            assert harness_normalise(to_pydantic(out)) == harness_normalise(theirs)
            assert list(cleared) == [p.call_id for g, h in zip(groups, out) for p, q in zip(g.parts, h.parts) if p != q]
            cleared_some += bool(cleared)
    assert cleared_some > 100


def test_the_estimate_is_the_harness_estimate_on_any_history():
    anchored = 0
    for groups in HISTORIES:
        messages = to_pydantic(groups)
        tokens, by = estimate(groups)
        assert tokens == estimate_context_tokens(messages)
        assert isinstance(tokens, int) and isinstance(heuristic_tokens(groups), int)
        anchored += by == BY_USAGE
        # Even when the newest message is a reply whose usage anchors it alone.
        if groups[-1].kind == RESPONSE and groups[-1].usage and groups[-1].usage[0]:
            assert tokens == sum(groups[-1].usage)
    assert 100 < anchored < len(HISTORIES)


def test_a_call_counts_its_tool_name_and_arguments_and_chars_over_four_round_down():
    call = [Group(RESPONSE, (Part(TOOL_CALL, '{"k": 1}', "c1", "lookup_stock"),))]
    assert heuristic_tokens(call) == (len("lookup_stock") + len('{"k": 1}')) // 4 == 5
    assert estimate([Group(REQUEST, (Part(USER, "u" * 4003),))]) == (1000, BY_CHARS)


def test_the_target_rounds_down_and_a_full_window_trigger_still_leaves_room_for_max_tokens():
    assert target_tokens(16_386, 0) == 13_108  # 13,108.8
    assert target_tokens(10, 1, trigger=1.0) == 9
    assert target_tokens(10, 0, trigger=1.0) == 10
    assert Compactor(2, 0, lambda m, p: "").target == 1, "a target of 1 token is still a target"
    assert Compactor(1000, 0, lambda m, p: "", trigger=0.5).target == 500


# -- one check: the edges ------------------------------------------------------------------------------


def tool_run(calls: int, result: str = "r" * 400) -> list[Group]:
    history = [Group(REQUEST, (Part(USER, "first question"),))]
    for k in range(calls):
        history += [
            Group(RESPONSE, (Part(TOOL_CALL, "{}", f"c{k}", "f"),)),
            Group(REQUEST, (Part(TOOL_RETURN, result, f"c{k}", "f"),)),
        ]
    return history


def test_a_check_under_the_target_records_the_history_as_it_stays():
    history = tool_run(4) + [Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + "old"),))]
    out, event = Compactor(100_000, 0, lambda m, p: "").before_request(history)
    assert out is history
    assert event.to_dict() == {
        "estimate": heuristic_tokens(history),
        "estimated_by": BY_CHARS,
        "target": 80_000,
        "tiers": [],
        "cleared": [],
        "folded": 0,
        "final_estimate": heuristic_tokens(history),
        "still_over": False,
        "messages_before": len(history),
        "messages_after": len(history),
        "summaries": 1,
        "first_user_resent": False,
        "summary": "",
    }


def test_a_check_exactly_at_the_target_changes_nothing_one_token_over_clears():
    history = tool_run(5)
    tokens = heuristic_tokens(history)
    at = Compactor(1000, 0, lambda m, p: "", trigger=tokens / 1000)
    assert at.target == tokens
    out, event = at.before_request(history)
    assert out is history and not event.fired
    out, event = Compactor(1000, 0, lambda m, p: "", trigger=(tokens - 1) / 1000).before_request(history)
    assert event.tiers == ["clear_tool_results"] and event.cleared == ("c0", "c1")


def test_the_kept_tool_results_follow_the_setting():
    out, event = Compactor(100, 0, lambda m, p: "", keep_pairs=1, keep_messages=100).before_request(tool_run(5))
    assert event.cleared == ("c0", "c1", "c2", "c3")
    assert [p.content for g in out for p in g.parts if p.kind == TOOL_RETURN] == [TOOL_PLACEHOLDER] * 4 + ["r" * 400]


def test_what_clearing_frees_can_bring_the_estimate_to_zero_but_not_below():
    """The anchor (a short reply's usage) is smaller than the old results clearing frees: the
    harness's ``max(baseline - reclaimed, 0)``."""
    history = tool_run(4, result="r" * 4000) + [
        Group(RESPONSE, (Part(TEXT, "ok"),), (10, 1)),
        Group(REQUEST, (Part(USER, "q" * 400),)),
    ]
    out, event = Compactor(100, 0, lambda m, p: pytest.fail("no summary needed")).before_request(history)
    assert (event.estimate, event.estimated_by) == (111, BY_USAGE)
    assert event.tiers == ["clear_tool_results"] and event.cleared == ("c0",)
    assert event.final_estimate == 0 and not event.still_over


def test_an_odd_number_of_kept_messages_moves_the_cut_older_so_a_call_keeps_its_result():
    history = tool_run(12)  # request, then (call, result) pairs: keeping 5 would start on a result
    out, event = Compactor(1000, 0, lambda m, p: "s", keep_pairs=12, keep_messages=5).before_request(history)
    assert event.folded == len(history) - 6
    assert out == [Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + "s"),)), history[0], *history[-6:]]
    assert out[2].kind == RESPONSE and out[3].parts[0].call_id == out[2].parts[0].call_id


def test_a_history_without_a_user_message_is_folded_with_nothing_kept_apart():
    history = [
        Group(REQUEST, (Part(SYSTEM, f"note {k} " * 40),)) if k % 2 == 0 else Group(RESPONSE, (Part(TEXT, "ok"),))
        for k in range(30)
    ]
    out, event = Compactor(1000, 0, lambda m, p: "s").before_request(history)
    assert event.tiers == ["summarize"] and not event.first_user_resent
    assert out == [Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + "s"),)), *history[-20:]]


def test_a_first_user_message_the_cut_keeps_is_not_kept_twice():
    history = [
        Group(REQUEST, (Part(SYSTEM, "notes " * 600),)),
        Group(RESPONSE, (Part(TEXT, "ok"),)),
        Group(REQUEST, (Part(USER, "first question"),)),
    ]
    for k in range(9):
        history += [Group(RESPONSE, (Part(TEXT, f"answer {k} " * 20),)), Group(REQUEST, (Part(USER, f"q{k}"),))]
    out, event = Compactor(1000, 0, lambda m, p: "s", keep_messages=len(history) - 2).before_request(history)
    assert event.folded == 2 and not event.first_user_resent
    assert out == [Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + "s"),)), *history[2:]]


# -- MemLens messages in and out -------------------------------------------------------------------------


def test_memlens_messages_become_parts_that_point_back_at_them():
    messages = [
        Message("system", "be brief", INTERMEDIATE, "s"),
        Message("tool", "done", TOOL_RESULT, 2),
        Message("user", "hi", QUERY, 3),
        Message("assistant", "", TOOL_CALL_KIND, 4, tool_calls=(ToolCall("c9", "f", "{}"),), usage=(5, 1)),
    ]
    assert to_groups(messages, {4: (5, 1)}) == [
        Group(
            REQUEST,
            (Part(SYSTEM, "be brief", ref="s"), Part(TOOL_RETURN, "done", "", "", ref=2), Part(USER, "hi", ref=3)),
        ),
        Group(RESPONSE, (Part(TOOL_CALL, "{}", "c9", "f", ref=4),), (5, 1)),
    ]


def test_the_summariser_is_given_each_folded_part_as_a_memlens_message_pointing_at_its_source():
    groups = [
        Group(REQUEST, (Part(SYSTEM, "be brief", ref=(0, 0)), Part(USER, "first", ref=(0, 1)))),
        Group(
            RESPONSE, (Part(TEXT, "let me look", ref=(0, 2)), Part(TOOL_CALL, '{"k": 1}', "c1", "lookup", ref=(0, 2)))
        ),
        Group(REQUEST, (Part(TOOL_RETURN, "x" * 501, "c1", "lookup", ref=(0, 3)), Part(USER, "more"))),
        Group(RESPONSE, (Part(TEXT, "done"), Part(TOOL_CALL, "{}", "c2", "f"))),
        Group(REQUEST, (Part(TOOL_RETURN, "ok", "c2", "f"), Part(SYSTEM, "note"))),
    ]
    assert folded_messages(groups, skip_summaries=True) == [
        Message("system", "be brief", INTERMEDIATE, (0, 0)),
        Message("user", "first", QUERY, (0, 1)),
        Message("assistant", "let me look", ANSWER, (0, 2)),
        Message("assistant", "", TOOL_CALL_KIND, (0, 2), tool_calls=(ToolCall("c1", "lookup", '{"k": 1}'),)),
        Message("tool", "x" * 500 + "...", TOOL_RESULT, (0, 3), name="lookup", tool_call_id="c1"),
        Message("user", "more", QUERY, ""),
        Message("assistant", "done", ANSWER, ""),
        Message("assistant", "", TOOL_CALL_KIND, "", tool_calls=(ToolCall("c2", "f", "{}"),)),
        Message("tool", "ok", TOOL_RESULT, "", name="f", tool_call_id="c2"),
        Message("system", "note", INTERMEDIATE, ""),
    ]


def test_an_opening_message_before_the_first_query_is_stored_history_and_kept():
    opening = Turn(
        "0",
        None,
        (Message("assistant", "Welcome! Ask me anything.", ANSWER, "0:answer"),),
        query_index=None,
        answer_index=0,
    )
    turns = [opening] + [
        Turn(
            str(k),
            str(k - 1),
            (
                Message("user", f"question {k}", QUERY, f"{k}:query"),
                Message("assistant", f"answer {k}", ANSWER, f"{k}:answer"),
            ),
            query_index=0,
            answer_index=1,
        )
        for k in range(1, 4)
    ]
    ledger = Replay(Conversation("c", turns), MemoryConfig(strategy="compaction", context_size=100_000)).ledger(3)
    kept = [(e.position, e.index) for e in ledger.entries if e.reason == KEPT]
    assert (0, 0) in kept and not ledger.compactions


# -- a live agent run with parallel calls ------------------------------------------------------------------


def test_a_live_run_compacted_in_its_tool_loop_sends_every_result_of_a_parallel_step_with_its_call():
    import json

    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn
    from core.llm.client import ToolCallRequest, ToolReply
    from tests.memory.test_compaction_shipped import LongLookupModel, agent_flow_with_compaction

    class ParallelLookups(LongLookupModel):
        def complete_tools(self, model, messages, tools, max_tokens=None):
            self.seen.append(messages)
            sent = sum(len(str(m.get("content") or "")) for m in messages) // 3
            n = len(self.seen)
            if n > self.calls:
                return ToolReply("All items checked.", sent, 4, model)
            return ToolReply(
                f"Checking items {2 * n} and {2 * n + 1}. " * 20,
                sent,
                30,
                model,
                tool_calls=tuple(
                    ToolCallRequest(f"call_{n}_{k}", "lookup", json.dumps({"key": f"item {2 * n + k}"})) for k in (0, 1)
                ),
            )

    client = ParallelLookups(calls=18)
    record = run_turn(
        agent_flow_with_compaction(2000),
        ConversationState.new(agent_flow_with_compaction(2000)),
        "Please check every item.",
        llm=client,
    )
    loop = [c for c in record.node_run("agent").ledger.compactions if c["in_tool_loop"]]
    assert any("summarize" in c["tiers"] for c in loop)
    for c in loop:
        sent = client.seen[c["request"] - 1]
        calls = [t["id"] for m in sent for t in m.get("tool_calls") or ()]
        results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        assert calls == results and len(results) % 2 == 0, c["request"]
        if "summarize" in c["tiers"]:
            assert sent[1] == {"role": "system", "content": SUMMARY_HEADER + c["summary"]}
