"""The ``dify_agent`` strategy with ``agent_strategy="react"``: the history a Dify Agent app's ReAct
(chain-of-thought, chat model) runner sends.

The oracle below follows the runner step by step, as plainly as it reads:

1. the function-calling history of the thread's earlier turns (each turn's query, then its assistant
   and tool messages; a turn with no agent thoughts and an empty answer gives its query only);
2. ``_organize_historic_prompt_messages``: the assistant and tool messages of each round (the ones
   between two user messages) fold into one scratchpad — the round's first assistant text is its
   thought and response, its last parseable tool call its action, its last tool result its
   observation — sent as one assistant message (``_format_assistant_message``);
3. ``AgentHistoryPromptTransform.get_prompt``: the whole list when it fits the limit (context size −
   max_tokens − the system message and the query counted as a list), else rounds walked newest
   first, the list recounted at each user message and the round that overflows dropped.

Counts are the OpenAI plugin's: each message 3 + role + content, a list +3; with plugin token
counting off every count is 0 and nothing is pruned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from core.memory.config import MemoryConfig
from core.memory.entries import history_of
from core.memory.replay import Replay
from core.model.conversation import (
    AGENT_THOUGHTS,
    ANSWER,
    INTERMEDIATE,
    QUERY,
    TOOL_CALL,
    TOOL_RESULT,
    Conversation,
    Message,
    ToolCall,
    Turn,
)
from core.model.tokens import REPLY_PRIMING, model_facts
from tests.memory.test_dify_agent import COUNTER, agent_conversation, thread_of

MODEL = "gpt-4o-mini"
NO_TEXT = "I am thinking about how to help you"  # the thought of a step that had no text


# --- the oracle -------------------------------------------------------------------------------------------------


@dataclass
class Pad:
    """One round's scratchpad: what the runner remembers of an earlier turn's steps."""

    response: str
    thought: str
    action: tuple[str, dict | str] | None = None
    action_str: str = ""
    observation: str | None = None

    def final(self) -> bool:
        if self.action is None:
            return True
        name = self.action[0].lower()
        return "final" in name and "answer" in name

    def text(self) -> str:
        if self.final():
            return f"Final Answer: {self.response}"
        out = f"Thought: {self.thought}\n\n"
        if self.action_str:
            out += f"Action: {self.action_str}\n\n"
        if self.observation:
            out += f"Observation: {self.observation}\n\n"
        return out


def function_calling_history(conv: Conversation, position: int) -> list[Message]:
    """Step 1: the earlier turns of the thread as the function-calling runner lists them."""
    out = []
    for p in thread_of(conv, position):
        turn = conv.turns[p]
        no_thoughts = not turn.meta.get(AGENT_THOUGHTS) and {m.kind for m in turn.messages} <= {QUERY, ANSWER}
        for m, msg in enumerate(turn.messages):
            if no_thoughts and m == turn.answer_index and msg.content == "":
                continue  # `if message.answer:` in organize_agent_history
            out.append(msg)
    return out


def parsed_action(call: ToolCall) -> tuple[str, dict | str] | None:
    """A tool call as a scratchpad action, or None when pydantic would refuse it (``Union[dict, str]``)."""
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return None
    if isinstance(value, dict) or isinstance(value, str):
        return call.name, value
    return None


def scratchpad_history(messages: list[Message]) -> list[tuple[str, str]]:
    """Step 2: each round's assistant and tool messages folded into one assistant message."""
    result: list[tuple[str, str]] = []
    pads: list[Pad] = []
    current: Pad | None = None
    for msg in messages:
        if msg.role == "assistant":
            if current is None:
                current = Pad(response=msg.content, thought=msg.content or NO_TEXT)
                pads.append(current)
            if msg.tool_calls:
                action = parsed_action(msg.tool_calls[0])
                if action is not None:  # a call that does not parse leaves the earlier action
                    current.action = action
                    current.action_str = json.dumps({"action": action[0], "action_input": action[1]})
        elif msg.role == "tool":
            if current is not None:
                current.observation = msg.content
        elif msg.role == "user":
            if pads:
                result.append(("assistant", "".join(p.text() for p in pads)))
                pads, current = [], None
            result.append(("user", msg.content))
    if pads:
        result.append(("assistant", "".join(p.text() for p in pads)))
    return result


