"""A long batch of texts is counted across processes: this one counts its share, forked children
count the rest and send their counts batch by batch, so a replay decides its first turns while the
later ones are still counted. A child that fails, miscounts or hangs never costs a count: its
share is counted here, and every child is reaped."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from array import array

import pytest

from core.model import tokens
from core.model.conversation import Message, ToolCall
from core.model.tokens import CountCache, TokenCounter, _encoding
from tests.builders import branched
from tests.processes import gone

MODEL = "gpt-4o-mini"


def enc(text: str) -> int:
    return len(_encoding("o200k_base").encode_ordinary(text))


@pytest.fixture
def seen_here(monkeypatch):
    """The batches ``_lengths`` counts in this process, in order (a child's are not seen)."""
    seen: list[list[str]] = []
    real = CountCache._lengths

    def lengths(self, texts):
        if os.getpid() == parent:
            seen.append(list(texts))
        return real(self, texts)

    parent = os.getpid()
    monkeypatch.setattr(CountCache, "_lengths", lengths)
    return seen


@pytest.fixture
def started(monkeypatch):
    """Every batch counts as long; the children ``_fork_counting`` started, as (pid, pipe) or None."""
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 1)
    out: list[tuple[int, int] | None] = []
    real = tokens._fork_counting
    monkeypatch.setattr(
        tokens, "_fork_counting", lambda lengths, texts, spans: out.append(real(lengths, texts, spans)) or out[-1]
    )
    return out


def in_child(monkeypatch, child_lengths) -> None:
    """``_lengths`` as usual in this process, ``child_lengths`` in a forked child."""
    real, parent = CountCache._lengths, os.getpid()
    monkeypatch.setattr(
        CountCache,
        "_lengths",
        lambda self, texts: child_lengths(self, texts) if os.getpid() != parent else real(self, texts),
    )


TEXTS = ["first share text", "second share", "third", "more"]


# -- how the text is shared ---------------------------------------------------------------------------


def test_this_process_takes_its_share_to_a_groups_end_and_the_children_the_rest_in_batches(monkeypatch):
    bounds = [0, 10, 20, 30, 40, 50, 60]  # six groups of 10 characters
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 1_000)
    assert tokens._plan(bounds, 2, 0.5) == (3, [[6]])  # 30 of 60 here; one batch for the child
    assert tokens._plan(bounds, 2, 0.25) == (2, [[6]])  # 15 characters: the share ends on the 2nd group
    assert tokens._plan(bounds, 3, 1 / 3) == (2, [[4], [6]])  # the rest split equally between two children
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 20)
    assert tokens._plan(bounds, 2, 0.25) == (2, [[4, 6]])  # batches of 20 characters
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 15)
    assert tokens._plan(bounds, 2, 0.25) == (2, [[4, 6]])  # a batch ends on the group that reaches its size
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 1)
    assert tokens._plan(bounds, 2, 0.5) == (3, [[4, 5, 6]])  # never an empty batch


def test_the_last_child_takes_every_group_left_even_empty_ones_and_a_batch_always_moves_on(monkeypatch):
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 1_000)
    assert tokens._plan([0, 10, 20, 20], 2, 0.5) == (1, [[3]])  # the trailing empty group too
    assert tokens._plan([0, 10, 20, 30, 30], 3, 0.25) == (1, [[2], [4]])
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 0)
    assert tokens._plan([0, 10, 10, 20, 30], 2, 0.25) == (1, [[2, 3, 4]])  # one group a batch, none empty


def test_this_process_takes_at_least_one_group_and_a_child_with_nothing_left_gets_no_batch():
    assert tokens._plan([0, 10, 20], 2, 0.0) == (1, [[2]])
    assert tokens._plan([0, 10, 20], 2, 1.0) == (2, [[]])
    assert tokens._plan([0, 30, 31, 32], 3, 0.5) == (1, [[2], [3]])
    assert tokens._plan([0, 0, 0, 10], 3, 0.5) == (3, [[], []])


# -- the counting ------------------------------------------------------------------------------------


