"""Each config's reply at a turn: the model asked with the history that config sends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from core.llm.client import DemoClient, LLMClient, LLMReply
from core.memory.config import MemoryConfig
from core.memory.replay import Replay, turn_numbers
from core.model.conversation import Conversation

from .configs import NamedConfig, named_configs


@dataclass
class ReplyGrid:
    """The conversation's queries re-asked under each config: ``replies[row][config]``. For a
    plain conversation the "flow" is one LLM node with that config's memory: its prompt is the
    system prompt, the ledger's history and the query."""

    labels: list[str]
    turns: list[int]
    queries: list[str]
    replies: list[list[str]]
    models: list[str]  # per config: the model that answered
    skipped: int = 0  # earlier answered turns left out (``max_turns``)

    def differing(self) -> list[int]:
        """Rows where the configs' replies are not all the same."""
        return [r for r, row in enumerate(self.replies) if len(set(row)) > 1]

    def to_json(self) -> dict:
        return {
            "labels": self.labels,
            "turns": self.turns,
            "queries": self.queries,
            "replies": self.replies,
            "models": self.models,
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ReplyGrid":
        return cls(
            list(data["labels"]),
            list(data["turns"]),
            list(data["queries"]),
            [list(r) for r in data["replies"]],
            list(data.get("models") or []),
            int(data.get("skipped") or 0),
        )


def reply_at(replay: Replay, position: int, client: LLMClient | None = None) -> LLMReply:
    """The reply to the query at ``position`` when the prompt is the system prompt, the history
    this replay's ledger keeps there, and the query (an :class:`core.llm.client.LLMReply`)."""
    conversation = replay.conversation
    history = replay.history_messages(replay.ledger_at(position))
    system = replay.system_prompt
    messages = (
        ([{"role": "system", "content": system}] if system else [])
        + [m.to_openai() for m in history]
        + [conversation.turns[position].query_message.to_openai()]
    )
    return (client or DemoClient()).complete(replay.config.model, messages, replay.config.max_tokens or None)


def replay_replies(
    conversation: Conversation,
    configs: Iterable[MemoryConfig | NamedConfig | dict],
    *,
    client: LLMClient | None = None,
    max_turns: int | None = 200,
    system_prompt: str | None = None,
) -> ReplyGrid:
    """Ask every answered turn's query again under each config (the last ``max_turns`` turns;
    ``None`` for all) and collect the replies. ``client`` is any :class:`core.llm.client.LLMClient`;
    the default is the offline demo model, so the grid needs no key and is the same every time.
    Each turn's prompt is built from its ledger, so this costs one ledger per turn and config."""
    client = client or DemoClient()
    named = named_configs(configs)
    answered = conversation.answered_turns()
    rows = answered if max_turns is None else answered[-max_turns:] if max_turns > 0 else []
    numbers = turn_numbers(conversation)
    replies: list[list[str]] = [[] for _ in rows]
    models = []
    for c in named:
        replay = Replay(conversation, c.config, system_prompt=system_prompt)
        answered_by = ""
        for r, p in enumerate(rows):
            reply = reply_at(replay, p, client)
            replies[r].append(reply.text)
            answered_by = reply.model
        models.append(answered_by or c.config.model)
    return ReplyGrid(
        [c.label for c in named],
        [numbers[p] for p in rows],
        [conversation.turns[p].query for p in rows],
        replies,
        models,
        len(answered) - len(rows),
    )
