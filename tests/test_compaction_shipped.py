"""compaction, "Dify 1.17 as shipped": MemLens's per-request compaction against pydantic-ai-harness
itself, run with a function model on the same agent runs (tests/compaction_fixtures.py), request
by request — which messages are sent, which results are cleared, how many summaries exist, what
the summariser is given — and the stored history after every turn."""

from __future__ import annotations

import pytest

from core.conversation import ANSWER, QUERY, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.conversation import TOOL_CALL as TOOL_CALL_KIND
from core.ledger import CLEARED, KEPT, PLACEHOLDER, SUMMARIZED, SUMMARY
from core.memory import ConfigError, MemoryConfig, Replay
from core.strategies.shipped_compaction import to_groups

from core.strategies.shipped_compaction import (BY_CHARS, BY_USAGE, REQUEST, RESPONSE, SUMMARY_HEADER, SYSTEM,
                                                TEXT, TOOL_CALL, TOOL_PLACEHOLDER, TOOL_RETURN, USER, Compactor,
                                                Group, Part, estimate, reload, target_tokens, transcript_lines)
from tests.compaction_fixtures import FIXTURES, provider_input_tokens, reply_tokens, summary_text
from tests.harness_reference import VERSIONS, run_fixture


def normalise(groups: list[Group]) -> list[dict]:
    out = []
    for g in groups:
        parts = []
        for p in g.parts:
            if p.kind == TOOL_RETURN:
                parts.append(["tool_return", p.call_id, p.content])
            elif p.kind == TOOL_CALL:
                parts.append(["tool_call", p.call_id, p.name, p.content])
            else:
                parts.append([p.kind, p.content])
        out.append({"kind": g.kind, "parts": parts})
    return out


def simulate(fixture: dict) -> dict:
    """The fixture run through MemLens's compactor, recorded like tests.harness_reference.run_fixture."""
    steps, summaries, stored_turns, events, replies = [], [], [], [], []
    where = {"turn": 0, "step": 0}

    def summarize(messages, previous):
        summaries.append({"turn": where["turn"], "step": where["step"], "lines": transcript_lines(messages),
                          "previous": previous})
        return summary_text(len(summaries), fixture.get("summary_chars", 120))

    compactor = Compactor(fixture["context_window"], fixture.get("max_tokens", 0), summarize,
                          instructions=fixture.get("instructions", ""))
    stored: list[Group] = []
    for number, turn in enumerate(fixture["turns"], 1):
        where.update(turn=number, step=0)
        history = reload(stored) + [Group(REQUEST, (Part(USER, turn["prompt"]),))]
        for reply in turn["steps"]:
            history, event = compactor.before_request(history)
            if event is not None and event.fired:
                events.append((number, where["step"] + 1, event))
            sent = normalise(reload(history))
            steps.append({"turn": number, "step": where["step"], "messages": sent})
            where["step"] += 1
            usage = reply.get("usage")
            if usage == "auto":
                usage = [provider_input_tokens(sent, fixture.get("instructions", "")), reply_tokens(reply)]
            parts = (Part(TEXT, reply["text"]),) if reply.get("text") else ()
            calls = reply.get("calls", [])
            parts += tuple(Part(TOOL_CALL, c["args"], c["id"], c["name"]) for c in calls)
            history = history + [Group(RESPONSE, parts, tuple(usage) if usage else None)]
            replies.append(tuple(usage) if usage else None)
            if calls:
                history.append(Group(REQUEST, tuple(Part(TOOL_RETURN, c["result"], c["id"], c["name"]) for c in calls)))
        stored = history
        stored_turns.append(normalise(stored))
    return {"steps": steps, "summaries": summaries, "stored": stored_turns, "events": events, "usage": replies}


def recorded(fixture: dict, usage: list) -> Conversation:
    """The fixture's run as MemLens records it: one turn per run, its tool calls and results as
    intermediate messages, each reply with the usage the provider reported."""
    turns, replies = [], iter(usage)
    for number, turn in enumerate(fixture["turns"], 1):
        msgs = [Message("user", turn["prompt"], QUERY, f"{number}:q")]
        for k, reply in enumerate(turn["steps"]):
            calls = tuple(ToolCall(c["id"], c["name"], c["args"]) for c in reply.get("calls", []))
            kind = TOOL_CALL_KIND if calls else ANSWER
            msgs.append(Message("assistant", reply.get("text", ""), kind, f"{number}:r{k}", tool_calls=calls,
                                usage=next(replies)))
            msgs += [Message("tool", c["result"], TOOL_RESULT, f"{number}:{c['id']}", name=c["name"],
                             tool_call_id=c["id"]) for c in reply.get("calls", [])]
        turns.append(Turn(id=str(number), parent_id=str(number - 1) if number > 1 else None, messages=tuple(msgs),
                          query_index=0, answer_index=len(msgs) - 1))
    return Conversation(id="fixture", turns=turns, system_prompt=fixture.get("instructions", ""))


def summaries_in(messages: list[dict]) -> int:
    return sum(1 for m in messages for p in m["parts"] if p[0] == "system" and p[1].startswith(SUMMARY_HEADER))


