"""Dify 1.x as shipped — the default — against expected values derived by reading Dify's code.

The fixtures are our own conversations. Expected numbers come from Dify's rules, not from
MemLens: the window fetches the newest N message rows (the current turn's placeholder row is one
of them, rows of other branches use slots); token counting is off unless the plugin switch is on;
with it on, ``rest = max(context − max_tokens − 3, 0)`` and the history *list* (messages + 3) is
compared with it, popping the single oldest message; OpenAI's counting recipe gives every message
3 + tokens(role) + tokens(content).
"""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings

from core.analysis.findings import (
    CAUSE_NOT_COUNTED,
    CAUSE_PLACEHOLDER,
    CAUSE_SIBLINGS,
    DOCS_VS_CODE,
    config_findings,
    docs_vs_code,
    ledger_difference,
)
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies.dify import DEFAULT_FIDELITY, row_limit
from core.model.conversation import Message
from core.model.ledger import EMPTY, KEPT, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET
from core.model.tokens import _encoding, counter_for
from tests.builders import dify, linear, record
from tests.conftest import ROOT
from tests.memory.test_ledger_pipeline import configs, conversations

CODE = MemoryConfig()
DOCS = MemoryConfig(fidelity="documented")
COUNTING = CODE.with_(plugin_token_counting=True)


def enc():
    return _encoding("o200k_base")  # gpt-4o-mini's encoding, which the default model uses


def recipe(role: str, content: str) -> int:
    """OpenAI's published recipe for one message: 3 + role tokens + content tokens."""
    e = enc()
    return 3 + len(e.encode(role)) + len(e.encode(content))


def kept_turns(ledger):
    return sorted({e.turn for e in ledger.entries if e.kept})


def test_the_default_is_dify_as_shipped():
    assert DEFAULT_FIDELITY == "code" and MemoryConfig().settings.fidelity == "code"
    assert MemoryConfig().settings.plugin_token_counting is False


# -- window boundaries: 1, N, N+1 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window, shipped, docs",
    [
        (1, [], [3]),  # the placeholder row is the only row fetched: no history at all
        (3, [2, 3], [1, 2, 3]),  # N = the 3 earlier turns: shipped sends N−1
        (4, [1, 2, 3], [1, 2, 3]),  # N + 1: the whole thread fits
        (5, [1, 2, 3], [1, 2, 3]),
    ],
)
def test_window_boundaries_on_a_linear_thread(window, shipped, docs):
    conv = linear(4)
    assert kept_turns(Replay(conv, CODE.with_(window=window)).ledger(4)) == shipped
    assert kept_turns(Replay(conv, DOCS.with_(window=window)).ledger(4)) == docs


def test_turn_one_is_outside_the_window_at_turn_four_with_a_window_of_three():
    ledger = Replay(linear(4), CODE.with_(window=3)).ledger(4)
    assert {e.reason for e in ledger.entries if e.turn == 1} == {OUTSIDE_WINDOW}


# 1 ← 2; 2b regenerates 2 (same parent 1); 3 follows 2b; 4 follows 3. Turn numbers are creation
# order: 1, 2, 3 (= 2b), 4 (= 3), 5 (= 4).
REGENERATED = [("1", None), ("2", "1"), ("2b", "1"), ("3", "2b"), ("4", "3")]


@pytest.mark.parametrize(
    "window, shipped, docs",
    [
        (1, [], [4]),
        (3, [3, 4], [1, 3, 4]),  # rows 4, 3, 2b: the thread's last two turns
        (4, [3, 4], [1, 3, 4]),  # rows 4, 3, 2b, 2: turn 2 is the regenerated sibling, it uses the 4th row
        (5, [1, 3, 4], [1, 3, 4]),  # rows reach turn 1 again
    ],
)
def test_window_boundaries_with_a_regenerated_sibling(window, shipped, docs):
    conv = dify(REGENERATED)
    code = Replay(conv, CODE.with_(window=window)).ledger(5)
    assert kept_turns(code) == shipped
    assert kept_turns(Replay(conv, DOCS.with_(window=window)).ledger(5)) == docs
    assert {e.reason for e in code.entries if e.turn == 2} == {OTHER_BRANCH}


