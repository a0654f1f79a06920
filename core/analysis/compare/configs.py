"""The memory configs a comparison replays: 2–6 of them, each with a label."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.words import distinct

from ..errors import CompareError

MIN_CONFIGS = 2


MAX_CONFIGS = 6


@dataclass(frozen=True)
class NamedConfig:
    """A memory config with the label the comparison shows for it."""

    label: str
    config: MemoryConfig

    def to_dict(self) -> dict:
        return {"label": self.label, **self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "NamedConfig":
        if not isinstance(data, dict):
            raise ConfigError("a saved memory config must be an object of settings")
        values = dict(data)
        label = values.pop("label", None)
        config = MemoryConfig.from_dict(values)
        return cls(str(label) if label else config.label(), config)


def named_configs(configs: Iterable[MemoryConfig | NamedConfig | dict]) -> list[NamedConfig]:
    """Labelled configs, each validated; repeated labels get " (2)", " (3)"… so every column of
    the comparison has a distinct name (:func:`core.words.distinct`)."""
    out: list[NamedConfig] = []
    for c in configs:
        if isinstance(c, dict):
            c = NamedConfig.from_dict(c)
        elif isinstance(c, MemoryConfig):
            c = NamedConfig(c.label(), c)
        elif not isinstance(c, NamedConfig):
            raise CompareError(f"expected a memory config, not {type(c).__name__}")
        c.config.validate()
        out.append(c)
    labels = distinct(dict(enumerate(c.label for c in out)))
    return [c if c.label == labels[i] else NamedConfig(labels[i], c.config) for i, c in enumerate(out)]
