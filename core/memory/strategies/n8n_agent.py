"""n8n's AI Agent (Tools Agent V3) reading its memory: the window, the orphan clean-up and ``maxTokensFromMemory``.

The rules, read from n8n 2.41.1 (``utils/agent-execution/memoryManagement.js``: ``loadMemory``,
``cleanupOrphanedMessages``) and ``trimMessages`` of the ``@langchain/core`` 1.2.8 it pins, and checked
against that JavaScript on generated conversations (``tests/reference/js/``). Each model call of a turn
loads the memory node's window (:mod:`core.memory.strategies.n8n_window`: what is stored, the last 2k
messages), then:

1. **Clean-up.** From the start, tool results are dropped, and a tool call whose result does not follow;
   from the end, a tool call without its result (and results that follow no call), until neither
   changes. So a window that cut a call from its result sends neither.
2. **maxTokensFromMemory** (when set and not 0): ``trimMessages(strategy: "last", startOn: "human",
   includeSystem: true, allowPartial: true)`` with the chat model as counter. Each message counts its
   **content only** (``getNumTokens``): GPT-2's vocabulary for an OpenAI chat model, characters / 4 when
   LangChain could not load it (``counter``; :mod:`core.model.js_tokens`); a tool-call message has no
   text and counts 0. The newest messages that fit are kept; the next older one, when it has line
   breaks, may be kept in part — its last lines, tried from all but the first line down, counted with
   its lines in reverse order as LangChain does; then the kept part is cut until it starts on a
   question, so when the newest question does not fit nothing is sent. The clean-up runs again.

Messages the window or its clean-up leave out are ``outside_window``; those the trim leaves out are
``over_budget`` (a message kept in part too, what was sent of it standing in its place, origin
``partial``). A turn saves only its last tool round and nothing when its output is empty (the
``storage`` of the memory node's settings; the agent of 2.41.1 is ``four_messages``).
"""

from __future__ import annotations

from core.model.js_tokens import CHARS4, GPT2, JS_COUNTERS, count
from core.model.ledger import OUTSIDE_WINDOW, OVER_BUDGET, PARTIAL

from .base import Budget
from .n8n_window import STORAGE, WINDOWED, K, explain_n8n, layout, unsaved_notes, window_words
from .settings import CHOICE, SWITCHED, TEXT, Setting, Widget
from .stored import Item, StoredPlan, StoredStrategy, slice_start, sliced_items, stored_items

COUNTERS = {GPT2: "GPT-2's vocabulary (LangChain downloaded it)", CHARS4: "characters / 4 (the download failed)"}
#: The largest maxTokensFromMemory MemLens takes.
MAX_TOKENS_FROM_MEMORY = 10_000_000


def clean_up(items: list[Item]) -> list[Item]:
    """n8n's ``cleanupOrphanedMessages``: tool results and an unanswered call off the start, a call
    without its result (or results after no call) off the end, until nothing changes."""
    out = list(items)
    changed = True
    while changed and out:
        changed = False
        while out and out[0].is_tool:
            out.pop(0)
            changed = True
        if out and out[0].calls_tools and not (len(out) > 1 and out[1].is_tool):
            out.pop(0)
            changed = True
    changed = True
    while changed and out:
        changed = False
        last = out[-1]
        if last.is_tool:
            k = len(out) - 2
            while k >= 0 and out[k].is_tool:
                k -= 1
            if not (k >= 0 and out[k].calls_tools):
                out.pop()
                changed = True
        elif last.calls_tools:
            out.pop()
            changed = True
    return out


