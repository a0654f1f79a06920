"""Findings: each kind of memory surprise is found where the ledgers (or the flow) say, at the
right turn and node, and nothing is reported where nothing is wrong."""

import json
import re
from dataclasses import replace

import pytest

from core.analysis.compare import compare
from core.analysis.findings import (
    DOCS_VS_CODE,
    DOMINANT_MESSAGE,
    DOMINANT_MIN_TOKENS,
    FACT_NOT_SEEN,
    FOREIGN_ANSWERS,
    HISTORY_TWICE,
    INFO,
    NO_CONVERSATION,
    SILENT_PRUNING,
    TRIMMED_WINDOW,
    WARNING,
    WINDOW_ZERO,
    Finding,
    config_findings,
    findings_at,
    flow_findings,
    history_variables,
    larger_window_what_if,
    memory_turn,
    memory_turns,
    run_findings,
    turn_namer,
)
from core.flow.graph import flow_from_data, load_flow
from core.flow.runtime import run_conversation
from core.io import read_conversations
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay, turn_numbers
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn, turn_label
from core.model.ledger import OVER_BUDGET
from core.service.samples import load_sample
from tests.builders import dify, linear
from tests.conftest import FIXTURES, ROOT

DSL = FIXTURES / "dify_dsl"
T = FIXTURES / "transcripts"


def lisbon() -> Conversation:
    return load_sample("lisbon-trip.json")[0]


def kinds(findings, kind):
    return [f for f in findings if f.kind == kind]


def run(flow_data, queries):
    flow = flow_from_data(flow_data, "test-flow")
    state, records = run_conversation(flow, queries, llm=DemoClient())
    return flow, state.conversation, records


def llm(node_id, *, memory=None, prompt=None, title=None):
    node = {
        "id": node_id,
        "type": "llm",
        "title": title or node_id,
        "model": "memlens/demo",
        "prompt_template": prompt or [{"role": "system", "text": "You are a helpful assistant."}],
    }
    if memory is not None:
        node["memory"] = memory
    return node


# -- the per-turn numbers every ledger finding reads ---------------------------------------------------

WALK_CASES = {
    "linear": lambda: linear(14),
    "tau-bench tools": lambda: read_conversations(T / "taubench__gpt-4o-airline.sample.jsonl")[2],
    "dify web branches": lambda: read_conversations(T / "dify-web__realWorldMessages.json")[0],
    "oasst tree": lambda: read_conversations(T / "oasst__en_100_tree.subset.jsonl")[0],
}
WALK_CONFIGS = [
    MemoryConfig(window=3),
    MemoryConfig(context_size=900),
    MemoryConfig(strategy="buffer"),
    MemoryConfig(strategy="window", window=4, window_changes=((5, 9),)),
    MemoryConfig(strategy="off"),
    MemoryConfig(strategy="trim", max_history_tokens=300),
]


@pytest.mark.parametrize("config", WALK_CONFIGS, ids=lambda c: c.label())
@pytest.mark.parametrize("name", list(WALK_CASES))
def test_per_turn_numbers_from_the_walk_equal_those_from_every_ledger(name, config):
    conv = WALK_CASES[name]()
    replay = Replay(conv, config)
    fast = memory_turns(replay)
    slow = [memory_turn(replay.ledger_at(p), p) for p in conv.answered_turns()]
    for a, b in zip(fast, slow):
        assert (a.turn, a.kept, a.history_tokens, a.pruned, a.trimmed, a.outside, a.candidates, a.in_window) == (
            b.turn,
            b.kept,
            b.history_tokens,
            b.pruned,
            b.trimmed,
            b.outside,
            b.candidates,
            b.in_window,
        )
        assert a.largest_tokens == b.largest_tokens
    assert len(fast) == len(slow)


def test_the_largest_kept_message_of_a_long_history_is_the_first_of_the_largest():
    # Hundreds of kept messages (the block maxima's range) with repeated sizes: ties go to the
    # oldest, as a ledger read oldest first finds them.
    conv = linear(400, answer=lambda i: "word " * ((i * 37) % 90), query=lambda i: "ask " * (i % 7 + 1))
    for config in (MemoryConfig(strategy="buffer"), MemoryConfig(context_size=2_000)):
        replay = Replay(conv, config)
        fast = memory_turns(replay)
        for p in (3, 64, 65, 130, 257, 399):
            slow = memory_turn(replay.ledger_at(p), p)
            assert (fast[p].largest, fast[p].largest_tokens) == (slow.largest, slow.largest_tokens)


