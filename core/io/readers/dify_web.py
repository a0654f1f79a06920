"""Dify web chat items (``isAnswer`` / ``parentMessageId``): question items pair with their answers
into message records, one conversation per file."""

from __future__ import annotations

from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn, with_shared_ids

from .records import Problem, ReadContext, Records
from .registry import Format


def _sniff(first: Any, layout: str) -> bool:
    return layout != "document" and isinstance(first, dict) and "isAnswer" in first


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    if records.layout == "document":
        ctx.report(Problem(None, "", "Dify web chat items must be a list"))
        return
    data: list[dict] = []

    def check(item: Any, n: int | None) -> dict:
        if not isinstance(item, dict):
            raise RecordError("the chat item is not an object", "")
        if "id" not in item:
            raise RecordError(f"chat item {n} has no 'id'", "id")
        if item.get("content") is not None and not isinstance(item.get("content"), str):
            raise RecordError(f"chat item {item['id']!r} has a 'content' that is not a string", "content")
        return item

    data = list(ctx.each(records, check))
    if ctx.problems:
        return  # one conversation: read whole or not at all
    by_id = {str(item["id"]): item for item in data}
    answered: dict[str, dict] = {}
    for item in data:
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None:
                answered[str(parent)] = item
    turns: list[Turn] = []
    conv_id = ""
    for item in data:
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None and str(parent) in by_id:
                continue  # taken with its question
            question, answer = None, item
        else:
            question, answer = item, answered.get(str(item["id"]))
        tid = str(answer["id"]) if answer else str(question["id"])
        # The answer's ``input.query`` is the stored message record's query (what memory replays);
        # the question item's ``content`` is only what the chat shows.
        stored = (answer or {}).get("input")
        query = stored.get("query") if isinstance(stored, dict) and isinstance(stored.get("query"), str) else None
        if query is None:
            query = (question or {}).get("content") or ""
        messages = (
            Message(role="user", content=query, kind=QUERY, ref=f"{tid}:query"),
            Message(role="assistant", content=(answer or {}).get("content") or "", kind=ANSWER, ref=f"{tid}:answer"),
        )
        parent = question.get("parentMessageId") if question else None
        meta = {}
        if answer is not None and isinstance(answer.get("log"), list):
            meta["log"] = answer["log"]
        if answer is not None and answer.get("conversationId"):
            conv_id = conv_id or str(answer["conversationId"])
        turns.append(
            Turn(
                id=tid,
                parent_id=str(parent) if parent else None,
                messages=messages,
                query_index=0,
                answer_index=1,
                answer_tokens=None if answer else 0,
                meta=meta,
                status="normal" if answer else "running",
            )
        )
    yield Conversation(id=conv_id or ctx.stem, turns=with_shared_ids(turns), source_format="dify-web", name=ctx.stem)


# Detection order: distinctive shapes first, the generic OpenAI message list last.


FORMAT = Format("dify-web", "Dify web chat items (isAnswer / parentMessageId)", _sniff, _read)