def test_a_short_batch_one_worker_or_one_group_is_counted_here_at_once(monkeypatch, seen_here):
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 40)
    monkeypatch.setattr(tokens, "_fork_counting", lambda *a: pytest.fail("forked a child"))
    short = ["word0001", "word0002"]  # 16 characters
    assert list(CountCache("o200k_base").counted(short, None, 2, 0.5)) == [2]
    long = ["x" * 30, "y" * 30]
    assert list(CountCache("o200k_base").counted(long, None, 1, 1.0)) == [2]
    assert list(CountCache("o200k_base").counted(long, [0, 2], 2, 0.5)) == [1]  # one group: nothing to share
    assert seen_here == [short, long, long]
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 61)  # one character short of the threshold
    assert list(CountCache("o200k_base").counted(long, None, 2, 0.5)) == [2]
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 60)  # exactly the threshold: shared
    monkeypatch.setattr(tokens, "_fork_counting", lambda *a: None)
    assert list(CountCache("o200k_base").counted(long, None, 2, 0.5)) == [1, 2]


def test_count_all_takes_the_workers_it_is_given_and_by_default_one_per_core(monkeypatch, started, seen_here):
    monkeypatch.setattr(tokens, "encoding_workers", lambda: 2)
    CountCache("o200k_base").count_all(TEXTS, workers=1)
    CountCache("o200k_base").count_all(TEXTS, workers=0)  # no fewer than one
    assert started == [] and seen_here == [TEXTS, TEXTS]
    cache = CountCache("o200k_base")
    cache.count_all(TEXTS)
    assert len(started) == 1 and seen_here[2:] == [TEXTS[:2]]
    assert cache.counts == {t: enc(t) for t in TEXTS}


def test_a_child_whose_share_is_empty_is_never_started(started, seen_here):
    texts = ["a" * 10, "b"]
    cache = CountCache("o200k_base")
    assert list(cache.counted(texts, None, 2, 0.99)) == [2]  # 10.9 of 11 characters: all of it here
    assert started == [] and seen_here == [texts]


def test_this_process_counts_its_share_first_and_the_children_the_rest_batch_by_batch(monkeypatch, started, seen_here):
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 1)
    texts = [f"text number {i}" for i in range(12)]
    ends = [0, 3, 6, 6, 9, 12]  # five groups, one of them empty
    cache = CountCache("o200k_base")
    counting = cache.counted(texts, ends, 2, 0.45)
    assert next(counting) == 2  # 71 of 158 characters here: to the end of the group that reaches it
    assert seen_here == [texts[:6]]
    assert set(cache.counts) == set(texts[:6])
    assert list(counting) == [4, 5]  # the child's batches, each as it arrives (the empty group rides along)
    assert seen_here == [texts[:6]]  # the child counted the rest
    assert cache.counts == {t: enc(t) for t in texts}
    assert len(started) == 1 and gone(started[0][0])


def test_three_workers_share_between_this_process_and_two_children(started, seen_here):
    texts = [f"text number {i:03d}" for i in range(9)]
    cache = CountCache("o200k_base")
    assert list(cache.counted(texts, None, 3, 1 / 3)) == [3, 6, 9]
    assert seen_here == [texts[:3]]
    assert cache.counts == {t: enc(t) for t in texts} and list(cache.counts) == texts
    assert len(started) == 2 and all(gone(pid) for pid, _ in started)


@pytest.mark.parametrize(
    "child_lengths",
    [
        lambda self, texts: 1 / 0,  # the child fails: nothing sent, a non-zero exit
        lambda self, texts: [7] * (len(texts) - 1),  # one count too few
        lambda self, texts: [7] * (len(texts) + 1),  # one count too many
    ],
    ids=["fails", "too-few", "too-many"],
)
def test_a_share_whose_child_fails_or_miscounts_is_counted_here(monkeypatch, started, child_lengths):
    in_child(monkeypatch, child_lengths)
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}
    assert len(started) == 1 and gone(started[0][0])  # reaped


def test_after_a_childs_first_bad_batch_its_later_batches_are_counted_here_too(monkeypatch, started, seen_here):
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 1)
    in_child(monkeypatch, lambda self, texts: [7] * (len(texts) + 1))
    texts = [f"text number {i}" for i in range(6)]
    cache = CountCache("o200k_base")
    assert list(cache.counted(texts, None, 2, 0.5)) == [3, 4, 5, 6]
    assert seen_here == [texts[:3], texts[3:4], texts[4:5], texts[5:6]]
    assert cache.counts == {t: enc(t) for t in texts}


