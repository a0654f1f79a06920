"""Conversations as Dify models them: a tree of turns (message records) with parent ids.

A turn is one Dify ``Message`` row: the user's query, whatever the turn produced on the way
(assistant tool calls, tool results, reasoning) and a final answer. Turns are kept in creation
order; ``parent_id`` links them into a tree. Which turns form the *thread* that feeds memory
follows Dify's ``extract_thread_messages`` exactly (spec/dify-memory.md §1.3):

* a NULL or empty parent ends the walk (the turn is a thread root);
* ``UUID_NIL`` means "legacy/linear": the next older turn is taken, whatever its id;
* any other parent id is followed; turns in between are on other branches.

Because the walk goes from newer to older rows, a parent that is newer than its child (or
missing) ends the thread, exactly as the walk would. The walk also stops at *any* row with a
NULL parent it meets on the way, even one on another branch — a Dify quirk we keep.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

UUID_NIL = "00000000-0000-0000-0000-000000000000"

#: Message kinds. ``query`` and ``answer`` are what Dify replays; the rest are intermediate
#: messages a turn produced, which ``query_answer`` granularity leaves out.
QUERY = "query"
ANSWER = "answer"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
REASONING = "reasoning"
INTERMEDIATE = "intermediate"  # an assistant/system message that is neither final nor a tool call
#: ``Turn.meta`` key: how many agent thoughts (a Dify Agent app's steps) a turn's messages came from. A
#: turn with thoughts replays its final thought even when empty; one without, an empty answer never.
AGENT_THOUGHTS = "agent_thoughts"
#: Sources whose app sends the model the whole thread, every tool step included (Claude Code, until
#: ``/compact`` starts a thread of its own; Open WebUI, which sends the current branch's every message;
#: LibreChat, which sends the branch up from the new message, cut to the model's context only when it
#: overflows; a LangSmith LLM run, a Langfuse generation or a Dify node run, which is one call's prompt
#: exactly as sent): replayed by default as everything on the thread.
#: ``Conversation.meta`` key: the model the source says answered (a traced call's, a chat app's), which
#: the conversation is counted and replayed for when no flow says otherwise.
SOURCE_MODEL = "model"


def source_model(meta: Mapping) -> str | None:
    """The model a conversation's (or a stored conversation's) meta says answered, if it names one."""
    model = meta.get(SOURCE_MODEL)
    return model if isinstance(model, str) and model else None


WHOLE_THREAD_SOURCES = frozenset({"claude-code", "open-webui", "librechat", "langsmith", "langfuse", "dify-node-runs"})
#: The platform whose memory kept a source's conversations, by source format (what the store keeps of
#: an import), so the conversation can be opened with that platform's memory.
SOURCE_PLATFORMS = {
    "n8n-chat-histories": "n8n",
    "n8n-execution": "n8n",
    "flowise-messages": "flowise",
    "openai-agents": "openai_agents",
    "llamaindex-chat-store": "llamaindex",
    "langgraph-checkpoint": "langgraph",
}


def source_platform(source_format: str) -> str | None:
    """The platform (``n8n``, ``flowise``, ``openai_agents``, ``llamaindex``, ``langgraph``) whose memory kept a
    conversation of this source format, if any."""
    return SOURCE_PLATFORMS.get(source_format)


#: ``Turn.meta`` key: the answer a user was shown, when the turn's messages replay another (an agent's final
#: thought, not the answer that joins every step's text).
SHOWN_ANSWER = "shown_answer"

ROLES = ("system", "user", "assistant", "tool")


class _NoMeta(dict):
    """The meta of every turn built without one: one shared empty dict, not one per turn (an empty
    dict per turn would weigh on a long conversation beside its chat-sized messages). Read-only, so no turn
    writes into all the others'; merging it (``{**meta, …}``, ``meta | …``) gives a plain dict."""

    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError(
            "this turn was built without meta, and the shared empty one is read-only: build the turn with meta={...}"
        )

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _read_only

    def __reduce__(self):
        return _no_meta, ()  # copied and pickled as the shared one


