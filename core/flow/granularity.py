"""History granularity (spec/memory-models.md §A.6, this project's own rule): how an agent node replays
earlier turns. ``query_answer`` (default) replays only each earlier turn's query and answer,
``all_messages`` also its tool calls and results. The value is resolved as: explicit value on the
request → the flow's ``history.granularity`` → the default; :func:`resolve_granularity` also says
which of the three decided it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from core.memory.strategies import STRATEGIES

from .errors import GranularityError

if TYPE_CHECKING:  # pragma: no cover
    from .records import NodeRun

GRANULARITIES = ("query_answer", "all_messages")
DEFAULT_GRANULARITY = "query_answer"
#: Which setting decided the granularity of a run.
FROM_REQUEST, FROM_FLOW, FROM_DEFAULT = "request", "flow", "default"
GRANULARITY_SOURCES = {
    FROM_REQUEST: "set on the request",
    FROM_FLOW: "the flow's history.granularity",
    FROM_DEFAULT: "the default",
}


def granularity_line(run: Mapping[str, Any] | NodeRun) -> str:
    """``history granularity all_messages — set on the request`` for a node run (a mapping or a
    :class:`core.flow.records.NodeRun`); empty for nodes without one, and for a memory that sends
    every message whatever the granularity."""
    get = run.get if isinstance(run, dict) else (lambda k: getattr(run, k, None))
    strategy = STRATEGIES.get((get("memory") or {}).get("strategy"))
    if not get("granularity") or strategy is not None and not strategy.uses_granularity:
        return ""  # dify_agent, a window's store
    source = get("granularity_source") or ""
    return f"history granularity {get('granularity')} — {GRANULARITY_SOURCES.get(source, source)}"


def check_granularity(value: Any, where: str) -> str:
    """The granularity named by ``value``, case-insensitively (Dify's request spells the modes
    ``QUERY_ANSWER`` / ``ALL_MESSAGES``)."""
    if isinstance(value, str) and value.lower() in GRANULARITIES:
        return value.lower()
    if value not in GRANULARITIES:
        raise GranularityError(f"{where}: granularity {value!r} is unknown; expected query_answer or all_messages")
    return value


def resolve_granularity(request: str | None, flow: str | None) -> tuple[str, str]:
    """``(granularity, source)``: the request's value, else the flow's ``history.granularity``, else
    ``query_answer``; ``source`` is ``request``, ``flow`` or ``default``."""
    if request is not None:
        return check_granularity(request, "request"), FROM_REQUEST
    if flow is not None:
        return check_granularity(flow, "flow history"), FROM_FLOW
    return DEFAULT_GRANULARITY, FROM_DEFAULT


__all__ = [
    "DEFAULT_GRANULARITY",
    "FROM_DEFAULT",
    "FROM_FLOW",
    "FROM_REQUEST",
    "GRANULARITIES",
    "GRANULARITY_SOURCES",
    "check_granularity",
    "granularity_line",
    "resolve_granularity",
]
