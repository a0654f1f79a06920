"""The ``llamaindex_buffer`` and ``llamaindex_memory`` systems' own rules, at their boundaries, and against
LlamaIndex's own classes (llama-index-core, pinned in the test requirements) on generated conversations.

The generated cases of tests/memory/test_platform_memories.py replay the recorded agent workflow; here
the rules are driven directly: ``ChatMemoryBuffer.get()`` over the earlier messages and the question, and
``Memory`` written as the workflow writes it (the question, then the turn's steps), at limits drawn
around the exact counts, with texts whose joins tiktoken pre-tokenizes across the space (newlines, empty
texts, trailing spaces, contractions, a special token).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.utils import get_tokenizer

from core.cli.app import build_parser, config_from_args
from core.io import import_text
from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.memory.strategies import STRATEGIES
from core.memory.strategies.llamaindex_buffer import (
    DEFAULT_CONTEXT_WINDOW,
    llamaindex_content,
    llamaindex_tokens,
    token_limit,
)
from core.memory.strategies.llamaindex_memory import flush_size, manage_queue, memory_tokens
from core.memory.words import explain
from core.model.conversation import REASONING, Message, ToolCall
from core.model.ledger import FLUSHED, KEPT, OUTSIDE_WINDOW, OVER_BUDGET, REASON_LABELS
from core.model.ledger_words import shared_words
from tests.builders import openai
from tests.reference.platform_outcomes import recorded

# -- generated conversations, as MemLens reads them and as LlamaIndex holds them ---------------------------

#: Pieces of text whose joins tiktoken splits differently than alone.
PIECES = [
    "",
    " ",
    "\n",
    "hi",
    "hi ",
    "hi\n",
    "Lisbon",
    "'s",
    "12",
    " 34",
    "<|endoftext|>",
    "a\n\nb",
    "None",
    "sunny in Porto, day 1",
    "  \n",
]
TEXT = st.lists(st.sampled_from(PIECES), max_size=3).map("".join)


@st.composite
def turns(draw, most: int = 5) -> list[dict]:
    """Turns of ``{"input", "rounds": [[(call id, result)], …], "round_texts", "output"}``."""
    out = []
    for t in range(draw(st.integers(1, most))):
        rounds = []
        for r in range(draw(st.integers(0, 2))):
            rounds.append((draw(TEXT), [(f"c{t}_{r}_{p}", draw(TEXT)) for p in range(draw(st.integers(1, 2)))]))
        out.append({"input": draw(TEXT), "rounds": rounds, "output": draw(TEXT)})
    return out


def openai_chat(conversation: list[dict]) -> list[dict]:
    out: list[dict] = []
    for turn in conversation:
        out.append({"role": "user", "content": turn["input"]})
        for text, calls in turn["rounds"]:
            out.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
                        for cid, _ in calls
                    ],
                }
            )
            out.extend({"role": "tool", "tool_call_id": cid, "content": result} for cid, result in calls)
        out.append({"role": "assistant", "content": turn["output"]})
    return out


def llamaindex_chat(conversation: list[dict]) -> list[list]:
    """Each turn's messages as the agent workflow stores them: the question, then its steps."""

    out = []
    for turn in conversation:
        messages = [ChatMessage(role="user", content=turn["input"])]
        for text, calls in turn["rounds"]:
            blocks: list = [TextBlock(text=text)] if text else []
            blocks += [ToolCallBlock(tool_call_id=cid, tool_name="weather", tool_kwargs={}) for cid, _ in calls]
            messages.append(ChatMessage(role="assistant", blocks=blocks))
            messages += [
                ChatMessage(role="tool", content=result, additional_kwargs={"tool_call_id": cid})
                for cid, result in calls
            ]
        messages.append(ChatMessage(role="assistant", content=turn["output"]))
        out.append(messages)
    return out


