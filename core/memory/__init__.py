"""Memory: a conversation and a ``MemoryConfig`` in, one ``Ledger`` per turn out (``replay``); the
rules in ``strategies/``, the summarisers that fold history (``summarize``), and memories that
follow a user across conversations (``long_term``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "errors": ("ConfigError", "LongTermMemoryError", "MemoryNotFound", "TrimError"),
    "long_term": ("DEFAULT_TOP_K", "FactExtractor", "LLMExtractor", "LongTermMemory", "MemoryEvent", "MemoryItem",
                  "Retriever", "SHARED", "Source", "UserSummary", "app_namespace", "memories_text", "recall_preview"),
    "replay": ("DEFAULT_FIDELITY", "Decision", "FIDELITIES", "FIDELITY_LABELS", "GRANULARITIES",
               "MemoryConfig", "PathView", "Replay", "SCOPES", "TRIM_COUNTERS", "TRIM_STRATEGIES", "TurnMemory",
               "expand_runs", "history_of", "turn_number", "turn_numbers"),
    "summarize": ("ModelSectionSummarizer",),
})
