"""On SQLite one writer runs at a time: this process's write sessions queue on a lock and start as
soon as the one before them ends, instead of polling the locked file (which let some turns of a
busy server wait seconds while newer ones went first)."""

import threading

import pytest
from sqlalchemy import text

from core.store.db import Database

WAIT = 10.0  # seconds a step may take before the test gives up on it (never reached when it works)


def _setting(session, key: str, value: str) -> None:
    session.execute(text("INSERT INTO settings (key, value) VALUES (:k, :v)"), {"k": key, "v": f'"{value}"'})


def test_a_second_write_session_waits_for_the_first_to_commit_before_it_starts(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    first_wrote, release, second_started, second_done = (threading.Event() for _ in range(4))
    order: list[str] = []

    def first() -> None:
        with db.session() as s:
            _setting(s, "a", "1")
            first_wrote.set()
            release.wait(WAIT)
            order.append("first commits")

    def second() -> None:
        first_wrote.wait(WAIT)
        with db.session() as s:
            second_started.set()
            order.append("second starts")
            _setting(s, "b", "2")
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    assert first_wrote.wait(WAIT)
    # The second session does not even begin while the first holds the write: it is queued in the
    # process, not inside SQLite's busy loop with a transaction of its own.
    assert not second_started.wait(0.5)
    release.set()
    assert second_done.wait(WAIT)
    for t in threads:
        t.join(WAIT)
    assert order == ["first commits", "second starts"]
    with db.session(write=False) as s:
        assert dict(s.execute(text("SELECT key, value FROM settings WHERE key IN ('a', 'b')")).all()) == {
            "a": '"1"',
            "b": '"2"',
        }  # JSON text, read raw
    db.dispose()


def test_readers_do_not_queue_behind_a_writer(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    with db.session() as s:
        _setting(s, "a", "1")
        read: list[object] = []

        def reader() -> None:
            with db.session(write=False) as r:
                read.append(r.execute(text("SELECT value FROM settings WHERE key = 'a'")).scalar())

        t = threading.Thread(target=reader)
        t.start()
        t.join(WAIT)
        assert not t.is_alive() and read == [None]  # ran beside the writer, saw the last commit
    db.dispose()


def test_a_write_session_opened_inside_another_on_the_same_thread_does_not_wait_on_itself(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    done = threading.Event()

    def nested() -> None:
        with db.session():
            with db.session() as inner:
                _setting(inner, "a", "1")
        done.set()

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    assert done.wait(WAIT)
    db.dispose()


def test_a_failed_write_session_lets_the_next_one_in(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    try:
        with db.session() as s:
            _setting(s, "a", "1")
            _setting(s, "a", "again")  # the same key: the insert fails and the session rolls back
    except Exception:
        pass
    done = threading.Event()

    def writer() -> None:
        with db.session() as s:
            _setting(s, "a", "2")
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    assert done.wait(WAIT)
    with db.session(write=False) as s:
        assert s.execute(text("SELECT value FROM settings WHERE key = 'a'")).scalar() == '"2"'
    db.dispose()


def test_a_writer_queued_past_the_busy_timeout_gets_sqlites_locked_error_instead_of_waiting_on(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from core.store import db as db_module

    monkeypatch.setattr(db_module, "SQLITE_BUSY_SECONDS", 0.3)
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with db.session() as s:
            _setting(s, "a", "1")
            holding.set()
            release.wait(WAIT)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert holding.wait(WAIT)
        with pytest.raises(OperationalError, match="locked"):
            with db.session() as s:
                _setting(s, "b", "2")
    finally:
        release.set()
        t.join(WAIT)
    with db.session() as s:  # the queue is free again once the holder commits
        _setting(s, "c", "3")
    db.dispose()
