"""The one place that owns database engines and sessions.

Embedded default: a SQLite file ``memlens.db`` (WAL, foreign keys on) in :data:`DATA_DIR` — a
checkout's ``data/`` folder, or the user's data folder for an installed MemLens.
``MEMLENS_DATABASE_URL`` — or an explicit URL (the CLI's ``--db``) — selects any SQLAlchemy URL;
PostgreSQL through psycopg 3 (``postgresql+psycopg://user:pass@host/db``) is supported. Opening a
store brings the schema up to date with the migrations, fresh or existing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from .errors import StoreError, StoreUnavailableError
from .locks import TURN_WAIT_SECONDS, TurnLocks

ENV_URL = "MEMLENS_DATABASE_URL"


def _data_dir() -> Path:
    """A checkout (``pyproject.toml`` beside ``core/``) keeps its database in its own ``data/``; an
    installed MemLens in the user's data folder, never inside the installation it would be removed with."""
    root = Path(__file__).resolve().parent.parent.parent
    if (root / "pyproject.toml").is_file():
        return root / "data"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "MemLens"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "MemLens"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "memlens"


DATA_DIR = _data_dir()


def default_url() -> str:
    return f"sqlite:///{DATA_DIR / 'memlens.db'}"


def resolve_url(url: str | None = None) -> str:
    return url or os.environ.get(ENV_URL) or default_url()


#: How long a SQLite writer waits for the write lock before it gives up ("database is locked"):
#: SQLite's busy timeout, and the longest a write session queues in this process first.
SQLITE_BUSY_SECONDS = 30
#: PostgreSQL connections a server process keeps open between requests, in each of its two pools
#: (sessions, turn locks): as many as the turns it runs at once under load, so a turn does not open
#: and close a connection (a new server process on PostgreSQL's side) for its lock or its writes.
PG_POOL_SIZE = 20


def _sqlite_connect(dbapi_conn, _record) -> None:
    # Let SQLAlchemy's "begin" event start transactions itself (see make_engine).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_SECONDS * 1000}")
    cur.close()


def _sqlite_begin(conn) -> None:
    # A writer takes the lock when its transaction starts, so two processes never deadlock on a
    # read lock's upgrade; the busy timeout makes the second one wait its turn instead. Readers
    # (sessions opened with write=False) begin deferred and, under WAL, never wait for a writer.
    if conn.get_execution_options().get("memlens_read_only"):
        conn.exec_driver_sql("BEGIN")
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class Unreadable(str):
    """The text of a JSON column that does not parse as JSON (SQLite keeps whatever it is given)."""


def lenient_json(text: str | bytes):
    """The JSON columns' reader on SQLite: text that is not JSON becomes :class:`Unreadable`, which
    readers treat as a damaged value (``core.store.checks``) instead of failing the whole query."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return Unreadable(text if isinstance(text, str) else text.decode("utf-8", "replace"))


def sqlite_json(value) -> str | bytes:
    """The JSON columns' writer on SQLite. A column declared JSON has NUMERIC affinity there, so the
    text of a bare number is stored as a number: ``1.0`` comes back ``1``, an integer past 64 bits a
    rounded float, one of 400 digits ``inf``. A bare number's text is therefore bound as bytes, which
    SQLite stores as written (:func:`lenient_json` reads them back); every other value is text."""
    text = json.dumps(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return text.encode("ascii")
    return text


def shown_url(url: str) -> str:
    """The URL with its password masked, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a URL)"


def database_problem(error: Exception) -> str:
    """The driver's own first line (``connection refused``, ``no password supplied``…), no SQL."""
    text = str(getattr(error, "orig", None) or error).split("[SQL:")[0].split("(Background on")[0].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


_URL_EXAMPLES = "sqlite:///path/memlens.db or postgresql+psycopg://user:password@host/dbname"


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; ``None`` for another database or an in-memory one."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if str(parsed.query.get("uri", "")).lower() in ("true", "1") and database.startswith("file:"):
        database = database[len("file:") :]  # sqlite:///file:path?mode=ro&uri=true
        if not database or database.startswith(":memory:") or "mode=memory" in str(parsed.query):
            return None
    return Path(database)


