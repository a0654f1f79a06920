"""A ledger in words: the reasons as every memory system shares them, a copy of a message on another branch
said as one, an observed call's words, and what a memory remembers at a turn in a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .ledger import (
    CLEARED,
    EMPTY,
    FLUSHED,
    GRANULARITY,
    KEPT,
    MEMORY_OFF,
    NOT_SENT,
    OBSERVED,
    OMITTED,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    REASON_LABELS,
    REWRITTEN,
    SCOPE,
    SUMMARIZED,
    TRIMMED_EARLIER,
    Ledger,
    LedgerEntry,
    turn_ranges,
)


def branch_copies(ledger: Ledger, refs_here: Iterable[int | str], position: int) -> dict[tuple[int, int], int]:
    """The ``other_branch`` entries that are the same source message (the same ``ref``) as one on
    this call's branch: the question a regenerated reply shares with the sibling it replaced, which
    a tree export (ChatGPT's, Claude's: a message's ref is its node's id) holds once and each
    sibling turn holds as its own. ``refs_here`` are the refs of the call's own turn, at
    ``position``. Keyed by the entry's ``(position, index)``; the value is the position of the turn
    on the branch holding the message (the call's own when it holds it). A message without a ref
    is nobody's copy."""
    if all(e.reason != OTHER_BRANCH for e in ledger.entries):  # a conversation that never branched
        return {}
    on_branch: dict[int | str, int] = {}
    for e in ledger.entries:
        if e.reason != OTHER_BRANCH and e.ref not in ("", None):
            on_branch[e.ref] = e.position
    on_branch.update((ref, position) for ref in refs_here if ref not in ("", None))
    return {
        (e.position, e.index): on_branch[e.ref]
        for e in ledger.entries
        if e.reason == OTHER_BRANCH and e.ref in on_branch
    }


def copy_words(where: str, own: bool) -> tuple[str, str]:
    """A :func:`branch_copies` entry's reason and why in words, beside :func:`core.memory.words.explain`'s: ``where``
    names the turn on the branch that holds the message ("turn 2 · 3/3"; "this turn" when ``own``,
    the call's own turn). The turn leads the reason: a narrow column shows that much."""
    return (
        f"same as {where} ({REASON_LABELS[OTHER_BRANCH]})",
        f"on another branch, but the same message as {where}'s (the sibling turns of a regenerated reply each "
        "hold it): " + ("part of this turn itself" if own else "see that row"),
    )


def shared_short_words(reason: str, config: Mapping[str, Any] | None = None) -> str:
    """A reason in a few words as every memory says it, for markers, answers, short tables and
    command-line lines: its label (:data:`REASON_LABELS`), with the budget that decided it —
    ``"over token budget 2,000"``. A memory system may say its own first
    (:func:`core.memory.words.reason_words`, which the pages, reports and the CLI call)."""
    config = config or {}
    label = REASON_LABELS.get(reason, reason.replace("_", " "))
    if config.get(OBSERVED) and reason in (OUTSIDE_WINDOW, NOT_SENT):
        return "not in the payload"
    if reason == OVER_BUDGET:
        budget = config.get("budget")
        return f"{label} {budget:,}" if isinstance(budget, int) else label
    return label


def shared_words(entry: LedgerEntry, config: Mapping[str, Any] | None = None, node: str | None = None) -> str:
    """The reason for one entry in plain words, as every memory says it; a memory system may say its
    own first (:func:`core.memory.words.explain`, which the pages, reports and the CLI call)."""
    config = config or {}
    if config.get(OBSERVED):
        return observed_words(entry.reason)
    r = entry.reason
    if r == KEPT:
        return "sent to the model"
    if r == MEMORY_OFF:
        return f"memory off for {node}" if node else "memory is off for this node"
    if r == SCOPE:
        scope = config.get("scope", "thread")
        if scope == "call":
            return "scope 'call': every call starts with an empty memory"
        return (
            "scope 'session': memory lives for one run only"
            if scope == "session"
            else "no chat thread: memory lives for one run only"
        )
    if r == OTHER_BRANCH:
        return "on another branch (regenerated or edited): not this turn's history"
    if r == GRANULARITY:
        return "intermediate message (tool call, tool result or reasoning); query_answer keeps only query and answer"
    if r == TRIMMED_EARLIER:
        return "removed permanently from the window memory's store in an earlier turn"
    if r == OUTSIDE_WINDOW:
        return "outside the memory's window"
    if r == OVER_BUDGET:
        budget = config.get("budget")
        return f"token budget {budget:,}: oldest pruned" if isinstance(budget, int) else "token budget: oldest pruned"
    if r == EMPTY:
        return "empty message, dropped before the call"
    if r == SUMMARIZED:
        return "folded into a summary"
    if r == CLEARED:
        return "content replaced by a placeholder, which is still sent"
    if r == FLUSHED:
        return "flushed from the memory's chat history when a message was written: never sent again"
    if r == REWRITTEN:
        return "sent rewritten, inside a message that stands for it"
    if r == OMITTED:
        return "left out of the message sent in its place: its words are never sent again"
    return REASON_LABELS.get(r, r)


def observed_words(reason: str) -> str:
    """An observed ledger's reasons in words: what the payload held, not a memory's rule."""
    if reason == KEPT:
        return "in the payload the bot sent"
    if reason == OTHER_BRANCH:
        return "on another branch (regenerated or edited): not this call's thread"
    if reason == OUTSIDE_WINDOW:
        return "observed: not in the payload, which held nothing of the thread older than its newer messages"
    if reason == GRANULARITY:
        return (
            "observed: an intermediate message (tool call, tool result or reasoning) the payload left out while "
            "holding the messages around it"
        )
    if reason == EMPTY:
        return "observed: an empty message the payload left out"
    if reason == NOT_SENT:
        return "observed: left out of the payload, which held messages before and after it"
    return f"observed: {REASON_LABELS.get(reason, reason)}"


@dataclass(frozen=True)
class Remembered:
    """What one node's (or config's) memory holds at a turn, in a sentence's worth of numbers:
    the turns it still has a message of, the earlier turns of the thread it has none of, and
    what a summary stands for."""

    kept: int
    history_tokens: int
    budget: int | None
    kept_turns: tuple[int, ...]
    forgotten_turns: tuple[int, ...]
    summarized_turns: tuple[int, ...] = ()
    off: bool = False

    def sentence(self) -> str:
        if self.off:
            return "memory off: remembers nothing from earlier turns"
        if not self.kept_turns and not self.summarized_turns and not self.forgotten_turns:
            return "first turn: nothing earlier to remember"
        parts = []
        if self.kept_turns:
            budget = f" of a {self.budget:,} budget" if self.budget is not None else ""
            parts.append(
                f"remembers {turn_ranges(self.kept_turns)} ({self.kept} messages, "
                f"{self.history_tokens:,} tokens{budget})"
            )
        else:
            parts.append("remembers no earlier message")
        if self.summarized_turns:
            parts.append(f"has a summary of {turn_ranges(self.summarized_turns)}")
        if self.forgotten_turns:
            parts.append(f"forgot {turn_ranges(self.forgotten_turns)}")
        return "; ".join(parts)


def remembered(ledger: Ledger) -> Remembered:
    """A ledger as a :class:`Remembered`."""
    entries = ledger.entries
    if entries and all(e.reason == MEMORY_OFF for e in entries):
        return Remembered(0, 0, ledger.budget, (), (), (), True)
    kept = sorted({e.turn for e in entries if e.kept})
    summarized = sorted({t for s in ledger.synthetic for t in s.covers})
    on_thread = {e.turn for e in entries if e.reason not in (OTHER_BRANCH, SCOPE, MEMORY_OFF)}
    forgotten = sorted(on_thread - set(kept) - set(summarized))
    return Remembered(
        sum(1 for e in entries if e.kept),
        ledger.history_tokens,
        ledger.budget,
        tuple(kept),
        tuple(forgotten),
        tuple(summarized),
    )


__all__ = [
    "Remembered",
    "branch_copies",
    "copy_words",
    "observed_words",
    "remembered",
    "shared_short_words",
    "shared_words",
]
