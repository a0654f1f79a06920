"""The n8n and Flowise memory systems' own rules, each on a small case whose answer is worked out by hand."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as hyp

from core.io import import_file, import_text
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.flowise_agentflow import folded_count, lines
from core.memory.strategies.flowise_window import parse_int, prepended
from core.memory.strategies.n8n_agent import clean_up, trim_last
from core.memory.strategies.stored import Item, slice_start, sliced_items, window_start
from core.memory.words import explain
from core.model.conversation import Message, ToolCall
from core.model.js_tokens import count, js_length
from core.model.ledger import OMITTED, OUTSIDE_WINDOW, OVER_BUDGET, PARTIAL, REWRITTEN, STORED
from tests.memory.test_openai_agents import _BODY, _tree


def item(role, content="", calls=(), call_id=""):
    return Item((0, 0), (0, 0), role, content, calls, call_id)


def test_the_window_is_javascript_s_slice_of_minus_2k():
    assert [slice_start(k) for k in (5, 0, 2.5, 2.25, -1, float("nan"))] == [-10, 0, -5, -4, 2, 0]
    assert window_start(10, -10) == 0 and window_start(12, -10) == 2 and window_start(3, -10) == 0
    assert window_start(12, 0) == 0  # slice(-0): everything
    assert window_start(12, 2) == 2 and window_start(1, 2) == 1  # slice(2): all but the first two


def test_flowise_reads_size_with_parse_int():
    assert [parse_int(k) for k in ("4", " 2.5", "-1", "", "x3", "+3")] == [4, 2, -1, None, None, 3]
    rows = [{"role": r, "content": f"{r} {i}"} for i in range(3) for r in ("user", "assistant")] + [
        {"role": "user", "content": "now"}
    ]
    for k, sent in (("1", 2), ("2.5", 4), ("0", 0), ("-1", 0), ("", 6), ("9", 6)):
        _, replay = _replay(rows, "flowise_window", k=k)
        assert len(replay.history_messages(replay.ledger(4))) == sent, k


def test_flowise_request_history_keeps_its_two_roles_and_refuses_what_is_not_a_list():
    assert prepended(
        '[{"role": "userMessage", "content": "hi"}, {"role": "system", "content": "x"}, {"role": "apiMessage"}]'
    ) == [("user", "hi"), ("assistant", "")]
    assert prepended("") == []
    with pytest.raises(ConfigError, match="JSON list"):
        prepended('{"role": "userMessage"}')


def test_the_clean_up_drops_a_result_whose_call_was_cut_and_a_call_left_without_its_result():
    call = item("assistant", calls=(("c1", "f", "{}"),))
    result = item("tool", "r", call_id="c1")
    q, a = item("user", "q"), item("assistant", "a")
    assert clean_up([result, a, q, call, result, a]) == [a, q, call, result, a]
    assert clean_up([call, q, a]) == [q, a]  # a call whose result does not follow
    assert clean_up([q, call]) == [q] and clean_up([q, a, result]) == [q, a]
    assert clean_up([q, call, result, result]) == [q, call, result, result]


def test_the_trim_counts_text_only_keeps_the_last_lines_and_starts_on_a_question():
    q1, a1 = item("user", "one two three"), item("assistant", "four five")
    q2 = item("user", "first line\nsecond line\nthird line")
    a2 = item("assistant", "six")
    call = item("assistant", calls=(("c", "f", "{}"),))
    assert count(call.content, "gpt2") == 0
    assert trim_last([q1, a1, q2, a2], 1000, "gpt2") == [q1, a1, q2, a2]
    # q2 does not fit whole: its last lines do, and the kept part starts on it.
    limit = count("six", "gpt2") + count("third line", "gpt2")
    kept = trim_last([q1, a1, q2, a2], limit, "gpt2")
    assert [i.content for i in kept] == ["third line", "six"] and kept[0].origin == PARTIAL and not kept[0].as_is
    # Nothing fits from a question on: nothing is sent.
    assert trim_last([q1, a1], count("four five", "gpt2"), "gpt2") == []
    assert trim_last([q1, a1], count("four five", "chars4") + count("one two three", "chars4"), "chars4") == [q1, a1]


def test_the_js_counter_counts_utf16_units_and_estimates_a_refused_text():
    assert js_length("a😀") == 3 and count("a😀", "chars4") == 1
    assert count("abcde", "chars4") == 2 and count("hello world", "gpt2") == 2
    assert count("<|endoftext|>", "gpt2") == 4  # refused by the encoder: characters / 4


def test_the_summary_buffer_folds_the_oldest_until_the_lines_fit():
    messages = [("user", "a " * 20), ("assistant", "b"), ("user", "c")]
    assert lines(messages[1:]) == "assistant: b\nuser: c"
    assert folded_count(messages, 2000, "gpt2") == 0
    assert folded_count(messages, count(lines(messages[1:]), "gpt2"), "gpt2") == 1
    assert folded_count(messages, 0, "gpt2") == 3


def _replay(messages, strategy, **settings):
    conversation = import_text(json.dumps(messages), name="c.json", fmt="openai").conversations[0]
    return conversation, Replay(conversation, MemoryConfig(strategy=strategy, **settings))


TOOL_TURN = [
    {"role": "user", "content": "q1"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "ra"},
    {"role": "tool", "tool_call_id": "b", "content": "rb"},
    {"role": "assistant", "content": "done"},
]


def test_n8n_stores_a_round_as_one_call_per_message_and_the_ledger_says_so():
    conversation, replay = _replay(
        TOOL_TURN
        + [{"role": "user", "content": "q2"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "q3"}],
        "n8n_window",
        k=2,
    )
    ledger = replay.ledger(3)
    sent = replay.history_messages(ledger)
    assert [(m.role, m.content, [(c.id, json.loads(c.arguments)) for c in m.tool_calls]) for m in sent] == [
        ("tool", "ra", []),
        ("assistant", "", [("b", {"id": "b"})]),
        ("tool", "rb", []),
        ("assistant", "done", []),
    ]
    reasons = [e.reason for e in ledger.entries]
    # q1 and the round's first call are outside k = 2; the round is rewritten; turn 2 (empty reply) was never saved.
    assert reasons == [OUTSIDE_WINDOW, REWRITTEN, REWRITTEN, REWRITTEN, "kept", OMITTED, OMITTED]
    assert {s.origin for s in ledger.synthetic} == {STORED}
    assert "never saved" in explain(ledger.entries[5], ledger.config)
    assert "turn 2 was never saved" in ledger.budget_note


def test_n8n_storage_versions_and_no_window():
    _, replay = _replay(
        TOOL_TURN + [{"role": "user", "content": "q2"}], "n8n_window", storage="used_tools", windowed=False
    )
    sent = replay.history_messages(replay.ledger(2))
    assert [m.content for m in sent] == [
        "q1",
        "[Used tools: Tool: f, Input: {}, Result: ra; Tool: g, Input: {}, Result: rb] done",
    ]
    _, replay = _replay(TOOL_TURN + [{"role": "user", "content": "q2"}], "n8n_window", storage="input_output")
    assert [m.content for m in replay.history_messages(replay.ledger(2))] == ["q1", "done"]


def test_n8n_agent_drops_the_cut_round_and_trims_to_max_tokens():
    messages = TOOL_TURN + [
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    _, replay = _replay(messages, "n8n_agent", k=2)
    ledger = replay.ledger(3)
    # The window [rb, done, q2, a2] starts on a result: the clean-up drops it.
    assert [m.content for m in replay.history_messages(ledger)] == ["done", "q2", "a2"]
    _, replay = _replay(messages, "n8n_agent", k=5, max_tokens_from_memory=count("q2", "gpt2") + count("a2", "gpt2"))
    ledger = replay.ledger(3)
    assert [m.content for m in replay.history_messages(ledger)] == ["q2", "a2"]
    assert ledger.entries[0].reason == OVER_BUDGET
    assert "maxTokensFromMemory" in explain(ledger.entries[0], ledger.config)


def test_flowise_window_sends_rows_after_the_request_history():
    history = json.dumps([{"role": "userMessage", "content": "earlier"}])
    _, replay = _replay(
        TOOL_TURN
        + [{"role": "user", "content": "q2"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "q3"}],
        "flowise_window",
        k="1",
        prepend=history,
    )
    ledger = replay.ledger(3)
    assert [(m.role, m.content) for m in replay.history_messages(ledger)] == [
        ("user", "earlier"),
        ("user", "q2"),
        ("assistant", ""),
    ]
    assert [e.reason for e in ledger.entries] == [
        OUTSIDE_WINDOW,
        OMITTED,
        OMITTED,
        OMITTED,
        OUTSIDE_WINDOW,
        "kept",
        "kept",
    ]


def test_agentflow_window_counts_the_current_question_and_the_summary_buffer_can_swallow_it():
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    _, replay = _replay(messages, "flowise_agentflow", memory_type="windowSize", window_size=1)
    assert [m.content for m in replay.history_messages(replay.ledger(2))] == ["a1"]
    _, replay = _replay(
        messages,
        "flowise_agentflow",
        memory_type="conversationSummaryBuffer",
        max_token_limit=1,
        system_message="You help.",
    )
    ledger = replay.ledger(2)
    (summary,) = ledger.synthetic
    assert summary.role == "user" and 2 in summary.covers
    assert summary.content.startswith("Previous conversation summary")


def test_each_system_labels_its_settings():
    from core.memory.strategies import STRATEGIES

    assert STRATEGIES["n8n_window"].label(MemoryConfig(strategy="n8n_window", k=3)) == "n8n memory k=3"
    assert (
        STRATEGIES["n8n_agent"].label(MemoryConfig(strategy="n8n_agent", max_tokens_from_memory=40))
        == "n8n agent k=5 max 40 tokens"
    )
    assert STRATEGIES["flowise_window"].label(MemoryConfig(strategy="flowise_window", k="")) == "flowise window k=all"
    assert (
        STRATEGIES["flowise_agentflow"].label(
            MemoryConfig(strategy="flowise_agentflow", memory_type="windowSize", window_size=3)
        )
        == "agentflow window 3"
    )


def test_a_ledger_with_several_stand_ins_is_stored_and_read_back_with_its_tool_calls():
    from core.store.ledger_codec import pack_ledger, unpack_ledger

    conversation, replay = _replay(TOOL_TURN + [{"role": "user", "content": "q2"}], "n8n_window")
    ledger = replay.ledger(2)
    again = unpack_ledger(json.loads(json.dumps(pack_ledger(ledger))), conversation, replay.position_of(2))
    assert again.synthetic == ledger.synthetic
    assert [(m.role, m.tool_calls, m.tool_call_id) for m in Replay.history_messages(replay, again)] == [
        (m.role, m.tool_calls, m.tool_call_id) for m in replay.history_messages(ledger)
    ]
    rows = ledger.rows()  # the round's four messages listed after the assistant message they are sent in place of
    at = next(k for k, r in enumerate(rows) if getattr(r, "reason", None) == REWRITTEN)
    assert [getattr(r, "origin", None) for r in rows[at + 1 : at + 5]] == [STORED] * 4


def test_the_platform_systems_compare_side_by_side():
    from core.analysis.compare import compare

    conversation, _ = _replay(
        TOOL_TURN
        + [
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "q3"},
        ],
        "buffer",
    )
    configs = [
        MemoryConfig(strategy="n8n_window", k=1),
        MemoryConfig(strategy="n8n_agent", k=1),
        MemoryConfig(strategy="flowise_window", k="1"),
        MemoryConfig(strategy="flowise_agentflow"),
    ]
    comparison = compare(conversation, configs)
    assert [c.label for c in comparison.configs] == [
        "n8n memory k=1",
        "n8n agent k=1",
        "flowise window k=1",
        "agentflow all messages",
    ]
    kept = [replay.summaries()[-1].kept for replay in comparison.replays_for(conversation)]
    # Turn 3: n8n's k = 1 keeps q2 and a2; so does the agent; Flowise's Size 1 the same rows; Agentflow every row.
    assert kept == [2, 2, 2, 4]


def _findings(messages, **config):
    from core.analysis.findings import config_findings

    conversation, _ = _replay(messages, "buffer")
    return config_findings(conversation, [MemoryConfig(**config)])


def test_each_surprise_is_a_finding_at_its_first_turn():
    empty = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    (found,) = [f for f in _findings(empty, strategy="n8n_window") if f.kind == "unsaved_turn"]
    assert found.turn == 1 and "never saved" in found.text and "n8n memory k=5" in found.text
    assert not [f for f in _findings(empty, strategy="n8n_window", storage="input_output") if f.kind == "unsaved_turn"]
    tools = TOOL_TURN + [
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    (found,) = [f for f in _findings(tools, strategy="n8n_window", k=3) if f.kind == "fewer_exchanges"]
    assert found.turn == 3 and "kept 1 exchange" in found.text
    long_question = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "word " * 50},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    (found,) = [
        f for f in _findings(long_question, strategy="n8n_agent", max_tokens_from_memory=10) if f.kind == "no_history"
    ]
    assert found.turn == 3
    (found,) = [
        f
        for f in _findings(tools, strategy="flowise_agentflow", memory_type="windowSize", window_size=1)
        if f.kind == "answer_without_question"
    ]
    assert found.turn == 2
    (found,) = [
        f
        for f in _findings(
            long_question, strategy="flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=5
        )
        if f.kind == "question_folded"
    ]
    assert found.turn == 2  # its own long question is over the limit


def _entry(reason, role="user", kind="query"):
    from core.model.ledger import LedgerEntry

    return LedgerEntry("r", 1, role, 3, False, reason, kind, 0, 0)


def test_each_system_says_its_reasons_in_its_own_words():
    from core.memory.strategies import STRATEGIES

    window, agent = STRATEGIES["n8n_window"], STRATEGIES["n8n_agent"]
    rows, flow = STRATEGIES["flowise_window"], STRATEGIES["flowise_agentflow"]
    assert window.explain(_entry(OUTSIDE_WINDOW), {"k": 2.5}) == (
        "outside Context Window Length 2.5: n8n sends the last 5 stored messages, and each tool call and its result "
        "take 2 of them"
    )
    assert window.explain(_entry(OUTSIDE_WINDOW), {}).startswith(
        "outside Context Window Length 5: n8n sends the last 10"
    )
    assert window.explain(_entry(REWRITTEN, "assistant", "tool_call"), {}) == (
        "sent as n8n stored it: each tool call of the round its own assistant message (empty text, the call's id in "
        "its arguments), followed by its result"
    )
    assert window.explain(_entry(REWRITTEN, "assistant", "answer"), {"storage": "used_tools"}) == (
        "sent as n8n stored it: the answer after a [Used tools: …] list of the turn's tool calls and results"
    )
    assert window.explain(_entry(OMITTED), {}) == (
        "never saved: the reply was empty, and n8n's agent saves nothing of such a turn, its question included"
    )
    assert window.explain(_entry(OMITTED, "assistant", "answer"), {}) == window.explain(_entry(OMITTED), {})
    assert window.explain(_entry(OMITTED, "tool", "tool_result"), {}) == (
        "not saved: n8n's agent saves a turn's question, its last tool round and its answer only (and nothing of a "
        "turn with an empty reply)"
    )
    assert window.explain(_entry(OMITTED, "tool", "tool_result"), {"storage": "input_output"}) == (
        "not saved: this agent saves a turn's question and answer only, not its tool steps"
    )
    assert window.explain(_entry("kept"), {}) is None and window.explain(_entry(OVER_BUDGET), {}) is None
    assert agent.explain(_entry(OVER_BUDGET), {"max_tokens_from_memory": 40}) == (
        "over maxTokensFromMemory (40 GPT-2 tokens, message text only): trimmed from the oldest, and the rest starts "
        "on a question"
    )
    assert agent.explain(_entry(OVER_BUDGET), {"max_tokens_from_memory": 1200, "counter": "chars4"}).startswith(
        "over maxTokensFromMemory (1,200 tokens (characters / 4), "
    )
    assert agent.explain(_entry(OUTSIDE_WINDOW), {"k": 1}) == (
        "outside Context Window Length 1: n8n sends the last 2 stored messages, and each tool call and its result "
        "take 2 of them; or its tool call or result was cut, and the agent drops the other half"
    )
    assert agent.explain(_entry(OMITTED), {}) == window.explain(_entry(OMITTED), {})
    assert agent.pruning_words({}) == (
        "n8n's agent trims its memory to maxTokensFromMemory, counting message text only, from the oldest; it may "
        "keep the last lines of a message, and the history must start on a question, so a long newest question "
        "means no history at all. Nothing in the run says so.",
        True,
    )
    tool_steps = "not a chat message row: Flowise stores a turn's question and answer only, not its tool steps"
    assert rows.explain(_entry(OMITTED, "tool"), {}) == flow.explain(_entry(OMITTED, "tool"), {}) == tool_steps
    assert rows.explain(_entry(OUTSIDE_WINDOW), {"k": "3"}) == (
        "outside Size 3: Flowise sends the last 6 rows, a question and an answer per turn"
    )
    assert rows.explain(_entry(OUTSIDE_WINDOW), {}) == (
        "outside Size 4: Flowise sends the last 8 rows, a question and an answer per turn"
    )
    assert rows.explain(_entry(OUTSIDE_WINDOW), {"k": "0"}) == "Size 0: Flowise's Buffer Window Memory sends no rows"
    assert rows.explain(_entry("kept"), {}) is None and flow.explain(_entry("kept"), {}) is None
    assert flow.explain(_entry(OUTSIDE_WINDOW), {"window_size": 3}) == (
        "outside Window Size 3: the last 6 messages, the current question counted, so the window may start on an "
        "answer whose question is gone"
    )
    assert flow.explain(_entry(OUTSIDE_WINDOW), {}).startswith("outside Window Size 20: the last 40 messages")
    assert flow.explain(_entry("summarized"), {}) == (
        "folded into the summary: the messages' role: content lines were over 2,000 tokens (worked out again every "
        "turn)"
    )
    assert flow.explain(_entry("summarized"), {"max_token_limit": 150}).endswith(
        "over 150 tokens (worked out again every turn)"
    )
    assert flow.pruning_words({}) == (
        "Flowise's summary buffer folds the oldest messages into a new summary every "
        "turn once they are over its limit, with one summary request per turn.",
        False,
    )


def test_the_labels_name_what_differs_from_the_defaults():
    from core.memory.strategies import STRATEGIES

    def label(strategy, **settings):
        return STRATEGIES[strategy].label(MemoryConfig(strategy=strategy, **settings))

    assert label("n8n_window") == "n8n memory k=5"
    assert label("n8n_window", windowed=False, storage="used_tools") == "n8n memory no window (used_tools)"
    assert label("n8n_agent", k=2.5) == "n8n agent k=2.5"
    assert (
        label("n8n_agent", max_tokens_from_memory=1500, counter="chars4") == "n8n agent k=5 max 1,500 tokens (chars/4)"
    )
    assert label("n8n_agent", counter="chars4") == "n8n agent k=5"
    assert (
        label("flowise_window", prepend='[{"role": "userMessage", "content": "hi"}]')
        == "flowise window k=4 + request history"
    )
    assert label("flowise_agentflow") == "agentflow all messages"
    assert label("flowise_agentflow", memory_type="conversationSummary") == "agentflow summary"
    assert label("flowise_agentflow", memory_type="conversationSummaryBuffer") == "agentflow summary buffer 2,000 tok"
    assert (
        label("flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=300, counter="chars4")
        == "agentflow summary buffer 300 tok (chars/4)"
    )


def test_each_turn_s_note_says_what_the_platform_did():
    messages = (
        [{"role": "user", "content": "q1"}, {"role": "assistant", "content": ""}]
        + TOOL_TURN
        + [{"role": "user", "content": "q3"}, {"role": "assistant", "content": "a3"}, {"role": "user", "content": "q4"}]
    )
    _, replay = _replay(messages, "n8n_window", k=2)
    assert replay.ledger(4).budget_note == "k = 2 kept 1 exchange: a tool call and its result take 2 of its 4 messages"
    _, replay = _replay(messages, "n8n_window")
    assert replay.ledger(4).budget_note == "the question of turn 1 was never saved: the reply was empty"
    assert replay.ledger(1).budget_note == ""
    _, replay = _replay(messages, "n8n_agent", max_tokens_from_memory=1, counter="chars4")
    assert replay.ledger(4).budget_note == (  # "a3" fits, "q3" does not, and the rest must start on a question
        "maxTokensFromMemory 1, counted with characters / 4 on message text only; nothing sent: the newest question "
        "alone is over maxTokensFromMemory"
    )
    _, replay = _replay(messages, "n8n_agent", max_tokens_from_memory=40)
    assert replay.ledger(4).budget_note == (
        "the question of turn 1 was never saved: the reply was empty; "
        "maxTokensFromMemory 40, counted with GPT-2 on message text only"
    )
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=4)
    assert replay.ledger(2).budget_note.startswith(
        "the role: content lines of every message counted against 4 tokens; "
    )


def test_the_request_history_is_sent_first_as_synthetic_messages():
    history = json.dumps(
        [
            {"role": "userMessage", "content": "earlier"},
            {"role": "apiMessage", "content": [{"type": "text", "text": "Hello "}, "again"]},
            {"role": "apiMessage", "content": ""},
        ]
    )
    _, replay = _replay(
        [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}],
        "flowise_window",
        prepend=history,
    )
    ledger = replay.ledger(2)
    chat = replay.counter.chat
    assert [(s.role, s.content, s.tokens, s.origin, s.turn, s.ref, s.replaces) for s in ledger.synthetic] == [
        ("user", "earlier", chat("user", "earlier"), "request history", 1, "request-history:1", None),
        ("assistant", "Hello again", chat("assistant", "Hello again"), "request history", 1, "request-history:2", None),
        ("assistant", "", chat("assistant", ""), "request history", 1, "request-history:3", None),
    ]
    assert ledger.history_tokens == sum(s.tokens for s in ledger.synthetic) + sum(e.tokens for e in ledger.kept)
    first = replay.ledger(1)
    assert [s.turn for s in first.synthetic] == [0, 0, 0] and first.budget is None


def test_the_summary_of_everything_stands_for_every_earlier_turn_and_is_sent_before_the_question():
    messages = [
        {"role": "user", "content": "My order is 4411."},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummary")
    ledger = replay.ledger(3)
    (summary,) = ledger.synthetic
    text = replay.summarizer.summarize([m for t in replay.conversation.turns for m in t.messages])
    assert (summary.role, summary.origin, summary.covers, summary.turn, summary.ref, summary.content) == (
        "assistant",
        "summary",
        (1, 2),
        2,
        "summary",
        text,
    )
    assert summary.tokens == replay.counter.chat("assistant", text)
    assert {e.reason for e in ledger.entries} == {"summarized"} and ledger.history_tokens == summary.tokens
    assert ledger.budget is None and "the question is sent after it" in ledger.budget_note
    (first,) = replay.ledger(1).synthetic
    assert first.covers == () and first.turn == 1


def test_used_tools_lists_each_call_s_input_argument_as_n8n_2_2_wrote_it():
    calls = [
        ("a", '{"input": {"q": "x", "n": [1, 2]}}'),
        ("b", '{"input": "text"}'),
        ("c", "not json"),
        ("d", '{"input": ["é"]}'),
        ("e", '["input"]'),
    ]
    messages = [
        {"role": "user", "content": "q1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": a}} for i, a in calls],
        },
    ]
    messages += [{"role": "tool", "tool_call_id": i, "content": f"r{i}"} for i, _ in calls]
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "q2"}]
    _, replay = _replay(messages, "n8n_window", storage="used_tools")
    assert replay.history_messages(replay.ledger(2))[1].content == (
        '[Used tools: Tool: f, Input: {"q":"x","n":[1,2]}, Result: ra; Tool: f, Input: {}, Result: rb; '
        'Tool: f, Input: {}, Result: rc; Tool: f, Input: ["é"], Result: rd; Tool: f, Input: {}, Result: re] done'
    )
    _, replay = _replay(messages, "n8n_window", k=6)
    sent = replay.history_messages(replay.ledger(2))
    assert [json.loads(m.tool_calls[0].arguments) for m in sent if m.tool_calls] == [
        {"input": {"q": "x", "n": [1, 2]}, "id": "a"},
        {"input": "text", "id": "b"},
        {"id": "c"},
        {"input": ["é"], "id": "d"},
        {"id": "e"},
    ]


def test_the_request_history_refuses_too_many_messages():
    with pytest.raises(ConfigError, match=r"^prepend holds 1,001 messages; at most 1,000 are read$"):
        prepended(json.dumps([{"role": "userMessage", "content": "x"}] * 1001))
    assert len(prepended(json.dumps([{"role": "userMessage", "content": "x"}] * 1000))) == 1000
    with pytest.raises(
        ConfigError,
        match=r'^prepend must be a JSON list of \{"role": "userMessage" or "apiMessage", '
        r'"content": text\} objects, as Flowise\'s request history is$',
    ):
        MemoryConfig(strategy="flowise_window", prepend="[1]").validate()


def test_each_plan_s_budget_and_note():
    messages = TOOL_TURN + [
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    _, replay = _replay(messages, "n8n_agent", k=1, windowed=False, max_tokens_from_memory=40)
    ledger = replay.ledger(3)
    assert ledger.budget == 40 and ledger.context_size == 128_000
    assert [m.content for m in replay.history_messages(ledger)][:1] == ["q1"]  # no window: everything fits in 40
    _, replay = _replay(messages, "n8n_agent", windowed=False, context_size=5000)
    ledger = replay.ledger(3)
    assert ledger.budget is None and ledger.budget_note == "" and ledger.context_size == 5000
    assert len(replay.history_messages(ledger)) == 8
    for strategy, settings in (
        ("flowise_window", {}),
        ("flowise_agentflow", {}),
        ("flowise_agentflow", {"memory_type": "windowSize"}),
    ):
        _, replay = _replay(messages, strategy, context_size=7000, **settings)
        ledger = replay.ledger(3)
        assert (ledger.budget, ledger.budget_note, ledger.context_size) == (None, "", 7000)
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummary")
    assert replay.ledger(3).budget_note == (
        "every message and the question folded into one summary each turn; the question is sent after it"
    )
    _, replay = _replay(messages, "n8n_window", context_size=9000)
    assert replay.ledger(3).context_size == 9000


def test_the_clean_up_runs_until_nothing_changes_as_n8n_s_does():
    """Each case is what n8n 2.41.1's ``cleanupOrphanedMessages`` returns for the same LangChain messages
    (run with Node on them): a call with nothing after it, or two unanswered calls in a row, go; a call
    followed by all its results stays, whether at the start or the end; results after no call go."""
    call, call2 = item("assistant", calls=(("c", "f", "{}"),)), item("assistant", calls=(("d", "f", "{}"),))
    r, r2, r3 = item("tool", "rc", call_id="c"), item("tool", "rd", call_id="d"), item("tool", "re", call_id="e")
    q, a = item("user", "q"), item("assistant", "a")
    assert clean_up([call]) == [] and clean_up([call, call2, q, a]) == [q, a]
    assert clean_up([call, r]) == [call, r] and clean_up([call, r, r2]) == [call, r, r2]
    assert clean_up([q, a, call, r]) == [q, a, call, r]
    assert clean_up([q, a, call, r, r2, r3]) == [q, a, call, r, r2, r3]
    assert clean_up([q, a, r, r2]) == [q, a] and clean_up([q, a, call, call2]) == [q, a]


def test_a_newest_question_over_max_tokens_alone_means_no_history_even_when_it_is_last():
    """``trimMessages`` (LangChain JS 1.2.8, as n8n calls it) on [q1, a1, a question of 20 characters]
    with characters / 4: at 4 tokens nothing is kept, at 5 the question alone (run with Node)."""
    history = [item("user", "q1"), item("assistant", "a1"), item("user", "a long question here")]
    assert trim_last(history, 4, "chars4") == []
    assert trim_last(history, 5, "chars4") == history[2:]


def test_the_turn_summaries_count_the_request_history_as_the_ledgers_do():
    history = json.dumps(
        [
            {"role": "userMessage", "content": "I am Dana, from the earlier chat."},
            {"role": "apiMessage", "content": "Hello again, Dana."},
        ]
    )
    _, replay = _replay(
        [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"},
        ],
        "flowise_window",
        k="1",
        prepend=history,
    )
    ledgers = [replay.ledger(n) for n in (1, 2)]
    assert ledgers[0].history_tokens == sum(s.tokens for s in ledgers[0].synthetic) > 0
    assert [s.history_tokens for s in replay.summaries()] == [ledger.history_tokens for ledger in ledgers]


def test_flowise_size_1_is_outside_the_window_not_no_window():
    from core.memory.strategies import STRATEGIES

    assert STRATEGIES["flowise_window"].explain(_entry(OUTSIDE_WINDOW), {"k": "1"}) == (
        "outside Size 1: Flowise sends the last 2 rows, a question and an answer per turn"
    )


def test_the_whole_summary_folds_the_current_question_too():
    """Agentflow's conversationSummary summarises every message with the current input appended: a fact
    stated only in this turn's question is in this turn's summary."""
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "My order is 4411."},
    ]
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummary", context_size=7000)
    ledger = replay.ledger(2)
    (summary,) = ledger.synthetic
    assert summary.content == "Your order is 4411." and summary.covers == (1,)
    assert ledger.context_size == 7000


def test_the_platform_exports_open_under_their_platform_s_memory():
    from core.analysis.debug_view import fitting_config
    from tests.conftest import FIXTURES

    platforms = FIXTURES / "platforms"
    for name in ("n8n_chat_histories.csv", "n8n_chat_histories.json", "n8n_executions.json"):
        config = fitting_config(import_file(platforms / name).conversations[0])
        assert (config.strategy, config.settings.storage) == ("n8n_window", "as_stored"), name
    config = fitting_config(import_file(platforms / "flowise_messages.json").conversations[0])
    assert (config.strategy, config.settings.k, config.settings.prepend) == ("flowise_window", "4", "")
    chat, _ = _replay([{"role": "user", "content": "q1"}], "buffer")
    assert fitting_config(chat).strategy not in ("n8n_window", "flowise_window")


def test_a_message_kept_in_part_is_over_budget_and_its_last_lines_stand_in_its_place():
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "first line\nsecond line\nthird line"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    _, replay = _replay(messages, "n8n_agent", max_tokens_from_memory=count("a2", "gpt2") + count("third line", "gpt2"))
    ledger = replay.ledger(3)
    assert [e.reason for e in ledger.entries] == [OVER_BUDGET, OVER_BUDGET, OVER_BUDGET, "kept"]
    (part,) = ledger.synthetic
    assert (part.origin, part.content, part.turn, part.covers, part.replaces) == (
        PARTIAL,
        "third line",
        2,
        (2,),
        (1, 0),
    )
    assert [m.content for m in replay.history_messages(ledger)] == ["third line", "a2"]
    # The turn summaries (the charts' figures) count and date what the ledgers send.
    assert [(s.history_tokens, s.oldest_kept_turn) for s in replay.summaries()] == [
        (replay.ledger(1).history_tokens, None),
        (replay.ledger(2).history_tokens, 1),
        (ledger.history_tokens, 2),
    ]
    assert ledger.history_tokens == part.tokens + ledger.entries[3].tokens


def test_each_stand_in_is_named_after_the_message_it_stands_for_and_counts_its_calls():
    conversation, replay = _replay(TOOL_TURN + [{"role": "user", "content": "q2"}], "n8n_window")
    ledger = replay.ledger(2)
    ref = f"stored:{conversation.turns[0].messages[1].ref}"  # the round's assistant message, four stand-ins
    assert [(s.role, s.ref, s.turn, s.covers, s.replaces, s.call_id) for s in ledger.synthetic] == [
        ("assistant", f"{ref}:1", 1, (1,), (0, 1), ""),
        ("tool", f"{ref}:2", 1, (1,), (0, 1), "a"),
        ("assistant", f"{ref}:3", 1, (1,), (0, 1), ""),
        ("tool", f"{ref}:4", 1, (1,), (0, 1), "b"),
    ]
    call = ledger.synthetic[0]
    stood_for = Message("assistant", "", "tool_call", "", tool_calls=(ToolCall(*call.calls[0]),))
    assert call.tokens == replay.counter.message(stood_for)
    assert call.tokens > replay.counter.chat("assistant", "")
    assert [s.history_tokens for s in replay.summaries()] == [replay.ledger(n).history_tokens for n in (1, 2)]
    # A round of one call: two stand-ins, each its own name.
    single = [
        {"role": "user", "content": "q1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "ra"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "q2"},
    ]
    conversation, replay = _replay(single, "n8n_window")
    ref = f"stored:{conversation.turns[0].messages[1].ref}"
    assert [s.ref for s in replay.ledger(2).synthetic] == [f"{ref}:1", f"{ref}:2"]
    # One stand-in (n8n 2.2's answer after its [Used tools: …] list) is named after its message alone.
    conversation, replay = _replay(TOOL_TURN + [{"role": "user", "content": "q2"}], "n8n_window", storage="used_tools")
    (answer,) = replay.ledger(2).synthetic
    answer_ref = conversation.turns[0].messages[4].ref
    assert (answer.ref, answer.replaces, answer.call_id) == (f"stored:{answer_ref}", (0, 4), "")
    assert [m.tool_call_id for m in replay.history_messages(replay.ledger(2))] == [None, None]


def test_a_window_reads_only_the_newest_turns_it_reaches():
    class View:
        positions = range(10)

    def layout(position):
        asked.append(position)
        return [Item((position, j), (position, j), "user", f"{position}.{j}") for j in range(3)]

    for start, reached in (
        (-1, [9]),
        (-3, [9]),
        (-4, [9, 8]),
        (-6, [9, 8]),
        (-7, [9, 8, 7]),
        (-40, list(range(9, -1, -1))),
    ):
        asked = []
        sent = sliced_items(View(), layout, start)
        assert asked == reached, start
        assert [i.content for i in sent] == [f"{p}.{j}" for p in range(10) for j in range(3)][start:]


def test_a_call_id_used_again_in_a_later_round_takes_that_round_s_result():
    """Some models number their calls afresh each round: n8n pairs each call with its own step's result."""

    def round_(name, result):
        return [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": result},
        ]

    messages = [
        {"role": "user", "content": "q1"},
        *round_("f", "first"),
        *round_("g", "second"),
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "q2"},
    ]
    _, replay = _replay(messages, "n8n_window")
    assert [(m.role, m.content) for m in replay.history_messages(replay.ledger(2))] == [
        ("user", "q1"),
        ("assistant", ""),
        ("tool", "second"),
        ("assistant", "done"),
    ]
    _, replay = _replay(messages, "n8n_window", storage="used_tools")
    assert replay.history_messages(replay.ledger(2))[1].content == (
        "[Used tools: Tool: f, Input: {}, Result: first; Tool: g, Input: {}, Result: second] done"
    )


