"""OpenAssistant message trees, in the three layouts the project publishes them:

* trees: ``{message_tree_id, tree_state, prompt}``, one per line, ``prompt`` the first message with
  its ``replies`` nested (``*_tree.jsonl``);
* messages: the first message itself with its ``replies`` nested, one tree per line (``*_message.jsonl``);
* rows: one message per line with its ``parent_id`` and ``message_tree_id`` and no ``replies`` (the
  Hugging Face ``oasst1``/``oasst2`` datasets), put back together tree by tree, replies in file order.

A turn is a prompter message plus one assistant reply; several replies to one prompt are sibling
turns (regenerations), several prompter replies to one answer are sibling turns (edits). See
:func:`_turns` for how the parent ids keep every branch a Dify thread.
"""

from __future__ import annotations

from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn

from .common import excerpt, label_of, read_each, record_field
from .records import Problem, ReadContext, Records
from .registry import Format

#: An OpenAssistant message's roles (a user is a ``prompter``).
ROLES = ("prompter", "assistant")


def _node(node: Any, role: str, where: str) -> tuple[str, str, list]:
    """(id, text, replies) of a checked node; ``where`` names it while its id is unknown."""
    if not isinstance(node, dict):
        raise RecordError(f"{where} is not an object", where)
    mid = node.get("message_id")
    if not isinstance(mid, str) or not mid:
        raise RecordError(f"{where} has no 'message_id'", where)
    at = f"message {mid!r}"
    if node.get("role") != role:
        raise RecordError(
            f"{at} has role {node.get('role')!r} where {role!r} was expected "
            "(prompter and assistant messages alternate)",
            at,
        )
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
            pid, text, replies = _node(
                node, "prompter", "the tree's first message" if parent is None else f"a reply of message {parent!r}"
            )
            _first_time(pid, seen)
            answers, deleted = _live_replies(replies, "assistant", pid)
            left_out += deleted
            if not answers:
                turns.append(
                    Turn(
                        id=pid,
                        parent_id=parent,
                        messages=(Message("user", text, QUERY, f"{pid}:query"),),
                        query_index=0,
                        answer_index=None,
                        meta={"prompter_id": pid, "assistant_id": None},
                    )
                )
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
            turns.append(
                Turn(
                    id=aid,
                    parent_id=parent,
                    messages=(
                        Message("user", text, QUERY, f"{aid}:query"),
                        Message("assistant", answer_text, ANSWER, f"{aid}:answer"),
                    ),
                    query_index=0,
                    answer_index=1,
                    meta=meta,
                )
            )
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
    if isinstance(rec, dict) and "prompt" not in rec and "replies" in rec:  # the messages layout
        return _tree(rec, rec, "the tree's first message")
    root = record_field(rec, "prompt", dict, "a 'prompt'", "'prompt' must be the tree's first message (an object)")
    return _tree(rec, root, "prompt")


def _tree(rec: dict, root: dict, where: str) -> Conversation:
    """The conversation of one tree: ``root`` its first message with its replies nested, ``rec`` the
    record naming the tree (``message_tree_id``, ``tree_state``)."""
    if root.get("deleted") is True:
        raise RecordError("the tree's first message is deleted", where)
    turns, left_out = _turns(root)
    tree_id = str(rec.get("message_tree_id") or root.get("message_id"))
    meta = {k: rec[k] for k in ("message_tree_id", "tree_state") if isinstance(rec.get(k), str)}
    if isinstance(root.get("lang"), str):
        meta["lang"] = root["lang"]
    if left_out:
        meta["deleted_messages_left_out"] = left_out
    return Conversation(id=tree_id, turns=turns, source_format="oasst", name=excerpt(root.get("text"), 60), meta=meta)