def cleared_in(messages: list[dict]) -> list[str]:
    return [p[1] for m in messages for p in m["parts"] if p[0] == "tool_return" and p[2] == TOOL_PLACEHOLDER]


_REFERENCE: dict[str, dict] = {}


def reference(name: str) -> dict:
    if name not in _REFERENCE:
        _REFERENCE[name] = run_fixture(FIXTURES[name]())
    return _REFERENCE[name]


def test_the_reference_is_the_harness_version_dify_pins():
    assert VERSIONS["pydantic-ai-harness"].startswith("0.20.")
    assert VERSIONS["pydantic-ai-slim"] == "2.28.0"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_memlens_sends_exactly_what_the_harness_sends_at_every_request(name):
    ours, theirs = simulate(FIXTURES[name]()), reference(name)
    assert len(ours["steps"]) == len(theirs["steps"])
    for mine, real in zip(ours["steps"], theirs["steps"]):
        where = f"turn {real['turn']} request {real['step'] + 1}"
        assert cleared_in(mine["messages"]) == cleared_in(real["messages"]), where
        assert summaries_in(mine["messages"]) == summaries_in(real["messages"]), where
        assert mine["messages"] == real["messages"], where


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_memlens_stores_what_the_harness_stores_and_summarises_the_same_messages(name):
    ours, theirs = simulate(FIXTURES[name]()), reference(name)
    assert ours["stored"] == theirs["stored"]
    assert [(s["turn"], s["step"], s["previous"]) for s in ours["summaries"]] == \
        [(s["turn"], s["step"], s["previous"]) for s in theirs["summaries"]]
    assert [s["lines"] for s in ours["summaries"]] == [s["lines"] for s in theirs["summaries"]]


class FixtureSummarizer:
    """Answers like the harness side's summariser: the k-th distinct request gets the k-th text (a
    replay re-plans earlier turns for each ledger, asking the same again — deterministically)."""

    name = "fixture"

    def __init__(self, chars):
        self.chars, self.calls = chars, {}

    def summarize(self, messages, previous_summary=""):
        key = (tuple(transcript_lines(messages)), previous_summary)
        if key not in self.calls:
            self.calls[key] = summary_text(len(self.calls) + 1, self.chars)
        return self.calls[key]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_replayed_ledger_sends_what_the_harness_sends_at_each_turns_first_request(name):
    """The ledger path (a recorded conversation replayed turn by turn) against the harness."""
    fixture, theirs = FIXTURES[name](), reference(name)
    ours = simulate(fixture)
    conversation = recorded(fixture, ours["usage"])
    summarizer = FixtureSummarizer(fixture.get("summary_chars", 120))
    replay = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"],
                                               max_tokens=fixture.get("max_tokens", 0)), summarizer=summarizer)
    for number in range(1, len(fixture["turns"]) + 1):
        ledger = replay.ledger(number)
        query = conversation.turns[number - 1].messages[0]
        sent = normalise(reload(to_groups(replay.history_messages(ledger) + [query])))
        real = next(s for s in theirs["steps"] if s["turn"] == number and s["step"] == 0)["messages"]
        assert sent == real, f"turn {number}"
        fired = [(c["turn"], c["request"]) for c in ledger.compactions]
        assert fired == [(t, r) for t, r, _ in ours["events"] if t == number], f"turn {number}"
        assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept) + \
            sum(s.tokens for s in ledger.synthetic)
        for e in ledger.entries:
            assert e.reason in (KEPT, CLEARED, SUMMARIZED)
    assert sorted(summarizer.calls.values()) == sorted(summary_text(k, summarizer.chars)
                                                       for k in range(1, len(theirs["summaries"]) + 1))


def test_the_ledger_receipt_says_which_estimate_decided_and_records_compaction_inside_the_tool_loop():
    fixture = FIXTURES["long_tool_run"]()
    fixture["turns"].append({"prompt": "Thanks, anything else?", "steps": [{"text": "No.", "usage": "auto"}]})
    ours = simulate(fixture)
    conversation = recorded(fixture, ours["usage"])
    replay = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"]))
    first = replay.ledger(1)
    assert first.compactions and all(c["in_tool_loop"] for c in first.compactions)
    assert first.compactions[0]["tiers"] == ["clear_tool_results"] and first.compactions[0]["estimated_by"] == BY_USAGE
    assert any("summarize" in c["tiers"] for c in first.compactions)
    second = replay.ledger(2)
    assert "usage-anchored" in second.budget_note
    assert any(s.origin == SUMMARY for s in second.synthetic) and any(s.origin == PLACEHOLDER for s in second.synthetic)
    without = recorded(fixture, [None] * len(ours["usage"]))
    assert "chars/4" in Replay(without, MemoryConfig(strategy="compaction",
                                                     context_size=fixture["context_window"])).ledger(2).budget_note