def test_a_call_with_no_result_is_no_step_and_the_rest_of_its_round_is_stored():
    messages = [
        {"role": "user", "content": "q1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in "abc"],
        },
        {"role": "tool", "tool_call_id": "b", "content": "rb"},
        {"role": "tool", "tool_call_id": "c", "content": "rc"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "q2"},
    ]
    _, replay = _replay(messages, "n8n_window")
    sent = replay.history_messages(replay.ledger(2))
    assert [(m.role, m.content, [c.id for c in m.tool_calls]) for m in sent] == [
        ("user", "q1", []),
        ("assistant", "", ["b"]),
        ("tool", "rb", []),
        ("assistant", "", ["c"]),
        ("tool", "rc", []),
        ("assistant", "done", []),
    ]


def test_a_stored_call_keeps_its_arguments_text_as_written():
    messages = [
        {"role": "user", "content": "q1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"city": "Évora"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "q2"},
    ]
    _, replay = _replay(messages, "n8n_window")
    (call,) = [m for m in replay.history_messages(replay.ledger(2)) if m.tool_calls]
    assert "Évora" in call.tool_calls[0].arguments and json.loads(call.tool_calls[0].arguments) == {
        "city": "Évora",
        "id": "a",
    }


def test_the_notes_name_only_what_this_window_shows():
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
        {"role": "assistant", "content": "a3"},
        {"role": "user", "content": "q4"},
    ]
    # k = 1 reaches turn 3 only: turn 1's unsaved question is none of its business.
    _, replay = _replay(messages, "n8n_window", k=1)
    assert replay.ledger(4).budget_note == ""
    _, replay = _replay(messages, "n8n_window", k=5)
    assert replay.ledger(4).budget_note == "the question of turn 1 was never saved: the reply was empty"
    # k = 2.5 starts on an answer and keeps 2 questions, but no tool round took a place: no tool note.
    _, replay = _replay(messages, "n8n_window", k=2.5, storage="input_output")
    assert len(replay.history_messages(replay.ledger(4))) == 5 and replay.ledger(4).budget_note == ""
    # Both surprises at one turn, one after the other.
    both = (
        [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"}]
        + TOOL_TURN
        + [{"role": "user", "content": "q3"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "q4"}]
    )
    _, replay = _replay(both, "n8n_window", k=2)
    assert replay.ledger(4).budget_note == (
        "the question of turn 3 was never saved: the reply was empty; k = 2 kept 0 exchanges: a tool call and its "
        "result take 2 of its 4 messages"
    )


def test_the_summary_buffer_summarises_what_it_folds_the_current_question_included():
    messages = [
        {"role": "user", "content": "My order is 4411."},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "I live in Porto."},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    # 20 tokens hold the lines of the rows from "I live in Porto." on (19) but not from "a1" on (25).
    _, replay = _replay(
        messages, "flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=20, context_size=7000
    )
    ledger = replay.ledger(3)
    (summary,) = ledger.synthetic
    assert (summary.role, summary.content, summary.turn, summary.covers, summary.ref, summary.origin) == (
        "system",
        "Previous conversation summary: Your order is 4411.",
        1,
        (1,),
        "summary",
        "summary",
    )
    assert [e.reason for e in ledger.entries] == ["summarized", "summarized", "kept", "kept"]
    assert (ledger.budget, ledger.context_size) == (20, 7000)
    assert [(s.history_tokens, s.oldest_kept_turn) for s in replay.summaries()] == [
        (0, None),
        (replay.ledger(2).history_tokens, 1),
        (ledger.history_tokens, 2),
    ]
    # At 1 token everything is folded, the current question too: its fact is in the summary, which covers its turn.
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=1)
    (summary,) = replay.ledger(2).synthetic
    assert (summary.content, summary.turn, summary.covers) == (
        "Previous conversation summary: Your order is 4411. You live in Porto.",
        2,
        (1, 2),
    )
    assert [s.history_tokens for s in replay.summaries()] == [replay.ledger(n).history_tokens for n in (1, 2, 3)]


