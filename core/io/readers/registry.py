"""The formats MemLens reads, in detection order (:func:`register_format`), and reading a file, an
upload or a text with them: detected or named, all-or-nothing or skipping bad records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from core import limits
from core.io.errors import FormatError, TooManyProblems
from core.model.conversation import Conversation, read_once
from core.words import plural

from .common import excerpt
from .records import MAX_PROBLEMS, Problem, Progress, ReadContext, Records

#: The size the importer is built and tested for (``core.limits``); larger files are refused unless asked for.
MAX_IMPORT_BYTES = limits.MAX_IMPORT_BYTES
#: The file endings an upload may have: text (JSON, JSON Lines, a CSV table) and the databases the binary
#: formats read (an OpenAI Agents SDK SQLiteSession file).
UPLOAD_EXTENSIONS = ("json", "jsonl", "csv", "db", "sqlite", "sqlite3")
_PROBLEMS_SHOWN = 3


@dataclass
class ImportResult:
    """What an import produced: the conversations, the records left out and why, the format."""

    conversations: list[Conversation]
    problems: list[Problem]
    format: str
    name: str = "input"
    records: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        """Number of distinct records left out."""
        return len({p.record for p in self.problems})

    def summary(self) -> str:
        n = len(self.conversations)
        text = f"{n} conversation{'s' if n != 1 else ''} from {self.name} ({self.format})"
        if self.problems:
            k = self.skipped
            text += f"; {k} bad record{'s' if k != 1 else ''} left out"
        return text


@dataclass(frozen=True)
class Format:
    """A readable format: ``sniff`` says whether the document (or the first record of an array,
    JSON Lines or CSV file) looks like it; ``read`` turns the records into conversations, reporting
    bad records through the context. Only a format that says it reads ``tables`` is given a CSV
    table (its rows as ``{column: text}`` records). A format stored as a binary file (a database) names
    the bytes such a file starts with (``magic``) and reads its bytes with ``binary(data, ctx)``; a file
    that starts so is read that way, whatever else the format reads as text."""

    name: str
    description: str
    sniff: Callable[[Any, str], bool]
    read: Callable[[Records, ReadContext], Iterable[Conversation]]
    tables: bool = False
    magic: bytes = b""
    binary: Callable[[bytes, ReadContext], Iterable[Conversation]] | None = None


_REGISTRY: dict[str, Format] = {}
#: Names of every readable format, in detection order (kept up to date by register_format).
FORMATS: list[str] = []


def register_format(fmt: Format, *, before: str | None = None) -> None:
    """Add (or replace) a format. Detection tries formats in order; a format with a distinctive
    marker (a bundle header, say) should go ``before`` the generic ones::

        register_format(Format("memlens-bundle", "MemLens JSON bundle",
                               sniff=lambda first, layout: layout == "document" and isinstance(first, dict)
                               and "memlens_bundle" in first,
                               read=read_bundle), before=FORMATS[0])

    ``read(records, ctx)`` yields conversations; it reads records with ``ctx.each(records,
    parse_one, label)``, where ``parse_one(value, index)`` raises :class:`RecordError` for a bad
    record, so bad records are reported and skipped like in every other format.
    """
    items = [(k, v) for k, v in _REGISTRY.items() if k != fmt.name]
    at = next((i for i, (k, _) in enumerate(items) if k == before), len(items))
    items.insert(at, (fmt.name, fmt))
    _REGISTRY.clear()
    _REGISTRY.update(items)
    FORMATS[:] = list(_REGISTRY)


def unregister_format(name: str) -> None:
    """Remove a format (a plugin being unloaded, a test cleaning up)."""
    _REGISTRY.pop(name, None)
    FORMATS[:] = list(_REGISTRY)


def formats() -> list[Format]:
    return list(_REGISTRY.values())


def import_file(
    path: str | Path,
    fmt: str | None = None,
    *,
    skip_bad: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    max_bytes: int | None = MAX_IMPORT_BYTES,
) -> ImportResult:
    """Read every conversation in a file. See :mod:`core.io.readers` for the formats and the modes.

    ``on_progress(done_bytes, total_bytes)`` is called as records are read (a few hundred times
    at most). Files over ``max_bytes`` are refused before reading (``None`` lifts the limit).
    """
    path = Path(path)
    data = read_file(path, max_bytes)
    return import_bytes(data, path.name, fmt, skip_bad=skip_bad, on_progress=on_progress, max_bytes=None)


def read_file(path: str | Path, max_bytes: int | None = MAX_IMPORT_BYTES) -> bytes:
    """A conversation file's bytes, its size checked before it is read; a missing, unreadable or too
    large file raises :class:`FormatError` saying so (``max_bytes=None`` lifts the limit)."""
    path = Path(path)
    return limits.read_bytes(
        path,
        FormatError,
        "a conversation file",
        None if max_bytes is None else lambda size: _check_size(size, path.name, max_bytes),
    )


def import_bytes(
    data: bytes,
    name: str = "input",
    fmt: str | None = None,
    *,
    skip_bad: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    max_bytes: int | None = MAX_IMPORT_BYTES,
) -> ImportResult:
    """Like :func:`import_file`, for an upload's bytes (a binary format's file too: :class:`Format`)."""
    if max_bytes is not None:
        _check_size(len(data), name, max_bytes)
    if fmt is not None and fmt not in _REGISTRY:
        raise FormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    binary = _binary_format(data, fmt)
    if binary is not None:
        if on_progress:
            on_progress(0, len(data))
        result = _read_binary(binary, data, name, skip_bad)
        if on_progress:
            on_progress(len(data), len(data))
        return result
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        expected = (
            f"a file of the {fmt} format ({_REGISTRY[fmt].description})"
            if fmt
            else "a JSON or JSON Lines conversation file, or a database file of a format MemLens reads"
        )
        raise FormatError(f"{name} is not UTF-8 text nor a database MemLens reads; expected {expected}") from None
    total = len(data)
    del data
    return _import(text, name, fmt, skip_bad, on_progress, total)


def _binary_format(data: bytes, fmt: str | None) -> Format | None:
    """The format that reads ``data`` as a binary file: the named one when the file starts with its magic,
    else (detecting) the first format whose magic it starts with."""
    named = [_REGISTRY[fmt]] if fmt is not None else list(_REGISTRY.values())
    return next((f for f in named if f.binary is not None and f.magic and data.startswith(f.magic)), None)


def _read_binary(fmt: Format, data: bytes, name: str, skip_bad: bool) -> ImportResult:
    ctx = ReadContext(name, skip_bad)
    return _collect(fmt.binary(data, ctx), ctx, fmt.name, name, skip_bad)


def _check_size(size: int, name: str, max_bytes: int) -> None:
    try:
        limits.check_file_size(size, name, max_bytes)
    except limits.LimitError as e:
        raise FormatError(str(e)) from None


def import_text(
    text: str,
    name: str = "input",
    fmt: str | None = None,
    *,
    skip_bad: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Like :func:`import_file`, for text already in memory."""
    total = len(text.encode("utf-8", "surrogatepass")) if on_progress else len(text)
    return _import(text.lstrip("\ufeff"), name, fmt, skip_bad, on_progress, total)


