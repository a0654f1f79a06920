"""Long-term memory: facts about a user that follow them into new conversations (spec/memory-models.md §B).

A memory store keyed by **user id** — never by conversation id, so every conversation sees the
same memories for a user, and no other user's — within a **namespace**. Mem0 scopes memories by
user (and optionally agent or app); Dify keeps apps apart. So a flow's memory nodes use the app's
own namespace by default (:func:`app_namespace`, what :class:`core.service.sessions.ConversationService`
gives each turn): one app key never recalls what another app's conversations stored. Nodes that
set ``namespace: NAME`` share that namespace with every flow naming it. Memories written before
namespaces existed are in :data:`SHARED` (``""``).

Storing follows Mem0's v1 ("classic") algorithm, because it is the one that records updates and
deletions (v2 is ADD-only, §B.1): facts are extracted from a turn, then each fact is decided
against the user's existing memories, and every change is written to the memory's history with
the turn it came from (Mem0's ``history(memory_id)``, §B.2):

* **NONE** — a memory with the same normalised text already exists (hash of the lower-cased,
  whitespace-collapsed text without final punctuation; Mem0 hashes the raw text with md5);
  nothing is written and no history row is added, as in v1.
* **DELETE** — a fact contradicts an existing one: "I like X" removes "You don't like X" and
  vice versa (the offline stand-in for v1's update-LLM DELETE decision). The new fact is then added.
* **UPDATE** — a *single-valued* fact (name, home, job, an order/booking number, any "my X is Y")
  whose key already has a memory rewrites that memory: new text and hash, same ``created_at``,
  newer ``updated_at``, history row (old, new, UPDATE).
* **ADD** — anything else becomes a new memory. Multi-valued keys (likes, dislikes, allergies,
  diets, "remember …") accumulate.

Facts come from a :class:`FactExtractor`: :class:`OfflineExtractor` (the default: the user
messages' facts as :mod:`core.model.facts` recognises them, deterministic and offline) or
:class:`LLMExtractor` (a model asked for JSON facts through :class:`core.llm.client.LLMClient`; a reply
that is not the expected JSON yields no facts, as Mem0 v1 does).

Retrieval ranks the user's memories against a query with a :class:`Retriever`: offline
:class:`BM25Retriever` by default (Okapi BM25 over the memory texts, no network, no model). An
embedding backend plugs in through :class:`EmbeddingRetriever` and the :class:`EmbeddingBackend`
protocol; MemLens ships none. ``retrieve`` returns the top ``k`` (default 5, the Dify Mem0
plugin's default, §B.5) with scores, best first; equal scores are ordered newest first. Like Mem0
v1 without a threshold, memories that share no word with the query are still returned (score 0)
after the ones that do — the store is small and a new conversation's first question rarely
names the fact it needs. ``threshold`` drops results scoring below it.

Where memories live is a :class:`MemoryBackend`: :class:`InMemoryBackend` here (tests, one
process) and the database one in :mod:`core.store.memories`. The decision logic is the same for
both because it lives in :class:`LongTermMemory`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from core.model.facts import extract_facts, fact_text

from .errors import LongTermMemoryError, MemoryNotFound

if TYPE_CHECKING:  # pragma: no cover
    from core.llm.client import LLMClient

ADD, UPDATE, DELETE, NONE = "ADD", "UPDATE", "DELETE", "NONE"
EVENTS = (ADD, UPDATE, DELETE)
DEFAULT_TOP_K = 5
#: Fact keys that accumulate: a new value is another memory, not an update of the old one.
MULTI_VALUED = frozenset({"like", "dislike", "allergy", "diet", "remember"})
#: Pairs of keys whose facts with the same value contradict each other.
CONTRADICTS = {"like": "dislike", "dislike": "like"}
#: Who made a change, as recorded in the history.
USER_EDIT = "user"
#: The namespace shared by every flow that asks for it (and the one memories written before
#: namespaces existed are in).
SHARED = ""


def app_namespace(flow_id: str) -> str:
    """The default namespace of a flow's memory nodes: the app's own, as Dify isolates apps."""
    return f"app:{flow_id}"


# -- records ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a change came from: the turn (and its conversation and flow) that stated the fact."""

    conversation_id: str | None = None
    turn_id: str | None = None
    flow: str | None = None
    turn: int | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Source":
        data = data or {}
        return cls(**{k: data.get(k) for k in ("conversation_id", "turn_id", "flow", "turn")})

    def label(self, names: Mapping[str, str] | None = None) -> str:
        """Where the change came from in words; a conversation by its name when ``names`` (by id)
        gives one, else by the start of its id."""
        parts = []
        if self.flow:
            parts.append(self.flow)
        if self.turn is not None:
            parts.append(f"turn {self.turn}")
        if self.conversation_id:
            name = (names or {}).get(self.conversation_id)
            parts.append(f"conversation {name}" if name else f"conversation {self.conversation_id[:8]}")
        return " · ".join(parts) or "edited by hand"


