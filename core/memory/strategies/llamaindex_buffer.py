"""LlamaIndex's ``ChatMemoryBuffer`` as an agent workflow uses it (llama-index-core 0.14.25,
``llama_index/core/memory/chat_memory_buffer.py``; the workflow in ``agent/workflow/base_agent.py``).

The workflow puts the new question into the buffer first, then reads ``get()``; the system prompt is put
before what it reads and is not counted. The buffer stores every message for good; ``get()`` decides
what is sent:

* it counts the *contents* joined by spaces, ``" ".join(str(m.content) for m in messages)``, with
  LlamaIndex's global tokenizer — tiktoken's ``cl100k_base`` whatever the model — the question
  included. A reply that only calls tools has no text: its content is ``None``, counted as the word
  "None"; tool calls themselves, roles and ids are not counted;
* while that is over ``token_limit`` and more than one message is left, it drops the oldest message,
  then every assistant or tool message that would lead (the front rule as shipped: a tool result is
  never sent without the reply that called it, and no assistant message leads);
* when even the newest message — the question — is over the limit alone, it sends that one message.

``token_limit`` is what the buffer was made with; the workflow's own default, and what
``from_defaults(llm=…)`` makes of an unset or 0 limit, is ``int(0.75 × context_window)``, the context
window the model's metadata reports (LlamaIndex's ``DEFAULT_CONTEXT_WINDOW``, 3,900, for a model that
says none). A buffer made without a model defaults to 3,000: ``token_limit=3000`` here.

Ledger: a message dropped by the count is ``over_budget``; one dropped because it would lead after
that is ``outside_window``. ``tests/memory/test_platform_memories.py`` checks every turn against what
the real package sent (``tests/reference/python/llamaindex_driver.py``).

Counting the joined text exactly without joining every suffix: a message's text ends a *unit* when it
ends in a character that is not whitespace, and tiktoken's pre-tokenizer never makes a piece across
the space after such a character, so the tokens of ``" " + unit`` add up (a unit is usually one
message; an empty one or one ending in a newline joins the next). A suffix's count is its first unit
counted afresh plus the later units' sums — exact — and those sums alone are a lower bound that only
falls as the suffix shortens, so the candidates the loop would try first, which cannot fit, are passed
over by bisection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from core.model.conversation import REASONING, Message, source_platform
from core.model.ledger import KEPT, OUTSIDE_WINDOW, OVER_BUDGET
from core.model.tokens import count_allowing_special, model_facts

from .base import Budget, Strategy, SuffixPlan, along_view, message_at
from .settings import ZERO_UNSET, Setting, Widget

#: What a turn's budget note says when the question alone is over ``token_limit`` (and the platform-rule
#: finding reads): the buffer then sends the question and no history at all.
ALONE_OVER = "the question alone is over it, and LlamaIndex sends it anyway"

if TYPE_CHECKING:  # pragma: no cover
    from ..config import MemoryConfig

#: LlamaIndex's global tokenizer: ``get_tokenizer()`` is gpt-3.5-turbo's encoding unless one is set.
LLAMAINDEX_ENCODING = "cl100k_base"
#: ``from_defaults(llm=…)`` makes an unset limit this share of the model's context window.
TOKEN_LIMIT_RATIO = 0.75
#: LlamaIndex's ``DEFAULT_CONTEXT_WINDOW``: the context a model's metadata reports when it knows none.
DEFAULT_CONTEXT_WINDOW = 3900
#: The roles the front rule drops rather than let lead (LlamaIndex's ``MessageRole.TOOL``, ``ASSISTANT``).
NOT_LEADING = frozenset({"assistant", "tool"})


def llamaindex_tokens(text: str) -> int:
    """Tokens of ``text`` as LlamaIndex's global tokenizer counts them (special tokens allowed)."""
    return count_allowing_special(LLAMAINDEX_ENCODING, text)


def llamaindex_content(message: Message) -> str | None:
    """``str(message.content)`` as LlamaIndex has it: its text; ``"None"`` for a reply of tool calls with no
    text. ``None`` for reasoning, which LlamaIndex keeps as a block of the reply it belongs to, never in its
    content: such a message adds nothing to the joined text."""
    if message.kind == REASONING:
        return None
    if message.tool_calls and not message.content:
        return "None"
    return message.content


def context_window(config: "MemoryConfig") -> int:
    """The context window LlamaIndex reads from the model: ``context_window`` when set, else the config's
    context size, else the model's, else :data:`DEFAULT_CONTEXT_WINDOW`."""
    own = config.settings.context_window
    return own or config.context_size or model_facts(config.model).context_size or DEFAULT_CONTEXT_WINDOW


def token_limit(config: "MemoryConfig") -> int:
    """The buffer's ``token_limit``: the setting, or (unset or 0, as ``from_defaults(llm=…)`` reads it)
    ``int(0.75 × context_window)``."""
    return config.settings.token_limit or int(context_window(config) * TOKEN_LIMIT_RATIO)


class Unit(NamedTuple):
    """One message of the view as the joined count carries it: its text (``None``: it adds nothing), the sum
    of the closed units' tokens up to it (each counted as ``" " + unit``), and where the unit still open
    after it began (``None``: its text closed the unit, and the next message starts one)."""

    text: str | None
    closed: int
    open_from: int | None


def _join(texts) -> str:
    return " ".join(t for t in texts if t is not None)


def _carry(units: list, message: Message) -> None:
    """Appends the next message's :class:`Unit`: its text closes the open unit when it ends in a character
    that is not whitespace, and the unit's tokens join the sum."""
    k = len(units)
    before = units[-1] if units else Unit(None, 0, None)
    start = k if before.open_from is None else before.open_from
    text = llamaindex_content(message)
    if text and not text[-1].isspace():
        unit = _join([*(u.text for u in units[start:]), text])
        units.append(Unit(text, before.closed + llamaindex_tokens(" " + unit), None))
    else:
        units.append(Unit(text, before.closed, start))


