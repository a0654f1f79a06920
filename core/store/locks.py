"""One turn at a time per conversation, across threads, processes and machines.

A turn reads the conversation (its thread, its variables), runs the flow — model calls included —
and writes what it did. Two turns on one conversation at once would both read the same state:
one's variable writes would overwrite the other's and both would hang off the same parent turn.
So a turn holds its conversation's lock from before it reads until after its last write; a
second turn waits for it, then reads the state the first one left.

The lock lives outside the transactions that write the turn, so that the turn's row, its
variable changes and its end can each be committed as they happen while the lock is held, and
so that nothing else (renaming the conversation, other conversations' turns) waits for a model
call. It is released when its holder ends, also when the holder's process is killed:

* PostgreSQL: a session advisory lock (``pg_advisory_lock``) keyed by the conversation id, on a
  connection of its own (from a separate pool, so waiting turns never starve the pool the running
  turn needs). A killed process's connection closes and the server drops the lock. A row lock on
  the conversation would not do: it would block the turn's own update of the conversation row,
  written on another connection.
* SQLite (a file): an exclusive ``flock`` (Windows: ``msvcrt.locking``) on a lock file next to the database, one of 256 chosen
  by the conversation id (two conversations sharing one only wait for each other, which is
  harmless), taken through a gate file so that waiters get their turn. The kernel drops both when
  the process dies. SQLite's own write lock does not do: held
  through a model call it would stop every other write to the database.
* SQLite in memory, other databases: a lock in this process (an in-memory database has no other
  process).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from .errors import ConversationBusyError

#: How long a turn waits for the one before it on the same conversation, by default (seconds).
TURN_WAIT_SECONDS = 300.0
_PG_NAMESPACE = 0x4D4C  # advisory locks keyed (namespace, conversation hash): apart from the migration lock
_SQLITE_BUCKETS = 256


def _busy(conversation_id: str, timeout: float) -> ConversationBusyError:
    if timeout <= 0:
        return ConversationBusyError(f"conversation {conversation_id!r} is busy: a turn on it is running")
    return ConversationBusyError(
        f"conversation {conversation_id!r} is busy: a turn on it has been running for more "
        f"than {timeout:g} s; try again when it has finished"
    )


def _digest(conversation_id: str) -> bytes:
    return hashlib.sha256(conversation_id.encode("utf-8")).digest()


def _try_lock(fd: int) -> bool:
    """Take the file's exclusive lock without waiting; ``False`` when another holder has it.
    ``flock`` on POSIX; on Windows (no ``fcntl``) ``msvcrt.locking`` on the file's first byte,
    which the system also drops when the holding process dies."""
    try:
        import fcntl
    except ImportError:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    fcntl.flock(fd, fcntl.LOCK_UN)


def _flock(fd: int, deadline: float, conversation_id: str, timeout: float) -> None:
    pause = 0.002
    while not _try_lock(fd):
        if time.monotonic() >= deadline:
            raise _busy(conversation_id, timeout) from None
        time.sleep(pause)
        pause = min(pause * 1.5, 0.02)


class TurnLocks:
    """The conversation locks of one database (see the module docstring)."""

    def __init__(self, engine: Engine, pool_size: int):
        self._engine = engine
        self._pool_size = pool_size
        self._lock_engine: Engine | None = None
        self._local: dict[str, threading.Lock] = {}
        self._local_guard = threading.Lock()
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._folder = Path(f"{database}-locks") if database and database != ":memory:" else None

    @contextmanager
    def hold(self, conversation_id: str, timeout: float = TURN_WAIT_SECONDS) -> Iterator[None]:
        """Hold the conversation's lock for the block; wait at most ``timeout`` seconds for it
        (0: do not wait), else :class:`ConversationBusyError`."""
        if self._engine.dialect.name == "postgresql":
            hold = self._postgres
        elif self._folder is not None:
            hold = self._file
        else:
            hold = self._in_process
        with hold(conversation_id, timeout):
            yield

    @contextmanager
    def _postgres(self, conversation_id: str, timeout: float) -> Iterator[None]:
        if self._lock_engine is None:
            # A pool of its own: connections are reused from turn to turn, and turns waiting for
            # a lock never hold the connections a running turn needs for its writes.
            self._lock_engine = create_engine(
                self._engine.url,
                pool_size=self._pool_size,
                max_overflow=-1,
                pool_pre_ping=True,
                isolation_level="AUTOCOMMIT",
            )
        key = int.from_bytes(_digest(conversation_id)[:4], "big", signed=True)
        with self._lock_engine.connect() as conn:
            if timeout <= 0:
                got = conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key)"), {"ns": _PG_NAMESPACE, "key": key})
                if not got.scalar():
                    raise _busy(conversation_id, timeout)
            else:
                conn.execute(text(f"SET lock_timeout = {int(timeout * 1000)}"))
                try:
                    conn.execute(text("SELECT pg_advisory_lock(:ns, :key)"), {"ns": _PG_NAMESPACE, "key": key})
                except OperationalError as e:
                    if getattr(e.orig, "sqlstate", None) == "55P03":  # lock_not_available
                        raise _busy(conversation_id, timeout) from None
                    raise
            try:
                yield
            finally:
                try:
                    conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), {"ns": _PG_NAMESPACE, "key": key})
                except BaseException:
                    conn.invalidate()  # closed, not pooled: a connection still holding the lock must not be reused
                    raise

    @contextmanager
    def _file(self, conversation_id: str, timeout: float) -> Iterator[None]:
        # Two locks make the wait fair: a waiter first takes the bucket's gate, then its lock, then
        # lets go of the gate. The turn that just ended must pass the gate again, which the next
        # waiter holds, so it cannot take the lock straight back and starve the others.
        self._folder.mkdir(parents=True, exist_ok=True)
        bucket = _digest(conversation_id)[0] % _SQLITE_BUCKETS
        gate = os.open(self._folder / f"{bucket:02x}.gate", os.O_RDWR | os.O_CREAT, 0o600)
        lock = os.open(self._folder / f"{bucket:02x}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout
            _flock(gate, deadline, conversation_id, timeout)
            try:
                _flock(lock, deadline, conversation_id, timeout)
            finally:
                _unlock(gate)
            try:
                yield
            finally:
                _unlock(lock)
        finally:
            os.close(lock)
            os.close(gate)

    @contextmanager
    def _in_process(self, conversation_id: str, timeout: float) -> Iterator[None]:
        with self._local_guard:
            lock = self._local.setdefault(conversation_id, threading.Lock())
        acquired = lock.acquire(timeout=timeout) if timeout > 0 else lock.acquire(blocking=False)
        if not acquired:
            raise _busy(conversation_id, timeout)
        try:
            yield
        finally:
            lock.release()

    def dispose(self) -> None:
        if self._lock_engine is not None:
            self._lock_engine.dispose()
