"""One turn's ledger or summary from the turns its decision reads (``Replay.near_view``): exactly what
the whole thread gives, at a cost that does not grow with the conversation."""

from hypothesis import given, settings
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import Conversation
from core.model.ledger import GRANULARITY, NOT_ELIGIBLE, OTHER_BRANCH, OUTSIDE_WINDOW
from tests.builders import linear, record
from tests.memory.test_ledger_pipeline import WORDS, tool_turn


class WholeThread(Replay):
    """The reference: every turn's view built from its whole thread."""

    def reach(self):
        return None


@st.composite
def conversations(draw):
    n = draw(st.integers(1, 30))
    turns = []
    for i in range(n):
        mid = str(i)
        kind = draw(st.sampled_from(["prev", "prev", "prev", "older", "root", "nil"]))
        parent = {
            "root": None,
            "nil": "00000000-0000-0000-0000-000000000000",
            "prev": str(i - 1) if i else None,
            "older": str(draw(st.integers(0, i - 1))) if i else None,
        }[kind]
        q, a = draw(st.sampled_from(WORDS[1:])), draw(st.sampled_from(WORDS))
        turns.append(tool_turn(mid, parent, q, a) if draw(st.booleans()) else record(mid, parent, q, a))
    return Conversation(id="n", turns=turns, system_prompt=draw(st.sampled_from(["", "Be brief."])))


configs = st.builds(
    MemoryConfig,
    strategy=st.sampled_from(["dify", "dify", "dify", "window", "buffer", "off"]),
    window=st.one_of(st.none(), st.integers(-1, 6)),
    fidelity=st.sampled_from(["documented", "code"]),
    context_size=st.one_of(st.none(), st.integers(20, 400)),
    max_tokens=st.integers(0, 30),
    granularity=st.sampled_from(["query_answer", "all_messages"]),
    scope=st.sampled_from(["thread", "thread", "call"]),
    plugin_token_counting=st.booleans(),
).filter(
    lambda c: c.strategy != "window" or c.settings.window is None or c.settings.window >= 1
)  # the node keeps 1..200


@settings(max_examples=200, deadline=None)
@given(conversations(), configs)
def test_a_turns_ledger_from_its_reach_is_the_ledger_of_its_whole_thread(conv, config):
    near, whole = Replay(conv, config), WholeThread(conv, config)
    for p in range(len(conv.turns)):
        ledger = whole.ledger_at(p)
        assert near.ledger_at(p) == ledger
        lazy = near.ledger_at(p, lazy=True)
        assert lazy.dropped_count() == ledger.dropped_count()  # from its runs, before listing its entries
        assert lazy.not_eligible_count() == ledger.not_eligible_count()
        # Every earlier message is kept, dropped or not eligible: one of the three, never two.
        kept = sum(1 for e in ledger.entries if e.kept)
        assert kept + ledger.dropped_count() + ledger.not_eligible_count() == len(ledger.entries)
        assert ledger.not_eligible_count() == sum(1 for e in ledger.entries if e.reason in NOT_ELIGIBLE)
        assert lazy == ledger


@settings(max_examples=200, deadline=None)
@given(conversations(), configs, st.data())
def test_summaries_of_some_turns_are_those_of_the_whole_replay(conv, config, data):
    whole = dict(zip(conv.answered_turns(), Replay(conv, config).summaries()))
    shown = data.draw(st.sets(st.integers(0, len(conv.turns) - 1)))
    assert Replay(conv, config).summaries_at(shown) == {p: s for p, s in whole.items() if p in shown}


def test_the_messages_older_than_the_reach_are_outside_the_window_or_not_eligible():
    conv = linear(40)
    ledger = Replay(conv, MemoryConfig(window=3, granularity="all_messages")).ledger_at(39)
    assert {e.reason for e in ledger.entries if e.turn < 37} == {OUTSIDE_WINDOW}
    assert [e.turn for e in ledger.entries if e.kept] == [38, 38, 39, 39]
    assert GRANULARITY not in {e.reason for e in ledger.entries} and OTHER_BRANCH not in {
        e.reason for e in ledger.entries
    }


def count_pushes(monkeypatch) -> list[int]:
    pushed: list[int] = []
    push = Replay._push

    def counted(self, view, position, decision):
        pushed.append(position)
        return push(self, view, position, decision)

    monkeypatch.setattr(Replay, "_push", counted)
    return pushed


def test_one_turns_ledger_and_a_page_of_summaries_replay_as_many_turns_at_any_length(monkeypatch):
    pushed = count_pushes(monkeypatch)
    work = {}
    for n in (20, 2000):
        conv = linear(n)
        pushed.clear()
        Replay(conv, MemoryConfig(window=4)).ledger_at(n - 1)
        Replay(conv, MemoryConfig(window=4, fidelity="documented")).summaries_at(range(n - 10, n))
        Replay(conv, MemoryConfig(strategy="off")).ledger_at(n - 1)
        work[n] = len(pushed)
    assert work[20] == work[2000] == 4 + 4 + 9  # the reach; the reach, then one turn per further turn; nothing


def test_an_unbounded_memory_still_reads_the_whole_thread(monkeypatch):
    pushed = count_pushes(monkeypatch)
    conv = linear(30)
    ledger = Replay(conv, MemoryConfig(strategy="buffer")).ledger_at(29)
    assert len(pushed) == 29 and len(ledger.kept) == 58


@settings(max_examples=200, deadline=None)
@given(conversations(), configs, st.data())
def test_some_entries_of_a_ledger_kept_as_runs_are_those_of_its_listing(conv, config, data):
    position = data.draw(st.integers(0, len(conv.turns) - 1))
    whole = Replay(conv, config).ledger_at(position)
    turns = data.draw(st.sets(st.integers(-1, len(conv.turns) + 1)))
    reasons = data.draw(st.sets(st.sampled_from(sorted({e.reason for e in whole.entries} | {"kept", "over_budget"}))))
    lazy = Replay(conv, config).ledger_at(position, lazy=True)
    assert lazy.entries_at(turns) == whole.entries_at(turns) == [e for e in whole.entries if e.position in turns]
    assert (
        lazy.entries_with(reasons) == whole.entries_with(reasons) == [e for e in whole.entries if e.reason in reasons]
    )
    n = data.draw(st.integers(-1, len(whole.entries) + 2))
    newest = whole.entries[max(len(whole.entries) - n, 0) :] if n > 0 else []
    assert lazy.last_entries(n) == whole.last_entries(n) == newest
    assert lazy.entry_count() == whole.entry_count() == len(whole.entries)
    assert getattr(lazy, "_entries", None) is None  # nothing listed whole on the way
    assert lazy.entries == whole.entries and lazy.entry_count() == len(whole.entries)  # and once it is
    unpicked = Replay(conv, config).ledger_at(position, lazy=True)
    if hasattr(unpicked, "_pick"):  # a ledger kept as runs that cannot pick lists itself whole instead
        unpicked._pick = None
        assert unpicked.last_entries(n) == newest
