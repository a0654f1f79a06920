"""What each memory system says of itself and answers for the rest of MemLens (core/memory/strategies/):
its label, its words for the reasons, the rules it ran under, what its budget pruning means, the
findings and conversations it claims, its profiles — asked of the system, never decided by its name."""

from dataclasses import replace

import pytest

from core.memory.config import MemoryConfig
from core.memory.strategies import DEFAULT_STRATEGY, OFF, STRATEGIES, strategy_of
from core.memory.strategies.dify import PLUGIN_TOKEN_COUNTING
from core.memory.words import explain, reason_words
from core.model.conversation import AGENT_THOUGHTS, Conversation
from core.model.ledger import (
    CLEARED,
    EMPTY,
    GRANULARITY,
    KEPT,
    MEMORY_OFF,
    OMITTED,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    REWRITTEN,
    SCOPE,
    SUMMARIZED,
    TRIMMED_EARLIER,
    LedgerEntry,
)
from tests.builders import linear


def entry(reason: str) -> LedgerEntry:
    return LedgerEntry("1:query", 1, "user", 5, reason == KEPT, reason)


@pytest.mark.parametrize(
    "config, label",
    [
        (MemoryConfig(window=3), "dify window 3"),
        (MemoryConfig(), "dify no window"),
        (MemoryConfig(window=0), "dify no window"),
        (MemoryConfig(window=3, fidelity="documented"), "dify window 3 (docs)"),
        (MemoryConfig(window=3, plugin_token_counting=True), "dify window 3 + token counting"),
        (MemoryConfig(window=3, fidelity="documented", plugin_token_counting=True), "dify window 3 (docs)"),
        (MemoryConfig("window"), "window 10 msgs"),
        (MemoryConfig("window", window=6), "window 6 msgs"),
        (MemoryConfig("buffer"), "buffer (everything)"),
        (MemoryConfig(OFF), "memory off"),
        (MemoryConfig("summary_buffer"), "summary buffer 2,000 tok"),
        (MemoryConfig("summary_buffer", max_history_tokens=0), "summary buffer 0 tok"),
        (MemoryConfig("trim"), "trim last 2,000 tok"),
        (
            MemoryConfig("trim", trim_strategy="first", max_history_tokens=8, trim_counter="messages"),
            "trim first 8 msgs",
        ),
        (MemoryConfig("trim", start_on="human", trim_counter="approximate"), "trim last 2,000 tok from human"),
        (MemoryConfig("compaction"), "compaction at 80% of context, Dify 1.17 as shipped"),
        (
            MemoryConfig("compaction", compaction_trigger=0.5, compaction_profile="exact"),
            "compaction at 50% of context, exact estimate (MemLens's own)",
        ),
        (MemoryConfig("dify_agent"), "dify agent app"),
        (
            MemoryConfig("dify_agent", agent_strategy="react", plugin_token_counting=True),
            "dify agent app (ReAct) + token counting",
        ),
    ],
)
def test_each_system_labels_its_configs(config, label):
    assert config.label() == label


