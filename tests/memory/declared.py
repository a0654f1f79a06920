"""Configs of any registered memory system drawn from its declared settings, for the property tests
that every system — today's and one registered later — must pass without a test of its own."""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.strategies import STRATEGIES
from core.memory.strategies.settings import BOOL, CHANGES, FLOAT, INT, Setting


def setting_values(setting: Setting):
    """Values a declared setting takes: its choices, or whole numbers in its range (a short stretch of
    it), a fraction, or a few window changes; ``None`` too when it is optional."""
    if setting.choices:
        drawn = st.sampled_from([c for c in setting.choices if c is not None])
    elif setting.kind == BOOL:
        drawn = st.booleans()
    elif setting.kind == INT:
        low = -3 if setting.minimum is None else int(setting.minimum)
        high = low + 40 if setting.maximum is None else min(int(setting.maximum), low + 40)
        drawn = st.integers(low, high)
    elif setting.kind == FLOAT:
        drawn = st.floats(0.05, 1.0 if setting.maximum is None else float(setting.maximum))
    elif setting.kind == CHANGES:
        drawn = st.lists(st.tuples(st.integers(1, 30), st.integers(1, 8)), max_size=3).map(tuple)
    else:
        drawn = st.just(setting.default)
    return st.one_of(st.none(), drawn) if setting.optional else drawn


def _valid(config: MemoryConfig) -> bool:
    try:
        config.validate()
    except ConfigError:
        return False
    return True


@st.composite
def declared_configs(draw, name: str, model: str) -> MemoryConfig:
    """A config of the memory system ``name`` counted for ``model``, its settings drawn from their
    declarations and the common ones from small ranges (a budget that prunes); one the system refuses is
    not drawn."""
    system = STRATEGIES[name]
    own = draw(st.fixed_dictionaries({s.name: setting_values(s) for s in system.settings}))
    common = draw(
        st.fixed_dictionaries(
            {
                "context_size": st.one_of(st.none(), st.integers(1, 400)),
                "max_tokens": st.integers(0, 60),
                "granularity": st.sampled_from(["query_answer", "all_messages"]),
                "scope": st.sampled_from(["thread", "thread", "session"]),
                "sends_empty": st.booleans(),
            }
        )
    )
    config = MemoryConfig(name, model=model, **common, **own)
    assume(_valid(config))
    return config