NO_META = _NoMeta()


def _no_meta() -> dict:
    return NO_META


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file attached to a message (Dify ``message_files``): an image, a document, …"""

    type: str
    url: str = ""
    id: str = ""
    name: str = ""  # the file's name, when known (an upload's original name)

    def to_dict(self) -> dict:
        out = {"type": self.type, "url": self.url, "id": self.id}
        if self.name:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, d, default_type: str = "file") -> "FileRef":
        return cls(
            str(d.get("type") or default_type),
            str(d.get("url") or ""),
            str(d.get("id") or ""),
            str(d.get("name") or ""),
        )


class _Same:
    """The default of :class:`Message`'s less common fields: "as ``extra`` has it" (a copy made by
    ``dataclasses.replace`` passes the old ``extra`` along with the fields it changes)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<as extra has it>"


_SAME = _Same()
#: ``(name, tool_calls, tool_call_id, files, usage)`` of a message that has none of them.
_PLAIN = (None, (), None, (), None)


@dataclass(frozen=True, slots=True, init=False)
class Message:
    """One message as a model would receive it, plus where it came from.

    ``ref`` identifies the message in its source: the 0-based index in an OpenAI message list,
    or ``"<message id>:query"`` / ``"<message id>:answer"`` for Dify records. ``usage`` is what
    the provider reported for a model reply, ``(input, output)`` tokens, when it was recorded
    (Dify's agent compaction anchors its estimate on it).

    ``name``, ``tool_calls``, ``tool_call_id``, ``files`` and ``usage`` are held together in
    ``extra``, which is ``None`` when the message has none of them: most messages have none, and a
    slot each for fields that are almost always empty would weigh on a long conversation. They are read, given and compared as
    fields all the same (``Message(..., tool_calls=...)``, ``dataclasses.replace(m, files=...)``).
    """

    role: str
    content: str
    kind: str
    ref: int | str
    extra: tuple | None = None  # (name, tool_calls, tool_call_id, files, usage), None when all are unset

    def __init__(
        self,
        role: str,
        content: str,
        kind: str,
        ref: int | str,
        name: str | None | _Same = _SAME,
        tool_calls: tuple[ToolCall, ...] | _Same = _SAME,
        tool_call_id: str | None | _Same = _SAME,
        files: tuple[FileRef, ...] | _Same = _SAME,
        usage: tuple[int, int] | None | _Same = _SAME,
        extra: tuple | None = None,
    ):
        if not (name is tool_calls is tool_call_id is files is usage is _SAME and extra is None):
            given = (name, tool_calls, tool_call_id, files, usage)
            merged = tuple(old if new is _SAME else new for new, old in zip(given, extra or _PLAIN))
            extra = None if merged == _PLAIN else merged
        setattr = object.__setattr__
        setattr(self, "role", role)
        setattr(self, "content", content)
        setattr(self, "kind", kind)
        setattr(self, "ref", ref)
        setattr(self, "extra", extra)

    @property
    def name(self) -> str | None:
        return None if self.extra is None else self.extra[0]

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return () if self.extra is None else self.extra[1]

    @property
    def tool_call_id(self) -> str | None:
        return None if self.extra is None else self.extra[2]

    @property
    def files(self) -> tuple[FileRef, ...]:
        return () if self.extra is None else self.extra[3]

    @property
    def usage(self) -> tuple[int, int] | None:
        return None if self.extra is None else self.extra[4]

    @property
    def is_empty(self) -> bool:
        # Dify's filter drops a message whose content is empty unless it carries tool calls.
        return not self.content and not self.tool_calls

    def to_dict(self, *, exchanged_only: bool = False) -> dict:
        """The message as stored and exported (every field; absent ones left out).

        ``exchanged_only`` leaves out what only a recording holds — the files sent with it and the
        provider's usage — as an agent's state and outputs do."""
        out: dict = {"role": self.role, "content": self.content, "kind": self.kind, "ref": self.ref}
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if exchanged_only:
            return out
        if self.files:
            out["files"] = [f.to_dict() for f in self.files]
        if self.usage:
            out["usage"] = list(self.usage)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Message":
        """The inverse of :meth:`to_dict` (the input is trusted: validate untrusted documents first)."""
        calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in d.get("tool_calls") or [])
        files = tuple(FileRef.from_dict(f) for f in d.get("files") or [])
        return cls(
            role=d["role"],
            content=d.get("content") or "",
            kind=d.get("kind") or "",
            ref=d.get("ref", ""),
            name=d.get("name"),
            tool_calls=calls,
            tool_call_id=d.get("tool_call_id"),
            files=files,
            usage=tuple(d["usage"]) if d.get("usage") else None,
        )

    def to_openai(self) -> dict:
        out: dict = {"role": self.role, "content": self.content}
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out


