"""Every size and depth limit MemLens enforces, in one place.

Each limit has a default sized for real use and an environment variable that changes it (read
when the process starts). Input over a limit is refused before any work is done on it: the CLI
exits with status 2, the API answers 400 or 413 with a Dify error body, a page shows one line.

The helpers here are the only code that applies the limits, so every entry point (CLI, API,
Import page, flow files) refuses the same input with the same words.

Where each rule lives:

* Limits (body size, depth, file sizes…) and the memory systems' own numbers (Dify's 500-row cap, the Window
  Memory node's 1..200 messages, the default history limit): `core/limits.py` (`tests/test_rule_constants.py`
  keeps them written once).
* What a conversation may hold and an export weigh: its turns, one message's length (checked as every format
  is read, in `_each_turn_once`, `core/io/readers/registry.py`, and by the export's check), the size of an
  export read back (twice the import size plus a per-turn allowance, so the export of anything imported
  imports back), text no store keeps (a lone surrogate, a NUL) and numbers past Python's digit limit, in
  `check_value`: `core/limits.py` (`check_turns`, `check_message`, `check_export_size`, `MAX_EXPORT_BYTES`,
  `check_value`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, SequenceNode

from .errors import MemLensError

MB = 1024 * 1024


class LimitError(MemLensError):
    """Input over one of the limits below; the message names the limit and how to raise it."""


class TooLargeError(LimitError):
    """Input over a size limit (rather than a shape limit)."""


@dataclass(frozen=True)
class Limit:
    name: str
    env: str
    default: int
    unit: str
    what: str

    def read(self) -> int:
        """The value in force. A setting that is not a whole number of at least 1 is reported in the
        log and the default is used: limits are read on import, before any command could say so."""
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            logging.getLogger("memlens.limits").warning(
                "%s=%r is not a whole number of at least 1; using the default, %s %s",
                self.env,
                raw,
                self.default,
                self.unit,
            )
            return self.default
        return value


#: Every limit (the "Limits" table of docs/security.md lists each one's variable).
LIMITS = (
    Limit(
        "import_size",
        "MEMLENS_MAX_IMPORT_MB",
        50,
        "MB",
        "size of a file to import or read (transcripts, MemLens exports, report bundles, uploads)",
    ),
    Limit("request_size", "MEMLENS_MAX_REQUEST_BYTES", MB, "bytes", "body of one API request"),
    # A model call carries its whole history (and any images in it): far more than a Service API request.
    Limit("proxy_request_size", "MEMLENS_MAX_PROXY_MB", 32, "MB", "body of one model call through the capture proxy"),
    Limit("query_length", "MEMLENS_MAX_QUERY_CHARS", 100_000, "characters", "one query sent to a flow"),
    Limit(
        "depth",
        "MEMLENS_MAX_DEPTH",
        100,
        "levels",
        "nesting of JSON and YAML values (files, API bodies, inputs, variable values)",
    ),
    Limit(
        "yaml_nodes",
        "MEMLENS_MAX_YAML_NODES",
        1_000_000,
        "nodes",
        "size of a YAML document once its aliases are expanded (flow files, Dify DSL)",
    ),
    # The biggest real Dify DSL export we know is ~100 KB.
    Limit("flow_size", "MEMLENS_MAX_FLOW_MB", 5, "MB", "size of a flow file (MemLens flow or Dify DSL)"),
    # A report's memory grows with the turns; at this many it still fits a laptop (benchmarks/report_scale.py).
    Limit(
        "turns", "MEMLENS_MAX_TURNS", 100_000, "turns", "turns of one conversation imported, reported on or compared"
    ),
    # About 250,000 tokens: more than most models' context; a long tool result fits.
    Limit(
        "message_size",
        "MEMLENS_MAX_MESSAGE_CHARS",
        1_000_000,
        "characters",
        "one message of a conversation read from a file or an export",
    ),
    Limit(
        "fact_checks",
        "MEMLENS_MAX_FACT_CHECKS",
        20_000_000,
        "checks",
        "facts × turns × configs a comparison of a branched conversation asks (one that never branched "
        "costs its changes only)",
    ),
)
_BY_NAME = {limit.name: limit for limit in LIMITS}


def limit(name: str) -> Limit:
    return _BY_NAME[name]


MAX_IMPORT_BYTES = limit("import_size").read() * MB
MAX_REQUEST_BYTES = limit("request_size").read()
MAX_PROXY_BYTES = limit("proxy_request_size").read() * MB
MAX_QUERY_CHARS = limit("query_length").read()
MAX_DEPTH = limit("depth").read()
MAX_YAML_NODES = limit("yaml_nodes").read()
MAX_FLOW_BYTES = limit("flow_size").read() * MB
MAX_TURNS = limit("turns").read()
MAX_MESSAGE_CHARS = limit("message_size").read()
MAX_FACT_CHECKS = limit("fact_checks").read()
#: What a MemLens export may add to what was imported, per turn: its ids, times and fields (about 500
#: bytes; more with tool steps). An export repeats a turn's query and answer besides its messages, so
#: the export of the largest transcript MemLens imports takes at most twice its size plus this per turn.
EXPORT_TURN_BYTES = 1_000
#: The size of a MemLens conversation export MemLens reads back: enough for the export of anything it
#: imports (the import size and the most turns a conversation holds set it; there is no setting of its own).
MAX_EXPORT_BYTES = 2 * MAX_IMPORT_BYTES + MAX_TURNS * EXPORT_TURN_BYTES

# -- the memory systems' own numbers ----------------------------------------------------------------
# Not settings: the systems MemLens reproduces fix them, so no environment variable changes them.
# They live here, below every other core module, because the rules, the ledger's words and the
# flow checks all name them.

#: Dify's TokenBufferMemory fetches at most this many message rows, whatever the window says
#: (spec/dify-memory.md §1), so Dify's windows are 1..500 turns and "no window" means 500.
DIFY_ROW_CAP = 500
#: The Window Memory node keeps 1..this many messages, and this many when unset.
WINDOW_MAX_MESSAGES = 200
WINDOW_DEFAULT_MESSAGES = 10
#: The largest window size accepted as input for Dify's memory (it runs anything over
#: :data:`DIFY_ROW_CAP` as that): a bound on input, not Dify's rule.
MAX_DIFY_WINDOW = 1_000_000
#: Dify's template-transform node fails a rendering longer than this many characters
#: (its ``TEMPLATE_TRANSFORM_MAX_LENGTH``, 80,000 by default).
TEMPLATE_TRANSFORM_MAX_LENGTH = 80_000
#: The most questions a conversation is replayed with from its first turn (each one calls the flow's models).
REPLAY_TURNS = 200
#: ``max_history_tokens`` when unset, for the strategies that read it (summary buffer, trim).
DEFAULT_HISTORY_TOKENS = 2000
#: The longest conversation pin or node name a captured call keeps (``X-MemLens-Conversation``,
#: ``X-MemLens-Node``, their ``metadata`` keys), in characters: the rest is cut off.
CAPTURE_NAME_CHARS = 200


def history_limit(max_history_tokens: int | None) -> int:
    """``max_history_tokens`` as the strategies read it: unset is :data:`DEFAULT_HISTORY_TOKENS`, 0 is 0."""
    return DEFAULT_HISTORY_TOKENS if max_history_tokens is None else max_history_tokens


def _size(n: int) -> str:
    if n < MB // 10:
        return f"{n:,} bytes"
    return f"{n // MB} MB" if n % MB == 0 else f"{n / MB:.1f} MB"


def check_file_size(size: int, name: str, max_bytes: int | None = None) -> None:
    """Refuse a file (or upload) over the import size, before it is read or parsed."""
    cap = MAX_IMPORT_BYTES if max_bytes is None else max_bytes
    if size > cap:
        raise TooLargeError(
            f"{name} is {_size(size)}; MemLens imports files up to {_size(cap)} — split it "
            f"into smaller files (or raise {limit('import_size').env})"
        )


def read_bytes(
    path: Path, error: Callable[[str], Exception], expected: str, check_size: Callable[[int], None] | None = None
) -> bytes:
    """A file's bytes, its size passed to ``check_size`` before it is read. A missing file, a directory
    or a file that cannot be read raises ``error(message)`` in one line ("… is a directory; expected
    {expected}")."""
    try:
        if path.is_dir():
            raise IsADirectoryError
        if check_size is not None:
            check_size(path.stat().st_size)
        return path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path} is a directory; expected {expected}") from None
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror})") from None


