"""A memory system's settings, declared once (core/memory/strategies/settings.py): the values each
takes, the one-line errors it gives, how a command line's text becomes a value, how a stored form holds
it, and the config that carries them (core/memory/config.py), stored flat and read back from the flat
form of every earlier layout."""

import json

import pytest

from core.memory.config import MemoryConfig, config_of, setting_names
from core.memory.errors import ConfigError
from core.memory.strategies import STRATEGIES, remembers, strategy_of
from core.memory.strategies.base import Strategy
from core.memory.strategies.settings import (
    BOOL,
    CHANGE,
    CHANGES,
    CHOICE,
    COMMON,
    COMMON_NAMES,
    FLOAT,
    NODE_SHAPE,
    NUMBER,
    SWITCHED,
    TEXT,
    Setting,
    Widget,
    or_list,
    settings_class,
)
from core.memory.words import explain
from core.model.ledger import OUTSIDE_WINDOW, LedgerEntry


def test_a_list_of_words_reads_as_a_sentence():
    assert or_list(["a"]) == "a"
    assert or_list(["a", "b"]) == "a or b"
    assert or_list(["a", "b", "c"]) == "a, b or c"
    assert or_list([1, 2]) == "1 or 2"


# -- widgets ------------------------------------------------------------------------------------------


def test_a_widget_of_an_unknown_kind_is_refused_naming_the_kinds():
    with pytest.raises(ValueError, match=r"^unknown widget kind 'dial'; expected one of toggle, choice, "):
        Widget("dial", "Dial")


def test_a_widgets_keys_are_its_own_or_the_systems_and_settings_names():
    assert Widget(NUMBER, "N").keys("last_n", "keep") == ("last_n_keep",)
    assert Widget(NUMBER, "N", key="n").keys("last_n", "keep") == ("n",)
    assert Widget(SWITCHED, "N").keys("s", "w") == ("s_w_on", "s_w")
    assert Widget(SWITCHED, "N", key="win").keys("s", "w") == ("win_on", "win")
    assert Widget(CHANGE, "N").keys("s", "w") == ("s_w_turn", "s_w_to")
    assert Widget(CHANGE, "N", key=("a", "b")).keys("s", "w") == ("a", "b")


# -- a setting's values -------------------------------------------------------------------------------


def test_a_setting_of_an_unknown_kind_or_a_default_it_refuses_is_not_declared():
    with pytest.raises(ValueError, match=r"^setting 'k': unknown kind 'str'; expected one of int, float, bool, "):
        Setting("k", "x", "help", kind="str")
    with pytest.raises(ConfigError, match="^k 0 is out of range: it must be at least 1$"):
        Setting("k", 0, "help", minimum=1)
    with pytest.raises(ConfigError, match="^k must be set: it has no unset value$"):
        Setting("k", None, "help")
    assert Setting("k", None, "help", optional=True).default is None


