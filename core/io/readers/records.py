"""The input, record by record: a JSON document, a top-level array read element by element, JSON
Lines read line by line, or a CSV table read row by row (:class:`Records`); and the problems of one
import (:class:`ReadContext`)."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from core import limits
from core.io.errors import FormatError, RecordError, TooManyProblems

#: In all-or-nothing mode, reading stops after this many problems (the error lists the first few).
MAX_PROBLEMS = 100


@dataclass(frozen=True)
class Problem:
    """A malformed record: where it is and what is wrong with it.

    ``record`` counts from 0 (``None`` when the file is a single record); ``field`` is the
    part of the record at fault (``"message 3"``, ``"tools"``, ``"line 8"``…); ``message``
    reads on its own ("message 3: 'observation' must follow a 'function_call'").
    """

    record: int | None
    field: str
    message: str
    conversation: str = ""

    @property
    def text(self) -> str:
        if self.record is None:
            return self.message
        where = f"record {self.record}"
        if self.conversation:
            where += f" (conversation {self.conversation!r})"
        return f"{where}{', ' if self.message.startswith('message ') else ': '}{self.message}"

    def to_json(self) -> dict:
        return {
            "record": self.record,
            "field": self.field,
            "message": self.message,
            "conversation": self.conversation,
            "text": self.text,
        }


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
#: A CSV header's column name: a database export's, so a broken JSON line is never taken for one.
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_ .-]*")
# A table's one field may be as large as the file the import allows (a long message in one cell).
csv.field_size_limit(max(csv.field_size_limit(), limits.MAX_IMPORT_BYTES))


@dataclass(frozen=True)
class Record:
    index: int | None
    value: Any
    error: str = ""  # a JSON Lines line that is not JSON


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)


class Progress:
    """Reports (done_bytes, total_bytes) at most about 200 times, always ending at the total."""

    def __init__(self, callback: Callable[[int, int], None] | None, total_bytes: int, total_chars: int):
        self.callback = callback
        self.total = total_bytes
        self.ratio = total_bytes / total_chars if total_chars else 1.0
        self.step = max(1, total_bytes // 200)
        self.last = -1

    def at_char(self, pos: int) -> None:
        self.at_bytes(int(pos * self.ratio))

    def at_bytes(self, done: int) -> None:
        if self.callback is None:
            return
        done = min(done, self.total)
        if done >= self.total or self.last < 0 or done - self.last >= self.step:
            if done != self.last:
                self.last = done
                self.callback(done, self.total)


class Records:
    """The records of one input, read lazily.

    ``layout`` is ``document`` (one JSON value), ``array`` (a top-level JSON array, read element
    by element), ``lines`` (JSON Lines, read line by line) or ``csv`` (a CSV table with a header
    line, read row by row as ``{column: text}``; ``columns`` names them). ``first`` is the document
    itself or the first record's value, for detection.
    """

    def __init__(self, text: str, name: str, progress: Progress):
        self.text = text
        self.name = name
        self.progress = progress
        if not text.strip():
            raise FormatError(f"{name} is empty; expected a JSON or JSON Lines conversation file")
        start = _WS.match(text, 0).end()
        self._start = start
        self.first: Any = None
        self.columns: list[str] = []
        if text[start] == "[":
            self.layout = "array"
            pos = _WS.match(text, start + 1).end()
            if pos < len(text) and text[pos] != "]":
                self.first, _ = self._decode(pos, first=True)
            return
        self.columns = self._header(start)
        if self.columns:
            self.layout = "csv"
            self.first = next((r.value for r in self._rows() if r.value is not None), dict.fromkeys(self.columns, ""))
            return
        value, end = self._decode(start, first=True)
        rest = _WS.match(text, end).end()
        if rest >= len(text):
            self.layout = "document"
        elif "\n" not in text[start:end]:
            self.layout = "lines"
        else:
            line, col = _line_col(text, rest)
            raise FormatError(f"{name} is not JSON or JSON Lines: Extra data at line {line}, column {col}")
        self.first = value

    def _decode(self, pos: int, first: bool = False) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(self.text, pos)
        except json.JSONDecodeError as e:
            what = "is not JSON or JSON Lines" if first else "is not valid JSON"
            raise FormatError(f"{self.name} {what}: {e.msg} at line {e.lineno}, column {e.colno}") from None
        except ValueError:
            line, col = _line_col(self.text, pos)
            raise FormatError(f"{self.name}: the value at line {line}, column {col} {limits.NUMBER_TOO_LONG}") from None
        except RecursionError:
            line, col = _line_col(self.text, pos)
            raise FormatError(f"{self.name}: the value at line {line}, column {col} is nested too deeply") from None

    def __iter__(self) -> Iterator[Record]:
        if self.layout == "document":
            yield Record(None, self.first)
            self.progress.at_char(len(self.text))
        elif self.layout == "array":
            yield from self._array()
        elif self.layout == "csv":
            yield from self._rows()
        else:
            yield from self._lines()

    def _header(self, start: int) -> list[str]:
        """The columns when the input is a CSV table (a first line of two or more distinct column names,
        as a database tool exports a table), else ``[]``: JSON never starts that way."""
        if self.text[start] in "{[":
            return []
        nl = self.text.find("\n", start)
        line = self.text[start : nl if nl >= 0 else len(self.text)].rstrip("\r")
        try:
            names = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            return []
        names = [n.strip() for n in names]
        if len(names) < 2 or len(set(names)) < len(names) or not all(_COLUMN.fullmatch(n) for n in names):
            return []
        return names

    def _rows(self) -> Iterator[Record]:
        """A CSV table's rows after its header, each ``{column: text}``; a row with another number of fields
        is a bad record. Quoted fields may hold commas, quotes and line breaks."""
        consumed = [0]

        def lines() -> Iterator[str]:
            for line in io.StringIO(self.text[self._start :]):
                consumed[0] += len(line)
                yield line

        reader = csv.reader(lines())
        index = 0
        try:
            next(reader)  # the header
            for row in reader:
                if not row or row == [""]:
                    continue
                if len(row) != len(self.columns):
                    yield Record(
                        index,
                        None,
                        error=f"line {reader.line_num} has {len(row)} fields; the header has "
                        f"{len(self.columns)} ({', '.join(self.columns)})",
                    )
                else:
                    yield Record(index, dict(zip(self.columns, row)))
                index += 1
                self.progress.at_char(self._start + consumed[0])
        except csv.Error as e:
            raise FormatError(f"{self.name} is not a valid CSV table: {e} (line {reader.line_num})") from None
        self.progress.at_char(len(self.text))

    def _array(self) -> Iterator[Record]:
        text, n = self.text, len(self.text)
        pos = _WS.match(text, self._start + 1).end()
        index = 0
        if pos < n and text[pos] == "]":
            end = pos + 1
        else:
            while True:
                value, end = self._decode(pos)
                yield Record(index, value)
                self.progress.at_char(end)
                pos = _WS.match(text, end).end()
                if pos < n and text[pos] == ",":
                    pos = _WS.match(text, pos + 1).end()
                    index += 1
                    continue
                if pos < n and text[pos] == "]":
                    end = pos + 1
                    break
                line, col = _line_col(text, pos)
                raise FormatError(f"{self.name} is not valid JSON: expected ',' or ']' at line {line}, column {col}")
        rest = _WS.match(text, end).end()
        if rest < n:
            line, col = _line_col(text, rest)
            raise FormatError(f"{self.name} is not valid JSON: Extra data at line {line}, column {col}")
        self.progress.at_char(n)

    def _lines(self) -> Iterator[Record]:
        text, n = self.text, len(self.text)
        pos, lineno, index = 0, 0, 0
        while pos < n:
            nl = text.find("\n", pos)
            if nl < 0:
                nl = n
            line = text[pos:nl]
            lineno += 1
            pos = nl + 1
            if not line.strip():
                continue
            try:
                yield Record(index, json.loads(line))
            except json.JSONDecodeError as e:
                yield Record(index, None, error=f"line {lineno} is not valid JSON ({e.msg}, column {e.colno})")
            except ValueError:
                yield Record(index, None, error=f"line {lineno} {limits.NUMBER_TOO_LONG}")
            except RecursionError:
                yield Record(index, None, error=f"line {lineno} is nested too deeply")
            index += 1
            self.progress.at_char(pos)
        self.progress.at_char(n)

    def inner(self, items: list) -> Iterator[Record]:
        """Records of a list inside a document (``data``, ``prereq_conversations``…)."""
        total = len(items) or 1
        for i, item in enumerate(items):
            yield Record(i, item)
            self.progress.at_bytes(int(self.progress.total * (i + 1) / total))


class ReadContext:
    """Collects the problems of one import; stops early when the import cannot succeed anyway."""

    def __init__(self, name: str, skip_bad: bool):
        self.name = name
        self.stem = Path(name).stem
        self.skip_bad = skip_bad
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.records = 0

    def report(self, problem: Problem) -> None:
        self.problems.append(problem)
        if not self.skip_bad and len(self.problems) >= MAX_PROBLEMS:
            raise TooManyProblems()

    def each(
        self,
        records: Iterable[Record],
        parse_one: Callable[[Any, int | None], Any],
        label: Callable[[Any], str] | None = None,
        check: Callable[[Any, str], None] | None = None,
    ) -> Iterator[Any]:
        """``parse_one(value, index)`` for every record; a bad record becomes a problem. Each record
        is held to the depth limit first — by ``check(value, where)`` when the format measures it its
        own way (a message tree nested reply by reply) — and refused whole when it goes beyond."""
        for rec in records:
            self.records += 1
            if rec.error:
                self.report(Problem(rec.index, rec.error.split(" is ")[0], rec.error))
                continue
            try:
                if check is None:
                    limits.check_value(rec.value, "the record", finite=False)
                else:
                    check(rec.value, "the record")
            except limits.LimitError as e:
                self.report(Problem(rec.index, "", str(e)))
                continue
            try:
                result = parse_one(rec.value, rec.index)
            except RecordError as e:
                conv = ""
                if label is not None:
                    try:
                        conv = label(rec.value)
                    except Exception:  # a label is a courtesy; a record too broken for one has none
                        conv = ""
                self.report(Problem(rec.index, e.field, str(e), conv))
                continue
            yield result
