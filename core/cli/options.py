"""What the commands share, so each convention is written once:

- ``--db`` and the store it opens; ``--skip-bad`` and how a skipped record is reported;
- ``--input-format`` for what a command reads and ``--format`` only for what it prints (the old
  spellings, ``--format-in`` and an input's ``--format``, still work with a note on stderr);
- ``--format csv`` for tabular output (:func:`print_rows`), and times as ISO 8601 in JSON and CSV
  (:func:`iso_time`), as ``YYYY-MM-DD HH:MM`` in tables (:func:`when`);
- progress on stderr while long work runs, when stderr is a terminal (:class:`Progress`);
- whole-number options (:func:`whole_number`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from core.io.readers.registry import ImportResult
    from core.store.db import Database

# The default is core.store.db's (resolve_url); that module is imported only when a command opens
# the store, so building the parser loads no database driver.
DB_HELP = "database URL (default: MEMLENS_DATABASE_URL, else data/memlens.db in a checkout or the user's data folder)"


def add_db_option(parser: argparse.ArgumentParser, help: str = DB_HELP) -> None:
    parser.add_argument("--db", default=None, help=help)


def open_db(args: argparse.Namespace, *, write: bool = True) -> Database:
    """The store ``--db`` names (else the configured one). ``write=False`` for a command that only reads
    it: a database that does not exist is refused, never made."""
    from core.store.db import Database

    return Database(args.db, create=write)


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


def whole_number(name: str, minimum: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} {value} is out of range: it must be at least {minimum}")
        return value

    return parse


# -- what is read, what is printed ----------------------------------------------------------------------


def _input_format(text: str) -> str:
    from core.io.readers.registry import FORMATS

    if text not in FORMATS:
        raise argparse.ArgumentTypeError(f"unknown format {text!r}; expected one of {', '.join(FORMATS)}")
    return text


class _Spelling(argparse.Action):
    """Stores the value; an old spelling of the option also says, on stderr, which one to use."""

    def __init__(self, option_strings, dest, old: Sequence[str] = (), **kwargs):
        self.old = tuple(old)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string in self.old:
            print(f"note: {option_string} is deprecated; use {self.option_strings[0]} {values}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_input_format_option(parser: argparse.ArgumentParser, *, old: Sequence[str] = ("--format-in",)) -> None:
    """``--input-format NAME``: the format of the file read (default: detected). ``old`` are the
    spellings it replaces, still accepted with a note."""
    from core.io.readers.registry import FORMATS

    parser.add_argument(
        "--input-format",
        *old,
        dest="input_format",
        default=None,
        metavar="NAME",
        type=_input_format,
        action=_Spelling,
        old=old,
        help=f"the file's format (default: detected): {', '.join(FORMATS)}",
    )


def add_format_option(
    parser: argparse.ArgumentParser, choices: Sequence[str] = ("table", "json", "csv"), default: str = "table"
) -> None:
    """``--format``: how the output is printed."""
    parser.add_argument(
        "--format",
        choices=tuple(choices),
        default=default,
        help=f"output format (default {default})"
        + ("; csv: one row per line, with a header" if "csv" in choices else ""),
    )


def iso_time(t: float | None) -> str | None:
    """A stored time (seconds since the epoch) as ISO 8601 in UTC, ``2026-11-02T09:30:00.250Z``;
    None when unset or when no calendar holds it."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return None


def when(t: float | None) -> str:
    """A stored time as ``YYYY-MM-DD HH:MM`` (UTC): empty when unset, ``?`` for one no calendar holds."""
    if t is None:
        return ""
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, ValueError, OSError):
        return "?"


def print_rows(rows: Sequence[dict[str, Any]], fmt: str, columns: Sequence[str] | None = None) -> None:
    """Rows as one JSON array (``json``) or as CSV with a header (``csv``: ``columns`` in that order,
    each cell as :func:`_cell` writes it)."""
    if fmt == "json":
        sys.stdout.write(json.dumps(list(rows), ensure_ascii=False) + "\n")
        return
    columns = list(columns or (rows[0].keys() if rows else ()))
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(columns)
    for row in rows:
        out.writerow([_cell(row.get(c)) for c in columns])


def _cell(value: Any) -> Any:
    """A CSV cell: None empty, a boolean, list or dict as its JSON text (``true``, ``["a"]``)."""
    if value is None:
        return ""
    if isinstance(value, (bool, list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return value


# -- progress -------------------------------------------------------------------------------------------


class Progress:
    """A line on stderr counting long work (``run: turn 3 of 8``), written over in place and wiped
    at the end. Only when stderr is a terminal: a pipe, a log or a test gets the command's own lines
    alone. Use as ``with Progress("run", total=8) as progress: progress.step()``."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        stream=None,
        counting: Callable[[int, int | None], str] | None = None,
    ):
        self.label, self.total, self.unit, self.counting = label, total, unit, counting
        self.stream = stream if stream is not None else sys.stderr
        self.shown = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self._wrote = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def step(self, detail: str = "", by: int = 1) -> None:
        self.update(self.done + by, detail)

    def update(self, done: int, detail: str = "", total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if not self.shown:
            return
        count = (
            self.counting(done, self.total)
            if self.counting
            else f"{done:,}" + (f" of {self.total:,}" if self.total else "") + (f" {self.unit}" if self.unit else "")
        )
        line = f"{self.label}: {count}" + (f" · {detail}" if detail else "")
        self.stream.write("\r\x1b[K" + line[:200])
        self.stream.flush()
        self._wrote = True

    def close(self) -> None:
        if self._wrote:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._wrote = False
