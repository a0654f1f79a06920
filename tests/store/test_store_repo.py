"""The store on SQLite and on a real PostgreSQL: schema, round trips, deletes, variables."""

import pytest
from sqlalchemy import inspect, text

from core.store import repo
from core.store.db import Database
from core.store.errors import StoreError
from core.store.migrate import current_revision, head_revision


def _flow(db, name="f"):
    return repo.create_flow(db, name, {"nodes": [{"id": "llm"}]}, repo.structure_hash(["llm"]))


def _turn(tid, parent, query="q", answer="a", **extra):
    return {
        "id": tid,
        "parent_id": parent,
        "query": query,
        "answer": answer,
        "status": "succeeded",
        "dialogue_count": 1,
        "created_at": 1000.0,
        "node_runs": [
            {
                "node_id": "llm",
                "type": "llm",
                "title": "LLM",
                "emulated": True,
                "status": "succeeded",
                "ledger": {"turn": 1, "ledger": []},
                "prompt": [{"role": "user", "content": query}],
                "reply": answer,
                "usage": {"prompt_tokens": 5},
                "latency_ms": 1.5,
                "outputs": {"text": answer},
            }
        ],
        **extra,
    }


def test_a_fresh_database_comes_up_at_the_current_schema(db):
    assert current_revision(db.engine) == head_revision()
    assert {
        "flows",
        "flow_versions",
        "conversations",
        "turns",
        "node_runs",
        "conversation_variables",
        "variable_changes",
        "settings",
    } <= set(inspect(db.engine).get_table_names())


def test_an_existing_database_is_upgraded_and_keeps_its_data(db_url):
    first = Database(db_url)
    flow = _flow(first)
    first.dispose()
    again = Database(db_url)
    assert repo.latest_flow_version(again, flow.flow_id).definition == {"nodes": [{"id": "llm"}]}
    again.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_turn_with_node_runs_round_trips(db):
    flow = _flow(db)
    conv = repo.create_conversation(db, flow_version_id=flow.id, user_id="dana", name="trip")
    repo.save_turn(db, conv.id, _turn("t1", None, "hello", "hi", extra_field={"x": [1, 2]}))
    repo.save_turn(db, conv.id, _turn("t2", "t1", "again", "sure"))
    rows = repo.load_turn_rows(db, conv.id, with_node_runs=True)
    assert [r["id"] for r in rows] == ["t1", "t2"] and [r["seq"] for r in rows] == [1, 2]
    assert rows[0]["extra_field"] == {"x": [1, 2]}
    run = rows[1]["node_runs"][0]
    assert (run["node_id"], run["reply"], run["usage"], run["outputs"]) == (
        "llm",
        "sure",
        {"prompt_tokens": 5},
        {"text": "sure"},
    )
    info = repo.get_conversation(db, conv.id)
    assert info.active_turn_id == "t2" and info.turn_count == 2 and info.user_id == "dana"
    core_conv = repo.load_conversation(db, conv.id)
    assert [t.query for t in core_conv.turns] == ["hello", "again"]
    assert core_conv.tree.thread(1) == [0, 1]


def test_deleting_a_conversation_deletes_everything_it_owns_and_nothing_else(db):
    flow = _flow(db)
    keep = repo.create_conversation(db, flow_version_id=flow.id)
    gone = repo.create_conversation(db, flow_version_id=flow.id)
    for conv in (keep, gone):
        repo.ensure_variables(db, conv.id, [{"id": "v1", "name": "n", "value_type": "number", "value": 0}])
        repo.save_turn(db, conv.id, _turn(f"{conv.id[:8]}-t", None))
        repo.write_variable_changes(
            db,
            conv.id,
            [{"name": "n", "old": 0, "new": 1, "operation": "+=", "node_id": "a"}],
            turn_id=None,
            turn_seq=1,
        )
    repo.delete_conversation(db, gone.id)

    def count(table, conv_id):
        column = "turn_id" if table == "node_runs" else "conversation_id"
        with db.engine.connect() as c:
            if table == "node_runs":
                return c.execute(
                    text(
                        "SELECT count(*) FROM node_runs n JOIN turns t ON t.id = n.turn_id WHERE t.conversation_id = :c"
                    ),
                    {"c": conv_id},
                ).scalar()
            return c.execute(text(f"SELECT count(*) FROM {table} WHERE {column} = :c"), {"c": conv_id}).scalar()

    for table in ("turns", "node_runs", "conversation_variables", "variable_changes"):
        assert count(table, gone.id) == 0
        assert count(table, keep.id) == 1
    with db.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM node_runs")).scalar() == 1
    assert [c.id for c in repo.list_conversations(db)] == [keep.id]
    assert repo.latest_flow_version(db, flow.flow_id).id == flow.id