@pytest.mark.parametrize(
    "config, reason, words",
    [
        (
            {"strategy": "dify", "window": 3},
            OUTSIDE_WINDOW,
            "outside window of 3 rows: the conversation's newest on any branch, the current turn's one of them",
        ),
        ({"strategy": "dify", "window": 3, "fidelity": "documented"}, OUTSIDE_WINDOW, "outside window of 3 turns"),
        (
            {"strategy": "dify", "window": 500},
            OUTSIDE_WINDOW,
            "outside window of 500 rows: the conversation's newest on any branch, the current turn's one of them",
        ),
        (
            {"strategy": "dify", "window": 1},
            OUTSIDE_WINDOW,
            "outside window of 1 rows: the conversation's newest on any branch, the current turn's one of them",
        ),
        ({"strategy": "dify", "window": 501}, OUTSIDE_WINDOW, "outside Dify's 500-row cap"),
        ({"strategy": "dify", "window": 0}, OUTSIDE_WINDOW, "outside Dify's 500-row cap"),
        ({"strategy": "dify", "window": -1}, OUTSIDE_WINDOW, "outside Dify's 500-row cap"),
        ({"strategy": "dify"}, OUTSIDE_WINDOW, "outside Dify's 500-row cap"),
        ({"strategy": "dify", "window": -1, "fidelity": "documented"}, OUTSIDE_WINDOW, "outside Dify's 500-turn cap"),
        ({"strategy": "dify", "budget": 40}, OVER_BUDGET, "token budget 40: oldest pruned"),
        ({"strategy": "window", "window": 6}, OUTSIDE_WINDOW, "outside window of 6 messages"),
        ({"strategy": "window"}, OUTSIDE_WINDOW, "outside window of 10 messages"),
        (
            {"strategy": "window"},
            TRIMMED_EARLIER,
            "removed permanently from the window memory's store in an earlier turn",
        ),
        (
            {"strategy": "summary_buffer", "max_history_tokens": 80},
            SUMMARIZED,
            "folded into the running summary (buffer over 80 tokens)",
        ),
        ({"strategy": "summary_buffer"}, SUMMARIZED, "folded into the running summary (buffer over 2,000 tokens)"),
        (
            {"strategy": "compaction"},
            SUMMARIZED,
            "folded into the compaction summary (the prompt was over the compaction target)",
        ),
        ({"strategy": "compaction"}, CLEARED, "content replaced by a placeholder, which is still sent"),
        (
            {"strategy": "trim", "max_history_tokens": 30},
            OVER_BUDGET,
            "over trim_messages max_tokens (30 tokens): oldest dropped",
        ),
        (
            {"strategy": "trim", "trim_strategy": "first", "trim_counter": "messages"},
            OVER_BUDGET,
            "over trim_messages max_tokens (2,000 messages): newest dropped",
        ),
        (
            {"strategy": "trim", "start_on": "human"},
            OUTSIDE_WINDOW,
            "dropped so the kept part starts on a human message",
        ),
        ({"strategy": "trim", "end_on": "ai"}, OUTSIDE_WINDOW, "dropped so the kept part ends on a ai message"),
        ({"strategy": "trim"}, OUTSIDE_WINDOW, "dropped by trim_messages"),
        ({"strategy": "trim"}, EMPTY, "empty message, dropped before the call"),
        ({"strategy": "dify_agent", "budget": 91}, OVER_BUDGET, "token budget 91: older turns pruned whole"),
        ({"strategy": "dify_agent"}, OVER_BUDGET, "token budget: older turns pruned whole"),
        (
            {"strategy": "dify_agent"},
            EMPTY,
            "empty answer of a run with no agent step: Dify's agent history leaves it out",
        ),
        (
            {"strategy": "dify_agent"},
            REWRITTEN,
            "sent inside its turn's ReAct scratchpad (one assistant text: the first "
            "step's words, the last tool call and the last tool result), not as a "
            "message of its own",
        ),
        (
            {"strategy": "dify_agent"},
            OMITTED,
            "left out of its turn's ReAct scratchpad, which keeps only the first step's "
            "words, the last tool call and the last tool result: its words are never "
            "sent again",
        ),
        ({"strategy": "buffer"}, OUTSIDE_WINDOW, "outside the memory's window"),
        ({"strategy": "buffer", "budget": 7}, OVER_BUDGET, "token budget 7: oldest pruned"),
        ({"strategy": "buffer"}, OVER_BUDGET, "token budget: oldest pruned"),
        ({"strategy": "buffer"}, SUMMARIZED, "folded into a summary"),
        ({"strategy": "buffer"}, REWRITTEN, "sent rewritten, inside a message that stands for it"),
        ({"strategy": "buffer"}, OMITTED, "left out of the message sent in its place: its words are never sent again"),
        ({"strategy": "buffer"}, KEPT, "sent to the model"),
        ({"strategy": "buffer"}, OTHER_BRANCH, "on another branch (regenerated or edited): not this turn's history"),
        (
            {"strategy": "buffer"},
            GRANULARITY,
            "intermediate message (tool call, tool result or reasoning); query_answer keeps only query and answer",
        ),
        ({"strategy": "buffer", "scope": "call"}, SCOPE, "scope 'call': every call starts with an empty memory"),
        ({"strategy": "buffer", "scope": "session"}, SCOPE, "scope 'session': memory lives for one run only"),
        ({"strategy": "buffer"}, SCOPE, "no chat thread: memory lives for one run only"),
        ({"strategy": OFF}, MEMORY_OFF, "memory is off for this node"),
        ({"strategy": "buffer"}, "a_reason_of_tomorrow", "a_reason_of_tomorrow"),
    ],
)
def test_each_reason_is_said_in_the_systems_words_or_the_shared_ones(config, reason, words):
    assert explain(entry(reason), config) == words


