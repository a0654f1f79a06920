"""The ledger: for one LLM call, every candidate message from the past, kept or not, and why.

One reason vocabulary serves the core, the UI, the CLI and the exports (DESIGN.md). A message's
reason is named by the first step of the removal pipeline that removes it; the order is fixed:

    memory off → scope → other branch → granularity → trimmed earlier → outside window
    → over budget → empty
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

KEPT = "kept"
MEMORY_OFF = "memory_off"
SCOPE = "scope"
OTHER_BRANCH = "other_branch"
GRANULARITY = "granularity"
TRIMMED_EARLIER = "trimmed_earlier"
OUTSIDE_WINDOW = "outside_window"
OVER_BUDGET = "over_budget"
EMPTY = "empty"
SUMMARIZED = "summarized"
CLEARED = "cleared"

#: Removal pipeline order: the first step that removes a message names its reason.
PIPELINE = (MEMORY_OFF, SCOPE, OTHER_BRANCH, GRANULARITY, TRIMMED_EARLIER, OUTSIDE_WINDOW,
            OVER_BUDGET, EMPTY)
REASONS = (KEPT, *PIPELINE, SUMMARIZED, CLEARED)
#: Reasons for messages that were never candidates for this node's memory at all.
NOT_ELIGIBLE = frozenset({MEMORY_OFF, SCOPE, OTHER_BRANCH})

REASON_LABELS = {
    KEPT: "kept",
    MEMORY_OFF: "memory off",
    SCOPE: "out of scope",
    OTHER_BRANCH: "on another branch",
    GRANULARITY: "intermediate message",
    TRIMMED_EARLIER: "trimmed earlier",
    OUTSIDE_WINDOW: "outside window",
    OVER_BUDGET: "over token budget",
    EMPTY: "empty",
    SUMMARIZED: "summarized",
    CLEARED: "cleared",
}


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    ref: int | str
    turn: int
    role: str
    tokens: int
    kept: bool
    reason: str
    kind: str = ""
    position: int = 0  # the source turn's position in the conversation
    index: int = 0     # the message's index within that turn

    def to_json(self) -> dict:
        return {"ref": self.ref, "turn": self.turn, "role": self.role, "tokens": self.tokens,
                "kept": self.kept, "reason": self.reason}


@dataclass(slots=True)
class Ledger:
    """The ledger of one LLM call (one turn, one node)."""

    turn: int
    entries: list[LedgerEntry]
    prompt_tokens: int
    history_tokens: int
    budget: int | None
    budget_note: str = ""
    config: dict = field(default_factory=dict)
    context_size: int | None = None
    exceeds_context: bool = False

    @property
    def kept(self) -> list[LedgerEntry]:
        return [e for e in self.entries if e.kept]

    @property
    def dropped(self) -> list[LedgerEntry]:
        return [e for e in self.entries if not e.kept]

    def to_json(self) -> dict:
        return {"turn": self.turn, "prompt_tokens": self.prompt_tokens,
                "history_tokens": self.history_tokens, "budget": self.budget,
                "ledger": [e.to_json() for e in self.entries]}


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """What a turn's memory kept, in numbers — cheap to compute for every turn."""

    turn: int
    kept: int
    dropped: int
    history_tokens: int
    prompt_tokens: int
    budget: int | None
    oldest_kept_turn: int | None

    def to_json(self) -> dict:
        return asdict(self)


def explain(entry: LedgerEntry, config: dict | None = None, node: str | None = None) -> str:
    """The reason for one entry in plain words, for hovers, tables and reports."""
    config = config or {}
    strategy = config.get("strategy", "dify")
    window = config.get("window")
    r = entry.reason
    if r == KEPT:
        return "sent to the model"
    if r == MEMORY_OFF:
        return f"memory off for {node}" if node else "memory is off for this node"
    if r == SCOPE:
        scope = config.get("scope", "thread")
        if scope == "call":
            return "scope 'call': every call starts with an empty memory"
        return "scope 'session': memory lives for one run only" if scope == "session" else \
            "no chat thread: memory lives for one run only"
    if r == OTHER_BRANCH:
        return "on another branch (regenerated or edited), never sent"
    if r == GRANULARITY:
        return "intermediate message (tool call, tool result or reasoning); query_answer keeps only query and answer"
    if r == TRIMMED_EARLIER:
        return "removed permanently from the window memory's store in an earlier turn"
    if r == OUTSIDE_WINDOW:
        if strategy == "window":
            return f"outside window of {window or 10} messages"
        if not window:
            return "outside Dify's 500-turn cap"
        if config.get("fidelity") == "code":
            return f"outside window of {window} message records (Dify code: N gives N−1 turns)"
        return f"outside window of {window} turns"
    if r == OVER_BUDGET:
        budget = config.get("budget")
        return f"token budget {budget:,}: oldest pruned" if isinstance(budget, int) else "token budget: oldest pruned"
    if r == EMPTY:
        return "empty message, dropped before the call"
    if r == SUMMARIZED:
        return "folded into a summary"
    if r == CLEARED:
        return "content replaced by a placeholder"
    return r
