"""The vocabulary every other package speaks: a conversation as Dify models it (``conversation``), the
ledger and its reasons (``ledger``), where a sent prompt's messages came from (``origins``), token
counts (``tokens``) and the facts users state (``facts``).

Where each rule lives:

* Dify's thread walk (parent ids, UUID_NIL, NULL roots), turn labels ("turn 6 · 2/3"), the active thread;
  whether a conversation never branched (`Conversation.one_thread`: told from the parent ids without building
  the thread index when each turn names the one before it, else from the index): `core/model/conversation.py`.
* How a long conversation stays small in memory: a message's less common fields (name, tool calls, tool call
  id, files, usage) held in one `Message.extra`, `None` for most messages; a parent id that is the very string
  of its parent's id (`with_shared_ids`, used by the Dify readers; the OpenAI-list reader names the previous
  turn's id itself); turns without meta sharing `NO_META`: `core/model/conversation.py`.
* How a message reads on every page and in the report: its text, then `→ name(arguments)` per tool call (a
  step that only calls tools is not empty): `message_text` in `core/model/conversation.py`.
* The reasons and their words: the vocabulary and the words every memory shares: `core/model/ledger.py`
  (`REASONS`, `REASON_LABELS`, `shared_words`); a memory system's own words for a reason in its module
  (`Strategy.explain`; in a few words for markers, short tables and command-line lines,
  `Strategy.short_words`, beside `shared_short_words`); the two combined — what pages, reports, findings, the
  API and the CLI call — by `explain` and `reason_words` in `core/memory/words.py`.
* Each message's state: kept, dropped (`is_dropped`: left out by the memory) or not eligible (`NOT_ELIGIBLE`:
  memory off, out of scope, another branch); the markers, the Ledger explorer's counts, the ledger table's
  filter and the report's headings all read it; a replay's per-turn summaries (`--format summary`) count the
  same split without listing messages: `core/model/ledger.py` (`is_dropped`, `LedgerEntry.dropped`,
  `Ledger.dropped_count`, `Ledger.not_eligible_count`); the markers' three states in `marker_state`
  (`core/analysis/debug_view.py`); in counts, `not_kept` and `Replay.blocked` (`core/memory/replay.py`).
* Which other-branch entry is the same source message as one on the branch (a regenerated reply's question,
  held by each sibling turn of a tree export), and its words: `core/model/ledger_words.py` (`branch_copies`,
  `copy_words` beside `explain`), used by the ledger table (`ui/ledger_table.py`) and the CLI's table.
* A replay's per-turn summaries, held as columns of machine integers and read as `TurnSummary` tuples:
  `TurnSummaries` in `core/model/ledger.py`, filled by `Replay.summaries` (`core/memory/replay.py`).
* Token counting (OpenAI recipe, estimates, context sizes): `core/model/tokens.py` (what a message's name and
  tool calls add: `TokenCounter._extras`, read by `message` and by `message_counts` for a long batch).
* A long batch counted across the cores: this process's share, forked children for the rest sending their
  counts batch by batch into a pipe that holds them all (`PIPE_BYTES`: a child never waits to be read; a
  failed, miscounting or stuck child's share counted here), and a replay deciding its first turns meanwhile (a
  branched conversation) or laying out its columns (one that never branched): `CountCache.counted`,
  `_fork_counting` and `TokenCounter.counted_groups` in `core/model/tokens.py`; `Replay._tokens_in_order` and
  `Replay._chain_summaries` (`core/memory/chain_walk.py`, `CHAIN_OWN_PART`) and `OWN_PART` in `core/memory/replay.py`.
* The platform whose memory kept an imported conversation (n8n's chat history table or execution, Flowise's
  message export, an OpenAI Agents SDK session, a LlamaIndex chat store, a LangGraph thread's state), told
  from its source format, so it can open under that platform's memory: `SOURCE_PLATFORMS`, `source_platform`
  in `core/model/conversation.py`.
* What one memory remembers at a turn, in a sentence: `core/model/ledger_words.py` (`remembered`).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "conversation": (
            "AGENT_THOUGHTS",
            "ANSWER",
            "Conversation",
            "FileRef",
            "INTERMEDIATE",
            "Message",
            "QUERY",
            "REASONING",
            "ROLES",
            "SHOWN_ANSWER",
            "SOURCE_PLATFORMS",
            "TOOL_CALL",
            "TOOL_RESULT",
            "ToolCall",
            "Turn",
            "UUID_NIL",
            "WHOLE_THREAD_SOURCES",
            "active_thread",
            "leaves",
            "message_text",
            "source_platform",
            "turn_label",
        ),
        "facts": ("Fact", "asked_keys", "extract_facts"),
        "ledger_words": ("branch_copies", "copy_words", "shared_words", "remembered"),
        "ledger": (
            "CLEARED",
            "EMPTY",
            "FLUSHED",
            "GRANULARITY",
            "HEADER_FIELDS",
            "KEPT",
            "Ledger",
            "LedgerEntry",
            "MEMORY_OFF",
            "NOT_ELIGIBLE",
            "NOT_SENT",
            "OBSERVED",
            "OMITTED",
            "OTHER_BRANCH",
            "OUTSIDE_WINDOW",
            "OVER_BUDGET",
            "PARTIAL",
            "PAYLOAD_ONLY",
            "PLACEHOLDER",
            "REASONS",
            "REASON_LABELS",
            "REWRITTEN",
            "RunLedger",
            "SCOPE",
            "SCRATCHPAD",
            "STORED",
            "SUMMARIZED",
            "SUMMARY",
            "SyntheticMessage",
            "TRIMMED_EARLIER",
            "TurnSummaries",
            "TurnSummary",
            "WORDS_SENT",
            "format_spans",
            "is_dropped",
            "reason_runs",
        ),
        "origins": (
            "CURRENT_QUERY",
            "HISTORY",
            "ORIGINS",
            "ORIGIN_ORDER",
            "Origin",
            "origin_colour",
            "origin_label",
            "origin_rank",
        ),
        "tokens": (
            "DEFAULT_HISTORY_BUDGET",
            "DEMO_MODEL",
            "ModelFacts",
            "REPLY_PRIMING",
            "TokenCounter",
            "approximate_message_tokens",
            "chat_model_message_tokens",
            "count_allowing_special",
            "count_cache",
            "counter_for",
            "model_facts",
            "model_supports_vision",
            "remember_counts",
        ),
    },
    modules=("tokens",),
)