@dataclass(frozen=True)
class MemoryItem:
    """One memory (Mem0's MemoryItem, §B.3): its text, the md5 ``hash`` of the normalised text,
    the fact ``key`` it states (``None`` when unknown), and the source of its latest change."""

    id: str
    user_id: str
    memory: str
    hash: str
    key: str | None
    created_at: float
    updated_at: float
    source: Source = field(default_factory=Source)
    namespace: str = SHARED

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "memory": self.memory,
            "hash": self.hash,
            "key": self.key,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "source": self.source.to_dict(),
            "namespace": self.namespace,
        }


@dataclass(frozen=True)
class ScoredMemory:
    """A retrieved memory with its score (``None`` when listed without a query)."""

    item: MemoryItem
    score: float | None

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def memory(self) -> str:
        return self.item.memory

    def to_dict(self) -> dict:
        """The shape of a Dify Mem0 plugin search hit (§B.5): id, memory, score, created_at."""
        return {
            "id": self.item.id,
            "memory": self.item.memory,
            "score": None if self.score is None else round(self.score, 4),
            "key": self.item.key,
            "created_at": self.item.created_at,
        }


@dataclass(frozen=True)
class MemoryEvent:
    """One history row (Mem0's ``history(memory_id)``): what changed, from what to what, and where
    the change came from. ADD rows have no ``old_memory``; DELETE rows no ``new_memory``."""

    memory_id: str
    user_id: str
    event: str
    old_memory: str | None
    new_memory: str | None
    created_at: float
    actor: str
    source: Source = field(default_factory=Source)
    id: int | None = None
    namespace: str = SHARED

    @property
    def is_deleted(self) -> bool:
        return self.event == DELETE

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "memory_id": self.memory_id,
            "user_id": self.user_id,
            "event": self.event,
            "old_memory": self.old_memory,
            "new_memory": self.new_memory,
            "created_at": self.created_at,
            "is_deleted": self.is_deleted,
            "actor": self.actor,
            "source": self.source.to_dict(),
        }


@dataclass(frozen=True)
class UserSummary:
    user_id: str
    memories: int
    updated_at: float
    namespace: str = SHARED


# -- facts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractedFact:
    """A fact to remember: its sentence, and (when known) its key and value."""

    text: str
    key: str | None = None
    value: str | None = None


@runtime_checkable
class FactExtractor(Protocol):
    name: str

    def extract(self, messages: Sequence[Mapping[str, Any]]) -> list[ExtractedFact]:
        """Facts about the user stated in ``messages`` (OpenAI-style dicts), in order."""
        ...


class OfflineExtractor:
    """The facts :mod:`core.model.facts` recognises in the user messages — deterministic and offline."""

    name = "offline"

    def extract(self, messages: Sequence[Mapping[str, Any]]) -> list[ExtractedFact]:
        out: list[ExtractedFact] = []
        for m in messages:
            if m.get("role") != "user":
                continue
            for f in extract_facts(str(m.get("content") or "")):
                out.append(ExtractedFact(text=f.text, key=f.key, value=f.value))
        return out


EXTRACTION_PROMPT = (
    "You extract facts about the user from a conversation, for a long-term memory. Reply with JSON only: "
    '{"facts": [{"key": "<short topic, e.g. name, home, job, order, like>", "text": "<the fact as a sentence '
    'addressed to the user, e.g. Your name is Dana.>"}]}. Only facts the user states about themselves; '
    "an empty list when there are none."
)