def message_tokens(role: str, content: str) -> int:
    return COUNTER.message(Message(role, content, "", ""))


def react_history(
    conv: Conversation,
    position: int,
    *,
    plugin_token_counting: bool = False,
    context_size: int | None = None,
    max_tokens: int = 0,
) -> tuple[list[tuple[str, str]], int]:
    """What the ReAct runner sends as history for the turn at ``position``, and its tokens."""
    result = scratchpad_history(function_calling_history(conv, position))

    def count(msgs):  # the plugin's count of a list; 0 with plugin token counting off
        if not plugin_token_counting:
            return 0
        return sum(message_tokens(role, content) for role, content in msgs) + REPLY_PRIMING

    # Step 3: the limit leaves room for the system message and the query, counted as one list.
    prompt = [("system", conv.system_prompt)] if conv.system_prompt else []
    prompt.append(("user", conv.turns[position].query))
    context = context_size or model_facts(MODEL).context_size
    limit = max(context - max_tokens - count(prompt), 0)
    if count(result) <= limit:
        sent = result
    else:
        walked: list[tuple[str, str]] = []
        since_user = 0
        for msg in reversed(result):
            walked.append(msg)
            since_user += 1
            if msg[0] == "user":
                if count(walked) > limit:
                    walked = walked[:-since_user]
                    break
                since_user = 0
        sent = list(reversed(walked))
    return sent, sum(message_tokens(role, content) for role, content in sent)


# --- hand-built runs --------------------------------------------------------------------------------------------


def run(tid: str, parent: str | None, query: str, steps=(), final: str = "") -> Turn:
    """A logged agent run: the query, each tool step ``(text, [(tool, arguments, result), ...])`` as one
    assistant message with its calls followed by one tool message per call, then the final answer."""
    messages = [Message("user", query, QUERY, f"{tid}:query")]
    for s, (text, calls) in enumerate(steps, 1):
        tool_calls = tuple(ToolCall(f"{tid}.{s}.{j}", name, args) for j, (name, args, _) in enumerate(calls, 1))
        messages.append(Message("assistant", text, TOOL_CALL, f"{tid}:thought{s}", tool_calls=tool_calls))
        for j, ((_, _, result), call) in enumerate(zip(calls, tool_calls), 1):
            messages.append(Message("tool", result, TOOL_RESULT, f"{tid}:observation{s}.{j}", tool_call_id=call.id))
    messages.append(Message("assistant", final, ANSWER, f"{tid}:answer"))
    return Turn(tid, parent, tuple(messages), answer_index=len(messages) - 1, meta={AGENT_THOUGHTS: len(steps) + 1})


def asking(tid: str, parent: str | None, query: str = "And now?") -> Turn:
    """The turn being answered: its query only."""
    return Turn(tid, parent, (Message("user", query, QUERY, f"{tid}:query"),), answer_index=None)


def two_turns(*steps, final: str = "It shipped.") -> Conversation:
    return Conversation(id="c", turns=[run("1", None, "Where is order 7?", steps, final), asking("2", "1")])


LOOKUP = ("lookup", '{"id": 7}', "shipped")
LOOKUP_ACTION = 'Action: {"action": "lookup", "action_input": {"id": 7}}\n\n'
ASKED = ("user", "Where is order 7?")


