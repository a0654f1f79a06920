"""LangGraph's documented ``pre_model_hook`` trim, as ``create_react_agent`` runs it before a model call.

The hook of LangGraph's documentation (langgraph 1.2, langgraph-prebuilt 1.1) returns::

    {"llm_input_messages": trim_messages(state["messages"], strategy="last", max_tokens=…,
                                         token_counter=count_tokens_approximately,
                                         start_on="human", end_on=("human", "tool"))}

and the agent sends ``llm_input_messages or messages``. So, over the thread's messages with the new
question last: the longest suffix within ``max_tokens`` (counted approximately, 4 characters to a token
rounded up plus 3 per message), then messages dropped from its front until it starts on a human
message. The question is human and last, so the trim keeps it whenever it fits alone — and when it
does not, the trim is empty and the agent sends every message instead (langgraph #8925): a question
one token too long sends the whole thread.

Decisions pinned here:

* ``max_tokens`` is ``max_history_tokens`` (unset: 2,000) and counts the question with the history;
* a leading system message is one of the thread's messages to LangGraph: the trim counts it at the front
  and ``start_on`` drops it, so it is sent only by the fallback. MemLens keeps it as the conversation's
  system prompt, outside the history;
* reasons: messages the suffix leaves out are ``over_budget``, those ``start_on`` drops ``outside_window``;
  the fallback keeps every message and says why in the turn's budget note;
* every message counts (no granularity) and an empty one is sent as it is; the hook is stateless, so
  each turn trims the whole thread again.
"""

from __future__ import annotations

from dataclasses import replace

from core.limits import history_limit
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET
from core.words import plural

from .base import Budget, Plan, Strategy, message_at, tokens_between, turn_at
from .trim import HISTORY_LIMIT, Selection, langchain_counts, message_type, select

#: LangChain's counter the documented hook passes (``count_tokens_approximately``).
APPROXIMATE = "approximate"
#: How a turn's budget note starts when the trim came back empty and the agent sent every message.
EMPTY_TRIM = "the trim kept nothing"
#: The message types the documented hook's trim starts and ends on.
START_ON, END_ON = ("human",), ("human", "tool")


def hook_trim(n: int, cost, kind, max_tokens: int) -> Selection | None:
    """The documented hook's trim of ``n`` messages (``cost(i, j)`` counts messages ``i..j-1``, ``kind(i)`` is
    a message's LangChain type): what it keeps, or ``None`` when it keeps nothing and the agent sends every
    message instead."""
    selection = select(n, cost, kind, budget=max_tokens, start_on=START_ON, end_on=END_ON)  # (strategy "last")
    lo, hi = selection.kept_range()
    return selection if hi > lo else None


class HookTrimPlan(Plan):
    def __init__(self, budget: Budget, selection: Selection | None, view, replay):
        end = view.length
        lo, hi = selection.kept_range() if selection is not None else (0, end)
        hi = min(hi, end)  # (the question, last in the trimmed list, is the turn's own)
        lo = min(lo, hi)
        super().__init__(
            budget, None, hi - lo, tokens_between(view, lo, hi), turn_at(view, replay, lo if hi > lo else None)
        )
        self.selection = selection

    def reason(self, i, message):
        return KEPT if self.selection is None else self.selection.reason(i)


class LangGraphTrimStrategy(Strategy):
    name = "langgraph_trim"
    help = "LangGraph's pre_model_hook trim (trim_messages, last, start on human); an empty trim sends everything"
    settings = (
        replace(
            HISTORY_LIMIT,
            help="the hook's trim_messages max_tokens, the question included, counted "
            "approximately (unset: 2,000; 0 is a limit too)",
        ),
    )
    lenses = ((f"LangGraph pre_model_hook trim, {history_limit(None):,} tokens", {}),)
    uses_granularity = False
    plans = True
    drops_empty = False

    def label(self, config):
        return f"langgraph trim {history_limit(config.settings.max_history_tokens):,} tok"

    def explain(self, entry, config):
        limit = history_limit(config.get("max_history_tokens"))
        if entry.reason == OVER_BUDGET:
            return (
                f"over the hook's trim_messages max_tokens ({limit:,} approximate tokens with the question): "
                f"oldest dropped"
            )
        if entry.reason == OUTSIDE_WINDOW:
            return 'dropped so the kept part starts on a human message (start_on="human")'
        return None

    def finding_kinds(self, config):
        return ("platform_rule",)

    def turn_surprise(self, replay, ledger):
        kept = len(ledger.kept)
        if not ledger.budget_note.startswith(EMPTY_TRIM) or not kept:
            return None
        limit = history_limit(ledger.config.get("max_history_tokens"))
        return (
            f"the question alone is over the trim's max_tokens ({limit:,}), so the trim came back empty and the "
            f"agent sent all {plural(kept, 'earlier message')} instead (langgraph #8925)"
        )

    def pruning_words(self, config):
        return (
            "The pre_model_hook's trim drops the oldest messages over max_tokens; when the question alone is "
            "over it, the trim is empty and the agent sends the whole thread instead.",
            False,
        )

    def plan(self, view, current, replay):
        limit = history_limit(replay.config.settings.max_history_tokens)
        per, prefix, _ = langchain_counts(view, replay, APPROXIMATE)
        end = view.length
        query = replay.conversation.turns[current].query_message
        listed = end + (query is not None)  # the thread, then the question
        question = per(query) if query is not None else 0

        def cost(i: int, j: int) -> int:
            return prefix[min(j, end)] - prefix[min(i, end)] + (question if i <= end < j else 0)

        def kind(i: int) -> str:
            return "human" if i == end else message_type(message_at(view, replay, i))

        selection = hook_trim(listed, cost, kind, limit)
        note = f"trim_messages max_tokens {limit:,} approximate tokens, the question's {question:,} included"
        if selection is None:
            note = (
                f"{EMPTY_TRIM} (max_tokens {limit:,}, the question alone {question:,} approximate "
                f"tokens): the agent sent every message instead (llm_input_messages or messages)"
            )
        budget = Budget(limit, note, replay.config.context_size or replay.facts.context_size)
        return HookTrimPlan(budget, selection, view, replay)


__all__ = ["LangGraphTrimStrategy", "hook_trim", "APPROXIMATE", "EMPTY_TRIM"]