class LLMExtractor:
    """Facts extracted by a model through :class:`core.llm.client.LLMClient` (Mem0 v1's first LLM call).

    The reply must be ``{"facts": [...]}`` whose items are sentences or ``{"key", "text"}``
    objects; anything else yields no facts (v1: a parse failure means no facts, not an error).
    """

    name = "llm"

    def __init__(self, client: "LLMClient", model: str):
        self.client = client
        self.model = model

    def extract(self, messages: Sequence[Mapping[str, Any]]) -> list[ExtractedFact]:
        lines = [
            f"{m.get('role')}: {m.get('content')}"
            for m in messages
            if m.get("role") in ("user", "assistant") and m.get("content")
        ]
        if not lines:
            return []
        reply = self.client.complete(
            self.model,
            [{"role": "system", "content": EXTRACTION_PROMPT}, {"role": "user", "content": "\n".join(lines)}],
        )
        return parse_extraction(reply.text)


def parse_extraction(text: str) -> list[ExtractedFact]:
    """The facts of an extraction reply (a JSON object, possibly inside a code fence)."""
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        return []
    if not isinstance(data, Mapping) or not isinstance(data.get("facts"), list):
        return []
    out = []
    for item in data["facts"]:
        if isinstance(item, str) and item.strip():
            out.append(ExtractedFact(text=item.strip()))
        elif isinstance(item, Mapping) and isinstance(item.get("text"), str) and item["text"].strip():
            key = item.get("key")
            out.append(
                ExtractedFact(
                    text=item["text"].strip(),
                    key=str(key).strip().lower() if isinstance(key, str) and key.strip() else None,
                    value=str(item["value"]) if item.get("value") is not None else None,
                )
            )
    return out


def normalise(text: str) -> str:
    """The text two memories are compared by: lower case, single spaces, no final punctuation."""
    return " ".join(text.lower().split()).rstrip(" .!?;:")


def memory_hash(text: str) -> str:
    return hashlib.md5(normalise(text).encode("utf-8")).hexdigest()


# -- retrieval --------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be but by do does did for from have has had how i i'm im is it its me my
mine of on or our so that the their them then there these they this to us was we were what when where which
who whom why will with you your yours about again any can could should would tell know remember am""".split()
)


def terms(text: str) -> list[str]:
    """Index terms: lower-cased words without stop words, a plural ``s`` removed."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


@runtime_checkable
class Retriever(Protocol):
    name: str

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document (higher is better)."""
        ...


class BM25Retriever:
    """Okapi BM25 over the user's memory texts (``k1`` 1.5, ``b`` 0.75, Lucene's non-negative idf)."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        docs = [terms(d) for d in documents]
        n = len(docs)
        if not n:
            return []
        avg = sum(len(d) for d in docs) / n or 1.0
        df: Counter[str] = Counter()
        for d in docs:
            df.update(set(d))
        q = terms(query)
        out = []
        for d in docs:
            tf = Counter(d)
            score = 0.0
            for t in q:
                if not tf[t]:
                    continue
                idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1.0)
                score += idf * tf[t] * (self.k1 + 1) / (tf[t] + self.k1 * (1 - self.b + self.b * len(d) / avg))
            out.append(score)
        return out


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into vectors (a sentence-transformers model, an embeddings API…)."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[Sequence[float]]: ...


class EmbeddingRetriever:
    """Cosine similarity between the query's and the memories' embeddings, from any backend."""

    def __init__(self, backend: EmbeddingBackend):
        self.backend = backend
        self.name = f"embedding:{backend.name}"

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        vectors = self.backend.embed([query, *documents])
        q = vectors[0]
        qn = math.sqrt(sum(x * x for x in q)) or 1.0
        out = []
        for v in vectors[1:]:
            vn = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append(sum(a * b for a, b in zip(q, v)) / (qn * vn))
        return out


# -- storage ----------------------------------------------------------------------------------------


class MemoryBackend(Protocol):
    """Where memories and their history live. ``write`` is all-or-nothing."""

    def memories(self, user_id: str, namespace: str = SHARED) -> list[MemoryItem]:
        """The user's live memories in one namespace (any order)."""
        ...

    def get(self, memory_id: str) -> MemoryItem | None: ...

    def write(self, upserts: Sequence[MemoryItem], deletes: Sequence[str], events: Sequence[MemoryEvent]) -> None: ...

    def history(self, memory_id: str) -> list[MemoryEvent]:
        """History rows of one memory, oldest first (kept after the memory is deleted)."""
        ...

    def user_history(self, user_id: str, namespace: str = SHARED) -> list[MemoryEvent]:
        """Every history row of one user in one namespace, oldest first."""
        ...

    def users(self) -> list[UserSummary]: ...


