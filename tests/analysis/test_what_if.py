"""The switchboard's "replies might now differ": for the turns on screen, exactly what the whole
replay says, at a cost that does not grow with the conversation."""

import pytest

from core.analysis.debug_view import focus_node, what_if
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from tests.builders import dify, linear


def branched(n: int):
    rows = [(str(i), str(i - 1) if i > 1 else None, f"question {i}", "answer " * (i % 5 + 1)) for i in range(1, n + 1)]
    rows += [("b1", "10", "again?", "yes"), ("b2", "b1", "and?", "")]  # a regenerated branch off turn 11
    return dify(rows)


@pytest.mark.parametrize(
    "baseline, config",
    [
        (MemoryConfig(window=4), MemoryConfig(window=2)),
        (MemoryConfig(window=4), MemoryConfig(window=4, fidelity="documented", context_size=60)),
        (MemoryConfig(window=3), MemoryConfig(strategy="off")),
        (MemoryConfig(window=3), MemoryConfig(strategy="buffer")),
        (MemoryConfig(window=3), MemoryConfig(strategy="summary_buffer", max_history_tokens=40)),
    ],
)
def test_the_turns_on_screen_differ_exactly_where_the_whole_replay_says(baseline, config):
    conv = branched(30)
    whole = what_if(conv, "n", baseline, config)
    for page in (range(0, 10), range(20, 30), [5, 30, 31], range(len(conv.turns))):
        shown = what_if(conv, "n", baseline, config, positions=page)
        assert shown.differs == [p for p in whole.differs if p in page]
        assert shown.kept_before == {p: k for p, k in whole.kept_before.items() if p in page}
        assert shown.kept_after == {p: k for p, k in whole.kept_after.items() if p in page}
    assert whole.differs  # the cases change something


def test_a_page_of_turns_costs_as_many_replayed_turns_at_any_length(monkeypatch):
    pushed = []
    push = Replay._push
    monkeypatch.setattr(Replay, "_push", lambda self, view, p, d: (pushed.append(p), push(self, view, p, d))[1])
    work = {}
    for n in (30, 3000):
        pushed.clear()
        result = what_if(linear(n), "n", MemoryConfig(window=4), MemoryConfig(window=6), positions=range(n - 20, n))
        assert result.differs == list(range(n - 20, n))
        work[n] = len(pushed)
    assert work[30] == work[3000] == 2 * (19 + 5)  # two configs: the first turn's reach, then a turn at a time


def test_the_tab_to_open_on_is_chosen_from_what_if_ledgers_without_listing_their_earlier_messages():
    conv = linear(400)
    replay = Replay(conv, MemoryConfig(window=3))
    now, before = replay.ledger_at(399, lazy=True), replay.ledger_at(398, lazy=True)
    recorded = {"other": Replay(conv, MemoryConfig(strategy="buffer")).ledger_at(399)}
    assert focus_node({"n": now, **recorded}, {"n": before, **recorded}, ["other", "n"]) == "n"  # it lost turn 396
    assert now._entries is None and before._entries is None
    assert focus_node({"n": now.plain()}, {"n": before.plain()}, ["n"]) == "n"


@pytest.mark.parametrize("window", [None, 2, 4, 8])
def test_docs_vs_code_and_markers_say_the_same_from_ledgers_kept_as_runs(window):
    from core.analysis.debug_view import transcript
    from core.analysis.findings import both_decisions, ledger_difference

    rows = [(str(i), str(i - 1) if i > 1 else None, f"question {i}", "answer " * (i % 4 + 1)) for i in range(1, 21)]
    rows += [("b1", "10", "again?", "yes"), ("b2", "b1", "and?", "")]  # a regenerated branch off turn 11
    rows += [(str(i), str(i - 1), f"question {i}", "answer") for i in range(21, 26)]  # the main thread goes on
    conv = dify(rows)
    code = Replay(conv, MemoryConfig(window=window, plugin_token_counting=True, context_size=90))
    docs = Replay(conv, MemoryConfig(window=window, fidelity="documented", context_size=90))
    differed = 0
    for p in range(len(conv.turns)):
        plain = code.ledger_at(p), docs.ledger_at(p)
        lazy = code.ledger_at(p, lazy=True), docs.ledger_at(p, lazy=True)
        assert ledger_difference(*lazy, p) == ledger_difference(*plain, p)
        assert both_decisions(*lazy) == both_decisions(*plain)
        differed += ledger_difference(*plain, p) is not None
        page = conv.tree.thread(p)[-6:]
        assert transcript(conv, page, p, {"n": lazy[0]}, {}) == transcript(conv, page, p, {"n": plain[0]}, {})
        assert lazy[0]._entries is None and lazy[1]._entries is None  # neither listed whole
    assert differed
