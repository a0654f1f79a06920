"""A turn listed twice — two overlapping pages of ``GET /v1/messages`` concatenated, say — is read
once, never as a branch the conversation did not have; a turn id holding two different records is
refused in one line, and nothing is imported."""

import json

import pytest

from core.io import FormatError, import_text
from core.io.errors import PullError
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import Message, Turn, leaves, read_once
from core.service.dify_pull import conversation_from_records

A = {
    "id": "a",
    "conversation_id": "c",
    "parent_message_id": None,
    "query": "I'm Dana.",
    "answer": "Hi Dana.",
    "created_at": 1,
}
B = {
    "id": "b",
    "conversation_id": "c",
    "parent_message_id": "a",
    "query": "My order is 4411.",
    "answer": "Noted.",
    "created_at": 2,
}
C = {
    "id": "c3",
    "conversation_id": "c",
    "parent_message_id": "b",
    "query": "What's my name?",
    "answer": "Dana.",
    "created_at": 3,
}


def history(*records) -> str:
    return json.dumps({"data": list(records)})


def test_a_record_two_pages_both_list_is_one_turn_and_no_branch():
    result = import_text(history(A, B, B, C), "messages.json")
    (conv,) = result.conversations
    assert [t.id for t in conv.turns] == ["a", "b", "c3"]
    assert conv.one_thread() and leaves(conv) == [2]
    assert result.notes == ["conversation 'c': 1 turn listed more than once, read once ('b')"]
    # The newest turn sends every earlier message, and none is another branch's.
    last = list(Replay(conv, MemoryConfig(window=10)).summaries())[-1]
    assert (last.kept, last.dropped, last.not_eligible) == (4, 0, 0)


def test_without_repeats_there_is_no_note_and_the_conversation_is_the_one_read():
    result = import_text(history(A, B, C), "messages.json")
    assert result.notes == [] and [t.id for t in result.conversations[0].turns] == ["a", "b", "c3"]


@pytest.mark.parametrize("skip_bad", [False, True])
def test_a_turn_id_holding_two_different_records_is_refused_and_nothing_is_imported(skip_bad):
    edited = dict(B, answer="Noted, order 4411.")
    other = {**A, "id": "z", "conversation_id": "d"}
    if not skip_bad:
        with pytest.raises(FormatError) as err:
            import_text(history(A, B, edited, C, other), "messages.json")
        assert str(err.value) == (
            "messages.json: conversation 'c': turn 'b' is listed twice with different "
            "contents; list each turn (message record) once"
        )
        assert [(p.record, p.field, p.conversation) for p in err.value.problems] == [(None, "id", "c")]
        return
    result = import_text(history(A, B, edited, C, other), "messages.json", skip_bad=True)
    assert [c.id for c in result.conversations] == ["d"]  # the other conversation, whole
    assert [p.text for p in result.problems] == [
        "conversation 'c': turn 'b' is listed twice with different contents; list each turn (message record) once"
    ]


def test_read_once_keeps_the_first_of_equal_turns_in_order_and_names_the_repeats():
    def turn(tid, text, parent=None):
        return Turn(id=tid, parent_id=parent, messages=(Message("user", text, "query", f"{tid}:q"),), query_index=0)

    a, b = turn("a", "one"), turn("b", "two", "a")
    turns, repeated = read_once([a, b, turn("a", "one"), b, turn("c", "three", "b"), turn("a", "one")])
    assert [t.id for t in turns] == ["a", "b", "c"] and turns[0] is a and turns[1] is b
    assert repeated == ["a", "b", "a"]
    with pytest.raises(ValueError, match="turn 'b' is listed twice with different contents"):
        read_once([a, b, turn("b", "two!", "a")])
    for long_id in ("x" * 61, "x" * 100):
        with pytest.raises(ValueError) as err:
            read_once([turn(long_id, "one"), turn(long_id, "two")])
        assert f"turn '{'x' * 59}…' is listed" in str(err.value)
    with pytest.raises(ValueError) as err:  # up to 60 characters, an id is shown whole
        read_once([turn("y" * 60, "one"), turn("y" * 60, "two")])
    assert f"turn '{'y' * 60}' is listed" in str(err.value)


def test_a_pull_whose_pages_overlap_reads_each_record_once_and_refuses_two_different_ones():
    conv = conversation_from_records("c", [A, B, B, C])
    assert [t.id for t in conv.turns] == ["a", "b", "c3"] and conv.one_thread()
    with pytest.raises(PullError, match="conversation c: turn 'b' is listed twice with different contents"):
        conversation_from_records("c", [A, B, dict(B, answer="Changed."), C])


def test_the_note_names_a_few_repeated_turns_and_long_ids_shortly():
    conv_id = "conversation-" + "y" * 80
    records = [
        {
            "id": f"{'m' * 50}{k}",
            "conversation_id": conv_id,
            "query": f"q{k}",
            "answer": f"a{k}",
            "parent_message_id": f"{'m' * 50}{k - 1}" if k else None,
            "created_at": k,
        }
        for k in range(5)
    ]
    two = import_text(history(*records, records[1], records[2]), "messages.json")
    assert two.notes == [
        f"conversation '{conv_id[:59]}…': 2 turns listed more than once, read once ('{'m' * 39}…', '{'m' * 39}…')"
    ]
    four = import_text(history(*records, *records[:4]), "messages.json")
    assert four.notes[0].endswith(
        f"4 turns listed more than once, read once ('{'m' * 39}…', '{'m' * 39}…', '{'m' * 39}…', …)"
    )
    three = import_text(history(*records, *records[:3]), "messages.json")
    assert three.notes[0].endswith("…')")  # all three named: nothing left to elide
    with pytest.raises(FormatError, match=f"^messages.json: conversation '{conv_id[:59]}…': turn 'm{{50}}1' is"):
        import_text(history(*records, dict(records[1], answer="changed")), "messages.json")
