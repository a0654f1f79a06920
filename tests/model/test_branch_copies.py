"""An other-branch entry that is the same source message as one on the call's branch — the question
a regenerated reply shares with the sibling it replaced — is found by its ref, and the ledger table
says whose it is instead of calling it another branch's history."""

from __future__ import annotations

from core.io.readers.registry import read_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.memory.words import explain
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn
from core.model.ledger import OTHER_BRANCH
from core.model.ledger_words import branch_copies
from tests.conftest import FIXTURES
from ui.ledger_table import ledger_rows

BUFFER = MemoryConfig(strategy="buffer", model="gpt-4o-mini")


def _lisbon() -> Conversation:
    """ChatGPT's "Lisbon trip": u1 → a1; an edited second question (u2a → a2a, u2b) and two
    answers to u2b (a2b, then the regenerated a2c); u3 → a3 after a2c."""
    return read_conversations(FIXTURES / "exports" / "chatgpt__conversations.json")[0]


def _copies(conv: Conversation, position: int) -> dict[tuple[int, int], int]:
    ledger = Replay(conv, BUFFER).ledger_at(position)
    return branch_copies(ledger, [m.ref for m in conv.turns[position].messages], position)


def test_a_regenerated_replys_question_is_a_copy_of_the_one_its_sibling_on_the_branch_holds():
    conv = _lisbon()
    assert [[m.ref for m in t.messages] for t in conv.turns] == [
        ["u1", "a1"],
        ["u2a", "a2a"],
        ["u2b", "a2b"],
        ["u2b", "a2c"],
        ["u3", "a3"],
    ]
    # The turn after the regenerated reply: the replaced sibling's question is turn 3's question.
    assert _copies(conv, 4) == {(2, 0): 3}
    # The regenerated reply's own turn: the replaced sibling's question is this turn's own.
    assert _copies(conv, 3) == {(2, 0): 3}
    # The replaced sibling's turn and the edit's: nothing on another branch is theirs.
    assert _copies(conv, 2) == {} and _copies(conv, 1) == {} and _copies(conv, 0) == {}


def _turn(tid: str, parent: str | None, q: Message, a: Message) -> Turn:
    return Turn(id=tid, parent_id=parent, messages=(q, a), query_index=0, answer_index=1)


def _regenerated(ref_a: object, ref_b: object) -> Conversation:
    """Turn 1, then two siblings under it whose questions have refs ``ref_a`` and ``ref_b``, then
    turn 3 under the second sibling."""
    one = _turn("t1", None, Message("user", "hi", QUERY, "q1"), Message("assistant", "hello", ANSWER, "r1"))
    first = _turn("t2a", "t1", Message("user", "and?", QUERY, ref_a), Message("assistant", "so", ANSWER, "r2a"))
    second = _turn("t2b", "t1", Message("user", "and?", QUERY, ref_b), Message("assistant", "thus", ANSWER, "r2b"))
    three = _turn("t3", "t2b", Message("user", "ok", QUERY, "q3"), Message("assistant", "fine", ANSWER, "r3"))
    return Conversation(id="c", turns=[one, first, second, three])


def test_rows_of_different_source_messages_are_not_copies_though_their_text_is_the_same():
    # Dify's regenerate writes a new message row: the same words, another message.
    conv = _regenerated("row-1:query", "row-2:query")
    assert Replay(conv, BUFFER).ledger_at(3).entries[2].reason == OTHER_BRANCH
    assert _copies(conv, 3) == {} and _copies(conv, 2) == {}


def test_a_message_without_a_ref_is_nobodys_copy():
    for missing in ("", None):
        # Neither through a turn on the branch nor through the call's own turn.
        assert _copies(_regenerated(missing, missing), 3) == {}
        assert _copies(_regenerated(missing, missing), 2) == {}
    # An index ref of 0 is a ref.
    assert _copies(_regenerated(0, 0), 3) == {(1, 0): 2}
    assert _copies(_regenerated(0, 0), 2) == {(1, 0): 2}


def test_only_other_branch_entries_are_copies_and_the_newest_holder_on_the_branch_is_named():
    conv = _regenerated("q2", "q2")
    ledger = Replay(conv, BUFFER).ledger_at(3)
    # A message on the branch that repeats a ref of the call's own turn is not listed as a copy.
    assert branch_copies(ledger, ["q1"], 3) == {(1, 0): 2}
    # The call's own turn holding the ref is named over an earlier holder on the branch.
    assert branch_copies(ledger, ["q2"], 3) == {(1, 0): 3}
    # Entries on another branch whose ref nothing on the branch holds stay as they are.
    assert (1, 1) not in branch_copies(ledger, ["r2a-elsewhere"], 3)


def test_the_table_says_whose_message_a_copy_is_and_never_that_it_was_not_sent():
    conv = _lisbon()
    for position, where, then in ((4, "turn 2 · 3/3", "see that row"), (3, "this turn", "part of this turn itself")):
        ledger = Replay(conv, BUFFER).ledger_at(position)
        rows = ledger_rows(ledger, conv, None, position)
        copy = [r for r in rows if r["turn"] == "2 · 2/3" and r["role"] == "user"]
        assert len(copy) == 1 and copy[0]["kept"] == "no", copy
        assert copy[0]["reason"] == f"same as {where} (on another branch)"
        assert copy[0]["why"] == (
            f"on another branch, but the same message as {where}'s (the sibling turns of a "
            f"regenerated reply each hold it): {then}"
        )
        # Every other other-branch row keeps the reason's words.
        others = [r for r in rows if r["reason"] == "on another branch"]
        assert len(others) == 3 and {r["why"] for r in others} == {
            "on another branch (regenerated or edited): not this turn's history"
        }
    # Without the call's position the table words every other-branch row alike.
    ledger = Replay(conv, BUFFER).ledger_at(4)
    assert {r["why"] for r in ledger_rows(ledger, conv) if r["reason"] == "on another branch"} == {
        explain(ledger.entries[2])
    }


def test_the_first_answer_regenerated_shares_the_first_question_though_nothing_earlier_is_on_the_branch():
    q = Message("user", "hi", QUERY, "q1")
    conv = Conversation(
        id="c",
        turns=[
            _turn("t1a", None, q, Message("assistant", "hello", ANSWER, "r1a")),
            _turn("t1b", None, q, Message("assistant", "hey", ANSWER, "r1b")),
        ],
    )
    ledger = Replay(conv, BUFFER).ledger_at(1)
    assert [e.reason for e in ledger.entries] == [OTHER_BRANCH, OTHER_BRANCH]
    assert _copies(conv, 1) == {(0, 0): 1}