def _import(
    text: str,
    name: str,
    fmt: str | None,
    skip_bad: bool,
    on_progress: Callable[[int, int], None] | None,
    total_bytes: int,
) -> ImportResult:
    if fmt is not None and fmt not in _REGISTRY:
        raise FormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    progress = Progress(on_progress, total_bytes, len(text))
    progress.at_bytes(0)
    records = Records(text, name, progress)
    fmt = fmt or _detect(records.first, records.layout, name)
    if records.layout == "csv" and not _REGISTRY[fmt].tables:
        raise FormatError(f"{name} is a CSV table; the {fmt} format is read from JSON or JSON Lines")
    ctx = ReadContext(name, skip_bad)
    result = _collect(_REGISTRY[fmt].read(records, ctx), ctx, fmt, name, skip_bad)
    progress.at_bytes(total_bytes)
    return result


def _collect(read: Iterable[Conversation], ctx: ReadContext, fmt: str, name: str, skip_bad: bool) -> ImportResult:
    """What a format's reading gave, all-or-nothing unless ``skip_bad``; each turn read once."""
    conversations: list[Conversation] = []
    try:
        for conv in read:
            conv = _each_turn_once(conv, ctx)
            if conv is not None:
                conversations.append(conv)
    except TooManyProblems:
        pass
    if ctx.problems and not skip_bad:
        raise FormatError(_problems_message(name, ctx.problems), ctx.problems)
    if not conversations and not ctx.problems:
        raise FormatError(f"{name} holds no conversation")
    return ImportResult(conversations, ctx.problems, fmt, name, ctx.records, ctx.notes)


