"""LangChain's ConversationSummaryBufferMemory (spec/memory-models.md §C.4, §C.6, §G).

After each turn is saved, while the buffered messages exceed ``max_history_tokens`` (default
2,000, LangChain's ``max_token_limit``), the oldest message is popped — one at a time, so a
user/assistant pair can be split — and everything popped after that turn is folded, in one
summariser call, into the running summary; pruning is destructive. A turn's history is
``[system summary] + buffer``, the summary first and only when something has been folded.

Decisions pinned here:

* the buffer is counted as LangChain counts it with the config's ``trim_counter`` (see
  :func:`core.memory.strategies.trim.langchain_counts`): by default the chat model's own counter, which
  adds 3 for the list — so an empty buffer counts 3 and a limit below 3 cannot be met (LangChain
  then pops from an empty buffer and fails; the config refuses it); with ``approximate`` or
  ``messages`` a limit of 0 folds everything. The summary message is not part of the buffer, so it
  comes on top of the limit;
* the summary message is ``"Summary of turns 1–4: <summary text>"`` — the header names every
  turn with a folded message (a split pair's turn is named while its answer is still
  buffered); the text comes from the replay's summariser (:mod:`core.memory.summarize`);
* granularity applies as for ``buffer``: with ``query_answer`` only queries and final answers
  are saved, as LangChain's ``save_context`` does;
* messages are sent as stored: an empty one is sent too (Dify's ``empty`` filter is Dify's).

The state carried from turn to turn along a thread is where the buffer starts plus the summary,
so each turn costs one binary search, and one summariser call only when something is folded.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace

from core.limits import history_limit
from core.model.ledger import KEPT, SUMMARIZED, SUMMARY, SyntheticMessage, format_spans
from core.model.tokens import REPLY_PRIMING

from ..errors import ConfigError
from .base import Budget, Plan, Spans, Strategy, add_turns, message_at, span_turns, tokens_between, turn_at
from .trim import HISTORY_LIMIT, TRIM_COUNTER, langchain_counts


@dataclass(frozen=True)
class SummaryState:
    """The memory after a turn: the buffer is the thread's messages from ``start`` on."""

    start: int = 0
    text: str = ""  # the summariser's text, fed back to it next time
    covers: Spans = ()  # turns with a folded message, as (first, last) spans
    content: str = ""  # the summary message as sent
    tokens: int = 0


def summary_content(covers: Spans, text: str) -> str:
    return f"Summary of {format_spans(covers)}: {text}"


class SummaryBufferPlan(Plan):
    def __init__(self, budget, state: SummaryState, view, replay):
        end = view.length
        super().__init__(
            budget,
            state,
            end - state.start,
            tokens_between(view, state.start, end) + state.tokens,
            turn_at(view, replay, state.start if end > state.start else None),
        )

    def reason(self, i, message):
        return SUMMARIZED if i < self.state.start else KEPT

    def synthetic(self, view, replay):
        s = self.state
        if not s.content:
            return []
        return [
            SyntheticMessage(
                role="system",
                content=s.content,
                tokens=s.tokens,
                origin=SUMMARY,
                turn=s.covers[-1][1],
                covers=span_turns(s.covers),
                ref="summary",
            )
        ]


class SummaryBufferStrategy(Strategy):
    name = "summary_buffer"
    help = "recent messages within a limit, older ones folded into a summary"
    settings = (
        replace(HISTORY_LIMIT, help="the buffer's limit, LangChain's max_token_limit (unset: 2,000)"),
        TRIM_COUNTER,
    )
    plans = True
    drops_empty = False

    def label(self, config):
        return f"summary buffer {history_limit(config.settings.max_history_tokens):,} tok"

    def explain(self, entry, config):
        if entry.reason == SUMMARIZED:
            return (
                f"folded into the running summary (buffer over "
                f"{history_limit(config.get('max_history_tokens')):,} tokens)"
            )
        return None

    def validate(self, config):
        limit = config.settings.max_history_tokens
        if config.settings.trim_counter == "tokens" and limit is not None and limit < REPLY_PRIMING:
            raise ConfigError(
                f"max_history_tokens {limit} cannot be met: the chat model's counter counts even an "
                f"empty buffer as {REPLY_PRIMING} tokens (LangChain fails popping from an empty "
                f"buffer); use {REPLY_PRIMING} or more, or trim_counter approximate or messages, with "
                f"which 0 summarises everything"
            )

    def plan(self, view, current, replay):
        limit = history_limit(replay.config.settings.max_history_tokens)
        budget = Budget(
            limit,
            f"buffer limit {limit:,} tokens (the summary comes on top)",
            replay.config.context_size or replay.facts.context_size,
        )
        previous: SummaryState = (view.states[-1] if view.states else None) or SummaryState()
        end = view.length
        # Pop from the front while the buffer is over the limit: the first start that fits.
        _, prefix, extra = langchain_counts(view, replay)
        start = max(previous.start, bisect_left(prefix, prefix[end] - limit + extra, previous.start, end))
        state = previous
        if start > previous.start:
            folded = [message_at(view, replay, i) for i in range(previous.start, start)]
            covers = add_turns(previous.covers, (replay.numbers[view.seq_pos[i]] for i in range(previous.start, start)))
            text = replay.summarizer.summarize(folded, previous.text)
            content = summary_content(covers, text)
            state = SummaryState(start, text, covers, content, replay.counter.chat("system", content))
        return SummaryBufferPlan(budget, state, view, replay)