def test_block_maxima_find_the_largest_count_of_any_range_and_its_first_place():
    import random

    from core.analysis.findings.turns import _BLOCK, _FlatTokens
    from core.memory.strategies.base import PathView

    rng = random.Random(5)
    flat, view = _FlatTokens(), PathView(list(range(400)))
    for position in range(400):  # a thread that grows, and sometimes goes back to a branch point
        if position and rng.random() < 0.1:
            for _ in range(rng.randint(1, min(5, len(view.positions)))):
                view.pop()
        n = rng.randint(1, 4)
        view.push(position, 0, tuple(range(n)), tuple(rng.randint(0, 30) for _ in range(n)), (False,) * n)
        tokens = flat.sync(view)
        assert tokens == [view.prefix[i + 1] - view.prefix[i] for i in range(view.length)]
        assert flat.blocks == [max(tokens[b : b + _BLOCK]) for b in range(0, len(tokens), _BLOCK)]
        for _ in range(5):
            lo = rng.randrange(len(tokens))
            hi = rng.randint(lo + 1, len(tokens))
            best = max(tokens[lo:hi])
            assert flat.largest(lo, hi) == (best, tokens.index(best, lo, hi))


# -- a fact or variable set at a turn the node does not have -----------------------------------------


def test_a_config_lists_its_first_questions_about_lost_facts_and_counts_the_rest():
    """A conversation stating a new name every turn and asking for it every third: each name is lost
    under a window of 3 rows before it is asked for; 25 findings per config are listed, one counts the rest."""
    from core.analysis.findings import FACT_FINDINGS_LISTED
    from tests.builders import linear

    conv = linear(150, query=lambda i: "What's my name?" if i % 3 == 0 else f"My name is Dana{i}. Question {i}")
    configs = [MemoryConfig(window=3), MemoryConfig(strategy="buffer")]
    result = compare(conv, configs)
    found = kinds(config_findings(conv, configs, comparison=result), FACT_NOT_SEEN)
    assert {f.subject for f in found} == {"dify window 3"}  # the buffer keeps every name
    listed = [f for f in found if "fact" in f.data]
    summary = [f for f in found if "facts" in f.data]
    assert len(listed) == FACT_FINDINGS_LISTED == 25 and len(summary) == 1
    lost = sum(1 for row in result.fates if row[0].lost_turn is not None and row[0].fact.messages[0][0] < 147)
    assert summary[0].data["facts"] == lost - FACT_FINDINGS_LISTED > 0
    assert summary[0].text.startswith(
        f"“dify window 3” also lacks {lost - FACT_FINDINGS_LISTED} more facts when a "
        f"question is about them, the first at turn "
    )


def test_a_question_about_a_fact_the_window_dropped_links_to_the_turn_that_asks():
    conv = lisbon()
    configs = [MemoryConfig(window=3), MemoryConfig(window=10)]
    found = kinds(config_findings(conv, configs, comparison=compare(conv, configs)), FACT_NOT_SEEN)
    # Turn 11 asks for the name (turn 1) and the booking number (turn 3); turn 12 for the diet (turn 2).
    # Dify 1.x: a window of 10 rows holds the 9 turns before the current one, so it loses turn 1 at
    # turn 11 and turn 2 at turn 12 too.
    assert [(f.turn, f.subject, f.data["fact"]) for f in found] == [
        (11, "dify window 3", "the user's name"),
        (11, "dify window 10", "the user's name"),
        (11, "dify window 3", "the user's booking number"),
        (12, "dify window 3", "the user's diet"),
        (12, "dify window 10", "the user's diet"),
    ]
    assert found[0].text == (
        "At turn 11 the question is about the user's name, but “dify window 3” no longer has turn 1, "
        "where it was stated (outside window of 3 rows: the conversation's newest on any "
        "branch, the current turn's one of them)."
    )
    assert all(f.severity == WARNING for f in found)
    # The title heads both kinds of text, "no longer has" (here) and "never saw" (memory off): it
    # must not say the node never saw a turn it did see.
    from core.analysis.findings import KIND_TITLES

    assert "no longer has" in found[0].text and "never" not in KIND_TITLES[FACT_NOT_SEEN].lower()
    # It heads the variables' findings too (a variable set at a turn out of a node's memory): no "asked".
    assert KIND_TITLES[FACT_NOT_SEEN] == "A fact or variable its memory lacks"


def _name_restated_on_another_branch():
    """Turn 1 says the name; its line goes on and says it again at turn 3; an edit of turn 2 (a later
    position, its own line) asks for it."""
    return dify(
        [
            ("1", None, "My name is Dana.", "Hi Dana!"),
            ("2", "1", "Something else entirely.", "Sure."),
            ("3", "2", "My name is Dana.", "I know."),
            ("4", "3", "Tell me a joke.", "Ha."),
            ("2b", "1", "What's my name?", "I don't know."),
        ]
    )


def test_a_fact_restated_on_another_branch_is_not_named_as_the_turn_this_thread_stated_it():
    conv = _name_restated_on_another_branch()
    configs = [MemoryConfig(window=1), MemoryConfig(strategy="buffer")]
    found = kinds(config_findings(conv, configs, comparison=compare(conv, configs)), FACT_NOT_SEEN)
    # The edit's line said the name at turn 1 only: that is the turn it lacks, not turn 3 of the other line.
    assert [(f.subject, f.data["stated_turn"]) for f in found] == [("dify window 1", 1)]
    assert "never saw turn 1, where it was stated (outside window" in found[0].text
    assert "another branch" not in found[0].text