def message_text(message: Message) -> str:
    """A message as a person reads it: its text, then each tool call it makes as ``→ name(arguments)``
    (a step that only calls a tool has no text, and is not empty)."""
    calls = " ".join(f"→ {c.name}({c.arguments})" for c in message.tool_calls)
    return f"{message.content} {calls}" if message.content and calls else message.content or calls


def turn_messages(group: list[Message]) -> tuple[tuple[Message, ...], int | None, int | None]:
    """A turn's messages with their kinds, its query index and its answer index.

    The turn starts with its query when the first message is the user's; its answer is the last
    assistant message that is not reasoning, unless that message calls a tool: a turn that ends
    in a tool step (a log cut mid-run, a training example that stops at the call) has no answer
    yet. The rest keep what they are (reasoning, tool call, tool result) or are intermediate.
    """
    has_query = bool(group) and group[0].role == "user"
    last_assistant = max(
        (k for k, m in enumerate(group) if m.role == "assistant" and m.kind != REASONING), default=None
    )
    if last_assistant is not None and group[last_assistant].tool_calls:
        last_assistant = None
    msgs = []
    for k, m in enumerate(group):
        if k == 0 and has_query:
            kind = QUERY
        elif k == last_assistant:
            kind = ANSWER
        elif m.kind == REASONING:
            kind = REASONING
        elif m.role == "tool":
            kind = TOOL_RESULT
        elif m.tool_calls:
            kind = TOOL_CALL
        else:
            kind = INTERMEDIATE
        msgs.append(replace(m, kind=kind))
    return tuple(msgs), 0 if has_query else None, last_assistant


@dataclass(frozen=True, slots=True)
class Turn:
    """One message record: a query, what the turn produced, and its final answer.

    ``messages`` is in the order the turn produced them. ``query_index`` and ``answer_index``
    point into it (``None`` when the turn has no query — the assistant's opening before the
    first user message — or no assistant reply at all).
    """

    id: str
    parent_id: str | None
    messages: tuple[Message, ...]
    query_index: int | None = 0
    answer_index: int | None = None
    status: str = "normal"
    error: str | None = None
    created_at: float | None = None
    answer_tokens: int | None = None
    meta: dict = field(default_factory=_no_meta, compare=False, hash=False)

    @property
    def query(self) -> str:
        return self.messages[self.query_index].content if self.query_index is not None else ""

    @property
    def answer(self) -> str:
        return self.messages[self.answer_index].content if self.answer_index is not None else ""

    @property
    def shown_answer(self) -> str:
        """The answer as the user saw it (:data:`SHOWN_ANSWER`, else :attr:`answer`)."""
        return self.meta.get(SHOWN_ANSWER, self.answer)

    @property
    def query_message(self) -> Message | None:
        return self.messages[self.query_index] if self.query_index is not None else None

    @property
    def answer_message(self) -> Message | None:
        return self.messages[self.answer_index] if self.answer_index is not None else None


