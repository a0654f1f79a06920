"""LlamaIndex's ``Memory`` as an agent workflow uses it (llama-index-core 0.14.25,
``llama_index/core/memory/memory.py``; the workflow in ``agent/workflow/base_agent.py``), without
memory blocks.

Reading sends every *active* message; the limit acts when messages are written. The workflow writes
twice a turn: the question before it reads (``aput``), and the turn's steps — tool-call replies, tool
results, the answer — at its end (``aput_messages``). After each write, ``_manage_queue`` runs: while the
active messages count more than ``token_limit × chat_history_token_ratio``, it archives ("flushes") the
oldest messages, at least ``token_flush_size`` tokens at a time, then more until a user message leads,
never the last message; when that would leave only a message that is not a user's, the newest whole
turn among the flushed (its user message and what followed) is put back. Archived messages are never
sent again; with a memory block they would feed it, which this system does not model.

It counts each message's text blocks with LlamaIndex's global tokenizer (``cl100k_base``), not its
tool-call blocks, plus ``str(additional_kwargs)`` — a tool result's ``{'tool_call_id': …}`` adds about
14 tokens. The system prompt is put before what is read and never counted. ``from_defaults`` makes a
``token_flush_size`` over ``token_limit`` 70% of it, and the class makes one below 1 a tenth of it.

Worked example (``token_limit=100``, ratio 0.5, flush 5: the history may hold 50 tokens): a first turn
with two tool rounds ends with 6 messages of 71 tokens — over 50, but flushing would leave only its
answer, so the whole turn is put back. The next question's write makes 80: the flush takes the first
question (8 tokens, a chunk of 5 or more), then the rest of its turn until the new question leads — the
second turn sends its question alone.

Ledger: a message archived is ``flushed``; the rest are sent. ``tests/memory/test_platform_memories.py``
checks every turn against what the real package sent (``tests/reference/python/llamaindex_driver.py``).
"""

from __future__ import annotations

from typing import Callable

from core.model.conversation import REASONING, Message
from core.model.ledger import FLUSHED, KEPT
from core.words import plural

from .base import Budget, Strategy, SuffixPlan, along_view, message_at
from .llamaindex_buffer import llamaindex_tokens
from .settings import FLOAT, NUMBER, SLIDER, Setting, Widget

#: ``Memory``'s defaults (``DEFAULT_TOKEN_LIMIT``; the ratio; ``DEFAULT_FLUSH_SIZE``, a tenth of the limit).
DEFAULT_TOKEN_LIMIT = 30_000
DEFAULT_RATIO = 0.7
DEFAULT_FLUSH_SIZE = 3_000
#: A ``token_flush_size`` over the limit becomes this share of it (``from_defaults``), one below 1 this one.
FLUSH_OVER_LIMIT = 0.7
FLUSH_BELOW_ONE = 0.1


def memory_tokens(message: Message) -> int:
    """One message as ``Memory._estimate_token_count`` counts it: its text (not its tool calls, nor
    reasoning) and, for a tool result, ``str({'tool_call_id': id})`` — the workflow's ``additional_kwargs``."""
    n = 0 if message.kind == REASONING else llamaindex_tokens(message.content)
    if message.role == "tool" and message.tool_call_id is not None:
        n += llamaindex_tokens(str({"tool_call_id": message.tool_call_id}))
    return n


def flush_size(token_limit: int, token_flush_size: int) -> int:
    """``token_flush_size`` as ``Memory.from_defaults`` and the class leave it."""
    if token_flush_size > token_limit:
        token_flush_size = int(token_limit * FLUSH_OVER_LIMIT)
    if token_flush_size < 1:
        token_flush_size = int(token_limit * FLUSH_BELOW_ONE)
    return token_flush_size


def manage_queue(
    lo: int, hi: int, tokens: Callable[[int, int], int], is_user: Callable[[int], bool], limit: float, size: int
) -> int:
    """``Memory._manage_queue`` over the active messages ``lo..hi-1`` (oldest first): where the active
    messages start once it is done, everything before archived. ``tokens(a, b)`` counts messages
    ``a..b-1``; ``limit`` is ``token_limit × chat_history_token_ratio``; ``size`` the flush size."""
    while tokens(lo, hi) > limit and hi - lo > 1:
        start = lo
        flushed = 0
        while flushed < size and hi - lo > 1:  # a chunk of the oldest, never the last message
            flushed += tokens(lo, lo + 1)
            lo += 1
        while not is_user(lo) and hi - lo > 1:  # then until a user message leads
            lo += 1
        if hi - lo == 1 and not is_user(lo) and lo > start:
            # Only a message that is not a user's would be left: it goes too, and the newest whole turn
            # among the flushed comes back (none: nothing is left).
            lo += 1
            lo = next((k for k in range(lo - 1, start - 1, -1) if is_user(k)), lo)
        if lo == start:  # nothing flushed: nothing more can be
            break
    return lo