def _cases() -> dict[str, tuple[Conversation, list[tuple[str, str]]]]:
    no_thoughts = Turn(
        "2",
        "1",
        (Message("user", "Thanks!", QUERY, "2:query"), Message("assistant", "", ANSWER, "2:answer")),
        answer_index=1,
    )
    # Pydantic takes a dict or a str as the action's input: any other JSON value, or no JSON, is no action.
    refused = {
        f"arguments {args} make no action": (
            two_turns(("Let me look.", [("lookup", args, "row")])),
            [ASKED, ("assistant", "Final Answer: Let me look.")],
        )
        for args in ("7", "2.5", "null", "true", "not json", "")
    }
    return {
        **refused,
        "a tool step: thought, action and observation; the final answer is not sent": (
            two_turns(("Let me check.", [LOOKUP])),
            [ASKED, ("assistant", "Thought: Let me check.\n\n" + LOOKUP_ACTION + "Observation: shipped\n\n")],
        ),
        "an answer with no step is the final answer": (
            Conversation(id="c", turns=[run("1", None, "Hi, I'm Dana.", final="Hi Dana."), asking("2", "1")]),
            [("user", "Hi, I'm Dana."), ("assistant", "Final Answer: Hi Dana.")],
        ),
        "a first step with no text thinks about how to help": (
            two_turns(("", [LOOKUP])),
            [ASKED, ("assistant", f"Thought: {NO_TEXT}\n\n" + LOOKUP_ACTION + "Observation: shipped\n\n")],
        ),
        "two tool steps: the first step's text, the second step's call, the last result": (
            two_turns(
                ("Let me check.", [LOOKUP]),
                ("Now the carrier.", [("track", '{"order": 7, "by": "DHL"}', "in Leipzig")]),
                final="In Leipzig.",
            ),
            [
                ASKED,
                (
                    "assistant",
                    'Thought: Let me check.\n\nAction: {"action": "track", "action_input": {"order": 7, '
                    '"by": "DHL"}}\n\nObservation: in Leipzig\n\n',
                ),
            ],
        ),
        "two calls in one step: the first call, the last result": (
            two_turns(("Both.", [LOOKUP, ("weather", '{"city": "Leipzig"}', "rain")])),
            [ASKED, ("assistant", "Thought: Both.\n\n" + LOOKUP_ACTION + "Observation: rain\n\n")],
        ),
        "arguments are dumped again with json's defaults (ASCII escapes, spaces)": (
            two_turns(("", [("weather", '{"city":"Zürich","days":[1,2]}', "sunny")])),
            [
                ASKED,
                (
                    "assistant",
                    f"Thought: {NO_TEXT}\n\n" + 'Action: {"action": "weather", "action_input": '
                    '{"city": "Z\\u00fcrich", "days": [1, 2]}}\n\nObservation: sunny\n\n',
                ),
            ],
        ),
        "arguments that are a JSON string are an action": (
            two_turns(("Let me check.", [("lookup", '"order 7"', "shipped")])),
            [
                ASKED,
                (
                    "assistant",
                    'Thought: Let me check.\n\nAction: {"action": "lookup", "action_input": "order 7"}'
                    "\n\nObservation: shipped\n\n",
                ),
            ],
        ),
        "arguments that are a JSON list make no action: the final answer is the first text": (
            two_turns(("Let me look.", [("lookup", "[7, 8]", "two rows")]), final="Both shipped."),
            [ASKED, ("assistant", "Final Answer: Let me look.")],
        ),
        "a later call that does not parse keeps the earlier action, the observation is the last result": (
            two_turns(("Let me check.", [LOOKUP]), ("And 8.", [("lookup", "[8]", "pending")])),
            [ASKED, ("assistant", "Thought: Let me check.\n\n" + LOOKUP_ACTION + "Observation: pending\n\n")],
        ),
        "a tool named Final Answer as the last call makes the scratchpad final": (
            two_turns(("Let me check.", [LOOKUP]), ("Done.", [("Final Answer", '{"text": "It shipped."}', "")])),
            [ASKED, ("assistant", "Final Answer: Let me check.")],
        ),
        "an empty tool result is no observation": (
            two_turns(("Let me check.", [("lookup", '{"id": 7}', "")])),
            [ASKED, ("assistant", "Thought: Let me check.\n\n" + LOOKUP_ACTION)],
        ),
        "rounds: an empty answer of a turn with no thoughts is left out, an empty final thought is not": (
            Conversation(
                id="c",
                turns=[
                    run("1", None, "Hi, I'm Dana.", final="Hi Dana."),
                    no_thoughts,
                    run("3", "2", "Bye.", final=""),
                    asking("4", "3"),
                ],
            ),
            [
                ("user", "Hi, I'm Dana."),
                ("assistant", "Final Answer: Hi Dana."),
                ("user", "Thanks!"),
                ("user", "Bye."),
                ("assistant", "Final Answer: "),
            ],
        ),
    }


