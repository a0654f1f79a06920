"""OpenAI's counting recipe as TokenCounter applies it, the process count cache's bookkeeping (what
it takes, keeps and lets go), how a long batch is split, and the model facts read from litellm's
bundled map."""

from __future__ import annotations

import os

import pytest

from core.model import tokens
from core.model.conversation import Message, ToolCall
from core.model.tokens import (
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    CountCache,
    TokenCounter,
    _encoding,
    remember_counts,
)

MODEL = "gpt-4o-mini"  # o200k_base, exact


def enc(text: str) -> int:
    return len(_encoding("o200k_base").encode_ordinary(text))


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter(MODEL, shared=False)


# -- the recipe ------------------------------------------------------------------------------------


def test_a_message_costs_its_overhead_role_and_content(counter):
    m = Message("user", "Where is my parcel, Dana asks?", "query", 0)
    assert counter.message(m) == MESSAGE_OVERHEAD + enc("user") + enc(m.content)
    assert counter.messages([m]) == (counter.message(m),)


def test_a_name_adds_its_tokens_and_one_in_a_message_and_in_chat(counter):
    m = Message("user", "hello there", "query", 0, name="dana_smith")
    expected = MESSAGE_OVERHEAD + enc("user") + enc("hello there") + NAME_OVERHEAD + enc("dana_smith")
    assert counter.message(m) == expected
    assert counter.messages([m]) == (expected,)
    assert counter.chat("user", "hello there", "dana_smith") == expected
    assert counter.chat("user", "hello there") == expected - NAME_OVERHEAD - enc("dana_smith")


def test_every_tool_call_adds_its_name_and_arguments(counter):
    calls = (ToolCall("c1", "lookup_order", '{"order_id": "4411"}'), ToolCall("c2", "weather", '{"city": "Lisbon"}'))
    m = Message("assistant", "", "tool_call", 0, tool_calls=calls)
    expected = MESSAGE_OVERHEAD + enc("assistant") + sum(enc(c.name) + enc(c.arguments) for c in calls)
    assert counter.message(m) == expected
    assert counter.messages([m]) == (expected,)


def test_a_prompt_adds_the_reply_priming_once_to_its_messages(counter):
    msgs = [Message("system", "Be brief.", "system", 0), Message("user", "Hi, I'm Dana.", "query", 1)]
    assert counter.prompt(msgs) == REPLY_PRIMING + sum(counter.message(m) for m in msgs)
    assert counter.prompt([]) == REPLY_PRIMING


def test_the_quick_path_gives_what_the_full_recipe_gives_whatever_is_counted_already():
    msgs = [
        Message("user", "first words", "query", 0),
        Message("assistant", "second words", "answer", 1),
        Message("tool", "a result", "tool_result", 2, tool_call_id="c1"),
    ]
    cold = TokenCounter(MODEL, shared=False)
    expected = tuple(MESSAGE_OVERHEAD + enc(m.role) + enc(m.content) for m in msgs)
    assert cold.messages(msgs) == expected  # nothing counted yet
    assert cold.messages(msgs) == expected  # everything counted
    partly = TokenCounter(MODEL, shared=False)
    partly.text("first words")  # the content known, not the role
    assert partly.messages(msgs) == expected
    roles = TokenCounter(MODEL, shared=False)
    roles.text("user")  # the role known, not the content
    assert roles.messages(msgs) == expected


