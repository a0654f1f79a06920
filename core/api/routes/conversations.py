"""``GET /v1/conversations``, ``DELETE /v1/conversations/{id}`` and ``POST /v1/conversations/{id}/name``
with Dify's fields, paging and messages; a new conversation's name (:func:`conversation_name`)."""

from __future__ import annotations

from typing import Literal

from fastapi import Body, Depends, FastAPI, Query
from fastapi.responses import Response
from sqlalchemy import and_, or_, select

from core.flow.templates import render_introduction
from core.store.errors import StoreError
from core.store.models import ConversationRow, FlowVersionRow, TurnRow

from ..caller import SOURCE, Caller, authenticate, require_owned
from ..errors import CONVERSATION_NOT_FOUND, invalid, not_found
from ..schemas import (
    ConversationItem,
    ConversationList,
    RenameRequest,
    UserBody,
    check_user,
    clean,
    error_responses,
    is_uuid,
    ts,
)


def conversation_name(query: str) -> str:
    """Dify's name for a new conversation: the query, cut to 20 characters + "…" when longer."""
    query = query or "New conversation"
    return (query[:20] + "…") if len(query) > 20 else query


def conversation_item(row: ConversationRow, opening_statement: str = "") -> dict:
    """A conversation as Dify lists it; its ``introduction`` is the app's opening statement with the
    conversation's inputs in its slots."""
    inputs = dict(row.inputs or {})
    return {
        "id": row.id,
        "name": row.name,
        "inputs": inputs,
        "status": "normal",
        "introduction": render_introduction(opening_statement, inputs),
        "created_at": ts(row.created_at),
        "updated_at": ts(row.updated_at),
    }


def _opening_statement(caller: Caller) -> str:
    value = caller.flow.features.get("opening_statement")
    return value if isinstance(value, str) else ""


def list_conversations(caller: Caller, user: str, last_id: str | None, limit: int, sort_by: str) -> dict:
    descending = sort_by.startswith("-")
    column = getattr(ConversationRow, sort_by.lstrip("-"))
    scope = (
        select(ConversationRow)
        .join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id)
        .where(
            ConversationRow.user_id == user, ConversationRow.source == SOURCE, FlowVersionRow.flow_id == caller.flow_id
        )
    )
    opening = _opening_statement(caller)
    with caller.db.session(write=False) as s:
        q = scope
        if last_id:
            last = s.scalars(scope.where(ConversationRow.id == last_id)).first() if is_uuid(last_id) else None
            if last is None:
                raise not_found("Last Conversation Not Exists.")
            value = getattr(last, sort_by.lstrip("-"))
            # Ties are broken by id, so a page never skips a conversation with the same timestamp.
            if descending:
                q = q.where(or_(column < value, and_(column == value, ConversationRow.id < last.id)))
            else:
                q = q.where(or_(column > value, and_(column == value, ConversationRow.id > last.id)))
        order = (column.desc(), ConversationRow.id.desc()) if descending else (column.asc(), ConversationRow.id.asc())
        rows = s.scalars(q.order_by(*order).limit(limit + 1)).all()
        return {
            "limit": limit,
            "has_more": len(rows) > limit,
            "data": [conversation_item(r, opening) for r in rows[:limit]],
        }


def rename(caller: Caller, conversation_id: str, body: RenameRequest) -> dict:
    user = check_user(body.user)
    name = clean(body.name, "name") if body.name is not None else ""
    auto = bool(body.auto_generate)
    if not auto and not name.strip():  # as Dify: a name of spaces is no name
        raise invalid("name is required when auto_generate is false", "name")
    row = require_owned(caller, conversation_id, user)
    if auto:
        with caller.db.session() as s:
            first = s.scalars(
                select(TurnRow.query).where(TurnRow.conversation_id == row.id).order_by(TurnRow.seq).limit(1)
            ).first()
        if first is None:
            raise not_found("Message Not Exists.")
        name = conversation_name(first)
    if len(name) > 255:
        raise invalid("name must be at most 255 characters", "name")
    caller.service.rename(row.id, name)
    renamed = require_owned(caller, row.id, user)
    return conversation_item(renamed, _opening_statement(caller))


def delete(caller: Caller, conversation_id: str, user: str) -> None:
    row = require_owned(caller, conversation_id, user)
    try:
        caller.service.delete(row.id)
    except StoreError:  # deleted by a concurrent request
        raise not_found(CONVERSATION_NOT_FOUND) from None


def register(app: FastAPI) -> None:
    @app.get(
        "/v1/conversations",
        response_model=ConversationList,
        responses=error_responses(400, 401, 404),
        tags=["conversations"],
        summary="The user's conversations with this app",
    )
    def get_conversations(
        caller: Caller = Depends(authenticate),
        user: str | None = Query(default=None),
        last_id: str | None = Query(default=None),
        limit: int = Query(default=20, ge=1, le=100),
        sort_by: Literal["created_at", "-created_at", "updated_at", "-updated_at"] = Query(default="-updated_at"),
    ):
        return list_conversations(caller, check_user(user), last_id, limit, sort_by)

    @app.delete(
        "/v1/conversations/{conversation_id}",
        status_code=204,
        response_class=Response,
        responses=error_responses(400, 401, 404),
        tags=["conversations"],
        summary="Delete a conversation",
    )
    def delete_conversation(
        conversation_id: str, body: UserBody | None = Body(default=None), caller: Caller = Depends(authenticate)
    ):
        delete(caller, conversation_id, check_user(body.user if body else None))
        return Response(status_code=204)

    @app.post(
        "/v1/conversations/{conversation_id}/name",
        response_model=ConversationItem,
        responses=error_responses(400, 401, 404),
        tags=["conversations"],
        summary="Rename a conversation",
    )
    def rename_conversation(conversation_id: str, body: RenameRequest, caller: Caller = Depends(authenticate)):
        return rename(caller, conversation_id, body)
