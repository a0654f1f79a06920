"""Flowise Agentflow v2's Agent node memory: all messages, a window of N exchanges, or a summary buffer.

The rules, read from flowise-components 3.1.4 (``nodes/agentflow/Agent/Agent.ts``, ``handleMemory`` and
``handleSummaryBuffer``) and checked against the reference driver on generated conversations
(``tests/reference/js/flowise/driver.js``). The past is the chat message rows (a question and an answer
per turn, an empty answer an empty message; tool steps are not rows, ``omitted``), and the current
question is appended to it before the memory type applies:

* ``allMessages``: every row;
* ``windowSize`` N: the last ``2N`` messages *with the current question counted*, so the window starts on
  an answer whose question is gone (``N = 0``: everything);
* ``conversationSummary``: one summary of every message, the current question included, sent as an
  ``assistant`` message, then the question again (a summary request every turn);
* ``conversationSummaryBuffer``: the ``role: content`` lines of every message, joined by line breaks, are
  counted with the chat model's counter (``counter``: GPT-2's vocabulary, or characters / 4 when
  LangChain could not load it; :mod:`core.model.js_tokens`). Over ``max_token_limit`` (0 or unset:
  2,000), the oldest messages are folded, one at a time, until the rest fit, into a summary sent first
  (a ``system`` message; ``user`` when the node has a system message). It is worked out afresh every
  turn — one summary request per turn once over the limit — and with a small limit it folds the current
  question too, which is then not sent.
"""

from __future__ import annotations

from core.model.conversation import Message
from core.model.js_tokens import CHARS4, GPT2, JS_COUNTERS, count
from core.model.ledger import KEPT, OMITTED, OUTSIDE_WINDOW, SUMMARIZED, SUMMARY, SyntheticMessage, turn_ranges

from .base import Budget, Plan, along_view, turn_at
from .flowise_window import rows_layout
from .n8n_agent import COUNTERS
from .settings import CHOICE, NUMBER, TEXT, TEXT_INPUT, ZERO_UNSET, Setting, Widget
from .stored import StoredPlan, StoredStrategy, sliced_items, stored_items

ALL, WINDOW = "allMessages", "windowSize"
SUMMARY_ONLY, SUMMARY_BUFFER = "conversationSummary", "conversationSummaryBuffer"
MEMORY_TYPES = {
    ALL: "All messages",
    WINDOW: "Window size",
    SUMMARY_ONLY: "Conversation summary",
    SUMMARY_BUFFER: "Conversation summary buffer",
}
#: The summary buffer's limit when the node leaves it empty or 0.
DEFAULT_LIMIT = 2000
MAX_WINDOW_SIZE = 100_000
MAX_LIMIT = 10_000_000
ROLES = {"user": "user", "assistant": "assistant"}


def lines(messages) -> str:
    """The summary buffer's text to count: a ``role: content`` line per message."""
    return "\n".join(f"{role}: {content}" for role, content in messages)


def folded_count(messages: list[tuple[str, str]], limit: int, counter: str) -> int:
    """How many of the oldest ``messages`` the summary buffer folds: none when their lines fit in ``limit``
    tokens, else one at a time until the rest fit or none is left."""
    folded = 0
    while folded < len(messages) and count(lines(messages[folded:]), counter) > limit:
        folded += 1
    return folded


class SummaryPlan(StoredPlan):
    """The summary buffer's plan: the rows after the folded ones, and the summary first."""

    def __init__(self, budget, sent, reasons, view, replay, layout, summary: SyntheticMessage | None):
        super().__init__(budget, sent, reasons, view, replay, layout)
        self.summary = summary
        if summary is not None:
            self.history_tokens += summary.tokens

    def synthetic(self, view, replay):
        return ([self.summary] if self.summary is not None else []) + super().synthetic(view, replay)


def _is_row(turns, position: int, index: int) -> bool:
    """Whether a turn's message is one of its chat message rows: its question or its answer."""
    return index in (turns[position].query_index, turns[position].answer_index)