def test_the_quick_path_counts_a_name_and_tool_calls_whose_role_and_content_are_counted_already():
    calls = (ToolCall("c1", "lookup_order", '{"order_id": "4411"}'), ToolCall("c2", "weather", '{"city": "Lisbon"}'))
    msgs = [
        Message("assistant", "Looking.", "tool_call", 0, name="helper", tool_calls=calls),
        Message("user", "Thanks.", "query", 1, name="dana"),
    ]
    expected = (
        MESSAGE_OVERHEAD
        + enc("assistant")
        + enc("Looking.")
        + NAME_OVERHEAD
        + enc("helper")
        + sum(enc(c.name) + enc(c.arguments) for c in calls),
        MESSAGE_OVERHEAD + enc("user") + enc("Thanks.") + NAME_OVERHEAD + enc("dana"),
    )
    fields = TokenCounter(MODEL, shared=False)
    for text in ("assistant", "Looking.", "user", "Thanks."):
        fields.text(text)  # the role and content known, not the name nor the tool calls
    assert fields.messages(msgs) == expected
    assert fields.messages(msgs) == expected  # everything counted
    assert "helper" in fields.counts.counts and '{"city": "Lisbon"}' in fields.counts.counts


def test_text_counts_once_and_then_reads_the_cache(counter):
    assert counter.text("Lisbon in the evening") == enc("Lisbon in the evening")
    assert counter.counts.counts["Lisbon in the evening"] == enc("Lisbon in the evening")
    counter.counts.counts["Lisbon in the evening"] = 999  # what the cache holds is what is returned
    assert counter.text("Lisbon in the evening") == 999
    assert counter.text("") == 0


def test_describe_says_which_encoding_and_whether_exact():
    assert TokenCounter(MODEL).describe() == "o200k_base, exact"
    assert TokenCounter("some-unknown-model").describe().endswith(", estimated")


def test_a_counter_keeps_its_model_and_worker_cap():
    c = TokenCounter(MODEL, shared=False, workers=3)
    assert (c.model, c.workers) == (MODEL, 3)
    assert c.counts is not tokens.count_cache(c.encoding_name)
    assert TokenCounter(MODEL).counts is tokens.count_cache(c.encoding_name)


# -- the cache's bookkeeping -------------------------------------------------------------------------


def test_an_empty_text_costs_nothing_and_a_missing_one_is_counted():
    cache = CountCache("o200k_base")
    assert cache.count("") == 0
    assert cache.count("a parcel") == enc("a parcel")
    assert cache.counts == {"": 0, "a parcel": enc("a parcel")}


def test_counts_known_from_the_store_are_taken_without_encoding_and_never_replace_what_is_held():
    cache = CountCache("o200k_base")
    cache.count("kept as counted")
    cache.remember({"kept as counted": 500, "stored only": 7})
    assert cache.counts == {"kept as counted": enc("kept as counted"), "stored only": 7}
    assert cache._chars == len("kept as counted") + len("stored only")
    cache.remember({})
    assert cache._chars == len("kept as counted") + len("stored only")


def test_remember_counts_takes_only_the_encodings_counted_here(monkeypatch):
    monkeypatch.setattr(tokens, "_caches", {})
    remember_counts("o200k_base", {"from the store": 4})
    assert tokens.count_cache("o200k_base").counts == {"from the store": 4}
    remember_counts("some_other_encoding", {"from elsewhere": 4})
    assert "some_other_encoding" not in tokens._caches
    remember_counts("cl100k_base", {})
    assert "cl100k_base" not in tokens._caches


def test_the_cache_lets_its_oldest_texts_go_at_its_limit_down_to_half_of_it():
    cache = CountCache("o200k_base", limit_chars=100)
    ten = [f"text {i:05d}" for i in range(10)]  # 10 characters each
    cache.remember({t: 1 for t in ten})
    assert list(cache.counts) == ten and cache._chars == 100  # at the limit: nothing let go
    cache.remember({"one more!!": 1})  # 110 > 100: oldest first, down to 50
    assert list(cache.counts) == [*ten[6:], "one more!!"]
    assert cache._chars == 50
    cache.remember({"x" * 200: 1})  # more than the limit on its own: everything goes
    assert cache.counts == {} and cache._chars == 0
    cache.remember({"fresh": 1})
    assert cache._chars == 5


def test_a_cache_starts_empty():
    cache = CountCache("o200k_base")
    assert (cache.counts, cache._chars, cache.limit_chars) == ({}, 0, tokens.COUNT_CACHE_CHARS)


# -- splitting a long batch --------------------------------------------------------------------------


