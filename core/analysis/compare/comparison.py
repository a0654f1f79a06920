"""Everything a compare shows for one conversation and its configs, computed at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from core.limits import check_fact_work, check_turns
from core.memory.config import MemoryConfig
from core.memory.replay import Replay, turn_numbers
from core.model.conversation import Conversation

from ..errors import CompareError
from .config_pass import ConfigPass
from .configs import MAX_CONFIGS, MIN_CONFIGS, NamedConfig, named_configs
from .facts import FactFate, TrackedFact, detect_facts, fact_sentence, track_facts
from .heatmap import Column, HeatmapWindow, RetentionMatrix, heatmap_window, message_columns
from .series import Series, turn_series


@dataclass
class Comparison:
    """Everything the compare page draws, for every config."""

    conversation_id: str
    configs: list[NamedConfig]
    columns: list[Column]  # the heatmap window's (all of a conversation shown whole)
    window: HeatmapWindow
    matrices: list[RetentionMatrix]
    series: list[Series]
    facts: list[TrackedFact]
    fates: list[list[FactFate]]  # fates[fact][config]
    sentences: list[str]  # one per fact
    turns: list[int] = field(default_factory=list)  # answered turn numbers (the series' x axis)
    #: The replays it was computed with (one per config) and the system prompt they count, so
    #: findings on the same comparison reuse their token counts and summaries; never serialised.
    replays: list[Replay] = field(default_factory=list, repr=False, compare=False)
    system_prompt: str | None = field(default=None, repr=False, compare=False)

    def replays_for(self, conversation: Conversation, system_prompt: str | None = None) -> list[Replay]:
        """One replay per config over ``conversation``: the comparison's own (their counts and
        summaries already made) when it replayed that conversation with that system prompt, else new ones."""
        own = self.replays
        if (
            len(own) == len(self.configs)
            and self.system_prompt == system_prompt
            and all(r.conversation is conversation and r.config == c.config for r, c in zip(own, self.configs))
        ):
            return list(own)
        return [Replay(conversation, c.config, system_prompt=system_prompt) for c in self.configs]

    def to_json(self) -> dict:
        return {
            "conversation": self.conversation_id,
            "configs": [c.to_dict() for c in self.configs],
            "turns": self.turns,
            "window": self.window.to_json(),
            "matrices": [m.to_json() for m in self.matrices],
            "series": [s.to_json() for s in self.series],
            "facts": [f.to_json() for f in self.facts],
            "fates": [[x.to_json() for x in row] for row in self.fates],
            "sentences": self.sentences,
        }


def compare(
    conversation: Conversation,
    configs: Iterable[MemoryConfig | NamedConfig | dict],
    *,
    facts: Iterable[Any] | None = None,
    window: HeatmapWindow | None = None,
    system_prompt: str | None = None,
) -> Comparison:
    """Replay 2–6 configs over one conversation and compute the heatmaps, series and facts.

    ``facts``: ``None`` uses the facts the file came with (``conversation.meta["facts"]``) or,
    failing that, the facts detected in user messages; otherwise marks as for
    :func:`track_facts` (an empty list tracks none).
    """
    named = named_configs(configs)
    if not MIN_CONFIGS <= len(named) <= MAX_CONFIGS:
        raise CompareError(f"compare needs {MIN_CONFIGS} to {MAX_CONFIGS} memory configs; got {len(named)}")
    answered = conversation.answered_turns()
    if not answered:
        raise CompareError("the conversation has no user turn to compare")
    check_turns(len(conversation.turns), "the conversation")  # what the machine holds, refused before any work
    if facts is None:
        marks = conversation.meta.get("facts") if isinstance(conversation.meta, dict) else None
        tracked = track_facts(conversation, marks) if marks else detect_facts(conversation)
    else:
        tracked = track_facts(conversation, facts)
    if not conversation.one_thread():  # each fact is asked at every turn (EveryTurnFacts)
        check_fact_work(sum(1 for f in tracked if f.messages), len(answered), len(named))
    window = window or heatmap_window(conversation)
    columns = message_columns(conversation, window.first_column, window.last_column)
    matrices, series, fates, replays = [], [], [], []
    labels: dict[int, str] = {}
    for c in named:
        replay = Replay(conversation, c.config, system_prompt=system_prompt)
        run = ConfigPass(replay, window, tracked, label=c.label, columns=columns, labels=labels)
        matrices.append(run.matrix)
        series.append(turn_series(replay, c.label))
        fates.append(run.fates)
        replays.append(replay)
    by_fact = [[fates[c][f] for c in range(len(named))] for f in range(len(tracked))]
    numbers = turn_numbers(conversation)
    return Comparison(
        conversation.id,
        named,
        columns,
        window,
        matrices,
        series,
        tracked,
        by_fact,
        [fact_sentence(row) for row in by_fact],
        [numbers[p] for p in conversation.answered_turns()],
        replays,
        system_prompt,
    )