def kept_per_turn(conversation: list[dict], config: MemoryConfig) -> list[int]:
    """How many earlier messages MemLens sends at each turn; each kept set is checked to be the newest ones."""
    conv = openai(openai_chat(conversation))
    replay = Replay(conv, config)
    out = []
    for position in range(len(conv.turns)):
        reasons = [e.reason for e in replay.ledger_at(position).entries]
        kept = reasons.count(KEPT)
        assert reasons[len(reasons) - kept :] == [KEPT] * kept, reasons
        out.append(kept)
    return out


@pytest.fixture(scope="module", autouse=True)
def offline_tokenizer():
    llamaindex_tokens("points tiktoken at the encodings bundled with litellm")


# -- ChatMemoryBuffer ------------------------------------------------------------------------------------


def buffer_sends(turn_messages: list[list], limit: int) -> list[int]:
    """How many earlier messages ``ChatMemoryBuffer.get()`` returns before each turn's question."""

    out, earlier = [], []
    for messages in turn_messages:
        buffer = ChatMemoryBuffer.from_defaults(chat_history=[*earlier, messages[0]], token_limit=limit)
        out.append(len(buffer.get()) - 1)
        earlier += messages
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=turns(), data=st.data())
def test_the_buffer_sends_what_chat_memory_buffer_gets(conversation, data):
    """At limits around the real count of a suffix of the last turn's buffer (met exactly, one under, one
    over), every turn sends the messages ``get()`` returns."""

    held = [m for messages in llamaindex_chat(conversation) for m in messages]
    start = data.draw(st.integers(0, len(held) - 1))
    probe = ChatMemoryBuffer.from_defaults(token_limit=1)
    limit = max(1, probe._token_count_for_messages(held[start:]) + data.draw(st.sampled_from([-1, 0, 1])))
    config = MemoryConfig("llamaindex_buffer", token_limit=limit)
    assert kept_per_turn(conversation, config) == buffer_sends(llamaindex_chat(conversation), limit)


def _buffer_case(messages: list[dict], limit: int):
    conv = openai(messages)
    replay = Replay(conv, MemoryConfig("llamaindex_buffer", token_limit=limit))
    return replay.ledger_at(len(conv.turns) - 1)


CHAT = [
    {"role": "user", "content": "Where is Porto?"},
    {"role": "assistant", "content": "In Portugal."},
    {"role": "user", "content": "Weather?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "assistant", "content": "Sunny."},
    {"role": "user", "content": "Thanks!"},
]


def _joined(texts: list[str]) -> int:
    return llamaindex_tokens(" ".join(texts))


def test_the_buffer_keeps_everything_when_the_limit_is_met_exactly_and_drops_from_the_front_one_under():
    every = _joined(["Where is Porto?", "In Portugal.", "Weather?", "None", "sunny", "Sunny.", "Thanks!"])
    ledger = _buffer_case(CHAT, every)
    assert [e.reason for e in ledger.entries] == [KEPT] * 6
    # One under: the oldest goes (over_budget), then the answer that would lead (outside_window).
    ledger = _buffer_case(CHAT, every - 1)
    assert [e.reason for e in ledger.entries] == [OVER_BUDGET, OUTSIDE_WINDOW] + [KEPT] * 4
    assert _joined(["Weather?", "None", "sunny", "Sunny.", "Thanks!"]) <= every - 1


def test_the_buffer_drops_a_tool_round_with_its_question_and_never_leads_with_a_result():
    after_round = _joined(["Sunny.", "Thanks!"])
    ledger = _buffer_case(CHAT, _joined(["Weather?", "None", "sunny", "Sunny.", "Thanks!"]) - 1)
    # "Weather?" goes over the limit; the call, its result and the answer would lead: all dropped with it.
    assert [e.reason for e in ledger.entries] == [OVER_BUDGET, OUTSIDE_WINDOW, OVER_BUDGET] + [OUTSIDE_WINDOW] * 3
    assert after_round > 0 and ledger.kept == []


def test_the_buffer_counts_a_tool_call_only_reply_as_the_word_none():
    """A conversation opening with a reply of tool calls: the joined text starts "None", which counts 1 token
    where an empty text would count none."""
    opening = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "user", "content": "Thanks!"},
    ]
    with_none = _joined(["None", "sunny", "Thanks!"])
    assert with_none == _joined(["", "sunny", "Thanks!"]) + 1
    assert [e.reason for e in _buffer_case(opening, with_none).entries] == [KEPT, KEPT]
    assert [e.reason for e in _buffer_case(opening, with_none - 1).entries] == [OVER_BUDGET, OUTSIDE_WINDOW]
    call = Message("assistant", "", "", 0, tool_calls=(ToolCall("c1", "weather", "{}"),))
    assert llamaindex_content(call) == "None" and memory_tokens(call) == 0
    assert llamaindex_content(Message("assistant", "", "", 0)) == ""
    assert llamaindex_content(Message("assistant", "thinking", REASONING, 0)) is None


