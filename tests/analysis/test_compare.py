"""The compare computations: heatmap cells equal the ledgers, series equal the summaries, facts
are lost at the turns the ledgers say, and the turn diff follows the thread."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.analysis.compare.walk as compare_module
from core.analysis.compare import (
    HEATMAP_COLUMNS,
    FactFate,
    NamedConfig,
    TrackedFact,
    compare,
    detect_facts,
    fact_course,
    fact_sentence,
    heatmap_window,
    message_columns,
    named_configs,
    retention_matrix,
    track_facts,
    turn_diff,
    turn_series,
)
from core.analysis.errors import CompareError
from core.io import read_conversations
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import STRATEGIES
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn
from core.model.ledger import KEPT, MEMORY_OFF, OTHER_BRANCH, OUTSIDE_WINDOW, SUMMARIZED, WORDS_SENT
from tests.builders import dify, linear, openai
from tests.conftest import FIXTURES, ROOT
from tests.memory import test_ledger_pipeline as ledger_pipeline

T = FIXTURES / "transcripts"


def empties():
    """Answers 2 and 4 are empty: the ledger says ``empty`` for them."""
    return linear(7, answer=lambda i: "" if i in (2, 4) else f"answer {i}")


CONVERSATIONS = {
    "linear": lambda: linear(14),
    "empty answers": empties,
    "empty recent answers": lambda: linear(7, answer=lambda i: "" if i % 3 == 0 else f"answer number {i}"),
    "tau-bench tools": lambda: read_conversations(T / "taubench__gpt-4o-airline.sample.jsonl")[2],
    "dify web branches": lambda: read_conversations(T / "dify-web__realWorldMessages.json")[0],
    "dify web legacy and roots": lambda: read_conversations(T / "dify-web__multiRootNodesWithLegacyTestMessages.json")[
        0
    ],
    "oasst tree": lambda: read_conversations(T / "oasst__en_100_tree.subset.jsonl")[0],
    "sharegpt tools": lambda: read_conversations(T / "llamafactory__glaive_toolcall_en_demo.subset.json")[9],
    "v1 reasoning": lambda: read_conversations(T / "llamafactory__reason_tool_use_demo_50.subset.jsonl")[0],
    "bfcl user only": lambda: read_conversations(T / "bfcl__memory_notetaker.json")[0],
}

CONFIGS = [
    MemoryConfig(window=3),
    MemoryConfig(window=3, fidelity="code"),
    MemoryConfig(window=3, fidelity="code", sends_empty=True, history_budget=2000, plugin_token_counting=True),
    MemoryConfig(context_size=900),
    MemoryConfig(granularity="all_messages", window=2),
    MemoryConfig(strategy="window", window=4, window_changes=((5, 9),)),
    MemoryConfig(strategy="window", window=3),
    MemoryConfig(strategy="buffer", context_size=1200),
    MemoryConfig(strategy="off"),
    MemoryConfig(scope="session"),
    MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=700),
]
for _name in STRATEGIES:  # every other strategy with its defaults, as long as they are valid
    if _name not in {c.strategy for c in CONFIGS}:
        try:
            Replay(linear(2), MemoryConfig(strategy=_name))
        except ConfigError:
            continue
        CONFIGS.append(MemoryConfig(strategy=_name))


def ledger_reasons(replay, position):
    return [e.reason for e in replay.ledger_at(position).entries]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label() + f" {c.granularity} {c.scope}")
@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_every_heatmap_cell_equals_the_ledger(name, config):
    conv = CONVERSATIONS[name]()
    replay = Replay(conv, config)
    window = heatmap_window(conv, max_rows=10_000, max_columns=10_000)
    assert window.whole
    matrix = retention_matrix(replay, window)
    assert matrix.row_positions == conv.answered_turns()
    last = matrix.row_positions[-1]  # the last row's own messages are earlier than no row
    assert [c.ref for c in matrix.columns] == [m.ref for t in conv.turns[:last] for m in t.messages]
    for r, position in enumerate(matrix.row_positions):
        expected = ledger_reasons(replay, position)
        assert matrix.cells[r][: len(expected)] == expected, (name, position)
        assert all(x is None for x in matrix.cells[r][len(expected) :])
        assert matrix.hidden_kept[r] == 0


def _cells_equal_the_ledgers(conv, replay) -> list[list]:
    """The whole matrix's cells, each row checked against its turn's ledger."""
    matrix = retention_matrix(replay, heatmap_window(conv, max_rows=10_000, max_columns=10_000))
    for r, position in enumerate(matrix.row_positions):
        expected = ledger_reasons(replay, position)
        assert matrix.cells[r][: len(expected)] == expected
    return matrix.cells


def test_the_cells_of_a_compaction_that_clears_tool_results_equal_the_ledgers():
    """Clearing reads each message's role: the walk's cells must say "cleared" where the ledger does."""
    from core.model.ledger import CLEARED
    from tests.memory.test_compaction import agent_chat, compaction, context_for, full_history

    conv = agent_chat(6)
    fixed, full = full_history(conv, 7)
    replay = Replay(conv, compaction(context_size=context_for(fixed + full.history_tokens - 1)))
    assert CLEARED in _cells_equal_the_ledgers(conv, replay)[-1]


def test_the_cells_of_a_window_memory_node_with_an_input_say_empty_where_its_ledgers_do():
    """A Window Memory node whose history an input can set plans each call: an empty answer inside
    its window is left out as empty, in the walk's cells as in the ledgers."""
    from core.model.ledger import EMPTY

    conv = CONVERSATIONS["empty recent answers"]()
    written = {4: (Message("user", "the history an input set", "query", "input:1"),)}
    replay = Replay(conv, MemoryConfig(strategy="window", window=6), history_inputs=written.get)
    assert EMPTY in _cells_equal_the_ledgers(conv, replay)[-1]