CASES = _cases()


def react_config(**settings) -> MemoryConfig:
    return MemoryConfig(strategy="dify_agent", agent_strategy="react", model=MODEL, **settings)


def sent_by_strategy(conv: Conversation, position: int, **settings):
    replay = Replay(conv, react_config(**settings))
    ledger = replay.ledger(replay.numbers[position])
    return [(m.role, m.content) for m in history_of(conv, ledger)], ledger


@pytest.mark.parametrize("case", CASES)
def test_the_oracle_writes_each_hand_built_run_as_expected(case):
    conv, expected = CASES[case]
    assert react_history(conv, len(conv.turns) - 1)[0] == expected


@pytest.mark.parametrize("case", CASES)
def test_the_strategy_sends_each_hand_built_run_as_the_react_runner_does(case):
    conv, expected = CASES[case]
    assert sent_by_strategy(conv, len(conv.turns) - 1)[0] == expected


def test_the_ledger_says_which_messages_the_scratchpad_rewrote_and_which_it_left_out():
    conv, expected = CASES["a tool step: thought, action and observation; the final answer is not sent"]
    sent, ledger = sent_by_strategy(conv, 1)
    assert sent == expected
    assert {e.ref: e.reason for e in ledger.entries} == {
        "1:query": "kept",
        "1:thought1": "rewritten",
        "1:observation1.1": "rewritten",
        "1:answer": "omitted",
    }
    assert [s.origin for s in ledger.synthetic] == ["scratchpad"]


# --- the budget -------------------------------------------------------------------------------------------------


def answered(n: int, system: str = "You are a shop's agent.") -> Conversation:
    """``n`` answered turns of the same size, then a turn asking."""
    turns = [run(str(i), str(i - 1) if i > 1 else None, f"question {i}", final="word " * 20) for i in range(1, n + 1)]
    return Conversation(id="c", turns=[*turns, asking(str(n + 1), str(n))], system_prompt=system)


def test_the_oracle_keeps_the_newest_rounds_that_fit_with_the_system_message_and_query_counted_apart():
    conv = answered(4)
    rounds = [[("user", f"question {i}"), ("assistant", "Final Answer: " + "word " * 20)] for i in range(1, 5)]
    per_round = sum(message_tokens(*m) for m in rounds[0])
    prompt = message_tokens("system", conv.system_prompt) + message_tokens("user", "And now?") + REPLY_PRIMING
    # Room for two rounds and the list's +3: rounds 3 and 4; one token less: round 4 alone; none: nothing.
    for room, kept in (
        (2 * per_round + REPLY_PRIMING, rounds[2] + rounds[3]),
        (2 * per_round + REPLY_PRIMING - 1, rounds[3]),
        (per_round + REPLY_PRIMING - 1, []),
    ):
        context = room + prompt + 300
        sent, tokens = react_history(conv, 4, plugin_token_counting=True, context_size=context, max_tokens=300)
        assert sent == kept
        assert tokens == sum(message_tokens(*m) for m in kept)
    # Everything fits: all of it, counted without the list's +3.
    whole = sum(rounds, [])
    assert react_history(conv, 4, plugin_token_counting=True, context_size=10_000) == (whole, 4 * per_round)
    # Counting off: everything, whatever the context.
    assert react_history(conv, 4, context_size=10, max_tokens=300)[0] == whole
    # No system prompt: nothing of it is counted, so the room is the system message's larger.
    bare = answered(4, system="")
    room = 2 * per_round + REPLY_PRIMING + message_tokens("system", conv.system_prompt) - 1
    assert (
        react_history(bare, 4, plugin_token_counting=True, context_size=room + prompt, max_tokens=0)[0]
        == rounds[2] + rounds[3]
    )