@pytest.mark.parametrize(
    "setting, value, words",
    [
        (Setting("k", 1, "h"), "3", "k must be a whole number, not '3'"),
        (Setting("k", 1, "h"), True, "k must be a whole number, not True"),
        (Setting("k", 1, "h"), 2.5, "k must be a whole number, not 2.5"),
        (Setting("f", 0.5, "h", kind=FLOAT), "x", "f must be a number, not 'x'"),
        (Setting("f", 0.5, "h", kind=FLOAT), False, "f must be a number, not False"),
        (Setting("b", False, "h", kind=BOOL), 1, "b must be true or false, not 1"),
        (Setting("t", "a", "h", kind=TEXT), 3, "t must be text, not 3"),
        (Setting("c", (), "h", kind=CHANGES), [(1, 2)], "c must be (turn, size) pairs of whole numbers, not [(1, 2)]"),
        (Setting("c", (), "h", kind=CHANGES), ((1,),), "c must be (turn, size) pairs"),
        (Setting("c", (), "h", kind=CHANGES), ((1, True),), "c must be (turn, size) pairs"),
        (Setting("c", (), "h", kind=CHANGES), ((1, "2"),), "c must be (turn, size) pairs"),
        (Setting("c", (), "h", kind=CHANGES), ([1, 2],), "c must be (turn, size) pairs"),
        (Setting("k", 1, "h", minimum=1), None, "k must be set: it has no unset value"),
        (Setting("t", "a", "h", kind=TEXT, choices=("a", "b", "c")), "d", "unknown t 'd'; expected a, b or c"),
        (
            Setting("t", "a", "h", kind=TEXT, choices=("a", "b"), words="the thing"),
            "d",
            "unknown the thing 'd'; expected a or b",
        ),
        (
            Setting("t", "a", "h", kind=TEXT, choices=("a", "b"), expected="a (one) or b (two)"),
            "d",
            "unknown t 'd'; expected a (one) or b (two)",
        ),
        (
            Setting("t", None, "h", kind=TEXT, optional=True, choices=(None, "a"), unknown="no type {value!r} for t"),
            "d",
            "no type 'd' for t; expected a",
        ),
        (Setting("k", 1, "h", minimum=1), 0, "k 0 is out of range: it must be at least 1"),
        (Setting("k", 0, "h", minimum=0), -1, "k -1 is out of range: it must be 0 or more"),
        (Setting("k", 0, "h", maximum=5), 6, "k 6 is out of range: it must be at most 5"),
        (Setting("k", 1, "h", minimum=1, maximum=5), 6, "k 6 is out of range: it must be 1..5"),
        (Setting("k", 1, "h", minimum=1, maximum=5), 0, "k 0 is out of range: it must be 1..5"),
        (Setting("k", 1, "h", minimum=1, words="the keep"), 0, "the keep 0 is out of range: it must be at least 1"),
        (Setting("k", 1, "h", minimum=1, rule="keep one or more"), 0, "k 0 is out of range: keep one or more"),
    ],
)
def test_a_value_a_setting_does_not_take_is_refused_in_one_line(setting, value, words):
    with pytest.raises(ConfigError) as e:
        setting.check(value)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "setting, value",
    [
        (Setting("k", 1, "h", minimum=1, maximum=5), 1),
        (Setting("k", 1, "h", minimum=1, maximum=5), 5),
        (Setting("k", None, "h", optional=True, minimum=1), None),
        (Setting("f", 0.5, "h", kind=FLOAT), 1),
        (Setting("b", False, "h", kind=BOOL), True),
        (Setting("c", (), "h", kind=CHANGES), ((1, 2), (3, 4))),
        (Setting("t", None, "h", kind=TEXT, optional=True, choices=(None, "a")), "a"),
        (Setting("c", (), "h", kind=CHANGES, minimum=5), ((1, 2),)),  # a change's numbers are the system's to check
    ],
)
def test_a_value_a_setting_takes_passes(setting, value):
    assert setting.check(value) is None


def test_a_window_change_is_a_list_in_the_stored_form_and_a_tuple_in_a_config():
    changes = Setting("c", (), "h", kind=CHANGES)
    assert changes.stored_value([[6, 12], [9, 3]]) == ((6, 12), (9, 3))
    assert changes.stored_value(((6, 12),)) == ((6, 12),)
    assert changes.stored_value("x") == "x"  # not a list: left for the check to refuse
    assert changes.to_stored(((6, 12),)) == [[6, 12]]
    number = Setting("k", 1, "h")
    assert number.stored_value([1]) == [1] and number.to_stored((1,)) == (1,)


