"""What the debugger page knows about the open flow conversation, read once per page run and handed to
its components as one typed value instead of a dozen loose names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.memory import DEFAULT_FIDELITY, MemoryConfig
from core.model import Conversation
from ui import data
from ui import state as keys

#: The sidebar's "Model for new turns" choice that keeps each node's own model.
AS_CONFIGURED = "as configured in the flow"


@dataclass(frozen=True)
class PageSettings:
    """The sidebar's choices: the model for new turns, the clean chat for demos, whose markers show."""

    model_choice: str
    conversation_only: bool
    node_filter: str  # a node id, or "all"

    @property
    def other_model(self) -> str | None:
        """The model picked for new turns in place of each node's own, ``None`` to keep theirs."""
        return self.model_choice.strip() if self.model_choice and self.model_choice != AS_CONFIGURED else None


@dataclass(frozen=True)
class DebugContext:
    """One flow conversation as the debugger shows it: the stored conversation and its flow, how its memory
    is counted, and the names of the nodes the inspector and the switchboard list.

    ``model_nodes`` are the LLM, Question Classifier, Parameter Extractor and Agent nodes (each run records
    a ledger and a prompt); ``memory_nodes`` those and agent nodes, which the switchboard can change one by
    one. ``node_names`` names every node, its title with its id when two titles read alike."""

    svc: Any
    url: str
    conversation_id: str
    info: Any
    stamp: tuple
    conversation: Conversation
    flow: Any
    version: Any
    latest: Any
    fidelity: str
    counting: bool
    stored_overrides: dict
    model_nodes: list
    memory_nodes: list
    node_names: dict[str, str]

    @classmethod
    def load(cls, svc, url: str, info) -> "DebugContext":
        stamp = data.stamp(info)
        flow = data.flow(url, info.flow_version_id)
        version = svc.flow_version(info.flow_version_id)
        return cls(
            svc=svc,
            url=url,
            conversation_id=info.id,
            info=info,
            stamp=stamp,
            conversation=data.conversation(url, info.id, stamp),
            flow=flow,
            version=version,
            latest=svc.latest_version(version.flow_id),
            fidelity=info.meta.get("fidelity", DEFAULT_FIDELITY),
            counting=bool(info.meta.get("plugin_token_counting")),
            stored_overrides=info.meta.get("memory_overrides") or {},
            model_nodes=flow.model_nodes,
            memory_nodes=flow.memory_nodes,
            node_names=flow.node_names,
        )

    @property
    def titles(self) -> dict[str, str]:
        """The names of the nodes that call a model."""
        return {n.id: self.node_names[n.id] for n in self.model_nodes}

    @property
    def node_titles(self) -> dict[str, str]:
        """The names of the nodes whose memory the switchboard changes."""
        return {n.id: self.node_names[n.id] for n in self.memory_nodes}

    def key(self, name: str) -> str:
        """A widget key kept per open conversation."""
        return keys.of_conversation(name, self.conversation_id)

    def node_runs(self, turn_id: str) -> dict[str, dict]:
        """Each node's recorded run at a turn, by node id."""
        return {r["node_id"]: r for r in data.node_runs(self.url, self.conversation_id, self.stamp, turn_id)}

    def for_new_turns(self) -> dict[str, MemoryConfig]:
        """Each memory node's config for the next turn: the flow's settings with the kept overrides on top."""
        return {
            n.id: data.memory_config(self.flow, n.id, self.fidelity, self.stored_overrides.get(n.id), self.counting)
            for n in self.memory_nodes
        }