@pytest.fixture
def chunks_seen(monkeypatch):
    """The chunks each count_all hands to _lengths, in order."""
    seen: list[list[str]] = []
    real = CountCache._lengths

    def lengths(self, texts):
        seen.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(CountCache, "_lengths", lengths)
    return seen


def test_count_all_skips_what_is_counted_and_counts_a_repeated_text_once(chunks_seen):
    cache = CountCache("o200k_base")
    cache.count("already")
    cache.count_all(["already", "new", "new", "", "other"], workers=1)
    assert chunks_seen == [["new", "other"]]
    cache.count_all(["already", "new"], workers=1)
    assert len(chunks_seen) == 1  # nothing left to count: no call at all


def test_prepare_passes_its_worker_cap_unless_one_is_given(monkeypatch):
    asked: list[object] = []
    real = CountCache.counted
    c = TokenCounter(MODEL, shared=False, workers=3)

    def counted(self, texts, ends, workers, share):
        asked.append((workers, share))
        yield from real(self, texts, ends, workers, share)

    monkeypatch.setattr(CountCache, "counted", counted)
    msgs = [Message("user", "some words", "query", 0)]
    c.prepare(msgs)
    c.prepare([Message("user", "other words", "query", 0)], workers=1)
    c.prepare([Message("user", "more words", "query", 0)], workers=0)  # no fewer than one worker
    assert asked == [(3, 1 / 3), (1, 1.0), (1, 1.0)]
    monkeypatch.setattr(tokens, "encoding_workers", lambda: 5)
    TokenCounter(MODEL, shared=False).prepare(msgs)
    assert asked[-1] == (5, 1 / 5)
    assert c.counts.counts["some words"] == enc("some words")


def test_lengths_use_the_compiled_encoder_and_fall_back_on_text_it_refuses(monkeypatch):
    encoding = _encoding("o200k_base")
    used: list[str] = []

    class Core:
        def encode_ordinary(self, text):
            used.append(text)
            return encoding._core_bpe.encode_ordinary(text)

    class Wrapped:
        _core_bpe = Core()

        def encode_ordinary(self, text):
            used.append("wrapper")
            return encoding.encode_ordinary(text)

    monkeypatch.setattr(tokens, "_encoding", lambda name: Wrapped())
    cache = CountCache("o200k_base")
    assert cache._lengths(["two words", "three more words"]) == [enc("two words"), enc("three more words")]
    assert used == ["two words", "three more words"]
    used.clear()
    lone = "half a pair \ud83d"
    assert cache._lengths([lone]) == [len(encoding.encode_ordinary(lone))]
    assert used[-1] == "wrapper"


# -- model facts and the bundled files ---------------------------------------------------------------


def test_model_facts_come_from_litellms_bundled_map_by_full_or_bare_name():
    facts = tokens.model_facts("gpt-4o-mini")
    assert (facts.known, facts.source) == (True, "litellm model map")
    assert facts.context_size and facts.context_size >= 128_000 and facts.max_output
    for name in ("openai/gpt-4o-mini", "azure/gpt-4o-mini"):
        same = tokens.model_facts(name)
        assert (same.context_size, same.max_output, same.known) == (facts.context_size, facts.max_output, True)
    unknown = tokens.model_facts("no-such-model-anywhere")
    assert (unknown.context_size, unknown.max_output, unknown.known, unknown.source) == (None, None, False, "unknown")
    demo = tokens.model_facts(tokens.DEMO_MODEL)
    assert (demo.context_size, demo.max_output, demo.source) == (16384, 1024, "MemLens demo model")


def test_vision_support_comes_from_the_map_and_is_no_for_unknown_and_demo_models():
    assert tokens.model_supports_vision("gpt-4o") is True
    assert tokens.model_supports_vision("openai/gpt-4o") is True
    assert tokens.model_supports_vision("gpt-3.5-turbo") is False
    assert tokens.model_supports_vision("no-such-model-anywhere") is False
    assert tokens.model_supports_vision(tokens.DEMO_MODEL) is False