# -- a command line's text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, text, value",
    [
        (Setting("k", 1, "h"), "12", 12),
        (Setting("k", 1, "h"), " 3 ", 3),
        (Setting("k", None, "h", optional=True), "none", None),
        (Setting("k", None, "h", optional=True), "Null", None),
        (Setting("k", None, "h", optional=True), "unset", None),
        (Setting("f", 0.5, "h", kind=FLOAT), "0.25", 0.25),
        (Setting("f", 0.5, "h", kind=FLOAT, maximum=1), "1", 1.0),
        (Setting("b", False, "h", kind=BOOL), "true", True),
        (Setting("b", False, "h", kind=BOOL), "On", True),
        (Setting("b", False, "h", kind=BOOL), "yes", True),
        (Setting("b", False, "h", kind=BOOL), "1", True),
        (Setting("b", False, "h", kind=BOOL), "false", False),
        (Setting("b", False, "h", kind=BOOL), "OFF", False),
        (Setting("b", False, "h", kind=BOOL), "no", False),
        (Setting("b", False, "h", kind=BOOL), "0", False),
        (Setting("c", (), "h", kind=CHANGES), "6:12", ((6, 12),)),
        (Setting("c", (), "h", kind=CHANGES), "6:12, 9:3", ((6, 12), (9, 3))),
        (Setting("c", (), "h", kind=CHANGES), "", ()),
        (Setting("t", "a", "h", kind=TEXT), "none", "none"),
        (Setting("t", None, "h", kind=TEXT, optional=True), "human", "human"),
        (Setting("k", 1, "h", minimum=1, flag="--k", flag_minimum=0), "0", 0),
    ],
)
def test_a_command_lines_text_becomes_the_settings_value(setting, text, value):
    parsed = setting.parse(text, setting.flag or "")
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    "setting, text, given, words",
    [
        (Setting("k", 1, "h"), "x", "", "k must be a whole number, not 'x'"),
        (Setting("k", 1, "h"), "2.5", "--set k", "--set k must be a whole number, not '2.5'"),
        (Setting("k", 1, "h", words="the keep"), "x", "", "the keep must be a whole number, not 'x'"),
        (Setting("k", 1, "h"), "none", "", "k must be a whole number, not 'none'"),
        (Setting("f", 0.5, "h", kind=FLOAT), "x", "--f", "--f must be a number, not 'x'"),
        (
            Setting("f", 0.5, "h", kind=FLOAT, maximum=1, rule="a fraction"),
            "2",
            "--f",
            "--f 2 is out of range: a fraction",
        ),
        (Setting("k", 1, "h", minimum=1), " 0", "--set k", "--set k 0 is out of range: it must be at least 1"),
        (Setting("k", 1, "h", minimum=1, maximum=3), "4", "--set k", "--set k 4 is out of range: it must be 1..3"),
        (
            Setting("k", 1, "h", minimum=1, flag="--k", flag_minimum=0),
            "-1",
            "--k",
            "--k -1 is out of range: it must be 0 or more",
        ),
        (
            Setting("k", 1, "h", minimum=1, flag="--k", flag_minimum=0, rule="one or more"),
            "-1",
            "--k",
            "--k -1 is out of range: it must be 0 or more",
        ),
        (
            Setting("k", 1, "h", minimum=1, flag="--k", flag_minimum=0, rule="one or more"),
            "0",
            "--set k",
            "--set k 0 is out of range: one or more",
        ),
        (Setting("b", False, "h", kind=BOOL), "maybe", "--b", "--b must be true or false, not 'maybe'"),
        (
            Setting("c", (), "h", kind=CHANGES),
            "6-12",
            "--c",
            "--c must be TURN:N pairs (from turn TURN the window is N), not '6-12'",
        ),
        (Setting("c", (), "h", kind=CHANGES), "6:12:1", "--c", "--c must be TURN:N pairs"),
    ],
)
def test_a_command_lines_text_that_stands_for_no_value_is_refused_naming_how_it_was_given(setting, text, given, words):
    with pytest.raises(ConfigError) as e:
        setting.parse(text, given)
    assert str(e.value).startswith(words)


def test_a_setting_described_for_the_command_line_says_its_values_and_default():
    assert Setting("k", 2, "how many").described() == "how many (default 2)"
    assert Setting("k", None, "how many", optional=True).described() == "how many (default unset)"
    assert Setting("c", (), "changes", kind=CHANGES).described() == "changes (default none)"
    assert Setting("t", "a", "which", kind=TEXT, choices=("a", "b")).described() == "which; one of a or b (default a)"
    assert (
        Setting("t", None, "which", kind=TEXT, optional=True, choices=(None, "a", "b")).described()
        == "which; one of a or b (default unset)"
    )


def test_a_systems_settings_are_held_in_a_frozen_class_made_from_them():
    made = settings_class("Toy", (Setting("keep", 2, "h"), Setting("on", False, "h", kind=BOOL)))
    assert made.__name__ == "ToySettings" and made() == made(keep=2, on=False)
    with pytest.raises(AttributeError):
        made().keep = 3
    with pytest.raises(TypeError, match="^Toy: setting 'keep' is declared twice$"):
        settings_class("Toy", (Setting("keep", 2, "h"), Setting("keep", 3, "h")))