def _label(rec: Any) -> str:
    prompt = rec.get("prompt") if isinstance(rec, dict) else None
    if isinstance(rec, dict) and "replies" in rec:
        prompt = rec
    return label_of(rec, "message_tree_id") or (excerpt(prompt.get("text")) if isinstance(prompt, dict) else "")


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "message_id" in value and value.get("role") in ROLES


def _sniff(first: Any, layout: str) -> bool:
    if _is_message(first):  # the messages layout (replies nested) or a row (its tree named)
        return "replies" in first or "message_tree_id" in first
    return isinstance(first, dict) and "prompt" in first and ("message_tree_id" in first or "tree_state" in first)


def _row_tree(item: Any) -> str:
    return str(item.get("message_tree_id") or "") if isinstance(item, dict) else ""


def _check_row(item: Any, n: int | None) -> dict:
    if not isinstance(item, dict):
        raise RecordError("the record is not an object with a 'message_id'", "")
    for key in ("message_id", "message_tree_id"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise RecordError(f"the message has no '{key}'", key)
    parent = item.get("parent_id")
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise RecordError("'parent_id' must be a message id or null", "parent_id")
    if "replies" in item:
        raise RecordError(
            "a message with nested 'replies' among messages listed one per line: write the file in one layout",
            "replies",
        )
    return item


def _rows(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    """The rows layout: every message a record, gathered by tree; a tree with a bad row, no first
    message, or a message whose parent is not in it is left out whole."""
    trees: dict[str, list[tuple[int, dict]]] = {}
    bad: list[Any] = []  # the values of bad rows: their trees are left out once known
    for rec in records:
        before = len(ctx.problems)
        for row in ctx.each([rec], _check_row, _row_tree):
            trees.setdefault(row["message_tree_id"], []).append((rec.index or 0, row))
        if len(ctx.problems) > before:
            bad.append(rec.value)
    # A bad row's tree: the one it names, else its parent's (a bad row's replies find no parent, so
    # their tree is left out below).
    tree_of = {row["message_id"]: tree_id for tree_id, rows in trees.items() for _, row in rows}
    failed = {
        _row_tree(v) or (tree_of.get(v["parent_id"]) if isinstance(v.get("parent_id"), str) else None)
        for v in bad
        if isinstance(v, dict)
    }
    for tree_id, rows in trees.items():
        if tree_id in failed:
            continue
        try:
            yield _tree(
                {"message_tree_id": tree_id, **{k: v for k, v in rows[0][1].items() if k == "tree_state"}},
                _nest(tree_id, rows),
                "the tree's first message",
            )
        except RecordError as e:
            ctx.report(Problem(rows[0][0], e.field, str(e), tree_id))


def _nest(tree_id: str, rows: list[tuple[int, dict]]) -> dict:
    """A tree's first message with every message under its parent in ``replies`` (in file order)."""
    nodes: dict[str, dict] = {}
    for _, row in rows:
        if row["message_id"] in nodes:
            raise RecordError(
                f"message {row['message_id']!r} appears twice in tree {tree_id!r}", f"message {row['message_id']!r}"
            )
        nodes[row["message_id"]] = {**row, "replies": []}
    roots = []
    for node in nodes.values():
        parent = node.get("parent_id")
        if parent is None:
            roots.append(node)
        elif parent in nodes:
            nodes[parent]["replies"].append(node)
        else:
            raise RecordError(
                f"message {node['message_id']!r} replies to {parent!r}, which is not in tree {tree_id!r}", "parent_id"
            )
    if len(roots) != 1:
        raise RecordError(
            f"tree {tree_id!r} has {len(roots)} messages without a 'parent_id'; its first message is the only one",
            "parent_id",
        )
    return roots[0]


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    first = records.first
    if _is_message(first) and "replies" not in first:
        yield from _rows(records, ctx)
    else:
        yield from _each(records, ctx)


_each = read_each(_conversation, _label)

FORMAT = Format(
    "oasst", "OpenAssistant message trees, nested or one message per row (siblings become branches)", _sniff, _read
)