def _each_turn_once(conv: Conversation, ctx: ReadContext) -> Conversation | None:
    """The conversation with each turn read once (:func:`read_once`), a note saying which were
    listed again; ``None``, with a problem, when a turn id holds two different turns, or when it is
    longer than MemLens takes (its turns, or one message: :func:`core.limits.check_turns`,
    :func:`core.limits.check_message`)."""
    named = f"conversation {excerpt(conv.id, 60)!r}"
    try:
        limits.check_turns(len(conv.turns), named)
        for p, turn in enumerate(conv.turns):
            for j, m in enumerate(turn.messages):
                limits.check_message(len(m.content), f"{named}: turn {p + 1}, message {j + 1}")
        turns, repeated = read_once(conv.turns)
    except limits.LimitError as e:
        ctx.report(Problem(None, "", str(e), conv.id))
        return None
    except ValueError as e:
        ctx.report(Problem(None, "id", f"{named}: {e}", conv.id))
        return None
    if not repeated:
        return conv
    ids = list(dict.fromkeys(repeated))
    shown = ", ".join(repr(excerpt(i)) for i in ids[:_PROBLEMS_SHOWN])
    if len(ids) > _PROBLEMS_SHOWN:
        shown += ", …"
    ctx.notes.append(
        f"conversation {excerpt(conv.id, 60)!r}: {plural(len(ids), 'turn')} listed more than once, read once ({shown})"
    )
    return replace(conv, turns=turns)  # (its thread index is made for these turns when first asked for)


def _problems_message(name: str, problems: list[Problem]) -> str:
    shown = "; ".join(p.text for p in problems[:_PROBLEMS_SHOWN])
    more = len(problems) - _PROBLEMS_SHOWN
    if more > 0:
        shown += f"; and {more}{'+' if len(problems) >= MAX_PROBLEMS else ''} more"
    if any(p.record is not None for p in problems):
        shown += " — nothing was imported; fix these records or choose to skip bad records"
    return f"{name}: {shown}"


def read_conversations(path: str | Path, fmt: str | None = None) -> list[Conversation]:
    """Every conversation in a file, all or nothing (raises :class:`FormatError`)."""
    return import_file(path, fmt, max_bytes=None).conversations


def parse_conversations(text: str, name: str = "input", fmt: str | None = None) -> list[Conversation]:
    """Every conversation in a text, all or nothing (raises :class:`FormatError`)."""
    return import_text(text, name, fmt).conversations


def detect_format(data: Any, is_jsonl: bool = False, name: str = "input") -> str:
    """The format of already-parsed data: a document, or the list of records of an array/JSONL."""
    if isinstance(data, list):
        return _detect(data[0] if data else None, "lines" if is_jsonl else "array", name)
    return _detect(data, "document", name)


def _detect(first: Any, layout: str, name: str) -> str:
    for fmt in _REGISTRY.values():
        if (fmt.tables or layout != "csv") and fmt.sniff(first, layout):
            return fmt.name
    raise FormatError(
        f"{name}: unknown format ({_describe(first, layout)}); expected one of {', '.join(FORMATS)} "
        "(name the format explicitly if the file is one of them)"
    )


_KEYS_SHOWN = 12


def _describe(first: Any, layout: str) -> str:
    """What the file looks like, for an unknown-format error: its layout and top-level keys."""
    if layout == "csv" and isinstance(first, dict):
        columns = [excerpt(str(k), 30) for k in list(first)[:_KEYS_SHOWN]]
        return f"found a CSV table with columns {', '.join(columns)}"
    where = {"array": "a JSON array whose first record is ", "lines": "JSON Lines whose first record is "}.get(
        layout, ""
    )
    if isinstance(first, dict):
        keys = [excerpt(str(k), 30) for k in list(first)[:_KEYS_SHOWN]]
        more = f", … ({len(first)} keys)" if len(first) > _KEYS_SHOWN else ""
        return f"found {where}an object with keys {', '.join(keys) or '(none)'}{more}"
    if first is None and layout == "array":
        return "found an empty JSON array"
    kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(first), "null"
    )
    return f"found {where}{kind}"