def test_a_system_may_not_name_a_setting_every_config_has():
    assert {"strategy", "settings", "label", "model", "max_tokens", "prompt_reserve"} <= COMMON_NAMES
    assert {s.name for s in COMMON + NODE_SHAPE} <= COMMON_NAMES
    with pytest.raises(
        TypeError, match="^Clash: setting 'max_tokens' is a setting of every config; name the system's own differently$"
    ):
        type("Clash", (Strategy,), {"name": "clash", "settings": (Setting("max_tokens", 1, "h"),)})


# -- the config that carries them ----------------------------------------------------------------------


class Toy(Strategy):
    name = "toy_settings"
    settings = (
        Setting("keep", 2, "how many", minimum=1, flag="--keep"),
        Setting("mode", "a", "which", kind=TEXT, choices=("a", "b"), omit_default=True),
    )


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(STRATEGIES, Toy.name, Toy())


def test_a_config_puts_each_setting_where_it_belongs_and_stores_them_flat(toy):
    config = MemoryConfig(Toy.name, keep=4, model="gpt-4o", scope="call")
    assert (config.settings.keep, config.settings.mode, config.model, config.scope) == (4, "a", "gpt-4o", "call")
    assert config.system is STRATEGIES[Toy.name] and config.remembers
    assert config.values() == {
        "model": "gpt-4o",
        "context_size": None,
        "max_tokens": 0,
        "granularity": "query_answer",
        "scope": "call",
        "history_as_text": False,
        "prompt_reserve": None,
        "history_budget": None,
        "sends_empty": False,
        "query_after_budget": False,
        "keep": 4,
        "mode": "a",
    }
    # The stored form: flat; a setting that says so is left out at its default, kept otherwise.
    assert config.to_dict() == {
        "strategy": Toy.name,
        "model": "gpt-4o",
        "context_size": None,
        "max_tokens": 0,
        "granularity": "query_answer",
        "scope": "call",
        "keep": 4,
    }
    assert MemoryConfig(Toy.name, mode="b").to_dict()["mode"] == "b"
    assert MemoryConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert config_of(config) is config and config_of({**config.to_dict(), "budget": 40}) == config


def test_a_config_of_the_earlier_flat_layout_still_loads(toy):
    """A stored config held every system's settings: the chosen system's are read, the others' left out."""
    stored = {
        "strategy": "dify",
        "window": 3,
        "fidelity": "documented",
        "model": "gpt-4o-mini",
        "context_size": None,
        "max_tokens": 0,
        "granularity": "query_answer",
        "scope": "thread",
        "plugin_token_counting": False,
        "window_changes": [],
        "max_history_tokens": None,
        "trim_strategy": "last",
        "trim_counter": "tokens",
        "include_system": False,
        "start_on": None,
        "end_on": None,
        "allow_partial": False,
        "compaction_trigger": 0.8,
        "compaction_keep_messages": 20,
        "compaction_keep_tool_results": 3,
        "compaction_profile": "shipped",
    }
    config = MemoryConfig.from_dict(stored)
    assert config == MemoryConfig(window=3, fidelity="documented")
    assert MemoryConfig.from_dict({**stored, "strategy": "window", "window": 6}).settings.window == 6
    assert MemoryConfig.from_dict({}) == MemoryConfig()  # the default memory


def test_a_config_refuses_what_no_system_declares_and_a_memory_it_does_not_know(toy):
    with pytest.raises(ConfigError, match="^unknown memory setting\\(s\\): kep, zz$"):
        MemoryConfig.from_dict({"strategy": Toy.name, "kep": 3, "zz": 1})
    with pytest.raises(ConfigError, match="^unknown memory setting\\(s\\): kep$"):
        MemoryConfig(Toy.name, kep=3)
    with pytest.raises(ConfigError, match="^unknown memory strategy 'telepathy'; expected one of dify, window, "):
        MemoryConfig("telepathy")
    with pytest.raises(ConfigError, match="^unknown memory strategy"):
        strategy_of({"strategy": "telepathy"})