@dataclass(slots=True)
class Conversation:
    """A conversation: its turns in creation order and the node's system prompt.

    ``turns[0]`` may be an *opening* turn without a query (assistant messages before the first
    user message); it is history for later turns but is never itself answered.
    """

    id: str
    turns: list[Turn]
    system_prompt: str = ""
    source_format: str = ""
    name: str = ""
    meta: dict = field(default_factory=dict)
    _tree: "ThreadIndex | None" = field(default=None, repr=False)
    #: How many turns :meth:`one_thread` last found to be one thread from their parent ids (-1: none).
    _one_thread_at: int = field(default=-1, repr=False, compare=False)
    #: Running totals of the messages' tokens in position order, by counting model
    #: (:func:`core.model.tokens.message_token_sums`).
    _token_sums: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def tree(self) -> "ThreadIndex":
        if self._tree is None or self._tree.size != len(self.turns):
            self._tree = ThreadIndex(self.turns)
        return self._tree

    def one_thread(self) -> bool:
        """Whether every turn's thread is all the turns before it, in order (a conversation that
        never branched; not an empty one): what :attr:`tree` says, told without building it when
        each turn names the one before it (the index holds about a quarter as much as the texts of a
        conversation of chat-sized messages)."""
        turns = self.turns
        if self._one_thread_at == len(turns):  # turns are only ever added: none was added since
            return True
        if self._tree is None and turns:
            prev = turns[0].id
            for t in turns[1:]:
                p = t.parent_id
                if not (p and p == prev or p == UUID_NIL):
                    break
                prev = t.id
            else:  # each turn follows the one before it, and that one is the first turn with its id
                if len({t.id for t in turns}) == len(turns):
                    self._one_thread_at = len(turns)
                    return True
        tree = self.tree
        return bool(tree.size) and not tree.thread_children.more and tree.thread_parent.count(None) == 1

    def with_turn(self, turn: Turn, **changes) -> "Conversation":
        """A new conversation: this one with ``turn`` appended (and ``changes`` to its other
        fields); its tree is extended, not rebuilt, so a long conversation's next turn stays cheap."""
        kept = {
            "id": self.id,
            "system_prompt": self.system_prompt,
            "source_format": self.source_format,
            "name": self.name,
            "meta": dict(self.meta),
        }
        return Conversation(turns=[*self.turns, turn], _tree=self.tree.extended(turn), **{**kept, **changes})

    def answered_turns(self) -> list[int]:
        """Positions of the turns that have a query (the ones a model was asked to answer)."""
        return [i for i, t in enumerate(self.turns) if t.query_index is not None]

    def index_of(self, turn_id: str) -> int:
        return self.tree.position[turn_id]


class ChildLists:
    """Each turn's children in creation order: ``lists[i]`` is a new list of them each time.

    Most turns have one child or none, so the first child of every turn is one machine integer
    in an array (-1: none) and only a branch point's other children are listed, in a dict: a
    list object per turn held a long conversation's tree in more memory than its messages' ids.
    """

    __slots__ = ("first", "more")

    def __init__(self, first: array | None = None, more: dict[int, list[int]] | None = None):
        self.first = first if first is not None else array("q")
        self.more: dict[int, list[int]] = more if more is not None else {}

    def __len__(self) -> int:
        return len(self.first)

    def __getitem__(self, i: int) -> list[int]:
        head = self.first[i]
        if head < 0:
            return []
        more = self.more.get(i % len(self.first))
        return [head, *more] if more else [head]

    def append_turn(self) -> None:
        self.first.append(-1)

    def add(self, parent: int, child: int) -> None:
        """``child`` becomes ``parent``'s newest child."""
        if self.first[parent] < 0:
            self.first[parent] = child
        else:
            self.more.setdefault(parent, []).append(child)

    def copy(self) -> "ChildLists":
        """A copy whose additions leave this one as it is."""
        return ChildLists(array("q", self.first), {k: list(v) for k, v in self.more.items()})


