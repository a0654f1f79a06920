"""n8n's chat memory nodes: what Simple, Postgres and Redis Chat Memory store and what their window loads.

The rules, read from n8n 2.41.1 (``@n8n/n8n-nodes-langchain``) and the LangChain JS it pins
(``@langchain/classic`` 1.0.27), and checked against that JavaScript on generated conversations
(``tests/reference/js/``):

* **The window** (``MemoryBufferWindow``, ``MemoryPostgresChat`` from v1.1, ``MemoryRedisChat`` from v1.3:
  LangChain's ``BufferWindowMemory``): Context Window Length ``k`` (default 5) loads
  ``messages.slice(-2k)`` of what is stored — messages, not exchanges. So ``k = 0`` loads everything
  (``slice(-0)``), ``k = 2.5`` the last 5 and ``k = -1`` all but the first two. Postgres Chat Memory
  v1.0 and Redis Chat Memory before v1.3 are ``BufferMemory``: no window (``windowed`` off).
* **What a turn stores** (``storage``), by the agent that writes it:

  - ``four_messages`` (the Tools Agent V3 of n8n 2.41.1, ``saveToMemory``/``buildMessagesFromSteps``):
    the question, then for each tool call of the turn's **last** round an assistant message of that
    one call (empty text, whatever the model wrote; the call's arguments with an ``id`` key, the
    call's id) followed by its result, then the answer. Two parallel calls are two assistant
    messages, so a window can keep the second without the first. A turn with tools stores 2 messages
    per call besides its question and answer: ``k = 5`` can hold two exchanges;
  - ``used_tools`` (the Tools Agent V3 of n8n 1.120 to 2.2.x): the question and the answer, the
    answer after ``[Used tools: Tool: NAME, Input: JSON, Result: RESULT; …]`` listing every call of
    every round (``Input`` is the call's ``input`` argument when it is an object, else ``{}``);
  - ``input_output`` (a V1/V2 agent's ``AgentExecutor``): the question and the answer, nothing of the
    tools;
  - ``as_stored``: the conversation is what the memory stored (an ``n8n_chat_histories`` export, an
    execution's memory output): every message as it is.

  The V3 agent stores nothing of a turn whose output is empty, its question included
  (``if (!output) return``); a V1/V2 agent stores the question and the empty answer.

Every message is a candidate (granularity does not apply) and an empty one is sent as it is. A message
never stored is ``omitted``; one sent in n8n's shape is ``rewritten``, what was sent standing in its place
(:mod:`core.memory.strategies.stored`).
"""

from __future__ import annotations

import json

from core.model.conversation import Turn, source_platform
from core.model.ledger import OMITTED, OUTSIDE_WINDOW, REWRITTEN, turn_ranges
from core.words import plural

from .base import Budget
from .settings import BOOL, CHOICE, FLOAT, NUMBER, TEXT, TOGGLE, Setting, Widget
from .stored import Item, StoredPlan, StoredStrategy, slice_start, sliced_items, stored_items

FOUR_MESSAGES, USED_TOOLS, INPUT_OUTPUT, AS_STORED = "four_messages", "used_tools", "input_output", "as_stored"
STORAGES = {
    FOUR_MESSAGES: "Tools Agent V3 (n8n 2.3+): each call and its result",
    USED_TOOLS: "Tools Agent V3 (n8n 1.120–2.2): a [Used tools: …] prefix",
    INPUT_OUTPUT: "Agent V1/V2: question and answer",
    AS_STORED: "as stored (an n8n export)",
}
#: Context Window Length's default, and the bound MemLens takes (n8n takes any number).
DEFAULT_K = 5
MAX_K = 1_000_000
#: The config editor's field for k goes up to this (a field's range; the command line takes up to MAX_K).
K_FIELD_MAX = 500

K = Setting(
    "k",
    DEFAULT_K,
    "Context Window Length: the last 2k stored messages are sent (0: all of them; a negative k: all but the first -2k)",
    kind=FLOAT,
    minimum=-MAX_K,
    maximum=MAX_K,
    words="Context Window Length",
    widget=Widget(
        NUMBER,
        "Context Window Length (k)",
        key="n8n_k",
        minimum=-50,
        maximum=K_FIELD_MAX,
        step=1,
        help="n8n sends the last 2k stored messages; a tool call and its result are 2 of them",
    ),
)
WINDOWED = Setting(
    "windowed",
    True,
    "the node windows its memory (off: Postgres Chat Memory v1.0, Redis Chat Memory "
    "before v1.3, which send every stored message)",
    kind=BOOL,
    widget=Widget(TOGGLE, "Windowed (off: Postgres v1.0, Redis < 1.3)", key="n8n_windowed"),
)