def test_a_windowed_heatmap_shows_the_last_rows_and_latest_columns_and_counts_what_is_hidden():
    conv = linear(100)
    replay = Replay(conv, MemoryConfig(window=12))
    window = heatmap_window(conv, max_rows=10, max_columns=30)
    assert [replay.numbers[p] for p in window.rows] == list(range(91, 101))
    assert (window.first_column, window.last_column) == (168, 198) and not window.whole
    matrix = retention_matrix(replay, window)
    assert len(matrix.columns) == 30 and matrix.columns[0].ref == "85:query"
    for r, position in enumerate(window.rows):
        entries = replay.ledger_at(position).entries
        shown = [e.reason for e in entries[168:]]
        assert matrix.cells[r] == shown + [None] * (30 - len(shown))
        assert matrix.hidden_kept[r] == sum(1 for e in entries[:168] if e.kept)
    # Dify 1.x: 12 rows are turn 91 and the 11 before it, 80–90 (22 messages); columns start at
    # turn 85, so turns 80–84 (10 messages) are off-screen.
    assert matrix.hidden_kept[0] == 10 and matrix.hidden_kept[-1] == 0


def test_a_window_can_end_at_any_answered_turn():
    conv = linear(30)
    window = heatmap_window(conv, last_turn=12, max_rows=5)
    assert [p + 1 for p in window.rows] == [8, 9, 10, 11, 12]
    assert window.last_column == 22
    with pytest.raises(CompareError, match="turn 31 is not an answered turn of this conversation"):
        heatmap_window(conv, last_turn=31)


def test_short_conversations_fit_one_window():
    conv = read_conversations(T / "taubench__gpt-4o-airline.sample.jsonl")[0]
    window = heatmap_window(conv)
    assert window.whole and window.total_columns <= HEATMAP_COLUMNS


