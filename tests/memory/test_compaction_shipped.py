"""compaction, "Dify 1.17 as shipped": MemLens's per-request compaction against pydantic-ai-harness
itself, run with a function model on the same agent runs (tests/memory/compaction_fixtures.py), request
by request — which messages are sent, which results are cleared, how many summaries exist, what
the summariser is given — and the stored history after every turn."""

from __future__ import annotations

import json

import pytest

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
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
    estimate,
    heuristic_tokens,
    reload,
    target_tokens,
    to_groups,
)
from core.memory.summarize import ModelSectionSummarizer, transcript_lines
from core.model.conversation import ANSWER, QUERY, TOOL_RESULT, Conversation, Message, ToolCall, Turn
from core.model.conversation import TOOL_CALL as TOOL_CALL_KIND
from core.model.ledger import CLEARED, KEPT, PLACEHOLDER, SUMMARIZED, SUMMARY
from tests.memory.compaction_fixtures import FIXTURES, provider_input_tokens, reply_tokens, summary_text
from tests.memory.harness_reference import VERSIONS, run_fixture


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
    """The fixture run through MemLens's compactor, recorded like tests.memory.harness_reference.run_fixture."""
    steps, summaries, stored_turns, events, replies = [], [], [], [], []
    where = {"turn": 0, "step": 0}

    def summarize(messages, previous):
        summaries.append(
            {"turn": where["turn"], "step": where["step"], "lines": transcript_lines(messages), "previous": previous}
        )
        return summary_text(len(summaries), fixture.get("summary_chars", 120))

    compactor = Compactor(
        fixture["context_window"], fixture.get("max_tokens", 0), summarize, instructions=fixture.get("instructions", "")
    )
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
            msgs.append(
                Message(
                    "assistant", reply.get("text", ""), kind, f"{number}:r{k}", tool_calls=calls, usage=next(replies)
                )
            )
            msgs += [
                Message("tool", c["result"], TOOL_RESULT, f"{number}:{c['id']}", name=c["name"], tool_call_id=c["id"])
                for c in reply.get("calls", [])
            ]
        turns.append(
            Turn(
                id=str(number),
                parent_id=str(number - 1) if number > 1 else None,
                messages=tuple(msgs),
                query_index=0,
                answer_index=len(msgs) - 1,
            )
        )
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
    assert [(s["turn"], s["step"], s["previous"]) for s in ours["summaries"]] == [
        (s["turn"], s["step"], s["previous"]) for s in theirs["summaries"]
    ]
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
    replay = Replay(
        conversation,
        MemoryConfig(
            strategy="compaction", context_size=fixture["context_window"], max_tokens=fixture.get("max_tokens", 0)
        ),
        summarizer=summarizer,
    )
    for number in range(1, len(fixture["turns"]) + 1):
        ledger = replay.ledger(number)
        query = conversation.turns[number - 1].messages[0]
        sent = normalise(reload(to_groups(replay.history_messages(ledger) + [query])))
        real = next(s for s in theirs["steps"] if s["turn"] == number and s["step"] == 0)["messages"]
        assert sent == real, f"turn {number}"
        fired = [(c["turn"], c["request"]) for c in ledger.compactions]
        assert fired == [(t, r) for t, r, _ in ours["events"] if t == number], f"turn {number}"
        assert all(c["in_tool_loop"] == (c["request"] > 1) for c in ledger.compactions)
        # Each earlier message's reason says what the harness did with it.
        harness_cleared = set(cleared_in(real))
        harness_results = {p[1] for m in real for p in m["parts"] if p[0] == "tool_return"}
        tools = [e for e in ledger.entries if e.role == "tool"]
        call_of = {(e.position, e.index): conversation.turns[e.position].messages[e.index].tool_call_id for e in tools}
        assert {call_of[(e.position, e.index)] for e in tools if e.reason == CLEARED} == harness_cleared
        assert {call_of[(e.position, e.index)] for e in tools if e.reason != SUMMARIZED} == harness_results
        harness_prompts = [p[1] for m in real for p in m["parts"] if p[0] == "user"][:-1]
        assert [
            conversation.turns[e.position].messages[e.index].content
            for e in ledger.entries
            if e.role == "user" and e.reason == KEPT
        ] == harness_prompts
        summaries = [s for s in ledger.synthetic if s.origin == SUMMARY]
        assert [s.content for s in summaries] == [p[1] for m in real for p in m["parts"] if p[0] == "system"]
        assert all(
            s.role == "system"
            and s.replaces is None
            and s.tokens == replay.counter.chat("system", s.content)
            and s.ref == f"summary:{k}"
            for k, s in enumerate(summaries, 1)
        )
        assert all(s.covers and s.turn == s.covers[-1] and s.covers[-1] < number for s in summaries)
        # Once summaries pile up, the summariser is always handed the *oldest* one to update (it is the first
        # met reading the merged first message backwards), so every summary covers what the oldest covered.
        assert all(set(s.covers) >= set(summaries[-1].covers) and s.covers[0] == 1 for s in summaries)
        placeholders = [s for s in ledger.synthetic if s.origin == PLACEHOLDER]
        assert sorted(call_of[s.replaces] for s in placeholders) == sorted(harness_cleared)
        assert all(
            s.content == TOOL_PLACEHOLDER
            and s.role == "tool"
            and s.turn == s.covers[0] == s.replaces[0] + 1
            and s.ref == f"cleared:{conversation.turns[s.replaces[0]].messages[s.replaces[1]].ref}"
            for s in placeholders
        )
        assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept) + sum(
            s.tokens for s in ledger.synthetic
        )
        for e in ledger.entries:
            assert e.reason in (KEPT, CLEARED, SUMMARIZED)
    assert sorted(summarizer.calls.values()) == sorted(
        summary_text(k, summarizer.chars) for k in range(1, len(theirs["summaries"]) + 1)
    )
    assert set(summarizer.calls) == {(tuple(s["lines"]), s["previous"] or "") for s in theirs["summaries"]}
    first_turn = theirs["summaries"][0]["turn"] if theirs["summaries"] else None
    after_reload = [s for s in theirs["summaries"] if s["turn"] > first_turn]
    if after_reload:  # the first summary rides along in the first user message from then on
        assert {s["previous"] for s in after_reload} == {summary_text(1, summarizer.chars)}, (
            "the oldest summary is always the one updated"
        )


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
    assert (
        "chars/4"
        in Replay(without, MemoryConfig(strategy="compaction", context_size=fixture["context_window"]))
        .ledger(2)
        .budget_note
    )