def test_the_strategy_keeps_the_newest_rounds_that_fit():
    conv = answered(4)
    for context in (400, 300, 250, 200, 150):
        settings = dict(plugin_token_counting=True, context_size=context, max_tokens=50)
        assert sent_by_strategy(conv, 4, **settings)[0] == react_history(conv, 4, **settings)[0], context


# --- random branched agent conversations ------------------------------------------------------------------------

SETTINGS = {
    "counting off": {},
    "counting on, room for everything": dict(plugin_token_counting=True, context_size=128_000),
    "counting on, 700 context, 200 max_tokens": dict(plugin_token_counting=True, context_size=700, max_tokens=200),
    "counting on, 1500 context, 300 max_tokens": dict(plugin_token_counting=True, context_size=1500, max_tokens=300),
    # Room for about one round: the newest round is often too long on its own, and then nothing is sent.
    "counting on, 300 context, 200 max_tokens": dict(plugin_token_counting=True, context_size=300, max_tokens=200),
}
PRUNING = [s for s in SETTINGS if "max_tokens" in SETTINGS[s]]
SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("setting", SETTINGS)
def test_every_turn_sends_what_the_react_runner_sends(seed, setting):
    settings = SETTINGS[setting]
    conv = agent_conversation(40, seed)
    replay = Replay(conv, react_config(**settings))
    for position, turn in enumerate(conv.turns):
        if turn.query_index is None:
            continue
        ledger = replay.ledger(replay.numbers[position])
        expected, tokens = react_history(conv, position, **settings)
        assert [(m.role, m.content) for m in history_of(conv, ledger)] == expected, (setting, position)
        assert ledger.history_tokens == tokens, (setting, position)


def test_the_random_conversations_meet_every_part_of_a_scratchpad_and_of_the_budget():
    """The comparison above is only as strong as its cases: together they hold every kind of
    scratchpad, prune with the small contexts (some turns keep part of their thread, some none of it)
    and prune nothing with room for everything."""
    seen = set()
    for seed in SEEDS:
        conv = agent_conversation(40, seed)
        for position in range(len(conv.turns)):
            whole, _ = react_history(conv, position)
            assert react_history(conv, position, **SETTINGS["counting on, room for everything"])[0] == whole
            for content in (c for role, c in whole if role == "assistant"):
                seen |= {
                    part
                    for part in (
                        "Final Answer: ",
                        "Thought: Let me check.",
                        f"Thought: {NO_TEXT}",
                        "Action: ",
                        "Observation: ",
                    )
                    if part in content
                }
                if content == "Final Answer: ":
                    seen.add("empty final answer")
            roles = [role for role, _ in whole] + ["user"]
            if any(a == b == "user" for a, b in zip(roles, roles[1:])):
                seen.add("a query with nothing after it")
            for setting in PRUNING:
                sent, _ = react_history(conv, position, **SETTINGS[setting])
                if len(sent) < len(whole):
                    seen.add(f"{setting}: pruned to nothing" if not sent else f"{setting}: pruned")
    assert seen == {
        "Final Answer: ",
        "Thought: Let me check.",
        f"Thought: {NO_TEXT}",
        "Action: ",
        "Observation: ",
        "empty final answer",
        "a query with nothing after it",
        *(f"{s}: pruned" for s in PRUNING),
        "counting on, 300 context, 200 max_tokens: pruned to nothing",
    }


# --- the reasons of a later step, the stand-in, the setting ---------------------------------------------------