def test_variables_are_initialised_once_and_changes_are_recorded(db):
    conv = repo.create_conversation(db, flow_version_id=None)
    specs = [{"id": "a", "name": "count", "value_type": "number", "value": 0}]
    repo.ensure_variables(db, conv.id, specs)
    repo.write_variable_changes(
        db,
        conv.id,
        [{"name": "count", "old": 0, "new": 5, "operation": "set", "node_id": "user"}],
        turn_id=None,
        turn_seq=None,
    )
    # A later run adds new ids with defaults and keeps existing values (spec §3.2).
    specs.append({"id": "b", "name": "tags", "value_type": "array[string]", "value": []})
    values = {v.name: v.value for v in repo.ensure_variables(db, conv.id, specs)}
    assert values == {"count": 5, "tags": []}
    history = repo.variable_history(db, conv.id)
    assert [(h["name"], h["old"], h["new"], h["node_id"]) for h in history] == [("count", 0, 5, "user")]


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**63, 2**64 + 1, 1.0, 0.1, 1e-05, 5])
def test_a_number_a_variable_holds_reads_back_exact_on_every_database(db, value):
    """A bare number in a JSON column: SQLite's NUMERIC affinity would turn 10**400 into inf, 2**63 into a
    rounded float and 1.0 into 1; it is stored as written, as PostgreSQL keeps it."""
    conv = repo.create_conversation(db, flow_version_id=None)
    repo.ensure_variables(db, conv.id, [{"id": "a", "name": "n", "value_type": "number", "value": 0}])
    repo.write_variable_changes(
        db,
        conv.id,
        [{"name": "n", "old": 0, "new": value, "operation": "edit", "node_id": "user"}],
        turn_id=None,
        turn_seq=None,
    )
    (stored,) = repo.get_variables(db, conv.id)
    (change,) = repo.variable_history(db, conv.id)
    for read in (stored.value, change["new"]):
        assert read == value and type(read) is type(value) and repr(read) == repr(value)


def test_a_change_to_an_unknown_variable_writes_nothing(db):
    conv = repo.create_conversation(db, flow_version_id=None)
    repo.ensure_variables(db, conv.id, [{"id": "a", "name": "x", "value_type": "string", "value": ""}])
    with pytest.raises(StoreError, match="no variable named 'nope'"):
        repo.write_variable_changes(
            db,
            conv.id,
            [{"name": "x", "old": "", "new": "1"}, {"name": "nope", "old": 1, "new": 2}],
            turn_id=None,
            turn_seq=None,
        )
    assert [v.value for v in repo.get_variables(db, conv.id)] == [""]
    assert repo.variable_history(db, conv.id) == []


def test_flow_versions_count_up(db):
    flow = _flow(db)
    v2 = repo.add_flow_version(db, flow.flow_id, {"nodes": [{"id": "llm", "window": 3}]}, flow.structure, "window 3")
    assert (v2.version, repo.latest_flow_version(db, flow.flow_id).id) == (2, v2.id)
    assert [f.version for f in repo.list_flows(db)] == [2]


def test_a_bad_database_url_gets_a_clear_error():
    with pytest.raises(StoreError, match="not a database URL"):
        Database("this is not a url")