def test_the_buffer_sends_the_newest_message_alone_when_it_is_over_the_limit():
    ledger = _buffer_case(CHAT, 1)
    assert ledger.kept == [] and {e.reason for e in ledger.entries} == {OVER_BUDGET, OUTSIDE_WINDOW}
    assert "the question alone is over it, and LlamaIndex sends it anyway" in ledger.budget_note
    fits = _buffer_case(CHAT, llamaindex_tokens("Thanks!"))
    assert fits.kept == [] and "alone" not in fits.budget_note


def test_the_buffer_counts_special_tokens_as_llamaindex_s_tokenizer_does():

    text = "stop <|endoftext|> here"
    assert llamaindex_tokens(text) == len(get_tokenizer()(text)) < llamaindex_tokens(text.replace("<|", "< |"))


def test_the_buffer_s_default_limit_is_three_quarters_of_the_context_window():
    assert token_limit(MemoryConfig("llamaindex_buffer", context_window=3900)) == 2925
    assert token_limit(MemoryConfig("llamaindex_buffer", context_window=3900, token_limit=0)) == 2925
    assert token_limit(MemoryConfig("llamaindex_buffer", token_limit=40)) == 40
    assert token_limit(MemoryConfig("llamaindex_buffer", model="gpt-4o-mini")) == 96_000
    assert token_limit(MemoryConfig("llamaindex_buffer", context_size=1000)) == 750
    assert token_limit(MemoryConfig("llamaindex_buffer", model="no-such-model")) == int(DEFAULT_CONTEXT_WINDOW * 0.75)


# -- Memory --------------------------------------------------------------------------------------------


async def _memory_sends(turn_messages: list[list], limit: int, ratio: float, flush: int) -> list[int]:

    memory = Memory.from_defaults(
        session_id="s", token_limit=limit, chat_history_token_ratio=ratio, token_flush_size=flush
    )
    out = []
    try:
        for messages in turn_messages:
            await memory.aput(messages[0])
            out.append(len(await memory.aget()) - 1)
            await memory.aput_messages(messages[1:])
    finally:
        # (Its in-memory SQLite database is closed inside the loop that opened it.)
        await memory.sql_store._async_engine.dispose()
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=turns(6),
    limit=st.integers(1, 120),
    ratio=st.sampled_from([0.3, 0.5, 0.7, 1.0]),
    flush=st.sampled_from([0, 1, 5, 20, 400]),
)
def test_the_memory_sends_what_llamaindex_s_memory_keeps_active(conversation, limit, ratio, flush):
    config = MemoryConfig(
        "llamaindex_memory", token_limit=limit, chat_history_token_ratio=ratio, token_flush_size=flush
    )
    theirs = asyncio.run(_memory_sends(llamaindex_chat(conversation), limit, ratio, flush))
    assert kept_per_turn(conversation, config) == theirs