def test_tool_calling_comes_from_the_map_and_is_unknown_where_the_map_does_not_say():
    assert tokens.model_supports_tool_calls("gpt-4o-mini") is True
    assert tokens.model_supports_tool_calls("openai/gpt-4o-mini") is True  # a provider prefix the map leaves off
    assert tokens.model_supports_tool_calls("my-proxy/gpt-4o-mini") is True  # any provider before the map's name
    # ... which may hold a provider of its own (litellm lists this one only with it)
    assert tokens.model_supports_tool_calls("my-proxy/gemini/deep-research-preview-04-2026") is False
    assert tokens.model_supports_tool_calls("deepseek/deepseek-reasoner") is False  # the map says no
    assert tokens.model_supports_tool_calls("ollama/llama2") is None  # listed, but the map does not say
    assert tokens.model_supports_tool_calls("acme/no-such-model-anywhere") is None
    assert tokens.model_supports_tool_calls(tokens.DEMO_MODEL) is False


def test_the_encodings_are_read_from_litellms_bundled_folder(monkeypatch):
    base = tokens._litellm_dir()
    assert base and os.path.isdir(os.path.join(base, "litellm_core_utils", "tokenizers"))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    tokens._ensure_tiktoken_cache()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == os.path.join(base, "litellm_core_utils", "tokenizers")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/somewhere/chosen")
    tokens._ensure_tiktoken_cache()  # a folder the user chose is kept
    assert os.environ["TIKTOKEN_CACHE_DIR"] == "/somewhere/chosen"


# -- what the mutation run showed untested ------------------------------------------------------------


