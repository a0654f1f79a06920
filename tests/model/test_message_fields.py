"""A message's less common fields (name, tool calls, tool call id, files, usage) are held together, and
read, given, copied and compared as fields all the same; parent ids share their parent's id string."""

import copy
import json
import pickle
from dataclasses import replace

import pytest

from core.io import read_conversations
from core.model.conversation import (
    ANSWER,
    QUERY,
    TOOL_CALL,
    UUID_NIL,
    FileRef,
    Message,
    ToolCall,
    Turn,
    with_shared_ids,
)
from tests.conftest import FIXTURES

CALL = ToolCall("c1", "lookup", '{"id": 1}')
RARE = {
    "name": "dana",
    "tool_calls": (CALL,),
    "tool_call_id": "c0",
    "files": (FileRef("image", "u"),),
    "usage": (10, 3),
}
DEFAULTS = {"name": None, "tool_calls": (), "tool_call_id": None, "files": (), "usage": None}


def test_a_plain_message_holds_none_of_them_and_reads_their_defaults():
    m = Message("user", "hi", QUERY, "1:query")
    assert m.extra is None
    assert {k: getattr(m, k) for k in DEFAULTS} == DEFAULTS
    assert m == Message("user", "hi", QUERY, "1:query", None, (), None, (), None)  # the defaults, given
    assert Message("user", "hi", QUERY, "1:query", **DEFAULTS).extra is None
    assert hash(m) == hash(Message("user", "hi", QUERY, "1:query"))


@pytest.mark.parametrize("field", sorted(RARE))
def test_each_field_is_given_read_compared_and_copied_on_its_own(field):
    plain = Message("assistant", "", TOOL_CALL, "1:call")
    m = Message("assistant", "", TOOL_CALL, "1:call", **{field: RARE[field]})
    assert getattr(m, field) == RARE[field]
    assert {k: getattr(m, k) for k in DEFAULTS if k != field} == {k: v for k, v in DEFAULTS.items() if k != field}
    assert m != plain and m == Message("assistant", "", TOOL_CALL, "1:call", **{field: RARE[field]})
    assert replace(plain, **{field: RARE[field]}) == m  # given by a copy
    assert replace(m, **{field: DEFAULTS[field]}) == plain  # and taken back: nothing left held
    assert replace(m, **{field: DEFAULTS[field]}).extra is None
    assert replace(m, content="x").content == "x" and getattr(replace(m, content="x"), field) == RARE[field]
    assert pickle.loads(pickle.dumps(m)) == m and copy.deepcopy(m) == m


def test_all_fields_together_round_trip_through_the_stored_shape():
    m = Message("assistant", "text", ANSWER, "1:answer", **RARE)
    assert {k: getattr(m, k) for k in RARE} == RARE
    assert Message.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert m.to_openai()["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"id": 1}'}
    assert not Message("assistant", "", TOOL_CALL, "r", tool_calls=(CALL,)).is_empty
    assert Message("assistant", "", ANSWER, "r", name="x").is_empty
    with pytest.raises(AttributeError):
        m.content = "changed"


def test_parent_ids_become_their_parent_s_own_id_string_and_nothing_else_changes():
    turns = [
        Turn("a", None, ()),
        Turn("b", "".join(["a"]), ()),
        Turn("c", UUID_NIL, ()),
        Turn("d", "zz", ()),
        Turn("e", "".join(["b"]), ()),
    ]
    shared = with_shared_ids(turns)
    assert shared == turns  # equal turns, in order
    assert shared[1].parent_id is shared[0].id and shared[4].parent_id is shared[1].id
    assert shared[2] is turns[2] and shared[3] is turns[3] and shared[0] is turns[0]  # nothing to share


@pytest.mark.parametrize("name", ["dify-web__branchedTestMessages.json", "dify-web__realWorldMessages.json"])
def test_a_dify_import_shares_each_parent_id_with_its_parent(name):
    conv = read_conversations(FIXTURES / "transcripts" / name)[0]
    by_id = {t.id: t for t in conv.turns}
    named = [t for t in conv.turns if t.parent_id in by_id]
    assert named and all(t.parent_id is by_id[t.parent_id].id for t in named)


def test_a_dify_api_history_shares_each_parent_id_with_its_parent(tmp_path):
    data = {
        "data": [
            {
                "id": f"m{i}",
                "conversation_id": "c1",
                "parent_message_id": f"m{i - 1}" if i else None,
                "query": f"q{i}",
                "answer": f"a{i}",
                "created_at": 1700000000 + i,
            }
            for i in range(4)
        ]
    }
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(data))
    turns = read_conversations(path)[0].turns
    assert [t.parent_id for t in turns] == [None, "m0", "m1", "m2"]
    assert all(turns[i].parent_id is turns[i - 1].id for i in range(1, 4))


def test_a_stored_message_missing_its_optional_keys_reads_their_defaults_and_an_openai_one_keeps_its_name():
    m = Message.from_dict({"role": "user"})
    assert (m.content, m.kind, m.ref, m.usage, m.extra) == ("", "", "", None, None)
    assert Message.from_dict({"role": "assistant", "content": "hi", "usage": [4, 2]}).usage == (4, 2)
    assert Message("user", "hi", QUERY, 0, name="dana").to_openai() == {"role": "user", "content": "hi", "name": "dana"}
    assert Message("user", "hi", QUERY, 0).to_openai() == {"role": "user", "content": "hi"}
