"""A turn on PostgreSQL runs its short transactions on one pooled connection (``Database.pinned``),
and a server keeps its connections between turns instead of opening one per turn."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event, text

from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store.db import PG_POOL_SIZE, Database
from tests.conftest import ROOT

FLOW = ROOT / "sample_data" / "flows" / "support-bot.yml"


def _backend_pid(session) -> int:
    return session.execute(text("SELECT pg_backend_pid()")).scalar()


@pytest.fixture
def pg(postgres):
    db = Database(postgres.create_database())
    yield db
    db.dispose()


def test_sessions_inside_a_pinned_block_share_one_connection_and_each_commits_its_own_work(pg):
    other = Database(pg.url, migrate=False)
    try:
        with pg.pinned():
            with pg.session() as s:
                first = _backend_pid(s)
                s.execute(text("CREATE TABLE pinned_probe (n int)"))
                s.execute(text("INSERT INTO pinned_probe VALUES (1)"))
            # Committed when its session ended, not when the block ends: another connection sees it.
            with other.session(write=False) as s:
                assert s.execute(text("SELECT count(*) FROM pinned_probe")).scalar() == 1
            with pytest.raises(RuntimeError):
                with pg.session() as s:
                    assert _backend_pid(s) == first
                    s.execute(text("INSERT INTO pinned_probe VALUES (2)"))
                    raise RuntimeError("this session fails")
            with pg.session(write=False) as s:  # rolled back alone; the connection goes on
                assert _backend_pid(s) == first
                assert s.execute(text("SELECT n FROM pinned_probe")).scalars().all() == [1]
            with pg.pinned(), pg.session() as s:  # a nested block keeps the outer connection
                assert _backend_pid(s) == first
        # Outside, each session checks a connection out of the pool again: two at once are two.
        with pg.session() as a, pg.session() as b:
            assert _backend_pid(a) != _backend_pid(b)
    finally:
        other.dispose()


def test_pinning_changes_nothing_on_sqlite(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    try:
        with db.pinned():
            with db.session() as a, db.session(write=False) as b:
                assert a.connection() is not b.connection()
    finally:
        db.dispose()


def test_a_turn_checks_out_one_connection_for_all_its_transactions(pg):
    service = ConversationService(pg, DemoClient())
    flow_id = service.import_flow(FLOW).flow_id
    conversation_id = service.start(flow_id).id
    service.send(conversation_id, "Hi, order 4411 is late.")
    checkouts: list[int] = []
    event.listen(pg.engine, "checkout", lambda *_: checkouts.append(1))
    service.send(conversation_id, "Any news?")
    assert len(checkouts) == 1
    turns = ConversationService(pg).conversation(conversation_id).turns
    assert [t.query for t in turns] == ["Hi, order 4411 is late.", "Any news?"]
    assert all(t.answer for t in turns)


def test_concurrent_turns_reuse_the_servers_connections(pg):
    """Twenty turns at once, twice: the second round closes no connection and opens at most the
    few the first round's lighter overlap never needed (each turn used to open and close one for
    its turn lock, and the sessions' pool held five)."""
    service = ConversationService(pg, DemoClient())
    flow_id = service.import_flow(FLOW).flow_id
    conversations = [service.start(flow_id, user_id=f"user-{i}").id for i in range(PG_POOL_SIZE)]
    opened: list[int] = []
    closed: list[int] = []

    def round_of_turns(query: str) -> None:
        errors: list[BaseException] = []
        start = threading.Barrier(len(conversations))

        def turn(conversation_id: str) -> None:
            try:
                start.wait(60)
                service.send(conversation_id, query)
            except BaseException as e:  # noqa: BLE001 — reported below
                errors.append(e)

        threads = [threading.Thread(target=turn, args=(c,)) for c in conversations]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors

    round_of_turns("Hi, order 4411 is late.")
    engines = (pg.engine, pg._turn_locks._lock_engine)
    for engine in engines:
        event.listen(engine, "connect", lambda *_: opened.append(1))
        event.listen(engine.pool, "close", lambda *_: closed.append(1))
    round_of_turns("Any news?")
    assert closed == []
    assert len(opened) < len(conversations)
    assert all(engine.pool.checkedin() <= PG_POOL_SIZE for engine in engines)
    assert all(len(ConversationService(pg).conversation(c).turns) == 2 for c in conversations)
