"""Each memory strategy checks the settings it alone cares about (``Strategy.validate``), and
``MemoryConfig.validate`` — what the CLI, the API, flows and pages all call — runs the check of the
chosen strategy after each value's own range check. Errors are one line saying what to change."""

import pytest

from core.errors import MemLensError
from core.limits import DIFY_ROW_CAP, MAX_DIFY_WINDOW, WINDOW_MAX_MESSAGES
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.strategies import STRATEGIES
from core.memory.strategies.base import Strategy, window_sizes
from core.memory.strategies.settings import CHANGES, Setting
from core.model.tokens import REPLY_PRIMING


@pytest.mark.parametrize(
    "config, words",
    [
        (MemoryConfig(strategy="window", window=0), f"keeps 1..{WINDOW_MAX_MESSAGES} messages"),
        (MemoryConfig(strategy="window", window=WINDOW_MAX_MESSAGES + 1), f"keeps 1..{WINDOW_MAX_MESSAGES} messages"),
        (MemoryConfig(strategy="window", window=5, window_changes=((3, 0),)), "window 0 is out of range"),
        (MemoryConfig(strategy="dify", window=MAX_DIFY_WINDOW + 1), f"Dify windows are 1..{DIFY_ROW_CAP} turns"),
        (MemoryConfig(strategy="dify", window=-MAX_DIFY_WINDOW - 1), "give at most 1,000,000"),
        (MemoryConfig(strategy="summary_buffer", max_history_tokens=REPLY_PRIMING - 1), "cannot be met"),
        (MemoryConfig(strategy="trim", trim_strategy="first", start_on="human"), "apply only to trim strategy 'last'"),
    ],
)
def test_a_strategy_refuses_settings_it_cannot_run_in_one_line(config, words):
    with pytest.raises(ConfigError, match=words) as e:
        config.validate()
    assert "\n" not in str(e.value)
    assert isinstance(e.value, MemLensError)


@pytest.mark.parametrize(
    "config",
    [
        MemoryConfig(strategy="window", window=WINDOW_MAX_MESSAGES),
        MemoryConfig(strategy="dify", window=0),  # Dify reads 0 as no limit: allowed, as Dify allows it
        MemoryConfig(strategy="dify", window=MAX_DIFY_WINDOW),
        MemoryConfig(strategy="summary_buffer", max_history_tokens=0, trim_counter="messages"),
        MemoryConfig(strategy="trim", trim_strategy="first"),
        MemoryConfig(strategy="summary_buffer", max_history_tokens=REPLY_PRIMING),
    ],
)
def test_settings_a_strategy_can_run_pass(config):
    assert config.validate() is config


def test_a_rule_of_one_strategy_does_not_bind_another():
    MemoryConfig(strategy="dify", window=WINDOW_MAX_MESSAGES + 1).validate()  # the window node's cap is not Dify's
    MemoryConfig(strategy="trim", max_history_tokens=REPLY_PRIMING - 1).validate()  # the summary buffer's floor
    MemoryConfig(strategy="summary_buffer", trim_strategy="first", start_on="human").validate()


class EvenWindows(Strategy):
    name = "even_windows"
    settings = (
        Setting("window", 2, "pairs of messages kept", minimum=2),
        Setting("window_changes", (), "later windows", kind=CHANGES),
    )

    def validate(self, config):
        odd = [n for n in window_sizes(config.settings) if n % 2]
        if odd:
            raise ConfigError(f"window {odd[0]} is odd: even_windows keeps pairs of messages; use an even number")


def test_a_new_strategy_s_own_check_runs_through_memory_config(monkeypatch):
    monkeypatch.setitem(STRATEGIES, "even_windows", EvenWindows())
    assert MemoryConfig(strategy="even_windows", window=4).validate()
    with pytest.raises(ConfigError, match="window 3 is odd"):
        MemoryConfig(strategy="even_windows", window=4, window_changes=((5, 3),)).validate()
