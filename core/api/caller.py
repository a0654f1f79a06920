"""The app a key serves: authenticating a request (:func:`authenticate`) and the store queries scoped to
the caller — a conversation is this app's, this user's and started through the API, or it is not found."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from sqlalchemy import select

from core.flow.graph import Flow
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from core.store.models import ConversationRow, FlowVersionRow

from .errors import CONVERSATION_NOT_FOUND, NOT_CHAT_APP, ApiError, not_found
from .schemas import is_uuid

SOURCE = "api"


@dataclass
class Caller:
    """One authenticated request: the key, the flow it serves, and the service to run turns with."""

    key: app_keys.AppKey
    service: ConversationService
    version: repo.FlowVersion
    flow: Flow

    @property
    def db(self) -> Database:
        return self.service.db

    @property
    def flow_id(self) -> str:
        return self.key.flow_id


_bearer = HTTPBearer(auto_error=False, description="an app key made with `python -m core keys create FLOW_ID`")


def authenticate(request: Request, _credentials: Any = Depends(_bearer)) -> Caller:
    """Dify's key check, with its messages; then the key's flow must be a chatflow."""
    header = request.headers.get("authorization")
    if header is None or " " not in header.strip():
        raise ApiError(401, "unauthorized", "Authorization header must be provided and start with 'Bearer'")
    scheme, token = header.strip().split(None, 1)
    if scheme.lower() != "bearer":
        raise ApiError(401, "unauthorized", "Authorization scheme must be 'Bearer'")
    service: ConversationService = request.app.state.service
    key = app_keys.authenticate(service.db, token.strip())
    if key is None:
        raise ApiError(401, "unauthorized", "Access token is invalid")
    version = repo.latest_flow_version(service.db, key.flow_id)
    caller = Caller(key=key, service=service, version=version, flow=service.flow(version.id))
    if not caller.flow.is_chat:
        raise ApiError(400, "not_chat_app", NOT_CHAT_APP)
    return caller


def owned(caller: Caller, conversation_id: str | None, user: str) -> ConversationRow | None:
    """The conversation if it is this app's, this user's and was started through the API."""
    if not conversation_id or not is_uuid(conversation_id):
        return None
    with caller.db.session(write=False) as s:
        return s.scalars(
            select(ConversationRow)
            .join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id)
            .where(
                ConversationRow.id == conversation_id,
                ConversationRow.user_id == user,
                ConversationRow.source == SOURCE,
                FlowVersionRow.flow_id == caller.flow_id,
            )
        ).first()


def require_owned(caller: Caller, conversation_id: str, user: str) -> ConversationRow:
    row = owned(caller, conversation_id, user)
    if row is None:
        raise not_found(CONVERSATION_NOT_FOUND)
    return row