def test_walk_and_ledger_fallback_give_the_same_matrix_and_facts(monkeypatch):
    conv = read_conversations(T / "dify-web__realWorldMessages.json")[0]
    configs = [MemoryConfig(window=2), MemoryConfig(strategy="window", window=3)]
    facts = [((0, 0), "first question"), ((2, 1), "an answer")]
    fast = compare(conv, configs, facts=facts)
    monkeypatch.setattr(compare_module, "_engine_walk", lambda replay: None)  # every row from its ledger
    slow = compare(conv, configs, facts=facts)
    assert [m.cells for m in fast.matrices] == [m.cells for m in slow.matrices]
    assert [m.hidden_kept for m in fast.matrices] == [m.hidden_kept for m in slow.matrices]
    assert [[f.present for f in row] for row in fast.fates] == [[f.present for f in row] for row in slow.fates]


def test_hover_names_the_message_its_tokens_and_the_reason():
    conv = linear(6)
    matrix = retention_matrix(Replay(conv, MemoryConfig(window=2)))
    r = matrix.rows.index(5)
    c = [col.ref for col in matrix.columns].index("1:query")
    assert matrix.cells[r][c] == OUTSIDE_WINDOW
    text = matrix.hover(r, c)
    assert text.startswith(f"turn 1 · user · {matrix.tokens[c]:,} tokens · question number 1")
    assert "outside window of 2 rows: the conversation's newest on any branch, the current turn's one of them" in text
    assert "not yet written" in matrix.hover(0, c + 2)


# -- series -----------------------------------------------------------------------------------------


def test_series_follow_the_summaries_of_each_config():
    conv = read_conversations(T / "taubench__gpt-4o-airline.sample.jsonl")[0]
    for config in (MemoryConfig(window=3), MemoryConfig(context_size=3000), MemoryConfig(strategy="off")):
        replay = Replay(conv, config)
        series = turn_series(replay)
        summaries = replay.summaries()
        assert series.turns == [s.turn for s in summaries]
        assert series.kept == [len(replay.ledger(s.turn).kept) for s in summaries]
        assert series.history_tokens == [replay.ledger(s.turn).history_tokens for s in summaries]
        assert series.oldest_kept_turn == [s.oldest_kept_turn for s in summaries]
        assert series.budget == [s.budget for s in summaries]


def test_oldest_turn_remembered_moves_with_the_window():
    series = turn_series(Replay(linear(8), MemoryConfig(window=3)))
    # Dify 1.x: 3 rows are the current turn and the 2 before it.
    assert series.oldest_kept_turn == [None, 1, 1, 2, 3, 4, 5, 6]


# -- facts ------------------------------------------------------------------------------------------


def brute_force_present(replay, fact):
    """Per answered turn: is a statement of the fact in the ledger's kept set (or the query)?"""
    conv = replay.conversation
    out = []
    for p in conv.answered_turns():
        stated = [(q, j) for q, j in fact.messages if q < p or (q == p and j == conv.turns[p].query_index)]
        if not stated:
            out.append(None)
            continue
        if any(q == p for q, _ in stated):
            out.append(True)
            continue
        thread = set(conv.tree.thread(p))
        on = [(q, j) for q, j in stated if q in thread]
        if not on:
            out.append(None)
            continue
        kept = {(e.position, e.index) for e in replay.ledger_at(p).entries if e.kept}
        out.append(any(x in kept for x in on))
    return out


def lisbon():
    return read_conversations(ROOT / "sample_data" / "conversations" / "lisbon-trip.json")[0]


def restated():
    """Name given at turn 1 and again at turn 6."""
    return linear(12, query=lambda i: "my name is Dana" if i in (1, 6) else f"question number {i}")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label() + f" {c.granularity} {c.scope}")
