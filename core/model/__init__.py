"""The vocabulary every other package speaks: a conversation as Dify models it (``conversation``), the
ledger and its reasons (``ledger``), where a sent prompt's messages came from (``origins``), token
counts (``tokens``) and the facts users state (``facts``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "conversation": ("AGENT_THOUGHTS", "ANSWER", "Conversation", "FileRef", "INTERMEDIATE", "Message", "QUERY", "REASONING", "ROLES", "SHOWN_ANSWER", "SOURCE_PLATFORMS", "TOOL_CALL", "TOOL_RESULT", "ToolCall", "Turn", "UUID_NIL", "WHOLE_THREAD_SOURCES", "active_thread", "leaves", "message_text", "source_platform", "turn_label"),
    "facts": ("Fact", "asked_keys", "extract_facts"),
    "ledger": ("CLEARED", "EMPTY", "FLUSHED", "GRANULARITY", "HEADER_FIELDS", "KEPT", "Ledger", "LedgerEntry", "MEMORY_OFF", "NOT_ELIGIBLE", "NOT_SENT", "OBSERVED", "OMITTED", "OTHER_BRANCH", "OUTSIDE_WINDOW", "OVER_BUDGET", "PARTIAL", "PAYLOAD_ONLY", "PLACEHOLDER", "REASONS", "REASON_LABELS", "REWRITTEN", "RunLedger", "SCOPE", "SCRATCHPAD", "STORED", "SUMMARIZED", "SUMMARY", "SyntheticMessage", "TRIMMED_EARLIER", "TurnSummaries", "TurnSummary", "WORDS_SENT", "branch_copies", "copy_words", "format_spans", "is_dropped", "reason_runs", "remembered", "shared_words"),
    "origins": ("CURRENT_QUERY", "HISTORY", "ORIGINS", "ORIGIN_ORDER", "Origin", "origin_colour", "origin_label", "origin_rank"),
    "tokens": ("DEFAULT_HISTORY_BUDGET", "DEMO_MODEL", "ModelFacts", "REPLY_PRIMING", "TokenCounter", "approximate_message_tokens", "chat_model_message_tokens", "count_allowing_special", "count_cache", "counter_for", "model_facts", "model_supports_vision", "remember_counts"),
}, modules=("tokens",))
