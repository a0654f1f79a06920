"""Reading conversations from real formats, auto-detected.

* ``openai`` — OpenAI chat messages: a JSON array of ``{role, content, name?, tool_calls?,
  tool_call_id?}``, an object with a ``messages`` array, or JSON Lines with one such object per
  line (tau-bench style). A turn starts at each ``user`` message; leading ``system`` messages
  are the node's system prompt, not history; a turn's final answer is its last assistant
  message. ``content`` may be a list of typed parts, which also covers LLaMA-Factory's "v1"
  messages: ``reasoning`` parts become ``reasoning`` messages, ``tool_call`` parts (a JSON
  string) become tool calls, and a tool result written as a JSON list of ``{tool_call_id, …}``
  is paired with its call.
* ``sharegpt`` — ``{conversations: [{from, value}], tools?, system?}`` records. ``human`` is
  the user, ``gpt`` the assistant, ``function_call`` an assistant tool call (``value`` is JSON
  ``{name, arguments}`` or a list of them) and ``observation`` its result, which must follow
  the call.
* ``oasst`` — OpenAssistant message trees (``{message_tree_id, tree_state, prompt}``, one per
  line). A turn is a prompter message plus one assistant reply; several replies to one prompt
  are sibling turns (regenerations), several prompter replies to one answer are sibling turns
  (edits). See :func:`_oasst_turns` for how the parent ids keep every branch a Dify thread.
* ``bfcl`` — BFCL memory prerequisite conversations (user-only turns); recall probes, when the
  file has them, are attached to the conversation that states their answer.
* ``dify-messages`` — Dify Service API history (``GET /v1/messages``: ``{data: [...]}`` or the
  bare list), grouped by ``conversation_id``.
* ``dify-web`` — Dify web chat items (``isAnswer`` / ``parentMessageId``); question items
  pair with their answers into message records.

Import is record by record: a bad record is reported as a :class:`Problem` naming the record
(counted from 0, like the file's own array), the conversation when known, and the field. By
default the import is all-or-nothing (any problem raises :class:`FormatError` listing them);
``skip_bad=True`` returns the good conversations with the problems instead. A conversation is
either read whole or left out whole, never half. Large inputs are read one record at a time (a
top-level JSON array element by element, JSON Lines line by line) with a progress callback.

New formats (the MemLens bundle, say) plug in with :func:`register_format`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from core import limits
from core.errors import MemLensError
from core.model.conversation import (ANSWER, INTERMEDIATE, QUERY, REASONING, TOOL_CALL, TOOL_RESULT, Conversation,
                                     FileRef, Message, ToolCall, Turn)
from core.report.bundle import FORMAT as REPORT_FORMAT, BundleFieldError, parse_report

_ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant"}
_VALID_ROLES = ("system", "user", "assistant", "tool")
_TEXT_PARTS = {"text", "input_text", "output_text"}
_IMAGE_PARTS = {"image_url", "image", "input_image"}
_REASONING_PARTS = {"reasoning", "thinking"}

#: The size the importer is built and tested for (``core.limits``); larger files are refused unless asked for.
MAX_IMPORT_BYTES = limits.MAX_IMPORT_BYTES
#: In all-or-nothing mode, reading stops after this many problems (the error lists the first few).
MAX_PROBLEMS = 100
_PROBLEMS_SHOWN = 3


class FormatError(MemLensError):
    """The input is not a conversation in a supported format; the message says what to fix.

    ``problems`` lists every bad record found (empty when the file as a whole is unreadable).
    """

    def __init__(self, message: str, problems: Iterable["Problem"] = ()):
        super().__init__(message)
        self.problems: list[Problem] = list(problems)


class RecordError(FormatError):
    """One record is malformed. ``message`` names the field ("message 3 has no 'role'")."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


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
        return {"record": self.record, "field": self.field, "message": self.message,
                "conversation": self.conversation, "text": self.text}


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
    """A readable format: ``sniff`` says whether the document (or the first record of an array
    or JSON Lines file) looks like it; ``read`` turns the records into conversations, reporting
    bad records through the context."""

    name: str
    description: str
    sniff: Callable[[Any, str], bool]
    read: Callable[["Records", "ReadContext"], Iterable[Conversation]]


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


# -- the input, record by record --------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Record:
    index: int | None
    value: Any
    error: str = ""  # a JSON Lines line that is not JSON


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)


class _Progress:
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
    by element) or ``lines`` (JSON Lines, read line by line). ``first`` is the document itself
    or the first record's value, for detection.
    """

    def __init__(self, text: str, name: str, progress: _Progress):
        self.text = text
        self.name = name
        self.progress = progress
        if not text.strip():
            raise FormatError(f"{name} is empty; expected a JSON or JSON Lines conversation file")
        start = _WS.match(text, 0).end()
        self._start = start
        self.first: Any = None
        if text[start] == "[":
            self.layout = "array"
            pos = _WS.match(text, start + 1).end()
            if pos < len(text) and text[pos] != "]":
                self.first, _ = self._decode(pos, first=True)
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
        except RecursionError:
            line, col = _line_col(self.text, pos)
            raise FormatError(f"{self.name}: the value at line {line}, column {col} is nested too deeply") from None

    def __iter__(self) -> Iterator[Record]:
        if self.layout == "document":
            yield Record(None, self.first)
            self.progress.at_char(len(self.text))
        elif self.layout == "array":
            yield from self._array()
        else:
            yield from self._lines()

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
            raise _TooManyProblems()

    def each(self, records: Iterable[Record], parse_one: Callable[[Any, int | None], Any],
             label: Callable[[Any], str] | None = None) -> Iterator[Any]:
        """``parse_one(value, index)`` for every record; a bad record becomes a problem."""
        for rec in records:
            self.records += 1
            if rec.error:
                self.report(Problem(rec.index, rec.error.split(" is ")[0], rec.error))
                continue
            try:
                limits.check_value(rec.value, "the record", finite=False)
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


class _TooManyProblems(Exception):
    pass


# -- entry points -----------------------------------------------------------------------------------

def import_file(path: str | Path, fmt: str | None = None, *, skip_bad: bool = False,
                on_progress: Callable[[int, int], None] | None = None,
                max_bytes: int | None = MAX_IMPORT_BYTES) -> ImportResult:
    """Read every conversation in a file. See the module docstring for formats and modes.

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
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise IsADirectoryError
        if max_bytes is not None:
            _check_size(size, path.name, max_bytes)
        return path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{path} is a directory; expected a conversation file") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None


