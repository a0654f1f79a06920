"""Every finding about a source, in one call for every page and the report, so they never disagree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from core.model.conversation import Conversation

from .base import Finding, ordered
from .configs import config_findings
from .flows import flow_findings
from .runs import run_findings

if TYPE_CHECKING:
    from ..compare.comparison import Comparison
    from ..source import Source
    from .configs import ConfigLike


def findings_for(
    source: Source | Conversation,
    configs: Iterable[ConfigLike] = (),
    *,
    comparison: Comparison | None = None,
    system_prompt: str | None = None,
) -> list[Finding]:
    """Every finding about a source (:class:`core.analysis.source.Source`, anything with its
    ``conversation``, ``flow`` and ``records``, or a bare :class:`Conversation`): its memory configs replayed over the conversation
    (:func:`config_findings`; none when ``configs`` is empty and no ``comparison`` is given), and
    for a conversation recorded from a flow the flow's own — from its recorded turns
    (:func:`run_findings`), or from the flow alone (:func:`flow_findings`) when they are not
    loaded. One call for every page and the report, so they never disagree on what they list."""
    conversation = source if isinstance(source, Conversation) else source.conversation
    out: list[Finding] = []
    if comparison is not None or configs:
        out += config_findings(conversation, configs, comparison=comparison, system_prompt=system_prompt)
    flow = getattr(source, "flow", None)
    if flow is not None:
        records = getattr(source, "records", None)
        out += run_findings(flow, conversation, records) if records else flow_findings(flow)
    return ordered(out)
