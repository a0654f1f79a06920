"""What every route of the Service API shares (:mod:`core.api.server` for chat and the MemLens
extension, :mod:`core.api.app_routes` for the rest): Dify's error shape, input hygiene, the caller an app
key authenticates, and the store query scoped to that caller."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from pydantic import BaseModel, Field
from sqlalchemy import select

from core.flow.graph import Flow
from core.limits import LimitError, check_value
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from core.store.models import ConversationRow, FlowVersionRow

DEFAULT_USER = "DEFAULT-USER"
SOURCE = "api"
MODE = "advanced-chat"
CONVERSATION_NOT_FOUND = "Conversation Not Exists."
NOT_CHAT_APP = "Please check if your app mode matches the right API route."


# -- errors -----------------------------------------------------------------------------------------

class ApiError(Exception):
    """An answer in Dify's error shape: ``{"code", "message", "status"}`` (+ ``params``)."""

    def __init__(self, status: int, code: str, message: str, params: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.params = params

    def body(self) -> dict:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "status": self.status}
        if self.params is not None:
            out["params"] = self.params
        return out


def invalid(message: str, params: str | None = None) -> ApiError:
    return ApiError(400, "invalid_param", message, params)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


# -- shapes every route documents ---------------------------------------------------------------------

class ErrorBody(BaseModel):
    code: str = Field(description="snake_case error code, e.g. invalid_param, not_found, unauthorized")
    message: str
    status: int
    params: str | None = Field(default=None, description="the offending field, for invalid_param")


def _errors(*codes: int) -> dict:
    described = {400: "bad input (invalid_param, bad_request, not_chat_app)", 401: "missing, unknown or revoked key",
                 404: "no such conversation, message or variable for this app and user"}
    return {c: {"model": ErrorBody, "description": described[c]} for c in codes}


# -- input hygiene ----------------------------------------------------------------------------------

def _clean(value: Any, field: str) -> Any:
    """NUL characters removed, lone surrogates replaced; values nested past the depth limit and
    non-finite numbers are refused."""
    try:
        check_value(value, field, finite=False)
    except LimitError as e:
        raise invalid(str(e), field) from None
    return _scrub(value, field)


def _scrub(value: Any, field: str) -> Any:
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise invalid(f"{field}: numbers must be finite", field)
    if isinstance(value, dict):
        return {_scrub(k, field): _scrub(v, field) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, field) for v in value]
    return value


def _user(value: str | None, *, required: bool = False) -> str:
    """Dify's ``user`` argument: required on chat-messages, else ``DEFAULT-USER`` when absent."""
    user = _clean(value, "user") if value is not None else ""
    if not user:
        if required:
            raise invalid("Arg user must be provided.")
        return DEFAULT_USER
    if len(user) > 255:
        raise invalid("user must be at most 255 characters", "user")
    return user


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def _ts(value: float | None) -> int:
    return int(value or 0)


# -- the app a key serves ---------------------------------------------------------------------------

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


def _authenticate(request: Request, _credentials: Any = Depends(_bearer)) -> Caller:
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


# -- store queries scoped to the caller -------------------------------------------------------------

def _owned(caller: Caller, conversation_id: str | None, user: str) -> ConversationRow | None:
    """The conversation if it is this app's, this user's and was started through the API."""
    if not conversation_id or not _is_uuid(conversation_id):
        return None
    with caller.db.session(write=False) as s:
        return s.scalars(select(ConversationRow)
                         .join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id)
                         .where(ConversationRow.id == conversation_id, ConversationRow.user_id == user,
                                ConversationRow.source == SOURCE, FlowVersionRow.flow_id == caller.flow_id)).first()


def _require_owned(caller: Caller, conversation_id: str, user: str) -> ConversationRow:
    row = _owned(caller, conversation_id, user)
    if row is None:
        raise not_found(CONVERSATION_NOT_FOUND)
    return row


__all__ = ["DEFAULT_USER", "SOURCE", "MODE", "CONVERSATION_NOT_FOUND", "NOT_CHAT_APP", "ApiError", "invalid",
           "not_found", "ErrorBody", "Caller"]