@pytest.mark.parametrize(
    "window, runs_as", [(None, 500), (0, 500), (-3, 500), (500, 500), (501, 500), (10_000, 500), (7, 7)]
)
def test_window_sizes_run_as_dify_reads_them(window, runs_as):
    assert row_limit(window) == runs_as
    MemoryConfig(window=window).validate()  # accepted, not refused


def test_a_window_over_500_is_capped_and_says_so():
    conv = linear(503)
    capped = Replay(conv, CODE.with_(window=600)).ledger(503)
    assert kept_turns(capped) == list(range(4, 503))  # 500 rows, one of them the placeholder
    assert kept_turns(capped) == kept_turns(Replay(conv, CODE.with_(window=500)).ledger(503))
    e = next(e for e in capped.entries if e.reason == OUTSIDE_WINDOW)
    from core.memory.words import explain

    assert "500-row cap" in explain(e, capped.config)
    from core.analysis.debug_view import memory_rules

    assert "runs as 500" in memory_rules(capped.config)


def test_an_absurd_window_is_refused_with_a_clear_message():
    with pytest.raises(ConfigError, match="at most 1,000,000"):
        MemoryConfig(window=10**9).validate()


# -- token counts: OpenAI's recipe -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content", ["hello", "Grüße aus München", "我的名字是小明，我住在上海。", "🙂🚀👩‍👩‍👧 ok", "", "line one\nline two"]
)
def test_every_message_costs_three_plus_role_plus_content_tokens(content):
    conv = dify([record("1", None, content or "q", content), record("2", "1", "next", "")])
    ledger = Replay(conv, CODE).ledger(2)
    user, assistant = ledger.entries
    assert user.tokens == recipe("user", content or "q")
    assert assistant.tokens == recipe("assistant", content)


def test_a_name_adds_its_tokens_plus_one():
    counter = counter_for("gpt-4o-mini")
    msg = Message("user", "hi there", "query", 0, name="dana")
    assert counter.message(msg) == recipe("user", "hi there") + len(enc().encode("dana")) + 1


def test_a_prompt_adds_three_for_the_reply_priming():
    conv = dify([record("1", None, "q one", "a one"), record("2", "1", "q two", "")], system="Be brief.")
    ledger = Replay(conv, CODE).ledger(2)
    assert ledger.prompt_tokens == (
        3
        + recipe("system", "Be brief.")
        + recipe("user", "q one")
        + recipe("assistant", "a one")
        + recipe("user", "q two")
    )


# -- plugin token counting ------------------------------------------------------------------------------


def _history_list_count(ledger) -> int:
    """Dify's count of the history list: every message plus the list's +3."""
    return sum(e.tokens for e in ledger.entries) + 3


def test_counting_off_never_prunes_whatever_the_context():
    conv = linear(5, answer=lambda i: "word " * 400)
    ledger = Replay(conv, CODE.with_(context_size=10)).ledger(5)
    assert ledger.budget is None and len(ledger.kept) == 8
    assert "plugin token counting is off" in ledger.budget_note


def test_counting_on_at_exactly_the_budget_keeps_everything():
    conv = linear(3)
    whole = Replay(conv, COUNTING).ledger(3)
    need = _history_list_count(whole)
    # rest = context − max_tokens − 3 must equal the list's count
    exact = Replay(conv, COUNTING.with_(context_size=need + 3 + 100, max_tokens=100)).ledger(3)
    assert exact.budget == need
    assert [e.reason for e in exact.entries] == [KEPT] * 4


def test_counting_on_one_token_under_the_budget_pops_the_single_oldest_message():
    conv = linear(3)
    need = _history_list_count(Replay(conv, COUNTING).ledger(3))
    under = Replay(conv, COUNTING.with_(context_size=need + 3 - 1)).ledger(3)
    assert under.budget == need - 1
    assert [e.reason for e in under.entries] == [OVER_BUDGET, KEPT, KEPT, KEPT]
    assert under.entries[1].role == "assistant"  # the kept history may start with an assistant message