def test_a_later_steps_text_is_omitted_even_when_its_call_is_the_action_and_a_textless_one_is_rewritten():
    """A message is ``rewritten`` only when its words are in the scratchpad (or it has none and its call
    is the action): what "Where did it go?" counts as still sent."""
    track = ("track", '{"order": 7}', "in Leipzig")
    for text, reason in (("Now the carrier.", "omitted"), ("", "rewritten")):
        conv = two_turns(("Let me check.", [LOOKUP]), (text, [track]), final="In Leipzig.")
        ledger = sent_by_strategy(conv, 1)[1]
        assert [(e.ref, e.reason) for e in ledger.entries] == [
            ("1:query", "kept"),
            ("1:thought1", "rewritten"),
            ("1:observation1.1", "omitted"),
            ("1:thought2", reason),
            ("1:observation2.1", "rewritten"),
            ("1:answer", "omitted"),
        ]


def test_the_scratchpad_stands_in_for_the_first_step_as_a_plain_assistant_text():
    conv = two_turns(("Let me check.", [LOOKUP]))
    replay = Replay(conv, react_config(plugin_token_counting=True, context_size=4000))
    ledger = replay.ledger(2)
    (pad,) = ledger.synthetic
    assert (pad.origin, pad.ref, pad.turn, pad.covers, pad.replaces) == (
        "scratchpad",
        "scratchpad:1:thought1",
        1,
        (1,),
        (0, 1),
    )
    assert pad.tokens == COUNTER.message(Message("assistant", pad.content, "", ""))
    # Sent in place of the step, without its tool calls; the ledger's rows put it right after that step.
    sent = history_of(conv, ledger)
    assert [(m.role, m.kind, m.tool_calls, m.ref) for m in sent] == [
        ("user", "query", (), "1:query"),
        ("assistant", "tool_call", (), "1:thought1"),
    ]
    assert sent[1].content == pad.content
    rows = ledger.rows()
    assert rows[rows.index(ledger.entries[1]) + 1] is pad
    # The summary counts the queries as kept as they are and the scratchpad in the history's tokens.
    summary = replay.summaries()[1]
    assert (summary.kept, summary.dropped, summary.history_tokens) == (1, 3, ledger.history_tokens)
    assert ledger.history_tokens == ledger.entries[0].tokens + pad.tokens


def test_the_setting_is_stored_only_when_it_is_react_and_refused_when_unknown():
    from core.memory.errors import ConfigError

    assert "agent_strategy" not in MemoryConfig(strategy="dify_agent").to_dict()
    config = react_config(plugin_token_counting=True)
    assert MemoryConfig.from_dict(config.to_dict()) == config
    assert config.label() == "dify agent app (ReAct) + token counting"
    assert MemoryConfig(strategy="dify_agent").label() == "dify agent app"
    with pytest.raises(ConfigError, match="^unknown agent strategy 'cot'; expected function_call or react$"):
        MemoryConfig(strategy="dify_agent", agent_strategy="cot").validate()


def test_the_budget_note_says_what_the_react_runner_counts():
    conv = two_turns(("Let me check.", [LOOKUP]))
    conv.system_prompt = "You track orders."
    ledger = Replay(conv, react_config(plugin_token_counting=True, context_size=900, max_tokens=100)).ledger(2)
    prompt = (
        COUNTER.message(Message("system", conv.system_prompt, "", ""))
        + COUNTER.message(conv.turns[1].messages[0])
        + REPLY_PRIMING
    )
    assert ledger.budget == 900 - 100 - prompt
    assert ledger.budget_note == (
        f"900 context − 100 max_tokens − {prompt} system message and query (counted as a "
        f"list); the history is counted as a list (+3) and cut by whole turns, newest first"
    )
    unknown = Replay(conv, react_config(plugin_token_counting=True).with_(model="some/unknown-model")).ledger(2)
    assert (unknown.budget, unknown.budget_note) == (
        2000,
        (
            "context size of some/unknown-model unknown: Dify's default budget of 2,000 tokens; the history is counted as "
            "a list (+3) and cut by whole turns, newest first"
        ),
    )
    # The function-calling runner's note, for contrast: its system message is counted with the history.
    system = COUNTER.message(Message("system", conv.system_prompt, "", ""))
    calling = Replay(
        conv, react_config(plugin_token_counting=True).with_(model="some/unknown-model", agent_strategy="function_call")
    ).ledger(2)
    assert calling.budget_note == (
        f"context size of some/unknown-model unknown: Dify's default budget of 2,000 tokens; the system message "
        f"({system}) and the history are counted as one list (+3) and cut by whole turns, newest first"
    )


