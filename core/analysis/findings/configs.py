"""Findings for memory configs replayed over a plain conversation (the compare page): the analyses every
config gets, and those its memory system names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import Conversation

from .base import COMPACTION, DOCS_VS_CODE, PLATFORM_RULE, TRIMMED_WINDOW, WINDOW_ZERO, Finding, ordered, turn_namer
from .compaction import compaction_config_findings
from .dominant_message import dominant_messages
from .fact_not_seen import fact_findings
from .platform_rule import platform_findings, platform_rule_findings
from .platforms import ANALYSES as PLATFORM_ANALYSES
from .profiles import docs_vs_code_config_findings
from .silent_pruning import silent_pruning_finding
from .trimmed_window import trimmed_window_findings
from .turns import memory_turns
from .window_zero import zero_window_findings

if TYPE_CHECKING:
    from ..compare.comparison import Comparison
    from ..compare.configs import NamedConfig

    #: What a compare takes for a memory config (see :func:`core.analysis.compare.named_configs`).
    ConfigLike = MemoryConfig | NamedConfig | dict

SYSTEM_FINDINGS: dict[str, Callable[..., list[Finding]]] = {
    WINDOW_ZERO: zero_window_findings,
    TRIMMED_WINDOW: trimmed_window_findings,
    COMPACTION: compaction_config_findings,
    DOCS_VS_CODE: docs_vs_code_config_findings,
    PLATFORM_RULE: platform_rule_findings,
    **{kind: platform_findings(kind) for kind in PLATFORM_ANALYSES},
}


def config_findings(
    conversation: Conversation,
    configs: Iterable[ConfigLike],
    *,
    comparison: Comparison | None = None,
    system_prompt: str | None = None,
) -> list[Finding]:
    """Findings for memory configs replayed over a plain conversation (the compare page).

    ``configs``: memory configs, labelled configs or dicts, as for :func:`core.analysis.compare.compare`;
    ``comparison``: that comparison, when already computed (its facts are used).
    """
    from ..compare.configs import named_configs

    named = comparison.configs if comparison is not None else named_configs(configs)
    replays = (
        comparison.replays_for(conversation, system_prompt)
        if comparison is not None
        else [Replay(conversation, c.config, system_prompt=system_prompt) for c in named]
    )
    name = turn_namer(conversation)
    out: list[Finding] = []
    for c, replay in zip(named, replays):
        turns = memory_turns(replay)
        config = c.config
        found = silent_pruning_finding(c.label, turns, name, config.to_dict())
        if found:
            out.append(found)
        out.extend(dominant_messages(c.label, turns, conversation))
        for kind in config.system.finding_kinds(config):  # the analyses its memory system names
            out.extend(SYSTEM_FINDINGS[kind](c.label, config, replay, turns, name, system_prompt))
    if comparison is not None:
        out.extend(fact_findings(conversation, comparison, replays))
    return ordered(out)
