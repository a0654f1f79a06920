"""ARCHITECTURE.md's recipes, followed once each: a toy memory system and a toy import format plug in
through the documented registries and work end to end with nothing else changed — the memory system's
ledgers, its replay's summaries, the command line and the switchboard all say the same."""

import json

import pytest

from core.io import (
    Format,
    FormatError,
    RecordError,
    conversation_from_messages,
    import_text,
    register_format,
    unregister_format,
)
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import STRATEGIES
from core.memory.strategies.base import Strategy
from core.memory.strategies.settings import NUMBER, Setting, Widget
from core.memory.words import explain
from core.model.conversation import QUERY, Message
from core.model.ledger import OUTSIDE_WINDOW
from tests.builders import branched, openai


class LastN(Strategy):
    """A toy memory system, as ARCHITECTURE.md's recipe writes one: only the thread's last ``keep``
    messages are sent, every message counting (a tool call and its result too)."""

    name = "last_n"
    help = "the thread's last N messages"
    settings = (
        Setting(
            "keep",
            2,
            "how many of the thread's newest messages are sent",
            minimum=1,
            widget=Widget(NUMBER, "Keep (messages)", maximum=50),
        ),
    )
    uses_granularity = False

    def label(self, config):
        return f"last {config.settings.keep} messages"

    def explain(self, entry, config):
        if entry.reason == OUTSIDE_WINDOW:
            return f"older than the last {config.get('keep')} messages"
        return None

    def window(self, view, current, config):
        return 0, view.maximum(0, view.length - config.settings.keep)


@pytest.fixture
def toy(monkeypatch):
    """The recipe's one registry line."""
    monkeypatch.setitem(STRATEGIES, LastN.name, LastN())


