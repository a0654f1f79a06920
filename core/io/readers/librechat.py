"""LibreChat conversation exports (Export → JSON): ``{conversationId, endpoint, title, exportAt, branches,
recursive, options?, messages}``. ``messages`` is a flat list (each message names its
``parentMessageId``) or, in a *recursive* export, the message tree itself, each message holding its
replies in ``children`` (older exports put that tree under ``messagesTree``). Exported with
branches, every edited question and regenerated reply is a sibling; the active thread is the one
LibreChat shows by default, the newest sibling at every fork.

A message is its ``text``, or, for agents and assistants, its ``content`` parts: text, thinking
(reasoning), tool calls with their output (a call and its result), images and errors. Its ``files``
stay with it, and the export's ``options.promptPrefix`` (the custom instructions) is the system
prompt. LibreChat sends a conversation's whole branch, so such a conversation opens under that."""

from __future__ import annotations

from typing import Any

from core.io.errors import RecordError
from core.limits import check_value
from core.model.conversation import (
    REASONING,
    SOURCE_MODEL,
    TOOL_CALL,
    TOOL_RESULT,
    Conversation,
    FileRef,
    Message,
    ToolCall,
)

from .common import arguments, conversation_id, excerpt, iso_time, label_of, read_each
from .registry import Format
from .tree import Node, check_acyclic, tree_conversation, tree_turns

#: LibreChat's parent of a conversation's first message (``Constants.NO_PARENT``).
NO_PARENT = "00000000-0000-0000-0000-000000000000"


def _messages_of(rec: Any) -> list:
    """The record's messages (a flat list, or the tree's roots)."""
    if not isinstance(rec, dict):
        raise RecordError("is not an object: not a LibreChat export", "")
    raw = rec.get("messages", rec.get("messagesTree"))
    if not isinstance(raw, list):
        raise RecordError("has no 'messages' list: not a LibreChat export", "messages")
    return raw


def _flatten(roots: list) -> list[dict]:
    """Every message of the export, parents before their replies, each without its ``children``
    (walked with a stack: a recursive export nests every reply one level deeper)."""
    out: list[dict] = []
    stack: list[tuple[Any, str]] = [(m, f"message {k}") for k, m in reversed(list(enumerate(roots)))]
    while stack:
        m, at = stack.pop()
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        kids = m.get("children")
        if kids is not None and not isinstance(kids, list):
            raise RecordError(f"{at}: 'children' must be a list", at)
        out.append({k: v for k, v in m.items() if k != "children"})
        stack.extend((kid, f"{at}.children[{k}]") for k, kid in reversed(list(enumerate(kids or []))))
    return out


def check_record(rec: Any, where: str) -> None:
    """The depth limit, measured per message: a recursive export nests each reply inside the message
    before it, which is a long thread, not a deep value; what a message holds is measured as usual."""
    if not isinstance(rec, dict):
        return
    check_value({k: v for k, v in rec.items() if k not in ("messages", "messagesTree")}, where, finite=False)
    roots = rec.get("messages", rec.get("messagesTree"))
    stack = list(reversed(roots)) if isinstance(roots, list) else []
    while stack:
        m = stack.pop()
        if not isinstance(m, dict):
            continue
        check_value(
            {k: v for k, v in m.items() if k != "children"},
            f"{where}: message {label_of(m, 'messageId')!r}",
            finite=False,
        )
        if isinstance(m.get("children"), list):
            stack.extend(reversed(m["children"]))


def _text(value: Any) -> str:
    """A part's text: a string, or ``{value}``."""
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, str) else ""


def _tool(call: dict, mid: str, k: int) -> tuple[ToolCall, str | None]:
    """A tool call part's call and its output (None while it had none): an agent's ``{id, name, args,
    output}``, an assistant's ``{id, type: function, function: {name, arguments, output}}`` or its
    code interpreter's ``{input, outputs}``."""
    kind = call.get("type")
    inner = call.get(kind) if isinstance(kind, str) and isinstance(call.get(kind), dict) else {}
    name = call.get("name") or inner.get("name") or (kind if kind not in (None, "tool_call") else "tool")
    args = call.get("args", inner.get("arguments", inner.get("input", "")))
    output = call.get("output", inner.get("output", inner.get("outputs")))
    if output is not None and not isinstance(output, str):
        output = arguments(output)
    return ToolCall(id=str(call.get("id") or f"{mid}:{k}"), name=str(name), arguments=arguments(args)), output


def _file(f: dict) -> FileRef:
    path = f.get("filepath") or f.get("url") or ""
    kind = "image" if str(f.get("type") or "").startswith("image") else "document"
    return FileRef(
        kind,
        path if isinstance(path, str) and path.startswith(("http://", "https://")) else "",
        str(f.get("file_id") or ""),
        str(f.get("filename") or ""),
    )