def test_a_stuck_child_is_killed_once_its_patience_is_spent_and_its_share_counted_here(monkeypatch, started):
    """A child that inherited a lock held mid-use by another thread of the parent never answers."""
    in_child(monkeypatch, lambda self, texts: time.sleep(120))
    monkeypatch.setattr(tokens, "CHILD_PATIENCE", 1)  # times the few milliseconds this process took
    monkeypatch.setattr(tokens, "CHILD_GRACE_SECONDS", 0.3)
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}
    assert gone(started[0][0], within=0)  # killed and reaped at once, not left sleeping


def test_a_child_sends_every_count_without_waiting_for_this_process_to_read_them():
    """This process reads a child's counts only after counting its own share: a child whose counts
    outgrew the pipe would sit idle until then. 20,000 counts (160 KB) fit in the pipe, so the child
    has sent them all and left before anything is read."""
    texts = [f"text {i}" for i in range(20_000)]
    pid, read = tokens._fork_counting(lambda batch: [3] * len(batch), texts, [(0, len(texts))])
    try:
        deadline = time.monotonic() + 10
        while os.waitpid(pid, os.WNOHANG)[0] == 0:  # not exited: still waiting to write
            assert time.monotonic() < deadline, "the child is still waiting to write its counts"
            time.sleep(0.01)
        assert tokens._receive(read, len(texts), 5.0) == [3] * len(texts)
    finally:
        os.close(read)
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            os.kill(pid, 9)
            os.waitpid(pid, 0)


@pytest.mark.parametrize("refused", ["size", "system"])
def test_a_pipe_that_cannot_be_enlarged_still_carries_the_childs_counts(monkeypatch, started, seen_here, refused):
    """A size the system refuses (OSError), or a system without the call (not Linux): the child then
    waits for its counts to be read, as before, and they still come."""
    if refused == "size":
        monkeypatch.setattr(tokens, "PIPE_BYTES", -1)
    else:
        import fcntl

        monkeypatch.delattr(fcntl, "F_SETPIPE_SZ")
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}
    assert seen_here == [TEXTS[:2]] and started[0] is not None  # the child's counts were used


def test_a_child_is_waited_for_while_it_is_within_its_patience(monkeypatch, started, seen_here):
    real = CountCache._lengths
    in_child(monkeypatch, lambda self, texts: time.sleep(0.5) or real(self, texts))
    monkeypatch.setattr(tokens, "CHILD_GRACE_SECONDS", 10)
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}
    assert seen_here == [TEXTS[:2]]  # the child's counts were used


def test_the_patience_grows_with_the_time_this_process_took_over_its_own_share(monkeypatch, started, seen_here):
    real = CountCache._lengths
    parent = os.getpid()

    def lengths(self, texts):  # here 0.2 s; in the child 0.5 s: within 4 x 0.2 s, with no grace at all
        time.sleep(0.2 if os.getpid() == parent else 0.5)
        return real(self, texts)

    monkeypatch.setattr(CountCache, "_lengths", lengths)
    monkeypatch.setattr(tokens, "CHILD_GRACE_SECONDS", 0)
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}


@pytest.mark.parametrize("broken", ["pipe", "fork"])
def test_without_a_pipe_or_a_fork_every_share_is_counted_here(monkeypatch, started, seen_here, broken):
    def refuse(*a):
        raise OSError("resource temporarily unavailable")

    opened: list[int] = []
    pipe = os.pipe
    monkeypatch.setattr(tokens.os, "pipe", lambda: opened.extend(pipe()) or tuple(opened[-2:]))
    monkeypatch.setattr(tokens.os, broken, refuse)
    cache = CountCache("o200k_base")
    assert list(cache.counted(TEXTS, None, 2, 0.5)) == [2, 4]
    assert cache.counts == {t: enc(t) for t in TEXTS}
    assert seen_here == [TEXTS[:2], TEXTS[2:]]
    assert started == [None]
    for fd in opened:  # a pipe made for a child that never started is closed again
        with pytest.raises(OSError):
            os.fstat(fd)


