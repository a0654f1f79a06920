"""An n8n execution's JSON, read through its memory node's input and output.

n8n records what a memory node did in the execution's run data: each call is one run of the node
(``data.resultData.runData[node]``), its input ``inputOverride.ai_memory`` and its output
``data.ai_memory``, an item ``{"action": "loadMemoryVariables" | "saveContext", "chatHistory": [...]}``
whose ``chatHistory`` holds the messages as LangChain serialises them (``{"lc": 1, "type":
"constructor", "id": [..., "HumanMessage"], "kwargs": {...}}``). The execution is what n8n's API gives
(``GET /api/v1/executions/{id}?includeData=true``: ``{id, workflowId, data, workflowData}``, or a list
of them, or its ``{"data": [...]}`` page); the memory node's output items copied from the editor
(``[{"action", "chatHistory"}]``) read too.

Each memory node of an execution is one conversation: the messages of its newest run that lists
them. After a ``saveContext`` that is everything the memory stores (n8n logs the whole history
after a save); after a ``loadMemoryVariables`` it is what the node handed the agent, its window
only (a Tools Agent V3 saves tool rounds without a logged save), which a note says. The node's type,
version and Context Window Length, from the execution's ``workflowData``, are kept in the
conversation's ``meta["memory_node"]``.
"""

from __future__ import annotations

from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import Conversation

from .common import conversation_from_messages, excerpt, label_of
from .langchain import is_langchain
from .openai import openai_messages
from .records import Problem, ReadContext, Record, Records
from .registry import Format

NAME = "n8n-execution"
ACTIONS = ("loadMemoryVariables", "saveContext")
#: What each action's chat history is, in the meta and the notes.
HELD = {"saveContext": "stored", "loadMemoryVariables": "loaded"}


def _is_execution(value: Any) -> bool:
    data = value.get("data") if isinstance(value, dict) else None
    return isinstance(data, dict) and isinstance(data.get("resultData"), dict)


def _is_memory_item(value: Any) -> bool:
    return isinstance(value, dict) and value.get("action") in ACTIONS and "chatHistory" in value


def _is_output(value: Any) -> bool:
    return _is_memory_item(value) or (isinstance(value, dict) and _is_memory_item(value.get("json")))


def _items(run: Any) -> list:
    """The ``json`` of every item a run output on its ``ai_memory`` connection."""
    data = run.get("data") if isinstance(run, dict) else None
    out = []
    for branch in (data.get("ai_memory") if isinstance(data, dict) else None) or []:
        for item in branch if isinstance(branch, list) else []:
            if isinstance(item, dict) and isinstance(item.get("json"), dict):
                out.append(item["json"])
    return out


def _messages(item: dict, where: str) -> list:
    history = item.get("chatHistory")
    if not isinstance(history, list):
        raise RecordError(f"{where}: 'chatHistory' is not a list of messages", "chatHistory")
    for j, message in enumerate(history):
        if not is_langchain(message):
            raise RecordError(
                f"{where}: message {j} is not a message LangChain serialised (an object with 'lc', "
                "'id' naming a message class and 'kwargs')",
                "chatHistory",
            )
    try:
        return openai_messages(history)
    except RecordError as e:
        raise RecordError(f"{where}: {e}", "chatHistory") from None


def _node_settings(execution: dict, node: str) -> dict:
    """The memory node as the execution's workflow holds it: type, version, Context Window Length (a
    parameter left at its default, 5, is not written in the workflow)."""
    workflow = execution.get("workflowData")
    nodes = workflow.get("nodes") if isinstance(workflow, dict) else None
    for entry in nodes if isinstance(nodes, list) else []:
        if isinstance(entry, dict) and entry.get("name") == node:
            out = {"name": node, "type": entry.get("type"), "version": entry.get("typeVersion")}
            parameters = entry.get("parameters") if isinstance(entry.get("parameters"), dict) else {}
            if "contextWindowLength" in parameters:
                out["context_window_length"] = parameters["contextWindowLength"]
            return out
    return {"name": node}