class BufferPlan(SuffixPlan):
    def reason(self, i, message):
        if i >= self.first:
            return KEPT
        # The count drops the oldest message; the front rule then drops what would lead after it.
        return OVER_BUDGET if i == 0 or message.role not in NOT_LEADING else OUTSIDE_WINDOW


def buffer_get(units: list[Unit], role, question: str | None, limit: int) -> tuple[int, bool]:
    """What ``get()`` sends of the buffer that the view's messages (``units``) and the question make:
    ``(first, alone_over)`` — the index of the first message sent (the question's is ``len(units)``) and
    whether the one message sent is over the limit on its own. ``role(i)`` is message ``i``'s role."""
    n = len(units)
    last = n if question is not None else n - 1
    if last < 0:
        return 0, False

    def text(i: int) -> str | None:
        return question if i == n else units[i].text

    closed_total = units[-1].closed if units else 0
    tail_from = units[-1].open_from if units and units[-1].open_from is not None else n
    # The unit still open at the end runs to the last text (the question, when there is one).
    open_cost = llamaindex_tokens(" " + _join(map(text, range(tail_from, last + 1)))) if tail_from <= last else 0

    def unit_end(i: int) -> int:
        """The index after the closed unit message ``i`` is in (``i`` before ``tail_from``)."""
        while units[i].open_from is not None:
            i += 1
        return i + 1

    def later_units(i: int) -> int:
        """The joined count from message ``i`` less its first unit: a lower bound that falls as ``i`` grows."""
        return 0 if i >= tail_from else closed_total - units[unit_end(i) - 1].closed + open_cost

    def count(i: int) -> int:
        """The joined count from message ``i`` to the last, exactly."""
        e = last + 1 if i >= tail_from else unit_end(i)
        return llamaindex_tokens(_join(map(text, range(i, e)))) + later_units(i)

    lo, hi = 0, last  # no start before the first whose later units fit can fit
    while lo < hi:
        mid = (lo + hi) // 2
        if later_units(mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    for i in range(lo, last):
        # get() tries the whole buffer, then each start its front rule leaves: no assistant or tool message.
        if (i == 0 or role(i) not in NOT_LEADING) and count(i) <= limit:
            return i, False
    return last, count(last) > limit


class LlamaIndexBufferStrategy(Strategy):
    name = "llamaindex_buffer"
    help = "LlamaIndex's ChatMemoryBuffer in an agent workflow: the newest messages whose contents fit token_limit"
    settings = (
        Setting(
            "token_limit",
            None,
            "ChatMemoryBuffer's token_limit, counted over the contents joined, the question "
            "included (unset or 0: int(0.75 × context_window), as the workflow's buffer has it)",
            optional=True,
            minimum=0,
            words="token limit",
            widget=Widget(ZERO_UNSET, "Token limit (0 = 0.75 × context window)", maximum=10_000_000, step=100),
        ),
        Setting(
            "context_window",
            None,
            "the context window the model's LlamaIndex metadata reports (unset: the "
            f"config's context size, else the model's, else LlamaIndex's {DEFAULT_CONTEXT_WINDOW:,})",
            optional=True,
            minimum=1,
            words="context window",
            widget=Widget(ZERO_UNSET, "Context window (0 = the model's)", maximum=10_000_000, step=1000),
        ),
    )
    lenses = (("LlamaIndex ChatMemoryBuffer", {}),)
    uses_granularity = False
    plans = True
    drops_empty = False

    def label(self, config):
        return f"LlamaIndex buffer {token_limit(config):,} tok"

    def explain(self, entry, config):
        limit = config.get("budget")
        if entry.reason == OVER_BUDGET:
            return (
                f"over ChatMemoryBuffer's token_limit ({limit:,} tokens of the contents joined, the question "
                "included): oldest dropped"
            )
        if entry.reason == OUTSIDE_WINDOW:
            return (
                "dropped after the message before it: ChatMemoryBuffer lets no assistant or tool message lead "
                "the history"
            )
        return None

    def pruning_words(self, config):
        return (
            "LlamaIndex's ChatMemoryBuffer drops the oldest messages while their contents and the question are "
            "over its token_limit, and with them the assistant and tool messages that would lead; nothing in the "
            "run says so. Raise token_limit.",
            True,
        )

    def finding_kinds(self, config):
        return ("platform_rule",)

    def turn_surprise(self, replay, ledger):
        # The question alone over token_limit: not one earlier message is sent, however short (on a turn
        # that has earlier messages to send).
        if ledger.entries and ALONE_OVER in (ledger.budget_note or ""):
            return f"token_limit {ledger.budget:,}: {ALONE_OVER}, without a single earlier message"
        return None

    def claims(self, conversation):
        # A SimpleChatStore is ChatMemoryBuffer's own store.
        return {} if source_platform(conversation.source_format) == "llamaindex" else None

    def plan(self, view, current, replay):
        config = replay.config
        limit = token_limit(config)
        units = along_view(view, replay, self.name, (), _carry)
        query = replay.conversation.turns[current].query_message
        question = None if query is None else llamaindex_content(query)
        first, alone_over = buffer_get(units, lambda i: message_at(view, replay, i).role, question, limit)
        note = f"ChatMemoryBuffer token_limit {limit:,} (LlamaIndex's count of the contents joined, the question too)"
        if alone_over:
            note += "; " + ALONE_OVER
        return BufferPlan(
            Budget(limit, note, config.context_size or replay.facts.context_size), None, first, view, replay
        )
