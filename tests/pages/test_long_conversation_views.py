"""Views of a long conversation stay small: the branch tree collapses linear runs, a fact restated on
every turn is followed at the cost of one turn, the receipt's raw JSON holds the whole ledger."""

import json

from core.analysis.compare import compare
from core.analysis.debug_view import Receipt, ReceiptRow, tree_layout
from core.memory.replay import Replay
from core.model.ledger import Ledger, LedgerEntry
from tests.builders import branched, dify, linear
from ui.receipt_view import raw_json
from ui.tree_view import collapse, tree_figure


def _figure_data(fig):
    return {t.name: t for t in fig.data if t.name}


def test_a_linear_thousand_turn_tree_draws_its_ends_and_one_dotted_edge_for_the_rest():
    conv = linear(1000)
    nodes = tree_layout(conv, list(range(1000)))
    kept = collapse(nodes)
    assert [n.position for n in kept] == [0, 995, 996, 997, 998, 999]  # the root and the newest five
    data = _figure_data(tree_figure(nodes))
    assert list(data["collapsed run"].text) == ["994 turns in a row, not drawn"]
    assert len(data["active thread"].x) == 6


def test_a_branch_keeps_its_branch_point_and_both_ends_as_dots():
    rows = [(str(i), str(i - 1) if i > 1 else None) for i in range(1, 51)]
    rows += [("b1", "25"), ("b2", "b1"), ("b3", "b2")]  # a sibling of turn 26, three turns long
    conv = dify(rows)
    active = [conv.tree.position[str(i)] for i in range(1, 51)]
    kept = {conv.turns[n.position].id for n in collapse(tree_layout(conv, active))}
    assert {"1", "25", "26", "b1", "b3"} <= kept  # root, branch point, both branches' first turns, a leaf
    assert "10" not in kept and "b2" not in kept
    texts = list(_figure_data(tree_figure(tree_layout(conv, active)))["collapsed run"].text)
    assert sorted(texts) == [
        "1 turn in a row, not drawn",
        "19 turns in a row, not drawn",
        "23 turns in a row, not drawn",
    ]


def test_a_fact_restated_every_few_turns_is_followed_exactly_as_the_ledgers_say():
    conv = linear(120, query=lambda i: f"My name is Dana. Question {i}" if i % 5 == 1 else f"Question {i}")
    configs = [
        {"label": "window 1", "strategy": "dify", "window": 1},
        {"label": "window 3", "strategy": "dify", "window": 3},
        {"label": "budget", "strategy": "dify", "max_tokens": 0, "context_size": 400},
        # keeps the oldest messages: a dropped newer statement says nothing about older ones
        {"label": "trim first", "strategy": "trim", "trim_strategy": "first", "max_history_tokens": 60},
    ]
    result = compare(conv, configs)
    fact = next(f for f in result.facts if f.key == "name")
    for named in result.configs:
        fate = next(f for f in result.fates[result.facts.index(fact)] if f.label == named.label)
        replay = Replay(conv, named.config)
        expected = []
        for p in conv.answered_turns():
            kept = {(e.position, e.index) for e in replay.ledger_at(p).entries if e.kept}
            said = [(q, j) for q, j in fact.messages if q <= p]
            expected.append(None if not said else any(q == p or (q, j) in kept for q, j in said))
        assert fate.present == expected, named.label
    # Dify as shipped: a window of 1 message row is the current turn's own, so no history at all
    assert next(f for f in result.fates[result.facts.index(fact)] if f.label == "window 1").lost_turn == 2


def test_the_raw_json_holds_every_prompt_message_and_every_ledger_entry():
    entries = [
        LedgerEntry(
            ref=f"m{i}:query",
            turn=i + 1,
            role="user",
            tokens=5,
            kept=i >= 1995,
            reason="kept" if i >= 1995 else "outside_window",
            kind="query",
            position=i,
            index=0,
        )
        for i in range(2000)
    ]
    ledger = Ledger(turn=2001, entries=entries, prompt_tokens=40, history_tokens=25, budget=None)
    rows = [ReceiptRow("system", "system", 10, "You help."), ReceiptRow("user", "current query", 5, "Hi")]
    r = Receipt("n", "Node", rows, {}, 0, {}, None, None, 15, True, "o200k_base", "", None, None, [])
    doc = json.loads(raw_json(r, ledger))
    assert [m["content"] for m in doc["prompt"]] == ["You help.", "Hi"]
    assert len(doc["ledger"]["entries"]) == 2000
    assert [e["reason"] for e in doc["ledger"]["entries"]].count("kept") == 5


def test_the_tree_places_each_turn_at_the_number_its_label_gives():
    from core.model.conversation import turn_label

    conv = branched(30)
    nodes = tree_layout(conv, list(range(30)))
    assert {n.x for n in nodes if n.parent is None} == {1}  # the first question is turn 1, as everywhere
    for n in nodes:
        assert turn_label(conv, n.position).split(" · ")[0] == f"turn {n.x}"
    assert tree_figure(nodes).layout.xaxis.tickformat == "d"  # whole turns only


def test_the_collapsed_run_has_a_visible_symbol_in_the_legend():
    run = _figure_data(tree_figure(tree_layout(linear(40), list(range(40)))))["collapsed run"]
    assert run.marker.symbol == "line-ns" and run.marker.line.width > 0  # a line marker shows only its outline


def test_a_short_thread_gets_a_tick_per_turn_and_a_long_one_whole_steps_of_plotlys_choosing():
    # Plotly's own ticks on a 3-turn axis fall on halves, which "d" rounds into "1 2 2 3 3".
    short = tree_figure(tree_layout(branched(6), list(range(3))))
    assert short.layout.xaxis.dtick == 1 and short.layout.xaxis.tickformat == "d"
    long = tree_figure(tree_layout(linear(40), list(range(40))))
    assert long.layout.xaxis.dtick is None  # 40 ticks would crowd the axis; Plotly's steps there are whole
