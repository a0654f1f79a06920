"""ARCHITECTURE.md's recipes, followed once each: a toy memory strategy and a toy import format
plug in through the documented registries and work end to end with nothing else changed."""

import json

import pytest

from core.io import (Format, FormatError, RecordError, conversation_from_messages, import_text, register_format,
                     unregister_format)
from core.memory.replay import MemoryConfig, Replay
from core.memory.strategies import STRATEGIES
from core.memory.strategies.base import Strategy
from core.model.conversation import Message, QUERY
from tests.builders import linear


class LastTwoMessages(Strategy):
    """A toy rule: only the last two messages of the thread are sent."""

    name = "last_two"

    def window(self, view, current, config):
        return 0, max(0, view.length - 2)


def test_a_new_strategy_registered_as_the_recipe_says_replays_with_the_shared_reasons(monkeypatch):
    monkeypatch.setitem(STRATEGIES, "last_two", LastTwoMessages())
    conv = linear(5)
    ledger = Replay(conv, MemoryConfig(strategy="last_two")).ledger_at(4)
    assert [(e.turn, e.role) for e in ledger.entries if e.kept] == [(4, "user"), (4, "assistant")]
    assert {e.reason for e in ledger.entries if not e.kept} == {"outside_window"}


def _sniff_toy(first, layout) -> bool:
    return isinstance(first, dict) and first.get("toy") == 1


def _read_toy(records, ctx):
    def parse_one(value, index):
        lines = value.get("lines")
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            raise RecordError("'lines' must be a list of strings", "lines")
        messages = [Message("user" if i % 2 == 0 else "assistant", text, QUERY if i % 2 == 0 else "answer",
                            f"{index}:{i}") for i, text in enumerate(lines)]
        return conversation_from_messages(messages, f"toy-{index}", source_format="toy")

    yield from ctx.each(records, parse_one)


def test_a_new_import_format_registered_as_the_recipe_says_is_detected_read_and_replayed():
    register_format(Format("toy", "a toy format: alternating lines", _sniff_toy, _read_toy), before="openai")
    try:
        text = json.dumps([{"toy": 1, "lines": ["Hi, I'm Dana.", "Hello Dana!", "What's my name?", "Dana."]}])
        result = import_text(text, "toy.json")
        assert result.format == "toy"
        conv, = result.conversations
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


def test_a_new_strategy_registered_as_the_recipe_says_is_a_cli_choice_with_no_other_change(monkeypatch):
    from core.cli.app import build_parser, config_from_args

    monkeypatch.setitem(STRATEGIES, "last_two", LastTwoMessages())
    args = build_parser().parse_args(["replay", "chat.json", "--memory", "last_two"])
    assert config_from_args(args).strategy == "last_two"