class InMemoryBackend:
    """Memories in a dict: one process, gone when it ends."""

    def __init__(self) -> None:
        self._items: dict[str, MemoryItem] = {}
        self._events: list[MemoryEvent] = []

    def memories(self, user_id: str, namespace: str = SHARED) -> list[MemoryItem]:
        return [m for m in self._items.values() if m.user_id == user_id and m.namespace == namespace]

    def get(self, memory_id: str) -> MemoryItem | None:
        return self._items.get(memory_id)

    def write(self, upserts, deletes, events) -> None:
        for m in upserts:
            self._items[m.id] = m
        for memory_id in deletes:
            self._items.pop(memory_id, None)
        for e in events:
            self._events.append(replace(e, id=len(self._events) + 1))

    def history(self, memory_id: str) -> list[MemoryEvent]:
        return [e for e in self._events if e.memory_id == memory_id]

    def user_history(self, user_id: str, namespace: str = SHARED) -> list[MemoryEvent]:
        return [e for e in self._events if e.user_id == user_id and e.namespace == namespace]

    def users(self) -> list[UserSummary]:
        out: dict[tuple[str, str], UserSummary] = {}
        for m in self._items.values():
            s = out.get((m.namespace, m.user_id))
            out[(m.namespace, m.user_id)] = UserSummary(
                m.user_id, (s.memories if s else 0) + 1, max(m.updated_at, s.updated_at if s else 0.0), m.namespace
            )
        return sorted(out.values(), key=lambda s: (s.namespace, s.user_id))


# -- the memory -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreResult:
    """What one ``store`` call did: the changes written and the facts that were already known."""

    events: list[MemoryEvent]
    unchanged: list[str]  # texts of facts already remembered (Mem0's NONE)
    facts: list[ExtractedFact]

    def counts(self) -> dict[str, int]:
        return {e: sum(1 for x in self.events if x.event == e) for e in EVENTS}