def test_the_request_history_s_content_is_the_text_of_the_message_flowise_makes_of_it():
    """Each item becomes LangChain JS's ``new AIMessage(content || '')`` (1.1.20, run with Node on these
    contents): an object is read as the message's fields, a list as content blocks, and the message's
    text is what is sent; a number or ``true`` makes the constructor throw, so Flowise's request fails."""
    contents = [
        "é",
        {"a": 1},
        {"content": "from fields"},
        {"content": {"a": 1}},
        {"content": ["x"]},
        [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "u"}}, "there", 1],
        None,
        0,
        False,
        [],
    ]
    history = json.dumps([{"role": "apiMessage", "content": c} for c in contents])
    assert [text for _, text in prepended(history)] == ["é", "", "from fields", "", "x", "hithere", "", "", "", ""]
    for bad in (5, 2.5, True):
        with pytest.raises(
            ConfigError,
            match=rf"^prepend's message 2 has the content {json.dumps(bad)}: Flowise "
            r"fails on a number or true \(give text\)$",
        ):
            prepended(json.dumps([{"role": "userMessage", "content": "hi"}, {"role": "apiMessage", "content": bad}]))
    assert prepended(json.dumps([{"role": "system", "content": 5}])) == []  # dropped before it is read


def test_an_n8n_table_export_replays_as_n8n_s_window_sent_it():
    """The table fixture holds the Postgres rows n8n 2.41.1 wrote for two recorded cases (Context Window
    Length 3); replayed as stored under its default memory with k = 3, each turn sends what n8n's window
    sent at that turn (a turn with an empty reply stored no rows, so it is not in the export)."""
    from core.analysis.debug_view import fitting_config
    from tests.conftest import FIXTURES
    from tests.reference.platform_cases import cases
    from tests.reference.platform_outcomes import recorded

    outcomes, every = recorded("n8n")["outcomes"], cases("n8n")
    for conversation in import_file(FIXTURES / "platforms" / "n8n_chat_histories.json").conversations:
        name = {"chat-7f3a": "window-mixed-postgres1.3-k3", "chat-91bc": "window-single_tools-postgres1.3-k3"}[
            conversation.id
        ]
        replay = Replay(conversation, fitting_config(conversation).with_(k=3))
        sent_at = {
            case_turn["input"]: turn["sent"] for case_turn, turn in zip(every[name]["turns"], outcomes[name]["turns"])
        }
        assert len(sent_at) > len(conversation.turns) or conversation.id == "chat-91bc"
        for position, turn in enumerate(conversation.turns):
            ledger = replay.ledger(replay.numbers[position])
            ours = [
                {
                    "role": m.role,
                    "text": m.content,
                    **(
                        {"calls": [{"id": c.id, "name": c.name, "args": json.loads(c.arguments)} for c in m.tool_calls]}
                        if m.tool_calls
                        else {}
                    ),
                    **({"call_id": m.tool_call_id} if m.role == "tool" else {}),
                }
                for m in replay.history_messages(ledger)
            ]
            assert ours == sent_at[turn.query], (conversation.id, position)


