"""The openai_agents memory: an Agents SDK session's item limit and the runner's orphan pass, on sessions
written here item by item (the recorded sessions of the real SDK are tests/memory/test_platform_memories.py)."""

import json
import subprocess
import sys
from random import Random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hyp

from core.io import import_text
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import STRATEGIES
from core.memory.strategies.openai_agents import limit_start, orphan_pass
from core.memory.words import explain
from core.model.conversation import REASONING, Message, ToolCall
from core.model.ledger import KEPT, OMITTED, OTHER_BRANCH, OUTSIDE_WINDOW
from tests.conftest import ROOT


def q(text):
    return {"role": "user", "content": text}


def answer(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call(call_id):
    return {"type": "function_call", "call_id": call_id, "name": "weather", "arguments": '{"city": "Porto"}'}


def output(call_id):
    return {"type": "function_call_output", "call_id": call_id, "output": f"sunny ({call_id})"}


def reasoning(text):
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}


#: Two exchanges around a tool turn: q1 a1 | q2 call output a2 | q3 (the turn replayed).
SESSION = [q("q1"), answer("a1"), q("q2"), call("c1"), output("c1"), answer("a2"), q("q3"), answer("a3")]


def session(items):
    return import_text(json.dumps(items), name="session.json", fmt="openai-agents").conversations[0]


def sent(items, **settings):
    """What the last turn sends: ``(text or call id, reason)`` of each earlier item, in order."""
    conv = session(items)
    replay = Replay(conv, MemoryConfig("openai_agents", **settings).validate())
    ledger = replay.ledger_at(conv.answered_turns()[-1])
    history = [m.tool_calls[0].id if m.tool_calls else m.content for m in replay.history_messages(ledger)]
    return history, [e.reason for e in ledger.entries], ledger


@pytest.mark.parametrize(
    "length, limit, start",
    [
        (8, None, 0),
        (8, -1, 0),
        (8, -100, 0),
        (8, 0, 8),
        (8, 1, 7),
        (8, 6, 2),
        (8, 8, 0),
        (8, 9, 0),
        (0, 3, 0),
        (0, 0, 0),
    ],
)
def test_the_limit_reads_the_newest_items_none_and_negative_read_all_zero_reads_none(length, limit, start):
    assert limit_start(length, limit) == start


def test_a_tool_turn_is_four_items_and_every_item_counts():
    history, reasons, _ = sent(SESSION, limit=4)
    assert history == ["q2", "c1", "sunny (c1)", "a2"]
    assert reasons == [OUTSIDE_WINDOW] * 2 + [KEPT] * 4


@pytest.mark.parametrize(
    "limit, history",
    [
        (None, ["q1", "a1", "q2", "c1", "sunny (c1)", "a2"]),
        (-1, ["q1", "a1", "q2", "c1", "sunny (c1)", "a2"]),
        (0, []),
        (1, ["a2"]),
        (2, ["a2"]),  # the output's call fell outside: the output is dropped, one item is sent
        (3, ["c1", "sunny (c1)", "a2"]),
        (5, ["a1", "q2", "c1", "sunny (c1)", "a2"]),
        (6, ["q1", "a1", "q2", "c1", "sunny (c1)", "a2"]),
        (60, ["q1", "a1", "q2", "c1", "sunny (c1)", "a2"]),
    ],
)
def test_each_limit_sends_the_newest_items_less_an_output_whose_call_it_cut(limit, history):
    assert sent(SESSION, limit=limit)[0] == history


def test_the_output_whose_call_the_limit_cut_is_omitted_and_said_so():
    _, reasons, ledger = sent(SESSION, limit=2)
    assert reasons == [OUTSIDE_WINDOW] * 4 + [OMITTED, KEPT]
    words = explain(ledger.entries[4], ledger.config)
    assert words == "a tool result whose call the limit of 2 items cut: the SDK drops it"
    assert (
        explain(ledger.entries[0], ledger.config)
        == "older than the session's newest 2 items (SessionSettings.limit counts items)"
    )
    assert ledger.budget_note == (
        "limit 2 counts items: this turn sent 1 item; the orphan pass dropped 1 tool result whose call the limit cut"
    )