def test_counting_on_keeps_the_last_message_even_when_it_alone_is_over_the_budget():
    conv = dify([record("1", None, "short", "word " * 300), record("2", "1", "next", "")])
    ledger = Replay(conv, COUNTING.with_(context_size=50)).ledger(2)
    assert ledger.budget == 47
    assert [e.reason for e in ledger.entries] == [OVER_BUDGET, KEPT]


def test_counting_on_with_an_unknown_context_uses_2000_for_the_list():
    conv = linear(2)
    ledger = Replay(conv, COUNTING.with_(model="acme/unknown-model")).ledger(2)
    assert ledger.budget == 2000 and "2,000" in ledger.budget_note


def test_counting_on_budget_does_not_subtract_the_prompt():
    conv = dify([record("1", None, "q", "a"), record("2", "1", "a long question " * 20, "")], system="S " * 50)
    ledger = Replay(conv, COUNTING.with_(context_size=5000, max_tokens=700)).ledger(2)
    assert ledger.budget == 5000 - 700 - 3


def test_an_empty_answer_in_the_middle_counts_while_pruning_and_is_then_dropped():
    conv = dify(
        [
            record("1", None, "first", "one"),
            record("2", "1", "failed", "", status="error"),
            record("3", "2", "third", "three"),
            record("4", "3", "now", ""),
        ]
    )
    full = Replay(conv, COUNTING).ledger(4)
    empty = next(e for e in full.entries if e.reason == EMPTY)
    assert empty.tokens == recipe("assistant", "")  # 3 + 1: counted while pruning
    need = _history_list_count(full)
    exact = Replay(conv, COUNTING.with_(context_size=need + 3)).ledger(4)
    assert [e.reason for e in exact.entries] == [KEPT, KEPT, KEPT, EMPTY, KEPT, KEPT]
    under = Replay(conv, COUNTING.with_(context_size=need + 2)).ledger(4)
    assert [e.reason for e in under.entries] == [OVER_BUDGET, KEPT, KEPT, EMPTY, KEPT, KEPT]


# -- docs versus code ------------------------------------------------------------------------------------


def test_docs_vs_code_names_the_placeholder_row_at_turn_four():
    diffs = docs_vs_code(linear(4), CODE.with_(window=3))
    assert [d.turn for d in diffs] == [4]
    d = diffs[0]
    assert d.causes == (CAUSE_PLACEHOLDER,) and d.only_docs == (1,)
    assert d.text.startswith(
        "Dify's docs say the window holds 3 turns, so 3 earlier turns would be sent; "
        "Dify 1.x sends 2 — the current turn's row is one of the 3 fetched"
    )


def test_docs_vs_code_names_a_regenerated_reply_that_used_a_window_row():
    diffs = docs_vs_code(dify(REGENERATED), CODE.with_(window=4))
    last = diffs[-1]
    assert last.turn == 5 and last.causes == (CAUSE_PLACEHOLDER, CAUSE_SIBLINGS)
    assert "1 turn on another branch (regenerated, or left by an edit) used a window row" in last.text


def test_docs_vs_code_says_the_shipped_code_does_not_count_tokens():
    conv = linear(4, answer=lambda i: "word " * 40)
    diffs = docs_vs_code(conv, CODE.with_(context_size=120))
    assert diffs and all(d.causes == (CAUSE_NOT_COUNTED,) for d in diffs)
    docs = Replay(conv, DOCS.with_(context_size=120)).ledger(diffs[0].turn)
    assert f"pruned to fit {docs.budget:,} tokens" in diffs[0].text
    assert "Dify as shipped does not count tokens" in diffs[0].text


def test_the_pair_of_ledgers_gives_the_same_difference_as_the_walk():
    conv = dify(REGENERATED)
    walk = {d.turn: d for d in docs_vs_code(conv, CODE.with_(window=4))}
    for turn, d in walk.items():
        code = Replay(conv, CODE.with_(window=4)).ledger(turn)
        docs = Replay(conv, DOCS.with_(window=4)).ledger(turn)
        pair = ledger_difference(code, docs, Replay(conv, CODE).position_of(turn))
        assert pair is not None and pair.to_json() == d.to_json()


