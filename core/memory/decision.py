"""A turn's decision: where its history sequence is cut — the trim, the window, the budget — and how
the earlier messages it does not keep divide, with the prompt its budget subtracts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .strategies.base import Budget, Plan


@dataclass(frozen=True)
class Decision:
    """Where a turn's history sequence is cut: indices into its :class:`PathView`."""

    trimmed_before: int
    window_start: int
    budget_cut: int
    end: int
    budget: Budget
    fixed_prompt_tokens: int
    blocked: str | None = None  # memory_off or scope: nothing from the past is a candidate
    plan: Plan | None = None  # a planning strategy's own decision (then the indices above are unused)


def not_kept(before, on_thread, kept, blocked):
    """``(dropped, not_eligible)``: how a turn's earlier messages that were not kept divide, in
    counts (the ledger's rule, :func:`core.model.ledger.is_dropped`). ``before`` messages come
    before the turn, ``on_thread`` of them on its thread, ``kept`` of those kept. While the memory
    is off or out of scope (``blocked``) none of them is its to send, nor kept: all are not
    eligible. Otherwise the thread's are dropped and the other branches' are not eligible. Counts
    or numpy arrays of them."""
    if blocked:
        return before * 0, before
    return on_thread - kept, before - on_thread


def budgeted_prompt(fixed: int, query_tokens: int, query_after_budget: bool) -> int:
    """The prompt a turn's budget subtracts: its fixed tokens (the prompt without the history),
    less the current query's message when that joins after the budget (``query_after_budget``)."""
    return fixed - query_tokens if query_after_budget else fixed
