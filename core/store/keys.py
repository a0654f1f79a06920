"""Service API keys: created for one flow, shown once, stored as a hash, revocable.

A key is ``app-`` followed by 43 URL-safe characters (256 random bits), the shape of Dify's app
keys. Only its SHA-256 is stored: a key this long cannot be guessed from its hash, so no salt or
slow hash is needed, and a request is authenticated with one indexed lookup. The plaintext is
returned once by :func:`create_key`; after that a key is known by its id and its ``hint`` (first
and last characters), enough to recognise it in a list and useless as a credential.

A key serves the flow it was created for: every conversation it starts runs that flow's newest
version (and stays pinned to it), and it sees no conversation of another flow. Revoking is
immediate and permanent.

The functions here are what the command line (``python -m core keys``) and a settings page call.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass

from sqlalchemy import select

from .db import Database
from .errors import NotFoundError, StoreError
from .models import AppKeyRow, FlowRow

PREFIX = "app-"


@dataclass(frozen=True)
class AppKey:
    id: str
    flow_id: str
    flow_name: str
    hint: str
    name: str
    created_at: float
    revoked_at: float | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _hint(key: str) -> str:
    return f"{key[:8]}…{key[-4:]}"


def _key(row: AppKeyRow, flow_name: str) -> AppKey:
    return AppKey(row.id, row.flow_id, flow_name, row.hint, row.name, row.created_at, row.revoked_at)


def create_key(db: Database, flow_id: str, name: str = "") -> tuple[AppKey, str]:
    """A new key for ``flow_id``: its record and the plaintext key (returned here only, never stored)."""
    if len(name) > 255:
        raise StoreError("a key's name must be at most 255 characters")
    secret = PREFIX + secrets.token_urlsafe(32)
    with db.session() as s:
        flow = s.get(FlowRow, flow_id)
        if flow is None:
            raise NotFoundError(f"no flow with id {flow_id!r}; list flows with `python -m core flows list`")
        row = AppKeyRow(
            id=str(uuid.uuid4()),
            flow_id=flow_id,
            key_hash=hash_key(secret),
            hint=_hint(secret),
            name=name,
            created_at=time.time(),
            revoked_at=None,
        )
        s.add(row)
        s.flush()
        return _key(row, flow.name), secret


def revoke_key(db: Database, key_id: str) -> AppKey:
    """Revoke a key at once (requests with it answer 401 from now on); revoking twice is harmless."""
    with db.session() as s:
        row = s.get(AppKeyRow, key_id)
        if row is None:
            raise NotFoundError(f"no API key with id {key_id!r}; list keys with `python -m core keys list`")
        if row.revoked_at is None:
            row.revoked_at = time.time()
        flow = s.get(FlowRow, row.flow_id)
        return _key(row, flow.name if flow else "")


def list_keys(db: Database, flow_id: str | None = None) -> list[AppKey]:
    """Every key (revoked ones too), newest first; only ``flow_id``'s when given."""
    with db.session() as s:
        q = select(AppKeyRow, FlowRow.name).join(FlowRow, FlowRow.id == AppKeyRow.flow_id)
        if flow_id is not None:
            q = q.where(AppKeyRow.flow_id == flow_id)
        rows = s.execute(q.order_by(AppKeyRow.created_at.desc(), AppKeyRow.id)).all()
        return [_key(r, name) for r, name in rows]


def authenticate(db: Database, key: str) -> AppKey | None:
    """The active key whose plaintext is ``key``, or None (unknown or revoked)."""
    if not key.startswith(PREFIX):
        return None
    with db.session() as s:
        found = s.execute(
            select(AppKeyRow, FlowRow.name)
            .join(FlowRow, FlowRow.id == AppKeyRow.flow_id)
            .where(AppKeyRow.key_hash == hash_key(key))
        ).first()
        if found is None or found[0].revoked_at is not None:
            return None
        return _key(found[0], found[1])


__all__ = ["AppKey", "create_key", "revoke_key", "list_keys", "authenticate", "hash_key", "PREFIX"]