#: The pipeline test's configs, as Dify's memory (the only one with two profiles).
dify_configs = configs.map(lambda c: c.with_(strategy="dify"))


def _walk_says_what_the_ledgers_say(conv, config, **kwargs) -> int:
    """One walk decides both profiles on the shipped profile's thread view: it must name exactly the
    turns whose two ledgers keep different messages, each as the pair of ledgers explains it (the
    causes and text, both profiles' sent turns, and what only one of them sends). How many differ."""
    walk = {d.turn: d for d in docs_vs_code(conv, config, **kwargs)}
    code = Replay(conv, config.with_(fidelity="code"), **kwargs)
    docs = Replay(conv, config.with_(fidelity="documented"), **kwargs)
    pairs = {}
    for summary in code.summaries():
        position = code.position_of(summary.turn)
        query = conv.turns[position].query_index
        pair = ledger_difference(
            code.ledger_at(position),
            docs.ledger_at(position),
            position,
            code.message_tokens(position)[query] if query is not None else 0,
        )
        if pair is not None:
            pairs[summary.turn] = pair
    assert walk.keys() == pairs.keys()
    for turn, d in walk.items():
        assert d.to_json() == pairs[turn].to_json()
    return len(walk)


@settings(max_examples=300, deadline=None)
@given(conversations(), dify_configs)
def test_the_walk_finds_every_turn_whose_two_ledgers_differ_and_says_what_they_say(conv, config):
    _walk_says_what_the_ledgers_say(conv, config)


#: Empty answers, so a budget's cut can leave a turn only its empty answer to send, and two regenerated
#: turns, so the thread skips positions (its sent turns are not numbered on without gaps).
EMPTY_AND_BRANCHED = [
    ("1", None, "q1 " * 5, "a1 " * 9),
    ("2", "1", "q2 " * 3, ""),
    ("3", "2", "q3 " * 7, "a3 " * 4),
    ("3b", "2", "q3 " * 7, "a3b " * 6),
    ("4", "3b", "q4 " * 2, ""),
    ("5", "4", "q5 " * 6, "a5 " * 8),
    ("5b", "4", "q5 " * 6, "a5b " * 2),
    ("6", "5b", "q6 " * 4, "a6 " * 3),
    ("7", "6", "q7 " * 5, ""),
]
EMPTY_LINEAR = [(m, p[:1] if p else p, q, a) for m, p, q, a in EMPTY_AND_BRANCHED if not m.endswith("b")]
#: And the branch without an empty message (where sent turns are read without looking for one).
BRANCHED = [(m, p, q, a or f"answer {m}") for m, p, q, a in EMPTY_AND_BRANCHED]


def _opened(conv):
    """The conversation behind an opening statement: a first turn with no query, which no turn answers."""
    from core.model.conversation import ANSWER, Turn

    opener = Turn(
        id="0",
        parent_id=None,
        messages=(Message("assistant", "Welcome! Ask me anything.", ANSWER, "0:a"),),
        query_index=None,
        answer_index=0,
    )
    return type(conv)(
        id=conv.id, turns=[opener, *conv.turns], system_prompt=conv.system_prompt, source_format=conv.source_format
    )


#: What else decides a budget: the prompt around the history, a node's own reserve, a query that
#: joins the prompt after the budget is taken.
PROMPTS = ({}, {"system_prompt": "A much longer system prompt " * 4}, {"prompt_tokens": lambda p: 12 + 5 * p})
NODES = ({}, {"prompt_reserve": 20}, {"query_after_budget": True})


@pytest.mark.parametrize(
    "rows", [EMPTY_AND_BRANCHED, EMPTY_LINEAR, BRANCHED], ids=["branched", "linear", "branched-no-empty"]
)
@pytest.mark.parametrize("window", [2, 3, 5, None])
@pytest.mark.parametrize("opening", [False, True], ids=["", "opened"])
def test_the_walk_says_what_the_ledgers_say_at_every_budget_cut(rows, window, opening):
    conv = dify(rows, system="You answer briefly.")
    conv = _opened(conv) if opening else conv
    differing = sum(
        _walk_says_what_the_ledgers_say(
            conv, COUNTING.with_(window=window, context_size=size, max_tokens=0, **node), **kwargs
        )
        for size in range(40, 260, 9)
        for kwargs in PROMPTS
        for node in NODES
    )
    assert differing > 0  # the profiles' budgets cut in different places, often