def test_an_input_callback_sends_the_output_without_its_call():
    history, reasons, ledger = sent(SESSION, limit=2, input_callback=True)
    assert history == ["sunny (c1)", "a2"]
    assert reasons == [OUTSIDE_WINDOW] * 4 + [KEPT, KEPT]
    assert ledger.budget_note == "limit 2 counts items: this turn sent 2 items (1 tool result without its call)"


PENDING = [q("q1"), reasoning("think"), call("c1"), q("q2"), answer("a2"), q("q3"), answer("a3")]


@pytest.mark.parametrize("limit", [None, -1, 6, 60])
def test_a_call_without_its_output_goes_with_the_reasoning_before_it_limit_or_not(limit):
    history, reasons, ledger = sent(PENDING, limit=limit)
    assert history == ["q1", "q2", "a2"]
    assert reasons == [KEPT, OMITTED, OMITTED, KEPT, KEPT]
    assert (
        "the orphan pass dropped 1 call without a result and 1 reasoning item before such a call" in ledger.budget_note
    )
    assert (
        explain(ledger.entries[1], ledger.config)
        == "reasoning before a call without a result: the SDK drops it with the call"
    )
    assert explain(ledger.entries[2], ledger.config).startswith("a call without its result")


def test_no_limit_and_no_limit_words():
    _, _, ledger = sent(SESSION)
    assert ledger.budget_note == "no limit (every stored item): this turn sent 6 items (2 questions)"
    _, _, ledger = sent(SESSION, limit=-3)
    assert ledger.budget_note == "limit -3 (SQLite's LIMIT -3: every stored item): this turn sent 6 items (2 questions)"


def item(role, *, calls=(), call_id=None, kind=""):
    return Message(
        role, "", kind, 0, tool_calls=tuple(ToolCall(c, "weather", "{}") for c in calls), tool_call_id=call_id
    )


def test_the_orphan_pass_rules_one_by_one():
    # reasoning, then text, then a call without output: the reasoning belongs to the text and stays.
    items = [item("assistant", kind=REASONING), item("assistant"), item("assistant", calls=["x"])]
    assert orphan_pass(items, 10, prune_outputs=True).dropped == {12}
    # two reasoning items lead to one dropped call: both go; a later reasoning before a kept call stays.
    items = [
        item("assistant", kind=REASONING),
        item("assistant", kind=REASONING),
        item("assistant", calls=["x"]),
        item("assistant", kind=REASONING),
        item("assistant", calls=["y"]),
        item("tool", call_id="y"),
    ]
    found = orphan_pass(items, 0, prune_outputs=True)
    assert (found.calls, found.reasoning, found.outputs) == ({2}, {0, 1}, set())
    # an output whose call is missing: dropped only when outputs are pruned.
    items = [item("tool", call_id="z"), item("assistant")]
    assert orphan_pass(items, 0, prune_outputs=False).dropped == set()
    assert orphan_pass(items, 0, prune_outputs=True).outputs == {0}
    # an output whose call was dropped (the call lacks another of its outputs) goes with it when pruned.
    items = [item("assistant", calls=["a", "b"]), item("tool", call_id="a")]
    found = orphan_pass(items, 0, prune_outputs=True)
    assert (found.calls, found.outputs) == ({0}, {1})
    assert orphan_pass(items, 0, prune_outputs=False).dropped == {0}


def test_every_message_counts_whatever_the_granularity():
    config = MemoryConfig("openai_agents", limit=3, granularity="query_answer")
    conv = session(SESSION)
    history = Replay(conv, config).history_messages(Replay(conv, config).ledger_at(conv.answered_turns()[-1]))
    assert [m.content for m in history] == ["", "sunny (c1)", "a2"]


