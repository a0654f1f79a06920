"""Thread extraction follows Dify's extract_thread_messages (spec/dify-memory.md §1.3, §8 items 3–6, 24)."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.io import read_conversations
from core.model.conversation import UUID_NIL, extract_thread
from tests.builders import dify, record
from tests.conftest import FIXTURES

WEB = FIXTURES / "transcripts"


def _ids(conv, positions):
    return [conv.turns[p].id for p in positions]


def test_null_parent_is_kept_and_ends_the_walk():
    rows = [record("1", None), record("2", "1"), record("3", None), record("4", "3")]
    thread = extract_thread(reversed(rows))
    assert [r.id for r in thread] == ["4", "3"]


def test_empty_parent_string_ends_the_walk_like_null():
    rows = [record("1", None), record("2", "1"), record("3", "")]
    assert [r.id for r in extract_thread(reversed(rows))] == ["3"]


def test_uuid_nil_takes_the_next_older_row_whatever_its_id():
    rows = [record("a", UUID_NIL), record("b", "zzz-not-a-row"), record("c", UUID_NIL)]
    # c (UUID_NIL) → take b regardless; b's parent is unknown → walk skips the rest.
    assert [r.id for r in extract_thread(reversed(rows))] == ["c", "b"]


def test_rows_on_other_branches_are_skipped():
    rows = [record("1", None), record("2", "1"), record("3", "1")]  # 3 regenerates 2
    assert [r.id for r in extract_thread(reversed(rows))] == ["3", "1"]


def test_walk_starts_from_the_newest_row_of_the_conversation():
    # The newest row (5) is on the branch through 4; the walk follows it, not turn 3's branch.
    rows = [record("1", None), record("2", "1"), record("3", "2"), record("4", "1"), record("5", "4")]
    assert [r.id for r in extract_thread(reversed(rows))] == ["5", "4", "1"]
    conv = dify(rows)
    assert _ids(conv, conv.tree.thread(4)) == ["1", "4", "5"]


def test_service_api_history_with_uuid_nil_parents_is_linear(tmp_path):
    data = {
        "data": [
            {
                "id": f"m{i}",
                "conversation_id": "c1",
                "parent_message_id": UUID_NIL,
                "query": f"q{i}",
                "answer": f"a{i}",
                "created_at": 1700000000 + i,
            }
            for i in range(5)
        ]
    }
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(data))
    conv = read_conversations(path)[0]
    assert _ids(conv, conv.tree.thread(4)) == ["m0", "m1", "m2", "m3", "m4"]


def test_dialogue_count_is_thread_length_so_first_turn_is_one():
    conv = read_conversations(WEB / "dify-web__realWorldMessages.json")[0]
    # Turns: 3 on the first root, then a second root with "3306" asked twice and "1003" after the second.
    assert [conv.tree.depth[i] for i in range(7)] == [1, 2, 3, 1, 2, 2, 3]


# -- the five small Dify thread fixtures --------------------------------------------------------------


def _conv(name):
    return read_conversations(WEB / f"dify-web__{name}.json")[0]


def test_branched_fixture_latest_thread_is_one_then_four():
    conv = _conv("branchedTestMessages")
    assert _ids(conv, conv.tree.thread(len(conv.turns) - 1)) == ["1", "4"]
    assert _ids(conv, conv.tree.thread(conv.index_of("3"))) == ["1", "2", "3"]
    # Answer 4 is the second of two siblings under answer 1.
    assert _ids(conv, conv.tree.siblings(conv.index_of("4"))) == ["2", "4"]


def test_legacy_fixture_is_one_linear_thread():
    conv = _conv("legacyTestMessages")
    assert _ids(conv, conv.tree.thread(3)) == ["1", "2", "3", "4"]
    assert all(len(conv.tree.siblings(i)) == 1 for i in range(4))


def test_mixed_fixture_follows_real_parents_then_legacy_rows():
    conv = _conv("mixedTestMessages")
    assert _ids(conv, conv.tree.thread(3)) == ["1", "4"]
    assert _ids(conv, conv.tree.thread(conv.index_of("3"))) == ["1", "2", "3"]


def test_multi_root_fixture_latest_thread_is_the_second_root_alone():
    conv = _conv("multiRootNodesMessages")
    assert _ids(conv, conv.tree.thread(len(conv.turns) - 1)) == ["5"]
    # Selecting answer 2 shows its thread continued to the newest descendant (Dify web).
    assert _ids(conv, conv.tree.thread_through(conv.index_of("2"))) == ["1", "2", "3"]
    assert _ids(conv, conv.tree.siblings(conv.index_of("5"))) == ["1", "5"]


def test_multi_root_with_legacy_fixture_latest_thread_is_the_null_root():
    conv = _conv("multiRootNodesWithLegacyTestMessages")
    assert _ids(conv, conv.tree.thread(len(conv.turns) - 1)) == ["5"]
    assert _ids(conv, conv.tree.thread(conv.index_of("3"))) == ["1", "2", "3"]
    assert _ids(conv, conv.tree.thread(conv.index_of("4"))) == ["1", "4"]


# -- the precomputed index agrees with the literal walk -----------------------------------------------


@st.composite
def _trees(draw):
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        choice = draw(st.sampled_from(["null", "empty", "nil", "older", "newer", "missing"]))
        if choice == "null":
            parent = None
        elif choice == "empty":
            parent = ""
        elif choice == "nil":
            parent = UUID_NIL
        elif choice == "older" and i > 0:
            parent = str(draw(st.integers(0, i - 1)))
        elif choice == "newer":
            parent = str(draw(st.integers(i, n - 1)))
        else:
            parent = "missing"
        rows.append(record(str(i), parent))
    return rows


@settings(max_examples=300, deadline=None)
@given(_trees())
def test_thread_index_equals_literal_extract_thread_for_every_turn(rows):
    conv = dify(rows)
    for i in range(len(rows)):
        literal = [r.id for r in extract_thread(reversed(rows[: i + 1]))]
        ours = _ids(conv, reversed(conv.tree.thread(i)))
        assert ours == literal
        assert conv.tree.depth[i] == len(literal)


def test_a_newer_root_on_another_branch_stops_the_walk_as_in_dify():
    # Dify checks every row for a NULL parent before checking it is the expected one: going back to
    # the first branch after an edited first question (a new root) reaches the new root, not turn 2.
    rows = [record("1", None), record("2", "1"), record("3", None), record("4", "2")]
    assert [r.id for r in extract_thread(reversed(rows))] == ["4", "3"]
    conv = dify(rows)
    assert _ids(conv, conv.tree.thread(3)) == ["3", "4"]
    # The tree the user sees still links turn 4 under turn 2.
    assert _ids(conv, conv.tree.path(3)) == ["1", "2", "4"]


@settings(max_examples=300, deadline=None)
@given(_trees(), st.data())
def test_each_turns_children_are_the_turns_that_name_or_walk_to_it_in_creation_order(rows, data):
    from core.model.conversation import ThreadIndex

    conv = dify(rows)
    tree = conv.tree
    n = len(rows)
    assert len(tree.children) == len(tree.thread_children) == n
    for i in range(n):
        assert tree.children[i] == [j for j in range(n) if tree.parent[j] == i]
        assert tree.thread_children[i] == [j for j in range(n) if tree.thread_parent[j] == i]
        assert tree.children[i - n] == tree.children[i]  # counted from the end too
        assert list(tree.depth) == [len(tree.thread(j)) for j in range(n)]
        assert list(tree.path_depth) == [len(tree.path(j)) for j in range(n)]
        assert list(tree.path_root) == [tree.path(j)[0] for j in range(n)]
    # Extending an index (a recorded turn) leaves the one it came from as it was.
    start = data.draw(st.integers(0, n - 1))
    index = ThreadIndex(conv.turns[: start + 1])
    before = [(index.children[i], index.thread_children[i]) for i in range(start + 1)]
    grown = index
    for t in conv.turns[start + 1 :]:
        was = [(grown.children[i], grown.thread_children[i]) for i in range(grown.size)]
        older, grown = grown, grown.extended(t)
        assert [(older.children[i], older.thread_children[i]) for i in range(older.size)] == was
    assert [(index.children[i], index.thread_children[i]) for i in range(start + 1)] == before
    for i in range(n):
        assert (grown.children[i], grown.thread_children[i], grown.depth[i]) == (
            tree.children[i],
            tree.thread_children[i],
            tree.depth[i],
        )


@st.composite
def _mostly_linear(draw):
    """Rows that mostly name the row before them, with the cases that make a conversation branch or
    restart: repeated or empty ids, empty or missing parents, legacy (UUID_NIL) rows, older parents."""
    n = draw(st.integers(0, 12))
    rows = []
    for i in range(n):
        mid = draw(st.sampled_from([str(i)] * 6 + ["0", "1", ""]))
        choice = draw(st.sampled_from(["previous"] * 8 + ["nil", "null", "empty", "missing", "older"]))
        parent = {"nil": UUID_NIL, "null": None, "empty": "", "missing": "missing"}.get(choice)
        if choice == "previous" and i > 0:
            parent = rows[-1].id
        elif choice == "older" and i > 0:
            parent = rows[draw(st.integers(0, i - 1))].id
        rows.append(record(mid, parent))
    return rows


@settings(max_examples=500, deadline=None)
@given(_mostly_linear())
def test_one_thread_is_said_exactly_when_every_turns_thread_is_all_turns_before_it(rows):
    literal = bool(rows) and all(
        [r.id for r in extract_thread(reversed(rows[: i + 1]))] == [r.id for r in reversed(rows[: i + 1])]
        and len(extract_thread(reversed(rows[: i + 1]))) == i + 1
        for i in range(len(rows))
    )
    indexed = dify(rows)
    indexed.tree  # noqa: B018 — built first: then read from the tree
    # Told from the parent ids when it can be, without the tree: the same answer either way.
    assert dify(rows).one_thread() == indexed.one_thread()
    if len({r.id for r in rows}) == len(rows):  # (the tree follows a repeated id to its first row)
        assert indexed.one_thread() == literal


def test_a_linear_conversation_is_one_thread_without_building_its_tree():
    rows = [record("a", None), record("b", "a"), record("c", UUID_NIL), record("d", "c")]
    conv = dify(rows)
    assert conv.one_thread() and conv._tree is None
    assert conv._one_thread_at == 4  # what the first question found, for four turns
    assert conv.one_thread()  # asked again: the same answer
    conv.turns.append(record("e", "b"))
    assert not conv.one_thread()  # a turn added since: asked again
    assert not dify([*rows, record("e", "b")]).one_thread()  # a second child of b: a branch
    assert not dify([*rows, record("e", None)]).one_thread()  # a second root
    assert not dify([]).one_thread()
