"""What a flow's nodes read and write, traced to where each value comes from: the static ground of the
flow findings.

What :func:`history_variables` detects statically (and what it cannot): a conversation
variable holds the chat history when an assigner appends/extends it with text that comes —
directly or through template, code or aggregator nodes — from ``sys.query`` or an LLM/agent
node's output, or rewrites it from its own value plus such text (a rolling transcript), or when
its name says so (``history``, ``chat_log``, ``transcript``, ``messages``, ``dialog``…). History
assembled outside the flow (an HTTP call, a code node reading a store) is not detected.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

from .base import quoted

if TYPE_CHECKING:
    from core.flow.graph import Flow, Node

_HISTORY_NAME = re.compile(r"hist|chat_?log|transcript|dialog|messages|conversation|memory|对话|历史|记忆|聊天", re.I)


_SELECTOR = re.compile(r"\{\{#([a-zA-Z0-9_]{1,50}(?:\.[a-zA-Z_][a-zA-Z0-9_]{0,29}){1,10})#\}\}")


def selectors(value: Any, *, skip: frozenset = frozenset()) -> list[tuple[str, ...]]:
    """Every variable a node's data reads: ``{{#a.b#}}`` in any text and any ``…selector`` list."""
    out: list[tuple[str, ...]] = []
    if isinstance(value, str):
        out.extend(tuple(m.split(".")) for m in _SELECTOR.findall(value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if k in skip:
                continue
            if str(k).endswith("selector") and isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                out.append(tuple(v))
            else:
                out.extend(selectors(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(selectors(v))
    return out


MODEL_NODES = ("llm", "agent")


NODE_SKIP = frozenset(
    {
        "memory",
        "model",
        "title",
        "desc",
        "type",
        "selected",
        "variable_selector",
        "assigned_variable_selector",
        "vision",
    }
)


def value_origins(flow: Flow, selector: tuple[str, ...], seen: set[str] | None = None) -> set[str]:
    """Where a value comes from: ``sys.query``, ``conversation.<name>`` or ``node:<id>`` of the
    LLM/agent nodes that wrote it, traced through template, code and aggregator nodes."""
    if not selector:
        return set()
    head = selector[0]
    if head in ("sys", "conversation", "env"):
        return {f"{head}.{selector[1]}" if len(selector) > 1 else head}
    if not flow.has_node(head):
        return set()
    node = flow.node(head)
    if node.type in MODEL_NODES:
        return {f"node:{head}"}
    seen = set() if seen is None else seen
    if head in seen:
        return set()
    seen.add(head)
    out: set[str] = set()
    for s in selectors(node.data, skip=NODE_SKIP):
        out |= value_origins(flow, s, seen)
    return out


def _assigner_writes(node: Node) -> list[tuple[str, str, tuple[str, ...] | None]]:
    """(target variable, operation, source selector) of an assigner node, v1 or v2."""
    data = node.data
    out = []
    if str(data.get("version") or "1") == "2":
        for item in data.get("items") or []:
            if not isinstance(item, Mapping):
                continue
            target = item.get("variable_selector") or []
            if len(target) < 2 or target[0] != "conversation":
                continue
            value = item.get("value")
            source = (
                tuple(value) if item.get("input_type", "variable") == "variable" and isinstance(value, list) else None
            )
            out.append((str(target[1]), str(item.get("operation") or "over-write"), source))
    else:
        target = data.get("assigned_variable_selector") or []
        if len(target) >= 2 and target[0] == "conversation":
            source = data.get("input_variable_selector")
            out.append(
                (
                    str(target[1]),
                    str(data.get("write_mode") or "over-write"),
                    tuple(source) if isinstance(source, list) else None,
                )
            )
    return out


def history_variables(flow: Flow) -> dict[str, str]:
    """Conversation variables that hold the chat history, each with why we think so (see the
    module docstring for what is detected)."""
    declared = {v.name: v for v in flow.variables}
    writers: dict[str, list[str]] = {}
    for node in flow.nodes:
        if node.type != "assigner":
            continue
        for target, op, source in _assigner_writes(node):
            if source is None:
                continue
            origins = value_origins(flow, source)
            said = sorted(o for o in origins if o == "sys.query" or o.startswith("node:"))
            if not said:
                continue
            rolling = f"conversation.{target}" in origins
            if op in ("append", "extend") or rolling:
                what = " and ".join(
                    "the user's messages" if o == "sys.query" else f"{quoted(flow.node(o[5:]).label)}'s replies"
                    for o in said
                )
                how = "appends" if op in ("append", "extend") else "rewrites it with"
                writers.setdefault(target, []).append(f"{quoted(node.label)} {how} {what}")
    out = {name: "; ".join(ways) + " every turn" for name, ways in writers.items()}
    for name, var in declared.items():
        if name not in out and _HISTORY_NAME.search(name) and (var.type.startswith("array") or var.type == "string"):
            out[name] = "its name says it holds the chat history"
    return out


def answer_producers(flow: Flow) -> dict[str, set[str]]:
    """Answer node id → the LLM/agent nodes whose output it renders."""
    out = {}
    for node in flow.nodes:
        if node.type != "answer":
            continue
        origins: set[str] = set()
        for s in selectors(node.data.get("answer") or ""):
            origins |= value_origins(flow, s)
        out[node.id] = {o[5:] for o in origins if o.startswith("node:")}
    return out


def node_reads(flow: Flow, node: Node) -> set[str]:
    reads: set[str] = set()
    for s in selectors(node.data, skip=NODE_SKIP):
        reads |= value_origins(flow, s)
    return reads