def test_label_settings_and_their_errors():
    assert MemoryConfig("openai_agents").label() == "agents session every item"
    assert MemoryConfig("openai_agents", limit=-1).label() == "agents session every item"
    assert MemoryConfig("openai_agents", limit=6).label() == "agents session limit 6 items"
    assert (
        MemoryConfig("openai_agents", limit=0, input_callback=True).label() == "agents session limit 0 items +callback"
    )
    with pytest.raises(ConfigError, match="session limit must be a whole number"):
        MemoryConfig("openai_agents", limit="six").validate()


def test_the_replay_command_reads_a_session_with_the_limit(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps(SESSION))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "replay",
            str(path),
            "--input-format",
            "openai-agents",
            "--memory",
            "openai_agents",
            "--set",
            "limit=2",
            "--format",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    turns = json.loads(proc.stdout)["turns"]
    assert [e["reason"] for e in turns[-1]["ledger"]] == [OUTSIDE_WINDOW] * 4 + [OMITTED, KEPT]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "replay",
            str(path),
            "--input-format",
            "openai-agents",
            "--memory",
            "openai_agents",
            "--session-limit",
            "x",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "--session-limit must be a whole number, not 'x'" in proc.stderr


def test_a_session_the_sdk_stored_opens_under_its_memory_with_every_item():
    from core.analysis.debug_view import fitting_config
    from tests.builders import linear

    conv = session(SESSION)
    assert fitting_config(conv).strategy == "openai_agents" and fitting_config(conv).settings.limit is None
    assert fitting_config(linear(2)).strategy != "openai_agents"
    chat = import_text(
        json.dumps([q("q1"), {"role": "assistant", "content": "a1"}]), name="c.json", fmt="openai"
    ).conversations[0]
    assert fitting_config(chat).strategy != "openai_agents"


def test_a_dropped_or_lone_tool_result_is_a_finding_in_the_session_s_words():
    from core.analysis.findings import PLATFORM_RULE, config_findings

    conv = session(SESSION + [q("q4"), answer("a4")])
    [found] = [f for f in config_findings(conv, [MemoryConfig("openai_agents", limit=2)]) if f.kind == PLATFORM_RULE]
    assert found.turn == 3 and found.title == "The platform's own rule at work"
    assert found.text == (
        "At turn 3 “agents session limit 2 items”: limit 2 counts items: this turn sent 1 item; the "
        "orphan pass dropped 1 tool result whose call the limit cut."
    )
    assert found.data == {"turns": [3]}
    [lone] = [
        f
        for f in config_findings(conv, [MemoryConfig("openai_agents", limit=2, input_callback=True)])
        if f.kind == PLATFORM_RULE
    ]
    assert "this turn sent 2 items (1 tool result without its call)" in lone.text
    assert not [f for f in config_findings(conv, [MemoryConfig("openai_agents", limit=6)]) if f.kind == PLATFORM_RULE]
    assert not [f for f in config_findings(conv, [MemoryConfig("openai_agents")]) if f.kind == PLATFORM_RULE]


def test_compare_sets_a_dify_window_beside_a_session_limit():
    from core.analysis.compare import compare

    conv = session(SESSION + [q("q4"), answer("a4")])
    result = compare(conv, [MemoryConfig(window=2), MemoryConfig("openai_agents", limit=2)])
    last = [e.reason for e in Replay(conv, MemoryConfig("openai_agents", limit=2)).ledger(3).entries]
    assert result.matrices[1].cells[2][: len(last)] == last == [OUTSIDE_WINDOW] * 4 + [OMITTED, KEPT]
    assert [s.label for s in result.series] == ["dify window 2", "agents session limit 2 items"]


def test_the_orphan_pass_reads_indices_from_where_the_items_start():
    # A message of two calls with one output: the call goes, and so does its output, at any offset.
    items = [item("assistant"), item("assistant", calls=["a", "b"]), item("tool", call_id="a")]
    found = orphan_pass(items, 7, prune_outputs=True)
    assert (found.start, found.calls, found.outputs, found.reasoning) == (7, {8}, {9}, set())


