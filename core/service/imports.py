"""Storing an uploaded file all-or-nothing, whatever it holds: a MemLens conversation export, a
transcript in any format the importer reads, or a report bundle (its configs saved as a config set)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

from core.analysis.compare.configs import NamedConfig
from core.io.bundle import is_bundle, looks_like_bundle, parse_bundle
from core.io.errors import FormatError
from core.io.readers.registry import import_bytes
from core.words import plural

from .config_sets import save_config_set
from .transfer import import_conversation, store_conversations

if TYPE_CHECKING:  # pragma: no cover
    from core.model.conversation import Conversation
    from core.store.db import Database


@dataclass
class ImportOutcome:
    """What an upload stored: the conversation ids, the import's problems, summary and notes (what
    the file held besides conversations, left out: a trace's runs that are not model calls)."""

    ids: list[str]
    summary: str
    problems: list = field(default_factory=list)
    format: str = ""
    saved_configs: str | None = None
    notes: list[str] = field(default_factory=list)


def import_upload(
    db: Database,
    data: bytes,
    name: str,
    *,
    fmt: str | None = None,
    skip_bad: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    user_id: str = "user",
) -> ImportOutcome:
    """Store an uploaded file all-or-nothing: a MemLens conversation export as it was, a
    transcript (any format) as conversations without a flow, a report bundle as its conversation
    with its configs saved as a config set. On any error nothing is stored."""
    head = data[:4096].decode("utf-8", "ignore")
    if fmt is None and looks_like_bundle(head):
        bundle = parse_bundle(data, name)
        if is_bundle(bundle):
            if on_progress:
                on_progress(len(data), len(data))
            conv_id = import_conversation(db, bundle)
            return ImportOutcome([conv_id], f"1 conversation from {name} (MemLens export)", [], "memlens-conversation")
    result = import_bytes(data, name, fmt, skip_bad=skip_bad, on_progress=on_progress)
    if not result.conversations:
        raise FormatError(f"{name}: nothing to import — every record was bad ({result.summary()})", result.problems)
    saved = None
    reports = [c for c in result.conversations if isinstance(c.meta.get("report"), Mapping)]
    notes = list(result.notes)
    again = imported_before(db, result.conversations)
    if again:
        notes.append(again)
    ids = store_conversations(db, result.conversations, user_id=user_id)
    if reports:
        configs = [NamedConfig.from_dict(c) for c in reports[0].meta["report"].get("configs") or []]
        if configs:
            saved = f"from {name}"
            save_config_set(db, saved, configs)
    return ImportOutcome(ids, result.summary(), list(result.problems), result.format, saved, notes)


def imported_before(db: Database, conversations: list[Conversation]) -> str | None:
    """A note when some of ``conversations`` were imported before (the same format and the same id in
    their source): they are stored again as new copies, which a person may not mean to keep."""
    from core.store import repo

    known = repo.imported_sources(db)
    again = sum(1 for c in conversations if (c.source_format, c.id) in known)
    if not again:
        return None
    were = "was" if again == 1 else "were"
    return (
        f"{plural(again, 'conversation')} of this file {were} imported before (the same source and id): "
        f"stored again as new copies"
    )


__all__ = ["ImportOutcome", "import_upload", "imported_before"]
