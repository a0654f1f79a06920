"""``silent_pruning``: a token budget that pruned messages without saying so (Dify's TokenBufferMemory
pops the oldest message while the history is over budget; spec §1.6).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from core.memory.strategies import strategy_of
from core.words import plural

from .base import INFO, SILENT_PRUNING, WARNING, Finding, TurnNamer, quoted
from .turns import MemoryTurn


def silent_pruning_finding(
    subject: str, turns: Sequence[MemoryTurn], name: TurnNamer, config: Mapping[str, Any], node_id: str | None = None
) -> Finding | None:
    """``config``: the stored config the turns ran under (``MemoryConfig.to_dict``), whose memory system
    says what its pruning means (:meth:`core.memory.strategies.base.Strategy.pruning_words`)."""
    hit = [t for t in turns if t.pruned]
    if not hit:
        return None
    first = hit[0]
    worst = max(hit, key=lambda t: t.pruned)
    budget = f" of {first.budget:,} tokens" if first.budget is not None else ""
    text = (
        f"Budget exceeded at {name(first.turn)}: {plural(first.pruned, 'oldest message')} pruned silently "
        f"by {quoted(subject)} to fit its token budget{budget}"
    )
    if len(hit) > 1:
        text += f"; pruning goes on at {plural(len(hit) - 1, 'later turn')}"
        if worst.pruned > first.pruned:
            text += f", up to {plural(worst.pruned, 'message')} at {name(worst.turn)}"
    detail, silent = strategy_of(config).pruning_words(config)
    severity = WARNING if silent else INFO
    return Finding(
        SILENT_PRUNING,
        text + ".",
        subject,
        first.turn,
        node_id,
        severity,
        detail,
        {"turns": [t.turn for t in hit], "pruned": [t.pruned for t in hit], "budget": first.budget},
    )