@pytest.mark.parametrize("make", [lisbon, restated, CONVERSATIONS["dify web branches"]])
def test_fact_timelines_equal_what_the_ledgers_keep(make, config):
    conv = make()
    facts = detect_facts(conv) or track_facts(conv, [((0, 0), "the first question")])
    result = compare(conv, [config, MemoryConfig(strategy="buffer")], facts=facts)
    replay = Replay(conv, config)
    numbers = replay.numbers
    for f, fact in enumerate(facts):
        fate = result.fates[f][0]
        expected = brute_force_present(replay, fact)
        assert fate.present == expected, fact.label
        first_lost = next((numbers[p] for p, v in zip(conv.answered_turns(), expected) if v is False), None)
        assert fate.lost_turn == first_lost


def test_lisbon_name_is_lost_at_turn_4_with_window_3_and_never_with_buffer():
    result = compare(lisbon(), [MemoryConfig(window=3), MemoryConfig(strategy="buffer")])
    labels = [f.label for f in result.facts]
    assert labels == ["the user's name", "the user's diet", "the user's booking number"]
    name = result.fates[0]
    # Dify 1.x: window 3 sends the 2 turns before the current one, so turn 4 no longer has turn 1.
    assert (name[0].stated_turn, name[0].lost_turn, name[0].lost_reason) == (1, 4, OUTSIDE_WINDOW)
    assert name[1].lost_turn is None
    assert result.sentences[0] == "the user's name is lost at turn 4 with dify window 3; never with buffer (everything)"
    assert result.sentences[2].startswith("the user's booking number is lost at turn 6 with dify window 3")


def test_a_restated_fact_counts_as_remembered_while_any_statement_is_kept():
    conv = restated()
    fact = detect_facts(conv)[0]
    assert fact.messages == ((0, 0), (5, 0))
    fate = compare(conv, [MemoryConfig(window=3), MemoryConfig(window=1)], facts=[fact]).fates[0][0]
    # Dify 1.x, window 3: each turn sees the 2 before it.
    #             turn: 1     2     3     4      5      6     7     8     9      10     11     12
    assert fate.present == [True, True, True, False, False, True, True, True, False, False, False, False]
    assert fate.lost_turn == 4


def test_a_restated_fact_says_where_it_came_back_and_where_it_left_again():
    conv = restated()
    result = compare(conv, [MemoryConfig(window=3), MemoryConfig(strategy="buffer")])
    w3, buffer = result.fates[0]
    # Gone at turn 4, restated at turn 6 (its own query has it), gone again from turn 9.
    assert (w3.lost_label, w3.back_label, w3.gone_label, w3.returns) == ("turn 4", "turn 6", "turn 9", 1)
    assert w3.gone_reason == OUTSIDE_WINDOW and not w3.has_it_now and w3.state == "lost"
    assert buffer.state == "kept" and buffer.has_it_now and buffer.comeback_words() == ""
    assert result.sentences[0] == (
        "the user's name is lost at turn 4 with dify window 3 (back at turn 6, gone again "
        "from turn 9); never with buffer (everything)"
    )
    assert w3.cell_text() == "lost at turn 4 (outside window); back at turn 6, gone again from turn 9 (outside window)"
    assert w3.to_json()["gone_label"] == "turn 9" and w3.to_json()["has_it_now"] is False
    # Stated again at the newest turn: back, and still there.
    conv = linear(8, query=lambda i: "my name is Dana" if i in (1, 8) else f"question number {i}")
    w3 = compare(conv, [MemoryConfig(window=3), MemoryConfig(strategy="buffer")]).fates[0][0]
    assert (w3.lost_label, w3.back_label, w3.gone_label, w3.gone_reason) == ("turn 4", "turn 8", None, None)
    assert w3.has_it_now and w3.state == "back"
    assert w3.cell_text() == "lost at turn 4 (outside window); back at turn 8, still there at the newest turn"


@pytest.mark.parametrize(
    "present, course",
    [
        ([], (None, None, None, 0)),
        ([None, True, True], (None, None, None, 0)),
        ([True, False, False], (1, None, None, 0)),
        ([True, False, None, True], (1, 3, None, 1)),
        ([True, False, True, False, True, False, False], (1, 2, 5, 2)),
        ([False, True, None, False, None], (0, 1, 3, 1)),
    ],
)
def test_fact_course_reads_the_first_loss_the_first_return_and_the_last_departure(present, course):
    assert fact_course(present) == course


