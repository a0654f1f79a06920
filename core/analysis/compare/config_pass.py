"""One walk per config that fills the heatmap window's cells and every fact's presence together, and the
retention matrix it gives.
"""

from __future__ import annotations

from typing import Sequence

from core.memory.replay import Replay
from core.model.conversation import turn_label
from core.model.ledger import KEPT

from .facts import ChainFacts, EveryTurnFacts, FactFate, TrackedFact, fact_course
from .heatmap import Column, HeatmapWindow, RetentionMatrix, heatmap_window, message_columns, messages_before
from .walk import walk_rows


class ConfigPass:
    """One walk of one replay that fills the matrix window and every fact's timeline."""

    def __init__(
        self,
        replay: Replay,
        window: HeatmapWindow,
        facts: Sequence[TrackedFact],
        *,
        label: str | None = None,
        columns: Sequence[Column] | None = None,
        labels: dict[int, str] | None = None,
    ):
        conv = replay.conversation
        self.replay = replay
        label = label or replay.config.label()
        visible = (
            list(columns) if columns is not None else message_columns(conv, window.first_column, window.last_column)
        )
        labels = {} if labels is None else labels  # turn labels by position, shared by every config's pass

        def turn_label_of(p: int) -> str:
            text = labels.get(p)
            if text is None:
                text = labels[p] = turn_label(conv, p)
            return text

        summaries = {s.turn: s for s in replay.summaries()}
        row_index = {p: r for r, p in enumerate(window.rows)}
        numbers = replay.numbers
        answered = conv.answered_turns()
        answered_index = {p: k for k, p in enumerate(answered)}
        cells: list[list[str | None]] = [[] for _ in window.rows]
        before = messages_before(conv)
        follow = (ChainFacts if conv.one_thread() else EveryTurnFacts)(replay, facts, len(answered))
        for p, reasons in walk_rows(replay):
            r = row_index.get(p)
            if r is not None:
                limit = before[p]
                cells[r] = [reasons.reason(c.position, c.index) if c.column < limit else None for c in visible]
            follow.row(answered_index[p], p, reasons)
        tokens = [replay.message_tokens(c.position)[c.index] for c in visible]
        hidden = []
        budgets = []
        for r, p in enumerate(window.rows):
            s = summaries[numbers[p]]
            hidden.append(s.kept - sum(1 for x in cells[r] if x == KEPT))
            budgets.append(s.budget)
        self.matrix = RetentionMatrix(
            label,
            replay.config.to_dict(),
            window,
            [numbers[p] for p in window.rows],
            list(window.rows),
            visible,
            tokens,
            cells,
            hidden,
            budgets,
        )
        self.fates: list[FactFate] = []
        for f, fact in enumerate(facts):
            present = follow.timeline(f)
            lost, back, gone, returns = fact_course(present)
            stated = numbers[fact.messages[0][0]] if fact.messages else 0
            stated_label = turn_label_of(fact.messages[0][0]) if fact.messages else ""
            fate = FactFate(fact, label, stated, present, None, None, stated_label, returns=returns)
            if lost is not None:
                fate.lost_turn, fate.lost_reason = numbers[answered[lost]], follow.reason(f, lost)
                fate.lost_label = turn_label_of(answered[lost])
            if back is not None:
                fate.back_label = turn_label_of(answered[back])
            if gone is not None:
                fate.gone_label, fate.gone_reason = turn_label_of(answered[gone]), follow.reason(f, gone)
            self.fates.append(fate)


def retention_matrix(
    replay: Replay,
    window: HeatmapWindow | None = None,
    *,
    label: str | None = None,
    columns: Sequence[Column] | None = None,
) -> RetentionMatrix:
    """The heatmap data of one replay over a window (default: :func:`heatmap_window`); ``columns``: the
    window's (:func:`message_columns` of its first and last column), when already made."""
    return ConfigPass(replay, window or heatmap_window(replay.conversation), [], label=label, columns=columns).matrix
