"""A list variable that grows every turn is stored as the items each change appends, not as the
whole list twice per change; every reader still gets whole values before and after."""

import json

from sqlalchemy import text

from core.store import repo


def _conv(db, value=None):
    conv = repo.create_conversation(db, flow_version_id=None)
    repo.ensure_variables(
        db,
        conv.id,
        [
            {"id": "t", "name": "topics", "value_type": "array[string]", "value": [] if value is None else value},
            {"id": "n", "name": "count", "value_type": "number", "value": 0},
        ],
    )
    return conv.id


def _write(db, conv, changes, seq):
    repo.write_variable_changes(
        db,
        conv,
        [dict(c, operation=c.get("operation", "append"), node_id="log") for c in changes],
        turn_id=f"t{seq}",
        turn_seq=seq,
    )


def _stored(db):
    """The change rows as stored: (name, old, new, delta), JSON columns decoded (SQLite gives text)."""

    def value(v):
        return json.loads(v) if isinstance(v, str) else v

    with db.engine.connect() as c:
        return [
            (name, value(old), value(new), delta)
            for name, old, new, delta in c.execute(
                text("SELECT name, old, new, delta FROM variable_changes ORDER BY id")
            )
        ]


def _grow(db, conv, turns):
    """``turns`` turns, each appending one topic and counting up; returns every change written."""
    written, value = [], []
    for seq in range(1, turns + 1):
        new = [*value, f"topic {seq}"]
        changes = [
            {"name": "topics", "old": value, "new": new},
            {"name": "count", "old": seq - 1, "new": seq, "operation": "+="},
        ]
        _write(db, conv, changes, seq)
        written += [(seq, c["name"], c["old"], c["new"]) for c in changes]
        value = new
    return written


def test_appends_are_stored_as_their_items_and_read_back_whole(db):
    conv = _conv(db)
    written = _grow(db, conv, 6)
    stored = [row for row in _stored(db) if row[0] == "topics"]
    # The first change of a variable holds whole values; each later append holds its one item.
    assert stored[0][3] is None and len(stored) == 6
    assert all(delta == repo.APPENDED and old is None for _, old, _, delta in stored[1:])
    assert [new for _, _, new, _ in stored[1:]] == [[f"topic {i}"] for i in range(2, 7)]
    history = repo.variable_history(db, conv)
    assert [(h["turn_seq"], h["name"], h["old"], h["new"]) for h in history] == written
    assert not any("damaged" in h for h in history)
    assert {v.name: v.value for v in repo.get_variables(db, conv)}["topics"] == [f"topic {i}" for i in range(1, 7)]


def test_the_value_after_a_turn_is_read_back_whole(db):
    conv = _conv(db)
    written = _grow(db, conv, 5)
    for seq in range(1, 6):
        last = {name: (old, new) for s, name, old, new in written if s <= seq}
        got = {h["name"]: (h["old"], h["new"]) for h in repo.variable_changes_until(db, conv, seq)}
        assert got == last


def test_a_change_that_is_not_an_append_is_stored_whole_and_appends_after_it_follow_it(db):
    conv = _conv(db)
    _write(db, conv, [{"name": "topics", "old": [], "new": ["a"]}], 1)
    _write(db, conv, [{"name": "topics", "old": ["a"], "new": ["a", "b"]}], 2)
    _write(db, conv, [{"name": "topics", "old": ["a", "b"], "new": ["b"], "operation": "remove-first"}], 3)
    _write(db, conv, [{"name": "topics", "old": ["b"], "new": ["b", "c", "d"], "operation": "extend"}], 4)
    _write(
        db,
        conv,
        [{"name": "topics", "old": ["b", "c", "d"], "new": ["x", "b", "c", "d"], "operation": "over-write"}],
        5,
    )
    assert [delta for *_, delta in _stored(db)] == [None, repo.APPENDED, None, repo.APPENDED, None]
    history = repo.variable_history(db, conv)
    assert [(h["old"], h["new"]) for h in history] == [
        ([], ["a"]),
        (["a"], ["a", "b"]),
        (["a", "b"], ["b"]),
        (["b"], ["b", "c", "d"]),
        (["b", "c", "d"], ["x", "b", "c", "d"]),
    ]
    assert repo.variable_changes_until(db, conv, 4)[0]["new"] == ["b", "c", "d"]


def test_a_value_its_history_does_not_end_with_is_written_whole(db):
    # A variable created with a non-empty value (or imported, or edited by hand) has no change row
    # leading to it: its first change cannot point back at one.
    conv = _conv(db, value=["kept"])
    _write(db, conv, [{"name": "topics", "old": ["kept"], "new": ["kept", "a"]}], 1)
    with db.engine.begin() as c:  # the stored value changed behind the history's back
        c.execute(
            text("UPDATE conversation_variables SET value = '[\"other\"]', chained = :f WHERE name = 'topics'"),
            {"f": False},
        )
    _write(db, conv, [{"name": "topics", "old": ["other"], "new": ["other", "b"]}], 2)
    assert [delta for *_, delta in _stored(db)] == [None, None]
    # A change whose stated old value is not the stored one is written whole too.
    _write(db, conv, [{"name": "topics", "old": ["elsewhere"], "new": ["other", "b", "c"]}], 3)
    assert [delta for *_, delta in _stored(db)] == [None, None, None]
    assert [(h["old"], h["new"]) for h in repo.variable_history(db, conv)] == [
        (["kept"], ["kept", "a"]),
        (["other"], ["other", "b"]),
        (["elsewhere"], ["other", "b", "c"]),
    ]


def test_an_unreadable_append_marks_it_and_the_appends_after_it_damaged(db):
    # Items that are not a list; on SQLite, which keeps any text, also text that is not JSON.
    for items in ['{"not": "a list"}'] + (["not json ["] if db.backend == "sqlite" else []):
        conv = _conv(db)
        _grow(db, conv, 4)
        with db.engine.begin() as c:
            c.execute(
                text(
                    "UPDATE variable_changes SET new = :items WHERE conversation_id = :c AND name = 'topics' "
                    "AND turn_seq = 2"
                ),
                {"items": items, "c": conv},
            )
        topics = [h for h in repo.variable_history(db, conv) if h["name"] == "topics"]
        assert topics[0]["new"] == ["topic 1"] and "damaged" not in topics[0]
        assert [(h["old"], h["new"], h.get("damaged")) for h in topics[1:]] == [(None, None, ["new"])] * 3
        assert repo.variable_changes_until(db, conv, 4)[0]["new"] is None
        # The current value is its own column: still whole.
        assert {v.name: v.value for v in repo.get_variables(db, conv)}["topics"] == [f"topic {i}" for i in range(1, 5)]
