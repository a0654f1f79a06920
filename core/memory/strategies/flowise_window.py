"""Flowise's Buffer Window Memory node: the last k exchanges of the chat message rows, and the request's history.

The rules, read from flowise-components 3.1.4 (``nodes/memory/BufferWindowMemory/BufferWindowMemory.js``,
``getChatMessages``) and checked against that JavaScript on generated conversations
(``tests/reference/js/``):

* Flowise stores each turn as two chat message rows, the question and the answer (an empty answer is an
  empty row); tool calls and results are not rows, so they are never sent (``omitted``).
* Size ``k`` is read with ``parseInt(k, 10)``: the rows are ``slice(-2k)``; ``k ≤ 0`` sends nothing, an
  empty or unreadable Size (``NaN``) sends every row, and ``"2.5"`` is 2 (default ``"4"``).
* The request's ``history`` (``prependMessages``: ``[{"role": "userMessage" | "apiMessage", "content"}]``)
  is put before the window, outside it: it is always sent in full, as a question or an answer per item
  (an item of another role is dropped, as Flowise's mapping drops it). An item becomes LangChain JS's
  ``new AIMessage(content || '')`` (or ``HumanMessage``), whose text is sent: a text as it is, a list's
  texts and text blocks joined, an object read as the message's own fields (its ``content``, read the
  same way), and a number or ``true`` fails the request.
"""

from __future__ import annotations

import json
import re

from core.errors import MemLensError
from core.limits import load_json
from core.model.conversation import source_platform
from core.model.ledger import OMITTED, OUTSIDE_WINDOW, SyntheticMessage

from ..errors import ConfigError
from .base import Budget
from .settings import TEXT, TEXT_INPUT, Setting, Widget
from .stored import Item, StoredPlan, StoredStrategy, sliced_items, stored_items

#: Origin of the request's history messages, sent before the window.
REQUEST_HISTORY = "request history"
#: Flowise's chat message roles, and the chat roles they are sent as.
ROW_ROLES = {"userMessage": "user", "apiMessage": "assistant"}
#: The most request-history messages a config holds.
MAX_PREPEND = 1000
_INTEGER = re.compile(r"\s*([+-]?\d+)")


def parse_int(text: str) -> int | None:
    """JavaScript's ``parseInt(text, 10)``: the leading whole number, ``None`` for ``NaN``."""
    found = _INTEGER.match(str(text))
    return int(found.group(1)) if found else None


def window_rows(view, layout, k: str) -> list[Item]:
    """The rows Size ``k`` sends: ``slice(-2k)`` of them, none for ``k ≤ 0``, all for ``NaN``."""
    size = parse_int(k)
    if size is None:
        return stored_items(view, layout)
    return [] if size <= 0 else sliced_items(view, layout, -2 * size)


def row_items(turn, position: int) -> list[Item]:
    """A turn's chat message rows: its question and its answer."""
    return [Item.of(position, j, turn.messages[j]) for j in (turn.query_index, turn.answer_index) if j is not None]


def rows_layout(replay):
    turns = replay.conversation.turns
    return lambda position: row_items(turns[position], position)


def prepended(text: str) -> list[tuple[str, str]]:
    """The request's history as ``(role, content)`` pairs sent (items of another role dropped); raises
    :class:`ConfigError` when it is not a JSON list of ``{"role", "content"}`` objects."""
    if not text:
        return []
    try:
        value = load_json(text, "prepend")
    except MemLensError:
        value = None
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise ConfigError(
            'prepend must be a JSON list of {"role": "userMessage" or "apiMessage", "content": '
            "text} objects, as Flowise's request history is"
        )
    if len(value) > MAX_PREPEND:
        raise ConfigError(f"prepend holds {len(value):,} messages; at most {MAX_PREPEND:,} are read")
    out = []
    for number, m in enumerate(value, 1):
        if m.get("role") not in ROW_ROLES:
            continue
        content = m.get("content")
        if content and isinstance(content, (bool, int, float)):
            raise ConfigError(
                f"prepend's message {number} has the content {json.dumps(content)}: Flowise fails on a "
                f"number or true (give text)"
            )
        out.append((ROW_ROLES[m["role"]], _text(content)))
    return out


