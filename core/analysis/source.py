"""A source: a conversation to compare or report on, with (when known) the flow and recorded turns
it came from. The analysis and the report read it; :mod:`core.service.sources` loads one from the
store, a MemLens conversation export or any file the importer reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from core.flow.graph import Flow
from core.flow.runtime import TurnRecord
from core.model.conversation import Conversation

from .compare.configs import NamedConfig


@dataclass
class Source:
    """A conversation to compare, with where it came from.

    ``flow`` and ``records`` are set for a conversation recorded from a flow (stored, or a
    MemLens conversation export): its node ledgers give the flow's findings. ``configs``,
    ``facts`` (``(message, label)`` marks) and ``view`` come from a report bundle. ``note``
    says what was left out of a source too long to load whole.
    """

    conversation: Conversation
    origin: str = ""
    flow: Flow | None = None
    records: list[TurnRecord] = field(default_factory=list)
    configs: list[NamedConfig] | None = None
    facts_mode: str = "detected"
    facts: list | None = None
    view: dict = field(default_factory=dict)
    title: str = ""
    note: str = ""
    #: For a stored conversation with values no reader could use: one line naming them.
    damage: str | None = None


def source_of(conversation: Conversation, origin: str = "") -> Source:
    """A conversation as a source; one read from a report bundle brings its configs, facts and view."""
    report = conversation.meta.get("report") if isinstance(conversation.meta, dict) else None
    if not isinstance(report, Mapping):
        return Source(conversation, origin)
    facts = report.get("facts") or {}
    marks = [((tuple(m["message"])), m["label"]) for m in facts.get("marks") or []]
    return Source(
        conversation,
        origin,
        configs=[NamedConfig.from_dict(c) for c in report.get("configs") or []],
        facts_mode=facts.get("mode", "detected"),
        facts=marks,
        view=dict(report.get("view") or {}),
        title=str(report.get("title") or ""),
    )


__all__ = ["Source", "source_of"]