class MemoryPlan(SuffixPlan):
    """The active messages are sent; the state carried to the next turn is where they start."""

    def reason(self, i, message):
        return FLUSHED if i < self.first else KEPT


def _settings_words(config) -> tuple[int, int]:
    """The chat history's limit (``token_limit × chat_history_token_ratio``, whole tokens) and the flush size
    a stored config (a mapping, which holds every setting of the system) runs with."""
    limit = config["token_limit"]
    return int(limit * config["chat_history_token_ratio"]), flush_size(limit, config["token_flush_size"])


class LlamaIndexMemoryStrategy(Strategy):
    name = "llamaindex_memory"
    help = "LlamaIndex's Memory in an agent workflow: the oldest messages flushed in chunks when a write goes over"
    settings = (
        Setting(
            "token_limit",
            DEFAULT_TOKEN_LIMIT,
            "Memory's token_limit; the chat history may hold token_limit × "
            "chat_history_token_ratio tokens (LlamaIndex's count: text, not tool calls)",
            minimum=1,
            words="token limit",
            widget=Widget(NUMBER, "Token limit", minimum=1, maximum=10_000_000, step=1000),
        ),
        Setting(
            "chat_history_token_ratio",
            DEFAULT_RATIO,
            "the share of token_limit the chat history may hold",
            kind=FLOAT,
            minimum=0.0,
            maximum=1.0,
            words="chat history token ratio",
            widget=Widget(SLIDER, "Chat history ratio", minimum=0.0, maximum=1.0, step=0.05),
        ),
        Setting(
            "token_flush_size",
            DEFAULT_FLUSH_SIZE,
            "the least a flush archives at a time, in tokens (over token_limit: 70% of it; below 1: 10% of it)",
            minimum=0,
            words="token flush size",
            widget=Widget(NUMBER, "Flush size (tokens)", minimum=0, maximum=10_000_000, step=100),
        ),
    )
    lenses = (("LlamaIndex Memory", {}),)
    uses_granularity = False
    plans = True
    drops_empty = False

    def label(self, config):
        s = config.settings
        return (
            f"LlamaIndex Memory {s.token_limit:,} × {s.chat_history_token_ratio:g}, flush "
            f"{flush_size(s.token_limit, s.token_flush_size):,}"
        )

    def explain(self, entry, config):
        if entry.reason != FLUSHED:
            return None
        limit, size = _settings_words(config)
        return (
            f"flushed when a message was written: the chat history was over token_limit × "
            f"chat_history_token_ratio ({limit:,} tokens of text), so its oldest messages were archived, at "
            f"least {plural(size, 'token')} at a time, until a user message led; never sent again"
        )

    def pruning_words(self, config):
        return (
            "LlamaIndex's Memory archives the oldest messages, a chunk at a time, whenever a write leaves its "
            "chat history over token_limit × chat_history_token_ratio; they are never sent again and nothing "
            "in the run says so. Raise token_limit or the ratio.",
            True,
        )

    def finding_kinds(self, config):
        return ("platform_rule",)

    def turn_surprise(self, replay, ledger):
        # Flushed messages never come back, even when a later, shorter history would hold them.
        flushed = sum(1 for e in ledger.entries if e.reason == FLUSHED)
        if not flushed:
            return None
        limit, size = _settings_words(ledger.config)
        return (
            f"{plural(flushed, 'earlier message')} flushed out of the chat history — archived at least "
            f"{plural(size, 'token')} at a time once it passed {limit:,} tokens — and never sent again"
        )

    def plan(self, view, current, replay):
        own = replay.config.settings
        limit = own.token_limit * own.chat_history_token_ratio
        size = flush_size(own.token_limit, own.token_flush_size)
        sums = along_view(view, replay, self.name, (0,), lambda s, m: s.append(s[-1] + memory_tokens(m)))
        n = view.length
        query = replay.conversation.turns[current].query_message
        question = 0 if query is None else memory_tokens(query)

        def tokens(a: int, b: int) -> int:
            return sums[min(b, n)] - sums[a] + (question if b > n else 0)

        def is_user(k: int) -> bool:
            return k == n or message_at(view, replay, k).role == "user"

        active = (view.states[-1] or 0) if view.states else 0
        if view.turn_count:  # the previous turn's steps were written at its end
            active = manage_queue(active, n, tokens, is_user, limit, size)
        if query is not None:  # the question is written before the memory is read
            active = manage_queue(active, n + 1, tokens, is_user, limit, size)
        note = (
            f"Memory chat history {int(limit):,} tokens (token_limit {own.token_limit:,} × "
            f"{own.chat_history_token_ratio:g}, LlamaIndex's count), flushed {size:,} at a time"
        )
        return MemoryPlan(
            Budget(int(limit), note, replay.config.context_size or replay.facts.context_size),
            active,
            active,
            view,
            replay,
        )
