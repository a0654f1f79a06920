"""Token counts are computed once per (encoding, text) in a process and shared by replays and
compare configs; long batches are tokenised across processes — with the same counts as one by one."""

from __future__ import annotations

import pytest

from benchmarks.workload import build_conversation
from core.analysis.compare import compare
from core.io import read_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model import tokens
from core.model.tokens import CountCache, TokenCounter, _encoding, count_cache
from core.service.samples import sample_files
from tests.builders import branched

MODEL = "gpt-4o-mini"
CONFIGS = [
    MemoryConfig(strategy="dify", window=3, model=MODEL),
    MemoryConfig(strategy="dify", window=50, model=MODEL, context_size=1_200),
    MemoryConfig(strategy="window", window=4, model=MODEL),
    MemoryConfig(strategy="buffer", model=MODEL),
    MemoryConfig(strategy="dify", window=10, fidelity="code", model=MODEL),
    MemoryConfig(strategy="off", model=MODEL),
]


def _samples():
    return [c for path in sample_files() for c in read_conversations(path)]


class _CountingEncoding:
    """tiktoken's encoding, counting how often each text is encoded."""

    def __init__(self, real):
        self.real = real
        self.calls: dict[str, int] = {}

    def encode_ordinary(self, text):
        self.calls[text] = self.calls.get(text, 0) + 1
        return self.real.encode_ordinary(text)


@pytest.fixture
def fresh_caches(monkeypatch):
    """An empty process cache, and a record of every text tiktoken encodes."""
    counting = _CountingEncoding(_encoding("o200k_base"))
    monkeypatch.setattr(tokens, "_caches", {})
    monkeypatch.setattr(tokens, "_encoding", lambda name: counting)
    tokens._counter.cache_clear()  # counter_for's counters hold the caches they were made with
    yield counting
    tokens._counter.cache_clear()


def _one_by_one(conversation, config) -> list:
    """Ledgers counted message by message by a counter with nothing cached and no batch."""
    counter = TokenCounter(MODEL, shared=False, workers=1)
    replay = Replay(conversation, config, counter=counter)
    return [replay.ledger_at(p) for p in range(len(conversation.turns))], replay.summaries()


def test_batched_split_and_cached_counts_give_the_same_ledgers_on_every_sample(monkeypatch):
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 1)  # the samples are short: split them anyway
    monkeypatch.setattr(tokens, "_caches", {})
    for conversation in _samples():
        for config in CONFIGS:
            expected_ledgers, expected_summaries = _one_by_one(conversation, config)
            counter = TokenCounter(MODEL, workers=2)
            replay = Replay(conversation, config, counter=counter)
            summaries = replay.summaries()  # the batched pass
            assert summaries == expected_summaries, (conversation.id, config.label())
            ledgers = [replay.ledger_at(p) for p in range(len(conversation.turns))]
            assert ledgers == expected_ledgers, (conversation.id, config.label())


def test_six_compare_configs_tokenise_each_text_once(fresh_caches):
    conversation = read_conversations(sample_files()[0])[0]
    compare(conversation, CONFIGS)
    assert fresh_caches.calls, "nothing was tokenised"
    assert max(fresh_caches.calls.values()) == 1, [t for t, n in fresh_caches.calls.items() if n > 1][:3]
    contents = {m.content for t in conversation.turns for m in t.messages if m.content}
    assert contents <= set(fresh_caches.calls)


def test_models_of_one_encoding_share_their_counts(fresh_caches):
    assert tokens.resolve_encoding("gpt-4o")[0] == tokens.resolve_encoding(MODEL)[0]
    conversation = read_conversations(sample_files()[0])[0]
    Replay(conversation, MemoryConfig(strategy="buffer", model=MODEL)).summaries()
    before = dict(fresh_caches.calls)
    Replay(conversation, MemoryConfig(strategy="buffer", model="gpt-4o")).summaries()
    assert fresh_caches.calls == before
    assert count_cache("o200k_base") is TokenCounter("gpt-4o").counts is TokenCounter(MODEL).counts


def test_a_full_cache_lets_its_oldest_texts_go_and_still_counts_right():
    cache = CountCache("o200k_base", limit_chars=1_000)
    texts = [f"message number {i} " * 5 for i in range(200)]
    cache.count_all(texts, workers=1)
    assert sum(map(len, cache.counts)) <= 1_000
    assert texts[-1] in cache.counts and texts[0] not in cache.counts
    encode = _encoding("o200k_base").encode_ordinary
    assert cache.count(texts[0]) == len(encode(texts[0]))


def test_a_private_counter_does_not_touch_the_process_cache(fresh_caches):
    TokenCounter(MODEL, shared=False).text("only in private")
    assert "only in private" not in count_cache("o200k_base").counts


