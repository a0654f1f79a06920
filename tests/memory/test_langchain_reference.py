"""trim and summary_buffer against LangChain itself, case by case.

``trim_messages`` is langchain-core 1.8.3's, with the counters a user passes it: a chat model
(``ChatOpenAI(model=...)``, langchain-openai 1.7.4 — the default ``trim_counter: tokens``),
``count_tokens_approximately`` (``approximate``) and ``len`` (``messages``).
``ConversationSummaryBufferMemory`` is langchain-classic 1.0.8's, with a fake LLM that writes the
summary and counts tokens with the same counters. Every earlier turn of every conversation is
compared: the messages MemLens sends are the ones LangChain keeps.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages import trim_messages as lc_trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_openai import ChatOpenAI

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.replay import Replay
from core.model.tokens import counter_for
from tests.builders import linear, openai

MODEL = "gpt-4o-mini"


def test_the_references_are_the_releases_the_readme_names():
    assert (version("langchain-core"), version("langchain-openai"), version("langchain-classic")) == (
        "1.8.3",
        "1.7.4",
        "1.0.8",
    )


def langchain_counter(name: str):
    if name == "messages":
        return len
    if name == "approximate":
        return count_tokens_approximately
    counter_for(MODEL)  # points tiktoken at the encodings bundled with litellm (offline)
    return ChatOpenAI(model=MODEL, api_key="offline")  # counting only: no request is made


def to_langchain(m):
    if m.role == "system":
        return SystemMessage(m.content)
    if m.role == "user":
        return HumanMessage(m.content)
    if m.role == "tool":
        return ToolMessage(m.content, tool_call_id=m.tool_call_id or "")
    calls = [{"name": c.name, "args": json.loads(c.arguments or "{}"), "id": c.id} for c in m.tool_calls]
    return AIMessage(m.content, tool_calls=calls)


def sent(messages) -> list[tuple[str, str]]:
    return [
        (
            {"human": "user", "ai": "assistant"}.get(getattr(m, "type", ""), getattr(m, "type", None) or m.role),
            m.content,
        )
        for m in messages
    ]


def multi_line(i: int) -> str:
    return "\n".join(f"line {k} of answer {i}, with a few more words" for k in range(1, 1 + i % 4))


TOOLS = openai(
    [
        {"role": "system", "content": "You answer from the order system."},
        {"role": "user", "content": "where is order 4411?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"key": "order 4411"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped on Monday, arriving Thursday"},
        {"role": "assistant", "content": "It shipped on Monday and arrives Thursday."},
        {"role": "user", "content": "and order 5120?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"key": "order 5120"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "being packed"},
        {"role": "assistant", "content": "It is being packed."},
        {"role": "user", "content": "thanks, that is all"},
        {"role": "assistant", "content": "You're welcome!"},
        {"role": "user", "content": "bye"},
    ]
)


def with_system(conv, text):
    from dataclasses import replace

    return replace(conv, system_prompt=text)


CONVERSATIONS = {
    "short": with_system(linear(7), "You are a helpful assistant."),
    "multi_line": with_system(linear(6, answer=multi_line), "Be brief."),
    "tools": TOOLS,
}

TRIM_OPTIONS = [
    {},
    {"trim_strategy": "first"},
    {"start_on": "human"},
    {"end_on": "human"},
    {"start_on": "human", "end_on": "ai"},
    {"include_system": True},
    {"include_system": True, "start_on": "human"},
    {"allow_partial": True},
    {"allow_partial": True, "trim_strategy": "first"},
    {"allow_partial": True, "include_system": True},
]


def trim_cases():
    for counter, limits in (
        ("tokens", (0, 9, 25, 40, 61, 90)),
        ("approximate", (0, 8, 22, 47, 80)),
        ("messages", (0, 1, 2, 3, 5)),
    ):
        for conv in CONVERSATIONS:
            for i, options in enumerate(TRIM_OPTIONS):
                for limit in limits:
                    yield pytest.param(conv, counter, limit, options, id=f"{conv}-{counter}-{limit}-{i}")


@pytest.mark.parametrize("conv_name, counter, limit, options", list(trim_cases()))
def test_trim_sends_what_trim_messages_keeps(conv_name, counter, limit, options):
    conv = CONVERSATIONS[conv_name]
    config = MemoryConfig(
        strategy="trim",
        model=MODEL,
        max_history_tokens=limit,
        trim_counter=counter,
        granularity="all_messages",
        **options,
    )
    replay = Replay(conv, config)
    lc_counter = langchain_counter(counter)
    for s in replay.summaries():
        history = [m for t in conv.turns[: s.turn - 1] for m in t.messages]
        include_system = options.get("include_system") and conv.system_prompt
        listed = ([SystemMessage(conv.system_prompt)] if include_system else []) + [to_langchain(m) for m in history]
        kept = lc_trim_messages(
            listed,
            max_tokens=limit,
            token_counter=lc_counter,
            strategy=options.get("trim_strategy", "last"),
            allow_partial=options.get("allow_partial", False),
            start_on=options.get("start_on"),
            end_on=options.get("end_on"),
            include_system=bool(include_system),
        )
        if include_system:
            assert sent(kept[:1]) == [("system", conv.system_prompt)]
            kept = kept[1:]
        ours = replay.history_messages(replay.ledger(s.turn))
        assert sent(ours) == sent(kept), f"turn {s.turn}"


# -- summary buffer ----------------------------------------------------------------------------------


class CountingFakeLLM(FakeListChatModel):
    """Writes a fixed summary; counts tokens with the counter a case names."""

    counter: object = None

    def get_num_tokens_from_messages(self, messages, tools=None):
        if isinstance(self.counter, ChatOpenAI):
            return self.counter.get_num_tokens_from_messages(messages)
        return self.counter(messages)


def langchain_buffers(conv, limit, counter):
    """The buffer after each turn is saved: ``[(role, content), ...]`` per turn."""
    memory = ConversationSummaryBufferMemory(
        llm=CountingFakeLLM(responses=["the summary"], counter=langchain_counter(counter)),
        max_token_limit=limit,
        return_messages=True,
    )
    out = []
    for turn in conv.turns:
        memory.save_context({"input": turn.query_message.content}, {"output": turn.answer_message.content})
        out.append(sent(memory.chat_memory.messages))
    return out


@pytest.mark.parametrize(
    "counter, limits",
    [("tokens", (3, 10, 20, 35, 50, 90, 150)), ("approximate", (0, 10, 20, 35, 50, 90)), ("messages", (0, 1, 2, 3, 5))],
)
@pytest.mark.parametrize("conv_name", ["short", "multi_line"])
def test_summary_buffer_keeps_what_conversation_summary_buffer_memory_keeps(conv_name, counter, limits):
    conv = CONVERSATIONS[conv_name]
    for limit in limits:
        expected = langchain_buffers(conv, limit, counter)
        replay = Replay(
            conv, MemoryConfig(strategy="summary_buffer", model=MODEL, max_history_tokens=limit, trim_counter=counter)
        )
        for turn in range(2, len(conv.turns) + 1):
            ledger = replay.ledger(turn)
            kept = sent(m for m in replay.history_messages(ledger) if m.role != "system")
            assert kept == expected[turn - 2], f"limit {limit}, turn {turn}"
            assert bool(ledger.synthetic) == (len(expected[turn - 2]) < 2 * (turn - 1))


def test_a_limit_of_zero_summarises_everything_with_the_approximate_counter():
    conv = CONVERSATIONS["short"]
    assert langchain_buffers(conv, 0, "approximate")[-1] == []
    replay = Replay(
        conv, MemoryConfig(strategy="summary_buffer", model=MODEL, max_history_tokens=0, trim_counter="approximate")
    )
    assert replay.ledger(5).kept == [] and len(replay.ledger(5).synthetic) == 1


@pytest.mark.parametrize("limit", [0, 2])
def test_a_limit_below_the_chat_models_empty_count_fails_in_langchain_and_is_refused(limit):
    with pytest.raises(IndexError):
        langchain_buffers(CONVERSATIONS["short"], limit, "tokens")
    with pytest.raises(ConfigError, match="counts even an empty buffer as 3 tokens"):
        MemoryConfig(strategy="summary_buffer", model=MODEL, max_history_tokens=limit).validate()
