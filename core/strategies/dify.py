"""Dify's TokenBufferMemory as the Chatflow LLM node uses it (spec/dify-memory.md §1.2–§1.6, §2.3).

The window counts turns (query + answer records) of the current thread; a disabled window is
Dify's 500-row cap. The history budget is ``rest = max(context_size − max_tokens −
prompt_tokens, 0)`` (2,000 when the context size is unknown); while the kept history is over
``rest`` and more than one message is left, the single oldest message is dropped — which can
leave an assistant message first, as Dify does.

``fidelity="code"`` reproduces Dify 1.x code instead: the window takes the newest N message
records of the *whole conversation* before the thread is extracted, and the current turn's own
placeholder row is one of them (so N yields at most N−1 earlier turns); the budget does not
subtract the prompt; and pruning happens only with plugin token counting switched on, which
Dify ships off (``PLUGIN_BASED_TOKEN_COUNTING_ENABLED=false``).
"""

from __future__ import annotations

from bisect import bisect_left

from ..tokens import DEFAULT_HISTORY_BUDGET
from .base import Budget, Strategy

ROW_CAP = 500


class DifyStrategy(Strategy):
    name = "dify"

    def window(self, view, current, config):
        size = config.window if config.window and config.window > 0 else ROW_CAP
        size = min(size, ROW_CAP)
        if config.fidelity == "code":
            # Rows newest-first, limited in SQL before the thread walk; the current turn's
            # placeholder is the newest row and takes one slot.
            oldest_row = current - size + 1
            first = bisect_left(view.positions, oldest_row)
        else:
            first = max(0, len(view.positions) - size)
        return 0, view.turn_start(first)

    def budget_limit(self, config, facts, fixed_prompt_tokens):
        context = config.context_size or facts.context_size
        if config.fidelity == "code":
            if not config.plugin_token_counting:
                return None
            return max(context - config.max_tokens, 0) if context else DEFAULT_HISTORY_BUDGET
        if not context:
            return DEFAULT_HISTORY_BUDGET
        return max(context - config.max_tokens - fixed_prompt_tokens, 0)

    def budget(self, config, facts, fixed_prompt_tokens):
        context = config.context_size or facts.context_size
        code = config.fidelity == "code"
        if code and not config.plugin_token_counting:
            return Budget(None, "Dify code: plugin token counting is off, so history is never pruned by tokens",
                          context)
        if not context:
            return Budget(DEFAULT_HISTORY_BUDGET,
                          f"context size of {config.model} unknown: Dify's default budget of "
                          f"{DEFAULT_HISTORY_BUDGET:,} tokens", None)
        if code:
            rest = max(context - config.max_tokens, 0)
            return Budget(rest, f"{context:,} context − {config.max_tokens:,} max_tokens (Dify code: prompt not subtracted)",
                          context)
        rest = max(context - config.max_tokens - fixed_prompt_tokens, 0)
        return Budget(rest, f"{context:,} context − {config.max_tokens:,} max_tokens − {fixed_prompt_tokens:,} prompt",
                      context)
