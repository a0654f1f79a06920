"""Exports that hold a message tree (ChatGPT's ``mapping``, Claude's parent links): the tree's nodes
become turns, every branch a MemLens branch (:func:`tree_turns`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.io.errors import RecordError
from core.model.conversation import Conversation, Message, Turn

from .common import turn_messages


@dataclass
class Node:
    """One visible message node of an exported tree: who wrote it and the messages it holds."""

    id: str
    parent: str | None
    user: bool
    messages: tuple[Message, ...]
    created: float | None = None
    meta: dict = field(default_factory=dict)


def tree_turns(nodes: list[Node], active: str | None) -> tuple[list[Turn], str | None]:
    """Turns of a message tree, and the id of the active path's last turn.

    A turn starts at a user node and runs down through the non-user nodes under it (tool calls,
    tool results, reasoning, the answer); it ends at a node with no non-user child or with a user
    child, and takes that node's id. Several answers under one user node (regenerations) are
    sibling turns; several user nodes under one answer (edits) are sibling turns too, so every
    branch of the export is a MemLens branch. Non-user nodes above the first user node form an
    opening turn without a query.

    Turns come out depth first, as for OpenAssistant trees, so every turn's Dify thread is its
    path from the root; among siblings the one on the active path (the export's current node)
    comes last, so the active thread is the newest one, as Dify web shows it.
    """
    by_id = {n.id: n for n in nodes}
    children: dict[str | None, list[Node]] = {}
    for n in nodes:
        children.setdefault(n.parent if n.parent in by_id else None, []).append(n)
    on_path: set[str] = set()
    cur = active if active in by_id else None
    while cur is not None and cur not in on_path:
        on_path.add(cur)
        cur = by_id[cur].parent if by_id[cur].parent in by_id else None
    for kids in children.values():
        kids.sort(key=lambda n: n.id in on_path)  # stable: the active child last, the others as given

    turns: list[Turn] = []
    active_turn: str | None = None
    # Stack items: (first node of the segment, node reached, nodes so far, parent turn id).
    stack: list[tuple[Node, Node, list[Node], str | None]] = [
        (n, n, [n], None) for n in reversed(children.get(None, []))
    ]
    while stack:
        start, node, path, parent = stack.pop()
        kids = children.get(node.id, [])
        followers = [k for k in kids if not k.user]
        replies = [k for k in kids if k.user]
        pushed: list[tuple[Node, Node, list[Node], str | None]] = []
        turn_id = parent
        if not followers or replies:
            msgs, query_index, answer_index = turn_messages([m for n in path for m in n.messages])
            meta = {"source_nodes": [n.id for n in path]}
            for n in path:
                meta.update(n.meta)
            turns.append(
                Turn(
                    id=node.id,
                    parent_id=parent,
                    messages=msgs,
                    query_index=query_index,
                    answer_index=answer_index,
                    created_at=node.created,
                    meta=meta,
                )
            )
            turn_id = node.id
            if node.id in on_path:
                active_turn = node.id
            pushed += [(k, k, [k], turn_id) for k in replies]
        pushed += [(start, k, path + [k], parent) for k in followers]
        # Siblings keep their order, the active one last: the first pushed is popped last.
        pushed.sort(key=lambda item: item[1].id in on_path)
        stack.extend(reversed(pushed))
    return turns, active_turn


def tree_conversation(
    conv_id: str,
    turns: list[Turn],
    active: str | None,
    *,
    system: object,
    title: object,
    source_format: str,
    meta: dict,
) -> Conversation:
    """A chat app's exported tree as a conversation: named by its ``title`` when it has one (kept in
    ``meta``, before the format's own entries), its ``system`` prompt when that is text, and the
    active path's last turn as ``active_turn_id``."""
    out = {"title": title} if isinstance(title, str) else {}
    out.update(meta)
    if active:
        out["active_turn_id"] = active
    return Conversation(
        id=conv_id,
        turns=turns,
        system_prompt=system if isinstance(system, str) else "",
        source_format=source_format,
        name=str(title or conv_id),
        meta=out,
    )


def visible_parent(mapping: dict, node_id: str, visible: set[str], memo: dict) -> str | None:
    """The nearest visible ancestor of a node (hidden nodes are see-through); raises on a cycle."""
    chain: list[str] = []
    seen: set[str] = set()
    cur = mapping[node_id].get("parent")
    while cur is not None and cur in mapping and cur not in visible and cur not in memo:
        if cur in seen:
            raise RecordError(f"node {cur!r}: the 'parent' links form a cycle", "mapping")
        seen.add(cur)
        chain.append(cur)
        cur = mapping[cur].get("parent")
    found = cur if cur in visible else memo.get(cur) if cur in memo else None
    for c in chain:
        memo[c] = found
    return found


def check_acyclic(parents: dict[str, str | None]) -> None:
    state: dict[str, int] = {}  # 1: on the current walk, 2: known to reach a root
    for start in parents:
        walk = []
        cur: str | None = start
        while cur is not None and cur in parents and state.get(cur) != 2:
            if state.get(cur) == 1:
                raise RecordError(f"node {cur!r}: the 'parent' links form a cycle", "mapping")
            state[cur] = 1
            walk.append(cur)
            cur = parents[cur]
        for w in walk:
            state[w] = 2
