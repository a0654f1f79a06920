"""Dify's TokenBufferMemory as the Chatflow LLM node uses it, in two profiles.

``fidelity="code"`` — **Dify 1.x as shipped, the default** — follows Dify's source, rule by rule:

* Window rows (``api/core/memory/token_buffer_memory.py``, ``get_history_prompt_messages``): the
  newest ``min(size, 500)`` message rows of the *whole conversation*, ordered by creation time,
  are fetched in SQL *before* the thread is extracted; a size that is unset, 0 or negative
  means 500 and a size over 500 is capped at 500 (:func:`row_limit`). Rows of other branches
  (regenerated siblings) therefore use up window slots.
* The placeholder row (same function, the "in-progress" skip): the current turn's own row —
  answer still empty, 0 answer tokens — is the newest of those rows and is dropped after the
  thread walk, so a window of N sends at most N−1 earlier turns and a window of 1 sends none.
* Thread extraction (``api/core/prompt/utils/extract_thread_messages.py``) is the conversation
  tree's own walk (:mod:`core.model.conversation`), shared by both profiles.
* Token counting (``api/configs/feature``: ``PLUGIN_BASED_TOKEN_COUNTING_ENABLED``, default
  false; ``api/core/plugin/impl/model_runtime.py``): with the switch off the count is 0, so the
  pruning loop never runs and history is bounded by the rows alone.
* Budget with counting on (graphon ``nodes/llm/llm_utils.py``, ``calculate_rest_token``):
  ``rest = max(context_size − max_tokens − count([]), 0)``; the node passes an empty list, whose
  count is the list's +3 reply priming (OpenAI's recipe, which Dify's OpenAI plugin counts
  with); 2,000 when the model has no context size. The Question Classifier and the Parameter
  Extractor count their own prompt instead: ``rest = max(context_size − max_tokens − count(prompt
  without history) − reserve, 0)``, the reserve 0 and 1,000 (``MemoryConfig.prompt_reserve``).
  The plugin Agent node (``api/core/workflow/nodes/agent/runtime_support.py``) passes no limit, so
  its memory keeps Dify's default of 2,000 whatever the context (``MemoryConfig.history_budget``).
  A basic Chatbot (``api/core/prompt/simple_prompt_transform.py``, ``prompt_transform.py``) counts
  the prompt built before its history — its system message, or its expert-mode messages, as a
  list — and adds the query after (``MemoryConfig.query_after_budget`` with a reserve of 0; the
  replay leaves the query out).
* Pruning (``token_buffer_memory.py``): while the count of the *whole history list* — its
  messages plus the list's +3 — is over ``rest`` and more than one message is left, drop the
  single oldest message and recount; the last message stays even if it alone is over.
  Empty answers (failed turns) are counted here and only removed afterwards by the node's
  empty-message filter (graphon ``llm_utils``, the prompt filter).

``fidelity="documented"`` follows Dify's docs: the window holds the last N turns of the thread,
and the history is always pruned to fit ``rest = max(context_size − max_tokens − prompt, 0)``
(2,000 when the context size is unknown), the prompt being the system prompt, template and query;
a node that passes its memory no limit (``history_budget``) is pruned to that fixed budget.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from core.limits import DIFY_ROW_CAP as ROW_CAP
from core.model.tokens import DEFAULT_HISTORY_BUDGET, REPLY_PRIMING

from .base import Budget, Strategy

CODE = "code"
DOCUMENTED = "documented"
#: Dify's count of an empty prompt-message list: the reply priming alone.
EMPTY_LIST_TOKENS = REPLY_PRIMING


def row_limit(window: int | None) -> int:
    """How many message rows (code) or turns (documented) a window fetches: unset, 0 or
    negative → 500; above 500 → 500."""
    if window is None or window <= 0:
        return ROW_CAP
    return min(window, ROW_CAP)


def window_note(window: int | None) -> str:
    """What a window size the user set turns into, when Dify does not take it as it is."""
    if window is not None and window > ROW_CAP:
        return f"window {window:,} runs as {ROW_CAP}: Dify caps the rows it fetches at {ROW_CAP}"
    if window is not None and window < 0:
        return f"window {window} runs as {ROW_CAP}: Dify reads a size of 0 or less as no limit ({ROW_CAP} rows)"
    return ""


def counts_tokens(config) -> bool:
    """Whether this config prunes by tokens at all."""
    return config.fidelity != CODE or config.plugin_token_counting


class DifyStrategy(Strategy):
    name = "dify"
    follows_dify_profile = True

    def window(self, view, current, config):
        size = row_limit(config.window)
        if config.fidelity == CODE:
            # Rows newest-first, limited in SQL before the thread walk; the current turn's
            # placeholder is the newest row and takes one slot.
            oldest_row = current - size + 1
            first = bisect_left(view.positions, oldest_row)
        else:
            first = max(0, len(view.positions) - size)
        return 0, view.turn_start(first)

    def chain_windows(self, starts, numbers, config):
        size = row_limit(config.window)
        k = np.arange(len(starts))
        # A turn's thread holds every position before it, so the oldest row's position is its first
        # turn (code); its last ``size`` turns (documented). Neither passes the turn itself: size ≥ 1.
        first = np.maximum(0, k - size + 1 if config.fidelity == CODE else k - size)
        return np.zeros_like(starts), starts[first]

    def reach(self, config):
        # Code: rows of positions current-size+1 .. current-1, so at most size-1 earlier turns of
        # the thread; documented: the thread's last size turns. The budget cuts inside the window.
        return row_limit(config.window)

    def budget_limit(self, config, facts, fixed_prompt_tokens):
        if not counts_tokens(config):
            return None, 0
        if config.history_budget is not None:  # the node gives its memory no limit: Dify's default
            return config.history_budget, EMPTY_LIST_TOKENS if config.fidelity == CODE else 0
        context = config.context_size or facts.context_size
        if config.fidelity == CODE:
            if not context:
                return DEFAULT_HISTORY_BUDGET, EMPTY_LIST_TOKENS
            prompt = EMPTY_LIST_TOKENS if config.prompt_reserve is None else fixed_prompt_tokens + config.prompt_reserve
            return max(context - config.max_tokens - prompt, 0), EMPTY_LIST_TOKENS
        if not context:
            return DEFAULT_HISTORY_BUDGET, 0
        return max(context - config.max_tokens - fixed_prompt_tokens, 0), 0

    def budget(self, config, facts, fixed_prompt_tokens):
        context = config.context_size or facts.context_size
        limit, overhead = self.budget_limit(config, facts, fixed_prompt_tokens)
        if limit is None:
            return Budget(None, "plugin token counting is off (Dify ships it off), so history is never pruned "
                                "by tokens", context)
        if config.history_budget is not None:
            how = f"; the history is compared with it counted as a list (+{overhead})" if overhead else ""
            return Budget(limit, f"{limit:,} tokens whatever the context: the node passes its memory no limit, so "
                                 f"Dify's default applies{how}", context, overhead)
        if not context:
            how = " counted with the history list's own +3" if overhead else ""
            return Budget(limit, f"context size of {config.model} unknown: Dify's default budget of "
                                 f"{DEFAULT_HISTORY_BUDGET:,} tokens{how}", None, overhead)
        if config.fidelity == CODE and config.prompt_reserve is None:
            return Budget(limit, f"{context:,} context − {config.max_tokens:,} max_tokens − {EMPTY_LIST_TOKENS} "
                                 f"(Dify counts an empty list: the prompt is not subtracted); the history is "
                                 f"compared with it counted as a list (+{overhead})", context, overhead)
        # A basic Chatbot's budget counts the prompt built before its history (its system message, or its
        # expert-mode messages); the query comes after.
        prompt = "prompt before the history (the query is added after it)" if config.query_after_budget else "prompt"
        if config.fidelity == CODE:
            reserved = f" − {config.prompt_reserve:,} reserved" if config.prompt_reserve else ""
            return Budget(limit, f"{context:,} context − {config.max_tokens:,} max_tokens − {fixed_prompt_tokens:,} "
                                 f"{prompt}{reserved}; the history is compared with it counted as a list "
                                 f"(+{overhead})", context, overhead)
        return Budget(limit, f"{context:,} context − {config.max_tokens:,} max_tokens − {fixed_prompt_tokens:,} "
                             f"{prompt}", context)