def test_docs_vs_code_reuses_a_replay_made_with_its_settings_and_only_those(monkeypatch):
    import core.analysis.findings.profiles as findings

    made: list[MemoryConfig] = []

    class Counted(Replay):
        def __init__(self, conversation, config, **kwargs):
            made.append(config)
            super().__init__(conversation, config, **kwargs)

    monkeypatch.setattr(findings, "Replay", Counted)
    conv = dify(REGENERATED, system="Be brief.")
    config = COUNTING.with_(window=4, context_size=200)
    own = Replay(conv, config)
    expected = docs_vs_code(conv, config)
    made.clear()
    assert docs_vs_code(conv, config, replay=own) == expected and [c.settings.fidelity for c in made] == ["documented"]
    for other in ({"system_prompt": "Another prompt."}, {"has_thread": False}, {"prompt_tokens": lambda p: 5}):
        made.clear()
        docs_vs_code(conv, config, replay=own, **other)
        assert sorted(c.settings.fidelity for c in made) == ["code", "documented"], other
    made.clear()
    docs_vs_code(conv, config, replay=Replay(dify(REGENERATED, system="Be brief."), config))
    assert sorted(c.settings.fidelity for c in made) == ["code", "documented"]  # another conversation's replay


def test_the_profiles_agree_where_nothing_differs():
    conv = linear(3)
    assert docs_vs_code(conv, CODE) == []
    ledger = Replay(conv, CODE).ledger(3)
    assert ledger_difference(ledger, Replay(conv, DOCS).ledger(3), 2) is None


def test_compare_findings_group_the_difference_and_link_its_first_turn():
    found = [f for f in config_findings(linear(6), [CODE.with_(window=3)]) if f.kind == DOCS_VS_CODE]
    assert len(found) == 1 and found[0].turn == 4
    assert found[0].data["turns"] == [4, 5, 6]
    assert "the same happens at 2 later turns (turns 5–6)" in found[0].text


# -- the command line ------------------------------------------------------------------------------------


def _replay(*args):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "replay",
            "sample_data/conversations/order-support.json",
            "--memory",
            "dify",
            "--window",
            "3",
            "--turn",
            "4",
            "--format",
            "json",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["turns"][0]["ledger"]


def test_replay_defaults_to_two_earlier_turns_at_turn_four_and_documented_gives_three():
    shipped = _replay()
    assert sorted({e["turn"] for e in shipped if e["kept"]}) == [2, 3]
    assert {e["reason"] for e in shipped if e["turn"] == 1} == {OUTSIDE_WINDOW}
    assert sorted({e["turn"] for e in _replay("--fidelity", "documented") if e["kept"]}) == [1, 2, 3]


def test_replay_plugin_token_counting_prunes_on_the_command_line():
    off = _replay("--context-size", "60")
    on = _replay("--context-size", "60", "--plugin-token-counting")
    assert OVER_BUDGET not in {e["reason"] for e in off}
    assert OVER_BUDGET in {e["reason"] for e in on}


def test_report_takes_plugin_token_counting_per_config():
    from core.analysis.compare import named_configs
    from core.cli.app import build_parser

    args = build_parser().parse_args(
        [
            "report",
            "chat.json",
            "--memory",
            "dify",
            "--window",
            "3",
            "--plugin-token-counting",
            "--context-size",
            "500",
            "--memory",
            "dify",
            "--window",
            "3",
            "-o",
            "out.html",
        ]
    )
    assert args.configs == [
        {"strategy": "dify", "window": 3, "plugin_token_counting": True, "context_size": 500},
        {"strategy": "dify", "window": 3},
    ]
    counted, plain = (c.config for c in named_configs(args.configs))
    assert counted.settings.plugin_token_counting and not plain.settings.plugin_token_counting
    assert counted.label() == "dify window 3 + token counting" and plain.label() == "dify window 3"