def import_bytes(data: bytes, name: str = "input", fmt: str | None = None, *, skip_bad: bool = False,
                 on_progress: Callable[[int, int], None] | None = None,
                 max_bytes: int | None = MAX_IMPORT_BYTES) -> ImportResult:
    """Like :func:`import_file`, for an upload's bytes."""
    if max_bytes is not None:
        _check_size(len(data), name, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FormatError(f"{name} is not UTF-8 text; expected a JSON or JSON Lines conversation file") from None
    total = len(data)
    del data
    return _import(text, name, fmt, skip_bad, on_progress, total)


def _check_size(size: int, name: str, max_bytes: int) -> None:
    try:
        limits.check_file_size(size, name, max_bytes)
    except limits.LimitError as e:
        raise FormatError(str(e)) from None


def import_text(text: str, name: str = "input", fmt: str | None = None, *, skip_bad: bool = False,
                on_progress: Callable[[int, int], None] | None = None) -> ImportResult:
    """Like :func:`import_file`, for text already in memory."""
    total = len(text.encode("utf-8", "surrogatepass")) if on_progress else len(text)
    return _import(text.lstrip("\ufeff"), name, fmt, skip_bad, on_progress, total)


def _import(text: str, name: str, fmt: str | None, skip_bad: bool,
            on_progress: Callable[[int, int], None] | None, total_bytes: int) -> ImportResult:
    if fmt is not None and fmt not in _REGISTRY:
        raise FormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    progress = _Progress(on_progress, total_bytes, len(text))
    progress.at_bytes(0)
    records = Records(text, name, progress)
    fmt = fmt or _detect(records.first, records.layout, name)
    ctx = ReadContext(name, skip_bad)
    conversations: list[Conversation] = []
    try:
        for conv in _REGISTRY[fmt].read(records, ctx):
            conversations.append(conv)
    except _TooManyProblems:
        pass
    if ctx.problems and not skip_bad:
        raise FormatError(_problems_message(name, ctx.problems), ctx.problems)
    if not conversations and not ctx.problems:
        raise FormatError(f"{name} holds no conversation")
    progress.at_bytes(total_bytes)
    return ImportResult(conversations, ctx.problems, fmt, name, ctx.records, ctx.notes)


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
        if fmt.sniff(first, layout):
            return fmt.name
    raise FormatError(f"{name}: unknown format ({_describe(first, layout)}); expected one of {', '.join(FORMATS)} "
                      "(name the format explicitly if the file is one of them)")


_KEYS_SHOWN = 12


def _describe(first: Any, layout: str) -> str:
    """What the file looks like, for an unknown-format error: its layout and top-level keys."""
    where = {"array": "a JSON array whose first record is ", "lines": "JSON Lines whose first record is "}.get(
        layout, "")
    if isinstance(first, dict):
        keys = [_excerpt(str(k), 30) for k in list(first)[:_KEYS_SHOWN]]
        more = f", … ({len(first)} keys)" if len(first) > _KEYS_SHOWN else ""
        return f"found {where}an object with keys {', '.join(keys) or '(none)'}{more}"
    if first is None and layout == "array":
        return "found an empty JSON array"
    kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(first), "null")
    return f"found {where}{kind}"


def _excerpt(text: Any, width: int = 40) -> str:
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _single_id_to_stem(conversations: list[Conversation], stem: str, named: set[str]) -> list[Conversation]:
    """A file of one record names its conversation after the file, as it always has."""
    if len(conversations) == 1 and conversations[0].id not in named:
        conversations[0].id = stem
        if conversations[0].name.startswith(f"{stem}#"):
            conversations[0].name = stem
    return conversations


# -- OpenAI chat messages ---------------------------------------------------------------------------