def check_export_size(size: int, name: str) -> None:
    """Refuse a MemLens conversation export over :data:`MAX_EXPORT_BYTES`, before it is read."""
    if size > MAX_EXPORT_BYTES:
        raise TooLargeError(
            f"{name} is {_size(size)}; MemLens reads conversation exports up to "
            f"{_size(MAX_EXPORT_BYTES)} (twice the import size, {limit('import_size').env}, plus "
            f"{EXPORT_TURN_BYTES:,} bytes for each of the {MAX_TURNS:,} turns a conversation may hold, "
            f"{limit('turns').env}) — raise those to read it"
        )


def check_turns(count: int, what: str) -> None:
    """Refuse a conversation of more than :data:`MAX_TURNS` turns, before any work on it."""
    if count > MAX_TURNS:
        raise TooLargeError(
            f"{what} has {count:,} turns; MemLens takes conversations of up to {MAX_TURNS:,} (a report "
            f"on 100,000 takes about 2 GB) — raise {limit('turns').env} on a machine with the memory"
        )


def check_message(length: int, what: str) -> None:
    """Refuse a message longer than :data:`MAX_MESSAGE_CHARS`, before it is replayed, counted or stored."""
    if length > MAX_MESSAGE_CHARS:
        raise TooLargeError(
            f"{what} is {length:,} characters; MemLens takes messages of up to "
            f"{MAX_MESSAGE_CHARS:,} (raise {limit('message_size').env} if it is genuine)"
        )


