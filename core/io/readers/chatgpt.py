"""ChatGPT's export ``conversations.json``: each conversation's ``mapping`` tree, every branch kept.

System messages and custom instructions are the system prompt; hidden nodes are see-through; a
tool node answers the tool call above it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.io.errors import RecordError
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

from .common import VALID_ROLES, conversation_id, label_of, read_each, record_field
from .registry import Format
from .tree import Node, check_acyclic, tree_turns, visible_parent

_REASONING = {"thoughts", "reasoning_recap"}
_NO_MAPPING = "'mapping' must be an object of message nodes"


def _text(content: Any, at: str) -> str:
    """The text of a ChatGPT message ``content`` of any content type."""
    if content is None:
        return ""
    if not isinstance(content, dict):
        raise RecordError(f"{at}: 'content' must be an object", at)
    kind = content.get("content_type")
    if "parts" in content:
        parts = content["parts"]
        if not isinstance(parts, list):
            raise RecordError(f"{at}: 'content.parts' must be a list", at)
        texts = []
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
                else:
                    texts.append(
                        "[image]"
                        if "image" in str(part.get("content_type", ""))
                        else f"[{part.get('content_type') or 'attachment'}]"
                    )
            elif part is not None:
                raise RecordError(f"{at}: a content part must be a string or an object", at)
        return "\n".join(t for t in texts if t)
    if kind == "thoughts" and isinstance(content.get("thoughts"), list):
        return "\n\n".join(
            str(t.get("content") or t.get("summary") or "") for t in content["thoughts"] if isinstance(t, dict)
        )
    if kind == "user_editable_context":
        return "\n\n".join(str(content[k]) for k in ("user_profile", "user_instructions") if content.get(k))
    for key in ("text", "result", "content", "model_set_context"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""


def _attachments(metadata: dict, at: str) -> tuple[FileRef, ...]:
    """The files a message carries (``metadata.attachments``: an upload's id, name and type)."""
    items = metadata.get("attachments")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise RecordError(f"{at}: 'metadata.attachments' must be a list", at)
    return tuple(
        FileRef(
            type="image" if str(a.get("mime_type") or "").startswith("image/") else "document",
            id=str(a.get("id") or ""),
            name=str(a.get("name") or ""),
        )
        for a in items
        if isinstance(a, dict)
    )


@dataclass(frozen=True)
class _MappingNode:
    role: str
    message: Message | None  # None: the node holds no message (the tree's root)
    hidden: bool
    instructions: bool  # a system message or custom instructions: told to the model before the chat
    created: float | None
    meta: dict


def _node(node_id: str, raw: Any) -> _MappingNode:
    at = f"node {node_id!r}"
    if not isinstance(raw, dict):
        raise RecordError(f"{at} is not an object", "mapping")
    parent = raw.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise RecordError(f"{at}: 'parent' must be a node id or null", at)
    msg = raw.get("message")
    if msg is None:
        return _MappingNode("", None, True, False, None, {})
    if not isinstance(msg, dict):
        raise RecordError(f"{at}: 'message' must be an object or null", at)
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in VALID_ROLES:
        raise RecordError(
            f"{at} has an unknown author.role {role!r}; expected one of system, user, assistant, tool", at
        )
    content = msg.get("content")
    text = _text(content, at)
    kind_name = content.get("content_type") if isinstance(content, dict) else None
    if kind_name is not None and not isinstance(kind_name, str):
        raise RecordError(f"{at}: 'content.content_type' must be text", at)
    metadata = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
    hidden = bool(metadata.get("is_visually_hidden_from_conversation")) or kind_name == "user_editable_context"
    created = msg.get("create_time")
    created = float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None
    meta = {"model": metadata["model_slug"]} if isinstance(metadata.get("model_slug"), str) else {}
    recipient = msg.get("recipient")
    name = author.get("name") if isinstance(author.get("name"), str) else None
    if role == "assistant" and kind_name in _REASONING:
        message = Message("assistant", text, REASONING, f"{node_id}:reasoning")
    elif role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        message = Message(
            "assistant", "", TOOL_CALL, node_id, tool_calls=(ToolCall(id=node_id, name=recipient, arguments=text),)
        )
    elif role == "tool":
        message = Message("tool", text, TOOL_RESULT, node_id, name=name)
    else:
        message = Message(role, text, "", node_id, files=_attachments(metadata, at))
    return _MappingNode(role, message, hidden, role == "system" or kind_name == "user_editable_context", created, meta)


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    mapping = record_field(rec, "mapping", dict, "a 'mapping'", _NO_MAPPING)
    if not mapping:
        raise RecordError(_NO_MAPPING, "mapping")
    # A parent that is not a node id is refused below, with the node it belongs to.
    check_acyclic(
        {
            str(k): v.get("parent") if isinstance(v, dict) and isinstance(v.get("parent"), str) else None
            for k, v in mapping.items()
        }
    )
    read = {str(node_id): _node(str(node_id), raw) for node_id, raw in mapping.items()}
    system: list[str] = []
    visible: set[str] = set()
    for node_id, node in read.items():
        if node.message is None:
            continue
        if node.instructions or node.hidden:
            # System messages and custom instructions are what the model is told before the
            # conversation (the system prompt); other hidden nodes show nothing.
            if node.instructions and node.message.content and node.message.content not in system:
                system.append(node.message.content)
            continue
        visible.add(node_id)
    memo: dict[str, str | None] = {}
    nodes = []
    for node_id in mapping:  # the export lists nodes oldest first; siblings keep that order
        node_id = str(node_id)
        if node_id not in visible:
            continue
        node = read[node_id]
        nodes.append(
            Node(
                node_id,
                visible_parent(mapping, node_id, visible, memo),
                node.role == "user",
                (node.message,),
                node.created,
                node.meta,
            )
        )
    nodes.sort(key=lambda nd: nd.created if nd.created is not None else float("-inf"))
    nodes = _pair_tool_results(nodes)
    current = rec.get("current_node")
    if isinstance(current, str) and current in mapping and current not in visible:
        current = visible_parent(mapping, current, visible, memo)
    turns, active = tree_turns(nodes, current if isinstance(current, str) else None)
    if not turns:
        raise RecordError("the conversation has no user or assistant message", "mapping")
    conv_id = conversation_id(rec, n, stem, "conversation_id", "id")
    meta = {
        k: rec[k]
        for k in ("title", "create_time", "update_time", "default_model_slug")
        if isinstance(rec.get(k), (str, int, float)) and not isinstance(rec.get(k), bool)
    }
    if active:
        meta["active_turn_id"] = active
    conv = Conversation(
        id=conv_id,
        turns=turns,
        system_prompt="\n\n".join(system),
        source_format="chatgpt",
        name=str(rec.get("title") or conv_id),
        meta=meta,
    )
    model = _answering_model(conv, active, meta.get("default_model_slug"))
    if model:
        meta[SOURCE_MODEL] = model
    return conv


def _answering_model(conv: Conversation, active: str | None, default: object) -> str | None:
    """The model that wrote the newest reply of the thread ChatGPT shows (each reply's
    ``metadata.model_slug``: a mid-chat switch follows), else the conversation's
    ``default_model_slug`` — unless that is ``auto``, ChatGPT's choice per message, which names none."""
    position = conv.index_of(active) if active else len(conv.turns) - 1
    for p in reversed(conv.tree.thread(position)):
        model = conv.turns[p].meta.get("model")
        if isinstance(model, str) and model and model != _AUTO:
            return model
    return default if isinstance(default, str) and default and default != _AUTO else None


#: The model ChatGPT names when it picks one per message itself.
_AUTO = "auto"


def _pair_tool_results(nodes: list[Node]) -> list[Node]:
    """A tool node answers the tool call above it: it takes the call's id."""
    by_id = {nd.id: nd for nd in nodes}
    out = []
    for nd in nodes:
        msg = nd.messages[0]
        if msg.kind == TOOL_RESULT:
            cur = by_id.get(nd.parent) if nd.parent else None
            while cur is not None and not cur.messages[0].tool_calls and not cur.user:
                cur = by_id.get(cur.parent) if cur.parent else None
            if cur is not None and cur.messages[0].tool_calls:
                nd = replace(nd, messages=(replace(msg, tool_call_id=cur.messages[0].tool_calls[0].id),))
        out.append(nd)
    return out


def _label(rec: Any) -> str:
    return label_of(rec, "title", "conversation_id", "id")


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("mapping"), dict)


FORMAT = Format(
    "chatgpt",
    "ChatGPT export conversations.json (the mapping tree; every branch kept)",
    _sniff,
    read_each(_conversation, _label),
)