STORAGE = Setting(
    "storage",
    FOUR_MESSAGES,
    "what a turn stores: four_messages (Tools Agent V3, n8n 2.3+: each tool "
    "call of the last round and its result), used_tools (n8n 1.120–2.2: a [Used tools: …] prefix), "
    "input_output (Agent V1/V2) or as_stored (the conversation is an n8n export)",
    kind=TEXT,
    choices=tuple(STORAGES),
    labels=STORAGES,
    widget=Widget(CHOICE, "Stored by", key="n8n_storage", select=True),
)


def _args_with_id(arguments: str, call_id: str) -> str:
    """A call's arguments as n8n stores them: the arguments object with the call's ``id`` added."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = None
    args = value if isinstance(value, dict) else {}
    return json.dumps({**args, "id": call_id}, ensure_ascii=False)


def _js_json(value) -> str:
    """``JSON.stringify`` of a JSON value: no spaces."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_input(arguments: str) -> str:
    """n8n 2.2's ``Input`` of a ``[Used tools: …]`` step: the call's ``input`` argument when it is an object,
    else ``{}``."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = None
    inner = value.get("input") if isinstance(value, dict) else None
    return _js_json(inner if isinstance(inner, (dict, list)) else {})


def turn_items(turn: Turn, position: int, storage: str) -> list[Item]:
    """What the memory stores of one turn (see the module's docstring)."""
    messages = turn.messages
    if storage == AS_STORED:
        return [Item.of(position, j, m) for j, m in enumerate(messages)]
    q, a = turn.query_index, turn.answer_index
    if q is None:
        return []
    question = Item.of(position, q, messages[q])
    if storage == INPUT_OUTPUT:
        return [question] + ([Item.of(position, a, messages[a])] if a is not None else [])
    if a is None or not messages[q].content or not messages[a].content:
        return []  # an empty output: nothing of the turn is saved
    answer = Item.of(position, a, messages[a])
    rounds = [j for j, m in enumerate(messages) if j != a and m.role == "assistant" and m.tool_calls]

    def results(j: int) -> dict[str, int]:
        found: dict[str, int] = {}
        for t in range(j + 1, len(messages)):
            m = messages[t]
            if m.role == "tool" and m.tool_call_id:
                found.setdefault(m.tool_call_id, t)
        return found

    if storage == USED_TOOLS:
        steps = []
        for j in rounds:
            after = results(j)
            steps += [
                f"Tool: {c.name}, Input: {_tool_input(c.arguments)}, Result: {messages[after[c.id]].content}"
                for c in messages[j].tool_calls
                if c.id in after
            ]
        if steps:
            answer = answer.shaped(content=f"[Used tools: {'; '.join(steps)}] {answer.content}")
        return [question, answer]
    out = [question]
    if rounds:
        j = rounds[-1]
        after = results(j)
        for c in messages[j].tool_calls:
            if c.id not in after:
                continue  # a call with no result is not a step
            call = (c.id, c.name, _args_with_id(c.arguments, c.id))
            out.append(Item((position, j), (position, j), "assistant", "", (call,), as_is=False))
            out.append(Item.of(position, after[c.id], messages[after[c.id]], anchor=(position, j)))
    out.append(answer)
    return out


def layout(replay, storage: str):
    """``turn_items`` of each turn of the replay's conversation, made once per turn."""
    cache = replay.__dict__.setdefault("_n8n_items", {})
    turns = replay.conversation.turns

    def items(position: int) -> list[Item]:
        key = (storage, position)
        found = cache.get(key)
        if found is None:
            found = cache[key] = turn_items(turns[position], position, storage)
        return found

    return items


def unsaved_notes(view, replay, storage: str, sent: list[Item]) -> list[str]:
    """What a reader should know of the turns the memory saved nothing of (an empty reply), among those the
    window would reach: back from the newest turn to the first one that stored what is not sent."""
    if storage in (INPUT_OUTPUT, AS_STORED):
        return []
    turns, items = replay.conversation.turns, layout(replay, storage)
    oldest = sent[0].source[0] if sent else len(turns)
    lost = []
    for p in reversed(view.positions):
        if items(p):
            if p < oldest or p == oldest and items(p)[0] is not sent[0]:
                break
        elif turns[p].query_index is not None:
            lost.append(replay.numbers[p])
    lost.reverse()
    if not lost:
        return []
    return [f"the question of {turn_ranges(lost)} was never saved: the reply was empty"]


def window_notes(sent: list[Item], k: float, cut: bool) -> list[str]:
    """The surprise of a window that holds fewer exchanges than k: tool rounds take its places."""
    questions = sum(1 for item in sent if item.role == "user")
    if cut and questions < k and any(item.role == "tool" for item in sent):
        return [
            f"k = {k:g} kept {plural(questions, 'exchange')}: a tool call and its result take 2 of its "
            f"{2 * k:g} messages"
        ]
    return []


def window_words(s) -> str:
    """An n8n window in a few words: ``k=5``, ``no window``, and the storage when it is not the default."""
    window = f"k={s.k:g}" if s.windowed else "no window"
    return window + ("" if s.storage == FOUR_MESSAGES else f" ({s.storage})")


def cut_short(view, items, sent: list[Item]) -> bool:
    """Whether the window left out a stored message: what is sent does not start with the oldest one."""
    oldest = next((item for position in view.positions for item in items(position)), None)
    return oldest is not None and (not sent or sent[0] is not oldest)


def explain_n8n(entry, config) -> str | None:
    """The words every n8n memory shares."""
    r = entry.reason
    storage = config.get("storage", FOUR_MESSAGES)
    if r == OUTSIDE_WINDOW:
        k = config.get("k", DEFAULT_K)
        return (
            f"outside Context Window Length {k:g}: n8n sends the last {2 * k:g} stored messages, and each tool "
            f"call and its result take 2 of them"
        )
    if r == REWRITTEN:
        if storage == USED_TOOLS:
            return "sent as n8n stored it: the answer after a [Used tools: …] list of the turn's tool calls and results"
        return (
            "sent as n8n stored it: each tool call of the round its own assistant message (empty text, the call's "
            "id in its arguments), followed by its result"
        )
    if r == OMITTED:
        if entry.role == "user" or entry.kind == "answer":
            return (
                "never saved: the reply was empty, and n8n's agent saves nothing of such a turn, its question included"
            )
        if storage == FOUR_MESSAGES:
            return (
                "not saved: n8n's agent saves a turn's question, its last tool round and its answer only (and "
                "nothing of a turn with an empty reply)"
            )
        return "not saved: this agent saves a turn's question and answer only, not its tool steps"
    return None


class N8nWindowStrategy(StoredStrategy):
    name = "n8n_window"
    help = "n8n's Simple, Postgres or Redis Chat Memory: the last 2k messages as n8n stored them"
    settings = (K, WINDOWED, STORAGE)
    lenses = ((f"n8n Simple Memory (k = {DEFAULT_K})", {}),)

    def label(self, config):
        return f"n8n memory {window_words(config.settings)}"

    def finding_kinds(self, config):
        return ("unsaved_turn", "fewer_exchanges")

    def explain(self, entry, config):
        return explain_n8n(entry, config)

    def claims(self, conversation):
        return {"storage": AS_STORED} if source_platform(conversation.source_format) == "n8n" else None

    def plan(self, view, current, replay):
        s = replay.config.settings
        items = layout(replay, s.storage)
        sent = sliced_items(view, items, slice_start(s.k)) if s.windowed else stored_items(view, items)
        notes = unsaved_notes(view, replay, s.storage, sent) + window_notes(sent, s.k, cut_short(view, items, sent))
        budget = Budget(None, "; ".join(notes), replay.config.context_size or replay.facts.context_size)
        return StoredPlan(budget, sent, {}, view, replay, items)


__all__ = [
    "AS_STORED",
    "DEFAULT_K",
    "FOUR_MESSAGES",
    "INPUT_OUTPUT",
    "K",
    "N8nWindowStrategy",
    "STORAGES",
    "USED_TOOLS",
    "WINDOWED",
    "STORAGE",
    "cut_short",
    "explain_n8n",
    "layout",
    "turn_items",
    "window_words",
]