@pytest.mark.parametrize(
    "config, reason, words",
    [
        ({"strategy": "dify", "window": 4}, OUTSIDE_WINDOW, "outside window of 4"),
        ({"strategy": "dify", "window": 4, "fidelity": "documented"}, OUTSIDE_WINDOW, "outside window of 4 turns"),
        ({"strategy": "dify", "window": 501}, OUTSIDE_WINDOW, "past Dify's 500-row cap"),
        ({"strategy": "dify", "window": 0, "fidelity": "documented"}, OUTSIDE_WINDOW, "past Dify's 500-turn cap"),
        ({"strategy": "dify"}, OUTSIDE_WINDOW, "past Dify's 500-row cap"),
        ({"strategy": "dify", "budget": 2000}, OVER_BUDGET, "over token budget 2,000"),
        ({"strategy": "dify"}, OVER_BUDGET, "over token budget"),
        ({"strategy": "window", "window": 6}, OUTSIDE_WINDOW, "outside window of 6 messages"),
        ({"strategy": "window"}, OUTSIDE_WINDOW, "outside window of 10 messages"),
        ({"strategy": "trim", "max_history_tokens": 30}, OVER_BUDGET, "over max_tokens 30"),
        (
            {"strategy": "trim", "max_history_tokens": 8, "trim_counter": "messages"},
            OVER_BUDGET,
            "over max_tokens 8 messages",
        ),
        ({"strategy": "buffer"}, OUTSIDE_WINDOW, "outside window"),
        ({"strategy": "buffer"}, OTHER_BRANCH, "on another branch"),
        ({"strategy": "dify_agent"}, REWRITTEN, "sent in its turn's scratchpad"),
        ({"strategy": "dify_agent"}, OMITTED, "left out of its turn's scratchpad"),
        ({"strategy": "buffer"}, REWRITTEN, "rewritten"),
        ({"strategy": "dify", "window": 4, "observed": True}, OUTSIDE_WINDOW, "not in the payload"),
        ({"strategy": "buffer"}, "a_reason_of_tomorrow", "a reason of tomorrow"),
    ],
)
def test_each_reason_has_short_words_for_markers_and_tables(config, reason, words):
    assert reason_words(reason, config) == words


def test_the_node_whose_memory_is_off_is_named():
    assert explain(entry(MEMORY_OFF), {"strategy": OFF}, "Responder") == "memory off for Responder"


@pytest.mark.parametrize(
    "config, words",
    [
        ({"strategy": "dify"}, "Dify 1.x as shipped · plugin token counting off"),
        ({"strategy": "dify", "plugin_token_counting": True}, "Dify 1.x as shipped · plugin token counting on"),
        ({"strategy": "dify", "fidelity": "documented", "plugin_token_counting": True}, "as Dify's docs describe"),
        (
            {"strategy": "dify", "window": 900},
            "Dify 1.x as shipped · plugin token counting off · window 900 runs as "
            "500: Dify caps the rows it fetches at 500",
        ),
        (
            {"strategy": "dify", "fidelity": "documented", "window": -2},
            "as Dify's docs describe · window -2 runs as 500: Dify reads a size of 0 or less as no limit (500 rows)",
        ),
        ({"strategy": "dify", "fidelity": "somebody's"}, "somebody's"),
        ({"strategy": "window", "window": 3}, ""),
        ({"strategy": "dify_agent", "plugin_token_counting": True}, ""),
    ],
)
def test_the_rules_a_config_ran_under_beyond_its_label(config, words):
    assert strategy_of(config).describe(config) == words


def test_what_each_systems_pruning_means_in_a_finding():
    dify = strategy_of({})
    detail, silent = dify.pruning_words({"strategy": "dify"})
    assert silent and detail == (
        "Dify pops the oldest message while the history is over its budget (Dify 1.x, with "
        "plugin token counting on: context size − max_tokens − 3; as its docs describe: − the "
        "prompt) and nothing in the run says so. Raise the context size or lower max_tokens, "
        "or narrow the window so what is dropped is a choice."
    )
    assert (
        "− 3; as its docs describe: − the prompt before the history)"
        in dify.pruning_words({"query_after_budget": True})[0]
    )
    assert "context size − max_tokens − the prompt) and" in dify.pruning_words({"prompt_reserve": 0})[0]
    assert "context size − max_tokens − the prompt − 1,000) and" in dify.pruning_words({"prompt_reserve": 1000})[0]
    assert dify.pruning_words({"history_budget": 2000}) == (
        "Dify pops the oldest message while the history is over its budget (with plugin token counting on: a fixed "
        "2,000 tokens, the memory's default, since the node passes it no limit — whatever the model's context) and "
        "nothing in the run says so. Narrow the window so what is dropped is a choice.",
        True,
    )
    agent = STRATEGIES["dify_agent"]
    detail, silent = agent.pruning_words({"strategy": "dify_agent"})
    assert silent and detail == (
        "Dify's Agent app drops the oldest whole turns — their tool calls and results too — "
        "while the system message and the history are over its budget (with plugin token "
        "counting on: context size − max_tokens − the query) and nothing in the run says so. "
        "Raise the context size or lower max_tokens, or keep tool results short."
    )
    assert (
        "while the history is over its budget (with plugin token counting on: context size − max_tokens − the "
        "system message and the query) and" in agent.pruning_words({"agent_strategy": "react"})[0]
    )
    assert STRATEGIES["trim"].pruning_words({}) == (
        "trim_messages drops what does not fit its max_tokens; check that nothing needed goes first.",
        False,
    )
    assert STRATEGIES["buffer"].pruning_words({}) == (
        "The oldest messages are dropped while the history is over its token budget, and nothing in the run says so. "
        "Raise the context size or lower max_tokens.",
        True,
    )