class ThreadIndex:
    """The conversation's tree and Dify's thread rule, precomputed.

    ``thread_parent[i]`` is the position of the turn Dify's walk keeps right after turn ``i``
    (``None`` when the walk stops there). The thread of turn ``i`` is the chain ``i,
    thread_parent[i], …`` — identical to ``extract_thread_messages`` over turns ``0..i``
    ordered newest first. That walk checks *every* row it meets for a NULL parent and stops
    there, even on a row of another branch; so after a newer root the walk cannot reach an
    older branch's messages. We reproduce that quirk; the tree the user sees (``parent``,
    ``children``, ``siblings``) follows the stated parent ids instead.
    """

    def __init__(self, turns: Sequence[Turn]):
        self.size = 0
        self.position: dict[str, int] = {}
        self.parent: list[int | None] = []
        self.thread_parent: list[int | None] = []
        # Machine integers (arrays), not a list of int objects per field: a long conversation's
        # index would otherwise hold more than its messages' ids.
        self.depth = array("q")  # thread length ending at the turn, the turn included (sys.dialogue_count)
        # Length of the branch as the user sees it (stated parents), the turn included: its label.
        self.path_depth = array("q")
        self.path_root = array("q")
        self.children = ChildLists()
        self.thread_children = ChildLists()
        self._last_root = -1  # newest row so far whose parent is NULL or empty
        for t in turns:
            self._add(t)

    def _add(self, t: Turn) -> None:
        """Index one more turn (the newest): every rule looks only at older turns, so a turn's
        entries never change once it is indexed."""
        i = self.size
        self.size += 1
        self.position.setdefault(t.id, i)
        p = t.parent_id
        if not p:
            stated = walk = None
        elif p == UUID_NIL:
            stated = walk = i - 1 if i > 0 else None
        else:
            j = self.position.get(p)
            stated = j if j is not None and j < i else None
            # The walk scans older rows for the parent id but stops at the first NULL-parent row.
            best = max(self._last_root, stated if stated is not None else -1)
            walk = best if best >= 0 else None
        if not p:
            self._last_root = i
        self.parent.append(stated)
        self.thread_parent.append(walk)
        self.depth.append(1 if walk is None else self.depth[walk] + 1)
        self.path_depth.append(1 if stated is None else self.path_depth[stated] + 1)
        self.path_root.append(i if stated is None else self.path_root[stated])
        self.children.append_turn()
        self.thread_children.append_turn()
        if stated is not None:
            self.children.add(stated, i)
        if walk is not None:
            self.thread_children.add(walk, i)

    def extended(self, turn: Turn) -> "ThreadIndex":
        """This index with ``turn`` appended, leaving this one as it is: a copy of the index's
        lists (not a walk over the turns), so appending to a long conversation stays cheap."""
        out = ThreadIndex.__new__(ThreadIndex)
        out.size, out._last_root = self.size, self._last_root
        out.position = dict(self.position)
        for name in ("parent", "thread_parent", "depth", "path_depth", "path_root"):
            setattr(out, name, getattr(self, name)[:])
        out.children, out.thread_children = self.children.copy(), self.thread_children.copy()
        out._add(turn)
        return out

    def thread(self, i: int) -> list[int]:
        """Positions of the thread ending at turn ``i``, oldest first (Dify's walk)."""
        return _ancestry(self.thread_parent, i)

    def path(self, i: int) -> list[int]:
        """Turn ``i`` and its stated ancestors, oldest first: the branch as the user sees it."""
        return _ancestry(self.parent, i)

    def active_leaf(self, i: int) -> int:
        """Newest descendant reached by always following the newest child (Dify web's rule)."""
        cur = i
        while self.children[cur]:
            cur = self.children[cur][-1]
        return cur

    def thread_through(self, i: int) -> list[int]:
        """The branch that contains turn ``i`` and continues to its newest descendant."""
        return self.path(self.active_leaf(i))

    def siblings(self, i: int) -> list[int]:
        """Turns that share turn ``i``'s parent (roots are siblings of each other)."""
        p = self.parent[i]
        if p is None:
            return [j for j in range(self.size) if self.parent[j] is None]
        return list(self.children[p])


