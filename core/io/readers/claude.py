"""Claude's export ``conversations.json``: ``chat_messages`` with their ``sender``; newer exports link
each message to its parent (edits and retries are branches), older ones hold the shown branch.

An attachment's ``extracted_content`` (a pasted or uploaded document's text) goes to the model with its
message: it follows the message's text, after a blank line, so the history counts its tokens."""

from __future__ import annotations

from typing import Any

from core.io.errors import RecordError
from core.model.conversation import REASONING, TOOL_CALL, TOOL_RESULT, Conversation, FileRef, Message, ToolCall

from .common import arguments, conversation_id, excerpt, iso_time, label_of, read_each, record_field
from .registry import Format
from .tree import Node, check_acyclic, tree_turns


def _messages(msg: dict, mid: str, at: str) -> tuple[Message, ...]:
    """The messages of one Claude chat message: its content blocks (thinking, tool use, tool
    results, text), or its ``text`` when the export has no blocks."""
    user = msg.get("sender") == "human"
    role = "user" if user else "assistant"
    files = _files(msg, at)
    attached = _attached_text(msg)
    content = msg.get("content")
    if content is None or content == []:
        text = msg.get("text")
        if text is not None and not isinstance(text, str):
            raise RecordError(f"{at}: 'text' must be a string", at)
        return (Message(role, _with_attached(text or "", attached), "", mid, files=files),)
    if not isinstance(content, list):
        raise RecordError(f"{at}: 'content' must be a list of blocks", at)
    out: list[Message] = []
    texts: list[str] = []
    for k, block in enumerate(content):
        if not isinstance(block, dict):
            raise RecordError(f"{at}: content block {k} is not an object", at)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking" and not user:
            out.append(Message("assistant", str(block.get("thinking") or ""), REASONING, f"{mid}:thinking{k}"))
        elif kind == "tool_use" and not user:
            if texts:
                out.append(Message("assistant", "\n".join(texts), "", f"{mid}:{k}"))
                texts = []
            call = ToolCall(
                id=str(block.get("id") or f"{mid}:{k}"),
                name=str(block.get("name") or "tool"),
                arguments=arguments(block.get("input", {})),
            )
            out.append(Message("assistant", "", TOOL_CALL, f"{mid}:{k}", tool_calls=(call,)))
        elif kind == "tool_result":
            result = block.get("content")
            text = (
                result
                if isinstance(result, str)
                else "\n".join(str(p.get("text") or "") for p in result or [] if isinstance(p, dict))
            )
            out.append(
                Message(
                    "tool", text, TOOL_RESULT, f"{mid}:{k}", tool_call_id=str(block.get("tool_use_id") or "") or None
                )
            )
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    out.append(Message(role, _with_attached("\n".join(texts), attached), "", mid, files=files))
    return tuple(out)


def _attached_text(msg: dict) -> list[str]:
    """The extracted text of a message's attachments, in order (those with none give nothing)."""
    items = msg.get("attachments")
    if not isinstance(items, list):
        return []
    return [
        a["extracted_content"]
        for a in items
        if isinstance(a, dict) and isinstance(a.get("extracted_content"), str) and a["extracted_content"]
    ]


def _with_attached(text: str, attached: list[str]) -> str:
    return "\n\n".join([text, *attached] if text else attached)


def _files(msg: dict, at: str) -> tuple[FileRef, ...]:
    refs = []
    for key in ("attachments", "files"):
        items = msg.get(key) or []
        if not isinstance(items, list):
            raise RecordError(f"{at}: '{key}' must be a list", at)
        for f in items:
            if isinstance(f, dict):
                refs.append(
                    FileRef(
                        type="image" if str(f.get("file_type", "")).startswith("image") else "document",
                        id=str(f.get("file_name") or f.get("file_uuid") or ""),
                    )
                )
    return tuple(refs)


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    raw = record_field(rec, "chat_messages", list, "'chat_messages'", "'chat_messages' must be a list")
    ids: list[str] = []
    for k, msg in enumerate(raw):
        at = f"message {k}"
        if not isinstance(msg, dict):
            raise RecordError(f"{at} is not an object", at)
        if msg.get("sender") not in ("human", "assistant"):
            raise RecordError(f"{at} has an unknown 'sender' {msg.get('sender')!r}; expected human or assistant", at)
        ids.append(str(msg.get("uuid") or k))
    first_at: dict[str, int] = {}
    for k, mid in enumerate(ids):
        if mid in first_at:
            raise RecordError(
                f"messages {first_at[mid]} and {k} share the 'uuid' {excerpt(mid, 60)!r}; each message needs its own",
                f"message {k}",
            )
        first_at[mid] = k
    known = set(ids)
    # Newer exports link each message to its parent (edits and retries are branches); older ones
    # hold the shown branch only, in order.
    tree = bool(raw) and all(isinstance(m.get("parent_message_uuid"), str) for m in raw)
    parents = {
        mid: (m["parent_message_uuid"] if m["parent_message_uuid"] in known else None)
        if tree
        else (ids[k - 1] if k else None)
        for k, (mid, m) in enumerate(zip(ids, raw))
    }
    check_acyclic(parents)
    nodes = []
    for k, (mid, msg) in enumerate(zip(ids, raw)):
        nodes.append(
            Node(
                mid,
                parents[mid],
                msg["sender"] == "human",
                _messages(msg, mid, f"message {k}"),
                iso_time(msg.get("created_at")),
            )
        )
    current = rec.get("current_leaf_message_uuid")
    turns, active = tree_turns(nodes, current if current in known else (ids[-1] if ids else None))
    if not turns:
        raise RecordError("the conversation has no message", "chat_messages")
    conv_id = conversation_id(rec, n, stem, "uuid")
    meta = {k: rec[k] for k in ("name", "created_at", "updated_at") if isinstance(rec.get(k), str)}
    if active:
        meta["active_turn_id"] = active
    return Conversation(
        id=conv_id, turns=turns, source_format="claude", name=str(rec.get("name") or conv_id), meta=meta
    )


def _label(rec: Any) -> str:
    return label_of(rec, "name", "uuid")


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("chat_messages"), list)


FORMAT = Format(
    "claude", "Claude export conversations.json (chat_messages with sender)", _sniff, read_each(_conversation, _label)
)
