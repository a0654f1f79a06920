"""LangChain-core ``trim_messages`` over a turn's history (spec/memory-models.md §D.1, §D.4, §G).

``last`` keeps the longest suffix within ``max_tokens`` (after ``end_on`` drops trailing
messages of other types, and with ``include_system`` after setting the system message aside and
subtracting its tokens); ``start_on`` then drops messages from the front until the kept part
starts on that type — nothing older is taken instead. ``first`` keeps the longest prefix, then
``end_on`` drops from its end. The view is not destructive: every turn trims the full thread.

Decisions pinned here (the node's history is the list being trimmed):

* the list is the thread's earlier messages under the granularity (the current query is
  always sent, as with every strategy); with ``include_system`` a non-empty system prompt is
  the list's leading SystemMessage — its tokens come off the budget and it is always sent;
  without it the system prompt is node configuration, sent and not counted;
* ``max_history_tokens`` is ``max_tokens`` (default 2,000); ``trim_counter`` is the
  ``token_counter`` (:func:`langchain_counts`): ``tokens`` (default) is the configured chat model's
  own counter — langchain-openai 1.7.4's ``get_num_tokens_from_messages``: 3 + role + content per
  message (name, tool calls and a tool result's id as it counts them) and 3 more for every list
  it counts —, ``approximate`` is langchain-core's ``count_tokens_approximately`` and
  ``messages`` counts messages (``token_counter=len``);
* message types are LangChain's: ``human`` (user), ``ai`` (assistant), ``tool``, ``system``;
* reasons: messages past the budget are ``over_budget``, messages dropped by ``start_on`` or
  ``end_on`` are ``outside_window``;
* ``allow_partial`` keeps the last lines (``first``: the first lines) of the message that did
  not fit, split on newlines as LangChain's default splitter does. That message's entry stays
  ``over_budget`` (it was not sent as it is) and what was sent of it is a synthetic message of
  origin ``partial`` standing in its place. With ``trim_counter="messages"`` nothing is ever
  partial, as with ``token_counter=len``;
* messages are passed on as they are: an empty one is sent too (``empty`` is Dify's filter).

Only ``start_on="human"`` keeps a tool result from opening the history (spec §G): the trim does
not pair tool calls with their results.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from core.limits import history_limit
from core.model.conversation import Message
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET, PARTIAL, SyntheticMessage
from core.model.tokens import REPLY_PRIMING, approximate_message_tokens, chat_model_message_tokens

from ..errors import ConfigError, TrimError
from .base import Budget, Plan, Strategy, along_view, message_at, tokens_between, turn_at
from .settings import BOOL, CHOICE, TEXT, TOGGLE, ZERO_UNSET, Setting, Widget

#: LangChain message types and the chat roles they are.
MESSAGE_TYPES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_TYPE_OF_ROLE = {role: kind for kind, role in MESSAGE_TYPES.items()}
TRIM_STRATEGIES = ("last", "first")
#: LangChain's counters: the chat model's own, ``len`` and ``count_tokens_approximately``.
TRIM_COUNTERS = ("tokens", "messages", "approximate")
#: What the editor's "Start on" offers for no start rule.
ANY_START = "(any)"


#: ``max_history_tokens``, the limit of LangChain's memories: this one's ``max_tokens`` (the summary buffer's
#: ``max_token_limit`` is the same setting with its own help).
HISTORY_LIMIT = Setting(
    "max_history_tokens",
    None,
    "trim_messages' max_tokens (unset: 2,000; 0 is a limit too)",
    optional=True,
    minimum=0,
    flag="--max-history-tokens",
    widget=Widget(ZERO_UNSET, "History limit (tokens; 0 = 2,000)", key="history_limit", maximum=10_000_000, step=100),
)


#: How LangChain's memories count (:func:`langchain_counts`).
TRIM_COUNTER = Setting(
    "trim_counter",
    "tokens",
    "LangChain's counter: tokens (the chat model's own, default), messages "
    "(token_counter=len) or approximate (count_tokens_approximately)",
    kind=TEXT,
    choices=TRIM_COUNTERS,
    words="trim counter",
    flag="--trim-counter",
    widget=Widget(
        CHOICE,
        "Count with",
        key="trim_counter",
        help="LangChain's counters: tokens = the chat model's own (get_num_tokens_from_messages), "
        "messages = len, approximate = count_tokens_approximately",
    ),
)


def message_type(message: Message) -> str:
    return _TYPE_OF_ROLE.get(message.role, message.role)


def split_lines(text: str) -> list[str]:
    """LangChain's default text splitter: split on newlines, keeping them."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + parts[-1:]