def _node_messages(m: dict, mid: str, user: bool, at: str) -> tuple[Message, ...]:
    """The messages one LibreChat message stands for: its content parts in order (a tool call is an
    assistant step and its result), else its text."""
    role = "user" if user else "assistant"
    raw_files = m.get("files")
    if raw_files is not None and not isinstance(raw_files, list):
        raise RecordError(f"{at}: 'files' must be a list", at)
    files = [_file(f) for f in raw_files or [] if isinstance(f, dict)]
    content = m.get("content")
    if not isinstance(content, list) or not content:
        text = m.get("text")
        if text is not None and not isinstance(text, str):
            raise RecordError(f"{at}: 'text' must be a string", at)
        return (Message(role, text or "", "", mid, files=tuple(files)),)
    out: list[Message] = []
    texts: list[str] = []
    for k, part in enumerate(content):
        if part is None:
            continue
        if not isinstance(part, dict):
            raise RecordError(f"{at}: content part {k} is not an object", at)
        kind = part.get("type")
        if kind in ("text", "error"):
            text = _text(part.get("text", part.get("error")))
            if text:
                texts.append(text)
        elif kind == "think" and not user:
            out.append(Message("assistant", _text(part.get("think")), REASONING, f"{mid}:think{k}"))
        elif kind == "tool_call" and not user and isinstance(part.get("tool_call"), dict):
            call, output = _tool(part["tool_call"], mid, k)
            out.append(Message("assistant", "\n".join(texts), TOOL_CALL, f"{mid}:{k}", tool_calls=(call,)))
            texts = []
            if output is not None:
                out.append(Message("tool", output, TOOL_RESULT, f"{mid}:{k}:result", tool_call_id=call.id))
        elif kind in ("image_file", "image_url"):
            image = part.get(kind)
            url = (
                image
                if isinstance(image, str)
                else (image.get("url") or image.get("filepath") or "")
                if isinstance(image, dict)
                else ""
            )
            files.append(
                FileRef(
                    "image",
                    url if url.startswith(("http://", "https://")) else "",
                    str(image.get("file_id") or "") if isinstance(image, dict) else "",
                )
            )
        # other parts (agent updates, progress) are the app's display, not what the model is sent
    out.append(Message(role, "\n".join(texts), "", mid, files=tuple(files)))
    return tuple(out)


def _shown_leaf(nodes: list[Node]) -> str | None:
    """The end of the thread LibreChat shows by default: the newest root, then at every fork the
    newest reply (its sibling index 0 is the last sibling)."""
    known = {n.id for n in nodes}
    newest: dict[str | None, str] = {}
    for n in nodes:  # in creation order: the last one seen under a parent is its newest
        newest[n.parent if n.parent in known else None] = n.id
    cur, seen = newest.get(None), set()
    while cur in newest and cur not in seen:
        seen.add(cur)
        cur = newest[cur]
    return cur


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    flat = _flatten(_messages_of(rec))
    if not flat:
        raise RecordError("the export has no message", "messages")
    ids: dict[str, int] = {}
    for k, m in enumerate(flat):
        mid = m.get("messageId")
        if not isinstance(mid, str) or not mid:
            raise RecordError(f"message {k} has no 'messageId'", f"message {k}")
        if mid in ids:
            raise RecordError(
                f"messages {ids[mid]} and {k} share the 'messageId' {excerpt(mid, 60)!r}; each message needs its own",
                f"message {k}",
            )
        ids[mid] = k
    parents: dict[str, str | None] = {}
    nodes = []
    for k, m in enumerate(flat):
        mid, at = m["messageId"], f"message {k}"
        parent = m.get("parentMessageId")
        if parent is not None and not isinstance(parent, str):
            raise RecordError(f"{at} has a 'parentMessageId' that is not text", at)
        parents[mid] = parent if parent in ids and parent != NO_PARENT else None
        user = m.get("isCreatedByUser")
        if not isinstance(user, bool):
            raise RecordError(f"{at} has no 'isCreatedByUser' (true for the user's messages, false for replies)", at)
        meta = {"model": m["model"]} if isinstance(m.get("model"), str) and not user else {}
        nodes.append(
            Node(mid, parents[mid], user, _node_messages(m, mid, user, at), iso_time(m.get("createdAt")), meta)
        )
    check_acyclic(parents)
    nodes.sort(key=lambda nd: nd.created if nd.created is not None else float("-inf"))  # stable: export order
    turns, active = tree_turns(nodes, _shown_leaf(nodes))
    if not turns:
        raise RecordError("the export has no message", "messages")
    options = rec.get("options") if isinstance(rec.get("options"), dict) else {}
    system = options.get("promptPrefix")
    meta = {key: rec[key] for key in ("endpoint", "exportAt") if isinstance(rec.get(key), str)}
    if isinstance(options.get("model"), str) and options["model"]:
        meta[SOURCE_MODEL] = options["model"]
    return tree_conversation(
        conversation_id(rec, n, stem, "conversationId"),
        turns,
        active,
        system=system,
        title=rec.get("title"),
        source_format="librechat",
        meta=meta,
    )


def _label(rec: Any) -> str:
    return label_of(rec, "title", "conversationId")


def _sniff(first: Any, layout: str) -> bool:
    if not isinstance(first, dict) or "conversationId" not in first:
        return False
    raw = first.get("messages", first.get("messagesTree"))
    return isinstance(raw, list) and (not raw or isinstance(raw[0], dict) and "messageId" in raw[0])


FORMAT = Format(
    "librechat",
    "LibreChat conversation exports (flat or recursive; every branch kept)",
    _sniff,
    read_each(_conversation, _label, check_record),
)
