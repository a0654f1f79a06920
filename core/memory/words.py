"""A ledger entry's reason in plain words: the memory system's own words when it has them
(:meth:`core.memory.strategies.base.Strategy.explain`), else the words every memory shares
(:func:`core.model.ledger_words.shared_words`, beside the reasons' vocabulary). Pages, reports, findings and the
CLI call this one."""

from __future__ import annotations

from typing import Any, Mapping

from core.model.ledger import OBSERVED, LedgerEntry
from core.model.ledger_words import shared_short_words, shared_words

from .strategies import DEFAULT_STRATEGY, STRATEGIES


def explain(entry: LedgerEntry, config: Mapping[str, Any] | None = None, node: str | None = None) -> str:
    """Why ``entry`` has its reason, under a ledger's ``config`` (``MemoryConfig.to_dict`` with the
    budget); ``node`` names the node whose memory is off."""
    config = config or {}
    if config.get(OBSERVED):  # a payload's ledger: what it held, whichever memory is named beside it
        return shared_words(entry, config, node)
    system = STRATEGIES.get(config.get("strategy") or DEFAULT_STRATEGY)
    own = system.explain(entry, config) if system is not None else None
    return own if own is not None else shared_words(entry, config, node)


def reason_words(reason: str, config: Mapping[str, Any] | None = None) -> str:
    """A reason in a few words, for markers, answers, short tables and command-line lines
    (``"outside window of 4"``): the memory system's own short words when it has them, else the
    shared ones. :func:`explain` gives the whole sentence, for hovers and the full ledger."""
    config = config or {}
    if not config.get(OBSERVED):
        system = STRATEGIES.get(config.get("strategy") or DEFAULT_STRATEGY)
        own = system.short_words(reason, config) if system is not None else None
        if own is not None:
            return own
    return shared_short_words(reason, config)


__all__ = ["explain", "reason_words"]