def test_the_shipped_summary_has_dify_sections_offline_and_the_exact_profile_stays_selectable():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    ledger = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"])).ledger(14)
    summary = next(s for s in ledger.synthetic if s.origin == SUMMARY)
    assert summary.content.startswith("Summary of previous conversation:\n\n## Intent\n- Hi, I'm Dana")
    assert "Stated: Your name is Dana." in summary.content and "## Artifacts" in summary.content
    exact = MemoryConfig(strategy="compaction", compaction_profile="exact", context_size=fixture["context_window"])
    assert exact.label().endswith("exact estimate (MemLens's own)")
    assert MemoryConfig(strategy="compaction").label().endswith("Dify 1.17 as shipped")
    with pytest.raises(ConfigError, match="unknown compaction profile 'docs'"):
        MemoryConfig(strategy="compaction", compaction_profile="docs").validate()


def test_the_fixtures_cover_clearing_summarising_in_the_tool_loop_pile_up_and_no_compaction():
    """The differential fixtures are only worth their name if the harness does each thing on them."""
    long_run = reference("long_tool_run")
    assert any(s["turn"] == 1 and s["step"] > 0 for s in long_run["summaries"]), "a summary inside the tool loop"
    assert max(summaries_in(s["messages"]) for s in reference("reloads")["steps"]) >= 3, "summaries pile up"
    assert not reference("under_the_target")["summaries"]
    assert not any(cleared_in(s["messages"]) for s in reference("under_the_target")["steps"])
    clearing = reference("clearing_is_enough")
    assert not clearing["summaries"] and any(cleared_in(s["messages"]) for s in clearing["steps"])
    wide = reference("parallel_tools_wide")
    assert any(len([p for p in m["parts"] if p[0] == "tool_call"]) == 5 for s in wide["steps"] for m in s["messages"])


# -- the rules, one by one ---------------------------------------------------------------------------

def test_the_target_is_four_fifths_of_the_window_or_window_minus_max_tokens_and_zero_fails():
    assert target_tokens(128_000, 0) == 102_400
    assert target_tokens(10_000, 3_000) == 7_000
    assert target_tokens(16_385, 0) == 13_108
    with pytest.raises(ValueError, match="compaction target is 0 tokens"):
        Compactor(1_000, 1_000, lambda m, p: "")


def test_no_context_window_means_no_check_at_all():
    groups = [Group(REQUEST, (Part(USER, "x" * 100_000),))]
    out, event = Compactor(None, 0, lambda m, p: "").before_request(groups)
    assert out is groups and event is None


def test_the_estimate_anchors_on_the_newest_reported_usage_and_counts_chars_over_four_after_it():
    groups = [Group(REQUEST, (Part(USER, "u" * 400),)), Group(RESPONSE, (Part(TEXT, "a" * 40),), (1000, 50)),
              Group(REQUEST, (Part(USER, "v" * 80),))]
    assert estimate(groups, "instructions") == (1000 + 50 + 20, BY_USAGE)
    unanchored = [groups[0], Group(RESPONSE, (Part(TEXT, "a" * 40),), None), groups[2]]
    assert estimate(unanchored, "i" * 12) == ((400 + 40 + 80 + 12) // 4, BY_CHARS)
    zero_input = [groups[0], Group(RESPONSE, (Part(TEXT, "a" * 40),), (0, 50)), groups[2]]
    assert estimate(zero_input)[1] == BY_CHARS, "usage without input tokens does not anchor"


def test_the_check_records_the_estimate_and_the_tiers_that_fired():
    fixture = FIXTURES["long_tool_run"]()
    events = []
    compactor = Compactor(fixture["context_window"], 0, lambda m, p: "short", instructions=fixture["instructions"])
    history = [Group(REQUEST, (Part(USER, "go"),))]
    for k in range(30):
        history, event = compactor.before_request(history)
        events.append(event)
        history = history + [Group(RESPONSE, (Part(TEXT, "thinking " * 30), Part(TOOL_CALL, "{}", f"c{k}", "lookup")), (sum(
            len(t) for g in history for p in g.parts for t in p.texts()) // 3, 5)),
            Group(REQUEST, (Part(TOOL_RETURN, "r" * 400, f"c{k}", "lookup"),))]
    fired = [e for e in events if e.fired]
    assert fired and fired[0].tiers[0] == "clear_tool_results" and fired[0].estimated_by == BY_USAGE
    assert fired[0].estimate > fired[0].target and fired[0].final_estimate < fired[0].estimate
    assert any("summarize" in e.tiers for e in fired)
    assert all(not e.fired for e in events if e.estimate <= e.target)


def test_a_summary_is_a_system_part_under_the_dify_header_placed_first_with_the_first_user_message_kept():
    history = [Group(REQUEST, (Part(USER, "first question"),))]
    for k in range(15):
        history += [Group(RESPONSE, (Part(TEXT, f"answer {k} " * 30),)), Group(REQUEST, (Part(USER, f"q{k}"),))]
    out, event = Compactor(1000, 0, lambda m, p: "the summary").before_request(history)
    assert event.tiers == ["summarize"]
    assert out[0] == Group(REQUEST, (Part(SYSTEM, "Summary of previous conversation:\n\nthe summary"),))
    assert out[1] == history[0] and out[2:] == history[-20:]