def test_fact_sentence_counts_the_returns():
    fact = TrackedFact("the user's name", ((0, 0),))
    fate = FactFate(fact, "w3", 1, [], 4, OUTSIDE_WINDOW, "turn 1", "turn 4", returns=3, back_label="turn 6")
    assert fact_sentence([fate]) == (
        "the user's name is lost at turn 4 with w3 (back at turn 6 and 2 more times, still there at the newest turn)"
    )


def test_memory_off_loses_a_fact_at_the_next_turn_and_says_so():
    result = compare(
        lisbon(), [MemoryConfig(strategy="off"), MemoryConfig(window=10)], facts=[((0, 0), "the user's name")]
    )
    assert result.fates[0][0].lost_turn == 2 and result.fates[0][0].lost_reason == MEMORY_OFF
    assert result.sentences == ["the user's name is lost at turn 2 with memory off and at turn 11 with dify window 10"]


def test_a_fact_on_one_branch_is_not_lost_on_another():
    conv = dify(
        [
            ("a", None, "my name is Dana", "hi Dana"),
            ("b", "a", "q2", "a2"),
            ("c", None, "fresh start", "ok"),
            ("d", "c", "q4", "a4"),
        ]
    )
    fate = compare(conv, [MemoryConfig(), MemoryConfig(window=1)]).fates[0][0]
    assert fate.present == [True, True, None, None] and fate.lost_turn is None


def test_facts_marked_by_ref_group_by_label_and_bad_marks_are_clear():
    conv = lisbon()
    facts = track_facts(conv, [(1, "the user's name"), (3, "the user's diet"), (7, "the user's name")])
    assert [(f.label, f.messages) for f in facts] == [
        ("the user's name", ((0, 0), (3, 0))),
        ("the user's diet", ((1, 0),)),
    ]
    with pytest.raises(CompareError, match="no message with ref 999"):
        track_facts(conv, [(999, "x")])
    with pytest.raises(CompareError, match="has no label"):
        track_facts(conv, [(1, "")])
    with pytest.raises(CompareError, match="message \\(40, 0\\) does not exist"):
        track_facts(conv, [((40, 0), "x")])


def test_bfcl_probes_are_the_facts_to_follow():
    conv = read_conversations(T / "bfcl__memory_notetaker.json")[0]
    result = compare(conv, [MemoryConfig(window=2), MemoryConfig(strategy="buffer")])
    # Probes with the same source sentence are one fact (11 probes, 10 distinct statements).
    assert len(conv.meta["facts"]) == 11
    assert [f.label for f in result.facts] == list(dict.fromkeys(f["label"] for f in conv.meta["facts"]))
    first = result.facts[0]
    assert first.label.startswith("Monday: Need to finalize Q1 budget report")
    assert result.fates[0][0].lost_turn == 3 and result.fates[0][1].lost_turn is None


def test_fact_sentence_names_summaries_and_groups_configs():
    fact = TrackedFact("the user's name", ((0, 0),))

    def fate(label, turn, reason=OUTSIDE_WINDOW):
        return FactFate(fact, label, 1, [], turn, reason if turn else None)

    assert (
        fact_sentence([fate("window 3", 7), fate("window 10", None)])
        == "the user's name is lost at turn 7 with window 3; never with window 10"
    )
    assert (
        fact_sentence([fate("w5", 9), fate("w3", 7), fate("sum", 4, SUMMARIZED), fate("a", None), fate("b", None)])
        == "the user's name is folded into a summary at turn 4 with sum; lost at turn 7 with w3 and at turn 9 with w5; "
        "never with a or b"
    )
    assert fact_sentence([fate("a", None), fate("b", None)]) == "the user's name stays in memory with a and b"