def test_each_turn_s_numbers_count_the_items_sent():
    conv = session(SESSION + [q("q4"), answer("a4")])
    replay = Replay(conv, MemoryConfig("openai_agents", limit=2))
    tokens = [[e.tokens for e in replay.ledger(n).entries] for n in (1, 2, 3)]
    summaries = replay.summaries()
    # turn 2 sends q1 a1; turn 3 reads output a2 and sends a2; turn 4 reads q3 a3 and sends both.
    assert [(s.turn, s.kept, s.dropped, s.oldest_kept_turn) for s in summaries] == [
        (1, 0, 0, None),
        (2, 2, 0, 1),
        (3, 1, 5, 2),
        (4, 2, 6, 3),
    ]
    assert summaries[2].history_tokens == tokens[2][-1]
    assert summaries[1].history_tokens == sum(tokens[1])
    ledger = replay.ledger(4)
    assert ledger.history_tokens == summaries[3].history_tokens == sum(e.tokens for e in ledger.entries if e.kept)
    nothing = Replay(conv, MemoryConfig("openai_agents", limit=0)).summaries()
    assert [(s.kept, s.history_tokens, s.oldest_kept_turn) for s in nothing] == [(0, 0, None)] * 4


def test_the_turn_s_note_and_words_at_limit_zero_and_with_a_question_beside_a_lone_result():
    _, reasons, ledger = sent(SESSION, limit=0)
    assert reasons == [OUTSIDE_WINDOW] * 6
    assert ledger.budget_note == "limit 0 counts items: this turn sent 0 items"
    assert (
        explain(ledger.entries[0], ledger.config)
        == "older than the session's newest 0 items (SessionSettings.limit counts items)"
    )
    _, _, ledger = sent(SESSION + [q("q4"), answer("a4")], limit=4, input_callback=True)
    assert (
        ledger.budget_note
        == "limit 4 counts items: this turn sent 4 items (1 question, 1 tool result without its call)"
    )
    _, _, ledger = sent(PENDING, limit=6)
    assert (
        explain(ledger.entries[2], ledger.config)
        == "a call without its result among the items sent (an approval still pending?): the SDK drops it"
    )
    assert STRATEGIES["openai_agents"].explain(ledger.entries[0], ledger.config) is None  # (kept: the shared words)


def test_the_budget_names_the_model_s_context_and_no_token_limit():
    _, _, ledger = sent(SESSION, limit=3)
    assert (ledger.budget, ledger.context_size) == (None, 128_000)
    _, _, ledger = sent(SESSION, limit=3, context_size=9_000)
    assert ledger.context_size == 9_000
    for settings_ in ({}, {"context_size": 9_000}):  # no limit: the pass carried along the thread
        _, _, ledger = sent(SESSION, **settings_)
        assert (ledger.budget, ledger.context_size) == (None, settings_.get("context_size", 128_000))


def test_what_its_pruning_means_in_a_finding():
    assert STRATEGIES["openai_agents"].pruning_words({"strategy": "openai_agents"}) == (
        "The session's limit counts items — a question, each call, each result, each reasoning item and the answer — "
        "so a tool turn takes four or more, and the orphan pass drops a result whose call the limit cut. Raise the "
        "limit or count a turn's items.",
        False,
    )


# -- every item, carried along the thread -----------------------------------------------------------------
# With no limit each turn's orphan pass is the last turn's plus its own items, carried along the thread; it
# must equal the pass over every item (orphan_pass, the one the limits use) at every turn, on any branch.

_IDS = ("c0", "c1", "c2", "c3")
_BODY = hyp.one_of(
    hyp.just(("reasoning",)),
    hyp.just(("answer",)),
    hyp.tuples(hyp.just("call"), hyp.lists(hyp.sampled_from(_IDS), min_size=1, max_size=2)),
    hyp.tuples(hyp.just("output"), hyp.sampled_from((*_IDS, None))),
)