def test_the_shipped_summary_has_dify_sections_offline_and_the_exact_profile_stays_selectable():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    ledger = Replay(conversation, MemoryConfig(strategy="compaction", context_size=fixture["context_window"])).ledger(
        14
    )
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
    groups = [
        Group(REQUEST, (Part(USER, "u" * 400),)),
        Group(RESPONSE, (Part(TEXT, "a" * 40),), (1000, 50)),
        Group(REQUEST, (Part(USER, "v" * 80),)),
    ]
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
        history = history + [
            Group(
                RESPONSE,
                (Part(TEXT, "thinking " * 30), Part(TOOL_CALL, "{}", f"c{k}", "lookup")),
                (sum(len(t) for g in history for p in g.parts for t in p.texts()) // 3, 5),
            ),
            Group(REQUEST, (Part(TOOL_RETURN, "r" * 400, f"c{k}", "lookup"),)),
        ]
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


# -- a live agent run: the check before every model request ------------------------------------------


class LongLookupModel:
    """A stand-in for a real model: asks for one lookup per request until it has made ``calls``, then
    answers; reports the tokens it was sent (3 characters a token) as its usage."""

    def __init__(self, calls):
        self.calls, self.seen, self.summary_prompts = calls, [], []

    def route(self, model):
        return model, ""

    def complete(self, model, messages, max_tokens=None):
        from core.llm.client import LLMReply

        self.summary_prompts.append(messages[-1]["content"])
        return LLMReply("plain", 1, 1, model)

    def complete_tools(self, model, messages, tools, max_tokens=None):
        from core.llm.client import ToolCallRequest, ToolReply

        self.seen.append(messages)
        sent = sum(len(str(m.get("content") or "")) for m in messages) // 3
        n = len(self.seen)
        if n > self.calls:
            return ToolReply("All items checked.", sent, 4, model)
        return ToolReply(
            f"Checking item {n} now. " * 6,
            sent,
            30,
            model,
            tool_calls=(ToolCallRequest(f"call_{n}", "lookup", json.dumps({"key": f"item {n}"})),),
        )


def agent_flow_with_compaction(context):
    from core.flow.graph import Flow, load_flow
    from tests.conftest import ROOT

    data = load_flow(ROOT / "sample_data" / "flows" / "agent-tools.yml").to_dict()
    for n in data["nodes"]:
        if n["id"] == "agent":
            n.update(
                model="openai/gpt-4o-mini",
                max_agent_steps=40,
                lookup_table={f"item {k}": f"shelf {k}: " + "in stock, aisle 4. " * 30 for k in range(1, 40)},
                memory={"strategy": "compaction", "context_size": context},
            )
    return Flow.from_dict(data)


def test_a_live_agent_run_compacts_inside_its_tool_loop_and_its_replay_agrees():
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn

    flow = agent_flow_with_compaction(2000)
    client = LongLookupModel(calls=30)
    state = ConversationState.new(flow)
    record = run_turn(flow, state, "Please check every item.", llm=client)
    agent = record.node_run("agent")
    loop = [c for c in agent.ledger.compactions if c["in_tool_loop"]]
    assert loop and loop[0]["tiers"][0] == "clear_tool_results" and loop[0]["estimated_by"] == BY_USAGE
    assert any("summarize" in c["tiers"] for c in loop)
    k = loop[0]["request"]
    assert [s["compaction"]["request"] for s in agent.steps if "compaction" in s][0] == k
    assert "compaction" not in next(s for s in agent.steps if s["step"] == k - 1)
    # What the model was sent at request k: the older results cleared, only the newest three kept.
    sent = client.seen[k - 1]
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert results[-3:] == [r for r in results[-3:] if r != TOOL_PLACEHOLDER] and TOOL_PLACEHOLDER in results
    summarised = client.seen[next(c["request"] for c in loop if "summarize" in c["tiers"]) - 1]
    assert summarised[1]["role"] == "system" and summarised[1]["content"].startswith(SUMMARY_HEADER)
    # The run's own model wrote the summary, asked for Dify's sections.
    assert summarised[1]["content"] == SUMMARY_HEADER + "plain"
    assert client.summary_prompts and all("## Intent" in p for p in client.summary_prompts)
    # The stored turn replayed afterwards makes the same checks at the same requests, without asking again.
    asked = len(client.summary_prompts)
    conversation = record_conversation(state, record)
    replay = Replay(
        conversation,
        MemoryConfig(strategy="compaction", model="openai/gpt-4o-mini", context_size=2000),
        system_prompt=flow.node("agent").data["system_prompt"],
        summarizer=ModelSectionSummarizer(client, "openai/gpt-4o-mini"),
    )
    replayed = replay.ledger(1).compactions
    assert [(c["request"], c["tiers"], c["cleared"]) for c in replayed] == [
        (c["request"], c["tiers"], c["cleared"]) for c in agent.ledger.compactions
    ]
    assert len(client.summary_prompts) == asked


def record_conversation(state, record):
    return state.apply(record).conversation


# -- findings -------------------------------------------------------------------------------------------


def test_findings_name_the_pile_up_and_the_re_summarised_first_message_where_the_harness_shows_them():
    from core.analysis.findings import FIRST_MESSAGE_RESUMMARISED, SUMMARY_PILE_UP, compaction_findings, turn_namer

    fixture, theirs = FIXTURES["reloads"](), reference("reloads")
    conversation = recorded(fixture, simulate(fixture)["usage"])
    replay = Replay(
        conversation,
        MemoryConfig(strategy="compaction", context_size=fixture["context_window"]),
        summarizer=FixtureSummarizer(fixture["summary_chars"]),
    )
    found = {
        f.kind: f
        for f in compaction_findings("Agent", [replay.ledger(n) for n in range(1, 15)], name=turn_namer(conversation))
    }
    piled_turn = next(s["turn"] for s in theirs["steps"] if s["step"] == 0 and summaries_in(s["messages"]) >= 2)
    assert found[SUMMARY_PILE_UP].turn == piled_turn
    assert "A summary of a summary is still in “Agent”'s history" in found[SUMMARY_PILE_UP].text
    first_user = "User: " + fixture["turns"][0]["prompt"]
    resent = [s for s in theirs["summaries"] if first_user in s["lines"]]
    assert len(resent) >= 3
    assert found[FIRST_MESSAGE_RESUMMARISED].data["times"] == len(resent) - 1
    assert f"re-summarised {len(resent) - 1} times" in found[FIRST_MESSAGE_RESUMMARISED].text
    assert found[FIRST_MESSAGE_RESUMMARISED].turn == resent[1]["turn"]


def test_the_compare_findings_include_them_for_the_shipped_profile_only():
    from core.analysis.findings import SUMMARY_PILE_UP, config_findings

    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    shipped = MemoryConfig(strategy="compaction", context_size=fixture["context_window"])
    kinds = {f.kind for f in config_findings(conversation, [shipped])}
    assert SUMMARY_PILE_UP in kinds
    exact = shipped.with_(compaction_profile="exact")
    assert SUMMARY_PILE_UP not in {f.kind for f in config_findings(conversation, [exact])}


def test_a_flow_run_finding_says_compaction_fired_inside_the_tool_loop_at_step_k():
    from core.analysis.findings import COMPACTION_IN_TOOL_LOOP, run_findings
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn

    flow = agent_flow_with_compaction(2000)
    state = ConversationState.new(flow)
    record = run_turn(flow, state, "Please check every item.", llm=LongLookupModel(calls=30))
    k = record.node_run("agent").ledger.compactions[0]["request"]
    found = [
        f for f in run_findings(flow, state.apply(record).conversation, [record]) if f.kind == COMPACTION_IN_TOOL_LOOP
    ]
    assert len(found) == 1 and found[0].turn == 1 and found[0].node_id == "agent"
    assert found[0].text.startswith(f"Compaction fired inside the tool loop at step {k} of turn 1:")


# -- the summarisers ----------------------------------------------------------------------------------


def test_the_summariser_reads_tool_output_cut_to_500_characters_and_no_earlier_summary_text():
    from core.memory.strategies.shipped_compaction import folded_messages

    groups = [
        Group(REQUEST, (Part(SYSTEM, SUMMARY_HEADER + "old"), Part(USER, "first"))),
        Group(RESPONSE, (Part(TOOL_CALL, '{"k": 1}', "c1", "lookup"),)),
        Group(REQUEST, (Part(TOOL_RETURN, "x" * 501, "c1", "lookup"), Part(TOOL_RETURN, "y" * 500, "c2", "f"))),
    ]
    lines = transcript_lines(folded_messages(groups, skip_summaries=True))
    assert lines == [
        "User: first",
        'Tool Call [lookup]: {"k": 1}',
        "Tool [lookup]: " + "x" * 500 + "...",
        "Tool [f]: " + "y" * 500,
    ]
    assert transcript_lines(folded_messages(groups, skip_summaries=False))[0] == "System: " + SUMMARY_HEADER + "old"
    nameless = to_groups([Message("tool", "done", TOOL_RESULT, 1)])
    assert transcript_lines(folded_messages(nameless, skip_summaries=True)) == ["Tool [tool]: done"]


def test_a_real_model_is_asked_for_the_six_sections_and_to_update_the_previous_summary():
    from core.llm.client import LLMReply
    from core.memory.summarize import SECTIONS, ModelSectionSummarizer

    class Client:
        def __init__(self):
            self.prompts = []

        def complete(self, model, messages, max_tokens=None):
            self.prompts.append((model, messages))
            return LLMReply("  ## Intent\n- ship it  ", 10, 5, model)

    client = Client()
    folded = [Message("user", "Ship order 7", QUERY, 1), Message("tool", "t" * 600, TOOL_RESULT, 2, name="lookup")]
    text = ModelSectionSummarizer(client, "openai/gpt-4o-mini").summarize(folded, "## Intent\n- earlier")
    assert text == "## Intent\n- ship it"
    model, messages = client.prompts[0]
    prompt = messages[-1]["content"]
    assert model == "openai/gpt-4o-mini"
    assert [prompt.index(f"## {s}") for s in SECTIONS] == sorted(prompt.index(f"## {s}") for s in SECTIONS)
    assert "User: Ship order 7" in prompt and "t" * 600 in prompt  # the cut is the compactor's, done before
    assert "<previous-summary>\n## Intent\n- earlier\n</previous-summary>" in prompt
    first_time = Client()
    ModelSectionSummarizer(first_time, "m").summarize(folded)
    assert "<previous-summary>" not in first_time.prompts[0][1][-1]["content"]


def test_the_offline_summary_fills_difys_sections_from_the_folded_messages_at_a_models_size():
    from core.memory.summarize import SECTIONS, SectionSummarizer, parse_sections

    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    folded = [m for t in conversation.turns[:6] for m in t.messages]
    text = SectionSummarizer().summarize(folded)
    sections = parse_sections(text)
    assert list(sections) == [s for s in SECTIONS if s in sections]
    assert sections["Intent"][0] == fixture["turns"][0]["prompt"]
    assert "Stated: Your name is Dana." in sections["Intent"]
    assert any(item.startswith("lookup ") for item in sections["Artifacts"])
    assert len(sections["Current state"]) == 1 and sections["Current state"][0].startswith("Order 6 is on its way.")
    assert 200 <= len(text) <= 4000, "a model's summary is a few hundred to a few thousand characters"
    updated = SectionSummarizer().summarize([Message("user", "And what about the parcel?", QUERY, 9)], text)
    again = parse_sections(updated)
    assert again["Intent"] == sections["Intent"], "the intent stays"
    assert again["Next steps"] == ["Answer: And what about the parcel?"]
    assert again["Open questions"][-1] == "And what about the parcel?"
    assert again["Artifacts"] == sections["Artifacts"], "earlier sections are carried over"


def test_reported_usage_survives_the_report_round_trip_and_bad_usage_is_refused_in_one_line():
    from core.report.bundle import conversation_from_json, conversation_to_json
    from core.report.errors import ReportError

    fixture = FIXTURES["parallel_tools"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    back = conversation_from_json(conversation_to_json(conversation))
    assert [m.usage for t in back.turns for m in t.messages] == [
        m.usage for t in conversation.turns for m in t.messages
    ]
    data = conversation_to_json(conversation)
    data["turns"][0]["messages"][1]["usage"] = ["many", 3]
    with pytest.raises(ReportError, match=r"conversation\.turns\[0\]\.messages\[1\]\.usage: must be \[input tokens"):
        conversation_from_json(data)


def test_the_agent_panel_names_the_compaction_before_the_step_that_followed_it():
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn
    from ui.memories_panel import steps_frame

    flow = agent_flow_with_compaction(2000)
    record = run_turn(flow, ConversationState.new(flow), "Please check every item.", llm=LongLookupModel(calls=30))
    run = record.node_run("agent").to_dict()
    first = run["ledger"]["compactions"][0]
    frame = steps_frame(run["steps"])
    row = frame[frame["step"] == first["request"]].iloc[0]
    assert row["compaction before"] == (
        f"estimated {first['estimate']:,} > target {first['target']:,} "
        f"(usage-anchored): cleared {len(first['cleared'])} tool result(s)"
    )
    assert frame[frame["step"] == first["request"] - 1].iloc[0]["compaction before"] == ""


def test_a_check_records_every_fact_of_its_decision():
    history = [Group(REQUEST, (Part(USER, "first question"),))]
    for k in range(15):
        history += [
            Group(RESPONSE, (Part(TEXT, "t" * 200), Part(TOOL_CALL, "{}", f"c{k}", "f"))),
            Group(REQUEST, (Part(TOOL_RETURN, "r" * 400, f"c{k}", "f"),)),
        ]
    out, event = Compactor(1000, 0, lambda m, p: "s").before_request(history)
    assert event.to_dict() == {
        "estimate": heuristic_tokens(history),
        "estimated_by": BY_CHARS,
        "target": 800,
        "tiers": ["clear_tool_results", "summarize"],
        "cleared": [f"c{k}" for k in range(12)],
        "folded": len(history) - 20,
        "final_estimate": event.final_estimate,
        "still_over": event.final_estimate > 800,
        "messages_before": len(history),
        "messages_after": len(out),
        "summaries": 1,
        "first_user_resent": True,
        "summary": "s",
    }
    assert event.final_estimate == heuristic_tokens(history) - (heuristic_tokens(history) - heuristic_tokens(out))
    assert len(out) == 22 and event.still_over  # still over the target: nothing more happens


def test_the_instructions_count_once_when_no_usage_is_stored_and_not_at_all_under_an_anchor():
    history = [Group(REQUEST, (Part(USER, "u" * 3000),))]
    _, quiet = Compactor(1000, 0, lambda m, p: "").before_request(history)
    assert quiet.estimate == 750 and not quiet.fired
    _, event = Compactor(1000, 0, lambda m, p: "", instructions="i" * 400).before_request(history)
    assert event.estimate == (3000 + 400) // 4 and event.estimate > 800
    anchored = history + [Group(RESPONSE, (Part(TEXT, "ok"),), (100, 1)), Group(REQUEST, (Part(USER, "more"),))]
    _, event = Compactor(1000, 0, lambda m, p: "", instructions="i" * 4000).before_request(anchored)
    assert (event.estimate, event.estimated_by) == (101 + 1, BY_USAGE)


def test_the_replay_counts_the_system_prompt_as_the_instructions():
    fixture = FIXTURES["reloads_without_usage"]()
    conversation = recorded(fixture, [None] * 100)
    config = MemoryConfig(strategy="compaction", context_size=fixture["context_window"])
    plain = [len(Replay(conversation, config, system_prompt="").ledger(n).compactions) for n in range(1, 15)]
    long = [len(Replay(conversation, config, system_prompt="x" * 2000).ledger(n).compactions) for n in range(1, 15)]
    assert sum(long) > sum(plain)


def test_with_no_known_context_window_the_shipped_profile_never_compacts():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    ledger = Replay(conversation, MemoryConfig(strategy="compaction", model="acme/unknown-model")).ledger(14)
    assert ledger.budget is None and "unknown" in ledger.budget_note and not ledger.compactions
    assert all(e.reason == KEPT for e in ledger.entries) and not ledger.synthetic


def test_the_receipt_names_the_target_the_estimate_and_the_tiers_of_the_first_request():
    fixture = FIXTURES["reloads"]()
    conversation = recorded(fixture, simulate(fixture)["usage"])
    replay = Replay(
        conversation,
        MemoryConfig(strategy="compaction", context_size=1500, max_tokens=400),
        summarizer=FixtureSummarizer(240),
    )
    ledger = next(
        replay.ledger(n)
        for n in range(1, 15)
        if replay.ledger(n).compactions and replay.ledger(n).compactions[0]["request"] == 1
    )
    first = ledger.compactions[0]
    assert ledger.budget_note == (
        f"Dify 1.17 as shipped: compaction target 1,100 for the whole request (80% of 1,500, at most context − 400 "
        f"max_tokens); estimated {first['estimate']:,} tokens (usage-anchored), compacted by "
        f"{' then '.join(first['tiers'])} to about {first['final_estimate']:,}"
    )
    assert ledger.budget == 1100 - (ledger.prompt_tokens - ledger.history_tokens)
    quiet = replay.ledger(1)
    assert quiet.budget_note.endswith("tokens (chars/4)") and "compacted by" not in quiet.budget_note
