"""Memory systems: each decides, for one turn, which part of its thread's history is sent.

A system only answers two questions about the messages of the current turn's thread, laid
out oldest first as one sequence (see :mod:`core.memory.replay`):

* ``window`` — where the permanently trimmed part ends and where the window starts;
* ``budget`` — how many tokens the kept history may use (``None``: no pruning).

Everything else — other branches, granularity, budget pruning, empty messages, the ledger
itself — is the same machinery for every system, so all of them speak one reason vocabulary.
Systems that rewrite history (summary_buffer, compaction, trim) answer with a per-turn plan
instead (:class:`core.memory.strategies.base.Plan`) and still share the rest of the machinery.

Each system is one module and one line of :data:`STRATEGIES` below (ARCHITECTURE.md, "A memory
system"); its settings, label, words and rule are its module's, and the rest of MemLens asks it.
"""

from __future__ import annotations

from typing import Any, Mapping

from core import public_api

from ..errors import ConfigError
from .base import Strategy
from .buffer import BufferStrategy, OffStrategy
from .compaction import CompactionStrategy
from .dify import DifyStrategy
from .dify_agent import DifyAgentStrategy
from .flowise_agentflow import FlowiseAgentflowStrategy
from .flowise_window import FlowiseWindowStrategy
from .langgraph_trim import LangGraphTrimStrategy
from .langmem_summary import LangmemSummaryStrategy
from .llamaindex_buffer import LlamaIndexBufferStrategy
from .llamaindex_memory import LlamaIndexMemoryStrategy
from .n8n_agent import N8nAgentStrategy
from .n8n_window import N8nWindowStrategy
from .openai_agents import OpenAIAgentsStrategy
from .summary_buffer import SummaryBufferStrategy
from .trim import TrimStrategy
from .window import WindowStrategy

#: Every memory system by name, one line each. The order is the one choices are offered in, and the
#: one in which systems claim a conversation (:meth:`Strategy.claims`: the first claim wins).
STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        DifyStrategy(),
        WindowStrategy(),
        BufferStrategy(),
        OffStrategy(),
        SummaryBufferStrategy(),
        CompactionStrategy(),
        TrimStrategy(),
        DifyAgentStrategy(),
        LlamaIndexBufferStrategy(),
        LlamaIndexMemoryStrategy(),
        OpenAIAgentsStrategy(),
        LangGraphTrimStrategy(),
        LangmemSummaryStrategy(),
        N8nWindowStrategy(),
        N8nAgentStrategy(),
        FlowiseWindowStrategy(),
        FlowiseAgentflowStrategy(),
    )
}

#: The memory a config runs unless it names another: Dify's LLM-node memory.
DEFAULT_STRATEGY = DifyStrategy.name
#: Memory switched off: nothing from earlier turns is sent.
OFF = OffStrategy.name


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown memory strategy {name!r}; expected one of {', '.join(STRATEGIES)}") from None


def strategy_of(config: Any) -> Strategy:
    """The memory system of a config, or of a stored one (a mapping: a ledger's or a node run's
    ``config``; without a ``strategy`` it is the default one)."""
    if isinstance(config, Mapping):
        return get_strategy(config.get("strategy") or DEFAULT_STRATEGY)
    return get_strategy(config.strategy)


def remembers(config: Any) -> bool:
    """Whether a config, or a stored one, sends any history: a stored config that is missing (a run that
    recorded none) does not."""
    if isinstance(config, Mapping) and not config.get("strategy"):
        return False
    return config is not None and strategy_of(config).remembers


__all__, __getattr__ = public_api(
    __name__,
    {
        "base": ("Budget", "ChainView", "PathView", "Plan", "Strategy"),
        "compaction": (
            "COMPACTION_PROFILES",
            "DEFAULT_KEEP_MESSAGES",
            "DEFAULT_KEEP_TOOL_RESULTS",
            "DEFAULT_TRIGGER",
            "SHIPPED",
            "SUMMARIES_META",
            "ShippedRunHook",
            "recorded_summaries",
        ),
        "dify": (
            "CODE",
            "DEFAULT_FIDELITY",
            "DOCUMENTED",
            "EMPTY_LIST_TOKENS",
            "FIDELITIES",
            "FIDELITY_LABELS",
            "row_limit",
            "window_note",
        ),
        "dify_agent": ("AGENT_STRATEGIES", "FUNCTION_CALL", "REACT", "agent_app", "left_out"),
        "settings": ("COMMON", "Setting", "Widget"),
        "trim": ("MESSAGE_TYPES", "TRIM_COUNTERS", "TRIM_STRATEGIES"),
        "window": ("DEFAULT_WINDOW", "HISTORY_SET", "MAX_WINDOW"),
    },
    here=("DEFAULT_STRATEGY", "OFF", "STRATEGIES", "get_strategy", "remembers", "strategy_of"),
)