def test_the_finding_for_silent_pruning_says_what_a_react_agent_counts():
    from core.analysis.compare import NamedConfig
    from core.analysis.findings import findings_for
    from core.io import read_conversations
    from tests.conftest import ROOT

    [conv] = read_conversations(ROOT / "sample_data" / "conversations" / "shop-agent.json")
    config = react_config(plugin_token_counting=True, context_size=400, max_tokens=256)
    [finding] = findings_for(conv, [NamedConfig(config.label(), config)])
    assert (finding.kind, finding.severity) == ("silent_pruning", "warning")
    assert finding.detail == (
        "Dify's Agent app drops the oldest whole turns — their tool calls and results too — while the history is "
        "over its budget (with plugin token counting on: context size − max_tokens − the system message and the "
        "query) and nothing in the run says so. Raise the context size or lower max_tokens, or keep tool results "
        "short."
    )


def _pad(turn: Turn) -> tuple[list[str], list[tuple[int, str]]]:
    from core.memory.strategies.dify_agent import react_turn

    found = react_turn(turn)
    return list(found.reasons), list(found.pads)


def test_what_only_a_name_makes_final_and_where_an_observation_comes_from():
    """The action's name, not its input, decides "final" (it must hold both words); a call with no result
    after it has no observation; a tool message before any assistant one, and a system message, are
    left out of the scratchpad."""
    checked = ("lookup", '{"q": "the final answer"}', "found")
    turn = run("1", None, "Q", [("Look.", [checked])])
    assert _pad(turn)[1] == [
        (
            1,
            'Thought: Look.\n\nAction: {"action": "lookup", "action_input": {"q": "the final '
            'answer"}}\n\nObservation: found\n\n',
        )
    ]
    for name in ("finalize", "answer_lookup"):
        assert _pad(run("1", None, "Q", [("Look.", [(name, "{}", "ok")])]))[1][0][1].startswith("Thought: Look.")
    assert _pad(run("1", None, "Q", [("Look.", [("Final_Answer", "{}", "ok")])]))[1] == [(1, "Final Answer: Look.")]
    # A call whose result is missing: no observation.
    call = Message("assistant", "Look.", TOOL_CALL, "1:t", tool_calls=(ToolCall("c", "lookup", "{}"),))
    no_result = Turn("1", None, (Message("user", "Q", QUERY, "1:q"), call), answer_index=None)
    assert _pad(no_result) == (
        ["kept", "rewritten"],
        [(1, 'Thought: Look.\n\nAction: {"action": "lookup", "action_input": {}}\n\n')],
    )
    # A tool result before any step, and a system message after one, are not observed.
    early = Message("tool", "early", TOOL_RESULT, "1:early", tool_call_id="x")
    note = Message("system", "a note", "", "1:note")
    odd = Turn("1", None, (Message("user", "Q", QUERY, "1:q"), early, call, note), answer_index=None)
    assert _pad(odd) == (
        ["kept", "omitted", "rewritten", "omitted"],
        [(2, 'Thought: Look.\n\nAction: {"action": "lookup", "action_input": {}}\n\n')],
    )