def test_a_caller_that_stops_early_leaves_no_child_behind(monkeypatch, started):
    in_child(monkeypatch, lambda self, texts: time.sleep(120))
    counting = CountCache("o200k_base").counted(TEXTS, None, 2, 0.5)
    assert next(counting) == 2
    counting.close()
    assert gone(started[0][0])


@pytest.mark.parametrize(
    "sent, expected, patience, got",
    [
        ([2, 5, 9], 2, 1.0, [5, 9]),
        ([2, 5, 9, 2, 4, 4], 2, 1.0, [5, 9]),  # the next batch stays in the pipe
        ([3, 5, 9, 1], 2, 1.0, None),  # it says 3 counts, 2 were expected
        ([1, 5], 2, 1.0, None),
        ([2, 5], 2, 0.1, None),  # the second count never comes
        ([], 1, 0.1, None),  # nothing comes at all
    ],
    ids=["whole", "one-of-two", "too-many", "too-few", "cut-short", "silent"],
)
def test_a_batch_is_read_as_its_length_then_its_counts_and_refused_when_either_is_wrong(sent, expected, patience, got):
    read, write = os.pipe()
    try:
        os.write(write, array("q", sent).tobytes())
        assert tokens._receive(read, expected, patience) == got
    finally:
        os.close(read)
        os.close(write)


def test_a_pipe_closed_before_a_whole_batch_came_is_refused_at_once():
    for sent in ([], [2], [2, 5]):
        read, write = os.pipe()
        os.write(write, array("q", sent).tobytes())
        os.close(write)
        start = time.monotonic()
        assert tokens._receive(read, 2, 30.0) is None
        assert time.monotonic() - start < 10  # not after the patience
        os.close(read)


@pytest.fixture
def reapers(monkeypatch):
    """The threads ``_reap`` starts, as (target, args, name, daemon); each is started for real."""
    started = []
    real = tokens.threading.Thread

    def thread(*, target, args, name, daemon):
        started.append((target, args, name, daemon))
        return real(target=target, args=args, name=name, daemon=daemon)

    monkeypatch.setattr(tokens.threading, "Thread", thread)
    return started


def test_a_finished_child_is_reaped_without_waiting_for_it_to_leave_and_an_unfinished_one_is_killed(reapers):
    """A child that sent every count is reaped by a daemon thread while this process goes on (here it
    is still leaving: it holds on for a moment after its pipe closed); one that did not is killed and
    reaped before ``_reap`` returns."""
    for finished in (True, False):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            time.sleep(3 if finished else 120)
            os._exit(0)
        os.close(write)
        start = time.monotonic()
        tokens._reap((pid, read), finished)
        took = time.monotonic() - start
        with pytest.raises(OSError):
            os.fstat(read)
        if finished:
            assert took < 2.5 and not gone(pid, within=0)  # not waited for: it is still leaving
            assert reapers == [(tokens._wait_for, (pid,), "memlens-reap", True)]
            assert gone(pid, within=30)  # then reaped, no zombie left
        else:
            assert gone(pid, within=0) and took < 60
            assert len(reapers) == 1  # none for the killed one


def test_a_finished_child_that_already_left_is_reaped_at_once_without_a_thread(reapers):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(0)
    os.close(write)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # until it has left, without reaping it
    tokens._reap((pid, read), finished=True)
    assert gone(pid, within=0) and reapers == []


def test_a_reaping_thread_waits_for_its_child_and_minds_none_reaped_elsewhere():
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        time.sleep(0.2)
        os._exit(0)
    tokens._wait_for(pid)
    assert gone(pid, within=0)
    tokens._wait_for(pid)  # reaped already: no error


def test_a_batch_goes_to_one_worker_per_core_where_this_process_can_fork(monkeypatch):
    assert tokens.CAN_FORK == (sys.platform == "linux")  # Linux forks; macOS and Windows count here
    monkeypatch.setattr(tokens, "_cores", lambda: 4)
    monkeypatch.setattr(tokens, "CAN_FORK", True)
    assert tokens.encoding_workers() == 4
    monkeypatch.setattr(tokens, "CAN_FORK", False)
    assert tokens.encoding_workers() == 1


# -- a counter's groups --------------------------------------------------------------------------------