def _tree(turns):
    """A conversation of ``turns``: each ``(parent, body)``, the parent an index among the turns before it
    (``None``: the root; a repeated parent is a regenerate), the body its items after the question (first
    ``("unasked",)``: the turn has none)."""
    from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, Conversation, Turn

    made = []
    for k, (parent, body) in enumerate(turns):
        asks = not body or body[0] != ("unasked",)  # a turn with no question: the agent speaks first
        messages = [Message("user", f"q{k}", QUERY, f"{k}:q")] if asks else []
        for j, item in enumerate(body[0 if asks else 1 :]):
            ref = f"{k}:{j}"
            if item[0] == "reasoning":
                messages.append(Message("assistant", f"think {k}.{j}", REASONING, ref))
            elif item[0] == "answer":
                messages.append(Message("assistant", f"a{k}.{j}", ANSWER, ref))
            elif item[0] in ("call", "reasoning call"):  # the second: a reasoning item holding calls
                calls = tuple(ToolCall(i, "weather", "{}") for i in item[1])
                kind = TOOL_CALL if item[0] == "call" else REASONING
                messages.append(Message("assistant", "", kind, ref, tool_calls=calls))
            else:
                messages.append(Message("tool", f"out {item[1]}", TOOL_RESULT, ref, tool_call_id=item[1]))
        last = max((i for i, m in enumerate(messages) if m.kind == ANSWER), default=None)
        made.append(
            Turn(
                id=f"t{k}",
                parent_id=None if parent is None or k == 0 else f"t{parent % k}",
                messages=tuple(messages),
                query_index=0 if asks else None,
                answer_index=last,
            )
        )
    return Conversation(id="c", turns=made)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hyp.lists(
        hyp.tuples(
            hyp.one_of(hyp.none(), hyp.integers(0, 50)),
            hyp.tuples(hyp.sampled_from([(), (("unasked",),)]), hyp.lists(_BODY, max_size=6)).map(
                lambda p: [*p[0], *p[1]]
            ),
        ),
        min_size=1,
        max_size=9,
    ),
    hyp.randoms(use_true_random=False),
)
# Reasoning items leading a call that never gets its result, at the session's start and after a question.
@example([(None, [("unasked",), ("reasoning",), ("call", ["c0"]), ("reasoning",)]), (0, [])], Random(0))
@example([(None, [("unasked",), ("reasoning",), ("reasoning",), ("call", ["c0"])]), (0, [])], Random(0))
@example([(None, [("reasoning",), ("reasoning",), ("call", ["c0"]), ("answer",)]), (0, [])], Random(0))
# A reasoning item that holds a call: still a reasoning item, its lead given to the next item.
@example(
    [(None, [("reasoning",), ("reasoning call", ["c0"]), ("reasoning",), ("call", ["c1"]), ("answer",)]), (0, [])],
    Random(0),
)
# A result completing a call whose other id an answered call already carries: that id's results were sent.
@example(
    [(None, [("call", ["c0"]), ("output", "c0"), ("call", ["c0", "c1"]), ("output", "c1"), ("answer",)]), (0, [])],
    Random(0),
)
# A call id asked twice around its one result: the result answers both, and is not without its call.
@example([(None, [("call", ["c0"]), ("output", "c0"), ("call", ["c0"]), ("answer",)]), (0, [])], Random(0))
# A result before its call, and a message of two calls, one of them answered.
@example([(None, [("output", "c1"), ("call", ["c1", "c2"]), ("answer",)]), (0, [("output", "c2")]), (1, [])], Random(0))
def test_every_item_carried_along_the_thread_equals_the_pass_over_every_item(turns, rng):
    from core.memory.strategies.openai_agents import sent_counts, turn_note

    conv = _tree(turns)
    replay = Replay(conv, MemoryConfig("openai_agents"))
    positions = list(range(len(conv.turns)))
    rng.shuffle(positions)  # any order of turns, so the carried pass is cut back and walked again
    for p in positions:
        ledger = replay.ledger_at(p)
        thread = [e for e in ledger.entries if e.reason != OTHER_BRANCH]  # the items this thread's session holds
        earlier = [conv.turns[e.position].messages[e.index] for e in thread]
        expected = orphan_pass(earlier, 0, prune_outputs=False)
        assert [e.reason for e in thread] == [OMITTED if i in expected.dropped else KEPT for i in range(len(earlier))]
        sent = [m for i, m in enumerate(earlier) if i not in expected.dropped]
        assert ledger.budget_note == turn_note(
            None, (0, len(expected.calls), len(expected.reasoning)), len(sent), *sent_counts(sent)
        )
        assert ledger.history_tokens == sum(e.tokens for e in ledger.entries if e.kept)
    # Each turn's numbers (what Compare and the CLI read without building a ledger) are its ledger's.
    summaries = replay.summaries()
    assert [s.turn for s in summaries] == [replay.numbers[p] for p in conv.answered_turns()]
    for summary, p in zip(summaries, conv.answered_turns()):
        kept = [e for e in replay.ledger_at(p).entries if e.reason == KEPT]
        oldest = replay.numbers[kept[0].position] if kept else None
        assert (summary.kept, summary.history_tokens, summary.oldest_kept_turn) == (
            len(kept),
            sum(e.tokens for e in kept),
            oldest,
        )