# -- turn diff --------------------------------------------------------------------------------------


def test_turn_diff_shows_the_previous_round_entering_and_the_oldest_leaving():
    replay = Replay(linear(6), MemoryConfig(window=2))
    diff = turn_diff(replay, 4)  # Dify 1.x: a window of 2 rows is the current turn and the one before
    assert diff.previous_turn == 3
    assert [x.ref for x in diff.entered] == ["3:query", "3:answer"]
    assert [(x.ref, x.reason) for x in diff.left] == [("2:query", OUTSIDE_WINDOW), ("2:answer", OUTSIDE_WINDOW)]
    assert diff.stayed == 0
    assert diff.token_delta == replay.ledger(4).history_tokens - replay.ledger(3).history_tokens
    first = turn_diff(replay, 1)
    assert first.previous_turn is None and first.entered == [] and first.left == [] and first.token_delta == 0


def test_turn_diff_on_a_branch_compares_with_the_turn_it_continues():
    conv = dify([("a", None, "q1", "a1"), ("b", "a", "q2", "a2"), ("c", "a", "q2 edited", "a2'")])
    replay = Replay(conv, MemoryConfig())
    diff = turn_diff(replay, 3)
    assert diff.previous_turn == 1
    assert [x.ref for x in diff.entered] == ["a:query", "a:answer"] and diff.left == []


def test_turn_diff_of_window_memory_counts_tool_messages():
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    conv = openai(
        [
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": "r"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "u3"},
        ]
    )
    diff = turn_diff(Replay(conv, MemoryConfig(strategy="window", window=3)), 3)
    assert [x.ref for x in diff.entered] == [3, 4, 5]
    assert [x.ref for x in diff.left] == [0, 1]


def test_turn_diff_rejects_unknown_turns():
    with pytest.raises(ConfigError, match="turn 9 does not exist"):
        turn_diff(Replay(linear(3), MemoryConfig()), 9)


# -- configs and the whole comparison -----------------------------------------------------------------


def test_named_configs_round_trip_and_get_distinct():
    configs = named_configs(
        [
            MemoryConfig(window=3),
            MemoryConfig(window=3, model="gpt-4o"),
            {"label": "tight", "strategy": "dify", "context_size": 800},
        ]
    )
    assert [c.label for c in configs] == ["dify window 3", "dify window 3 (2)", "tight"]
    for c in configs:
        assert NamedConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(ConfigError, match="unknown memory setting"):
        NamedConfig.from_dict({"label": "x", "windw": 3})
    with pytest.raises(ConfigError, match="window 9000000 is out of range"):
        named_configs([{"window": 9_000_000}])


def test_compare_needs_two_to_six_configs():
    conv = linear(3)
    with pytest.raises(CompareError, match="2 to 6 memory configs; got 1"):
        compare(conv, [MemoryConfig()])
    with pytest.raises(CompareError, match="got 7"):
        compare(conv, [MemoryConfig(window=n) for n in range(1, 8)])
    with pytest.raises(CompareError, match="no user turn"):
        compare(
            Conversation("x", [Turn("0", None, (Message("assistant", "hi", ANSWER, 0),), None, 0)]),
            [MemoryConfig(), MemoryConfig(window=1)],
        )


def test_compare_three_configs_on_a_sample_matches_the_ledgers_and_serialises():
    conv = lisbon()
    configs = [MemoryConfig(window=2), MemoryConfig(strategy="window", window=4), MemoryConfig(strategy="buffer")]
    result = compare(conv, configs)
    assert [m.label for m in result.matrices] == [c.label() for c in configs]
    assert result.turns == list(range(1, 13))
    # the window's columns: every message before the last turn, made without the others
    assert (
        result.columns
        == message_columns(conv)[: result.window.last_column]
        == message_columns(conv, 0, result.window.last_column)
    )
    assert message_columns(conv, 5, 9) == message_columns(conv)[5:9]
    for matrix, config in zip(result.matrices, configs):
        replay = Replay(conv, config)
        for r, position in enumerate(matrix.row_positions):
            expected = ledger_reasons(replay, position)
            assert matrix.cells[r][: len(expected)] == expected
    assert len(result.sentences) == len(result.facts) == 3
    text = json.dumps(result.to_json())
    assert json.loads(text)["configs"][1]["strategy"] == "window"