def test_a_recorded_turn_on_a_branch_that_never_stated_the_fact_is_not_reported():
    flow_data = {
        "format": "memlens-flow",
        "version": 1,
        "name": "bot",
        "nodes": [
            {"id": "start", "type": "start"},
            llm("bot", title="Bot", memory={"window": 2}),
            {"id": "answer", "type": "answer", "answer": "{{#bot.text#}}"},
        ],
        "edges": [["start", "bot"], ["bot", "answer"]],
    }
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn

    flow = flow_from_data(flow_data, "test-flow")
    state, records = ConversationState.new(flow), []
    for query, parent in [
        ("Hello there.", None),
        ("My name is Dana.", 0),
        ("Something else.", 1),
        ("And more.", 2),
        ("What's my name?", 0),
        ("What's my name?", 3),
    ]:
        rec = run_turn(
            flow, state, query, llm=DemoClient(), parent_id=records[parent].id if parent is not None else None
        )
        state = state.apply(rec)
        records.append(rec)
    found = kinds(run_findings(flow, state.conversation, records), FACT_NOT_SEEN)
    # The window of 2 rows lost turn 2 by the question on its own line; the question asked right
    # after turn 1, on a line that never said the name, lacks nothing.
    name = turn_namer(state.conversation)
    assert [(name(f.turn), f.data["fact"]) for f in found] == [("turn 5", "the user's name")]
    assert "no longer has turn 2 · 1/2, where it was stated" in found[0].text


def test_memory_off_never_saw_the_turn_where_the_fact_was_stated():
    conv = lisbon()
    configs = [MemoryConfig(strategy="off"), MemoryConfig(strategy="buffer")]
    found = kinds(config_findings(conv, configs, comparison=compare(conv, configs)), FACT_NOT_SEEN)
    assert {f.subject for f in found} == {"memory off"}
    assert "“memory off” never saw turn 1, where it was stated (memory is off for this node)" in found[0].text


def test_a_marked_fact_that_leaves_memory_is_a_note_at_the_turn_it_goes():
    conv = lisbon()
    configs = [MemoryConfig(window=2), MemoryConfig(strategy="buffer")]
    comparison = compare(conv, configs, facts=[((4, 0), "the tram question")])
    found = kinds(config_findings(conv, configs, comparison=comparison), FACT_NOT_SEEN)
    assert [(f.turn, f.severity) for f in found] == [(7, INFO)]  # Dify 1.x: 2 rows = the turn before only
    assert found[0].text == "the tram question (turn 5) leaves “dify window 2”'s memory at turn 7 (outside window)."


def test_a_marked_fact_that_comes_back_says_so_in_its_note():
    conv = linear(12, query=lambda i: "my plan: the tram" if i in (1, 6) else f"question number {i}")
    configs = [MemoryConfig(window=3), MemoryConfig(strategy="buffer")]
    comparison = compare(conv, configs, facts=[((0, 0), "the plan"), ((5, 0), "the plan")])
    found = kinds(config_findings(conv, configs, comparison=comparison), FACT_NOT_SEEN)
    assert [f.text for f in found] == [
        "the plan (turn 1) leaves “dify window 3”'s memory at turn 4 (outside window); "
        "back at turn 6, gone again from turn 9."
    ]


def test_a_node_that_lost_the_turn_with_a_fact_is_reported_but_a_restated_value_counts_as_known():
    flow = load_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    queries = json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text())
    state, records = run_conversation(flow, queries, llm=DemoClient())
    found = kinds(run_findings(flow, state.conversation, records), FACT_NOT_SEEN)
    # Turn 6 asks the name (turn 1, out of the window: 4 rows, the current turn's and 3 before it).
    # Turn 7 asks the order number: turn 1 is out of the window too, but turn 4's answer restated it
    # and is still kept.
    assert [(f.turn, f.node_id, f.data["fact"]) for f in found] == [(6, "responder", "the user's name")]
    assert found[0].text == (
        "At turn 6 the question is about the user's name, but “Responder” no longer has turn 1, "
        "where it was stated (outside window of 4 rows: the conversation's newest on any "
        "branch, the current turn's one of them)."
    )
    assert "4411" in records[3].answer  # the restatement that keeps the order number known