class EveryRowPlan(Plan):
    """All messages: every earlier row is sent as it is, every other message (a tool step) omitted. The rows
    and their tokens are counted along the thread (:func:`~core.memory.strategies.base.along_view`), so a
    turn costs its own messages, not the conversation's; its ledger is the one of every row sent as a
    stored item (:class:`~core.memory.strategies.stored.StoredPlan`)."""

    def __init__(self, budget: Budget, view, replay):
        turns = replay.conversation.turns

        def step(values: list, message) -> None:
            i, (count, tokens, first) = len(values) - 1, values[-1]
            if _is_row(turns, view.seq_pos[i], view.seq_msg[i]):
                count, tokens = count + 1, tokens + view.prefix[i + 1] - view.prefix[i]
                first = i if first is None else first
            values.append((count, tokens, first))

        count, tokens, first = along_view(view, replay, "flowise_rows", [(0, 0, None)], step)[view.length]
        super().__init__(budget, None, count, tokens, turn_at(view, replay, first))
        self.turns, self.view = turns, view

    def reason(self, i, message):
        # (read before the view moves on: a ledger is built right after its plan)
        return KEPT if _is_row(self.turns, self.view.seq_pos[i], self.view.seq_msg[i]) else OMITTED


class FlowiseAgentflowStrategy(StoredStrategy):
    name = "flowise_agentflow"
    help = "Flowise Agentflow v2's Agent node memory: all messages, the last N exchanges, or a summary buffer"
    settings = (
        Setting(
            "memory_type",
            ALL,
            "the Agent node's Memory Type: allMessages, windowSize, conversationSummary or conversationSummaryBuffer",
            kind=TEXT,
            choices=tuple(MEMORY_TYPES),
            labels=MEMORY_TYPES,
            words="memory type",
            widget=Widget(CHOICE, "Memory type", key="agentflow_memory_type", select=True),
        ),
        Setting(
            "window_size",
            20,
            "Window Size N: the last 2N messages, the current question counted (0: all)",
            minimum=0,
            maximum=MAX_WINDOW_SIZE,
            words="window size",
            widget=Widget(
                NUMBER, "Window size (N)", key="agentflow_window_size", maximum=1000, shown_if=("memory_type", WINDOW)
            ),
        ),
        Setting(
            "max_token_limit",
            None,
            f"the summary buffer's Max Token Limit (unset or 0: {DEFAULT_LIMIT:,})",
            optional=True,
            minimum=0,
            maximum=MAX_LIMIT,
            words="max token limit",
            widget=Widget(
                ZERO_UNSET,
                "Max token limit (0 = 2,000)",
                key="agentflow_limit",
                maximum=1_000_000,
                step=100,
                shown_if=("memory_type", SUMMARY_BUFFER),
            ),
        ),
        Setting(
            "counter",
            GPT2,
            "how the node's chat model counts: gpt2 (GPT-2's vocabulary, which LangChain "
            "downloads) or chars4 (characters / 4, when the download fails)",
            kind=TEXT,
            choices=JS_COUNTERS,
            labels=COUNTERS,
            widget=Widget(
                CHOICE, "Token counter", key="agentflow_counter", select=True, shown_if=("memory_type", SUMMARY_BUFFER)
            ),
        ),
        Setting(
            "system_message",
            "",
            "the node's own system message (with one, the summary is a user message)",
            kind=TEXT,
            words="system message",
            widget=Widget(
                TEXT_INPUT, "Node system message", key="agentflow_system", shown_if=("memory_type", SUMMARY_BUFFER)
            ),
        ),
    )
    lenses = (("Flowise Agentflow, all messages", {}),)

    def label(self, config):
        s = config.settings
        if s.memory_type == WINDOW:
            return f"agentflow window {s.window_size}"
        if s.memory_type == SUMMARY_ONLY:
            return "agentflow summary"
        if s.memory_type == SUMMARY_BUFFER:
            return f"agentflow summary buffer {s.max_token_limit or DEFAULT_LIMIT:,} tok" + (
                " (chars/4)" if s.counter == CHARS4 else ""
            )
        return "agentflow all messages"

    def finding_kinds(self, config):
        return ("answer_without_question", "question_folded")

    def explain(self, entry, config):
        if entry.reason == OMITTED:
            return "not a chat message row: Flowise stores a turn's question and answer only, not its tool steps"
        if entry.reason == OUTSIDE_WINDOW:
            n = config.get("window_size", 20)
            return (
                f"outside Window Size {n}: the last {2 * n} messages, the current question counted, so the window "
                f"may start on an answer whose question is gone"
            )
        if entry.reason == SUMMARIZED:
            limit = config.get("max_token_limit") or DEFAULT_LIMIT
            return (
                f"folded into the summary: the messages' role: content lines were over {limit:,} tokens (worked "
                f"out again every turn)"
            )
        return None

    def pruning_words(self, config):
        return (
            "Flowise's summary buffer folds the oldest messages into a new summary every turn once they are over "
            "its limit, with one summary request per turn.",
            False,
        )

    def plan(self, view, current, replay):
        s = replay.config.settings
        layout = rows_layout(replay)
        context = replay.config.context_size or replay.facts.context_size
        if s.memory_type == ALL or (s.memory_type == WINDOW and not s.window_size):
            return EveryRowPlan(Budget(None, "", context), view, replay)
        if s.memory_type == WINDOW:
            # slice(-2N) of the rows and the current question, which is the last of them: 2N - 1 rows (N = 0: all).
            sent = sliced_items(view, layout, 1 - 2 * s.window_size)
            return StoredPlan(Budget(None, "", context), sent, {}, view, replay, layout)
        items = stored_items(view, layout)
        if s.memory_type == SUMMARY_ONLY:
            return self._summary_only(view, current, replay, items, context, layout)
        # The summary buffer (the memory types are a choice of four).
        limit = s.max_token_limit or DEFAULT_LIMIT
        turn = replay.conversation.turns[current]
        question = turn.messages[turn.query_index].content if turn.query_index is not None else None
        messages = [(ROLES.get(item.role, "assistant"), item.content) for item in items]
        if question is not None:
            messages.append(("user", question))
        folded = folded_count(messages, limit, s.counter)
        summary = None
        note = f"the role: content lines of every message counted against {limit:,} tokens"
        if folded:
            number = replay.numbers[current]
            covered = [replay.numbers[item.source[0]] for item in items[:folded]]
            if folded > len(items):
                covered.append(number)  # the current question is folded too, and not sent
            sources = [m for _, m in messages[:folded]]
            text = replay.summarizer.summarize([Message(role, content, "", "") for role, content in messages[:folded]])
            content = f"Previous conversation summary: {text}"
            role = "user" if s.system_message else "system"
            summary = SyntheticMessage(
                role=role,
                content=content,
                tokens=replay.counter.chat(role, content),
                origin=SUMMARY,
                turn=max(covered),
                covers=tuple(sorted(set(covered))),
                ref=SUMMARY,
            )
            note += f"; {len(sources)} folded into a new summary of {turn_ranges(covered)} (one summary request)"
        reasons = {item.source: SUMMARIZED for item in items[:folded]}
        return SummaryPlan(Budget(limit, note, context), items[folded:], reasons, view, replay, layout, summary)

    def _summary_only(self, view, current, replay, items, context, layout):
        """A summary of every earlier message and the question, sent before the question itself."""
        turn = replay.conversation.turns[current]
        folded = [item.message("", "") for item in items]
        if turn.query_index is not None:
            folded.append(turn.messages[turn.query_index])
        content = replay.summarizer.summarize(folded)
        covered = sorted({replay.numbers[item.source[0]] for item in items})  # (the question is sent: not covered)
        summary = SyntheticMessage(
            role="assistant",
            content=content,
            tokens=replay.counter.chat("assistant", content),
            origin=SUMMARY,
            turn=covered[-1] if covered else replay.numbers[current],
            covers=tuple(covered),
            ref=SUMMARY,
        )
        note = "every message and the question folded into one summary each turn; the question is sent after it"
        return SummaryPlan(
            Budget(None, note, context), [], {item.source: SUMMARIZED for item in items}, view, replay, layout, summary
        )


__all__ = [
    "ALL",
    "DEFAULT_LIMIT",
    "FlowiseAgentflowStrategy",
    "MEMORY_TYPES",
    "SUMMARY_BUFFER",
    "WINDOW",
    "folded_count",
    "lines",
]
