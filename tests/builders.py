"""Small constructors for conversations used across tests."""

from __future__ import annotations

import json

from core.io import parse_conversations
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn


def record(
    mid: str,
    parent: str | None,
    query: str = "",
    answer: str = "",
    *,
    status: str = "normal",
    answer_tokens: int | None = None,
) -> Turn:
    """A Dify message record (query + answer) with a parent id."""
    return Turn(
        id=mid,
        parent_id=parent,
        messages=(
            Message("user", query or f"question {mid}", QUERY, f"{mid}:query"),
            Message("assistant", answer, ANSWER, f"{mid}:answer"),
        ),
        query_index=0,
        answer_index=1,
        status=status,
        answer_tokens=answer_tokens,
    )


def dify(rows, system: str = "") -> Conversation:
    turns = [r if isinstance(r, Turn) else record(*r) for r in rows]
    return Conversation(id="c", turns=turns, system_prompt=system, source_format="dify-messages")


def linear(n: int, *, answer=lambda i: f"answer number {i}", query=lambda i: f"question number {i}") -> Conversation:
    rows = []
    for i in range(1, n + 1):
        rows.append((str(i), str(i - 1) if i > 1 else None, query(i), answer(i)))
    return dify(rows)


def openai(messages: list[dict]) -> Conversation:
    return parse_conversations(json.dumps(messages), name="test.json")[0]


def branched(turns: int) -> Conversation:
    """Every fifth turn answers the turn three back (a branch), the rest the turn before."""
    rows = []
    for i in range(1, turns + 1):
        parent = None if i == 1 else str(i - 3 if i % 5 == 0 and i > 3 else i - 1)
        rows.append((str(i), parent, f"question {i} " * (i % 7 + 1), f"answer {i} " * (i % 11 + 1)))
    return dify(rows)


def places(value, path=()):
    """Every place in a JSON-like value, as the path of keys and indexes to it (the root first)."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from places(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from places(v, path + (i,))


def put(doc, path, value):
    """``doc`` with ``value`` at ``path`` (in place; the value itself when ``path`` is the root)."""
    if not path:
        return value
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


# -- differential import tests: the tau-bench sample read through another provider's translation -------


def translated_reads_alike(translate, *, ids: bool = True, as_sent=lambda text: text) -> int:
    """Each tau-bench sample conversation, translated by ``translate`` (its OpenAI messages → a
    provider's request body), must import as the OpenAI form does: the same turns, kinds, texts and
    calls (``ids``: and call ids; ``as_sent``: a tool result's text as the provider is sent it).
    Returns how many tool calls were read."""
    from core.io import import_text
    from core.model.conversation import TOOL_CALL, TOOL_RESULT
    from tests.conftest import FIXTURES

    def shape(conv, sent):
        return (
            conv.system_prompt,
            [
                [
                    (
                        m.role,
                        m.kind,
                        sent(m.content) if m.kind == TOOL_RESULT else m.content,
                        [(c.id if ids else None, c.name, json.loads(c.arguments or "{}")) for c in m.tool_calls],
                        m.tool_call_id if ids else None,
                    )
                    for m in t.messages
                ]
                for t in conv.turns
            ],
        )

    sample = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
    calls = 0
    for line in sample.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        openai_form = import_text(line, name="tau.json").conversations[0]
        other = import_text(json.dumps(translate(record["messages"])), name="other.json").conversations[0]
        assert shape(other, lambda t: t) == shape(openai_form, as_sent), record["task_id"]
        calls += sum(m.kind == TOOL_CALL for t in other.turns for m in t.messages)
    return calls


def too_deep(key: str = "x") -> dict:
    """A value nested a few levels deeper than the depth limit: ``{key: {key: … {}}}``."""
    from core.limits import MAX_DEPTH

    value: dict = {}
    for _ in range(MAX_DEPTH + 5):
        value = {key: value}
    return value


def recorded_support_bot(
    url: str, queries=("Hi, I'm Dana.", "Where is my order 4411?", "What's my name?"), name: str = "recorded"
) -> str:
    """A conversation recorded on the support-bot sample flow with the demo model in the database at
    ``url``, one turn per query; its id."""
    from core.llm.client import DemoClient
    from core.service.sessions import ConversationService
    from core.store.db import Database
    from tests.conftest import ROOT

    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name=name).id
    for query in queries:
        service.send(conv, query)
    db.dispose()
    return conv