def test_a_counters_groups_are_its_messages_texts_each_role_name_and_tool_field_once(monkeypatch):
    asked = []
    real = CountCache.counted

    def counted(self, texts, ends, workers, share):
        asked.append((list(texts), list(ends), workers, share))
        yield from real(self, texts, ends, workers, share)

    monkeypatch.setattr(CountCache, "counted", counted)
    counter = TokenCounter(MODEL, shared=False, workers=2)
    counter.counts.counts.update({"held already": 2, "assistant": 1})
    call = ToolCall("c1", "lookup", '{"id": 4}')
    groups = [
        [
            Message("user", "hello", "query", 0, name="dana"),
            Message("assistant", "", "tool_call", 1, tool_calls=(call,)),
        ],
        [],
        [
            Message("tool", "held already", "tool_result", 2, name="dana"),
            Message("assistant", "hello", "answer", 3, tool_calls=(call,)),
        ],
    ]
    assert list(counter.counted_groups(groups, own_part=0.5)) == [3]
    # A content is taken each time it is missing; roles, names and tool fields once.
    assert asked == [
        (["hello", "user", "dana", "lookup", '{"id": 4}', "tool", "hello"], [0, 5, 5, 7], 2, 0.25)
    ]  # "assistant" was counted already
    assert counter.counts.counts["hello"] == enc("hello")
    asked.clear()
    assert list(counter.counted_groups(groups)) == [3]  # all counted: nothing asked
    assert asked == []


# -- a replay decides its first turns while the later ones are counted -------------------------------


def _configs():
    from core.memory.config import MemoryConfig

    return [
        MemoryConfig(strategy="dify", window=3, model=MODEL),
        MemoryConfig(strategy="dify", window=50, model=MODEL, context_size=1_200),
        MemoryConfig(strategy="window", window=4, model=MODEL),
        MemoryConfig(strategy="buffer", model=MODEL),
        MemoryConfig(strategy="off", model=MODEL),
    ]


@pytest.mark.parametrize("conversation", ["linear", "branched"])
def test_summaries_counted_across_processes_batch_by_batch_are_the_summaries_counted_here(
    monkeypatch, started, conversation
):
    from benchmarks.workload import build_conversation
    from core.memory.replay import Replay

    conv = build_conversation(300) if conversation == "linear" else branched(300)
    expected = {
        c.label(): Replay(conv, c, counter=TokenCounter(MODEL, shared=False, workers=1)).summaries() for c in _configs()
    }
    assert started == []
    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 500)  # many batches
    for config in _configs():
        replay = Replay(conv, config, counter=TokenCounter(MODEL, shared=False, workers=2))
        assert replay.summaries() == expected[config.label()], config.label()
        ledger = replay.ledger(replay.summaries()[-1].turn)
        assert ledger.history_tokens == replay.summaries()[-1].history_tokens
    assert len(started) == len(_configs()) and all(child and gone(child[0]) for child in started)


def _long(branching: bool):
    """The benchmark's conversation of 200 turns; ``branching``: turn 120 answers turn 118 again (a
    regenerated reply), so the replay walks the tree instead of deciding one chain in columns."""
    from dataclasses import replace

    from benchmarks.workload import build_conversation

    conv = build_conversation(200)
    if branching:
        conv.turns[120] = replace(conv.turns[120], parent_id=conv.turns[118].id)
    return conv


def test_a_branched_replay_decides_its_first_turns_before_the_last_are_counted(monkeypatch, started):
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay
    from core.memory.strategies.dify import DifyStrategy

    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 500)
    events: list[str] = []
    receive, window = tokens._receive, DifyStrategy.window
    monkeypatch.setattr(tokens, "_receive", lambda *a: events.append("counts came") or receive(*a))
    monkeypatch.setattr(DifyStrategy, "window", lambda *a: events.append("decided") or window(*a))
    Replay(
        _long(branching=True),
        MemoryConfig(strategy="dify", window=5, model=MODEL),
        counter=TokenCounter(MODEL, shared=False, workers=2),
    ).summaries()
    assert events.count("decided") == 200 and events.count("counts came") > 2
    first_decided, last_came = events.index("decided"), len(events) - 1 - events[::-1].index("counts came")
    assert first_decided < events.index("counts came") < last_came  # interleaved, not one after the other
    assert events[-1] == "decided"


