"""Reports: a comparison of memory configs on one conversation (:mod:`core.analysis.compare`) with its
findings (:mod:`core.analysis.findings`), optionally the replies re-asked under each config, and — for a
conversation recorded from a flow — the flow's own findings.

:func:`build_report` makes one from a :class:`core.analysis.source.Source`; it is written as one
self-contained HTML file by :func:`core.report.html.report_html` and as a JSON bundle that loads
back into the same view by :func:`core.report.bundle.bundle_json`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from core.analysis.compare.comparison import Comparison, compare
from core.analysis.compare.configs import NamedConfig, named_configs
from core.analysis.compare.heatmap import HeatmapWindow, heatmap_window
from core.analysis.compare.replies import ReplyGrid, replay_replies
from core.analysis.findings.base import Finding
from core.analysis.findings.sources import findings_for
from core.analysis.source import Source
from core.errors import MemLensError
from core.memory.config import MemoryConfig
from core.memory.strategies.window import WindowStrategy
from core.model.conversation import Conversation

from .bundle import FACT_MODES
from .errors import ReportError

if TYPE_CHECKING:  # pragma: no cover
    from core.llm.client import LLMClient

#: A report's heatmap window: smaller than the page's, so a long conversation's file stays small.
REPORT_ROWS = 40
REPORT_COLUMNS = 160


@dataclass
class Report:
    """Everything a report shows; :func:`report_html` and :func:`report_bundle` write it."""

    title: str
    source: Source
    comparison: Comparison
    findings: list[Finding]
    facts_mode: str
    marks: list
    replies: ReplyGrid | None = None
    selected_turn: int | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def conversation(self) -> Conversation:
        return self.source.conversation

    @property
    def configs(self) -> list[NamedConfig]:
        return self.comparison.configs


def _facts_argument(mode: str, marks: Sequence | None) -> Any:
    if mode not in FACT_MODES:
        raise ReportError(f"unknown facts mode {mode!r}; expected one of {', '.join(FACT_MODES)}")
    if mode == "none":
        return []
    if mode == "marked":
        return list(marks or [])
    return None  # compare's default: the file's own facts, else the detected ones


def build_report(
    source: Source,
    configs: Iterable[Any] | None = None,
    *,
    facts_mode: str | None = None,
    marks: Sequence | None = None,
    replies: bool = False,
    client: LLMClient | None = None,
    window: HeatmapWindow | None = None,
    title: str | None = None,
    selected_turn: int | None = None,
    max_reply_turns: int | None = 200,
) -> Report:
    """Compare ``configs`` (default: the source's own, from a report bundle) on the source's
    conversation and gather the findings. ``facts_mode``: ``detected`` (the file's facts or those
    the user states), ``marked`` (``marks``: ``(message, label)`` pairs) or ``none``."""
    conv = source.conversation
    if configs is None:
        configs = source.configs
    if not configs:
        raise ReportError("a report needs 2 to 6 memory configs to compare")
    named = named_configs(configs)
    mode = facts_mode or source.facts_mode or "detected"
    marks = list(marks if marks is not None else (source.facts or []))
    facts = _facts_argument(mode, marks)
    if window is None:
        last = source.view.get("last_turn")
        try:
            window = heatmap_window(
                conv,
                last_turn=last,
                max_rows=int(source.view.get("rows") or REPORT_ROWS),
                max_columns=int(source.view.get("columns") or REPORT_COLUMNS),
            )
        except MemLensError:
            window = heatmap_window(conv, max_rows=REPORT_ROWS, max_columns=REPORT_COLUMNS)
    comparison = compare(conv, named, facts=facts, window=window)
    found = findings_for(source, named, comparison=comparison)
    grid = replay_replies(conv, named, client=client, max_turns=max_reply_turns) if replies else None
    name = title or source.title or conv.name or conv.id
    if selected_turn is None:
        selected_turn = source.view.get("selected_turn")
    return Report(name, source, comparison, found, mode, marks, grid, selected_turn)


#: The configs the compare page and ``python -m core report`` start from.
DEFAULT_CONFIGS = (
    NamedConfig("dify window 3", MemoryConfig(window=3)),
    NamedConfig("dify window 10", MemoryConfig(window=10)),
    NamedConfig("window 6 msgs", MemoryConfig(WindowStrategy.name, window=6)),
)


__all__ = ["REPORT_ROWS", "REPORT_COLUMNS", "DEFAULT_CONFIGS", "Report", "build_report"]