def _flatten_content(content: Any, at: str, message_index: int) -> tuple[str, list[str], list[tuple[ToolCall, bool]]]:
    """(text, reasoning texts, tool calls with "id was generated") of a content value."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise RecordError(f"{at}: 'content' must be a string or a list of parts, not {type(content).__name__}", at)
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[ToolCall, bool]] = []
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise RecordError(f"{at}: content part {k} must be an object or a string", at)
        kind = part.get("type", "text")
        value = part.get("text", part.get("value"))
        if kind in _TEXT_PARTS:
            texts.append(value if isinstance(value, str) else "")
        elif kind in _IMAGE_PARTS:
            texts.append("[image]")
        elif kind in _REASONING_PARTS:
            reasoning.append(value if isinstance(value, str) else str(part.get("thinking", "")))
        elif kind == "tool_call":
            calls.append(_tool_call_from_part(value, f"{at}: content part {k}", f"call_{message_index}_{len(calls)}"))
        elif isinstance(value, str):
            texts.append(value)
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), reasoning, calls


def _arguments(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _tool_call_from_part(value: Any, at: str, default_id: str) -> tuple[ToolCall, bool]:
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError:
            raise RecordError(f"{at}: tool_call is not valid JSON", at.split(":")[0]) from None
    if not isinstance(data, dict) or "name" not in data:
        raise RecordError(f"{at}: tool_call needs a 'name'", at.split(":")[0])
    generated = "id" not in data
    return ToolCall(id=str(data.get("id", default_id)), name=str(data["name"]),
                    arguments=_arguments(data.get("arguments", {}))), generated


def _tool_calls(raw: Any, at: str, message_index: int) -> list[tuple[ToolCall, bool]]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise RecordError(f"{at}: 'tool_calls' must be a list", at)
    calls = []
    for k, call in enumerate(raw):
        if not isinstance(call, dict):
            raise RecordError(f"{at}: tool call {k} must be an object", at)
        fn = call.get("function", call)
        if not isinstance(fn, dict) or not fn.get("name"):
            raise RecordError(f"{at}: tool call {k} has no function name", at)
        calls.append((ToolCall(id=str(call.get("id", f"call_{message_index}_{k}")), name=str(fn["name"]),
                               arguments=_arguments(fn.get("arguments", ""))), "id" not in call))
    return calls


def _result_ids(content: str) -> list[str]:
    """Tool-call ids a tool result names in its own text (LLaMA-Factory v1 writes
    ``[{"tool_call_id": …, "name": …, "content": …}]``)."""
    text = content.lstrip()
    if not text.startswith(("[", "{")) or "tool_call_id" not in text:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    items = data if isinstance(data, list) else [data]
    return [str(x["tool_call_id"]) for x in items if isinstance(x, dict) and x.get("tool_call_id")]


def _openai_messages(raw: list) -> list[Message]:
    """Validated messages; ``ref`` is the message's 0-based index in the source list.

    Tool results are paired with their calls: by ``tool_call_id`` when given, by the ids a
    result names in its text, else with the oldest call still waiting for a result. A call
    without an id in the source takes the id its result names.
    """
    out: list[Message] = []
    pending: list[tuple[int, int, bool]] = []  # (index in out, index in its tool_calls, id generated)
    for i, m in enumerate(raw):
        at = f"message {i}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        if "role" not in m:
            raise RecordError(f"{at} has no 'role'", at)
        role = m["role"]
        if not isinstance(role, str):
            raise RecordError(f"{at} has a 'role' that is not a string", at)
        role = _ROLE_ALIASES.get(role, role)
        if role not in _VALID_ROLES:
            raise RecordError(f"{at} has an unknown role {m['role']!r}; expected one of system, user, assistant, tool",
                              at)
        text, reasoning, part_calls = _flatten_content(m.get("content"), at, i)
        calls = _tool_calls(m.get("tool_calls"), at, i) + part_calls
        if isinstance(m.get("function_call"), dict):
            calls += _tool_calls([{"function": m["function_call"]}], at, i)
        extra_reasoning = m.get("reasoning_content") or m.get("reasoning")
        if isinstance(extra_reasoning, str) and extra_reasoning:
            reasoning.insert(0, extra_reasoning)
        name = m.get("name") if isinstance(m.get("name"), str) and role != "tool" else None
        for k, r in enumerate(reasoning):
            out.append(Message(role="assistant", content=r, kind=REASONING,
                               ref=f"{i}:reasoning" if k == 0 else f"{i}:reasoning{k}"))
        call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
        if role == "tool":
            call_id = _pair_result(out, pending, call_id, text)
        elif role in ("user", "system"):
            pending.clear()
        out.append(Message(role=role, content=text, kind="", ref=i, name=name,
                           tool_calls=tuple(c for c, _ in calls), tool_call_id=call_id))
        pending.extend((len(out) - 1, k, generated) for k, (_, generated) in enumerate(calls))
    return out


def _pair_result(out: list[Message], pending: list[tuple[int, int, bool]], call_id: str | None,
                 text: str) -> str | None:
    def call_at(p: tuple[int, int, bool]) -> ToolCall:
        return out[p[0]].tool_calls[p[1]]

    def rename(p: tuple[int, int, bool], new_id: str) -> None:
        msg = out[p[0]]
        calls = list(msg.tool_calls)
        calls[p[1]] = replace(calls[p[1]], id=new_id)
        out[p[0]] = replace(msg, tool_calls=tuple(calls))

    wanted = [call_id] if call_id else _result_ids(text)
    if not wanted:
        return call_at(pending.pop(0)).id if pending else None
    for cid in wanted:
        match = next((p for p in pending if call_at(p).id == cid), None)
        if match is None:
            match = next((p for p in pending if p[2]), None)
            if match is not None:
                rename(match, cid)
        if match is not None:
            pending.remove(match)
    return wanted[0]


def _turn_messages(group: list[Message]) -> tuple[tuple[Message, ...], int | None, int | None]:
    """A turn's messages with their kinds, its query index and its answer index.

    The turn starts with its query when the first message is the user's; its answer is the last
    assistant message that is not reasoning; the rest keep what they are (reasoning, tool call,
    tool result) or are intermediate.
    """
    has_query = bool(group) and group[0].role == "user"
    last_assistant = max((k for k, m in enumerate(group) if m.role == "assistant" and m.kind != REASONING),
                         default=None)
    msgs = []
    for k, m in enumerate(group):
        if k == 0 and has_query:
            kind = QUERY
        elif k == last_assistant:
            kind = ANSWER
        elif m.kind == REASONING:
            kind = REASONING
        elif m.role == "tool":
            kind = TOOL_RESULT
        elif m.tool_calls:
            kind = TOOL_CALL
        else:
            kind = INTERMEDIATE
        msgs.append(replace(m, kind=kind))
    return tuple(msgs), 0 if has_query else None, last_assistant


def conversation_from_messages(messages: list[Message], conv_id: str, *, source_format: str = "openai",
                               name: str = "", meta: dict | None = None) -> Conversation:
    """Split a flat message list into turns: one per user message; leading system → system prompt."""
    system: list[str] = []
    i = 0
    while i < len(messages) and messages[i].role == "system" and messages[i].kind != REASONING:
        system.append(messages[i].content)
        i += 1
    groups: list[list[Message]] = []
    for m in messages[i:]:
        if m.role == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    turns: list[Turn] = []
    offset = 0 if groups and groups[0][0].role != "user" else 1  # an opening without a query is turn 0
    for g in groups:
        msgs, query_index, answer_index = _turn_messages(g)
        turn_id = str(len(turns) + offset)
        parent = turns[-1].id if turns else None
        turns.append(Turn(id=turn_id, parent_id=parent, messages=msgs, query_index=query_index,
                          answer_index=answer_index))
    return Conversation(id=conv_id, turns=turns, system_prompt="\n\n".join(s for s in system if s),
                        source_format=source_format, name=name or conv_id, meta=meta or {})


def _first_user_text(messages: Any, role_key: str = "role", user: tuple[str, ...] = ("user",),
                     text_key: str = "content") -> str:
    if not isinstance(messages, list):
        return ""
    for m in messages:
        if isinstance(m, dict) and m.get(role_key) in user:
            content = m.get(text_key)
            if isinstance(content, list):
                content = " ".join(p.get("text") or p.get("value") or "" for p in content if isinstance(p, dict))
            return _excerpt(content)
    return ""


def _openai_label(rec: Any) -> str:
    if not isinstance(rec, dict):
        return ""
    for key in ("id", "name", "task_id"):
        if isinstance(rec.get(key), (str, int)) and not isinstance(rec.get(key), bool):
            return str(rec[key])
    return _first_user_text(rec.get("messages"))


def _openai_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with a 'messages' list", "")
    raw = rec.get("messages")
    if not isinstance(raw, list):
        raise RecordError("'messages' must be a list", "messages")
    meta = {k: v for k, v in rec.items() if k != "messages" and isinstance(v, (str, int, float, bool))}
    conv_id = str(rec.get("id") or (stem if n is None else f"{stem}#{n}"))
    conv = conversation_from_messages(_openai_messages(raw), conv_id, meta=meta,
                                      name=str(rec.get("name") or conv_id))
    if not conv.turns:
        raise RecordError("has no user or assistant message" if n is None else
                          "the conversation has no user or assistant message", "messages")
    return conv


def _sniff_openai(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and ("messages" in first or "role" in first or "content" in first) \
        and isinstance(first.get("messages", []), list)


def _read_openai(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    first = records.first
    if records.layout == "document" and isinstance(first, dict) and "messages" in first:
        yield from ctx.each(records, lambda rec, _: _openai_conversation(rec, None, ctx.stem), _openai_label)
        return
    if isinstance(first, dict) and "messages" in first:
        named = set()

        def parse(rec: Any, n: int | None) -> Conversation:
            conv = _openai_conversation(rec, n, ctx.stem)
            if rec.get("id"):
                named.add(conv.id)
            return conv

        out = list(ctx.each(records, parse, _openai_label))
        yield from _single_id_to_stem(out, ctx.stem, named) if ctx.records == 1 else out
        return
    # A bare list of messages (array or JSON Lines) is one conversation.
    messages = []
    for rec in records:
        if rec.error:
            ctx.records = 1
            ctx.report(Problem(None, rec.error.split(" is ")[0], rec.error))
            return
        messages.append(rec.value)
    doc = messages if records.layout != "document" else first
    yield from ctx.each([Record(None, {"messages": doc} if isinstance(doc, list) else doc)],
                        lambda rec, _: _openai_conversation(rec, None, ctx.stem))


# -- ShareGPT ---------------------------------------------------------------------------------------

_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "model": "assistant",
                   "system": "system", "function_call": "call", "tool_call": "call",
                   "observation": "result", "tool": "result", "function_response": "result"}


def _sharegpt_calls(value: str, at: str, k: int) -> tuple[ToolCall, ...]:
    try:
        data = json.loads(value)
    except json.JSONDecodeError:
        raise RecordError(f"{at}: a 'function_call' value must be JSON {{\"name\": …, \"arguments\": …}}",
                          at) from None
    items = data if isinstance(data, list) else [data]
    calls = []
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise RecordError(f"{at}: a 'function_call' needs a 'name'", at)
        calls.append(ToolCall(id=f"call_{k}" if len(items) == 1 else f"call_{k}_{j}", name=item["name"],
                              arguments=_arguments(item.get("arguments", {}))))
    if not calls:
        raise RecordError(f"{at}: the 'function_call' names no function", at)
    return tuple(calls)


def _sharegpt_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with a 'conversations' list", "")
    raw = rec.get("conversations")
    if not isinstance(raw, list):
        raise RecordError("'conversations' must be a list of {from, value} messages", "conversations")
    if not raw:
        raise RecordError("'conversations' is empty", "conversations")
    meta: dict = {}
    tools = rec.get("tools")
    if tools not in (None, ""):
        if isinstance(tools, str):
            try:
                parsed = json.loads(tools)
            except json.JSONDecodeError as e:
                raise RecordError(f"'tools' is not valid JSON ({e.msg}, column {e.colno})", "tools") from None
        else:
            parsed = tools
        if not isinstance(parsed, list):
            raise RecordError("'tools' must be a list of tool definitions (or a JSON string of one)", "tools")
        meta["tools"] = tools
    system = rec.get("system")
    if system is not None and not isinstance(system, str):
        raise RecordError("'system' must be a string", "system")
    messages: list[Message] = [Message("system", system, "", "system")] if system else []
    pending: list[ToolCall] = []
    previous = None
    for k, m in enumerate(raw):
        at = f"message {k}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        tag, value = m.get("from"), m.get("value")
        if not isinstance(tag, str):
            raise RecordError(f"{at} has no 'from'", at)
        if not isinstance(value, str):
            raise RecordError(f"{at} has no 'value' string", at)
        role = _SHAREGPT_ROLES.get(tag.lower())
        if role is None:
            raise RecordError(f"{at} has an unknown 'from' {tag!r}; expected human, gpt, function_call, "
                              "observation or system", at)
        if role == "call":
            pending = list(_sharegpt_calls(value, at, k))
            messages.append(Message("assistant", "", "", k, tool_calls=tuple(pending)))
        elif role == "result":
            if previous not in ("call", "result") or not pending:
                raise RecordError(f"{at}: {tag!r} must follow a 'function_call'", at)
            messages.append(Message("tool", value, "", k, tool_call_id=pending.pop(0).id))
        else:
            pending = []
            messages.append(Message(role, value, "", k))
        previous = role
    conv_id = str(rec.get("id") or (stem if n is None else f"{stem}#{n}"))
    meta.update({key: v for key, v in rec.items()
                 if key not in ("conversations", "tools", "system") and isinstance(v, (str, int, float, bool))})
    conv = conversation_from_messages(messages, conv_id, source_format="sharegpt", meta=meta,
                                      name=str(rec.get("name") or conv_id))
    if not conv.turns:
        raise RecordError("the conversation has no human or gpt message", "conversations")
    return conv


def _sharegpt_label(rec: Any) -> str:
    if isinstance(rec, dict) and isinstance(rec.get("id"), (str, int)):
        return str(rec["id"])
    return _first_user_text(rec.get("conversations") if isinstance(rec, dict) else None, "from",
                            ("human", "user"), "value")


def _sniff_sharegpt(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("conversations"), list)


def _read_sharegpt(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    named = set()

    def parse(rec: Any, n: int | None) -> Conversation:
        conv = _sharegpt_conversation(rec, n, ctx.stem)
        if rec.get("id"):
            named.add(conv.id)
        return conv

    out = list(ctx.each(records, parse, _sharegpt_label))
    yield from _single_id_to_stem(out, ctx.stem, named) if ctx.records == 1 else out


# -- OpenAssistant message trees --------------------------------------------------------------------

def _oasst_node(node: Any, role: str, where: str) -> tuple[str, str, list]:
    """(id, text, replies) of a checked node; ``where`` names it while its id is unknown."""
    if not isinstance(node, dict):
        raise RecordError(f"{where} is not an object", where)
    mid = node.get("message_id")
    if not isinstance(mid, str) or not mid:
        raise RecordError(f"{where} has no 'message_id'", where)
    at = f"message {mid!r}"
    if node.get("role") != role:
        raise RecordError(f"{at} has role {node.get('role')!r} where {role!r} was expected "
                          "(prompter and assistant messages alternate)", at)
    text = node.get("text")
    if not isinstance(text, str):
        raise RecordError(f"{at} has no 'text' string", at)
    replies = node.get("replies", [])
    if not isinstance(replies, list):
        raise RecordError(f"{at}: 'replies' must be a list", at)
    return mid, text, replies


def _oasst_turns(root: Any) -> tuple[list[Turn], int]:
    """The tree's turns in depth-first creation order, and how many deleted messages were left out.

    A turn is a prompter message and one assistant reply (id: the reply's message id); a
    prompter message nobody answered is a turn of its own with no answer. Each turn's parent is
    the turn of the assistant message its prompter replied to; only the replies to the tree's
    first prompt have no parent (they are sibling roots, as Dify stores regenerations of a
    first message). Depth-first order matters: Dify's walk stops at the first parentless row
    it meets, and in this order every row between a turn and its parent lies in the parent's
    subtree — so each turn's Dify thread is exactly its path from the root.
    """
    left_out = 0
    turns: list[Turn] = []
    seen: set[str] = set()
    # Stack items: ("prompter", node, parent turn id) or ("turn", prompter node, answer node, parent turn id).
    stack: list[tuple] = [("prompter", root, None)]
    while stack:
        item = stack.pop()
        if item[0] == "prompter":
            _, node, parent = item
            pid, text, replies = _oasst_node(node, "prompter", "the tree's first message" if parent is None
                                             else f"a reply of message {parent!r}")
            if pid in seen:
                raise RecordError(f"message {pid!r} appears twice in the tree", f"message {pid!r}")
            seen.add(pid)
            answers = []
            for reply in replies:
                _oasst_node(reply, "assistant", f"a reply of message {pid!r}")
                if reply.get("deleted") is True:
                    left_out += _oasst_size(reply)
                else:
                    answers.append(reply)
            if not answers:
                turns.append(Turn(id=pid, parent_id=parent,
                                  messages=(Message("user", text, QUERY, f"{pid}:query"),),
                                  query_index=0, answer_index=None,
                                  meta={"prompter_id": pid, "assistant_id": None}))
            for answer in reversed(answers):
                stack.append(("turn", node, answer, parent))
        else:
            _, prompter, answer, parent = item
            aid, answer_text, replies = _oasst_node(answer, "assistant", "an answer")  # checked above
            if aid in seen:
                raise RecordError(f"message {aid!r} appears twice in the tree", f"message {aid!r}")
            seen.add(aid)
            pid, text, _ = _oasst_node(prompter, "prompter", "a prompt")  # checked above
            meta = {"prompter_id": pid, "assistant_id": aid}
            if isinstance(answer.get("rank"), int):
                meta["rank"] = answer["rank"]
            turns.append(Turn(id=aid, parent_id=parent,
                              messages=(Message("user", text, QUERY, f"{aid}:query"),
                                        Message("assistant", answer_text, ANSWER, f"{aid}:answer")),
                              query_index=0, answer_index=1, meta=meta))
            followups = []
            for reply in replies:
                _oasst_node(reply, "prompter", f"a reply of message {aid!r}")
                if reply.get("deleted") is True:
                    left_out += _oasst_size(reply)
                else:
                    followups.append(reply)
            for reply in reversed(followups):
                stack.append(("prompter", reply, aid))
    return turns, left_out


def _oasst_size(node: dict) -> int:
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        count += 1
        stack.extend(r for r in n.get("replies") or [] if isinstance(r, dict))
    return count


def _oasst_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with a 'prompt'", "")
    root = rec.get("prompt")
    if not isinstance(root, dict):
        raise RecordError("'prompt' must be the tree's first message (an object)", "prompt")
    if root.get("deleted") is True:
        raise RecordError("the tree's first message is deleted", "prompt")
    turns, left_out = _oasst_turns(root)
    tree_id = str(rec.get("message_tree_id") or root.get("message_id"))
    meta = {k: rec[k] for k in ("message_tree_id", "tree_state") if isinstance(rec.get(k), str)}
    if isinstance(root.get("lang"), str):
        meta["lang"] = root["lang"]
    if left_out:
        meta["deleted_messages_left_out"] = left_out
    return Conversation(id=tree_id, turns=turns, source_format="oasst", name=_excerpt(root.get("text"), 60),
                        meta=meta)


def _oasst_label(rec: Any) -> str:
    if isinstance(rec, dict):
        if isinstance(rec.get("message_tree_id"), str):
            return rec["message_tree_id"]
        if isinstance(rec.get("prompt"), dict):
            return _excerpt(rec["prompt"].get("text"))
    return ""


def _sniff_oasst(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and "prompt" in first and ("message_tree_id" in first or "tree_state" in first)


def _read_oasst(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from ctx.each(records, lambda rec, n: _oasst_conversation(rec, n, ctx.stem), _oasst_label)


# -- BFCL memory conversations ----------------------------------------------------------------------

def _bfcl_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with a 'question' list", "")
    question = rec.get("question")
    if not isinstance(question, list):
        raise RecordError("'question' must be a list of turns (each a list of messages)", "question")
    flat: list = []
    for t, group in enumerate(question):
        if isinstance(group, dict):
            group = [group]
        if not isinstance(group, list):
            raise RecordError(f"turn {t} must be a list of messages", f"turn {t}")
        flat.extend(group)
    conv_id = str(rec.get("id") or (stem if n is None else f"{stem}#{n}"))
    meta = {k: v for k, v in rec.items() if k != "question" and isinstance(v, (str, int, float, bool))}
    conv = conversation_from_messages(_openai_messages(flat), conv_id, source_format="bfcl", meta=meta,
                                      name=str(rec.get("topic") or conv_id))
    if not conv.turns:
        raise RecordError("the conversation has no message", "question")
    return conv


def _normalise(text: str) -> str:
    text = re.sub(r"\s*([—–-])\s*", r"\1", text.replace("’", "'"))
    return " ".join(text.split()).casefold()


def _probe_text(question: Any) -> str:
    while isinstance(question, list) and question:
        question = question[0]
    if isinstance(question, dict):
        question = question.get("content")
    return question if isinstance(question, str) else ""


def _attach_probes(conversations: list[Conversation], probes: list, ctx: ReadContext) -> None:
    """Each probe names the sentence that answers it; attach it to the message stating it."""
    where = [(c, t.query_message.ref, _normalise(t.query), pos)
             for c in conversations for pos, t in enumerate(c.turns) if t.query_message is not None]
    for i, probe in enumerate(probes):
        if not isinstance(probe, dict) or not isinstance(probe.get("source"), str):
            ctx.report(Problem(None, f"probe {i}", f"probe {i} has no 'source' sentence"))
            continue
        source = _normalise(probe["source"])
        hits = [w for w in where if source in w[2]]
        if not hits:
            m = re.match(r"^([^:]{1,40}):\s*(.+)$", source)
            if m:
                hits = [w for w in where if f"{m.group(1)}:" in w[2] and m.group(2) in w[2]]
        question = _probe_text(probe.get("question"))
        if not hits:
            ctx.notes.append(f"probe {probe.get('id', i)}: its source sentence is in no conversation of this file")
            continue
        conv, ref, _, pos = hits[0]
        label = _excerpt(probe["source"], 60)
        conv.meta.setdefault("probes", []).append(
            {"id": probe.get("id"), "question": question, "ground_truth": probe.get("ground_truth"),
             "source": probe["source"], "ref": ref, "position": pos})
        conv.meta.setdefault("facts", []).append({"ref": ref, "label": label})


def _sniff_bfcl(first: Any, layout: str) -> bool:
    if not isinstance(first, dict):
        return False
    if layout == "document" and isinstance(first.get("prereq_conversations"), list):
        return True
    q = first.get("question")
    return isinstance(q, list) and bool(q) and isinstance(q[0], list) and "messages" not in first


def _read_bfcl(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    doc = records.first
    parse = lambda rec, n: _bfcl_conversation(rec, n, ctx.stem)  # noqa: E731
    label = lambda rec: str(rec.get("id", "")) if isinstance(rec, dict) else ""  # noqa: E731
    if records.layout == "document" and isinstance(doc, dict) and "prereq_conversations" in doc:
        convs = list(ctx.each(records.inner(doc["prereq_conversations"]), parse, label))
        probes = doc.get("probes") or []
        if not isinstance(probes, list):
            ctx.report(Problem(None, "probes", "'probes' must be a list"))
        else:
            _attach_probes(convs, probes, ctx)
        yield from convs
        return
    yield from ctx.each(records, parse, label)


# -- exports with a message tree (ChatGPT, Claude) --------------------------------------------------

@dataclass
class _Node:
    """One visible message node of an exported tree: who wrote it and the messages it holds."""

    id: str
    parent: str | None
    user: bool
    messages: tuple[Message, ...]
    created: float | None = None
    meta: dict = field(default_factory=dict)


def _tree_turns(nodes: list[_Node], active: str | None) -> tuple[list[Turn], str | None]:
    """Turns of a message tree, and the id of the active path's last turn.

    A turn starts at a user node and runs down through the non-user nodes under it (tool calls,
    tool results, reasoning, the answer); it ends at a node with no non-user child or with a user
    child, and takes that node's id. Several answers under one user node (regenerations) are
    sibling turns; several user nodes under one answer (edits) are sibling turns too, so every
    branch of the export is a MemLens branch. Non-user nodes above the first user node form an
    opening turn without a query.

    Turns come out depth first, as for OpenAssistant trees, so every turn's Dify thread is its
    path from the root; among siblings the one on the active path (the export's current node)
    comes last, so the active thread is the newest one, as Dify web shows it.
    """
    by_id = {n.id: n for n in nodes}
    children: dict[str | None, list[_Node]] = {}
    for n in nodes:
        children.setdefault(n.parent if n.parent in by_id else None, []).append(n)
    on_path: set[str] = set()
    cur = active if active in by_id else None
    while cur is not None and cur not in on_path:
        on_path.add(cur)
        cur = by_id[cur].parent if by_id[cur].parent in by_id else None
    for kids in children.values():
        kids.sort(key=lambda n: n.id in on_path)  # stable: the active child last, the others as given

    turns: list[Turn] = []
    active_turn: str | None = None
    # Stack items: (first node of the segment, node reached, nodes so far, parent turn id).
    stack: list[tuple[_Node, _Node, list[_Node], str | None]] = [
        (n, n, [n], None) for n in reversed(children.get(None, []))]
    while stack:
        start, node, path, parent = stack.pop()
        kids = children.get(node.id, [])
        followers = [k for k in kids if not k.user]
        replies = [k for k in kids if k.user]
        pushed: list[tuple[_Node, _Node, list[_Node], str | None]] = []
        turn_id = parent
        if not followers or replies:
            msgs, query_index, answer_index = _turn_messages([m for n in path for m in n.messages])
            meta = {"source_nodes": [n.id for n in path]}
            for n in path:
                meta.update(n.meta)
            turns.append(Turn(id=node.id, parent_id=parent, messages=msgs, query_index=query_index,
                              answer_index=answer_index, created_at=node.created, meta=meta))
            turn_id = node.id
            if node.id in on_path:
                active_turn = node.id
            pushed += [(k, k, [k], turn_id) for k in replies]
        pushed += [(start, k, path + [k], parent) for k in followers]
        # Siblings keep their order, the active one last: the first pushed is popped last.
        pushed.sort(key=lambda item: item[1].id in on_path)
        stack.extend(reversed(pushed))
    return turns, active_turn


def _visible_parent(mapping: dict, node_id: str, visible: set[str], memo: dict) -> str | None:
    """The nearest visible ancestor of a node (hidden nodes are see-through); raises on a cycle."""
    chain: list[str] = []
    seen: set[str] = set()
    cur = mapping[node_id].get("parent")
    while cur is not None and cur in mapping and cur not in visible and cur not in memo:
        if cur in seen:
            raise RecordError(f"node {cur!r}: the 'parent' links form a cycle", "mapping")
        seen.add(cur)
        chain.append(cur)
        cur = mapping[cur].get("parent")
    found = cur if cur in visible else memo.get(cur) if cur in memo else None
    for c in chain:
        memo[c] = found
    return found


def _check_acyclic(parents: dict[str, str | None]) -> None:
    state: dict[str, int] = {}  # 1: on the current walk, 2: known to reach a root
    for start in parents:
        walk = []
        cur: str | None = start
        while cur is not None and cur in parents and state.get(cur) != 2:
            if state.get(cur) == 1:
                raise RecordError(f"node {cur!r}: the 'parent' links form a cycle", "mapping")
            state[cur] = 1
            walk.append(cur)
            cur = parents[cur]
        for w in walk:
            state[w] = 2


_CHATGPT_REASONING = {"thoughts", "reasoning_recap"}


def _chatgpt_text(content: Any, at: str) -> str:
    """The text of a ChatGPT message ``content`` of any content type."""
    if content is None:
        return ""
    if not isinstance(content, dict):
        raise RecordError(f"{at}: 'content' must be an object", at)
    kind = content.get("content_type")
    if "parts" in content:
        parts = content["parts"]
        if not isinstance(parts, list):
            raise RecordError(f"{at}: 'content.parts' must be a list", at)
        texts = []
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
                else:
                    texts.append("[image]" if "image" in str(part.get("content_type", "")) else
                                 f"[{part.get('content_type') or 'attachment'}]")
            elif part is not None:
                raise RecordError(f"{at}: a content part must be a string or an object", at)
        return "\n".join(t for t in texts if t)
    if kind == "thoughts" and isinstance(content.get("thoughts"), list):
        return "\n\n".join(str(t.get("content") or t.get("summary") or "") for t in content["thoughts"]
                           if isinstance(t, dict))
    if kind == "user_editable_context":
        return "\n\n".join(str(content[k]) for k in ("user_profile", "user_instructions") if content.get(k))
    for key in ("text", "result", "content", "model_set_context"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""


@dataclass(frozen=True)
class _ChatGPTNode:
    role: str
    message: Message | None  # None: the node holds no message (the tree's root)
    hidden: bool
    instructions: bool  # a system message or custom instructions: told to the model before the chat
    created: float | None
    meta: dict


def _chatgpt_node(node_id: str, raw: Any) -> _ChatGPTNode:
    at = f"node {node_id!r}"
    if not isinstance(raw, dict):
        raise RecordError(f"{at} is not an object", "mapping")
    parent = raw.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise RecordError(f"{at}: 'parent' must be a node id or null", at)
    msg = raw.get("message")
    if msg is None:
        return _ChatGPTNode("", None, True, False, None, {})
    if not isinstance(msg, dict):
        raise RecordError(f"{at}: 'message' must be an object or null", at)
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in _VALID_ROLES:
        raise RecordError(f"{at} has an unknown author.role {role!r}; expected one of system, user, assistant, tool",
                          at)
    content = msg.get("content")
    text = _chatgpt_text(content, at)
    kind_name = content.get("content_type") if isinstance(content, dict) else None
    metadata = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
    hidden = bool(metadata.get("is_visually_hidden_from_conversation")) or kind_name == "user_editable_context"
    created = msg.get("create_time")
    created = float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None
    meta = {"model": metadata["model_slug"]} if isinstance(metadata.get("model_slug"), str) else {}
    recipient = msg.get("recipient")
    name = author.get("name") if isinstance(author.get("name"), str) else None
    if role == "assistant" and kind_name in _CHATGPT_REASONING:
        message = Message("assistant", text, REASONING, f"{node_id}:reasoning")
    elif role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        message = Message("assistant", "", TOOL_CALL, node_id,
                          tool_calls=(ToolCall(id=node_id, name=recipient, arguments=text),))
    elif role == "tool":
        message = Message("tool", text, TOOL_RESULT, node_id, name=name)
    else:
        message = Message(role, text, "", node_id)
    return _ChatGPTNode(role, message, hidden, role == "system" or kind_name == "user_editable_context", created,
                        meta)


def _chatgpt_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with a 'mapping'", "")
    mapping = rec.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        raise RecordError("'mapping' must be an object of message nodes", "mapping")
    _check_acyclic({str(k): v.get("parent") if isinstance(v, dict) else None for k, v in mapping.items()})
    read = {str(node_id): _chatgpt_node(str(node_id), raw) for node_id, raw in mapping.items()}
    system: list[str] = []
    visible: set[str] = set()
    for node_id, node in read.items():
        if node.message is None:
            continue
        if node.instructions or node.hidden:
            # System messages and custom instructions are what the model is told before the
            # conversation (the system prompt); other hidden nodes show nothing.
            if node.instructions and node.message.content and node.message.content not in system:
                system.append(node.message.content)
            continue
        visible.add(node_id)
    memo: dict[str, str | None] = {}
    nodes = []
    for node_id in mapping:  # the export lists nodes oldest first; siblings keep that order
        node_id = str(node_id)
        if node_id not in visible:
            continue
        node = read[node_id]
        nodes.append(_Node(node_id, _visible_parent(mapping, node_id, visible, memo), node.role == "user",
                           (node.message,), node.created, node.meta))
    nodes.sort(key=lambda nd: nd.created if nd.created is not None else float("-inf"))
    nodes = _pair_tool_results(nodes)
    current = rec.get("current_node")
    if isinstance(current, str) and current in mapping and current not in visible:
        current = _visible_parent(mapping, current, visible, memo)
    turns, active = _tree_turns(nodes, current if isinstance(current, str) else None)
    if not turns:
        raise RecordError("the conversation has no user or assistant message", "mapping")
    conv_id = str(rec.get("conversation_id") or rec.get("id") or (stem if n is None else f"{stem}#{n}"))
    meta = {k: rec[k] for k in ("title", "create_time", "update_time", "default_model_slug")
            if isinstance(rec.get(k), (str, int, float)) and not isinstance(rec.get(k), bool)}
    if active:
        meta["active_turn_id"] = active
    return Conversation(id=conv_id, turns=turns, system_prompt="\n\n".join(system), source_format="chatgpt",
                        name=str(rec.get("title") or conv_id), meta=meta)


def _pair_tool_results(nodes: list[_Node]) -> list[_Node]:
    """A tool node answers the tool call above it: it takes the call's id."""
    by_id = {nd.id: nd for nd in nodes}
    out = []
    for nd in nodes:
        msg = nd.messages[0]
        if msg.kind == TOOL_RESULT:
            cur = by_id.get(nd.parent) if nd.parent else None
            while cur is not None and not cur.messages[0].tool_calls and not cur.user:
                cur = by_id.get(cur.parent) if cur.parent else None
            if cur is not None and cur.messages[0].tool_calls:
                nd = replace(nd, messages=(replace(msg, tool_call_id=cur.messages[0].tool_calls[0].id),))
        out.append(nd)
    return out


def _chatgpt_label(rec: Any) -> str:
    if isinstance(rec, dict):
        for key in ("title", "conversation_id", "id"):
            if isinstance(rec.get(key), str) and rec[key]:
                return rec[key]
    return ""


def _sniff_chatgpt(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("mapping"), dict)


def _read_chatgpt(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from ctx.each(records, lambda rec, n: _chatgpt_conversation(rec, n, ctx.stem), _chatgpt_label)


def _claude_messages(msg: dict, mid: str, at: str) -> tuple[Message, ...]:
    """The messages of one Claude chat message: its content blocks (thinking, tool use, tool
    results, text), or its ``text`` when the export has no blocks."""
    user = msg.get("sender") == "human"
    role = "user" if user else "assistant"
    files = _claude_files(msg, at)
    content = msg.get("content")
    if content is None or content == []:
        text = msg.get("text")
        if text is not None and not isinstance(text, str):
            raise RecordError(f"{at}: 'text' must be a string", at)
        return (Message(role, text or "", "", mid, files=files),)
    if not isinstance(content, list):
        raise RecordError(f"{at}: 'content' must be a list of blocks", at)
    out: list[Message] = []
    texts: list[str] = []
    for k, block in enumerate(content):
        if not isinstance(block, dict):
            raise RecordError(f"{at}: content block {k} is not an object", at)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking" and not user:
            out.append(Message("assistant", str(block.get("thinking") or ""), REASONING, f"{mid}:thinking{k}"))
        elif kind == "tool_use" and not user:
            if texts:
                out.append(Message("assistant", "\n".join(texts), "", f"{mid}:{k}"))
                texts = []
            call = ToolCall(id=str(block.get("id") or f"{mid}:{k}"), name=str(block.get("name") or "tool"),
                            arguments=_arguments(block.get("input", {})))
            out.append(Message("assistant", "", TOOL_CALL, f"{mid}:{k}", tool_calls=(call,)))
        elif kind == "tool_result":
            result = block.get("content")
            text = result if isinstance(result, str) else "\n".join(
                str(p.get("text") or "") for p in result or [] if isinstance(p, dict))
            out.append(Message("tool", text, TOOL_RESULT, f"{mid}:{k}", tool_call_id=str(block.get("tool_use_id") or "")
                               or None))
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    out.append(Message(role, "\n".join(texts), "", mid, files=files))
    return tuple(out)


def _claude_files(msg: dict, at: str) -> tuple[FileRef, ...]:
    refs = []
    for key in ("attachments", "files"):
        items = msg.get(key) or []
        if not isinstance(items, list):
            raise RecordError(f"{at}: '{key}' must be a list", at)
        for f in items:
            if isinstance(f, dict):
                refs.append(FileRef(type="image" if str(f.get("file_type", "")).startswith("image") else "document",
                                    id=str(f.get("file_name") or f.get("file_uuid") or "")))
    return tuple(refs)


def _claude_conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    if not isinstance(rec, dict):
        raise RecordError("the record is not an object with 'chat_messages'", "")
    raw = rec.get("chat_messages")
    if not isinstance(raw, list):
        raise RecordError("'chat_messages' must be a list", "chat_messages")
    ids: list[str] = []
    for k, msg in enumerate(raw):
        at = f"message {k}"
        if not isinstance(msg, dict):
            raise RecordError(f"{at} is not an object", at)
        if msg.get("sender") not in ("human", "assistant"):
            raise RecordError(f"{at} has an unknown 'sender' {msg.get('sender')!r}; expected human or assistant", at)
        ids.append(str(msg.get("uuid") or k))
    if len(set(ids)) != len(ids):
        raise RecordError("two messages share one 'uuid'", "chat_messages")
    known = set(ids)
    # Newer exports link each message to its parent (edits and retries are branches); older ones
    # hold the shown branch only, in order.
    tree = bool(raw) and all(isinstance(m.get("parent_message_uuid"), str) for m in raw)
    parents = {mid: (m["parent_message_uuid"] if m["parent_message_uuid"] in known else None) if tree
               else (ids[k - 1] if k else None) for k, (mid, m) in enumerate(zip(ids, raw))}
    _check_acyclic(parents)
    nodes = []
    for k, (mid, msg) in enumerate(zip(ids, raw)):
        nodes.append(_Node(mid, parents[mid], msg["sender"] == "human", _claude_messages(msg, mid, f"message {k}"),
                           _iso_time(msg.get("created_at"))))
    current = rec.get("current_leaf_message_uuid")
    turns, active = _tree_turns(nodes, current if current in known else (ids[-1] if ids else None))
    if not turns:
        raise RecordError("the conversation has no message", "chat_messages")
    conv_id = str(rec.get("uuid") or (stem if n is None else f"{stem}#{n}"))
    meta = {k: rec[k] for k in ("name", "created_at", "updated_at") if isinstance(rec.get(k), str)}
    if active:
        meta["active_turn_id"] = active
    return Conversation(id=conv_id, turns=turns, source_format="claude", name=str(rec.get("name") or conv_id),
                        meta=meta)


def _iso_time(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 time ("2024-05-01T10:00:00.000000Z"), or None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    # A time without a zone is UTC, as the export writes it; the machine's zone must not matter.
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def _claude_label(rec: Any) -> str:
    if isinstance(rec, dict):
        for key in ("name", "uuid"):
            if isinstance(rec.get(key), str) and rec[key]:
                return rec[key]
    return ""


def _sniff_claude(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("chat_messages"), list)


def _read_claude(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from ctx.each(records, lambda rec, n: _claude_conversation(rec, n, ctx.stem), _claude_label)


# -- Dify Service API history -----------------------------------------------------------------------

def dify_turn(item: dict) -> Turn:
    if "id" not in item or not item["id"]:
        raise RecordError("the message record has no 'id'", "id")
    mid = str(item["id"])
    for key in ("query", "answer"):
        if key in item and item[key] is not None and not isinstance(item[key], str):
            raise RecordError(f"'{key}' must be a string", key)
    user_files, assistant_files = _dify_files(item.get("message_files"))
    messages = [Message(role="user", content=item.get("query") or "", kind=QUERY, ref=f"{mid}:query",
                        files=user_files)]
    thoughts = item.get("agent_thoughts") or []
    if not isinstance(thoughts, list):
        raise RecordError("'agent_thoughts' must be a list", "agent_thoughts")
    for k, thought in enumerate(thoughts):
        if not isinstance(thought, dict) or not thought.get("tool"):
            continue
        pos = thought.get("position", k + 1)
        call = ToolCall(id=str(thought.get("id", f"{mid}-{pos}")), name=str(thought["tool"]),
                        arguments=str(thought.get("tool_input") or ""))
        messages.append(Message(role="assistant", content=str(thought.get("thought") or ""), kind=TOOL_CALL,
                                ref=f"{mid}:thought{pos}", tool_calls=(call,)))
        messages.append(Message(role="tool", content=str(thought.get("observation") or ""), kind=TOOL_RESULT,
                                ref=f"{mid}:observation{pos}", tool_call_id=call.id))
    messages.append(Message(role="assistant", content=item.get("answer") or "", kind=ANSWER, ref=f"{mid}:answer",
                            files=assistant_files))
    parent = item.get("parent_message_id")
    created = item.get("created_at")
    return Turn(id=mid, parent_id=str(parent) if parent else None, messages=tuple(messages), query_index=0,
                answer_index=len(messages) - 1, status=str(item.get("status") or "normal"),
                error=item.get("error"), created_at=float(created) if isinstance(created, (int, float)) else None,
                answer_tokens=item.get("answer_tokens") if isinstance(item.get("answer_tokens"), int) else None,
                meta={k: item[k] for k in ("inputs", "message_tokens", "feedback") if k in item})


def _dify_files(raw: Any) -> tuple[tuple[FileRef, ...], tuple[FileRef, ...]]:
    """User files are those that belong to the user *or to nobody*; assistant files belong to the
    assistant (spec/dify-memory.md §1.5)."""
    if not raw:
        return (), ()
    if not isinstance(raw, list):
        raise RecordError("'message_files' must be a list", "message_files")
    user, assistant = [], []
    for f in raw:
        if not isinstance(f, dict):
            raise RecordError("a message file must be an object", "message_files")
        ref = FileRef(type=str(f.get("type") or "file"), url=str(f.get("url") or ""), id=str(f.get("id") or ""))
        (assistant if f.get("belongs_to") == "assistant" else user).append(ref)
    return tuple(user), tuple(assistant)


def _sniff_dify_messages(first: Any, layout: str) -> bool:
    if layout == "document" and isinstance(first, dict) and isinstance(first.get("data"), list):
        items = first["data"]
        return not items or (isinstance(items[0], dict) and "query" in items[0] and "answer" in items[0])
    return isinstance(first, dict) and "query" in first and "answer" in first


def _read_dify_messages(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    doc = records.first
    if records.layout == "document":
        items = doc.get("data") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            ctx.report(Problem(None, "data", "'data' must be a list of message records"))
            return
        source: Iterable[Record] = records.inner(items)
    else:
        source = records
    groups: dict[str, list[tuple[int, Turn]]] = {}
    failed: set[str] = set()

    def conv_of(item: Any) -> str:
        return str(item.get("conversation_id") or ctx.stem) if isinstance(item, dict) else ctx.stem

    def parse(item: Any, n: int | None) -> None:
        if not isinstance(item, dict):
            raise RecordError("the message record is not an object", "")
        turn = dify_turn(item)
        groups.setdefault(conv_of(item), []).append((n or 0, turn))

    for rec in source:
        before = len(ctx.problems)
        for _ in ctx.each([rec], parse, conv_of):
            pass
        if len(ctx.problems) > before and isinstance(rec.value, dict):
            failed.add(conv_of(rec.value))
    for conv_id, rows in groups.items():
        if conv_id in failed:
            continue  # a conversation with a bad record is left out whole
        # The API pages newest first and lists each page oldest first; creation time decides.
        rows.sort(key=lambda r: (r[1].created_at if r[1].created_at is not None else float("-inf"), r[0]))
        yield Conversation(id=conv_id, turns=[t for _, t in rows], source_format="dify-messages", name=conv_id)


# -- Dify web chat items ----------------------------------------------------------------------------

def _sniff_dify_web(first: Any, layout: str) -> bool:
    return layout != "document" and isinstance(first, dict) and "isAnswer" in first


def _read_dify_web(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    if records.layout == "document":
        ctx.report(Problem(None, "", "Dify web chat items must be a list"))
        return
    data: list[dict] = []

    def check(item: Any, n: int | None) -> dict:
        if not isinstance(item, dict):
            raise RecordError("the chat item is not an object", "")
        if "id" not in item:
            raise RecordError(f"chat item {n} has no 'id'", "id")
        if item.get("content") is not None and not isinstance(item.get("content"), str):
            raise RecordError(f"chat item {item['id']!r} has a 'content' that is not a string", "content")
        return item

    data = list(ctx.each(records, check))
    if ctx.problems:
        return  # one conversation: read whole or not at all
    by_id = {str(item["id"]): item for item in data}
    answered: dict[str, dict] = {}
    for item in data:
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None:
                answered[str(parent)] = item
    turns: list[Turn] = []
    conv_id = ""
    for item in data:
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None and str(parent) in by_id:
                continue  # taken with its question
            question, answer = None, item
        else:
            question, answer = item, answered.get(str(item["id"]))
        tid = str(answer["id"]) if answer else str(question["id"])
        # The answer's ``input.query`` is the stored message record's query (what memory replays);
        # the question item's ``content`` is only what the chat shows.
        stored = (answer or {}).get("input")
        query = stored.get("query") if isinstance(stored, dict) and isinstance(stored.get("query"), str) else None
        if query is None:
            query = (question or {}).get("content") or ""
        messages = (Message(role="user", content=query, kind=QUERY, ref=f"{tid}:query"),
                    Message(role="assistant", content=(answer or {}).get("content") or "", kind=ANSWER,
                            ref=f"{tid}:answer"))
        parent = question.get("parentMessageId") if question else None
        meta = {}
        if answer is not None and isinstance(answer.get("log"), list):
            meta["log"] = answer["log"]
        if answer is not None and answer.get("conversationId"):
            conv_id = conv_id or str(answer["conversationId"])
        turns.append(Turn(id=tid, parent_id=str(parent) if parent else None, messages=messages, query_index=0,
                          answer_index=1, answer_tokens=None if answer else 0, meta=meta,
                          status="normal" if answer else "running"))
    yield Conversation(id=conv_id or ctx.stem, turns=turns, source_format="dify-web", name=ctx.stem)


# Detection order: distinctive shapes first, the generic OpenAI message list last.
for _fmt in (
    Format("bfcl", "BFCL memory prerequisite conversations (user-only turns, recall probes)", _sniff_bfcl,
           _read_bfcl),
    Format("chatgpt", "ChatGPT export conversations.json (the mapping tree; every branch kept)", _sniff_chatgpt,
           _read_chatgpt),
    Format("claude", "Claude export conversations.json (chat_messages with sender)", _sniff_claude, _read_claude),
    Format("oasst", "OpenAssistant message trees (siblings become branches)", _sniff_oasst, _read_oasst),
    Format("sharegpt", "ShareGPT conversations (human / gpt / function_call / observation)", _sniff_sharegpt,
           _read_sharegpt),
    Format("dify-web", "Dify web chat items (isAnswer / parentMessageId)", _sniff_dify_web, _read_dify_web),
    Format("dify-messages", "Dify Service API history (GET /v1/messages)", _sniff_dify_messages,
           _read_dify_messages),
    Format("openai", "OpenAI chat messages (JSON, JSON Lines, typed content parts)", _sniff_openai, _read_openai),
):
    register_format(_fmt)
del _fmt


def _read_memlens_report(records: Records, ctx: ReadContext) -> Iterable[Conversation]:
    def parse(value: Any, index: int | None) -> Conversation:
        try:
            return parse_report(value)
        except BundleFieldError as e:
            raise RecordError(str(e), e.field) from None

    return ctx.each(records, parse)


register_format(Format(REPORT_FORMAT, "MemLens report bundle (a comparison's conversation, configs and facts)",
                       lambda first, layout: layout == "document" and isinstance(first, dict)
                       and first.get("format") == REPORT_FORMAT, _read_memlens_report), before=FORMATS[0])