def test_a_result_on_another_branch_never_answers_this_branch_s_call():
    """The carried pass keeps the items it has read along one branch: walking another, a result read on the
    first at the same place in the session is not among this branch's items."""
    turns = [
        (None, [("answer",)]),
        (0, [("output", "c0"), ("answer",)]),  # a branch whose result comes first …
        (0, [("reasoning",), ("call", ["c0"]), ("answer",)]),  # … and one whose call has no result
        (2, []),
        (1, []),
        (0, [("reasoning",), ("call", ["c0"]), ("output", "c0"), ("answer",)]),  # one whose call has its result
        (5, []),
    ]
    conv = _tree(turns)
    replay = Replay(conv, MemoryConfig("openai_agents"))
    first = replay.ledger_at(4)  # the first branch's items are read first
    assert "1 tool result without its call" in first.budget_note
    second = replay.ledger_at(3)
    assert [(e.position, e.index, e.reason) for e in second.entries if e.position == 2] == [
        (2, 0, KEPT),
        (2, 1, OMITTED),  # the reasoning before the call
        (2, 2, OMITTED),  # the call: its result is on the other branch
        (2, 3, KEPT),
    ]
    assert second.budget_note.endswith("dropped 1 call without a result and 1 reasoning item before such a call")
    # The first branch's result is not this one's either: no result here is without its call.
    assert replay.ledger_at(6).budget_note == "no limit (every stored item): this turn sent 7 items (2 questions)"


def test_one_result_completing_two_calls_sends_its_results_with_their_calls_when_walked_again():
    """Two calls waiting on the same two ids, both completed by one result: every earlier result then has a
    call sent. Reading the turns in another order walks the thread again over what an earlier walk recorded."""
    turns = [
        (None, [("output", "c1"), ("call", ["c0", "c2"]), ("answer",)]),
        (0, [("call", ["c2", "c0"]), ("answer",), ("output", "c2")]),
        (1, [("call", ["c1"]), ("output", "c0"), ("answer",)]),
        (2, []),
        (2, []),
    ]
    conv = _tree(turns)
    replay = Replay(conv, MemoryConfig("openai_agents"))
    notes = {p: replay.ledger_at(p).budget_note for p in (3, 2, 1, 0, 4)}
    assert notes[3] == notes[4] == "no limit (every stored item): this turn sent 12 items (3 questions)"
    assert all(e.reason == KEPT for e in replay.ledger_at(4).entries if e.position < 3)
