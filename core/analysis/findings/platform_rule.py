"""``platform_rule`` and the n8n and Flowise surprises (:mod:`core.analysis.findings.platforms`): a
platform's own rule at work where its users do not expect it, in its memory system's words.
"""

from __future__ import annotations

from typing import Callable

from core.words import plural

from .base import PLATFORM_RULE, WARNING, Finding, quoted
from .platforms import ANALYSES as PLATFORM_ANALYSES


def platform_findings(kind: str) -> Callable[..., list[Finding]]:
    """An n8n or Flowise surprise (:mod:`core.analysis.findings.platforms`) as a finding of its kind."""
    analyse = PLATFORM_ANALYSES[kind]

    def findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
        note = analyse(quoted(label), config, replay, turns, name)
        return [] if note is None else [Finding(kind, note.text + ".", label, note.turn, None, WARNING, note.detail)]

    return findings


#: The analyses that apply to a memory config only when its memory system names their kind
#: (:meth:`core.memory.strategies.base.Strategy.finding_kinds`), each ``(label, config, replay, memory
#: turns, turn namer, system prompt) -> findings``.
def platform_rule_findings(label, config, replay, turns, name, system_prompt) -> list[Finding]:
    """The first turn whose ledger shows its memory system's surprising rule at work, in the system's words,
    and how many later turns do too."""
    system = config.system
    found = [
        (p, text)
        for p in replay.conversation.answered_turns()
        if (text := system.turn_surprise(replay, replay.ledger_at(p)))
    ]
    if not found:
        return []
    position, text = found[0]
    turn = replay.numbers[position]
    more = f" ({plural(len(found) - 1, 'later turn')} too)" if len(found) > 1 else ""
    detail = system.pruning_words(config.to_dict())[0]
    return [
        Finding(
            PLATFORM_RULE,
            f"At {name(turn)} {quoted(label)}: {text}{more}.",
            label,
            turn,
            None,
            WARNING,
            detail,
            {"turns": [replay.numbers[p] for p, _ in found]},
        )
    ]