def test_the_core_count_is_the_processs_cpu_affinity_else_the_cpu_count_never_below_one(monkeypatch):
    monkeypatch.setattr(tokens.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert tokens._cores() == 3
    monkeypatch.setattr(tokens.os, "sched_getaffinity", lambda pid: set(), raising=False)
    assert tokens._cores() == 1
    monkeypatch.delattr(tokens.os, "sched_getaffinity", raising=False)  # not on Linux
    monkeypatch.setattr(tokens.os, "cpu_count", lambda: 6)
    assert tokens._cores() == 6
    monkeypatch.setattr(tokens.os, "cpu_count", lambda: None)
    assert tokens._cores() == 1
    monkeypatch.setattr(tokens.os, "cpu_count", lambda: 0)
    assert tokens._cores() == 1


def test_a_counted_text_is_read_from_the_cache_without_encoding(monkeypatch):
    cache = CountCache("o200k_base")
    cache.counts["held"] = 42
    monkeypatch.setattr(tokens, "_encoding", lambda name: pytest.fail("encoded a text the cache holds"))
    assert cache.count("held") == 42
    counter = TokenCounter(MODEL, shared=False)
    counter.counts.counts.update({"held": 42, "user": 1})
    monkeypatch.setattr(counter.counts, "count", lambda text: pytest.fail("went past the counter's own look-up"))
    assert counter.text("held") == 42
    # A plain message whose role and content are both held costs two look-ups, not the full recipe.
    monkeypatch.setattr(counter, "message", lambda m: pytest.fail("took the full recipe"))
    assert counter.messages([Message("user", "held", "query", 0)]) == (MESSAGE_OVERHEAD + 1 + 42,)


def test_a_counter_counts_for_gpt_4o_mini_unless_told_otherwise():
    c = TokenCounter()
    assert (c.model, c.encoding_name, c.exact) == ("gpt-4o-mini", "o200k_base", True)


def test_model_facts_keep_the_asked_name_and_read_a_context_from_max_tokens_when_no_input_limit(monkeypatch):
    monkeypatch.setattr(
        tokens,
        "_model_map",
        lambda: {
            "old-model": {"max_tokens": 8000},
            "no-output": {"max_input_tokens": 100, "max_output_tokens": 0},
            "looks": {"max_input_tokens": 100, "supports_vision": True},
        },
    )
    facts = tokens.model_facts("old-model")
    assert (facts.model, facts.context_size, facts.max_output, facts.known) == ("old-model", 8000, None, True)
    assert tokens.model_facts("no-output").max_output is None
    proxied = tokens.model_facts("my-proxy/old-model")  # any provider prefix: the bare name is tried
    assert (proxied.model, proxied.context_size, proxied.known) == ("my-proxy/old-model", 8000, True)
    assert tokens.model_facts("nothing").model == "nothing"
    demo = tokens.model_facts(tokens.DEMO_MODEL)
    assert (demo.model, demo.known) == (tokens.DEMO_MODEL, True)
    assert tokens.model_supports_vision("my-proxy/looks") is True
    assert tokens.model_supports_vision("my-proxy/old-model") is False


def test_langchains_chat_model_count_adds_three_for_a_tool_results_call_id():
    counter = TokenCounter(MODEL, shared=False)
    result = Message("tool", "order 4411 shipped", "tool_result", 0, tool_call_id="call_1")
    plain = Message("assistant", "order 4411 shipped", "answer", 1)
    assert tokens.chat_model_message_tokens(counter, result) == counter.message(result) + tokens.TOOL_CALL_ID_TOKENS
    assert tokens.chat_model_message_tokens(counter, plain) == counter.message(plain)


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "Hi, I'm Dana.", "query", 0),
        Message("user", "odd", "query", 0, name="dana"),
        Message(
            "assistant",
            "",
            "tool_call",
            0,
            tool_calls=(ToolCall("call_1", "lookup_order", '{"order_id": "4411"}'), ToolCall("call_2", "weather", "")),
        ),
        Message(
            "assistant",
            "checking",
            "tool_call",
            0,
            tool_calls=(ToolCall("call_3", "lookup", "[1, 2]"), ToolCall("call_4", "broken", "{not json")),
        ),
        Message("tool", "order 4411 shipped on Monday", "tool_result", 0, tool_call_id="call_1"),
    ],
)
def test_the_approximate_count_is_langchains_count_tokens_approximately(message):
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.messages.utils import count_tokens_approximately

    if message.role == "user":
        lc = HumanMessage(message.content, name=message.name)
    elif message.role == "tool":
        lc = ToolMessage(message.content, tool_call_id=message.tool_call_id)
    else:
        calls = [{"name": c.name, "args": tokens._arguments(c.arguments), "id": c.id} for c in message.tool_calls]
        lc = AIMessage(message.content, tool_calls=calls)
    assert tokens.approximate_message_tokens(message) == count_tokens_approximately([lc])


def test_tool_arguments_that_are_not_a_json_object_read_as_no_arguments():
    assert tokens._arguments('{"a": 1}') == {"a": 1}
    assert tokens._arguments("") == {}
    assert tokens._arguments("[1, 2]") == {}
    assert tokens._arguments("{not json") == {}


def test_a_message_with_a_name_or_tool_calls_never_takes_the_quick_path_once_its_texts_are_counted():
    named = Message("user", "first words", "query", 0, name="dana")
    calling = Message("assistant", "", "tool_call", 1, tool_calls=(ToolCall("c1", "lookup", '{"id": 7}'),))
    plain = Message("assistant", "second words", "answer", 2)
    counter = TokenCounter(MODEL, shared=False)
    for text in ("user", "assistant", "first words", "second words", "", "dana", "lookup", '{"id": 7}'):
        counter.text(text)  # every text counted already: only the recipe tells these apart
    expected = [
        MESSAGE_OVERHEAD + enc("user") + enc("first words") + NAME_OVERHEAD + enc("dana"),
        MESSAGE_OVERHEAD + enc("assistant") + enc("lookup") + enc('{"id": 7}'),
        MESSAGE_OVERHEAD + enc("assistant") + enc("second words"),
    ]
    assert counter.message_list([named, calling, plain]) == expected
    assert list(counter.message_counts(iter([named, calling, plain]))) == expected  # from any iterable