def test_a_turn_with_no_query_and_a_left_out_answer_under_react():
    """An opening turn with no query is a round of its own (nothing before it to flush); an empty
    answer of a turn with no thoughts is ``empty``; the oldest turn sent is the first one that sends
    something, even when the cut falls on a turn that sends nothing."""
    opener = Turn("0", None, (Message("assistant", "Welcome!", ANSWER, "0:answer"),), query_index=None, answer_index=0)
    assert _pad(opener) == (["rewritten"], [(0, "Final Answer: Welcome!")])
    silent = Turn("0", None, (Message("assistant", "", ANSWER, "0:answer"),), query_index=None, answer_index=0)
    failed = Turn("1", "0", (Message("user", "Hello?", QUERY, "1:query"),), answer_index=None)
    conv = Conversation(
        id="c", turns=[silent, failed, run("2", "1", "Hi, I'm Dana.", final="Hi Dana."), asking("3", "2")]
    )
    replay = Replay(conv, react_config(plugin_token_counting=True, context_size=100_000))
    ledger = replay.ledger(3)
    assert [(e.ref, e.reason) for e in ledger.entries] == [
        ("0:answer", "empty"),
        ("1:query", "kept"),
        ("2:query", "kept"),
        ("2:answer", "rewritten"),
    ]
    assert replay.summaries()[-1].oldest_kept_turn == 1


def _without_some_queries(conv: Conversation, every: int) -> Conversation:
    """The conversation with the query taken out of every ``every``-th turn (the first included): an
    opening turn and turns in the middle of a thread that hold no user message."""
    turns = []
    for p, t in enumerate(conv.turns):
        if p % every or t.answer_index is None:
            turns.append(t)
            continue
        turns.append(
            Turn(t.id, t.parent_id, t.messages[1:], query_index=None, answer_index=t.answer_index - 1, meta=t.meta)
        )
    return Conversation(id=conv.id, turns=turns, system_prompt=conv.system_prompt)


@pytest.mark.parametrize("seed", range(6))
def test_turns_with_no_user_message_go_with_the_round_before_them(seed):
    """Dify checks the count at each user message, so a turn with no query is kept or dropped with the
    round before it, and what comes before the first user message is kept whenever the oldest round
    is (it is never checked). Function calling with such turns anywhere; ReAct with an opening one
    (in the middle of a thread Dify's fold would go on with the round before it, which MemLens does
    not render: a Dify log has a query in every message)."""
    from tests.memory.test_dify_agent import dify_history, sent_refs

    for every, runner in ((4, "function_call"), (1_000, "react")):
        conv = _without_some_queries(agent_conversation(30, seed), every)
        assert conv.turns[0].query_index is None and conv.turns[0].messages
        for context in (300, 500, 800, 1200, 3000):
            settings = dict(plugin_token_counting=True, context_size=context, max_tokens=100)
            replay = Replay(conv, react_config(**settings).with_(agent_strategy=runner))
            for position, turn in enumerate(conv.turns):
                if turn.query_index is None:
                    continue
                ledger = replay.ledger_at(position)
                if runner == "react":
                    expected = react_history(conv, position, **settings)[0]
                    assert [(m.role, m.content) for m in history_of(conv, ledger)] == expected, (context, position)
                else:
                    assert sent_refs(ledger) == dify_history(conv, position, replay.config)[0], (context, position)


def test_a_user_message_that_is_not_its_turns_first_starts_the_round():
    """An opening assistant message in the same turn as the first query (some logs hold both) comes
    before the first user message: never checked, so it is kept with the oldest round even when it
    overflows the budget."""
    from tests.memory.test_dify_agent import dify_history, sent_refs

    first = Turn(
        "1",
        None,
        (
            Message("assistant", "Welcome to the shop! " * 20, INTERMEDIATE, "1:greeting"),
            Message("user", "Hi, I'm Dana.", QUERY, "1:query"),
            Message("assistant", "Hi Dana! " * 10, ANSWER, "1:answer"),
        ),
        query_index=1,
        answer_index=2,
    )
    conv = Conversation(
        id="c", turns=[first, run("2", "1", "Where is order 7?", [("Let me check.", [LOOKUP])]), asking("3", "2")]
    )
    seen = set()
    for context in range(20, 300, 5):
        config = MemoryConfig(strategy="dify_agent", model=MODEL, plugin_token_counting=True, context_size=context)
        expected = dify_history(conv, 2, config)[0]
        assert sent_refs(Replay(conv, config).ledger(3)) == expected, context
        seen.add(len(expected))
    assert seen == {0, 4, 7}  # nothing; the newest turn; both turns, the greeting with them