def test_the_fast_walk_agrees_with_every_ledger_on_a_branched_conversation():
    # The fast per-turn walk stops once no turn is left to enter; every branch must still be decided.
    conversation = branched(120)
    for config in CONFIGS[:5]:
        replay = Replay(conversation, config, counter=TokenCounter(MODEL, workers=2))
        summaries = replay.summaries()
        assert len(summaries) == len(conversation.turns)
        for s in summaries:
            ledger = replay.ledger(s.turn)
            assert (s.kept, s.history_tokens) == (len(ledger.kept), ledger.history_tokens), (config.label(), s.turn)


def test_a_batch_with_text_the_compiled_encoder_refuses_counts_as_tiktoken_repairs_it():
    # A lone surrogate (from a broken import) makes tiktoken's compiled encoder refuse the text;
    # its Python wrapper repairs such text, and the batch must count it the same way.
    texts = ["plain words", "half a pair \ud83d here", "more words"]
    cache = CountCache("o200k_base")
    cache.count_all(texts, workers=1)
    encode = _encoding("o200k_base").encode_ordinary
    assert cache.counts == {t: len(encode(t)) for t in texts}


def test_a_replay_leaves_the_cycle_collector_as_it_found_it():
    import gc

    conversation = build_conversation(50)
    config = MemoryConfig(strategy="dify", window=5, model=MODEL)
    assert gc.isenabled()
    Replay(conversation, config).summaries()
    assert gc.isenabled()
    gc.disable()
    try:
        Replay(conversation, config).summaries()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_message_with_a_name_or_tool_calls_counts_the_same_alone_and_in_a_turn():
    from core.model.conversation import Message, ToolCall

    counter = TokenCounter(MODEL, shared=False)
    msgs = [
        Message("user", "hello there", "query", "a", name="dana"),
        Message("assistant", "", "tool_call", "b", tool_calls=(ToolCall("c1", "lookup", '{"id": 4}'),)),
        Message("assistant", "plain answer", "answer", "c"),
    ]
    counter.prepare(msgs)
    assert counter.messages(msgs) == tuple(counter.message(m) for m in msgs)
    assert counter.messages(msgs)[0] > counter.chat("user", "hello there")


def test_preparing_a_batch_counts_every_text_once_and_each_role_once(monkeypatch):
    from core.model.conversation import Message, ToolCall

    counter = TokenCounter(MODEL, shared=False)
    msgs = [
        Message("user", "first question", "query", "a", name="dana"),
        Message("assistant", "", "tool_call", "b", tool_calls=(ToolCall("c1", "lookup", '{"id": 4}'),)),
        Message("tool", "result text", "tool_result", "c", name="dana"),
        Message("assistant", "an answer", "answer", "d", tool_calls=(ToolCall("c2", "lookup", '{"id": 4}'),)),
        Message("user", "second question", "query", "e"),
    ]
    asked: list[tuple[list[str], list[int] | None]] = []
    real = CountCache.counted

    def counted(self, texts, ends, workers, share):
        asked.append((list(texts), None if ends is None else list(ends)))
        yield from real(self, texts, ends, workers, share)

    monkeypatch.setattr(CountCache, "counted", counted)
    counter.prepare(msgs)
    assert asked == [
        (
            [
                "first question",
                "user",
                "dana",
                "assistant",
                "lookup",
                '{"id": 4}',
                "result text",
                "tool",
                "an answer",
                "second question",
            ],
            [0, 3, 6, 8, 9, 10],
        )
    ]  # each message a group of its own
    for text, _ in zip(*asked[0]):
        assert counter.counts.counts[text] == len(_encoding("o200k_base").encode_ordinary(text)), text
    held = dict(counter.counts.counts)
    counter.prepare(msgs)  # everything counted already: nothing is asked for again
    assert counter.counts.counts == held and len(asked) == 1


def test_a_long_batch_is_split_across_one_process_per_core_by_default_and_counted_as_tiktoken_does(monkeypatch):
    forked: list[int] = []
    real = tokens._fork_counting
    monkeypatch.setattr(
        tokens,
        "_fork_counting",
        lambda lengths, texts, spans: forked.append(sum(hi - lo for lo, hi in spans)) or real(lengths, texts, spans),
    )
    texts = [m.content for t in build_conversation(3_000).turns for m in t.messages]
    assert sum(map(len, texts)) >= tokens.PARALLEL_MIN_CHARS
    monkeypatch.setattr(tokens, "encoding_workers", lambda: 1)
    CountCache("o200k_base").count_all(texts)
    assert forked == []
    monkeypatch.setattr(tokens, "encoding_workers", lambda: 3)
    cache = CountCache("o200k_base")
    cache.count_all(texts)
    assert len(forked) == 2 and len(texts) / 3 * 1.5 < sum(forked) < len(texts)  # two children; a third stays here
    encode = _encoding("o200k_base").encode_ordinary
    assert cache.counts == {t: len(encode(t)) for t in texts if t}