def test_a_chat_that_opens_on_the_bot_s_greeting_folds_it_like_any_row():
    """The greeting is an answer row with no question (turn 0): every turn, that one included, is planned."""
    messages = [
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "My order is 4411."},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    _, replay = _replay(messages, "flowise_agentflow", memory_type="conversationSummaryBuffer", max_token_limit=1)
    assert [s.turn for s in replay.summaries()] == [1, 2]
    ledger = replay.ledger(2)
    assert [(e.turn, e.reason) for e in ledger.entries] == [(0, "summarized"), (1, "summarized"), (1, "summarized")]
    (summary,) = ledger.synthetic
    assert (summary.content, summary.covers) == ("Previous conversation summary: Your order is 4411.", (0, 1, 2))


# -- Flowise Agentflow's all messages, counted along the thread -------------------------------------------


@examples(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    hyp.lists(
        hyp.tuples(hyp.one_of(hyp.none(), hyp.integers(0, 50)), hyp.lists(_BODY, max_size=5)), min_size=1, max_size=8
    ),
    hyp.sampled_from([{}, {"memory_type": "windowSize", "window_size": 0}]),
    hyp.randoms(use_true_random=False),
)
def test_every_row_counted_along_the_thread_is_every_row_sent_as_stored(monkeypatch, turns, settings_, rng):
    """All messages (and a window of 0) send every earlier row: the plan that counts rows along the thread
    gives, at every turn of any branch, the ledger of every row laid out and sent as a stored item."""
    from core.memory.strategies import flowise_agentflow
    from core.memory.strategies.base import Budget
    from core.memory.strategies.flowise_window import rows_layout
    from core.memory.strategies.stored import StoredPlan, stored_items

    conv = _tree(turns)
    config = MemoryConfig("flowise_agentflow", **settings_).validate()
    positions = list(range(len(conv.turns)))
    rng.shuffle(positions)
    counted = Replay(conv, config)
    ledgers = {p: counted.ledger_at(p) for p in positions}
    summaries = counted.summaries()

    def as_stored(budget: Budget, view, replay):
        layout = rows_layout(replay)
        return StoredPlan(budget, stored_items(view, layout), {}, view, replay, layout)

    with monkeypatch.context() as m:
        m.setattr(flowise_agentflow, "EveryRowPlan", as_stored)
        stored = Replay(conv, config)
        for p in positions:
            want, got = stored.ledger_at(p), ledgers[p]
            assert [(e.position, e.index, e.reason, e.tokens) for e in got.entries] == [
                (e.position, e.index, e.reason, e.tokens) for e in want.entries
            ]
            assert (got.history_tokens, len(got.kept)) == (want.history_tokens, len(want.kept))
        assert [(s.kept, s.history_tokens, s.oldest_kept_turn) for s in summaries] == [
            (s.kept, s.history_tokens, s.oldest_kept_turn) for s in stored.summaries()
        ]
