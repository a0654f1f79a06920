"""The memory-config editor: one set of widgets for the switchboard, Compare and the Ledger explorer
— a config put into it comes back unchanged, an invalid one comes back with the core's error, and
no other module draws memory-config widgets of its own."""

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core.memory.config import MemoryConfig
from tests.conftest import ROOT

ROUND_TRIP = [
    MemoryConfig(window=3),
    MemoryConfig(window=None, fidelity="documented", model="gpt-4o", context_size=8000, max_tokens=512),
    MemoryConfig(window=0, plugin_token_counting=True, granularity="all_messages", scope="session"),
    MemoryConfig(strategy="window", window=6, window_changes=((5, 12),)),
    MemoryConfig(strategy="buffer"),
    MemoryConfig(strategy="off"),
    MemoryConfig(strategy="summary_buffer", max_history_tokens=300, trim_counter="approximate"),
    MemoryConfig(strategy="trim", max_history_tokens=200, trim_strategy="last", start_on="human", allow_partial=True),
    MemoryConfig(strategy="compaction", compaction_profile="exact", compaction_trigger=0.5, compaction_keep_messages=8),
    MemoryConfig(strategy="dify_agent", plugin_token_counting=True, context_size=16000, max_tokens=256),
    MemoryConfig(strategy="dify_agent"),
    MemoryConfig(strategy="dify_agent", agent_strategy="react", plugin_token_counting=True),
    MemoryConfig(strategy="llamaindex_buffer", token_limit=40, context_window=3900),
    MemoryConfig(strategy="llamaindex_buffer"),
    MemoryConfig(strategy="llamaindex_memory", token_limit=100, chat_history_token_ratio=0.5, token_flush_size=5),
]


def _script(config_json: str, label: str):
    import json

    import streamlit as st

    from core.memory.config import MemoryConfig
    from ui.config_editor import edit_config, load_config

    if "loaded" not in st.session_state:
        load_config("t", MemoryConfig.from_dict(json.loads(config_json)), label)
        st.session_state["loaded"] = True
    edited = edit_config("t", MemoryConfig())
    st.session_state["out"] = (edited.config.to_dict() if edited.config else None, edited.error, edited.label)


def editor(config: MemoryConfig, label: str = "") -> AppTest:
    at = AppTest.from_function(_script, args=(json.dumps(config.to_dict()), label), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("config", ROUND_TRIP, ids=lambda c: c.label())
def test_a_config_put_into_the_editor_comes_back_unchanged(config):
    out, error, _ = editor(config).session_state["out"]
    assert error is None
    assert MemoryConfig.from_dict(out) == config


def test_a_label_that_repeats_the_settings_stays_automatic_and_a_typed_one_is_kept():
    assert editor(MemoryConfig(window=3), "dify window 3").session_state["out"][2] == ""
    assert editor(MemoryConfig(window=3), "short").session_state["out"][2] == "short"


def test_an_invalid_config_comes_back_with_the_cores_error_and_no_config():
    at = editor(MemoryConfig(strategy="summary_buffer", max_history_tokens=500))
    at.number_input(key="t_history_limit").set_value(1).run()
    config, error, _ = at.session_state["out"]
    assert config is None and error.startswith("max_history_tokens 1 cannot be met")


CALLERS = [ROOT / "ui" / "switchboard.py", ROOT / "ui" / "compare_configs.py", ROOT / "pages" / "ledger.py"]


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: p.name)
def test_the_switchboard_compare_and_the_ledger_explorer_use_the_one_editor(path):
    source = path.read_text()
    assert "edit_config(" in source
    assert not re.search(r"st\.\w+\(\s*\"(Window|Strategy|Dify memory rules|Plugin token counting|max_tokens)", source)


def test_the_agent_app_strategy_shows_its_token_counting_switch_and_no_window():
    at = editor(MemoryConfig(strategy="dify_agent", plugin_token_counting=True))
    assert [t.label for t in at.toggle] == ["Plugin token counting"]
    assert at.toggle[0].value is True
    assert not [n for n in at.number_input if n.label.startswith("Window")]
    assert "Granularity" not in [s.label for s in at.selectbox]
    at.toggle[0].set_value(False).run()
    assert MemoryConfig.from_dict(at.session_state["out"][0]) == MemoryConfig(strategy="dify_agent")
    # The runner: function calling as Dify picks it for a model with tool calls, or ReAct.
    (runner,) = [r for r in at.radio if r.label == "Agent runner"]
    assert runner.value == "function_call" and runner.options == ["function calling", "ReAct"]
    runner.set_value("react").run()
    assert MemoryConfig.from_dict(at.session_state["out"][0]) == MemoryConfig(
        strategy="dify_agent", agent_strategy="react"
    )