def _order_flow(summarizer_prompt):
    return {
        "format": "memlens-flow",
        "version": 1,
        "name": "orders",
        "variables": [{"name": "order_id", "type": "string", "default": ""}],
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "first",
                "type": "if-else",
                "cases": [
                    {
                        "case_id": "true",
                        "logical_operator": "and",
                        "conditions": [
                            {
                                "variable_selector": ["sys", "dialogue_count"],
                                "comparison_operator": "=",
                                "value": "1",
                                "varType": "number",
                            }
                        ],
                    }
                ],
            },
            {
                "id": "save",
                "type": "assigner",
                "version": "2",
                "items": [
                    {
                        "variable_selector": ["conversation", "order_id"],
                        "input_type": "variable",
                        "operation": "over-write",
                        "value": ["sys", "query"],
                    }
                ],
            },
            llm("summarizer", title="Summarizer", memory={"window": 2}, prompt=summarizer_prompt),
            {"id": "answer", "type": "answer", "answer": "{{#summarizer.text#}}"},
        ],
        "edges": [
            ["start", "first"],
            ["first", "save", "true"],
            ["first", "summarizer", "false"],
            ["save", "summarizer"],
            ["summarizer", "answer"],
        ],
    }


def test_a_node_that_no_longer_has_the_turn_where_a_variable_was_set():
    flow, conv, records = run(_order_flow(None), ["A-7731", "how long?", "and then?", "ok", "thanks"])
    assert records[0].variable_changes and records[0].variable_changes[0].name == "order_id"
    found = kinds(run_findings(flow, conv, records), FACT_NOT_SEEN)
    # Dify 1.x: a window of 2 rows at turn 3 holds turn 2 only: turn 1, where order_id was set, is gone.
    assert [(f.turn, f.node_id, f.data) for f in found] == [(3, "summarizer", {"variable": "order_id", "set_turn": 1})]
    assert found[0].text.startswith(
        "“Summarizer” no longer has turn 1, where `order_id` was set: at turn 3 that turn "
        "is out of its memory (outside window of 2 rows: the conversation's newest on "
        "any branch, the current turn's one of them)"
    )


def test_a_node_that_renders_the_variable_needs_no_memory_of_its_turn():
    prompt = [{"role": "system", "text": "The order is {{#conversation.order_id#}}."}]
    flow, conv, records = run(_order_flow(prompt), ["A-7731", "how long?", "and then?", "ok", "thanks"])
    assert kinds(run_findings(flow, conv, records), FACT_NOT_SEEN) == []


# -- one node's answers in another node's memory --------------------------------------------------------


def _two_writers(answer_from):
    return {
        "format": "memlens-flow",
        "version": 1,
        "name": "two-nodes",
        "nodes": [
            {"id": "start", "type": "start"},
            llm("writer", title="Writer", prompt=[{"role": "user", "text": "{{#sys.query#}}"}]),
            llm("reader", title="Reader", memory={"window": 5}),
            {"id": "answer", "type": "answer", "answer": "{{#" + answer_from + ".text#}}"},
        ],
        "edges": [["start", "writer"], ["writer", "reader"], ["reader", "answer"]],
    }


def test_a_node_replaying_answers_another_node_wrote_is_found_at_the_first_turn_it_does():
    flow, conv, records = run(_two_writers("writer"), ["Hi, I'm Dana.", "What's my name?", "thanks"])
    found = kinds(run_findings(flow, conv, records), FOREIGN_ANSWERS)
    assert [(f.turn, f.node_id, f.data["writers"], f.data["source_turn"]) for f in found] == [
        (2, "reader", ["writer"], 1)
    ]
    assert found[0].text.startswith(
        "“Reader”'s memory contains replies written by “Writer”: at turn 2 it replays turn 1's answer"
    )
    # The ledger says the same: Reader keeps turn 1's answer, the Answer node rendered Writer's text.
    ledger = records[1].node_run("reader").ledger
    assert any(e.kept and e.ref == f"{conv.turns[0].id}:answer" for e in ledger.entries)
    assert records[0].answer == records[0].node_run("writer").reply


def test_the_flow_alone_predicts_whose_answers_a_memory_will_replay():
    flow = flow_from_data(_two_writers("writer"), "two-nodes")
    found = kinds(flow_findings(flow), FOREIGN_ANSWERS)
    assert [(f.node_id, f.turn, f.severity) for f in found] == [("reader", None, INFO)]
    assert "will replay answers written by “Writer”" in found[0].text


def test_a_node_that_replays_its_own_answers_is_fine():
    flow, conv, records = run(_two_writers("reader"), ["Hi, I'm Dana.", "What's my name?"])
    assert kinds(run_findings(flow, conv, records), FOREIGN_ANSWERS) == []
    assert kinds(flow_findings(flow), FOREIGN_ANSWERS) == []


# -- memory where no conversation exists; a window of 0 ------------------------------------------------


def test_memory_on_in_a_workflow_app_is_memory_without_a_conversation():
    flow = load_flow(DSL / "svcvit__根据用户的意图进行回复.yml")
    assert flow.mode == "workflow"
    found = kinds(flow_findings(flow), NO_CONVERSATION)
    assert [(f.node_id, f.subject) for f in found] == [("1718246807593", "意图向量机")]
    assert "there is no conversation, so no history ever reaches it" in found[0].text
    assert "window 3 turns" in found[0].text