TOY_CHAT = [
    {"role": "user", "content": "Hi, I'm Dana."},
    {"role": "assistant", "content": "Hello Dana!"},
    {"role": "user", "content": "Where is order 4411?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"order": 4411}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "shipped on Monday"},
    {"role": "assistant", "content": "It shipped on Monday."},
    {"role": "user", "content": "Thanks."},
    {"role": "assistant", "content": "You're welcome."},
    {"role": "user", "content": "What's my name?"},
    {"role": "assistant", "content": "Dana."},
    {"role": "user", "content": "And my order?"},
    {"role": "assistant", "content": "4411."},
]


def _kept(ledger) -> list[str]:
    return [e.ref for e in ledger.entries if e.kept]


def test_a_new_memory_system_registered_as_the_recipe_says_keeps_what_its_rule_says(toy):
    conv = openai(TOY_CHAT)
    replay = Replay(conv, MemoryConfig(LastN.name, keep=3))
    for position in range(len(conv.turns)):
        earlier = [m.ref for t in conv.turns[:position] for m in t.messages]
        ledger = replay.ledger_at(position)
        assert _kept(ledger) == earlier[-3:] if earlier else _kept(ledger) == []
        assert {e.reason for e in ledger.entries if not e.kept} <= {OUTSIDE_WINDOW}
    assert MemoryConfig(LastN.name).settings.keep == 2 and MemoryConfig(LastN.name, keep=3).label() == "last 3 messages"
    with pytest.raises(ConfigError, match="keep 0 is out of range: it must be at least 1"):
        MemoryConfig(LastN.name, keep=0).validate()
    # Its stored form is read back the same, and its own words explain its reason.
    config = MemoryConfig(LastN.name, keep=3)
    assert MemoryConfig.from_dict(config.to_dict()) == config and config.to_dict()["keep"] == 3
    dropped = next(e for e in replay.ledger_at(4).entries if not e.kept)
    assert explain(dropped, replay.ledger_at(4).config) == "older than the last 3 messages"


@pytest.mark.parametrize("conversation", ["chain", "branched"])
def test_a_new_memory_systems_summaries_say_what_its_ledgers_say(toy, conversation):
    """The summaries (a chain is decided over columns, a branched conversation turn by turn) come from the
    same window rule as the ledgers: they cannot say the whole thread was kept while the ledger keeps 3."""
    conv = openai(TOY_CHAT) if conversation == "chain" else branched(12)
    replay = Replay(conv, MemoryConfig(LastN.name, keep=3))
    summaries = list(replay.summaries())
    assert summaries
    for s in summaries:
        ledger = replay.ledger(s.turn)
        assert (s.kept, s.history_tokens, s.dropped) == (
            len(ledger.kept),
            ledger.history_tokens,
            ledger.dropped_count(),
        )
        assert s.kept <= 3


def test_a_new_memory_system_is_a_cli_choice_with_its_settings(toy, tmp_path, capsys):
    from core.cli.app import main

    path = tmp_path / "chat.json"
    path.write_text(json.dumps(TOY_CHAT))
    replay = Replay(openai(TOY_CHAT), MemoryConfig(LastN.name, keep=3))
    assert main(["replay", str(path), "--memory", LastN.name, "--set", "keep=3", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"] == LastN.name
    assert doc["turns"] == [replay.ledger(s.turn).to_json() for s in replay.summaries()]
    assert main(["replay", str(path), "--memory", LastN.name, "--set", "keep=3", "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [s.to_json() for s in replay.summaries()]
    assert main(["replay", str(path), "--memory", LastN.name, "--set", "keep=3", "--turn", "4"]) == 0
    assert "older than the last 3 messages" in capsys.readouterr().out
    # A setting the system does not have, or a value it refuses: one line, naming what to change.
    assert main(["replay", str(path), "--memory", LastN.name, "--set", "window=3"]) == 2
    assert "memory 'last_n' has no setting 'window'; its settings: keep" in capsys.readouterr().err
    assert main(["replay", str(path), "--memory", LastN.name, "--set", "keep=0"]) == 2
    assert "keep 0 is out of range: it must be at least 1" in capsys.readouterr().err
    assert main(["memories"]) == 0
    assert "last_n: the thread's last N messages\n  --set keep=" in capsys.readouterr().out


def _switchboard_script():
    from types import SimpleNamespace

    import streamlit as st

    from core.memory.config import MemoryConfig
    from ui.switchboard import render_switchboard

    node = SimpleNamespace(id="toy", title="Toy node")
    st.session_state["overrides"] = render_switchboard([node], {"toy": MemoryConfig("last_n", keep=3)}, key="sb")


def test_a_new_memory_systems_settings_are_in_the_switchboard(toy):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_switchboard_script, default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    keep = at.number_input(key="sb-toy_last_n_keep")
    assert (keep.label, keep.value, keep.max) == ("Keep (messages)", 3, 50)
    assert keep.help == "how many of the thread's newest messages are sent"
    assert at.session_state["overrides"] == {}
    keep.set_value(5).run()
    assert not at.exception, at.exception
    assert at.session_state["overrides"] == {"toy": {"keep": 5}}
    # ... and what it sets is what a replay under the override keeps.
    config = MemoryConfig(LastN.name, keep=3).with_(**at.session_state["overrides"]["toy"])
    assert (
        _kept(Replay(openai(TOY_CHAT), config).ledger_at(4))
        == [m.ref for t in openai(TOY_CHAT).turns[:4] for m in t.messages][-5:]
    )


def _sniff_toy(first, layout) -> bool:
    return isinstance(first, dict) and first.get("toy") == 1


def _read_toy(records, ctx):
    def parse_one(value, index):
        lines = value.get("lines")
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            raise RecordError("'lines' must be a list of strings", "lines")
        messages = [
            Message("user" if i % 2 == 0 else "assistant", text, QUERY if i % 2 == 0 else "answer", f"{index}:{i}")
            for i, text in enumerate(lines)
        ]
        return conversation_from_messages(messages, f"toy-{index}", source_format="toy")

    yield from ctx.each(records, parse_one)


def test_a_new_import_format_registered_as_the_recipe_says_is_detected_read_and_replayed():
    register_format(Format("toy", "a toy format: alternating lines", _sniff_toy, _read_toy), before="openai")
    try:
        text = json.dumps([{"toy": 1, "lines": ["Hi, I'm Dana.", "Hello Dana!", "What's my name?", "Dana."]}])
        result = import_text(text, "toy.json")
        assert result.format == "toy"
        (conv,) = result.conversations
        assert [t.query for t in conv.turns] == ["Hi, I'm Dana.", "What's my name?"]
        ledger = Replay(conv, MemoryConfig(strategy="buffer")).ledger_at(1)
        assert [e.kept for e in ledger.entries] == [True, True]
        # A bad record is reported by record and field, like in every other format.
        with pytest.raises(FormatError) as refused:
            import_text(json.dumps([{"toy": 1, "lines": [3]}]), "bad.json")
        assert refused.value.problems[0].field == "lines"
        assert "'lines' must be a list of strings" in refused.value.problems[0].message
    finally:
        unregister_format("toy")


def test_architecture_md_is_one_page_and_each_recipe_names_a_test_that_exists():
    """ARCHITECTURE.md stays a page a newcomer reads (at most 1,500 words) and every recipe in it points at
    the test that follows it once, which exists."""
    import re

    from tests.conftest import ROOT

    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(text.split()) <= 1500
    recipes = re.findall(r"^\*\*(A[n]? [^*]+)\*\* \(([^)]*)\)", text.split("\n## Recipes\n", 1)[1], re.M)
    assert {name for name, _ in recipes} >= {
        "A memory system",
        "An import format",
        "A node type",
        "A page",
        "A receipt",
    }
    for name, where in recipes:
        tests = re.findall(r"`(tests/[\w/]+\.py)`", where)
        assert tests, f"{name} names no test"
        assert all((ROOT / t).is_file() for t in tests), (name, tests)
