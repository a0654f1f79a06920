"""``GET /v1/messages`` (a conversation's messages, newest page first), ``POST
/v1/messages/{message_id}/feedbacks`` (rate an answer ``like`` / ``dislike``; ``null`` revokes) and
``GET /v1/messages/{message_id}/suggested`` (three follow-up questions from the app's first LLM node's
model, when the flow enables ``suggested_questions_after_answer``, else Dify's 400).

An Agent app's message (``agent-chat``) lists its ``agent_thoughts`` as Dify's does: one per model
request of the run. MemLens asks the app's model once per turn (its tools are not run), so a message
has one thought, whose text is the answer — what Dify's agent history replays for that turn."""

from __future__ import annotations

import json
import mimetypes
import re
import uuid

from fastapi import Depends, FastAPI, Query
from sqlalchemy import select

from core.flow.agent_chat import AGENT_CHAT
from core.llm.client import LiteLLMClient
from core.llm.errors import LLMError
from core.store import repo
from core.store.errors import NoFeedbackError, StoreError
from core.store.models import TurnRow

from ..caller import Caller, authenticate, owned, require_owned
from ..errors import MESSAGE_NOT_FOUND, ApiError, invalid, not_found
from ..schemas import (
    FeedbackRequest,
    MessageList,
    ResultBody,
    Suggested,
    check_user,
    clean,
    error_responses,
    is_uuid,
    ts,
)

# Dify's message statuses. A running turn is "normal" with an empty answer, as Dify's message row
# is while its workflow runs; a turn whose process was killed is an "error" saying so.
STATUS = {repo.SUCCEEDED: "normal", repo.FAILED: "error", repo.RUNNING: "normal", repo.INTERRUPTED: "error"}


def agent_thought(message_id: str, thought: str, position: int = 1) -> dict:
    """The fields an Agent app's thought has both in its stream (``agent_thought`` events) and in
    ``GET /v1/messages``, for a step that called no tool. Its id is the same wherever it is shown."""
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"memlens:{message_id}/agent_thought/{position}")),
        "message_id": message_id,
        "position": position,
        "thought": thought,
        "observation": "",
        "tool": "",
        "tool_labels": {},
        "tool_input": "",
    }


def message_files(row: TurnRow) -> list[dict]:
    """The files the user sent with a message, as Dify lists them (``message_files``): an upload with
    its ``upload_file_id``, a link with its ``url``. MemLens keeps neither their bytes nor their size
    (``-1``, Dify's size of a file it has not measured); the MIME type is the name's."""
    query = next((m for m in row.messages or () if isinstance(m, dict) and m.get("role") == "user"), None)
    out = []
    for n, f in enumerate((query or {}).get("files") or (), start=1):
        if not isinstance(f, dict):
            continue
        upload_id, url = str(f.get("id") or ""), str(f.get("url") or "")
        name = str(f.get("name") or "") or url.rsplit("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        out.append(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"memlens:{row.id}/message_file/{n}")),
                "filename": name,
                "type": str(f.get("type") or "custom"),
                "url": url,
                "mime_type": mimetypes.guess_type(name)[0] or "",
                "size": -1,
                "transfer_method": "local_file" if upload_id else "remote_url",
                "belongs_to": "user",
                "upload_file_id": upload_id or None,
            }
        )
    return out


def message_item(row: TurnRow, feedback: dict | None = None, *, agent: bool = False) -> dict:
    """One message as ``GET /v1/messages`` lists it; ``agent``: the app is an Agent app."""
    thoughts = (
        [{**agent_thought(row.id, row.answer), "chain_id": None, "created_at": ts(row.created_at), "files": []}]
        if agent
        else []
    )
    return {
        "id": row.id,
        "conversation_id": row.conversation_id,
        "parent_message_id": row.parent_id,
        "inputs": dict(row.inputs or {}),
        "query": row.query,
        "answer": row.answer,
        "message_files": message_files(row),
        "feedback": feedback,
        "retriever_resources": [],
        "agent_thoughts": thoughts,
        "created_at": ts(row.created_at),
        "status": STATUS.get(row.status, row.status),
        "error": row.error,
        "extra_contents": [],
    }


