"""One model call as threading reads it, and what threading makes of calls: the payload's parts, the nodes
of a conversation, a call placed in its turn, the turns and the thread they form."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from core.model.conversation import REASONING, Conversation, Message, Turn, turn_messages

#: A call's outcome: it answered, it failed (no reply), or the client left while it streamed.
SUCCEEDED, FAILED, STOPPED = "succeeded", "failed", "stopped"
#: What each payload message is to its call (:attr:`Placed.roles`).
SYSTEM, HISTORY, UNMATCHED, QUERY, STEP = "system", "history", "unmatched", "query", "step"
#: A message of the node's own prompt besides its system message: the examples around a history sent as text.
TEMPLATE = "template"
#: How alike two system prompts must be (difflib's ratio) to be one node's whose prompt carries a
#: changing value; below it, they are two nodes.
SAME_NODE_LIKENESS = 0.6
#: The most places of one message searched for a call's anchor (a message said in many conversations,
#: "ok", "thanks"): the newest ones.
ANCHOR_CANDIDATES = 64

#: The ``metadata`` key that names the node a call is of (the proxy's ``X-MemLens-Node`` header says the same).
NODE_KEY = "memlens_node"

Key = tuple
Place = tuple[int, int]  # (turn position, message index)


def message_key(m: Message) -> Key:
    """What makes two messages the same message: role, text, name and tool calls (their names and
    arguments; ids are left out, since clients make new ones), and whether it is reasoning."""
    calls = tuple((c.name, _arguments(c.arguments)) for c in m.tool_calls)
    return (m.role, m.content, m.name or "", calls, m.kind == REASONING)


def _arguments(text: str) -> str:
    """Tool-call arguments in one spelling: clients re-serialise JSON with their own spacing."""
    import json

    try:
        return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError):
        return text


@dataclass(frozen=True)
class Call:
    """One model call as threading reads it. ``messages`` is the payload as sent (system messages
    included); ``reply`` the assistant message that came back (``None``: none did). ``api`` is the
    endpoint's kind (``chat``, ``responses``, ``messages``; a trace's format), ``tools`` the names of
    the tools offered. ``record`` travels with the call unread (what the recorder stores)."""

    id: str
    messages: tuple[Message, ...]
    reply: Message | None = None
    model: str = ""
    tools: tuple[str, ...] = ()
    api: str = "chat"
    started_at: float = 0.0
    pin: str | None = None
    user: str | None = None
    status: str = SUCCEEDED
    error: str | None = None
    previous_response: str | None = None  # the Responses API's previous_response_id
    response_id: str | None = None
    #: The node the builder named (``X-MemLens-Node``, ``metadata.memlens_node``): calls naming different
    #: nodes are different nodes, whatever their prompts.
    node_name: str | None = None
    record: Mapping = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Payload:
    """A payload read as its parts (indices into the call's messages)."""

    system: str
    system_count: int
    history: tuple[Message, ...]
    query: Message | None
    steps: tuple[Message, ...]


def split_payload(messages: Sequence[Message]) -> Payload:
    """``[system] + history + [query] + steps``: the first message, when it is a system message, is the node's
    prompt; the query is the last user message. A system message further on (a summary, a context, a prompt
    sent twice) is part of the history, and no turn holds it (:data:`UNMATCHED`)."""
    k = 1 if messages and messages[0].role == "system" and messages[0].kind != REASONING else 0
    rest = list(messages[k:])
    q = max((i for i, m in enumerate(rest) if m.role == "user"), default=None)
    system = "\n\n".join(m.content for m in messages[:k] if m.content)
    if q is None:
        return Payload(system, k, tuple(rest), None, ())
    return Payload(system, k, tuple(rest[:q]), rest[q], tuple(rest[q + 1 :]))


@dataclass
class Node:
    """One node of a conversation: the calls sharing a system prompt (or one like it) and tools."""

    id: str
    system: str
    tools: tuple[str, ...]
    api: str
    model: str
    title: str
    #: The newest system prompt of its calls (a prompt that changes from turn to turn is matched against it).
    latest: str = ""
    #: The name the builder gave it (its calls' ``X-MemLens-Node``); "" when it has none.
    name: str = ""
    #: The prefixes of its history's lines when its calls send their history as text (``("Human", "Assistant")``).
    text_prefixes: tuple[str, str] | None = None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "system": self.system,
            "tools": list(self.tools),
            "api": self.api,
            "model": self.model,
            "title": self.title,
            "latest": self.latest,
            "name": self.name,
            "text_prefixes": list(self.text_prefixes) if self.text_prefixes else None,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> "Node":
        prefixes = d.get("text_prefixes")
        return cls(
            str(d["id"]),
            str(d.get("system") or ""),
            tuple(d.get("tools") or ()),
            str(d.get("api") or ""),
            str(d.get("model") or ""),
            str(d.get("title") or d["id"]),
            str(d.get("latest") or ""),
            str(d.get("name") or ""),
            (str(prefixes[0]), str(prefixes[1]))
            if isinstance(prefixes, (list, tuple)) and len(prefixes) == 2
            else None,
        )


def node_title(number: int, system: str, tools: Sequence[str]) -> str:
    """ "node 2 · “You classify support…”" — its number, the start of its prompt, its tools."""
    line = " ".join(system.split())
    words = f"“{line[:40]}…”" if len(line) > 40 else f"“{line}”" if line else "no system prompt"
    tools_part = f" · tools {', '.join(tools[:3])}{'…' if len(tools) > 3 else ''}" if tools else ""
    return f"node {number} · {words}{tools_part}"


@dataclass
class Placed:
    """A call placed in its conversation: its turn (``position``), node, the node's call number (from
    1, in arrival order), its step within the turn (from 1), the thread messages its payload held
    (``kept``), and what each payload message was (``roles``, :data:`HISTORY` ones with their place
    in ``places``)."""

    call: Call
    node: str
    position: int
    number: int
    step: int
    kept: tuple[Place, ...]
    roles: tuple[str, ...]
    places: tuple[Place | None, ...]
    step_keys: tuple[Key, ...]
    payload_keys: tuple[Key, ...]
    #: The call as stored, made once (:func:`core.capture.stored.node_run`): its receipt and ledger do not change.
    stored: dict | None = field(default=None, repr=False, compare=False)
    #: A history sent as text (:func:`text_record`): where it was, its prefixes, each line's message and place.
    text: dict | None = None


@dataclass
class ThreadTurn:
    """One turn of a captured conversation: its query, its steps (a tool round), its answer.
    ``answer_seen``: the answer is one a later payload held (until then it is the last reply)."""

    id: str
    parent: int | None
    query: Message | None
    steps: list[Message] = field(default_factory=list)
    answer: Message | None = None
    answer_seen: bool = False
    created_at: float = 0.0
    calls: list[Placed] = field(default_factory=list)
    #: The query is a text-history call's user message, which may wrap the question (Dify's classifier sends
    #: it inside JSON): a call asking a question it holds is a call of this turn, and its question the query.
    query_wrapped: bool = False

    def raw(self) -> list[Message]:
        return (
            ([self.query] if self.query is not None else [])
            + self.steps
            + ([self.answer] if self.answer is not None else [])
        )

    @property
    def status(self) -> str:
        """Succeeded when a call did (or none was made: a turn only payloads showed); else the last call's."""
        if not self.calls or any(c.call.status == SUCCEEDED for c in self.calls):
            return SUCCEEDED
        return self.calls[-1].call.status

    @property
    def error(self) -> str | None:
        return None if self.status == SUCCEEDED else self.calls[-1].call.error


class Thread:
    """A captured conversation as it grows: its turns in creation order, its nodes and placed calls,
    and where each message occurs (its index)."""

    def __init__(
        self,
        thread_id: str,
        *,
        pin: str | None = None,
        user: str | None = None,
        name: str = "",
        created_at: float = 0.0,
    ):
        self.id, self.pin, self.user, self.name = thread_id, pin, user, name
        self.created_at = self.updated_at = created_at
        self.turns: list[ThreadTurn] = []
        self.nodes: dict[str, Node] = {}
        self.calls: list[Placed] = []
        self.index: dict[Key, list[Place]] = {}
        self.responses: dict[str, int] = {}  # a Responses API reply's id → its turn
        self.active: int | None = None  # the turn of the newest call
        self.last_called = -1  # the newest turn position with a call
        self.changed: set[int] = set()  # turns written since the recorder last took them
        self.fresh: list[Placed] = []  # calls placed since then
        self.stored_turns: set[str] = set()  # ids of the turns the store holds (the rest are inserted)
        self.in_store = False  # whether the store holds the conversation's row
        self._conversation: Conversation | None = None
        self._built: list[Turn | None] = []  # each turn as a core Turn, made again only once it changed

    # -- its messages ---------------------------------------------------------------------------------
    def messages_of(self, position: int) -> list[Message]:
        """The turn's messages as stored: kinds as the readers give them, refs ``<turn id>:<index>``."""
        turn = self.turns[position]
        msgs, _, _ = turn_messages(turn.raw())
        return [replace(m, ref=f"{turn.id}:{k}") for k, m in enumerate(msgs)]

    def _index_turn(self, position: int, add: bool) -> None:
        for i, m in enumerate(self.turns[position].raw()):
            places = self.index.setdefault(message_key(m), [])
            if add:
                places.append((position, i))
            elif (position, i) in places:
                places.remove((position, i))

    def rewrite(self, position: int, change: Callable[[ThreadTurn], None]) -> None:
        """Change a turn's messages, keeping the index true."""
        self._index_turn(position, False)
        change(self.turns[position])
        self._index_turn(position, True)
        self.changed.add(position)
        self._conversation = None
        self._built[position] = None

    def add_turn(self, turn: ThreadTurn) -> int:
        self.turns.append(turn)
        self._built.append(None)
        position = len(self.turns) - 1
        self._index_turn(position, True)
        self.changed.add(position)
        self._conversation = None
        return position

    def can_grow(self, position: int) -> bool:
        """Whether the turn's message list may still change length: no later turn has a call (whose
        ledger lists every earlier message)."""
        return self.last_called <= position

    def path(self, position: int | None) -> list[int]:
        out = []
        while position is not None:
            out.append(position)
            position = self.turns[position].parent
        out.reverse()
        return out

    def children(self, parent: int | None) -> list[int]:
        return [p for p, t in enumerate(self.turns) if t.parent == parent]

    def conversation(self) -> Conversation:
        """The conversation as MemLens reads every other one (turns in creation order, parent ids)."""
        if self._conversation is None or len(self._conversation.turns) != len(self.turns):
            turns = []
            for p, t in enumerate(self.turns):
                built = self._built[p]
                if built is None or (built.status, built.error) != (t.status, t.error):  # a call joined since
                    msgs, qi, ai = turn_messages(self.messages_of(p))
                    built = self._built[p] = Turn(
                        id=t.id,
                        parent_id=self.turns[t.parent].id if t.parent is not None else None,
                        messages=tuple(msgs),
                        query_index=qi,
                        answer_index=ai,
                        status=t.status,
                        error=t.error,
                        created_at=t.created_at,
                    )
                turns.append(built)
            model = next((n.model for n in self.nodes.values() if n.model), "")
            self._conversation = Conversation(
                id=self.id, turns=turns, source_format="capture", name=self.name, meta={"model": model} if model else {}
            )
        return self._conversation


__all__ = [
    "SUCCEEDED",
    "FAILED",
    "STOPPED",
    "SYSTEM",
    "HISTORY",
    "UNMATCHED",
    "QUERY",
    "STEP",
    "TEMPLATE",
    "SAME_NODE_LIKENESS",
    "ANCHOR_CANDIDATES",
    "NODE_KEY",
    "Key",
    "Place",
    "message_key",
    "Call",
    "Payload",
    "split_payload",
    "Node",
    "node_title",
    "Placed",
    "ThreadTurn",
    "Thread",
]
