"""langmem's ``summarize_messages`` as its ``SummarizationNode`` runs it: a LangGraph agent's
``pre_model_hook``, before every model call, tool steps included (langmem 0.0.30, langgraph 1.2).

At each call the node reads the thread's messages (the question last, or the turn's latest tool
results) and its running summary, and:

1. sets a leading system message aside and takes its tokens off the budget: what may follow the summary
   is ``max_tokens - max_summary_tokens - system`` tokens;
2. counts the messages not summarised yet with ``count_tokens_approximately`` and folds them, oldest
   first, up to the first message where at least ``max_tokens_before_summary`` (unset: ``max_tokens``)
   tokens are folded *and* what is left fits the budget — which may be the question itself (the model then
   gets the system message and the summary only: langmem #111) — and, when that last one is a reply with
   tool calls, its tool results with it;
3. sends the system message, ``"Summary of the conversation so far: …"`` while a summary exists, and the
   rest. When no cut fits (the system message alone is over the budget) nothing is ever folded and every
   message is sent: ``max_tokens`` binds only through a summary.

For example, ``max_tokens=120, max_summary_tokens=40`` and no system message: 80 tokens may follow the
summary, and without a threshold of its own a summary waits until 120 tokens can be folded. After 100
tokens of history a question of 30 is the first message to bring the count to 120, so everything is
folded, the question too. With ``max_tokens_before_summary=60`` the fold stops at the first message that
reaches 60 tokens and leaves at most 80 after it.

The summary is carried turn to turn, so the decision for a turn replays the calls of the turn before it
that came after its first one (one before each later reply of its tool loop): a summary written at a
tool step is the one the next question finds.

Decisions pinned here:

* ``max_tokens`` is ``max_history_tokens`` (unset: 2,000); the system message is the conversation's
  system prompt; a turn's question is its first message;
* the summary's text comes from the replay's summariser (:mod:`core.memory.summarize`); its length does not
  change what is folded (langmem counts it only to trim what the summariser reads);
* folded messages are ``summarized``; a folded question is not sent and the summary covers its turn;
* every message counts (no granularity) and an empty one is sent as it is.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace

from core.limits import history_limit
from core.model.conversation import REASONING, Message
from core.model.ledger import KEPT, SUMMARIZED, SUMMARY
from core.model.tokens import approximate_message_tokens
from core.words import plural

from ..errors import ConfigError
from .base import Budget, Plan, Spans, Strategy, add_turns, message_at, tokens_between, turn_at
from .settings import NUMBER, SWITCHED, Setting, Widget
from .summary_buffer import SummaryBufferPlan
from .trim import HISTORY_LIMIT, langchain_counts

#: langmem's ``max_summary_tokens`` when none is given.
DEFAULT_SUMMARY_TOKENS = 256
#: What langmem's final prompt puts before the summary.
SUMMARY_PREFIX = "Summary of the conversation so far: "
#: The counter ``SummarizationNode`` counts with by default (``count_tokens_approximately``).
APPROXIMATE = "approximate"


@dataclass(frozen=True)
class RunningSummary:
    """The node's memory after a call: messages before ``start`` are summarised (``start`` is one past the
    last message folded, as langmem finds it again by that message's id); ``text`` is the summariser's."""

    start: int = 0
    text: str = ""
    covers: Spans = ()
    content: str = ""
    tokens: int = 0


def fold_until(prefix, start: int, end: int, before: int, room: int) -> int | None:
    """The last message a call folds, among messages ``start..end-1`` whose running token sums are
    ``prefix``: the first where at least ``before`` tokens are folded and the rest fits in ``room``;
    ``None`` when there is none."""
    target = max(prefix[start] + before, prefix[end] - room)
    found = bisect_left(prefix, target, start + 1, end + 1)
    return found - 1 if found <= end else None


def with_results(messages, start: int, end: int, last: int) -> list[int]:
    """The tool results langmem folds with the reply at ``last`` when it calls tools: for each of its calls in
    order, the latest result among ``messages[start:end]`` answering it."""
    calls = messages(last).tool_calls
    if not calls:
        return []
    results = {}
    for i in range(start, end):
        m = messages(i)
        if m.role == "tool":
            results[m.tool_call_id] = i
    return [results[c.id] for c in calls if c.id in results]


class SummaryCall:
    """One call of the node over the messages ``0..end-1`` (``messages(i)``, their approximate running sums
    ``prefix``, each message's turn ``turn(i)``), from the running summary ``summary``: what it folds and
    the summary after it."""

    def __init__(self, messages, prefix, turn, end: int, summary: RunningSummary, room: int, before: int, replay):
        start = summary.start
        self.kept_from = start
        self.summary = summary
        last = fold_until(prefix, start, end, before, room)
        if last is None:
            return
        folded = list(range(start, last + 1))
        results = with_results(messages, start, end, last)
        self.kept_from = last + 1 + len(results)  # langmem sends what follows the count it folded
        folded += results
        text = replay.summarizer.summarize([messages(i) for i in folded], summary.text)
        covers = add_turns(summary.covers, sorted({turn(i) for i in folded}))
        content = SUMMARY_PREFIX + text
        self.summary = RunningSummary(max(folded) + 1, text, covers, content, replay.counter.chat("system", content))


class SummaryPlan(SummaryBufferPlan):
    """The messages a call folded are ``summarized``, the rest kept; the summary is sent first, as the summary
    buffer sends its own (its :meth:`synthetic`)."""

    def __init__(self, budget: Budget, call: SummaryCall, view, replay):
        end = view.length
        lo = min(call.kept_from, end)
        summary = call.summary
        Plan.__init__(
            self,
            budget,
            summary,
            end - lo,
            tokens_between(view, lo, end) + summary.tokens,
            turn_at(view, replay, lo if end > lo else None),
        )
        self.kept_from = lo

    def reason(self, i, message):
        return SUMMARIZED if i < self.kept_from else KEPT


def _limits(config) -> tuple[int, int, int]:
    own = config.settings
    limit = history_limit(own.max_history_tokens)
    before = limit if own.max_tokens_before_summary is None else own.max_tokens_before_summary
    return limit, before, own.max_summary_tokens


class LangmemSummaryStrategy(Strategy):
    name = "langmem_summary"
    help = "langmem's SummarizationNode before every model call: the oldest messages folded into a running summary"
    settings = (
        replace(
            HISTORY_LIMIT,
            help="langmem's max_tokens: the summary, the system message and the messages after "
            "them, counted approximately (unset: 2,000)",
        ),
        Setting(
            "max_tokens_before_summary",
            None,
            "tokens the messages not yet summarised reach before a summary is written (unset: max_tokens)",
            optional=True,
            minimum=0,
            flag="--max-tokens-before-summary",
            widget=Widget(
                SWITCHED,
                "Summarise after (tokens)",
                key=("langmem_before_on", "langmem_before"),
                minimum=0,
                maximum=10_000_000,
                unset_value=history_limit(None),
                second_label="Own threshold before a summary",
            ),
        ),
        Setting(
            "max_summary_tokens",
            DEFAULT_SUMMARY_TOKENS,
            "tokens kept for the summary, below max_tokens",
            minimum=0,
            flag="--max-summary-tokens",
            widget=Widget(NUMBER, "Summary (tokens)", key="langmem_summary_tokens", maximum=10_000_000, step=16),
        ),
    )
    lenses = ((f"langmem summary, {history_limit(None):,} tokens", {}),)
    uses_granularity = False
    plans = True
    drops_empty = False

    def label(self, config):
        limit, before, summary = _limits(config)
        after = f" after {before:,}" if before != limit else ""
        return f"langmem summary {limit:,} tok{after} (summary {summary:,})"

    def explain(self, entry, config):
        if entry.reason == SUMMARIZED:
            return (
                f"folded into langmem's running summary (max_tokens {history_limit(config.get('max_history_tokens')):,}"
                f", counted approximately)"
            )
        return None

    def finding_kinds(self, config):
        return ("platform_rule",)

    def turn_surprise(self, replay, ledger):
        if any(ledger.turn in s.covers for s in ledger.synthetic if s.origin == SUMMARY):
            return (
                "the question itself was folded into the summary, so the model got the summary but not the "
                "question (langmem #111)"
            )
        return None

    def validate(self, config):
        limit, _, summary = _limits(config)
        if summary >= limit:
            raise ConfigError(
                f"max_summary_tokens {summary} must be less than max_history_tokens (langmem's "
                f"max_tokens) {limit}: langmem refuses it; lower the summary's tokens or raise the limit"
            )

    def pruning_words(self, config):
        return (
            "langmem folds the oldest messages into its summary before each model call, tool steps included; "
            "a long question can be folded itself, and a system message over the budget stops all "
            "summarising.",
            False,
        )

    def plan(self, view, current, replay):
        limit, before, summary_tokens = _limits(replay.config)
        system = (
            approximate_message_tokens(Message("system", replay.system_prompt, "", "system"))
            if replay.system_prompt
            else 0
        )
        room = limit - summary_tokens - system
        _, prefix, _ = langchain_counts(view, replay, APPROXIMATE)
        end = view.length
        previous: RunningSummary = (view.states[-1] if view.states else None) or RunningSummary()
        query = replay.conversation.turns[current].query_message

        def messages(i: int) -> Message:
            return message_at(view, replay, i) if i < end else query

        def turn(i: int) -> int:
            return replay.numbers[view.seq_pos[i]] if i < end else replay.numbers[current]

        # The calls of the turn before that came after its first: one before each later reply.
        if view.turn_count:
            replies = [
                i
                for i in range(view.turn_start(view.turn_count - 1), end)
                if messages(i).role == "assistant" and messages(i).kind != REASONING
            ]
            for at in replies[1:]:
                previous = SummaryCall(messages, prefix, turn, at, previous, room, before, replay).summary
        asked = end + (query is not None)
        sums = list(prefix[: end + 1]) + (
            [prefix[end] + approximate_message_tokens(query)] if query is not None else []
        )
        call = SummaryCall(messages, sums, turn, asked, previous, room, before, replay)
        swallowed = query is not None and call.kept_from > end
        note = f"langmem max_tokens {limit:,} approximate tokens: {room:,} after the summary ({summary_tokens:,})" + (
            f" and the system message ({system:,})" if system else ""
        )
        if room < 0:
            note += "; the system message leaves no room, so nothing is ever summarised"
        if swallowed:
            note += "; the question itself was folded into the summary: the model got the summary only"
        elif call.summary is not previous:
            note += f"; this call folded {plural(call.summary.start - previous.start, 'message')}"
        budget = Budget(limit, note, replay.config.context_size or replay.facts.context_size)
        return SummaryPlan(budget, call, view, replay)


__all__ = [
    "LangmemSummaryStrategy",
    "RunningSummary",
    "SummaryCall",
    "fold_until",
    "with_results",
    "DEFAULT_SUMMARY_TOKENS",
    "SUMMARY_PREFIX",
]
