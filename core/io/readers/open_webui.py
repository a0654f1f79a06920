"""Open WebUI chat exports (Settings → Chats → Export, or one chat's JSON download): a list of
``{id, title, chat: {history: {messages: {id: {parentId, role, content, …}}, currentId}, params}}``.
The message tree becomes turns with every branch kept (an edited question or a regenerated reply is a
sibling), the chat's current message ends the active thread, and its system prompt (``params.system``,
else ``system``) is the conversation's. A message's ``files`` stay with it."""

from __future__ import annotations

from typing import Any

from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation, FileRef, Message

from .common import conversation_id, label_of, read_each
from .registry import Format
from .tree import Node, check_acyclic, tree_conversation, tree_turns

_ROLES = ("user", "assistant")


def _chat(rec: Any) -> dict:
    """The record's chat: under ``chat`` in an export, or the record itself."""
    chat = rec.get("chat") if isinstance(rec, dict) and isinstance(rec.get("chat"), dict) else rec
    if not isinstance(chat, dict) or not isinstance(chat.get("history"), dict):
        raise RecordError("has no 'chat.history': not an Open WebUI chat", "chat")
    return chat


def _files(raw: Any, at: str) -> tuple[FileRef, ...]:
    if raw in (None, []):
        return ()
    if not isinstance(raw, list):
        raise RecordError(f"{at}: 'files' must be a list", at)
    out = []
    for f in raw:
        if not isinstance(f, dict):
            continue
        inner = f.get("file") if isinstance(f.get("file"), dict) else {}
        kind = "image" if f.get("type") == "image" else "document"
        url = f.get("url") if isinstance(f.get("url"), str) else ""
        name = f.get("name") or inner.get("filename") or ""
        out.append(
            FileRef(
                kind, url if not url.startswith("data:") else "", str(f.get("id") or inner.get("id") or ""), str(name)
            )
        )
    return tuple(out)


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    chat = _chat(rec)
    history = chat["history"]
    raw = history.get("messages")
    if not isinstance(raw, dict) or not raw:
        raise RecordError("'chat.history.messages' must be a non-empty mapping of messages by id", "chat")
    parents: dict[str, str | None] = {}
    nodes = []
    for key, m in raw.items():
        at = f"message {key!r}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES:
            raise RecordError(f"{at} has an unknown role {role!r}; expected user or assistant", at)
        if not isinstance(content, str):
            raise RecordError(f"{at} has no 'content' text", at)
        parent = m.get("parentId")
        if parent is not None and not isinstance(parent, str):
            raise RecordError(f"{at} has a 'parentId' that is not text", at)
        node_id = str(key)
        parents[node_id] = parent if parent in raw else None
        created = m.get("timestamp")
        created = float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None
        meta = {"model": m["model"]} if isinstance(m.get("model"), str) else {}
        nodes.append(
            Node(
                node_id,
                parents[node_id],
                role == "user",
                (Message(role, content, "", node_id, files=_files(m.get("files"), at)),),
                created,
                meta,
            )
        )
    check_acyclic(parents)
    nodes.sort(key=lambda nd: nd.created if nd.created is not None else float("-inf"))
    current = history.get("currentId")
    turns, active = tree_turns(nodes, current if isinstance(current, str) else None)
    if not turns:
        raise RecordError("the chat has no user or assistant message", "chat")
    params = chat.get("params") if isinstance(chat.get("params"), dict) else {}
    system = params.get("system") if isinstance(params.get("system"), str) else chat.get("system")
    meta = {}
    models = chat.get("models")
    if isinstance(models, list) and models and all(isinstance(x, str) for x in models):
        meta["models"] = ", ".join(models)
        if len(set(models)) == 1:  # one model answered the whole chat
            meta[SOURCE_MODEL] = models[0]
    return tree_conversation(
        conversation_id(rec, n, stem, "id"),
        turns,
        active,
        system=system,
        title=rec.get("title") or chat.get("title"),
        source_format="open-webui",
        meta=meta,
    )


def _label(rec: Any) -> str:
    return label_of(rec, "title", "id")


def _sniff(first: Any, layout: str) -> bool:
    chat = first.get("chat") if isinstance(first, dict) and isinstance(first.get("chat"), dict) else first
    return (
        isinstance(chat, dict)
        and isinstance(chat.get("history"), dict)
        and isinstance(chat["history"].get("messages"), dict)
    )


FORMAT = Format(
    "open-webui",
    "Open WebUI chat exports (the message tree; every branch kept)",
    _sniff,
    read_each(_conversation, _label),
)
