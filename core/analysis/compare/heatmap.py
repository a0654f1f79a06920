"""The retention matrix and the window of it the heatmap shows.

Rows are answered turns, columns every message of the conversation in order, a cell the ledger's
reason for that message at that turn (``kept`` or the drop reason), ``None`` where the message is not
earlier than the row's turn.

A 2,000-turn conversation has ~2,000 rows × ~5,000 columns — ten million cells per config, which no
heatmap can show or hover. The matrix is therefore computed for a window: at most
:data:`HEATMAP_ROWS` consecutive answered turns (by default the last ones) and the latest
:data:`HEATMAP_COLUMNS` messages before the window's last row. Within the window every cell is exact;
for each row the matrix also says how many kept messages lie before the first column
(``hidden_kept``), so nothing kept is silently off-screen. A short conversation fits in one window and
is shown whole. The page moves the window; it never down-samples cells.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from core.memory.replay import turn_number, turn_numbers
from core.memory.words import explain
from core.model.conversation import Conversation, Message, message_text, turn_label
from core.model.ledger import KEPT, LedgerEntry

from ..errors import CompareError

#: Heatmap window: rows (answered turns) and columns (earlier messages) computed at a time.
HEATMAP_ROWS = 60


HEATMAP_COLUMNS = 240


_TEXT_WIDTH = 48


@dataclass(frozen=True)
class Column:
    """One message of the conversation: a heatmap column."""

    column: int  # index among all messages of the conversation, in order
    position: int  # its turn's position
    index: int  # its index within the turn
    turn: int  # its turn's number
    role: str
    kind: str
    ref: int | str
    text: str  # the first words, for labels and hovers
    label: str = ""  # its turn as a person counts it (core.model.conversation.turn_label): "turn 6 · 2/3"

    def to_json(self) -> dict:
        return {
            "column": self.column,
            "turn": self.turn,
            "role": self.role,
            "kind": self.kind,
            "ref": self.ref,
            "text": self.text,
            "turn_label": self.label,
        }


def short_text(text: str, width: int = _TEXT_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def column_text(m: Message) -> str:
    return short_text(message_text(m)) or "(empty)"


def message_columns(conversation: Conversation, first: int = 0, last: int | None = None) -> list[Column]:
    """The messages of the conversation in order, each a heatmap column: every one, or those from
    column ``first`` up to (not including) ``last`` — a window's, made without the others."""
    turns = conversation.turns
    before = messages_before(conversation)
    last = before[-1] if last is None else min(last, before[-1])
    out: list[Column] = []
    p = max(bisect_right(before, first) - 1, 0)
    while p < len(turns) and before[p] < last:
        label, number = turn_label(conversation, p), turn_number(conversation, p)
        for j, m in enumerate(turns[p].messages):
            column = before[p] + j
            if first <= column < last:
                out.append(Column(column, p, j, number, m.role, m.kind, m.ref, column_text(m), label))
        p += 1
    return out


@dataclass(frozen=True)
class HeatmapWindow:
    """Which rows and columns a retention matrix covers.

    ``rows`` are positions of consecutive answered turns; columns ``first_column`` up to (not
    including) ``last_column`` are shown, ``last_column`` being the number of messages before
    the last row's turn.
    """

    rows: tuple[int, ...]
    first_column: int
    last_column: int
    total_rows: int
    total_columns: int

    @property
    def whole(self) -> bool:
        """True when the window shows the whole conversation."""
        return len(self.rows) == self.total_rows and self.first_column == 0

    def to_json(self) -> dict:
        return {
            "rows": list(self.rows),
            "first_column": self.first_column,
            "last_column": self.last_column,
            "total_rows": self.total_rows,
            "total_columns": self.total_columns,
            "whole": self.whole,
        }


def messages_before(conversation: Conversation) -> list[int]:
    acc, out = 0, []
    for t in conversation.turns:
        out.append(acc)
        acc += len(t.messages)
    out.append(acc)
    return out


def heatmap_window(
    conversation: Conversation,
    *,
    last_turn: int | None = None,
    max_rows: int = HEATMAP_ROWS,
    max_columns: int = HEATMAP_COLUMNS,
) -> HeatmapWindow:
    """The window ending at ``last_turn`` (a turn number; default the last answered turn): up to
    ``max_rows`` answered turns and the latest ``max_columns`` messages before its last row."""
    if max_rows < 1 or max_columns < 1:
        raise CompareError("a heatmap window needs at least one row and one column")
    answered = conversation.answered_turns()
    before = messages_before(conversation)
    if not answered:
        return HeatmapWindow((), 0, 0, 0, before[-1])
    numbers = turn_numbers(conversation)
    if last_turn is None:
        end = len(answered)
    else:
        try:
            end = [numbers[p] for p in answered].index(last_turn) + 1
        except ValueError:
            raise CompareError(
                f"turn {last_turn} is not an answered turn of this conversation; it has turns "
                f"{numbers[answered[0]]}..{numbers[answered[-1]]}"
            ) from None
    rows = tuple(answered[max(0, end - max_rows) : end])
    last_column = before[rows[-1]]
    return HeatmapWindow(rows, max(0, last_column - max_columns), last_column, len(answered), before[-1])


@dataclass
class RetentionMatrix:
    """One config's heatmap data over a window. ``cells[r][c]`` is the reason for column
    ``columns[c]`` at row ``rows[r]``; ``None`` where that message is not earlier than the turn."""

    label: str
    config: dict
    window: HeatmapWindow
    rows: list[int]  # turn numbers
    row_positions: list[int]
    columns: list[Column]
    tokens: list[int]  # per column, counted for this config's model
    cells: list[list[str | None]]
    hidden_kept: list[int]  # per row: kept messages before the first column
    budgets: list[int | None]  # per row: the history budget (for hover texts)

    def message(self, c: int) -> str:
        """Column ``c``'s message in a line: its turn, role, tokens and first words."""
        col = self.columns[c]
        return f"{col.label or f'turn {col.turn}'} · {col.role} · {self.tokens[c]:,} tokens · {col.text}"

    def why(self, r: int, c: int) -> str:
        """The reason of cell ``(r, c)`` in plain words (the ledger's :func:`core.model.ledger_words.shared_words`)."""
        reason = self.cells[r][c]
        if reason is None:
            return "not yet written at this turn"
        col = self.columns[c]
        entry = LedgerEntry(
            ref=col.ref,
            turn=col.turn,
            role=col.role,
            tokens=self.tokens[c],
            kept=reason == KEPT,
            reason=reason,
            kind=col.kind,
            position=col.position,
            index=col.index,
        )
        return explain(entry, {**self.config, "budget": self.budgets[r]})

    def hover(self, r: int, c: int) -> str:
        """What a hover shows: the message, its tokens and the reason in plain words."""
        return f"{self.message(c)} — {self.why(r, c)}"

    def to_json(self) -> dict:
        return {
            "label": self.label,
            "config": self.config,
            "window": self.window.to_json(),
            "rows": self.rows,
            "columns": [c.to_json() for c in self.columns],
            "tokens": self.tokens,
            "cells": self.cells,
            "hidden_kept": self.hidden_kept,
            "budgets": self.budgets,
        }
