"""What the subcommands share: the ``--db`` option and the store it opens, ``--skip-bad`` and how a skipped
record is reported, and how a stored time prints."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.io.readers.registry import ImportResult
    from core.store.db import Database

# The default is core.store.db's (resolve_url); that module is imported only when a command opens
# the store, so building the parser loads no database driver.
DB_HELP = "database URL (default: MEMLENS_DATABASE_URL or data/memlens.db)"


def add_db_option(parser: argparse.ArgumentParser, help: str = DB_HELP) -> None:
    parser.add_argument("--db", default=None, help=help)


def open_db(args: argparse.Namespace) -> Database:
    """The store ``--db`` names (else the configured one)."""
    from core.store.db import Database

    return Database(args.db)


SKIP_BAD_HELP = "read the good records and report the bad ones (default: a bad record refuses the whole file)"


def add_skip_bad_option(parser: argparse.ArgumentParser, help: str = SKIP_BAD_HELP) -> None:
    parser.add_argument("--skip-bad", action="store_true", help=help)


def report_skipped(result: ImportResult) -> None:
    """Each record an import left out, then each of its notes (what a file held besides
    conversations), one line each on stderr (stdout stays the command's output)."""
    for problem in result.problems:
        print(f"skipped: {problem.text}", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)


def when(t: float | None) -> str:
    """A stored time as ``YYYY-MM-DD HH:MM`` (UTC): empty when unset, ``?`` for one no calendar holds."""
    if t is None:
        return ""
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, ValueError, OSError):
        return "?"
