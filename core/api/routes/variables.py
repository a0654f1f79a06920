"""``GET /v1/conversations/{id}/variables`` and ``PUT /v1/conversations/{id}/variables/{variable_id}``:
values are strings made with ``str()``, as Dify sends them; a new value is type-checked as Dify does."""

from __future__ import annotations

import sys
import time

from fastapi import Depends, FastAPI, Query

from core.flow.errors import VariableError
from core.flow.variables import is_valid, mismatch_message, normalize_type
from core.store import repo

from ..caller import Caller, authenticate, require_owned
from ..errors import ApiError, invalid, not_found
from ..schemas import VariableItem, VariableList, VariableUpdate, check_user, clean, error_responses, ts

#: Dify's MAX_VARIABLE_SIZE default: a variable's shallow ``sys.getsizeof`` must not exceed it.
MAX_VARIABLE_SIZE = 200 * 1024


def _exposed_type(value_type: str) -> str:
    return "number" if value_type in ("integer", "float") else value_type


def _variable_item(v: repo.StoredVariable, updated_at: float | None = None) -> dict:
    return {
        "id": v.id,
        "name": v.name,
        "value_type": _exposed_type(v.value_type),
        "value": str(v.value),
        "description": v.description or "",
        "created_at": ts(v.created_at),
        "updated_at": ts(updated_at if updated_at is not None else v.updated_at),
    }


def list_variables(
    caller: Caller, conversation_id: str, user: str, last_id: str | None, limit: int, variable_name: str | None
) -> dict:
    row = require_owned(caller, conversation_id, user)
    stored = repo.get_variables(caller.db, row.id)  # created_at ascending (then id)
    if variable_name:
        needle = variable_name.lower()
        stored = [v for v in stored if needle in v.name.lower()]
    if last_id:
        last = next((v for v in stored if v.id == last_id), None)
        if last is None:
            raise invalid(f"last_id {last_id!r} is not a variable of this conversation", "last_id")
        # Dify pages by created_at alone: strictly newer rows (rows created together share it).
        stored = [v for v in stored if v.created_at > last.created_at]
    page = stored[:limit]
    return {"limit": limit, "has_more": len(stored) > limit, "data": [_variable_item(v) for v in page]}


def update_variable(caller: Caller, conversation_id: str, variable_id: str, body: VariableUpdate) -> dict:
    user = check_user(body.user)
    if "value" not in body.model_fields_set:
        raise invalid("value is required", "value")
    row = require_owned(caller, conversation_id, user)
    stored = next((v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id), None)
    if stored is None:
        raise not_found("Conversation Variable Not Exists.")
    value = clean(body.value, "value")
    try:
        expected = normalize_type(stored.value_type)
    except VariableError as e:
        raise invalid(str(e)) from None
    if not is_valid(expected, value):
        raise ApiError(400, "bad_request", mismatch_message(stored.name, expected, stored.value, value))
    if sys.getsizeof(value) > MAX_VARIABLE_SIZE:
        raise invalid(f"variable '{stored.name}' is too large: its size exceeds {MAX_VARIABLE_SIZE} bytes", "value")
    with caller.db.conversation_lock(row.id):  # after a turn running on the conversation, never under it
        stored = next((v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id), stored)
        info = caller.service.info(row.id)
        repo.write_variable_changes(
            caller.db,
            row.id,
            [{"name": stored.name, "old": stored.value, "new": value, "operation": "edit", "node_id": "user"}],
            turn_id=info.active_turn_id,
            turn_seq=info.turn_count or None,
        )
    updated = next(v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id)
    return _variable_item(updated, updated_at=time.time())


def register(app: FastAPI) -> None:
    @app.get(
        "/v1/conversations/{conversation_id}/variables",
        response_model=VariableList,
        responses=error_responses(400, 401, 404),
        tags=["conversations"],
        summary="A conversation's variables (values as str(), created_at ascending)",
    )
    def get_variables(
        conversation_id: str,
        caller: Caller = Depends(authenticate),
        user: str | None = Query(default=None),
        last_id: str | None = Query(default=None),
        limit: int = Query(default=20, ge=1, le=100),
        variable_name: str | None = Query(default=None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.\-]+$"),
    ):
        return list_variables(caller, conversation_id, check_user(user), last_id, limit, variable_name)

    @app.put(
        "/v1/conversations/{conversation_id}/variables/{variable_id}",
        response_model=VariableItem,
        responses=error_responses(400, 401, 404),
        tags=["conversations"],
        summary="Set a conversation variable (type-checked as Dify does)",
    )
    def put_variable(
        conversation_id: str, variable_id: str, body: VariableUpdate, caller: Caller = Depends(authenticate)
    ):
        return update_variable(caller, conversation_id, variable_id, body)