def test_user_facts_override_the_detected_ones():
    result = compare(lisbon(), [MemoryConfig(window=3), MemoryConfig(window=6)], facts=[((4, 1), "Baixa advice")])
    assert [f.label for f in result.facts] == ["Baixa advice"]
    fate = result.fates[0][0]
    assert fate.stated_turn == 5 and fate.present[:5] == [None] * 5  # an answer is there from the next turn
    assert fate.lost_turn == 8
    assert compare(lisbon(), [MemoryConfig(), MemoryConfig(window=1)], facts=[]).facts == []


def test_kept_cells_are_the_kept_messages_of_each_row():
    conv = read_conversations(T / "oasst__en_100_tree.subset.jsonl")[1]
    replay = Replay(conv, MemoryConfig())
    matrix = retention_matrix(replay)
    for r, position in enumerate(matrix.row_positions):
        kept = {(c.position, c.index) for c, x in zip(matrix.columns, matrix.cells[r]) if x == KEPT}
        assert kept == {(e.position, e.index) for e in replay.ledger_at(position).kept}
        others = {c.position for c, x in zip(matrix.columns, matrix.cells[r]) if x == OTHER_BRANCH}
        assert not others & set(conv.tree.thread(position))


def test_columns_describe_every_message_once():
    conv = read_conversations(T / "llamafactory__glaive_toolcall_en_demo.subset.json")[0]
    cols = message_columns(conv)
    assert [c.column for c in cols] == list(range(len(cols)))
    assert [c.kind for c in cols[:4]] == [QUERY, "tool_call", "tool_result", ANSWER]
    assert cols[1].text.startswith("→ calculate_area(")


@st.composite
def marked(draw):
    """A generated branched conversation (tool rounds, empty answers) and facts marked on any of its
    messages, each stated once or several times."""
    conv = draw(ledger_pipeline.conversations())
    where = [(p, j) for p, t in enumerate(conv.turns) for j in range(len(t.messages))]
    facts = []
    for k in range(draw(st.integers(1, 3))):
        for at in draw(st.lists(st.sampled_from(where), min_size=1, max_size=4)):
            facts.append((at, f"fact {k}"))
    return conv, facts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marked(), ledger_pipeline.configs)
def test_every_facts_course_read_from_the_walk_is_what_each_turns_ledger_says(conv_facts, config):
    conv, facts = conv_facts
    fast = compare(conv, [config, MemoryConfig(strategy="buffer")], facts=facts)
    walk = compare_module._engine_walk
    compare_module._engine_walk = lambda replay: None  # every row from its ledger
    try:
        slow = compare(conv, [config, MemoryConfig(strategy="buffer")], facts=facts)
    finally:
        compare_module._engine_walk = walk
    for a, b in zip(fast.fates, slow.fates):
        assert [(f.present, f.lost_turn, f.lost_reason, f.gone_label, f.gone_reason) for f in a] == [
            (f.present, f.lost_turn, f.lost_reason, f.gone_label, f.gone_reason) for f in b
        ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marked(), ledger_pipeline.configs)
def test_a_fact_is_present_at_a_turn_exactly_when_its_ledger_sends_a_statement_of_it(conv_facts, config):
    """The literal rule, turn by turn from each ledger: present when a statement on the turn's thread is
    sent (or is the turn's own query); else absent, with the newest such statement's reason, once one
    was made on the thread; unknown before that."""
    _facts_follow_the_ledgers(conv_facts, config)