def test_the_memory_counts_text_and_a_result_s_call_id_as_llamaindex_does():
    memory = Memory.from_defaults(session_id="count")
    result = ChatMessage(role="tool", content="sunny", additional_kwargs={"tool_call_id": "call_1"})
    reply = ChatMessage(
        role="assistant",
        blocks=[TextBlock(text="Let me check."), ToolCallBlock(tool_call_id="c", tool_name="w", tool_kwargs={})],
    )
    assert (
        memory_tokens(Message("tool", "sunny", "", 0, tool_call_id="call_1"))
        == memory._estimate_token_count(result)
        == llamaindex_tokens("sunny") + llamaindex_tokens("{'tool_call_id': 'call_1'}")
    )
    assert memory_tokens(
        Message("assistant", "Let me check.", "", 0, tool_calls=(ToolCall("c", "w", "{}"),))
    ) == memory._estimate_token_count(reply)
    assert memory_tokens(Message("assistant", "a long thought", REASONING, 0)) == 0


def _queue(roles: str, tokens: list[int], limit: float, size: int, lo: int = 0) -> int:
    sums = [0]
    for t in tokens:
        sums.append(sums[-1] + t)
    return manage_queue(lo, len(roles), lambda a, b: sums[b] - sums[a], lambda k: roles[k] == "u", limit, size)


def test_the_memory_flushes_a_chunk_then_until_a_user_message_leads():
    # u a t a | u a | u: 7 messages of 10 tokens over a limit of 45 (25 over): a chunk of 20 (2 messages),
    # then the call's result and answer until the user leads; 30 left, within the limit.
    assert _queue("uataua" + "u", [10] * 7, 45, 20) == 4
    # At the limit exactly nothing goes; one token under, the same chunks go.
    assert _queue("uauau", [10] * 5, 50, 20) == 0
    assert _queue("uauau", [10] * 5, 49, 20) == 2
    # A chunk is at least token_flush_size: a flush of 25 takes three 10-token messages, then the answer.
    assert _queue("uauauau", [10] * 7, 65, 25) == 4
    # Chunk after chunk until the rest fits.
    assert _queue("uauauau", [10] * 7, 25, 10) == 6


def test_the_memory_never_flushes_the_last_message_and_puts_the_newest_turn_back():
    # Only the last message is a user's: everything before it goes, however far over.
    assert _queue("uaaau", [50, 50, 50, 50, 50], 10, 5) == 4
    # Only an answer would be left: it goes too, and the newest whole turn flushed (u a) comes back.
    assert _queue("uaua", [10, 10, 10, 10], 5, 30) == 2
    # With no user message among the flushed, nothing is left at all.
    assert _queue("aaa", [10, 10, 10], 5, 30) == 3
    # A flush size of 0 flushes nothing when a user message already leads; it still goes until one leads.
    assert _queue("uau", [10, 10, 10], 5, 0) == 0
    assert _queue("aau", [10, 10, 10], 5, 0) == 2
    # Within the limit, or one message only: nothing.
    assert _queue("u", [99], 5, 1) == 0 and _queue("", [], 5, 1) == 0


def test_the_memory_resolves_the_flush_size_as_llamaindex_did_in_every_recorded_case():
    for name, outcome in recorded("llamaindex")["outcomes"].items():
        if name.startswith("memory-"):
            limit, ratio, flush = (
                float(part[len(key) :]) for part, key in zip(name.split("-")[2:], ("limit", "ratio", "flush"))
            )
            assert flush_size(int(limit), int(flush)) == outcome["settings"]["token_flush_size"], name
    assert flush_size(150, 400) == 105 and flush_size(100, 100) == 100 and flush_size(100, 0) == 10
    assert flush_size(5, 0) == 0 and flush_size(1, 3) == 0


# -- settings, words, the command line, lenses ------------------------------------------------------------