def _types(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class Selection:
    """Which messages a trim keeps, as segments of the list: ``(up_to, reason)`` in order."""

    segments: tuple[tuple[int, str], ...]
    partial: int | None = None  # index of the message sent partially
    partial_content: str = ""
    partial_cost: int = 0

    def reason(self, i: int) -> str:
        for up_to, reason in self.segments:
            if i < up_to:
                return reason
        return OUTSIDE_WINDOW

    def kept_range(self) -> tuple[int, int]:
        lo = 0
        for up_to, reason in self.segments:
            if reason == KEPT:
                return lo, up_to
            lo = up_to
        return lo, lo


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int:
    """The largest k in [lo, hi] with fits(k), given fits(lo) and fits monotone decreasing."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def select(
    n: int,
    cost: Callable[[int, int], int],
    kind: Callable[[int], str],
    *,
    budget: int,
    strategy: str = "last",
    start_on: Sequence[str] = (),
    end_on: Sequence[str] = (),
    partial: Callable[[int, int, bool], tuple[str, int] | None] | None = None,
) -> Selection:
    """The trim of a list of ``n`` messages; ``cost(i, j)`` counts messages ``i..j-1``.

    ``partial(i, room, keep_tail)`` returns the content and cost of the most of message ``i``
    that fits in ``room`` (its last splits if ``keep_tail``), or ``None``.
    """
    if strategy == "last":
        end = n
        while end_on and end > 0 and kind(end - 1) not in end_on:
            end -= 1
        keep = _largest(0, end, lambda k: cost(end - k, end) <= budget)
        cut = end - keep
        part = None
        if partial is not None and cut > 0:
            part = partial(cut - 1, budget - cost(cut, end), True)
        first = cut - 1 if part else cut
        while start_on and first < end and kind(first) not in start_on:
            first += 1
        if part and first > cut - 1:
            part = None
        lo = max(first, cut)
        segments: tuple[tuple[int, str], ...] = (
            (cut, OVER_BUDGET),
            (lo, OUTSIDE_WINDOW),
            (end, KEPT),
            (n, OUTSIDE_WINDOW),
        )
        if part:
            return Selection(segments, cut - 1, part[0], part[1])
        return Selection(segments)
    if strategy != "first":
        raise TrimError(f"unknown trim strategy {strategy!r}; expected last or first")
    if start_on:
        raise TrimError("start_on applies only to trim strategy 'last'")
    if cost(0, n) <= budget:
        keep, part = n, None
    else:
        keep = _largest(0, n, lambda k: cost(0, k) <= budget)
        part = partial(keep, budget - cost(0, keep), False) if partial is not None and keep < n else None
    stop = keep + 1 if part else keep
    while end_on and stop > 0 and kind(stop - 1) not in end_on:
        stop -= 1
    if part and stop <= keep:
        part = None
    hi = min(stop, keep)
    segments = ((hi, KEPT), (keep, OUTSIDE_WINDOW), (n, OVER_BUDGET))
    if part:
        return Selection(segments, keep, part[0], part[1])
    return Selection(segments)


def _best_split(splits: list[str], keep_tail: bool, fits: Callable[[str], bool]) -> str | None:
    if keep_tail:
        splits = splits[::-1]
    count = _largest(0, len(splits), lambda k: k == 0 or fits(_join(splits[:k], keep_tail)))
    return _join(splits[:count], keep_tail) if count else None


def _join(splits: list[str], reversed_: bool) -> str:
    return "".join(splits[::-1] if reversed_ else splits)


def trim_messages(
    messages: Sequence[Message],
    *,
    max_tokens: int,
    token_counter: Callable[[list[Message]], int],
    strategy: str = "last",
    allow_partial: bool = False,
    end_on: str | Sequence[str] | None = None,
    start_on: str | Sequence[str] | None = None,
    include_system: bool = False,
    text_splitter: Callable[[str], list[str]] | None = None,
) -> list[Message]:
    """``langchain_core.messages.trim_messages`` over MemLens messages (spec §D.1).

    ``token_counter`` counts a list of messages (``len`` counts messages). Returns the kept
    messages; a partially kept one is a copy with the kept part of its content.
    """
    if strategy == "first" and (include_system or start_on):
        raise TrimError("start_on and include_system apply only to trim strategy 'last'")
    msgs = list(messages)
    starts, ends = _types(start_on), _types(end_on)
    splitter = text_splitter or split_lines
    system: Message | None = None
    budget = max_tokens
    if strategy == "last":
        while ends and msgs and message_type(msgs[-1]) not in ends:
            msgs.pop()
        ends = ()
        if include_system and msgs and msgs[0].role == "system":
            system, msgs = msgs[0], msgs[1:]
            budget = max(0, max_tokens - token_counter([system]))

    def partial(i: int, room: int, keep_tail: bool):
        text = msgs[i].content
        if not text:
            return None
        best = _best_split(
            splitter(text), keep_tail, lambda content: token_counter([replace(msgs[i], content=content)]) <= room
        )
        return (best, 0) if best is not None else None

    sel = select(
        len(msgs),
        lambda i, j: token_counter(msgs[i:j]),
        lambda i: message_type(msgs[i]),
        budget=budget,
        strategy=strategy,
        start_on=starts,
        end_on=ends,
        partial=partial if allow_partial else None,
    )
    lo, hi = sel.kept_range()
    kept = msgs[lo:hi]
    if sel.partial is not None:
        stand_in = replace(msgs[sel.partial], content=sel.partial_content)
        kept = [stand_in, *kept] if sel.partial < lo else [*kept, stand_in]
    return ([system] if system else []) + kept


def langchain_counts(view, replay, counter: str | None = None) -> tuple[Callable[[Message], int], list[int], int]:
    """LangChain's count under ``counter`` (one of :data:`TRIM_COUNTERS`; unset: the config's
    ``trim_counter``): the per-message count, its prefix sums over the view's sequence (kept on the
    replay and only extended: :func:`along_view`), and what counting a list adds once (the chat
    model's reply priming)."""
    name = counter or replay.config.settings.trim_counter
    if name == "messages":
        per, extra = (lambda m: 1), 0
    elif name == "approximate":
        per, extra = approximate_message_tokens, 0
    else:
        per, extra = (lambda m: chat_model_message_tokens(replay.counter, m)), REPLY_PRIMING
    prefix = along_view(view, replay, ("langchain", name), (0,), lambda sums, m: sums.append(sums[-1] + per(m)))
    return per, prefix, extra


class TrimPlan(Plan):
    def __init__(self, budget, selection: Selection, view, replay):
        self.selection = selection
        lo, hi = selection.kept_range()
        super().__init__(
            budget,
            None,
            hi - lo,
            tokens_between(view, lo, hi) + (selection.partial_cost if selection.partial is not None else 0),
            turn_at(view, replay, lo if hi > lo else None),
        )

    def reason(self, i, message):
        return self.selection.reason(i)

    def synthetic(self, view, replay):
        sel = self.selection
        if sel.partial is None:
            return []
        i = sel.partial
        msg = message_at(view, replay, i)
        number = replay.numbers[view.seq_pos[i]]
        return [
            SyntheticMessage(
                role=msg.role,
                content=sel.partial_content,
                tokens=sel.partial_cost,
                origin=PARTIAL,
                turn=number,
                covers=(number,),
                replaces=(view.seq_pos[i], view.seq_msg[i]),
                ref=f"partial:{msg.ref}",
            )
        ]


def _explain_trim(reason: str, config) -> str:
    limit = history_limit(config.get("max_history_tokens"))
    unit = "messages" if config.get("trim_counter") == "messages" else "tokens"
    if reason == OVER_BUDGET:
        side = "newest" if config.get("trim_strategy") == "first" else "oldest"
        return f"over trim_messages max_tokens ({limit:,} {unit}): {side} dropped"
    ends = []
    if config.get("start_on"):
        ends.append(f"starts on a {config['start_on']} message")
    if config.get("end_on"):
        ends.append(f"ends on a {config['end_on']} message")
    return "dropped so the kept part " + " and ".join(ends) if ends else "dropped by trim_messages"


class TrimStrategy(Strategy):
    name = "trim"
    help = "LangChain's trim_messages"
    settings = (
        HISTORY_LIMIT,
        TRIM_COUNTER,
        Setting(
            "trim_strategy",
            "last",
            "which end trim_messages keeps: last or first",
            kind=TEXT,
            choices=TRIM_STRATEGIES,
            words="trim strategy",
            flag="--trim-strategy",
            widget=Widget(CHOICE, "Keep", key="trim_strategy"),
        ),
        Setting(
            "include_system", False, "the system prompt counts against max_tokens", kind=BOOL, flag="--include-system"
        ),
        Setting(
            "start_on",
            None,
            "the kept part starts on this message type (human, ai, tool, system)",
            kind=TEXT,
            optional=True,
            choices=(None, *MESSAGE_TYPES),
            unknown="unknown message type {value!r} for start_on",
            flag="--start-on",
            widget=Widget(
                CHOICE,
                "Start on",
                key="start_on",
                select=True,
                unset_value=ANY_START,
                offered=(None, "human", "ai"),
                shown_if=("trim_strategy", "last"),
            ),
        ),
        Setting(
            "end_on",
            None,
            "the kept part ends on this message type (human, ai, tool, system)",
            kind=TEXT,
            optional=True,
            choices=(None, *MESSAGE_TYPES),
            unknown="unknown message type {value!r} for end_on",
            flag="--end-on",
        ),
        Setting(
            "allow_partial",
            False,
            "keep part of the message that did not fit",
            kind=BOOL,
            flag="--allow-partial",
            widget=Widget(TOGGLE, "Allow partial messages", key="allow_partial"),
        ),
    )
    lenses = ((f"trim_messages, {history_limit(None):,} tokens", {}),)
    plans = True
    drops_empty = False

    def label(self, config):
        s = config.settings
        unit = "msgs" if s.trim_counter == "messages" else "tok"
        return f"trim {s.trim_strategy} {history_limit(s.max_history_tokens):,} {unit}" + (
            f" from {s.start_on}" if s.start_on else ""
        )

    def explain(self, entry, config):
        return _explain_trim(entry.reason, config) if entry.reason in (OUTSIDE_WINDOW, OVER_BUDGET) else None

    def short_words(self, reason, config):
        if reason != OVER_BUDGET:
            return None
        unit = "" if config.get("trim_counter") != "messages" else " messages"
        return f"over max_tokens {history_limit(config.get('max_history_tokens')):,}{unit}"

    def pruning_words(self, config):
        return "trim_messages drops what does not fit its max_tokens; check that nothing needed goes first.", False

    def validate(self, config):
        s = config.settings
        if s.trim_strategy == "first" and (s.start_on or s.include_system):
            raise ConfigError(
                "start_on and include_system apply only to trim strategy 'last' "
                "(trim_messages rejects them with 'first'); remove them or use last"
            )

    def plan(self, view, current, replay):
        cfg, own = replay.config, replay.config.settings
        limit = history_limit(own.max_history_tokens)
        by_messages = own.trim_counter == "messages"
        unit = "messages" if by_messages else "tokens"
        per, prefix, extra = langchain_counts(view, replay)
        budget, note = limit, f"trim_messages max_tokens {limit:,} {unit}, strategy {own.trim_strategy}"
        if own.include_system and own.trim_strategy == "last" and replay.system_prompt:
            system = per(Message("system", replay.system_prompt, "", "system")) + extra
            budget = max(0, limit - system)
            note += f", minus the system message ({system:,})"
        n = view.length

        def cost(i: int, j: int) -> int:
            return prefix[j] - prefix[i] + extra if j > i else 0

        def kind(i: int) -> str:
            return message_type(message_at(view, replay, i))

        def partial(i: int, room: int, keep_tail: bool):
            msg = message_at(view, replay, i)
            if by_messages or not msg.content:
                return None
            # LangChain counts the kept messages with the cut one as one list: the list's own
            # addition is already in ``room`` unless nothing else is kept (room is the whole budget).
            alone = extra if room >= budget else 0
            best = _best_split(
                split_lines(msg.content), keep_tail, lambda content: per(replace(msg, content=content)) + alone <= room
            )
            return (best, replay.counter.message(replace(msg, content=best))) if best is not None else None

        selection = select(
            n,
            cost,
            kind,
            budget=budget,
            strategy=own.trim_strategy,
            start_on=_types(own.start_on),
            end_on=_types(own.end_on),
            partial=partial if own.allow_partial else None,
        )
        return TrimPlan(Budget(budget, note, cfg.context_size or replay.facts.context_size), selection, view, replay)