#: Strategies whose memory is not a plain window of turns, with budgets that make them leave messages
#: out: the first four plan each turn's memory message by message (an older statement may be sent while
#: a newer one is not); the Window Memory node keeps its own store, moved on once per call.
PLANNING = [
    MemoryConfig(strategy="trim", max_history_tokens=60),
    MemoryConfig(strategy="summary_buffer", max_history_tokens=60),
    MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=150),
    MemoryConfig(strategy="compaction", compaction_profile="exact", context_size=400),
    MemoryConfig(strategy="window", window=3),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marked(), st.sampled_from(PLANNING))
def test_a_fact_follows_the_ledgers_of_strategies_that_plan_their_memory(conv_facts, config):
    _facts_follow_the_ledgers(conv_facts, config)


def _facts_follow_the_ledgers(conv_facts, config):
    conv, facts = conv_facts
    result = compare(conv, [config, MemoryConfig(strategy="off")], facts=facts)
    replay = Replay(conv, config)
    answered = conv.answered_turns()
    for row in result.fates:
        fate = row[0]
        expected, reasons = [], []
        for p in answered:
            ledger = {(e.position, e.index): e.reason for e in replay.ledger_at(p).entries}
            thread = set(conv.tree.thread(p)[:-1])
            stated = [(q, j) for q, j in fate.fact.messages if q in thread]
            if any(q == p and j == conv.turns[p].query_index for q, j in fate.fact.messages) or any(
                ledger[s] in WORDS_SENT for s in stated
            ):
                expected.append(True)
                reasons.append(None)
            elif stated:
                expected.append(False)
                reasons.append(ledger[max(stated)])
            else:
                expected.append(None)
                reasons.append(None)
        assert fate.present == expected
        if fate.lost_turn is not None:
            k = [replay.numbers[p] for p in answered].index(fate.lost_turn)
            assert fate.lost_reason == reasons[k]


@st.composite
def marked_chain(draw):
    """A generated conversation that never branched, with facts marked on any of its messages (the walk
    asks each fact only where it may change: :class:`core.analysis.compare.facts.ChainFacts`)."""
    from dataclasses import replace

    conv = draw(ledger_pipeline.conversations())
    turns = [replace(t, parent_id=conv.turns[i - 1].id if i else None) for i, t in enumerate(conv.turns)]
    conv = Conversation(id="h", turns=turns, system_prompt=conv.system_prompt)
    where = [(p, j) for p, t in enumerate(conv.turns) for j in range(len(t.messages))]
    facts = [
        (at, f"fact {k}")
        for k in range(draw(st.integers(1, 4)))
        for at in draw(st.lists(st.sampled_from(where), min_size=1, max_size=5))
    ]
    return conv, facts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marked_chain(), st.one_of(ledger_pipeline.configs, st.sampled_from(PLANNING)))
def test_a_never_branched_conversations_facts_follow_the_ledgers_turn_by_turn(conv_facts, config):
    assert conv_facts[0].one_thread()
    _facts_follow_the_ledgers(conv_facts, config)


def test_a_fact_stated_in_every_turn_is_held_as_the_turns_where_it_changes():
    """Each of 300 facts is in memory for a few turns, then out for good: its timeline holds two
    changes, and the bundle writes those, not a value per turn."""
    conv = linear(300, query=lambda i: f"My name is Dana{i}. Question {i}")
    result = compare(conv, [MemoryConfig(window=3), MemoryConfig(strategy="buffer")])
    assert len(result.facts) == 300
    w3, buffer = result.fates[10]
    # Dify as shipped: 3 rows are the turn and the 2 before it
    assert w3.present.changes == [(10, True), (13, False)] and buffer.present.changes == [(10, True)]
    assert w3.to_json()["present"] == [[10, True], [13, False]] and len(w3.present) == 300
    assert w3.present == [None] * 10 + [True] * 3 + [False] * 287