def test_the_systems_settings_are_declared_and_read_from_the_command_line(tmp_path):
    def config(*sets: str) -> MemoryConfig:
        argv = ["replay", "x.json", "--memory", sets[0]]
        for s in sets[1:]:
            argv += ["--set", s]
        return config_from_args(build_parser().parse_args(argv))

    buffer = config("llamaindex_buffer", "token_limit=40", "context_window=3900")
    assert (buffer.settings.token_limit, buffer.settings.context_window) == (40, 3900)
    memory = config("llamaindex_memory", "token_limit=100", "chat_history_token_ratio=0.5", "token_flush_size=5")
    assert memory.settings == STRATEGIES["llamaindex_memory"].Settings(100, 0.5, 5)
    assert MemoryConfig.from_dict(memory.to_dict()) == memory
    with pytest.raises(ConfigError, match="chat history token ratio 1.5 is out of range: it must be 0.0..1.0"):
        MemoryConfig("llamaindex_memory", chat_history_token_ratio=1.5).validate()
    with pytest.raises(ConfigError, match="token limit 0 is out of range: it must be at least 1"):
        MemoryConfig("llamaindex_memory", token_limit=0).validate()
    with pytest.raises(ConfigError, match="context window 0 is out of range"):
        MemoryConfig("llamaindex_buffer", context_window=0).validate()
    assert MemoryConfig("llamaindex_memory").settings == STRATEGIES["llamaindex_memory"].Settings(30_000, 0.7, 3_000)


def test_the_systems_label_and_words():
    assert MemoryConfig("llamaindex_buffer", context_window=3900).label() == "LlamaIndex buffer 2,925 tok"
    assert (
        MemoryConfig("llamaindex_memory", token_limit=100, chat_history_token_ratio=0.5, token_flush_size=400).label()
        == "LlamaIndex Memory 100 × 0.5, flush 70"
    )
    buffer = Replay(openai(CHAT), MemoryConfig("llamaindex_buffer", token_limit=12)).ledger_at(2)
    words = {e.reason: explain(e, buffer.config) for e in buffer.entries}
    assert words[OVER_BUDGET] == (
        "over ChatMemoryBuffer's token_limit (12 tokens of the contents joined, the question included): oldest dropped"
    )
    assert words[OUTSIDE_WINDOW] == (
        "dropped after the message before it: ChatMemoryBuffer lets no assistant or tool message lead the history"
    )
    memory = Replay(
        openai(CHAT),
        MemoryConfig("llamaindex_memory", token_limit=10, chat_history_token_ratio=0.5, token_flush_size=1),
    ).ledger_at(2)
    flushed = next(e for e in memory.entries if e.reason == FLUSHED)
    assert explain(flushed, memory.config) == (
        "flushed when a message was written: the chat history was over token_limit × chat_history_token_ratio "
        "(5 tokens of text), so its oldest messages were archived, at least 1 token at a time, until a user "
        "message led; never sent again"
    )
    assert REASON_LABELS[FLUSHED] == "flushed" and "never sent again" in shared_words(flushed)
    assert all(s.pruning_words({})[1] for n, s in STRATEGIES.items() if n.startswith("llamaindex_"))


STORE = {
    "store": {
        "chat": [
            {"role": "user", "blocks": [{"block_type": "text", "text": "Where is Porto?"}], "additional_kwargs": {}},
            {
                "role": "assistant",
                "blocks": [
                    {
                        "block_type": "tool_call",
                        "tool_call_id": "c1",
                        "tool_name": "find",
                        "tool_kwargs": {"city": "Porto"},
                    }
                ],
                "additional_kwargs": {},
            },
            {
                "role": "tool",
                "blocks": [{"block_type": "text", "text": "north of Portugal"}],
                "additional_kwargs": {"tool_call_id": "c1"},
            },
            {"role": "assistant", "blocks": [{"block_type": "text", "text": "In the north."}], "additional_kwargs": {}},
            {"role": "user", "blocks": [{"block_type": "text", "text": "And Faro?"}], "additional_kwargs": {}},
            {"role": "assistant", "blocks": [{"block_type": "text", "text": "In the south."}], "additional_kwargs": {}},
        ]
    },
    "class_name": "SimpleChatStore",
}


