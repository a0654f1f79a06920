"""Memory: a conversation and a ``MemoryConfig`` (``config``) in, one ``Ledger`` per turn out
(``replay``: each turn's ``decision``, the ledger's ``entries``; ``turn_memory`` for a conversation that
grows a turn at a time); the memory systems in ``strategies/`` (their reasons in words: ``words``), the
summarisers that fold history (``summarize``), and memories that follow a user across conversations
(``long_term``).

Where each rule lives:

* A memory system: its settings (names, kinds, defaults, ranges, help, command-line flag, editor widget), its
  label, its words, its window rule, and what other packages ask of it instead of its name (`remembers`,
  `finding_kinds`, `pruning_words`, `describe`, `claims`, `profiles`, `later_turns_take_rows`,
  `compacts_per_request`, `lenses`): its module in `core/memory/strategies/` (a `Strategy` subclass; the
  interface in `base.py`), registered by one line of `STRATEGIES` in `core/memory/strategies/__init__.py`; the
  settings' vocabulary (`Setting`, `Widget`, and `COMMON`: what every config has) in
  `core/memory/strategies/settings.py`.
* A memory config: the system's name, the common settings, the node-shape flags a flow sets, and the system's
  own settings (`config.settings`); its stored form, one flat mapping, read back with the earlier form that
  held every system's settings (recorded node runs, config sets, report bundles, ledgers): `MemoryConfig` in
  `core/memory/config.py` (`to_dict`, `from_dict`, `with_`, `validate`).
* Dify TokenBufferMemory (rows, window, placeholder row, pruning): `core/memory/strategies/dify.py`.
* n8n's and Flowise's memory as their JavaScript runs it: what a turn stores (n8n: a call per message, the
  last tool round, nothing for an empty reply; Flowise: a question row and an answer row), the window
  (`slice(-2k)`, `parseInt`), n8n's agent clean-up and `maxTokensFromMemory` trim, Agentflow's window and
  summary buffer; what is sent in another shape listed in a message's place (origin `stored`, several per
  message, with their tool calls): `core/memory/strategies/n8n_window.py`, `n8n_agent.py`,
  `flowise_window.py`, `flowise_agentflow.py` (all messages counted along the thread: `EveryRowPlan`), over
  `stored.py` (`Item`, `StoredPlan`, `window_start`); the
  stand-ins sent by `history_of` (`core/memory/replay.py`) and listed by `Ledger.rows`/`Ledger.stand_ins`
  (`core/model/ledger.py`); LangChain JS's token count (GPT-2's vocabulary, bundled with its licence, or
  characters / 4) in `core/model/js_tokens.py`.
* Whether an empty message in the window is left out (`empty`: a chat prompt's filter), sent as a text line
  (`MemoryConfig.history_as_text`: completion models, the Question Classifier, the Parameter Extractor) or
  sent as an empty message (`MemoryConfig.sends_empty`, `PromptFrame.keep_empty`: Dify's Agent node):
  `Replay.sends_empty` and `Replay.drops_empty` in `core/memory/replay.py` (the per-turn flags, the ledger,
  the heatmap's walk and the findings read them); `node_memory_config` sets the flag per node.
* Window Memory node (store, window, overwrite inputs): `core/memory/strategies/window.py`; the node's
  settings, input parsing and outputs in `core/flow/nodes/window_memory.py`, whose `window_call` replays the
  strategy.
* Summary buffer, trim, compaction (ours and Dify 1.17 as shipped): `core/memory/strategies/`.
* LlamaIndex's `ChatMemoryBuffer` as an agent workflow reads it (the question put in first, the contents
  joined and counted with `cl100k_base`, the front rule, the question sent alone when it is over the limit)
  and its `Memory` (flushed when messages are written: `manage_queue`; the `flushed` reason):
  `core/memory/strategies/llamaindex_buffer.py` (`buffer_get`; the joined count by units, `Unit`),
  `core/memory/strategies/llamaindex_memory.py`; LlamaIndex's tokenizer (special tokens allowed)
  `count_allowing_special` in `core/model/tokens.py`; the running values a planning system carries along a
  thread, kept on the replay and only extended, and a plan that sends the thread's newest messages from one
  index: `along_view` and `SuffixPlan` in `core/memory/strategies/base.py`.
* An OpenAI Agents SDK session (`limit` counting items, the orphan pass), LangGraph's `pre_model_hook` trim
  with its empty-trim fallback, langmem's summary before every model call:
  `core/memory/strategies/openai_agents.py` (`limit_start`, `orphan_pass`, `turn_note`; with no limit the
  pass carried along the thread, `_Pass`),
  `core/memory/strategies/langgraph_trim.py` (`hook_trim`, over `select` in `trim.py`),
  `core/memory/strategies/langmem_summary.py` (`fold_until`, `with_results`, `SummaryCall`); LangChain's
  approximate count in `langchain_counts` (`trim.py`); checked against the real packages by
  `tests/memory/test_platform_memories.py`.
* A Dify Agent app's history (`agent-chat`: the whole thread with its agent thoughts, a thoughtless turn's
  empty answer left out, whole rounds — a user message and what follows — cut newest first with the system
  message in the count; a ReAct runner: one scratchpad text per round) and how a log is known to be one:
  `core/memory/strategies/dify_agent.py` (`left_out`, `AgentView`, `agent_app`; a ReAct agent's scratchpad per
  turn in `react_turn`, sent by `history_of` in `core/memory/replay.py` as a plain assistant text); a log's
  thoughts read as the runner replays them in `core/io/readers/dify_messages.py` (`_thought_messages`;
  `AGENT_THOUGHTS` and `SHOWN_ANSWER` in `core/model/conversation.py`, kept by the store); the thought of a
  turn MemLens runs on an Agent app in `agent_thoughts` (`core/flow/runtime.py`, stored by
  `TurnRecord.to_turn`); the memory a conversation without a flow opens and replays under (a Dify Agent app's
  log: its runner; a source that sends the whole thread, `WHOLE_THREAD_SOURCES` in
  `core/model/conversation.py`, the format kept by the store in `load_conversation`: `buffer` with every tool
  step; else Dify's LLM node), counted for the model the source names (`SOURCE_MODEL` and `source_model` in
  `core/model/conversation.py`, kept by the store), in `fitting_config` (`core/analysis/debug_view.py`: the
  first system in the registry whose `Strategy.claims` takes the conversation), used by `default_lens` and the
  CLI's `config_from_args`.
* A replay's summaries of a conversation that never branched, decided for every turn at once over columns of
  its messages (running sums, each strategy's window for the whole thread, the budget's cut by bisection) —
  the same decisions as the turn-by-turn walk, which a branched conversation takes: `Replay._chain_summaries`
  in `core/memory/replay.py`; each window rule written once, `Strategy.window`, and read two ways: over a
  `PathView` for one turn and over a `ChainView` (columns) for a whole chain
  (`core/memory/strategies/base.py`); the budget's cut once, `budget_cut` there, for the walk, the fast walk
  and the chain; `tests/memory/test_chain.py` draws every registered window rule's settings from their
  declarations.
* How many of a thread's newest turns a memory's decision reads (its reach: Dify's window), so one turn's
  ledger or a page of what-if badges costs that, not the conversation: `Strategy.reach` in
  `core/memory/strategies/`, used by `Replay.near_view` in `core/memory/replay.py`.
* Long-term memory (Mem0 v1 style): `core/memory/long_term.py`, `core/store/memories.py`; its nodes' settings
  in `core/flow/nodes/long_term.py`.
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "config": ("MemoryConfig", "config_of"),
        "decision": ("Decision",),
        "entries": ("expand_runs", "history_of"),
        "errors": ("ConfigError", "LongTermMemoryError", "MemoryNotFound", "TrimError"),
        "long_term": (
            "DEFAULT_TOP_K",
            "FactExtractor",
            "LLMExtractor",
            "LongTermMemory",
            "MemoryEvent",
            "MemoryItem",
            "Retriever",
            "SHARED",
            "Source",
            "UserSummary",
            "app_namespace",
            "memories_text",
            "recall_preview",
        ),
        "replay": ("Replay", "turn_number", "turn_numbers"),
        "strategies.base": ("PathView", "Strategy"),
        "strategies.dify": ("DEFAULT_FIDELITY",),
        "strategies.settings": (
            "CHANGE",
            "CHOICE",
            "COMMON",
            "LAST_TURN",
            "NUMBER",
            "SLIDER",
            "SWITCHED",
            "Setting",
            "TEXT_INPUT",
            "TOGGLE",
            "ZERO_UNSET",
        ),
        "summarize": ("ModelSectionSummarizer",),
        "turn_memory": ("TurnMemory",),
        "words": ("explain",),
    },
)