def make_engine(url: str, *, create: bool = True) -> Engine:
    """The engine for ``url``; ``create``: a SQLite file's folder is made when missing (a writer's)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(f"not a database URL: {url!r}; expected e.g. {_URL_EXAMPLES}") from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        # SQLite keeps any text in a JSON column; a row edited by hand must not stop every reader.
        lenient = {"json_deserializer": lenient_json, "json_serializer": sqlite_json}
        if database and database != ":memory:":
            path = sqlite_file(url)  # (a file: URI names its path after the scheme)
            if create and path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(
                url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_SECONDS}, **lenient
            )
        else:
            engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool, **lenient)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    try:
        if parsed.get_backend_name() == "postgresql":
            return create_engine(url, pool_pre_ping=True, pool_size=PG_POOL_SIZE, max_overflow=PG_POOL_SIZE)
        return create_engine(url)
    except NoSuchModuleError:
        raise StoreError(
            f"{shown_url(url)}: MemLens has no driver for {parsed.drivername}:// databases; "
            f"expected e.g. {_URL_EXAMPLES}"
        ) from None


class Database:
    """An engine, a session factory, and the guarantee that the schema is current."""

    def __init__(self, url: str | None = None, *, migrate: bool = True, create: bool = True):
        """``create=False`` (a command that only reads): a SQLite file that does not exist is refused
        instead of made. ``create=True`` (one that writes): a SQLite file that cannot be written, or that
        fails SQLite's quick integrity check, is refused before anything is written to it."""
        self.url = resolve_url(url)
        path = sqlite_file(self.url)
        if path is not None and not create and not path.exists():
            raise StoreUnavailableError(
                f"no database at {path}: nothing is stored there; pass the --db of one that holds "
                f"conversations (or set {ENV_URL})"
            )
        try:
            self.engine = make_engine(self.url, create=create)
        except OSError as e:  # the SQLite file's folder cannot be made
            raise StoreUnavailableError(
                f"cannot open the database {shown_url(self.url)}: {e.strerror or e} "
                f"({e.filename or 'its folder'}); pass another --db or set {ENV_URL}"
            ) from None
        except ModuleNotFoundError as e:
            hint = (
                " (install it with MemLens's postgres extra: pip install 'memlens[postgres]')"
                if e.name and e.name.startswith("psycopg")
                else ""
            )
            raise StoreUnavailableError(
                f"cannot open the database {shown_url(self.url)}: its driver {e.name!r} is not "
                f"installed{hint}; MemLens supports sqlite:/// and postgresql+psycopg:// "
                "URLs"
            ) from None
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(
            self.engine.execution_options(memlens_read_only=True), expire_on_commit=False
        )
        self._turn_locks = TurnLocks(self.engine, pool_size=PG_POOL_SIZE)
        self._pinned = threading.local()  # the connection this thread's sessions share (pinned())
        # SQLite has one writer at a time, and a writer that finds the file locked polls for it,
        # sleeping up to 0.1 s between tries, while newcomers can take it first: under many
        # concurrent turns a few waited seconds. This process's writers queue on a lock instead
        # and are woken as soon as the one before them commits (other processes still wait on
        # SQLite's busy timeout). Re-entrant: a write session opened inside another on the same
        # thread waits on SQLite as before, never on itself. A writer queued longer than the busy
        # timeout goes on to SQLite's own wait, so a stuck writer still ends in SQLite's error.
        self._writers = threading.RLock() if self.engine.dialect.name == "sqlite" else None
        if create and path is not None and path.exists():
            self._check_writable(path)
        if migrate:
            from .migrate import upgrade

            try:
                upgrade(self.engine)
            except DBAPIError as e:  # unreachable server, refused password, read-only file, …
                self.engine.dispose()
                raise StoreUnavailableError(
                    f"cannot open the database {shown_url(self.url)}: {database_problem(e)}; "
                    f"check the URL (--db or {ENV_URL}) and that the server is running"
                ) from None

    def _check_writable(self, path: Path) -> None:
        """Refuse, in one line, a SQLite file a writer cannot use: one it may not write, or one whose pages
        SQLite's ``quick_check`` finds damaged (writing to it could spread the damage)."""
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            self.engine.dispose()
            raise StoreUnavailableError(
                f"the database {path} is read-only (its file or its folder cannot be written); "
                f"commands that only read it work, or pass a writable --db"
            )
        try:
            with self.engine.connect() as conn:
                problems = [row[0] for row in conn.exec_driver_sql("PRAGMA quick_check")]
        except DBAPIError as e:
            problems = [database_problem(e)]
        if problems != ["ok"]:
            self.engine.dispose()
            raise StoreUnavailableError(
                f"the database {path} is damaged ({problems[0]}): nothing was written to it; restore "
                f"it from a copy, or pass another --db (commands that only read may still show what "
                f"is readable)"
            )

    @contextmanager
    def session(self, *, write: bool = True) -> Iterator[Session]:
        """A unit of work: committed at the end of the block, rolled back on any error.

        ``write=False`` declares the block read-only, which on SQLite lets it run alongside a
        writer instead of queueing for the write lock.
        """
        with self._queued() if write and self._writers is not None else nullcontext():
            conn = getattr(self._pinned, "conn", None)
            if conn is None:
                session = (self._sessions if write else self._read_sessions)()
            else:  # its own transaction, on the pinned connection (read-only matters on SQLite only)
                session = self._sessions(bind=conn)
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
            finally:
                session.close()

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Every session this thread opens in the block runs on one pooled connection, each in a
        transaction of its own as before (PostgreSQL; elsewhere nothing changes). A turn's dozen
        short transactions then check out, and ping, one connection instead of one each. Nested
        blocks share the outer one's."""
        if self.engine.dialect.name != "postgresql" or getattr(self._pinned, "conn", None) is not None:
            yield
            return
        with self.engine.connect() as conn:
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    @contextmanager
    def _queued(self) -> Iterator[None]:
        """This process's turn to write on SQLite, waited for at most :data:`SQLITE_BUSY_SECONDS`."""
        assert self._writers is not None
        queued = self._writers.acquire(timeout=SQLITE_BUSY_SECONDS)
        try:
            yield
        finally:
            if queued:
                self._writers.release()

    def conversation_lock(self, conversation_id: str, *, timeout: float = TURN_WAIT_SECONDS):
        """Hold a conversation's turn lock for a ``with`` block: one turn (or variable edit) at a
        time per conversation, across processes; released also when the holder is killed
        (:mod:`core.store.locks`). Waits at most ``timeout`` seconds (0: not at all), else
        :class:`~core.store.errors.ConversationBusyError`."""
        return self._turn_locks.hold(conversation_id, timeout)

    def dispose(self) -> None:
        self._turn_locks.dispose()
        self.engine.dispose()

    @property
    def backend(self) -> str:
        return self.engine.dialect.name