def _lines(text: str) -> list[str]:
    """LangChain's default text splitter: the text split after each line break (the breaks kept)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def trim_last(items: list[Item], max_tokens: int, counter: str) -> list[Item]:
    """``trimMessages`` as n8n calls it (see the module's docstring), on items with no system message."""

    def tokens(item: Item) -> int:
        return count(item.content, counter)

    newest = items[::-1]
    n = len(newest)
    sums = [0]
    for item in newest:
        sums.append(sums[-1] + tokens(item))
    fit = next((n - i for i in range(n) if sums[n - i] <= max_tokens), 0)
    kept = newest[:fit]
    if fit < n and newest[fit].content:
        excluded = newest[fit]
        splits = _lines(excluded.content)[::-1]
        for _ in range(len(splits) - 1):
            splits.pop()
            if sums[fit] + count("".join(splits), counter) <= max_tokens:
                kept.append(excluded.shaped(content="".join(splits[::-1]), origin=PARTIAL))
                break
    while kept and kept[-1].role != "user":
        kept.pop()
    return kept[::-1]


class N8nAgentStrategy(StoredStrategy):
    name = "n8n_agent"
    help = (
        "n8n's AI Agent over its memory: the memory node's last 2k messages, tool calls cut from their results "
        "dropped, then maxTokensFromMemory"
    )
    settings = (
        K,
        WINDOWED,
        STORAGE,
        Setting(
            "max_tokens_from_memory",
            None,
            "the agent's maxTokensFromMemory: the history is trimmed to this many "
            "tokens, oldest first, starting on a question (unset or 0: no trim)",
            optional=True,
            minimum=0,
            maximum=MAX_TOKENS_FROM_MEMORY,
            words="maxTokensFromMemory",
            widget=Widget(
                SWITCHED,
                "Max tokens from memory",
                key="n8n_max_tokens",
                minimum=1,
                maximum=1_000_000,
                step=100,
                unset_value=2000,
                second_label="Trim the history",
            ),
        ),
        Setting(
            "counter",
            GPT2,
            "how the agent's chat model counts: gpt2 (GPT-2's vocabulary, which LangChain "
            "downloads) or chars4 (characters / 4, when the download fails)",
            kind=TEXT,
            choices=JS_COUNTERS,
            labels=COUNTERS,
            widget=Widget(CHOICE, "Token counter", key="n8n_counter", select=True),
        ),
    )
    lenses = ((f"n8n AI Agent (k = {K.default})", {}),)

    def label(self, config):
        s = config.settings
        limit = f" max {s.max_tokens_from_memory:,} tokens" if s.max_tokens_from_memory else ""
        counter = " (chars/4)" if s.counter == CHARS4 and limit else ""
        return f"n8n agent {window_words(s)}{limit}{counter}"

    def finding_kinds(self, config):
        return ("unsaved_turn", "fewer_exchanges", "no_history")

    def explain(self, entry, config):
        if entry.reason == OVER_BUDGET:
            limit = config.get("max_tokens_from_memory") or 0
            unit = "GPT-2 tokens" if config.get("counter", GPT2) == GPT2 else "tokens (characters / 4)"
            return (
                f"over maxTokensFromMemory ({limit:,} {unit}, message text only): trimmed from the oldest, "
                f"and the rest starts on a question"
            )
        if entry.reason == OUTSIDE_WINDOW:
            return (
                explain_n8n(entry, config) + "; or its tool call or result was cut, and the agent drops the other half"
            )
        return explain_n8n(entry, config)

    def pruning_words(self, config):
        return (
            "n8n's agent trims its memory to maxTokensFromMemory, counting message text only, from the oldest; it "
            "may keep the last lines of a message, and the history must start on a question, so a long newest "
            "question means no history at all. Nothing in the run says so.",
            True,
        )

    def plan(self, view, current, replay):
        s = replay.config.settings
        items = layout(replay, s.storage)
        window = clean_up(sliced_items(view, items, slice_start(s.k)) if s.windowed else stored_items(view, items))
        sent = window
        reasons = {}
        limit = s.max_tokens_from_memory or None
        notes = []
        if limit:
            reasons.update({item.source: OVER_BUDGET for item in window})
            sent = clean_up(trim_last(window, limit, s.counter))
            notes.append(
                f"maxTokensFromMemory {limit:,}, counted with "
                f"{'GPT-2' if s.counter == GPT2 else 'characters / 4'} on message text only"
            )
            if window and not sent:
                notes.append("nothing sent: the newest question alone is over maxTokensFromMemory")
        notes = unsaved_notes(view, replay, s.storage, sent) + notes
        budget = Budget(limit, "; ".join(notes), replay.config.context_size or replay.facts.context_size)
        return StoredPlan(budget, sent, reasons, view, replay, items)


__all__ = ["COUNTERS", "N8nAgentStrategy", "clean_up", "trim_last"]