def list_messages(caller: Caller, conversation_id: str, user: str, first_id: str | None, limit: int) -> dict:
    for name, value in (("conversation_id", conversation_id), ("first_id", first_id)):
        if value and not is_uuid(value):  # Dify validates both ids before it looks anything up
            raise invalid(f"{name} must be a valid UUID", name)
    if not conversation_id:
        return {"limit": limit, "has_more": False, "data": []}
    row = require_owned(caller, conversation_id, user)
    repo.settle_interrupted(caller.db, row.id)
    ratings = repo.feedbacks(caller.db, row.id)
    with caller.db.session(write=False) as s:
        q = select(TurnRow).where(TurnRow.conversation_id == row.id)
        if first_id:
            first = s.scalars(
                select(TurnRow.seq).where(TurnRow.conversation_id == row.id, TurnRow.id == first_id)
            ).first()
            if first is None:
                raise not_found("First Message Not Exists.")
            q = q.where(TurnRow.seq < first)
        rows = s.scalars(q.order_by(TurnRow.seq.desc()).limit(limit + 1)).all()
        has_more = len(rows) > limit
        agent = caller.flow.app_mode == AGENT_CHAT
        items = [
            message_item(
                r,
                next(({"rating": f["rating"]} for f in ratings.get(r.id, []) if f["user_id"] == user), None),
                agent=agent,
            )
            for r in reversed(rows[:limit])
        ]
    return {"limit": limit, "has_more": has_more, "data": items}


def _owned_message(caller: Caller, message_id: str, user: str) -> TurnRow:
    if not is_uuid(message_id):
        raise not_found(MESSAGE_NOT_FOUND)
    with caller.db.session(write=False) as s:
        row = s.get(TurnRow, message_id)
        if row is not None:
            s.expunge(row)
    if row is None or owned(caller, row.conversation_id, user) is None:
        raise not_found(MESSAGE_NOT_FOUND)
    return row


def feedback(caller: Caller, message_id: str, body: FeedbackRequest) -> dict:
    user = check_user(body.user, required=True)
    row = _owned_message(caller, message_id, user)
    content = clean(body.content, "content") if body.content is not None else None
    try:
        repo.set_feedback(caller.db, row.id, user, body.rating, content)
    except NoFeedbackError as e:
        raise invalid(str(e)) from None
    except StoreError:  # deleted by a concurrent request
        raise not_found(MESSAGE_NOT_FOUND) from None
    return {"result": "success"}


SUGGEST_PROMPT = (
    "Given the conversation below, predict the three questions the user is most likely to ask "
    "next. Keep each under 20 words and in the language of the conversation. Reply with a JSON "
    "array of three strings and nothing else."
)


def parse_questions(text: str) -> list[str]:
    """Up to three questions from a model's reply: a JSON array if there is one, else its lines."""
    match = re.search(r"\[.*\]", text or "", re.S)
    if match:
        try:
            items = json.loads(match.group(0))
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [str(q).strip() for q in items if str(q).strip()][:3]
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip() for line in (text or "").splitlines()]
    return [line for line in lines if line][:3]


def suggested(caller: Caller, message_id: str, user: str) -> dict:
    row = _owned_message(caller, message_id, user)
    if not (caller.flow.features.get("suggested_questions_after_answer") or {}).get("enabled"):
        raise ApiError(400, "bad_request", "Function Suggested questions after answer disabled.")
    nodes = caller.flow.llm_nodes
    if not nodes:
        return {"result": "success", "data": []}
    conversation = caller.service.conversation(row.conversation_id)
    path = conversation.tree.thread(conversation.index_of(row.id))
    history = "\n".join(
        f"user: {conversation.turns[i].query}\nassistant: {conversation.turns[i].answer}" for i in path[-3:]
    )
    model = caller.flow.llm(nodes[0].id).model
    try:
        reply = (caller.service.llm or LiteLLMClient()).complete(
            model, [{"role": "system", "content": SUGGEST_PROMPT}, {"role": "user", "content": history}], 256
        )
    except LLMError:
        return {"result": "success", "data": []}  # as Dify: a failed suggestion is no suggestion
    return {"result": "success", "data": parse_questions(reply.text)}


def register(app: FastAPI) -> None:
    @app.get(
        "/v1/messages",
        response_model=MessageList,
        responses=error_responses(400, 401, 404),
        tags=["chat"],
        summary="A conversation's messages, every branch, oldest first, newest page first",
    )
    def get_messages(
        caller: Caller = Depends(authenticate),
        conversation_id: str = Query(description="required, as in Dify; empty: an empty list"),
        user: str | None = Query(default=None),
        first_id: str | None = Query(default=None),
        limit: int = Query(default=20, ge=1, le=100),
    ):
        return list_messages(caller, conversation_id, check_user(user), first_id, limit)

    @app.post(
        "/v1/messages/{message_id}/feedbacks",
        response_model=ResultBody,
        responses=error_responses(400, 401, 404),
        tags=["chat"],
        summary="Rate an answer like or dislike (null revokes the rating)",
    )
    def post_feedback(message_id: str, body: FeedbackRequest, caller: Caller = Depends(authenticate)):
        return feedback(caller, message_id, body)

    @app.get(
        "/v1/messages/{message_id}/suggested",
        response_model=Suggested,
        responses=error_responses(400, 401, 404),
        tags=["chat"],
        summary="Follow-up questions after an answer",
    )
    def get_suggested(message_id: str, caller: Caller = Depends(authenticate), user: str | None = Query(default=None)):
        return suggested(caller, message_id, check_user(user, required=True))