def _conversation(item: dict, conv_id: str, name: str, where: str, meta: dict, ctx: ReadContext) -> Conversation:
    held = HELD[item["action"]]
    conv = conversation_from_messages(
        _messages(item, where), conv_id, source_format=NAME, name=name, meta={**meta, "history": held}
    )
    if held == "loaded":
        ctx.notes.append(
            f"{excerpt(name, 60)!r}: the history as the memory node loaded it for the agent (its "
            "window), not everything it stores"
        )
    return conv


def _execution(execution: Any, n: int | None, ctx: ReadContext) -> list[Conversation]:
    if not _is_execution(execution):
        raise RecordError(
            "is not an n8n execution: expected an object with 'data.resultData' (the execution "
            "with its data: includeData=true)",
            "data",
        )
    run_data = execution["data"]["resultData"].get("runData")
    if not isinstance(run_data, dict):
        raise RecordError(
            "has no 'data.resultData.runData': export the execution with its data (includeData=true)",
            "data.resultData.runData",
        )
    exec_id = str(execution.get("id") or (ctx.stem if n is None else f"{ctx.stem}#{n}"))
    workflow = execution.get("workflowData") if isinstance(execution.get("workflowData"), dict) else {}
    title = str(workflow.get("name") or execution.get("workflowId") or exec_id)
    out = []
    for node, runs in run_data.items():
        listed = [
            (i, item)
            for i, run in enumerate(runs if isinstance(runs, list) else [])
            for item in _items(run)
            if _is_memory_item(item)
        ]
        if not listed:
            continue
        i, item = listed[-1]
        meta = {
            "execution_id": exec_id,
            "workflow_id": execution.get("workflowId"),
            "memory_node": _node_settings(execution, node),
        }
        out.append(_conversation(item, f"{exec_id}:{node}", f"{title} · {node}", f"node {node!r}, run {i}", meta, ctx))
    if not out:
        raise RecordError(
            "no memory node ran in this execution (no run has 'ai_memory' output with a chat history)",
            "data.resultData.runData",
        )
    return out


def _label(value: Any) -> str:
    return label_of(value, "id", "workflowId")


def _sniff(first: Any, layout: str) -> bool:
    if isinstance(first, dict) and isinstance(first.get("data"), list) and first["data"]:
        first = first["data"][0]  # a page of the executions API
    return _is_execution(first) or _is_output(first)


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    first = records.first
    page = records.layout == "document" and isinstance(first, dict) and isinstance(first.get("data"), list)
    if page or _is_execution(first) or (records.layout == "array" and not _is_output(first)):
        for conversations in ctx.each(
            records.inner(first["data"]) if page else records, lambda value, n: _execution(value, n, ctx), _label
        ):
            yield from conversations
        return
    items = []
    for rec in [Record(None, first)] if records.layout == "document" else records:
        if rec.error:  # a JSON Lines line that is not JSON: the output is read whole or not at all
            ctx.report(Problem(rec.index, rec.error.split(" is ")[0], rec.error))
            return
        items.append(rec.value)
    yield from ctx.each([Record(None, items)], lambda value, _: _memory_output(value, ctx))


def _memory_output(items: list, ctx: ReadContext) -> Conversation:
    """A memory node's output items copied from the editor (``{action, chatHistory}``, or wrapped as
    ``{"json": …}``): the newest item's history."""
    unwrapped = []
    for index, item in enumerate(items):
        item = item.get("json") if isinstance(item, dict) and isinstance(item.get("json"), dict) else item
        if not _is_memory_item(item):
            raise RecordError(
                f"item {index} is not a memory node's output (an object with 'action' "
                f"{' or '.join(ACTIONS)} and 'chatHistory')",
                f"item {index}",
            )
        unwrapped.append(item)
    return _conversation(unwrapped[-1], ctx.stem, ctx.stem, f"item {len(unwrapped) - 1}", {}, ctx)


FORMAT = Format(
    NAME, "an n8n execution (its memory node's chat history; the executions API or the node's output)", _sniff, _read
)