def test_an_imported_chat_store_opens_under_the_buffer_and_replays_from_the_command_line(tmp_path, capsys):
    from core.analysis.debug_view import fitting_config
    from core.cli.app import main

    conv = import_text(json.dumps(STORE), name="store.json", fmt="llamaindex-chat-store").conversations[0]
    assert fitting_config(conv).strategy == "llamaindex_buffer"
    path = tmp_path / "store.json"
    path.write_text(json.dumps(STORE))
    assert main(["replay", str(path), "--input-format", "llamaindex-chat-store", "--format", "jsonl"]) == 0
    assert [json.loads(line)["kept"] for line in capsys.readouterr().out.splitlines()] == [0, 4]
    assert (
        main(
            [
                "replay",
                str(path),
                "--input-format",
                "llamaindex-chat-store",
                "--memory",
                "llamaindex_buffer",
                "--set",
                "token_limit=12",
                "--format",
                "jsonl",
            ]
        )
        == 0
    )
    assert [json.loads(line)["kept"] for line in capsys.readouterr().out.splitlines()] == [0, 0]
    assert (
        main(
            [
                "replay",
                str(path),
                "--input-format",
                "llamaindex-chat-store",
                "--memory",
                "llamaindex_memory",
                "--set",
                "token_limit=30",
                "--set",
                "token_flush_size=1",
                "--turn",
                "2",
            ]
        )
        == 0
    )
    assert "flushed" in capsys.readouterr().out
    assert main(["memories"]) == 0
    listed = capsys.readouterr().out
    assert "llamaindex_buffer: LlamaIndex's ChatMemoryBuffer" in listed and "--set chat_history_token_ratio=" in listed


def test_the_systems_are_lenses_and_compare_configs_beside_a_dify_window():
    from core.analysis.compare import retention_matrix

    conv = import_text(json.dumps(STORE), name="store.json", fmt="llamaindex-chat-store").conversations[0]
    lenses = {label for s in STRATEGIES.values() for label, _ in s.lenses}
    assert {"LlamaIndex ChatMemoryBuffer", "LlamaIndex Memory"} <= lenses
    for config in (
        MemoryConfig(window=1),
        MemoryConfig("llamaindex_buffer", token_limit=12),
        MemoryConfig("llamaindex_memory", token_limit=30, token_flush_size=1),
    ):
        replay = Replay(conv, config)
        matrix = retention_matrix(replay)
        ledger = replay.ledger_at(1)
        assert matrix.cells[-1][: len(ledger.entries)] == [e.reason for e in ledger.entries]
        assert [matrix.why(1, c) for c in range(len(ledger.entries))] == [
            explain(e, ledger.config) for e in ledger.entries
        ]


def test_each_system_s_surprise_is_a_finding_in_its_own_words():
    """The buffer sending a question too long for its limit with no history at all, and Memory's flushed
    messages, which never come back: a platform-rule finding at the first turn it happens."""
    from core.analysis.findings import PLATFORM_RULE, config_findings

    conv = import_text(json.dumps(STORE), name="store.json", fmt="llamaindex-chat-store").conversations[0]

    def found(config: MemoryConfig) -> list:
        return [(f.turn, f.text, f.data) for f in config_findings(conv, [config]) if f.kind == PLATFORM_RULE]

    # Turn 1 has nothing earlier to leave out, so only turn 2 is named.
    assert found(MemoryConfig("llamaindex_buffer", token_limit=1)) == [
        (
            2,
            (
                "At turn 2 “LlamaIndex buffer 1 tok”: token_limit 1: the question alone is over it, and LlamaIndex sends "
                "it anyway, without a single earlier message."
            ),
            {"turns": [2]},
        )
    ]
    assert found(MemoryConfig("llamaindex_buffer", token_limit=12)) == []  # history dropped, but the question fits
    assert found(MemoryConfig("llamaindex_memory", token_limit=30, token_flush_size=1)) == [
        (
            2,
            (
                "At turn 2 “LlamaIndex Memory 30 × 0.7, flush 1”: 4 earlier messages flushed out of the chat history — "
                "archived at least 1 token at a time once it passed 21 tokens — and never sent again."
            ),
            {"turns": [2]},
        )
    ]
    assert found(MemoryConfig("llamaindex_memory")) == []


