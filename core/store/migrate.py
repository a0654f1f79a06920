"""Bring a database to the current schema with the versioned migrations in ``migrations/``.

The whole upgrade runs in one transaction (SQLite and PostgreSQL both have transactional DDL),
so two processes starting at once cannot both create the tables: on SQLite the second waits for
the first's write lock, on PostgreSQL for an advisory lock.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_PG_LOCK = 7_451_903  # any constant: the advisory lock that serialises concurrent upgrades


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config()
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