def _user(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise LongTermMemoryError(
            "long-term memory is keyed by user id: pass a non-empty user id (memories are never keyed by conversation)"
        )
    return user_id


def _namespace(namespace: Any) -> str:
    if not isinstance(namespace, str) or len(namespace) > 255:
        raise LongTermMemoryError(f"a memory namespace is a text of at most 255 characters, not {namespace!r}")
    return namespace.strip()


def _messages(messages: Any) -> list[dict]:
    """Mem0's accepted shapes: a string (one user message), a dict, or a list of dicts."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, Mapping) for m in messages):
        raise LongTermMemoryError("messages must be a string, a {role, content} mapping or a list of them")
    out = []
    for i, m in enumerate(messages, start=1):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            raise LongTermMemoryError(
                f"message {i} has role {m.get('role')!r}; expected user, assistant, system or tool"
            )
        out.append({"role": m["role"], "content": "" if m.get("content") is None else str(m.get("content"))})
    return out


class LongTermMemory:
    """A per-user memory store with Mem0 v1 semantics (see the module docstring), seen through one
    ``namespace``: what is stored here is recalled only through the same namespace."""

    def __init__(
        self,
        backend: MemoryBackend | None = None,
        *,
        extractor: FactExtractor | None = None,
        retriever: Retriever | None = None,
        namespace: str = SHARED,
    ):
        self.backend: MemoryBackend = backend if backend is not None else InMemoryBackend()
        self.extractor: FactExtractor = extractor or OfflineExtractor()
        self.retriever: Retriever = retriever or BM25Retriever()
        self.namespace = _namespace(namespace)

    def in_namespace(self, namespace: str) -> "LongTermMemory":
        """The same store seen through another namespace."""
        return LongTermMemory(self.backend, extractor=self.extractor, retriever=self.retriever, namespace=namespace)

    # -- writing
    def store(
        self, user_id: str, messages: Any, *, source: Source | None = None, extractor: FactExtractor | None = None
    ) -> StoreResult:
        """Extract facts from ``messages`` and apply them to ``user_id``'s memories (one transaction)."""
        user_id = _user(user_id)
        msgs = _messages(messages)
        ext = extractor or self.extractor
        facts = ext.extract(msgs)
        return self._apply(user_id, facts, source or Source(), f"extractor:{ext.name}")

    def add(self, user_id: str, text: str, *, key: str | None = None, source: Source | None = None) -> StoreResult:
        """Remember one fact as given (a hand-written memory), with the same dedup and update rules."""
        user_id = _user(user_id)
        if not isinstance(text, str) or not text.strip():
            raise LongTermMemoryError("a memory needs some text")
        return self._apply(user_id, [ExtractedFact(text=text.strip(), key=key)], source or Source(), USER_EDIT)

    def _apply(self, user_id: str, facts: Sequence[ExtractedFact], source: Source, actor: str) -> StoreResult:
        ns = self.namespace
        live = {m.id: m for m in self.backend.memories(user_id, ns)}
        upserts: dict[str, MemoryItem] = {}
        deletes: list[str] = []
        events: list[MemoryEvent] = []
        unchanged: list[str] = []
        stamp = _clock()
        for fact in facts:
            h = memory_hash(fact.text)
            if any(m.hash == h for m in live.values()):
                unchanged.append(fact.text)
                continue
            opposite = CONTRADICTS.get(fact.key or "")
            if opposite and fact.value:
                for m in list(live.values()):
                    if m.key == opposite and memory_hash(fact_text(opposite, fact.value)) == m.hash:
                        del live[m.id]
                        upserts.pop(m.id, None)
                        deletes.append(m.id)
                        events.append(
                            MemoryEvent(m.id, user_id, DELETE, m.memory, None, stamp, actor, source, namespace=ns)
                        )
            target = None
            if fact.key and fact.key not in MULTI_VALUED:
                target = next((m for m in sorted(live.values(), key=lambda m: m.created_at) if m.key == fact.key), None)
            if target is not None:
                updated = replace(
                    target, memory=fact.text, hash=h, updated_at=max(stamp, target.updated_at + 1e-6), source=source
                )
                live[target.id] = upserts[target.id] = updated
                events.append(
                    MemoryEvent(
                        target.id, user_id, UPDATE, target.memory, fact.text, stamp, actor, source, namespace=ns
                    )
                )
            else:
                item = MemoryItem(
                    id=str(uuid.uuid4()),
                    user_id=user_id,
                    memory=fact.text,
                    hash=h,
                    key=fact.key,
                    created_at=stamp,
                    updated_at=stamp,
                    source=source,
                    namespace=ns,
                )
                live[item.id] = upserts[item.id] = item
                events.append(MemoryEvent(item.id, user_id, ADD, None, fact.text, stamp, actor, source, namespace=ns))
        if events:
            self.backend.write([m for m in upserts.values() if m.id not in deletes], deletes, events)
        return StoreResult(events=events, unchanged=unchanged, facts=list(facts))

    def update(self, memory_id: str, text: str, *, actor: str = USER_EDIT, source: Source | None = None) -> MemoryEvent:
        """Rewrite one memory's text (Mem0 ``update``): same id and ``created_at``, UPDATE history row."""
        if not isinstance(text, str) or not text.strip():
            raise LongTermMemoryError("a memory needs some text; delete it instead of emptying it")
        item = self.get(memory_id)
        text = text.strip()
        stamp = _clock()
        updated = replace(
            item,
            memory=text,
            hash=memory_hash(text),
            updated_at=max(stamp, item.updated_at + 1e-6),
            source=source or Source(),
        )
        event = MemoryEvent(
            item.id, item.user_id, UPDATE, item.memory, text, stamp, actor, source or Source(), namespace=item.namespace
        )
        self.backend.write([updated], [], [event])
        return event

    def delete(self, memory_id: str, *, actor: str = USER_EDIT, source: Source | None = None) -> MemoryEvent:
        """Remove one memory (Mem0 ``delete``); its history stays, ending with a DELETE row."""
        item = self.get(memory_id)
        event = MemoryEvent(
            item.id,
            item.user_id,
            DELETE,
            item.memory,
            None,
            _clock(),
            actor,
            source or Source(),
            namespace=item.namespace,
        )
        self.backend.write([], [item.id], [event])
        return event

    # -- reading
    def get(self, memory_id: str) -> MemoryItem:
        item = self.backend.get(memory_id)
        if item is None:
            raise MemoryNotFound(
                f"no memory with id {memory_id!r} (it may have been deleted); list a user's memories to find its id"
            )
        return item

    def find(self, memory_id: str) -> MemoryItem | None:
        return self.backend.get(memory_id)

    def memories(self, user_id: str, search: str | None = None) -> list[MemoryItem]:
        """The user's memories, most recently changed first; ``search`` keeps those containing it
        (case-insensitive)."""
        items = self.backend.memories(_user(user_id), self.namespace)
        if search and search.strip():
            needle = search.strip().lower()
            items = [m for m in items if needle in m.memory.lower() or needle in (m.key or "").lower()]
        return sorted(items, key=lambda m: (-m.updated_at, m.id))

    def retrieve(
        self, user_id: str, query: str, k: int = DEFAULT_TOP_K, *, threshold: float | None = None
    ) -> list[ScoredMemory]:
        """The top ``k`` of the user's memories for ``query``, best first, with scores."""
        user_id = _user(user_id)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise LongTermMemoryError(f"k must be a whole number of memories, 0 or more (not {k!r})")
        if not isinstance(query, str):
            raise LongTermMemoryError("the query must be text")
        items = self.backend.memories(user_id, self.namespace)
        scores = self.retriever.scores(query, [m.memory for m in items])
        # Ties (facts stated in one message share a score and a time) by their text, not their random ids:
        # the same memories are recalled in the same order in every store.
        ranked = sorted(zip(items, scores), key=lambda x: (-x[1], -x[0].updated_at, x[0].memory, x[0].id))
        out = [ScoredMemory(m, s) for m, s in ranked if threshold is None or s >= threshold]
        return out[:k]

    def recent(self, user_id: str, k: int = DEFAULT_TOP_K) -> list[ScoredMemory]:
        """The ``k`` most recently changed memories, unscored (what a query-less recall shows)."""
        return [ScoredMemory(m, None) for m in self.memories(user_id)[:k]]

    def history(self, memory_id: str) -> list[MemoryEvent]:
        return sorted(self.backend.history(memory_id), key=lambda e: (e.created_at, e.id or 0))

    def deleted(self, user_id: str) -> list[MemoryEvent]:
        """The DELETE rows of the user's memories that are gone (newest first)."""
        gone = [e for e in self.backend.user_history(_user(user_id), self.namespace) if e.event == DELETE]
        live = {m.id for m in self.backend.memories(user_id, self.namespace)}
        return sorted([e for e in gone if e.memory_id not in live], key=lambda e: -e.created_at)

    def users(self) -> list[UserSummary]:
        """Every (namespace, user) with memories, across namespaces."""
        return self.backend.users()


_last_clock = 0.0


def _clock() -> float:
    """Wall-clock time that never repeats or goes back within the process (history order)."""
    global _last_clock
    t = max(time.time(), _last_clock + 1e-6)
    _last_clock = t
    return t


# -- what a prompt gets -----------------------------------------------------------------------------


def memories_text(results: Sequence[ScoredMemory]) -> str:
    """The retrieved memories as prompt text: one memory per line, best first. No bullets: each
    line stays the sentence it was stored as ("Your name is Dana."), which is also what lets the
    demo model read it back when a prompt gives it as an assistant message."""
    return "\n".join(r.memory for r in results)


@dataclass(frozen=True)
class RecallPreview:
    """What the bot would recall for a user at the start of a new conversation."""

    user_id: str
    query: str | None
    results: list[ScoredMemory]
    total: int  # the user's memories in the store

    @property
    def text(self) -> str:
        return memories_text(self.results)


def recall_preview(
    user_id: str, query: str | None = None, *, store: LongTermMemory, k: int = DEFAULT_TOP_K
) -> RecallPreview:
    """The memories a memory-retrieve step would give a new conversation of ``user_id``.

    With a query: exactly what ``retrieve(user_id, query, k)`` returns, with scores. Without one
    (nothing typed yet): the ``k`` most recently changed memories, unscored.
    """
    user_id = _user(user_id)
    total = len(store.memories(user_id))
    if query is None or not query.strip():
        return RecallPreview(user_id, None, store.recent(user_id, k), total)
    return RecallPreview(user_id, query, store.retrieve(user_id, query, k), total)


__all__ = [
    "ADD",
    "UPDATE",
    "DELETE",
    "NONE",
    "DEFAULT_TOP_K",
    "MULTI_VALUED",
    "Source",
    "MemoryItem",
    "ScoredMemory",
    "MemoryEvent",
    "UserSummary",
    "ExtractedFact",
    "FactExtractor",
    "OfflineExtractor",
    "LLMExtractor",
    "parse_extraction",
    "normalise",
    "memory_hash",
    "terms",
    "Retriever",
    "BM25Retriever",
    "EmbeddingBackend",
    "EmbeddingRetriever",
    "MemoryBackend",
    "InMemoryBackend",
    "StoreResult",
    "LongTermMemory",
    "memories_text",
    "RecallPreview",
    "recall_preview",
    "SHARED",
    "app_namespace",
]
