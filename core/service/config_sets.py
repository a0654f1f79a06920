"""The compare page's saved config sets: named lists of 2–6 memory configs, kept in the store's
settings under :data:`CONFIG_SETS_KEY`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from core.analysis.compare.configs import MAX_CONFIGS, MIN_CONFIGS, NamedConfig, named_configs
from core.errors import MemLensError
from core.report.errors import ReportError
from core.store import repo

if TYPE_CHECKING:  # pragma: no cover
    from core.store.db import Database

#: The settings key under which the compare page keeps its saved config sets.
CONFIG_SETS_KEY = "compare.configs"


def saved_config_sets(db: Database) -> dict[str, list[NamedConfig]]:
    """The compare page's saved config sets, by name (sets no longer valid are left out)."""
    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    out: dict[str, list[NamedConfig]] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, items in raw.items():
        try:
            out[str(name)] = named_configs(items)
        except (MemLensError, TypeError):
            continue
    return out


def save_config_set(db: Database, name: str, configs: Iterable[Any]) -> None:
    """Save (or replace) a named set of 2–6 configs, validated first."""
    name = (name or "").strip()
    if not name:
        raise ReportError("a saved config set needs a name")
    named = named_configs(configs)
    if not MIN_CONFIGS <= len(named) <= MAX_CONFIGS:
        raise ReportError(f"a config set holds {MIN_CONFIGS} to {MAX_CONFIGS} configs; got {len(named)}")
    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    raw = dict(raw) if isinstance(raw, Mapping) else {}
    raw[name] = [c.to_dict() for c in named]
    repo.set_setting(db, CONFIG_SETS_KEY, raw)


def delete_config_set(db: Database, name: str) -> None:
    raw = repo.get_setting(db, CONFIG_SETS_KEY, {}) or {}
    if isinstance(raw, Mapping) and name in raw:
        raw = {k: v for k, v in raw.items() if k != name}
        repo.set_setting(db, CONFIG_SETS_KEY, raw)


__all__ = ["CONFIG_SETS_KEY", "saved_config_sets", "save_config_set", "delete_config_set"]
