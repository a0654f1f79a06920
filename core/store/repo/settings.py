"""The app's stored settings, one JSON value per key."""

from __future__ import annotations

from typing import Any

from ..db import Database
from ..models import SettingRow


def get_setting(db: Database, key: str, default: Any = None) -> Any:
    with db.session(write=False) as s:
        row = s.get(SettingRow, key)
        return default if row is None else row.value


def set_setting(db: Database, key: str, value: Any) -> None:
    with db.session() as s:
        row = s.get(SettingRow, key)
        if row is None:
            s.add(SettingRow(key=key, value=value))
        else:
            row.value = value