def _ancestry(parents: list[int | None], i: int) -> list[int]:
    """Turn ``i`` and the ancestors ``parents`` links it to, oldest first."""
    chain: list[int] = []
    cur: int | None = i
    while cur is not None:
        chain.append(cur)
        cur = parents[cur]
    chain.reverse()
    return chain


def extract_thread(rows_newest_first: Iterable[Turn]) -> list[Turn]:
    """Dify's ``extract_thread_messages``, literally: rows newest first in, thread newest first out.

    Kept as the reference the precomputed :class:`ThreadIndex` is tested against.
    """
    thread: list[Turn] = []
    expected: str | None = None
    for row in rows_newest_first:
        if not row.parent_id:
            thread.append(row)
            break
        if expected is None:
            thread.append(row)
            expected = row.parent_id
        elif expected == row.id or expected == UUID_NIL:
            thread.append(row)
            expected = row.parent_id
    return thread


def with_shared_ids(turns: Iterable[Turn]) -> list[Turn]:
    """``turns``, each parent id that names one of them made the very string of that turn's id: an
    equal string read from a file is another object, held twice over a long conversation. Nothing
    else changes."""
    turns = list(turns)
    ids = {t.id: t.id for t in turns}
    out = []
    for t in turns:
        shared = ids.get(t.parent_id) if t.parent_id is not None else None
        out.append(t if shared is None or shared is t.parent_id else replace(t, parent_id=shared))
    return out


def read_once(turns: Iterable[Turn]) -> tuple[list[Turn], list[str]]:
    """``turns`` with each turn id once, and the ids of the turns left out. A turn listed again
    exactly as before is read once (an export whose pages overlap lists a message record twice;
    the app stored it once): kept, the copy would be a sibling of the first, a branch the
    conversation never had. A turn id listed twice with different contents raises
    :class:`ValueError` saying which: neither copy can be told to be the one the app stored."""
    out: list[Turn] = []
    held: dict[str, Turn] = {}
    repeated: list[str] = []
    for t in turns:
        first = held.get(t.id)
        if first is None:
            held[t.id] = t
            out.append(t)
        elif first == t:
            repeated.append(t.id)
        else:
            shown = t.id if len(t.id) <= 60 else t.id[:59] + "…"
            raise ValueError(
                f"turn {shown!r} is listed twice with different contents; list each turn (message record) once"
            )
    return out, repeated


def active_thread(conversation: Conversation) -> list[int]:
    """Positions of the branch a person is looking at, oldest first: the one ending at
    ``meta["active_turn_id"]`` (the store's active turn, an export's current node), else at the
    newest turn."""
    if not conversation.turns:
        return []
    tree = conversation.tree
    active = (conversation.meta or {}).get("active_turn_id")
    return tree.path(tree.position.get(active, len(conversation.turns) - 1) if active else len(conversation.turns) - 1)


def leaves(conversation: Conversation) -> list[int]:
    """Positions of the turns that end a branch, in creation order."""
    tree = conversation.tree
    return [i for i in range(tree.size) if not tree.children[i]]


def thread_number(conversation: Conversation, position: int) -> int:
    """The turn's place on its own thread as :func:`turn_label` says it: 1 for the first question,
    0 for an opening turn without a query."""
    tree = conversation.tree
    opening = conversation.turns[tree.path_root[position]].query_index is None
    return tree.path_depth[position] - (1 if opening else 0)


def turn_label(conversation: Conversation, position: int) -> str:
    """A turn as a person counts it: its place on its own thread, and which sibling it is.

    ``"turn 6"`` on a linear thread, ``"turn 6 · 2/3"`` for the second of three answers to the same
    message (regenerated or edited). An opening turn without a query is turn 0, so the first
    question is turn 1 either way. Creation order never shows: a sibling of turn 6 made after
    turn 9 is still turn 6.
    """
    number = thread_number(conversation, position)
    siblings = conversation.tree.siblings(position)
    if len(siblings) > 1:
        return f"turn {number} · {siblings.index(position) + 1}/{len(siblings)}"
    return f"turn {number}"