def test_a_chain_lays_out_its_windows_while_the_children_count_and_decides_once_all_came(monkeypatch, started):
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay
    from core.memory.strategies.dify import DifyStrategy

    monkeypatch.setattr(tokens, "STREAM_BATCH_CHARS", 500)
    events: list[str] = []
    receive, windows, budget = tokens._receive, DifyStrategy.window, DifyStrategy.budget_limit
    monkeypatch.setattr(tokens, "_receive", lambda *a: events.append("counts came") or receive(*a))
    # The window rule, read once over the chain's columns.
    monkeypatch.setattr(DifyStrategy, "window", lambda *a: events.append("windows") or windows(*a))
    monkeypatch.setattr(DifyStrategy, "budget_limit", lambda *a: events.append("budget") or budget(*a))
    summaries = Replay(
        _long(branching=False),
        MemoryConfig(strategy="dify", window=5, model=MODEL, context_size=900, plugin_token_counting=True),
        counter=TokenCounter(MODEL, shared=False, workers=2),
    ).summaries()
    assert len(started) == 1 and events.count("counts came") > 2 and len(summaries) == 200
    assert events[0] == "windows" and events.count("windows") == 1  # laid out before the first counts came
    assert events.index("budget") > len(events) - 1 - events[::-1].index("counts came")  # the cuts need every count


@pytest.mark.parametrize("branching", [False, True])
def test_a_replay_that_fails_midway_leaves_no_counting_child_behind(monkeypatch, started, branching):
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay
    from core.memory.strategies.dify import DifyStrategy

    in_child(monkeypatch, lambda self, texts: time.sleep(120))

    def fail(*a):
        raise RuntimeError("a strategy failed")

    monkeypatch.setattr(DifyStrategy, "window", fail)
    replay = Replay(
        _long(branching),
        MemoryConfig(strategy="dify", window=5, model=MODEL),
        counter=TokenCounter(MODEL, shared=False, workers=2),
    )
    with pytest.raises(RuntimeError):
        replay.summaries()
    assert len(started) == 1 and gone(started[0][0])


@pytest.mark.parametrize("branching, share", [(True, 0.25), (False, 0.45)])
def test_a_replay_takes_the_share_of_the_counting_its_other_work_leaves_room_for(monkeypatch, branching, share):
    """A walk decides every turn meanwhile (half an equal share); a chain only lays out its columns (0.9)."""
    from core.memory import chain_walk
    from core.memory import replay as replay_module
    from core.memory.config import MemoryConfig
    from core.memory.replay import Replay

    shares = []
    real = CountCache.counted

    def counted(self, texts, ends, workers, share):
        shares.append((workers, share))
        yield from real(self, texts, ends, workers, share)

    monkeypatch.setattr(CountCache, "counted", counted)
    Replay(
        _long(branching),
        MemoryConfig(strategy="buffer", model=MODEL),
        counter=TokenCounter(MODEL, shared=False, workers=2),
    ).summaries()
    assert (replay_module.OWN_PART, chain_walk.CHAIN_OWN_PART) == (0.5, 0.9) and shares == [(2, share)]


def test_reaping_a_child_the_system_reaped_already_is_no_error():
    """With SIGCHLD ignored the kernel reaps a child itself: it can be neither signalled nor waited for."""
    import signal

    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        for finished in (True, False):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                os._exit(0)
            os.close(write)
            for _ in range(1000):  # until the kernel has reaped it
                if gone(pid):
                    break
                time.sleep(0.01)
            tokens._reap((pid, read), finished)
            with pytest.raises(OSError):
                os.fstat(read)
    finally:
        signal.signal(signal.SIGCHLD, before)


def test_reaping_never_signals_a_process_group(monkeypatch):
    """A pid of 0 or less names a process group: a child's pid never is one."""
    monkeypatch.setattr(tokens.os, "kill", lambda *a: pytest.fail("signalled"))
    monkeypatch.setattr(tokens.os, "waitpid", lambda *a: pytest.fail("waited"))
    for pid in (0, -1):
        read, write = os.pipe()
        tokens._reap((pid, read), finished=False)
        os.close(write)
        with pytest.raises(OSError):
            os.fstat(read)
