"""Ids and times of stored rows, and the hash that tells two flow structures apart."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


def structure_hash(structure: Any) -> str:
    """A stable hash of a flow's structural signature (node ids, types, order, edges)."""
    return hashlib.sha256(json.dumps(structure, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:64]