def test_a_config_checks_each_value_then_the_systems_own_rule(toy):
    with pytest.raises(ConfigError, match="^keep 0 is out of range: it must be at least 1$"):
        MemoryConfig(Toy.name, keep=0).validate()
    with pytest.raises(ConfigError, match="^unknown mode 'c'; expected a or b$"):
        MemoryConfig(Toy.name, mode="c").validate()
    with pytest.raises(ConfigError, match="^context size 0 is out of range: it must be at least 1$"):
        MemoryConfig(Toy.name, context_size=0).validate()
    with pytest.raises(ConfigError, match="^the settings of memory 'toy_settings' are not its own"):
        MemoryConfig(Toy.name, settings=MemoryConfig("window").settings).validate()
    assert MemoryConfig(Toy.name, keep=1).validate().settings.keep == 1


def test_changing_a_configs_memory_keeps_the_common_settings_and_those_of_the_same_name(toy):
    config = MemoryConfig("dify", window=4, model="gpt-4o", max_tokens=100)
    moved = config.with_(strategy="window")
    assert (moved.strategy, moved.settings.window, moved.model, moved.max_tokens) == ("window", 4, "gpt-4o", 100)
    assert config.with_(strategy="off").with_(strategy="dify").settings.window is None  # off keeps none of it
    assert (
        config.with_(window=6).settings == MemoryConfig(window=6).settings and config.with_(window=6).model == "gpt-4o"
    )
    own = MemoryConfig(Toy.name, keep=5).settings
    assert MemoryConfig(Toy.name).with_(settings=own).settings.keep == 5
    assert MemoryConfig(Toy.name, settings=own, keep=7).settings.keep == 7


def test_every_name_a_flat_config_may_hold(toy):
    names = setting_names()
    assert {
        "strategy",
        "model",
        "scope",
        "prompt_reserve",
        "window",
        "fidelity",
        "trim_counter",
        "agent_strategy",
        "keep",
        "mode",
    } <= names
    assert "budget" not in names and "label" not in names


def test_whether_a_stored_config_sends_history():
    assert remembers(MemoryConfig()) and not remembers(MemoryConfig("off"))
    assert remembers({"strategy": "window"}) and not remembers({"strategy": "off"})
    assert not remembers({}) and not remembers(None) and not remembers({"model": "x"})


def test_a_systems_own_words_come_first_and_the_shared_ones_otherwise(toy):
    entry = LedgerEntry("1:q", 1, "user", 5, False, OUTSIDE_WINDOW)
    assert explain(entry, {"strategy": "window", "window": 4}) == "outside window of 4 messages"
    assert explain(entry, {"strategy": Toy.name}) == "outside the memory's window"  # no words of its own
    assert explain(entry, {"strategy": "telepathy"}) == "outside the memory's window"  # a memory this version lacks
    assert explain(entry, {"window": 3}).startswith("outside window of 3 rows")  # no strategy: the default memory
    assert explain(entry).startswith("outside Dify's 500-row cap")


def test_the_default_label_names_the_system_and_its_settings_that_are_not_at_their_default(toy):
    assert MemoryConfig(Toy.name).label() == Toy.name
    assert MemoryConfig(Toy.name, keep=4, mode="b").label() == f"{Toy.name} keep=4 mode=b"


def test_the_common_settings_are_declared_once_with_their_flags():
    assert [s.name for s in COMMON] == ["model", "context_size", "max_tokens", "granularity", "scope"]
    assert [s.flag for s in COMMON] == ["--model", "--context-size", "--max-tokens", "--granularity", "--scope"]
    assert next(s for s in COMMON if s.name == "granularity").widget.kind == CHOICE


def test_a_system_class_holds_its_settings_in_a_class_of_its_own_and_a_subclass_keeps_its_parents():
    class Mine(Strategy):
        name = "mine"
        settings = (Setting("keep", 2, "h"), Setting("on", False, "h", kind=BOOL))

    class Child(Mine):
        name = "child"

    assert Mine.Settings.__name__ == "MineSettings" and Mine.Settings() == Mine.Settings(keep=2, on=False)
    assert Child.Settings is Mine.Settings and Strategy.Settings() == Strategy.Settings()
    with pytest.raises(TypeError):
        Strategy.Settings(keep=2)  # the base system declares no setting