# -- what the summaries, the budget and the words say ------------------------------------------------------


def _summaries_agree(replay: Replay) -> None:
    for s in replay.summaries():
        ledger = replay.ledger(s.turn)
        kept_turns = [e.turn for e in ledger.entries if e.kept]
        assert (s.kept, s.history_tokens, s.dropped, s.budget, s.oldest_kept_turn) == (
            len(ledger.kept),
            ledger.history_tokens,
            ledger.dropped_count(),
            ledger.budget,
            min(kept_turns) if kept_turns else None,
        )


@pytest.mark.parametrize(
    "config",
    [MemoryConfig("llamaindex_buffer", token_limit=limit) for limit in (1, 9, 14, 40)]
    + [
        MemoryConfig("llamaindex_memory", token_limit=limit, chat_history_token_ratio=0.5, token_flush_size=flush)
        for limit, flush in ((10, 1), (30, 3), (99, 400))
    ],
    ids=lambda c: f"{c.strategy}-{c.settings.token_limit}",
)
def test_the_summaries_say_what_the_ledgers_say(config):
    _summaries_agree(Replay(openai(CHAT * 2), config))
    _summaries_agree(Replay(openai([{"role": "assistant", "content": "Hello, how can I help?"}, *CHAT]), config))


def test_a_turn_without_a_question_reads_what_is_stored():
    """An opening greeting is a turn without a question (nothing is written before reading: the next turn's
    first write still finds the greeting stored); a buffer read without a question sends its newest message
    even when that is over the limit."""
    from core.memory.strategies.llamaindex_buffer import Unit, buffer_get

    opening = openai([{"role": "assistant", "content": "Hello, how can I help?"}, *CHAT])
    for config in (
        MemoryConfig("llamaindex_buffer", token_limit=30),
        MemoryConfig("llamaindex_memory", token_limit=30),
    ):
        replay = Replay(opening, config)
        assert replay.ledger_at(0).entries == [] and [e.reason for e in replay.ledger_at(1).entries] == [KEPT]
    units = [Unit("hi", 1, None), Unit("there", 2, None)]
    assert buffer_get([], lambda i: "user", None, 5) == (0, False)
    assert buffer_get(units[:1], lambda i: "user", None, 1) == (0, False)
    assert buffer_get(units, lambda i: ("user", "assistant")[i], None, 2) == (0, False)
    assert buffer_get(units, lambda i: ("user", "assistant")[i], None, 1) == (1, False)
    assert buffer_get(units, lambda i: ("user", "user")[i], None, 1) == (1, False)
    assert buffer_get([Unit("hi there", 2, None)], lambda i: "user", None, 1) == (0, True)


JOINS = [
    ["a\n", "\nb", "c"],
    ["x ", "\ny", "z"],
    ["", "", "q"],
    ["p", " \n", "'s", "r"],
    ["1", " 2", "\n", "3"],
    ["u", "v\n\n", "\n\nw", "end"],
]


