"""OpenAssistant message trees: ``{message_tree_id, tree_state, prompt}``, one per line.

A turn is a prompter message plus one assistant reply; several replies to one prompt are sibling
turns (regenerations), several prompter replies to one answer are sibling turns (edits). See
:func:`_turns` for how the parent ids keep every branch a Dify thread.
"""

from __future__ import annotations

from typing import Any

from core.io.errors import RecordError
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn

from .common import excerpt, label_of, read_each, record_field
from .registry import Format

def _node(node: Any, role: str, where: str) -> tuple[str, str, list]:
    """(id, text, replies) of a checked node; ``where`` names it while its id is unknown."""
    if not isinstance(node, dict):
        raise RecordError(f"{where} is not an object", where)
    mid = node.get("message_id")
    if not isinstance(mid, str) or not mid:
        raise RecordError(f"{where} has no 'message_id'", where)
    at = f"message {mid!r}"
    if node.get("role") != role:
        raise RecordError(f"{at} has role {node.get('role')!r} where {role!r} was expected "
                          "(prompter and assistant messages alternate)", at)
    text = node.get("text")
    if not isinstance(text, str):
        raise RecordError(f"{at} has no 'text' string", at)
    replies = node.get("replies", [])
    if not isinstance(replies, list):
        raise RecordError(f"{at}: 'replies' must be a list", at)
    return mid, text, replies


def _turns(root: Any) -> tuple[list[Turn], int]:
    """The tree's turns in depth-first creation order, and how many deleted messages were left out.

    A turn is a prompter message and one assistant reply (id: the reply's message id); a
    prompter message nobody answered is a turn of its own with no answer. Each turn's parent is
    the turn of the assistant message its prompter replied to; only the replies to the tree's
    first prompt have no parent (they are sibling roots, as Dify stores regenerations of a
    first message). Depth-first order matters: Dify's walk stops at the first parentless row
    it meets, and in this order every row between a turn and its parent lies in the parent's
    subtree — so each turn's Dify thread is exactly its path from the root.
    """
    left_out = 0
    turns: list[Turn] = []
    seen: set[str] = set()
    # Stack items: ("prompter", node, parent turn id) or ("turn", prompter node, answer node, parent turn id).
    stack: list[tuple] = [("prompter", root, None)]
    while stack:
        item = stack.pop()
        if item[0] == "prompter":
            _, node, parent = item
            pid, text, replies = _node(node, "prompter", "the tree's first message" if parent is None
                                             else f"a reply of message {parent!r}")
            _first_time(pid, seen)
            answers, deleted = _live_replies(replies, "assistant", pid)
            left_out += deleted
            if not answers:
                turns.append(Turn(id=pid, parent_id=parent,
                                  messages=(Message("user", text, QUERY, f"{pid}:query"),),
                                  query_index=0, answer_index=None,
                                  meta={"prompter_id": pid, "assistant_id": None}))
            for answer in reversed(answers):
                stack.append(("turn", node, answer, parent))
        else:
            _, prompter, answer, parent = item
            aid, answer_text, replies = _node(answer, "assistant", "an answer")  # checked above
            _first_time(aid, seen)
            pid, text, _ = _node(prompter, "prompter", "a prompt")  # checked above
            meta = {"prompter_id": pid, "assistant_id": aid}
            if isinstance(answer.get("rank"), int):
                meta["rank"] = answer["rank"]
            turns.append(Turn(id=aid, parent_id=parent,
                              messages=(Message("user", text, QUERY, f"{aid}:query"),
                                        Message("assistant", answer_text, ANSWER, f"{aid}:answer")),
                              query_index=0, answer_index=1, meta=meta))
            followups, deleted = _live_replies(replies, "prompter", aid)
            left_out += deleted
            for reply in reversed(followups):
                stack.append(("prompter", reply, aid))
    return turns, left_out


def _first_time(mid: str, seen: set[str]) -> None:
    if mid in seen:
        raise RecordError(f"message {mid!r} appears twice in the tree", f"message {mid!r}")
    seen.add(mid)


def _live_replies(replies: list, role: str, parent: str) -> tuple[list, int]:
    """The replies to message ``parent`` that are not deleted (each checked to be a ``role`` message), and
    how many messages the deleted ones held with their subtrees."""
    live, deleted = [], 0
    for reply in replies:
        _node(reply, role, f"a reply of message {parent!r}")
        if reply.get("deleted") is True:
            deleted += _size(reply)
        else:
            live.append(reply)
    return live, deleted


def _size(node: dict) -> int:
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        count += 1
        stack.extend(r for r in n.get("replies") or [] if isinstance(r, dict))
    return count


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    root = record_field(rec, "prompt", dict, "a 'prompt'", "'prompt' must be the tree's first message (an object)")
    if root.get("deleted") is True:
        raise RecordError("the tree's first message is deleted", "prompt")
    turns, left_out = _turns(root)
    tree_id = str(rec.get("message_tree_id") or root.get("message_id"))
    meta = {k: rec[k] for k in ("message_tree_id", "tree_state") if isinstance(rec.get(k), str)}
    if isinstance(root.get("lang"), str):
        meta["lang"] = root["lang"]
    if left_out:
        meta["deleted_messages_left_out"] = left_out
    return Conversation(id=tree_id, turns=turns, source_format="oasst", name=excerpt(root.get("text"), 60),
                        meta=meta)


def _label(rec: Any) -> str:
    prompt = rec.get("prompt") if isinstance(rec, dict) else None
    return label_of(rec, "message_tree_id") or (excerpt(prompt.get("text")) if isinstance(prompt, dict) else "")


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and "prompt" in first and ("message_tree_id" in first or "tree_state" in first)


FORMAT = Format("oasst", "OpenAssistant message trees (siblings become branches)", _sniff,
                read_each(_conversation, _label))