def _text(content) -> str:
    """The text of LangChain JS's ``new AIMessage(content || '')``: a text as it is; a list, its texts and
    ``{"type": "text"}`` blocks joined; an object is the message's fields, so its ``content`` counts
    (``{"a": 1}`` has no text); anything else has none. For example ``[{"type": "text", "text": "hi"},
    " there"]`` is ``"hi there"`` and ``{"content": "hi"}`` is ``"hi"``."""
    if isinstance(content, dict):
        content = content.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        part
        if isinstance(part, str)
        else part["text"]
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        else ""
        for part in content
    )


class RowsPlan(StoredPlan):
    """A Flowise plan: the rows sent, after the request's history (synthetic messages, first)."""

    def __init__(self, budget, sent, reasons, view, replay, layout, leading: list[tuple[str, str]]):
        super().__init__(budget, sent, reasons, view, replay, layout)
        self.leading = [(role, content, replay.counter.chat(role, content)) for role, content in leading]
        self.history_tokens += sum(t for _, _, t in self.leading)

    def synthetic(self, view, replay):
        number = replay.numbers[view.positions[-1]] if view.positions else 0
        first = [
            SyntheticMessage(
                role=role,
                content=content,
                tokens=tokens,
                origin=REQUEST_HISTORY,
                turn=number,
                ref=f"request-history:{k + 1}",
            )
            for k, (role, content, tokens) in enumerate(self.leading)
        ]
        return first + super().synthetic(view, replay)


class FlowiseWindowStrategy(StoredStrategy):
    name = "flowise_window"
    help = "Flowise's Buffer Window Memory: the last k questions and answers (2k rows), tool steps never sent"
    settings = (
        Setting(
            "k",
            "4",
            "Size, as Flowise reads it (parseInt): the last 2k chat message rows (0 or less: none; empty: all)",
            kind=TEXT,
            words="Size",
            widget=Widget(
                TEXT_INPUT,
                "Size (k)",
                key="flowise_k",
                help="Flowise sends the last 2k rows, a question and an answer per turn",
            ),
        ),
        Setting(
            "prepend",
            "",
            'the request\'s history, sent before the window: a JSON list of {"role": '
            '"userMessage" | "apiMessage", "content"}',
            kind=TEXT,
            words="request history",
            widget=Widget(TEXT_INPUT, "Request history (JSON)", key="flowise_prepend"),
        ),
    )
    lenses = (("Flowise Buffer Window Memory (k = 4)", {}),)

    def label(self, config):
        s = config.settings
        return f"flowise window k={s.k or 'all'}" + (" + request history" if s.prepend else "")

    def validate(self, config):
        prepended(config.settings.prepend)

    def explain(self, entry, config):
        if entry.reason == OMITTED:
            return "not a chat message row: Flowise stores a turn's question and answer only, not its tool steps"
        if entry.reason == OUTSIDE_WINDOW:
            k = parse_int(config.get("k", "4"))
            if k is not None and k <= 0:
                return f"Size {k}: Flowise's Buffer Window Memory sends no rows"
            return f"outside Size {k}: Flowise sends the last {2 * (k or 0)} rows, a question and an answer per turn"
        return None

    def claims(self, conversation):
        return {} if source_platform(conversation.source_format) == "flowise" else None

    def plan(self, view, current, replay):
        s = replay.config.settings
        layout = rows_layout(replay)
        budget = Budget(None, "", replay.config.context_size or replay.facts.context_size)
        return RowsPlan(budget, window_rows(view, layout, s.k), {}, view, replay, layout, prepended(s.prepend))


__all__ = [
    "FlowiseWindowStrategy",
    "REQUEST_HISTORY",
    "ROW_ROLES",
    "parse_int",
    "prepended",
    "row_items",
    "rows_layout",
    "window_rows",
]