def check_fact_work(facts: int, turns: int, configs: int) -> None:
    """Refuse following ``facts`` over ``turns`` of a branched conversation under ``configs`` when that
    asks more than :data:`MAX_FACT_CHECKS` questions (each fact at each turn, for each config)."""
    checks = facts * turns * configs
    if checks > MAX_FACT_CHECKS:
        raise LimitError(
            f"following {facts:,} facts over the {turns:,} turns of a branched conversation under "
            f"{configs} configs asks {checks:,} questions; MemLens asks at most {MAX_FACT_CHECKS:,} "
            f"(raise {limit('fact_checks').env}) — follow fewer facts (--facts none, or --fact REF=LABEL)"
        )


def check_flow_size(size: int, name: str) -> None:
    """Refuse a flow file over the flow size, before it is read or parsed."""
    if size > MAX_FLOW_BYTES:
        raise TooLargeError(
            f"{name} is {_size(size)}; flow files are at most {_size(MAX_FLOW_BYTES)} "
            f"(raise {limit('flow_size').env} if it is genuine)"
        )


def check_query(query: str) -> None:
    if len(query) > MAX_QUERY_CHARS:
        raise TooLargeError(
            f"the query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,} "
            f"(raise {limit('query_length').env} to allow longer ones)"
        )


#: What a number too long for Python to read or write as text is (its digit limit, 4,300 by default).
_DIGITS = sys.get_int_max_str_digits()
NUMBER_TOO_LONG = (
    f"holds a whole number of more than {_DIGITS:,} digits, more than MemLens reads or writes"
    if _DIGITS
    else "holds a number MemLens cannot read"
)
_TOO_LONG = 10**_DIGITS if _DIGITS else None


def check_value(
    value: Any, where: str, max_depth: int | None = None, *, finite: bool = True, text: bool = True
) -> None:
    """Refuse a JSON-like value nested deeper than the depth limit or (``finite``) holding a number
    that is not finite: NaN and infinities are not JSON, and PostgreSQL refuses them, nor a whole number
    longer than Python writes as text. ``text``: refuse a string (or a key) that is not text every store
    keeps — a lone surrogate (``"\\ud800"``, which UTF-8 cannot encode) or a NUL (which PostgreSQL cannot
    store). The message names the place inside the value (``where: 'turns[3].inputs.x'``)."""
    cap = MAX_DEPTH if max_depth is None else max_depth
    # Iterative, so a value nested thousands of levels deep is measured, not a RecursionError;
    # each entry's path is a (parent path, key) link, spelled out only for the message.
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict):
            children = item.items()
            if text:
                for key in item:
                    if isinstance(key, str):
                        _check_text(key, where, path, "a key")
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        elif isinstance(item, str):
            if text:
                _check_text(item, where, path, "")
            continue
        elif finite and isinstance(item, float) and not math.isfinite(item):
            raise LimitError(f"{where}{_spell(path)} holds {item!r}, which is not a number JSON can carry")
        elif finite and isinstance(item, int) and _TOO_LONG is not None and not -_TOO_LONG < item < _TOO_LONG:
            raise LimitError(f"{where}{_spell(path)} {NUMBER_TOO_LONG}")
        else:
            continue
        if depth > cap:
            raise LimitError(too_deep(f"{where}{_spell(path)}", cap))
        stack.extend((child, depth + 1, (path, key)) for key, child in children)


