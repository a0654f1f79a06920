"""Memory: a conversation and a ``MemoryConfig`` (``config``) in, one ``Ledger`` per turn out
(``replay``: each turn's ``decision``, the ledger's ``entries``; ``turn_memory`` for a conversation that
grows a turn at a time); the memory systems in ``strategies/`` (their reasons in words: ``words``), the
summarisers that fold history (``summarize``), and memories that follow a user across conversations
(``long_term``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "config": ("MemoryConfig", "config_of"),
    "decision": ("Decision",),
    "entries": ("expand_runs", "history_of"),
    "errors": ("ConfigError", "LongTermMemoryError", "MemoryNotFound", "TrimError"),
    "long_term": ("DEFAULT_TOP_K", "FactExtractor", "LLMExtractor", "LongTermMemory", "MemoryEvent", "MemoryItem", "Retriever", "SHARED", "Source", "UserSummary", "app_namespace", "memories_text", "recall_preview"),
    "replay": ("Replay", "turn_number", "turn_numbers"),
    "strategies.base": ("PathView", "Strategy"),
    "strategies.dify": ("DEFAULT_FIDELITY",),
    "strategies.settings": ("CHANGE", "CHOICE", "COMMON", "LAST_TURN", "NUMBER", "SLIDER", "SWITCHED", "Setting", "TEXT_INPUT", "TOGGLE", "ZERO_UNSET"),
    "summarize": ("ModelSectionSummarizer",),
    "turn_memory": ("TurnMemory",),
    "words": ("explain",),
})