def test_the_findings_each_system_names():
    assert MemoryConfig().system.finding_kinds(MemoryConfig()) == ("window_zero", "docs_vs_code")
    assert MemoryConfig("window").system.finding_kinds(MemoryConfig("window")) == ("trimmed_window",)
    compaction = STRATEGIES["compaction"]
    assert compaction.finding_kinds(MemoryConfig("compaction")) == ("compaction",)
    assert compaction.finding_kinds(MemoryConfig("compaction", compaction_profile="exact")) == ()
    assert [name for name, s in STRATEGIES.items() if s.finding_kinds(MemoryConfig(name))] == [
        "dify",
        "window",
        "compaction",
        "llamaindex_buffer",
        "llamaindex_memory",
        "openai_agents",
        "langgraph_trim",
        "langmem_summary",
        "n8n_window",
        "n8n_agent",
        "flowise_agentflow",
    ]
    assert all(
        STRATEGIES[name].finding_kinds(MemoryConfig(name)) == ("platform_rule",)
        for name in ("llamaindex_buffer", "llamaindex_memory", "openai_agents", "langgraph_trim", "langmem_summary")
    )
    assert STRATEGIES["n8n_agent"].finding_kinds(MemoryConfig("n8n_agent")) == (
        "unsaved_turn",
        "fewer_exchanges",
        "no_history",
    )


def test_what_a_system_answers_for_the_runtime_and_the_debugger():
    code, docs = MemoryConfig(window=3), MemoryConfig(window=3, fidelity="documented")
    assert code.system.has_profiles and code.system.profiles(docs) == (code, docs)
    assert [n for n, s in STRATEGIES.items() if s.has_profiles] == ["dify"]
    assert all(s.profiles(MemoryConfig(n)) is None for n, s in STRATEGIES.items() if not s.has_profiles)
    assert code.system.later_turns_take_rows(code) and not code.system.later_turns_take_rows(docs)
    assert not any(s.later_turns_take_rows(MemoryConfig(n)) for n, s in STRATEGIES.items() if n != "dify")
    compaction = STRATEGIES["compaction"]
    assert compaction.compacts_per_request(MemoryConfig("compaction"))
    assert not compaction.compacts_per_request(MemoryConfig("compaction", compaction_profile="exact"))
    assert not any(s.compacts_per_request(MemoryConfig(n)) for n, s in STRATEGIES.items() if n != "compaction")
    assert [n for n, s in STRATEGIES.items() if not s.remembers] == [OFF] and DEFAULT_STRATEGY == "dify"


def test_a_conversation_is_claimed_by_the_memory_its_platform_remembers_with():
    agent_log = Conversation(id="a", turns=[replace(linear(1).turns[0], meta={AGENT_THOUGHTS: 1})])
    whole_thread = Conversation(id="c", turns=linear(2).turns, source_format="claude-code")
    plain = linear(2)
    assert STRATEGIES["dify_agent"].claims(agent_log) == {} and STRATEGIES["dify_agent"].claims(plain) is None
    assert STRATEGIES["buffer"].claims(whole_thread) == {"granularity": "all_messages"}
    assert STRATEGIES["buffer"].claims(plain) is None
    assert all(s.claims(plain) is None for s in STRATEGIES.values())


def test_dify_memories_share_the_token_counting_switch_each_with_its_own_words():
    dify, agent = (
        STRATEGIES["dify"].setting("plugin_token_counting"),
        STRATEGIES["dify_agent"].setting("plugin_token_counting"),
    )
    assert dify is PLUGIN_TOKEN_COUNTING and (dify.flag, dify.widget.key, dify.widget.label) == (
        "--plugin-token-counting",
        "counting",
        "Plugin token counting",
    )
    assert (agent.flag, agent.widget.key, agent.widget.label, agent.default) == (
        "--plugin-token-counting",
        "counting",
        "Plugin token counting",
        False,
    )
    assert dify.widget.enabled_if == ("fidelity", "code") and agent.widget.enabled_if is None
    assert "context size − max_tokens − 3" in dify.widget.help and "keep whole turns" in agent.widget.help
    assert STRATEGIES["dify"].setting("nothing") is None