def test_a_chatflow_with_memory_has_a_conversation():
    assert kinds(flow_findings(load_flow(ROOT / "sample_data" / "flows" / "minimal-chat.yml")), NO_CONVERSATION) == []


def test_a_dify_window_of_zero_still_sends_history_from_the_second_turn():
    conv = linear(4)
    found = kinds(config_findings(conv, [MemoryConfig(window=0), MemoryConfig(window=1)]), WINDOW_ZERO)
    assert [(f.turn, f.subject) for f in found] == [(2, "dify no window")]
    assert found[0].text.endswith("so at turn 2 “dify no window” still receives 2 earlier messages.")
    assert Replay(conv, MemoryConfig(window=0)).ledger(2).kept  # the ledger agrees: history was included


def test_a_flow_node_with_a_window_of_zero_is_found_and_linked_to_its_first_history():
    data = {
        "format": "memlens-flow",
        "version": 1,
        "name": "zero",
        "nodes": [
            {"id": "start", "type": "start"},
            llm(
                "llm",
                title="Chat",
                memory={"window": {"enabled": True, "size": 0}, "query_prompt_template": "{{#sys.query#}}"},
            ),
            {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
        ],
        "edges": [["start", "llm"], ["llm", "answer"]],
    }
    static = kinds(flow_findings(flow_from_data(data, "zero")), WINDOW_ZERO)
    assert [(f.node_id, f.turn) for f in static] == [("llm", None)]
    flow, conv, records = run(data, ["one", "two", "three"])
    found = kinds(run_findings(flow, conv, records), WINDOW_ZERO)
    assert [(f.node_id, f.turn) for f in found] == [("llm", 2)]
    assert "at turn 2 “Chat” still receives 2 earlier messages" in found[0].text


# -- a budget that pruned silently ---------------------------------------------------------------------


def test_a_budget_that_pruned_messages_is_found_at_the_first_turn_the_ledger_prunes():
    conv = lisbon()
    config = MemoryConfig(context_size=300, plugin_token_counting=True)  # Dify 1.x prunes only with counting on
    replay = Replay(conv, config)
    pruned = {
        replay.numbers[p]: sum(e.reason == OVER_BUDGET for e in replay.ledger_at(p).entries)
        for p in conv.answered_turns()
    }
    first = min(t for t, n in pruned.items() if n)
    found = kinds(config_findings(conv, [config, MemoryConfig(strategy="buffer")]), SILENT_PRUNING)
    assert [(f.turn, f.subject) for f in found] == [(first, "dify no window + token counting")]
    assert found[0].data["turns"] == [t for t, n in sorted(pruned.items()) if n]
    assert found[0].data["pruned"] == [n for t, n in sorted(pruned.items()) if n]
    assert found[0].text.startswith(f"Budget exceeded at turn {first}: {pruned[first]} oldest message")
    assert "pruned silently by “dify no window + token counting” to fit its token budget of" in found[0].text


@pytest.mark.parametrize(
    "reserve, says",
    [
        (None, "context size − max_tokens − 3; as its docs describe: − the prompt)"),
        (0, "context size − max_tokens − the prompt)"),
        (1000, "context size − max_tokens − the prompt − 1,000)"),
    ],
)
def test_the_budget_findings_detail_says_what_dify_as_shipped_subtracts_for_the_node(reserve, says):
    config = MemoryConfig(context_size=300, plugin_token_counting=True, prompt_reserve=reserve)
    (found,) = kinds(config_findings(lisbon(), [config, MemoryConfig(strategy="buffer")]), SILENT_PRUNING)
    assert f"(Dify 1.x, with plugin token counting on: {says} and nothing in the run says so." in found.detail


def test_no_budget_finding_when_the_history_fits():
    found = config_findings(lisbon(), [MemoryConfig(window=3), MemoryConfig(strategy="buffer")])
    assert kinds(found, SILENT_PRUNING) == []


# -- one message filling most of the window ------------------------------------------------------------


def _with_long_answer(n=6, at=2, words=900):
    rows = []
    for i in range(1, n + 1):
        answer = ("lorem ipsum dolor " * words).strip() if i == at else f"short answer {i}"
        rows.append((str(i), str(i - 1) if i > 1 else None, f"question {i}", answer))
    return dify(rows)


def test_one_message_filling_most_of_the_window_is_found_while_it_stays():
    conv = _with_long_answer()
    config = MemoryConfig(window=3)
    found = kinds(config_findings(conv, [config, MemoryConfig(strategy="off")]), DOMINANT_MESSAGE)
    replay = Replay(conv, config)
    # Dify 1.x: a window of 3 rows holds the 2 turns before the current one, so turn 2's answer is
    # in memory at turns 3 and 4.
    assert [(f.turn, f.subject, f.data["turns"], f.data["message"]) for f in found] == [
        (3, "dify window 3", [3, 4], [1, 1])
    ]
    ledger = replay.ledger(3)
    big = max(ledger.kept, key=lambda e: e.tokens)
    assert big.ref == "2:answer" and found[0].data["tokens"] == big.tokens >= DOMINANT_MIN_TOKENS
    assert found[0].data["share"] == round(big.tokens / ledger.history_tokens, 4) > 0.5
    assert found[0].text.startswith(
        f"One message fills {big.tokens / ledger.history_tokens:.0%} of the history "
        f"“dify window 3” keeps at turn 3: turn 2's assistant message"
    )


def test_short_messages_never_fill_the_window():
    assert kinds(config_findings(lisbon(), [MemoryConfig(window=1), MemoryConfig(window=2)]), DOMINANT_MESSAGE) == []


# -- permanent trimming makes a larger window useless --------------------------------------------------


def test_window_memory_grown_later_keeps_fewer_than_its_new_window():
    conv = linear(10)
    config = MemoryConfig(strategy="window", window=4, window_changes=((6, 12),))
    found = kinds(config_findings(conv, [config, MemoryConfig(strategy="window", window=12)]), TRIMMED_WINDOW)
    ledger = Replay(conv, config).ledger(6)
    kept = len(ledger.kept)
    assert kept == 6 and any(e.reason == "trimmed_earlier" for e in ledger.entries)
    assert [(f.turn, f.data["in_window"], f.data["would_keep"]) for f in found] == [(6, 6, 10)]
    assert found[0].text.startswith(
        "At turn 6 “window 4 msgs” has a window of 12 messages, but it keeps only 6: "
        "4 messages trimmed in earlier turns are gone for good"
    )


def test_what_if_a_larger_window_brings_back_nothing_that_was_trimmed():
    conv = linear(10)
    config = MemoryConfig(strategy="window", window=4)
    found = larger_window_what_if(conv, config, 12, 8)
    assert found is not None and found.kind == TRIMMED_WINDOW and found.turn == 8
    assert "keeps 6 instead of 4, not 12" in found.text
    # On a conversation short enough that nothing was trimmed yet, the larger window fills at once.
    assert larger_window_what_if(linear(3), config, 12, 3) is None
    assert larger_window_what_if(conv, MemoryConfig(window=3), 12, 8) is None  # only Window Memory trims


def test_a_window_that_never_grows_is_not_reported():
    found = config_findings(
        linear(10),
        [
            MemoryConfig(strategy="window", window=4),
            MemoryConfig(strategy="window", window=6, window_changes=((5, 3),)),
        ],
    )
    assert kinds(found, TRIMMED_WINDOW) == []


# -- the conversation reaching a node twice -----------------------------------------------------------


def test_the_travel_demo_history_variable_holds_the_chat_history():
    flow = load_flow(DSL / "svcvit__旅行Demo.yml")
    histories = history_variables(flow)
    assert list(histories) == ["History"]
    assert "appends the user's messages" in histories["History"] and "“Agent”'s replies" in histories["History"]
    # Its agent node reads the variable but has no memory block: nothing reaches it twice.
    assert kinds(flow_findings(flow), HISTORY_TWICE) == []


def test_memory_and_a_history_variable_feeding_one_node_send_the_conversation_twice():
    flow = load_flow(DSL / "svcvit__旅行Demo.yml")
    data = flow.to_dict()
    agent = next(n for n in data["nodes"] if n["type"] == "agent")
    # The same flow with an LLM node that has memory on and renders the History variable.
    index = data["nodes"].index(agent)
    data["nodes"][index] = {
        "id": agent["id"],
        "type": "llm",
        "title": "Planner",
        "model": "memlens/demo",
        "prompt_template": [{"role": "user", "text": "Plan the trip. {{#conversation.History#}}"}],
        "memory": {"window": 10},
    }
    changed = flow_from_data(data, "travel")
    found = kinds(flow_findings(changed), HISTORY_TWICE)
    assert [(f.node_id, f.data["variable"]) for f in found] == [(agent["id"], "History")]
    assert found[0].text.startswith(
        "“Planner” gets the conversation twice: its memory replays the chat history, and "
        "its prompt also renders conversation.History"
    )
    with_memory_off = dict(data["nodes"][index])
    with_memory_off.pop("memory")
    data["nodes"][index] = with_memory_off
    assert kinds(flow_findings(flow_from_data(data, "travel")), HISTORY_TWICE) == []


def test_a_prompt_that_renders_the_query_while_memory_appends_it_sends_the_question_twice():
    flow = load_flow(DSL / "svcvit__记忆测试.yml")
    found = kinds(flow_findings(flow), HISTORY_TWICE)
    assert {f.subject for f in found} == {"主聊天流程", "是否需要CoT"}
    assert all(f.data["variable"] == "sys.query" for f in found)
    # The runtime agrees: the query is in the prompt twice.
    node = next(n for n in flow.llm_nodes if n.title == "主聊天流程")
    assert "receives the current question twice" in next(f.text for f in found if f.node_id == node.id)


def test_run_findings_link_a_twice_sent_query_to_the_first_turn_the_node_ran():
    data = {
        "format": "memlens-flow",
        "version": 1,
        "name": "twice",
        "nodes": [
            {"id": "start", "type": "start"},
            llm("llm", title="Chat", memory={"window": 3}, prompt=[{"role": "user", "text": "{{#sys.query#}}"}]),
            {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
        ],
        "edges": [["start", "llm"], ["llm", "answer"]],
    }
    flow, conv, records = run(data, ["hello there"])
    prompt = records[0].node_run("llm").prompt
    assert [m.content for m in prompt].count("hello there") == 2
    found = kinds(run_findings(flow, conv, records), HISTORY_TWICE)
    assert [(f.node_id, f.turn) for f in found] == [("llm", 1)]


# -- the list as a whole ----------------------------------------------------------------------------------


def test_findings_serialise_and_filter_by_turn():
    conv = lisbon()
    configs = [MemoryConfig(window=3), MemoryConfig(context_size=300)]
    found = config_findings(conv, configs, comparison=compare(conv, configs))
    assert found == [Finding.from_json(json.loads(json.dumps(f.to_json()))) for f in found]
    assert {f.turn for f in findings_at(found, 11)} == {11} and findings_at(found, 11)
    turns = [f.turn for f in found]
    assert turns == sorted(turns)


def test_a_sensible_config_on_a_plain_conversation_has_no_findings():
    conv = lisbon()
    configs = [MemoryConfig(window=20), MemoryConfig(strategy="buffer")]
    assert config_findings(conv, configs, comparison=compare(conv, configs)) == []


# -- turns named by their place on their thread, not by creation order ------------------------------------

_LABEL_IN_TEXT = re.compile(r"turn \d+(?: · \d+/\d+)?")


def _branched_lisbon() -> Conversation:
    """The Lisbon trip with turn 11 regenerated (continued by a turn 12) and turn 3 edited (continued
    by a turn 4): creation order puts them at 13–16."""
    conv = lisbon()

    def turn(mid, parent, query, answer):
        return Turn(
            id=mid,
            parent_id=parent,
            messages=(Message("user", query, QUERY, f"{mid}:q"), Message("assistant", answer, ANSWER, f"{mid}:a")),
            query_index=0,
            answer_index=1,
        )

    turns = list(conv.turns) + [
        turn("13", "10", conv.turns[10].query, "You are Dana; your booking is 4411."),
        turn("14", "13", "And what kind of food do I eat?", "Vegetarian."),
        turn("15", "2", "My booking reference is 7788, sorry.", "Noted."),
        turn("16", "15", "Remind me, what's my name and my booking reference?", "Dana, 7788."),
    ]
    return replace(conv, turns=turns)


def _assert_turns_named_by_label(conv, found):
    labels = {turn_label(conv, p) for p in range(len(conv.turns))}
    numbers = turn_numbers(conv)
    for f in found:
        named = _LABEL_IN_TEXT.findall(f.text)
        assert set(named) <= labels, f.text
        if f.turn is not None:
            assert turn_label(conv, numbers.index(f.turn)) in named, f.text


def test_config_findings_on_a_regenerated_and_an_edited_branch_name_turns_by_their_thread_labels():
    conv = _branched_lisbon()
    configs = [MemoryConfig(window=2), MemoryConfig(window=3)]
    found = config_findings(conv, configs, comparison=compare(conv, configs))
    texts = [f.text for f in found]
    assert (
        "At turn 11 · 1/2 the question is about the user's booking number (4411), but “dify window 2” no longer has "
        "turn 3 · 1/2, where it was stated (outside window of 2 rows: the conversation's newest on any branch, the current turn's one of them)."
    ) in texts
    # The regenerated turn 11 (created 13th) and the edited turn 3 (created 15th) keep their places.
    regenerated = next(f for f in found if f.kind == DOCS_VS_CODE and f.turn == 13 and f.subject == "dify window 2")
    assert regenerated.text.startswith("At turn 11 · 2/2, “dify window 2”: ")
    assert regenerated.text.endswith("the same happens at 1 later turn (turn 3 · 2/2).")
    ranges = next(f for f in found if f.kind == DOCS_VS_CODE and f.turn == 4)
    assert ranges.text.endswith("(turns 5–10, 11 · 1/2, 12).")
    assert not any(re.search(r"turn 1[3-6]\b", t) for t in texts)  # creation-order numbers never show
    _assert_turns_named_by_label(conv, found)


def test_run_findings_after_regenerate_and_edit_name_turns_by_their_thread_labels(tmp_path):
    from core.service.sessions import ConversationService
    from core.service.sources import load_stored
    from core.store.db import Database

    db = Database(f"sqlite:///{tmp_path / 'branches.db'}")
    service = ConversationService(db, llm=DemoClient())
    conv_id = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml").flow_id).id
    queries = json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text())
    sent = [service.send(conv_id, q) for q in queries[:5]]
    service.regenerate(conv_id, sent[4].id)  # turn 5 · 2/2, created 6th
    service.send(conv_id, "What's my name?")  # turn 6, created 7th
    service.send(conv_id, "What is my order number?")  # turn 7, created 8th
    service.edit(conv_id, sent[2].id, "I eat anything.")  # turn 3 · 2/2, created 9th
    source = load_stored(db, conv_id)
    db.dispose()
    found = run_findings(source.flow, source.conversation, source.records)
    texts = [f.text for f in found]
    assert (
        "At turn 6 the question is about the user's name, but “Responder” no longer has turn 1, where it was stated "
        "(outside window of 4 rows: the conversation's newest on any branch, the current turn's one of them)."
    ) in texts
    assert any(t.startswith("At turn 7 the question is about the user's order number") for t in texts)
    assert any("at turn 5 · 2/2 that turn is out of its memory" in t for t in texts)
    assert any("at turn 3 · 2/2 that turn is out of its memory" in t for t in texts)
    assert not any(re.search(r"turn (8|9)\b", t) for t in texts)
    _assert_turns_named_by_label(source.conversation, found)


# -- one list of findings for every page and the report -------------------------------------------------


def test_findings_for_a_recorded_source_lists_its_configs_and_its_nodes_as_the_report_does(tmp_path):
    from dataclasses import replace as with_

    from core.analysis.findings import findings_for
    from core.report.build import build_report
    from core.service.sessions import ConversationService
    from core.service.sources import load_stored
    from core.store.db import Database

    db = Database(f"sqlite:///{tmp_path / 'recorded.db'}")
    service = ConversationService(db, llm=DemoClient())
    conv_id = service.start(service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml").flow_id).id
    for q in json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text()):
        service.send(conv_id, q)
    source = load_stored(db, conv_id)
    db.dispose()
    conv, configs = source.conversation, [MemoryConfig(window=2), MemoryConfig(strategy="buffer")]
    comparison = compare(conv, configs)

    found = findings_for(source, comparison=comparison)
    by_configs = config_findings(conv, configs, comparison=comparison)
    by_nodes = run_findings(source.flow, conv, source.records)
    assert by_configs and by_nodes
    assert sorted(map(repr, found)) == sorted(map(repr, by_configs + by_nodes))
    assert [f.turn is not None for f in found] == sorted(f.turn is not None for f in found)  # flow-wide first
    assert build_report(source, configs).findings == found  # the report lists what the pages list

    assert findings_for(with_(source, records=[])) == flow_findings(source.flow)  # runs not loaded: the flow alone
    assert findings_for(source) == by_nodes  # Present's "the flow's own nodes"
    assert findings_for(conv) == []  # a bare conversation and no config: nothing to say


def test_the_reports_findings_link_to_their_turns_by_thread_label():
    from core.analysis.source import Source
    from core.report.build import build_report
    from core.report.html import report_html

    conv = _branched_lisbon()
    html = report_html(build_report(Source(conv), [MemoryConfig(window=2), MemoryConfig(window=3)]))
    findings = html[html.index('<ol class="findings">') : html.index("</ol>", html.index('<ol class="findings">'))]
    links = re.findall(r'<a href="#turn-(\d+)">([^<]*)</a>', findings)
    assert ("13", "turn 11 · 2/2") in links and ("11", "turn 11 · 1/2") in links
    numbers = turn_numbers(conv)
    assert all(label == turn_label(conv, numbers.index(int(n))) for n, label in links)


@pytest.mark.parametrize(
    "reserve, says",
    [
        (None, "Dify 1.x subtracts only 3 (it counts an empty list) and compares"),
        (0, "Dify 1.x subtracts the prompt too, then compares"),
        (1000, "Dify 1.x subtracts the prompt too and 1,000 tokens more, then compares"),
    ],
)
def test_a_budget_difference_says_what_dify_as_shipped_subtracts_for_the_node(reserve, says):
    """The LLM node budgets after an empty list; the Question Classifier (reserve 0) and the Parameter
    Extractor (1,000) after their own prompt."""
    from core.analysis.findings.profiles import CAUSE_BUDGET, ProfileCut, _explain_difference

    causes, text = _explain_difference(10, ProfileCut(3, 0, 900), ProfileCut(3, 2, 700), 0, True, 120, reserve=reserve)
    assert causes == (CAUSE_BUDGET,)
    assert text == (
        f"The docs' budget subtracts the prompt (120 tokens) and is 900 tokens, pruning 0 messages; "
        f"{says} the history counted as a list with 700 tokens, pruning 2 messages."
    )
