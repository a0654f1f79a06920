"""Memory strategies: each decides, for one turn, which part of its thread's history is kept.

A strategy only answers two questions about the messages of the current turn's thread, laid
out oldest first as one sequence (see :mod:`core.memory.replay`):

* ``window`` — where the permanently trimmed part ends and where the window starts;
* ``budget`` — how many tokens the kept history may use (``None``: no pruning).

Everything else — other branches, granularity, budget pruning, empty messages, the ledger
itself — is the same machinery for every strategy, so all of them speak one reason vocabulary.
Strategies that rewrite history (summary_buffer, compaction, trim) answer with a per-turn plan
instead (:class:`core.memory.strategies.base.Plan`) and still share the rest of the machinery.
"""

from __future__ import annotations

from core import public_api

from .base import Strategy
from .buffer import BufferStrategy, OffStrategy
from .compaction import CompactionStrategy
from .dify import DifyStrategy
from .dify_agent import DifyAgentStrategy
from .summary_buffer import SummaryBufferStrategy
from .trim import TrimStrategy
from .window import WindowStrategy

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (DifyStrategy(), WindowStrategy(), BufferStrategy(), OffStrategy(), SummaryBufferStrategy(),
                        CompactionStrategy(), TrimStrategy(), DifyAgentStrategy())
}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown memory strategy {name!r}; expected one of {', '.join(STRATEGIES)}") from None


__all__, __getattr__ = public_api(__name__, {
    "base": ("Budget", "PathView", "Plan", "Strategy"),
    "compaction": ("COMPACTION_PROFILES", "DEFAULT_KEEP_MESSAGES", "DEFAULT_KEEP_TOOL_RESULTS", "DEFAULT_TRIGGER",
                   "SHIPPED", "SUMMARIES_META", "ShippedRunHook", "recorded_summaries"),
    "dify": ("EMPTY_LIST_TOKENS", "row_limit", "window_note"),
    "dify_agent": ("AGENT_STRATEGIES", "FUNCTION_CALL", "REACT", "agent_app", "left_out"),
    "trim": ("MESSAGE_TYPES",),
    "window": ("DEFAULT_WINDOW", "HISTORY_SET", "MAX_WINDOW"),
}, here=("STRATEGIES", "get_strategy"))