def nulled_non_finite(value: Any, where: str) -> list[str]:
    """Replace, in place, every NaN and infinity inside a JSON-like value by ``None`` — JSON has no
    spelling for them (Python would write ``Infinity``, which no JSON reader takes) — and say where
    each was (``where: 'variables[1].value'``). For documents MemLens writes out of what it holds, so
    an old stored value cannot make the whole document unreadable."""
    found: list[str] = []
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in children:
            if isinstance(child, float) and not math.isfinite(child):
                item[key] = None
                found.append(f"{where}{_spell((path, key))} was {child!r}, written as null")
            elif isinstance(child, (dict, list)):
                stack.append((child, (path, key)))
    return found


def _check_text(item: str, where: str, path: Any, what: str) -> None:
    """Refuse ``item`` (at ``path`` of ``where``) when it holds a NUL or a lone surrogate."""
    if "\x00" in item:
        raise LimitError(
            f"{where}{_spell(path)} holds {what or 'text with'} a NUL character (\\u0000), which "
            f"PostgreSQL cannot store; remove it"
        )
    if not item.isascii():
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as e:
            raise LimitError(
                f"{where}{_spell(path)} holds {what or 'text with'} a lone surrogate "
                f"(\\u{ord(item[e.start]):04x}), which is not text UTF-8 can hold; fix its encoding"
            ) from None


def _spell(path: Any) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(key)
    if not keys:
        return ""
    out = ""
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return f": '{out}'"


def load_json(text: str | bytes, name: str = "input", *, finite: bool = False) -> Any:
    """Parse one JSON document nested at most the depth limit and (``finite``) holding no NaN or
    infinity. Raises :class:`LimitError` (or :class:`MemLensError` for text that is not JSON)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise MemLensError(f"{name} is not UTF-8 text; expected JSON") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise MemLensError(f"{name} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise LimitError(too_deep(name)) from None
    except ValueError:  # a whole number past Python's digit limit
        raise LimitError(f"{name} {NUMBER_TOO_LONG}") from None
    # Non-finite numbers are let through by default so the importer's field checks can name them.
    check_value(value, name, finite=finite)
    return value


def load_yaml(text: str, name: str = "input") -> Any:
    """Parse one YAML document with the safe loader, refusing documents nested deeper than the
    depth limit or larger than the node limit once aliases are expanded (a "billion laughs"
    file is refused after composing a few hundred nodes, not after exhausting memory).
    Malformed YAML raises ``yaml.YAMLError`` as ``yaml.safe_load`` does."""
    loader = _LimitedLoader(text, name)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise LimitError(too_deep(name)) from None
    finally:
        loader.dispose()


def too_deep(name: str, cap: int | None = None) -> str:
    return f"{name} is nested more than {cap or MAX_DEPTH} levels deep (raise {limit('depth').env} if it really needs to be)"


class _LimitedLoader(yaml.SafeLoader):
    """The safe loader, with the depth and expanded size of every node counted as it is composed.
    An alias counts the full size of what it points at, so an expansion is paid for here, before
    the constructor (or anything walking the result) could multiply it."""

    def __init__(self, stream: str, name: str):
        super().__init__(stream)
        self._name = name
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent, index):
        alias = self.check_event(AliasEvent)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(too_deep(self._name))
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if not alias:
            size = 1
            if isinstance(node, SequenceNode):
                size += sum(self._sizes.get(id(child), 1) for child in node.value)
            elif isinstance(node, MappingNode):
                size += sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
            if size > MAX_YAML_NODES:
                raise LimitError(
                    f"{self._name} expands to more than {MAX_YAML_NODES:,} values through its "
                    f"aliases (a YAML bomb?); raise {limit('yaml_nodes').env} if it is genuine"
                )
            self._sizes[id(node)] = size
        return node


__all__ = [
    "LimitError",
    "TooLargeError",
    "Limit",
    "LIMITS",
    "limit",
    "MAX_IMPORT_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_PROXY_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_DEPTH",
    "MAX_YAML_NODES",
    "MAX_FLOW_BYTES",
    "MAX_TURNS",
    "MAX_MESSAGE_CHARS",
    "MAX_FACT_CHECKS",
    "MAX_EXPORT_BYTES",
    "EXPORT_TURN_BYTES",
    "check_file_size",
    "check_flow_size",
    "check_export_size",
    "check_turns",
    "check_message",
    "check_fact_work",
    "check_query",
    "check_value",
    "nulled_non_finite",
    "load_json",
    "load_yaml",
    "too_deep",
]