@pytest.mark.parametrize("texts", JOINS, ids=[f"join{i}" for i in range(len(JOINS))])
def test_the_buffer_counts_joins_that_tiktoken_splits_across_the_space(texts):
    """At every limit from 1 to the whole count, each turn of a conversation whose texts merge across the
    join keeps what ``ChatMemoryBuffer.get()`` keeps."""

    conversation = [
        {"input": texts[0], "rounds": [], "output": texts[1]},
        {"input": texts[2], "rounds": [(texts[1], [("c1", texts[0])])], "output": texts[-1]},
        {"input": texts[-1], "rounds": [], "output": texts[0]},
        {"input": texts[1], "rounds": [], "output": ""},
    ]
    held = [m for messages in llamaindex_chat(conversation) for m in messages]
    whole = ChatMemoryBuffer.from_defaults(token_limit=1)._token_count_for_messages(held)
    for limit in range(1, whole + 2):
        config = MemoryConfig("llamaindex_buffer", token_limit=limit)
        assert kept_per_turn(conversation, config) == buffer_sends(llamaindex_chat(conversation), limit), limit


def test_the_budget_and_its_note():
    buffer = Replay(openai(CHAT), MemoryConfig("llamaindex_buffer", token_limit=40, context_size=5000)).ledger_at(2)
    assert (buffer.budget, buffer.context_size) == (40, 5000)
    assert (
        buffer.budget_note == "ChatMemoryBuffer token_limit 40 (LlamaIndex's count of the contents joined, the "
        "question too)"
    )
    over = Replay(openai(CHAT), MemoryConfig("llamaindex_buffer", token_limit=1)).ledger_at(2)
    assert (
        over.budget_note
        == buffer.budget_note.replace(" 40 ", " 1 ") + "; the question alone is over it, and LlamaIndex sends it anyway"
    )
    assert Replay(openai(CHAT), MemoryConfig("llamaindex_buffer")).ledger_at(2).context_size == 128_000
    memory = Replay(
        openai(CHAT),
        MemoryConfig(
            "llamaindex_memory", token_limit=101, chat_history_token_ratio=0.5, token_flush_size=400, context_size=5000
        ),
    ).ledger_at(2)
    assert (memory.budget, memory.context_size) == (50, 5000)
    assert (
        memory.budget_note == "Memory chat history 50 tokens (token_limit 101 × 0.5, LlamaIndex's count), "
        "flushed 70 at a time"
    )


def test_the_pruning_words_and_the_claims():
    assert STRATEGIES["llamaindex_buffer"].pruning_words({}) == (
        "LlamaIndex's ChatMemoryBuffer drops the oldest messages while their contents and the question are over its "
        "token_limit, and with them the assistant and tool messages that would lead; nothing in the run says so. "
        "Raise token_limit.",
        True,
    )
    assert STRATEGIES["llamaindex_memory"].pruning_words({}) == (
        "LlamaIndex's Memory archives the oldest messages, a chunk at a time, whenever a write leaves its chat "
        "history over token_limit × chat_history_token_ratio; they are never sent again and nothing in the run says "
        "so. Raise token_limit or the ratio.",
        True,
    )
    assert STRATEGIES["llamaindex_buffer"].claims(openai(CHAT)) is None
    assert STRATEGIES["llamaindex_memory"].claims(openai(CHAT)) is None
    assert STRATEGIES["llamaindex_buffer"].explain(_buffer_case(CHAT, 99).entries[0], {"budget": 99}) is None


def test_the_memory_counts_a_call_id_only_on_a_tool_result():
    assert memory_tokens(Message("assistant", "x", "", 0, tool_call_id="c1")) == llamaindex_tokens("x")
    assert memory_tokens(Message("tool", "x", "", 0)) == llamaindex_tokens("x")


def test_the_memory_flushes_down_to_the_last_message_and_not_before_what_was_archived():
    # Two messages over the limit: the older goes when the newer is a user's; else the turn comes back.
    assert _queue("au", [10, 10], 5, 1) == 1
    assert _queue("ua", [10, 10], 5, 1) == 0
    # Messages archived before this write never come back, even when no user message is left to lead.
    assert _queue("uaaa", [10] * 4, 5, 1, lo=1) == 4
