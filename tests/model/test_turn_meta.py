"""A turn built without meta shares one read-only empty meta; a turn given meta keeps its own."""

import copy
import json
import pickle
import tracemalloc

import pytest

from core.model.conversation import ANSWER, NO_META, QUERY, Message, Turn


def _turn(i: int, **kw) -> Turn:
    return Turn(
        id=f"t{i}",
        parent_id=None,
        messages=(Message("user", "hi", QUERY, f"t{i}:q"), Message("assistant", "hello", ANSWER, f"t{i}:a")),
        answer_index=1,
        **kw,
    )


def test_turns_built_without_meta_share_one_empty_meta_and_hold_no_dict_each():
    turns = [_turn(i) for i in range(3)]
    assert all(t.meta is NO_META for t in turns)
    assert turns[0].meta == {} and not turns[0].meta and turns[0].meta.get("prompt_tokens") is None

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    messages, ids = turns[0].messages, [f"t{i}" for i in range(1_000)]
    before = tracemalloc.get_traced_memory()[0]
    many = [Turn(id=i, parent_id=None, messages=messages, answer_index=1) for i in ids]  # only the turns
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del many
    # A Turn of ten fields is 112 bytes with its garbage-collector header; a dict each would add 64.
    assert grown < 1_000 * (112 + 64)


@pytest.mark.parametrize(
    "write",
    [
        lambda m: m.__setitem__("a", 1),
        lambda m: m.update(a=1),
        lambda m: m.setdefault("a", 1),
        lambda m: m.pop("a", None),
        lambda m: m.popitem(),
        lambda m: m.clear(),
        lambda m: m.__delitem__("a"),
        lambda m: m.__ior__({"a": 1}),
    ],
)
def test_the_shared_meta_refuses_every_write_and_stays_empty(write):
    turn, other = _turn(0), _turn(1)
    with pytest.raises(TypeError, match="build the turn with meta"):
        write(turn.meta)
    assert other.meta == {} and len(NO_META) == 0


def test_merging_or_copying_the_shared_meta_gives_something_usable():
    meta = _turn(0).meta
    for merged in ({**meta, "a": 1}, meta | {"a": 1}, dict(meta, a=1)):
        assert type(merged) is dict and merged == {"a": 1}
    assert copy.copy(meta) is NO_META and copy.deepcopy(meta) is NO_META
    assert pickle.loads(pickle.dumps(meta)) is NO_META
    assert copy.deepcopy(_turn(0)).meta is NO_META and pickle.loads(pickle.dumps(_turn(0))).meta is NO_META
    assert json.dumps(meta) == "{}"


def test_a_turn_given_meta_keeps_its_own_writable_dict():
    given = {"prompt_tokens": {"o200k_base": 12}}
    turn = _turn(0, meta=given)
    assert turn.meta is given
    turn.meta["shown_answer"] = "x"  # its own dict, as before
    assert _turn(1).meta == {} and turn == _turn(0)  # meta is left out of equality
