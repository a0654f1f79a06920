"""Token counting and model facts, offline.

Counts are exact where an exact tokenizer exists (OpenAI models through tiktoken, with the
encoding files litellm bundles) and marked *estimated* everywhere else (cl100k_base stands in).
Chat overhead follows OpenAI's published recipe, which Dify's OpenAI plugin also counts with: a
message costs 3 + its role's tokens + its content's tokens (+ the name's tokens + 1 with a
``name``), an assistant message's tool calls add their function names and arguments, and a
whole prompt (or any list counted as one) adds 3 for the reply priming.

Model facts (context size, max output) come from litellm's bundled model map, read as JSON so
that ``import litellm`` (about 3 s) never happens on this path.

Counts are remembered per (encoding, text) for the whole process, so replays, compare configs and
recorded turns on models that share an encoding tokenise each text once; long batches (imports,
replays of long conversations) are split across every core in forked processes, which send their
counts batch by batch, so a replay decides its first turns while the later ones are counted. Not
threads: tiktoken lets go of Python's global lock while it encodes, but a chat message takes it a
few microseconds, and two threads handing the lock back and forth for every message took as long
as one thread on all of them (Python 3.11, tiktoken 0.14).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from array import array
from bisect import bisect_left
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Callable, Generator, Iterable, Iterator, Sequence

from .conversation import Conversation, Message

MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3
#: Dify's budget when a model's context size is unknown (DEFAULT_MEMORY_MAX_TOKEN_LIMIT).
DEFAULT_HISTORY_BUDGET = 2000

DEMO_MODEL = "memlens/demo"
#: The demo model is ours: we define its tokenizer (o200k_base), so its counts are exact.
DEMO_MODEL_FACTS = {"context_size": 16384, "max_output": 1024}

_PROVIDER_PREFIXES = ("openai/", "azure/", "text-completion-openai/", "openai_like/")
_BUNDLED = ("cl100k_base", "o200k_base", "p50k_base", "p50k_edit", "o200k_harmony")


def _litellm_dir() -> str | None:
    # find_spec on the top-level package locates it without executing litellm/__init__.
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return None


def _ensure_tiktoken_cache() -> None:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    base = _litellm_dir()
    if base:
        folder = os.path.join(base, "litellm_core_utils", "tokenizers")
        if os.path.isdir(folder):
            os.environ["TIKTOKEN_CACHE_DIR"] = folder


@lru_cache(maxsize=None)
def _encoding(name: str):
    _ensure_tiktoken_cache()
    import tiktoken

    return tiktoken.get_encoding(name)


def _strip_provider(model: str) -> str:
    for prefix in _PROVIDER_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


@lru_cache(maxsize=None)
def resolve_encoding(model: str) -> tuple[str, bool]:
    """(encoding name, exact?) for a model name. Unknown or non-OpenAI models → cl100k, estimated."""
    if model == DEMO_MODEL:
        return "o200k_base", True
    if "/" in _strip_provider(model):
        return "cl100k_base", False
    _ensure_tiktoken_cache()
    import tiktoken.model

    try:
        name = tiktoken.model.encoding_name_for_model(_strip_provider(model))
    except KeyError:
        return "cl100k_base", False
    if name not in _BUNDLED:
        return "cl100k_base", False
    return name, True


#: The text a process's count cache may hold per encoding before its oldest entries are let go
#: (the cache holds the texts themselves, so this bounds its memory in a long-running service).
COUNT_CACHE_CHARS = 64_000_000
#: A batch is split across processes only when it is at least this long: a fork costs a few
#: milliseconds (more in a larger process), the time tiktoken takes on about 200,000 characters,
#: and only half the batch's time is saved on two cores.
PARALLEL_MIN_CHARS = 1_000_000
#: A counting child that has not answered this many times as long as the parent took over its own
#: share, plus CHILD_GRACE_SECONDS, is taken to be stuck — on a lock another thread of the parent
#: held mid-use, which fork copies locked — and is killed; the parent then counts that share itself.
CHILD_PATIENCE = 4
CHILD_GRACE_SECONDS = 1.0
#: Whether this process may fork counting children: Linux's fork, not macOS's (whose system
#: libraries are not safe to use in a forked child) nor Windows, which has none.
CAN_FORK = sys.platform == "linux" and hasattr(os, "fork")


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def encoding_workers() -> int:
    """The processes a long batch is split across by default: one per core where this process
    can fork counting children, else one (this process alone)."""
    return _cores() if CAN_FORK else 1


#: A counting child sends its counts in batches of about this much text (a few milliseconds of
#: tiktoken's time), so whoever waits for the counts goes on with the first ones while the child
#: counts the rest.
STREAM_BATCH_CHARS = 100_000
#: How much a counting child's pipe holds (:func:`_fork_counting`): Linux's default ceiling for it.
PIPE_BYTES = 1 << 20


def _plan(bounds: Sequence[int], workers: int, own_share: float) -> tuple[int, list[list[int]]]:
    """How a batch of groups of texts is shared: ``bounds[g]`` is how much text groups ``0..g-1``
    hold (``bounds[0]`` is 0). This process counts groups ``0..own-1`` — its ``own_share`` of
    the text, ending on a group's end; the rest goes to ``workers - 1`` children in contiguous
    shares of about equal text, each as the group numbers its batches end at (a batch holds
    about STREAM_BATCH_CHARS of text; the last child's last batch ends at the last group).
    Returns ``own`` and the children's batch ends; a child with no text gets none."""
    n, total = len(bounds) - 1, bounds[-1]
    own = min(n, max(1, bisect_left(bounds, own_share * total)))
    children: list[list[int]] = []
    start, rest, per_child = own, total - bounds[own], workers - 1
    for i in range(1, per_child + 1):
        end = n if i == per_child else max(start, bisect_left(bounds, bounds[own] + i * rest / per_child))
        batches = []
        while start < end:
            start = min(end, max(start + 1, bisect_left(bounds, bounds[start] + STREAM_BATCH_CHARS)))
            batches.append(start)
        children.append(batches)
    return own, children


def _fork_counting(
    lengths: Callable[[list[str]], list[int]], texts: list[str], spans: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """Starts a child that counts ``texts[lo:hi]`` for each span with ``lengths`` and writes the
    counts to a pipe, span after span, as machine integers (each span's number of counts first);
    the child shares the parent's memory, so no text is sent to it. The child's pid and the
    pipe's reading end, or None when no child could start — always where this process may not fork
    (:data:`CAN_FORK`: Windows and macOS), so the caller counts every share itself."""
    if not CAN_FORK:
        return None
    import fcntl  # POSIX only, like fork: imported here so that this module imports everywhere

    try:
        read, write = os.pipe()
    except OSError:
        return None
    # Room in the pipe for every count the child sends (a megabyte: 131,072 counts, where the
    # default 64 KiB held 8,191), so it finishes counting while this process is busy with its own
    # share and its columns, instead of waiting for them to be read. Linux only; elsewhere the
    # child waits, as before.
    with suppress(OSError, AttributeError):
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: count, send, and leave at once, running none of the parent's cleanup
        status = 1
        try:
            os.close(read)
            for lo, hi in spans:
                counts = lengths(texts[lo:hi])
                data = memoryview(array("q", [len(counts), *counts]).tobytes())  # how many, then the counts
                while data:
                    data = data[os.write(write, data) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def _receive(read: int, expected: int, patience: float) -> list[int] | None:
    """The next batch of counts from a counting child's pipe, or None when it was not ``expected``
    counts long, the pipe closed first or nothing came for ``patience`` seconds."""
    import select  # waits on a pipe: POSIX only, as the counting children are

    deadline = time.monotonic() + patience
    got = bytearray()
    for want in (8, 8 * (expected + 1)):  # the batch's number of counts, then the counts
        while len(got) < want:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read, want - len(got)) if ready else b""
            if not chunk:
                return None
            got += chunk
        counts = array("q")
        counts.frombytes(got)
        if counts[0] != expected:
            return None
    return counts.tolist()[1:]


def _reap(child: tuple[int, int], finished: bool) -> None:
    """Closes a counting child's pipe and reaps it, killing it first unless it ``finished`` sending
    its counts. A finished child that is still leaving (the system tearing down its copy of this
    process's memory takes a few milliseconds) is waited for by a thread, so the caller goes on at
    once; a killed one is waited for here."""
    import signal  # SIGKILL is POSIX only, as the counting children are

    pid, read = child
    os.close(read)
    if pid <= 0:  # never a child's pid: 0 or less would signal, or wait for, a whole process group
        return
    with suppress(ProcessLookupError, ChildProcessError):  # reaped already (SIGCHLD ignored)
        if not finished:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        elif os.waitpid(pid, os.WNOHANG)[0] == 0:  # still leaving
            threading.Thread(target=_wait_for, args=(pid,), name="memlens-reap", daemon=True).start()


def _wait_for(pid: int) -> None:
    with suppress(ChildProcessError):  # reaped elsewhere meanwhile
        os.waitpid(pid, 0)


class CountCache:
    """Token counts of texts under one encoding, shared by every counter of the process."""

    def __init__(self, encoding_name: str, limit_chars: int = COUNT_CACHE_CHARS):
        self.encoding_name = encoding_name
        self.counts: dict[str, int] = {}
        self.limit_chars = limit_chars
        self._chars = 0
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        n = self.counts.get(text)
        if n is None:
            n = len(_encoding(self.encoding_name).encode_ordinary(text)) if text else 0
            self._remember((text,), (n,))
        return n

    def count_all(self, texts: Iterable[str], workers: int | None = None) -> None:
        """Counts every text not counted yet, splitting a long batch across ``workers`` processes
        (default: :func:`encoding_workers`): this one and a forked child per other share."""
        counts = self.counts
        missing = list(dict.fromkeys(t for t in texts if t and t not in counts))
        if missing:
            workers = encoding_workers() if workers is None else max(1, workers)
            for _ in self.counted(missing, None, workers, 1 / workers):
                pass

    def counted(self, texts: list[str], ends: Sequence[int] | None, workers: int, own_share: float) -> Iterator[int]:
        """Counts ``texts`` (none counted yet) in groups — group ``g`` is
        ``texts[ends[g]:ends[g + 1]]``, ``ends[0]`` is 0; each text a group of its own when
        ``ends`` is None — yielding, as it goes, how many
        leading groups are counted, up to all of them. A batch of PARALLEL_MIN_CHARS or more is
        shared across ``workers`` processes: this one counts its ``own_share`` of the text first,
        forked children count the rest and send their counts batch by batch, so the caller can use
        the first groups while the children still count the later ones. A child that fails,
        miscounts or stays silent CHILD_PATIENCE times as long as this process took over its own
        share (plus CHILD_GRACE_SECONDS) has its remaining groups counted here; every child is
        reaped, also when the caller stops early."""
        n = len(texts) if ends is None else len(ends) - 1
        here = workers <= 1 or n < 2  # all counted here (no sizes to share by), or as long as it is
        if not here:
            # Machine integers: a list of int objects would hold about as much as the batch's texts.
            sizes = array("q", accumulate(map(len, texts), initial=0))
            if ends is None:
                ends, bounds = range(len(texts) + 1), sizes
            else:
                bounds = array("q", [sizes[e] for e in ends])
            here = bounds[-1] < PARALLEL_MIN_CHARS
        if here:
            self._remember(texts, self._lengths(texts))
            yield n
            return
        assert ends is not None  # a shared batch has its group ends (made above when none were given)
        own, plans = _plan(bounds, workers, own_share)
        del sizes, bounds
        _encoding(self.encoding_name)  # loaded before forking, so every child has it
        children = []  # each child's batches, as (groups counted after it, its first text, its end)
        lo = own
        for batch_ends in plans:
            spans = []
            for hi in batch_ends:
                spans.append((hi, ends[lo], ends[hi]))
                lo = hi
            child = _fork_counting(self._lengths, texts, [(a, b) for _, a, b in spans]) if spans else None
            children.append((spans, child))
        alive = [child for _, child in children if child is not None]
        try:
            start = time.monotonic()
            mine = texts[: ends[own]]
            self._remember(mine, self._lengths(mine))
            del mine
            patience = CHILD_PATIENCE * (time.monotonic() - start) + CHILD_GRACE_SECONDS
            yield own
            for spans, child in children:
                for reached, first, end in spans:
                    batch = texts[first:end]
                    found = _receive(child[1], len(batch), patience) if child in alive else None
                    if found is None and child in alive:
                        alive.remove(child)
                        _reap(child, finished=False)
                    self._remember(batch, found if found is not None else self._lengths(batch))
                    if reached == n:  # all counted: the batch is let go before the caller goes on
                        texts = ends = batch = None  # type: ignore[assignment]
                    yield reached
                if child in alive:
                    alive.remove(child)
                    _reap(child, finished=True)
        finally:
            for child in alive:
                _reap(child, finished=False)

    def remember(self, found: dict[str, int]) -> None:
        """Counts known from elsewhere (stored with the messages): texts not held yet are taken
        as counted, without encoding them."""
        counts = self.counts
        new = [t for t in found if t not in counts]
        if new:
            self._remember(new, [found[t] for t in new])

    def _lengths(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts``, in one loop that never enters Python per text: tiktoken's
        compiled encoder straight away (its Python wrapper adds about a tenth to the encoding of
        chat-sized texts). A batch holding text the compiled encoder refuses (lone surrogates)
        goes through the wrapper, which repairs such text as tiktoken always does."""
        encoding = _encoding(self.encoding_name)
        core = getattr(encoding, "_core_bpe", None)
        if core is not None:
            try:
                return list(map(len, map(core.encode_ordinary, texts)))
            except UnicodeEncodeError:
                pass
        return list(map(len, map(encoding.encode_ordinary, texts)))

    def _remember(self, texts: Sequence[str], lengths: Sequence[int]) -> None:
        """Stores ``lengths[i]`` as the count of ``texts[i]`` (straight from the two lists: a
        dictionary in between would double a long batch's memory for a moment)."""
        with self._lock:
            counts = self.counts
            counts.update(zip(texts, lengths))
            # A text two threads both counted is tallied twice: the tally only ever runs ahead of
            # what is held, so the cache lets go a little early, never late.
            self._chars += sum(map(len, texts))
            if self._chars > self.limit_chars:
                # Oldest first (dicts keep insertion order), down to half the limit.
                for text in list(counts):
                    if self._chars <= self.limit_chars // 2:
                        break
                    self._chars -= len(text)
                    del counts[text]
                if not counts:
                    self._chars = 0


_caches: dict[str, CountCache] = {}
_caches_lock = threading.Lock()


def remember_counts(encoding_name: str, found: dict[str, int]) -> None:
    """Take stored counts of texts under an encoding this project counts with (others are ignored)."""
    if encoding_name in _BUNDLED and found:
        count_cache(encoding_name).remember(found)


def count_cache(encoding_name: str) -> CountCache:
    """The process's count cache for an encoding."""
    with _caches_lock:
        cache = _caches.get(encoding_name)
        if cache is None:
            cache = _caches[encoding_name] = CountCache(encoding_name)
        return cache


def message_token_sums(conversation: Conversation, counter: TokenCounter, position: int) -> Sequence[int]:
    """``sums[k]``: the tokens of the conversation's first ``k`` messages, position by position, for every
    message of the turns before ``position`` (and maybe more). Kept with the conversation per counting
    model and extended as turns are added (turns are only ever added), so the ledgers of every turn and
    node share one pass: e.g. turns of 2 and 3 messages of 10 tokens each give ``[0, 10, 20, 30, 40, 50]``."""
    sums = conversation._token_sums.get(counter.model)
    if sums is None:
        sums = conversation._token_sums[counter.model] = [array("q", (0,)), 0]  # totals, turns summed
    totals, done = sums
    turns = conversation.turns
    if done < position:
        total = totals[-1]
        for p in range(done, len(turns)):
            for n in counter.message_counts(turns[p].messages):
                total += n
                totals.append(total)
        sums[1] = len(turns)
    return totals


#: The model tokens are counted for when a config, a ledger or a call names none.
DEFAULT_MODEL = "gpt-4o-mini"


class TokenCounter:
    """Counts tokens for one model; counts come from the process's cache for its encoding (a
    private cache with ``shared=False``, for measuring tokenisation from cold). ``workers`` caps
    the processes a long batch is split across (default: :func:`encoding_workers`)."""

    def __init__(self, model: str = DEFAULT_MODEL, *, shared: bool = True, workers: int | None = None):
        self.model = model
        self.workers = workers
        self.encoding_name, self.exact = resolve_encoding(model)
        self.counts = count_cache(self.encoding_name) if shared else CountCache(self.encoding_name)
        self._counts = self.counts.counts  # looked up on every count

    def text(self, text: str) -> int:
        n = self._counts.get(text)
        return n if n is not None else self.counts.count(text)

    def prepare(self, messages: Iterable[Message], workers: int | None = None) -> None:
        """Counts every text of these messages ahead of :meth:`message`, in one batch across
        the cores (for long histories: imports, stored ledgers)."""
        for _ in self.counted_groups(([m] for m in messages), workers):
            pass

    def counted_groups(
        self, groups: Iterable[Sequence[Message]], workers: int | None = None, own_part: float = 1.0
    ) -> Generator[int, None, None]:
        """Counts every text of these groups of messages (a conversation's turns, say) in one
        batch across the cores, yielding as it goes how many leading groups are counted
        (:meth:`CountCache.counted`): a long replay goes on with its first turns while their
        successors are still counted. This process counts ``own_part`` of an equal share of the
        text itself (less than 1 when it has other work to do meanwhile); texts already counted
        are skipped, so a warm cache costs one look-up per text."""
        texts, ends = self._uncounted(groups)
        if not texts:
            yield len(ends) - 1
            return
        workers = self.workers if workers is None else workers
        workers = encoding_workers() if workers is None else max(1, workers)
        counting = self.counts.counted(texts, ends, workers, own_part / workers)
        del texts, ends  # held by the counting alone, which lets them go once all is counted
        yield from counting

    def _uncounted(self, groups: Iterable[Sequence[Message]]) -> tuple[list[str], array]:
        """The texts of these groups not counted yet, in order, and where each group's end: group ``g`` is
        ``texts[ends[g]:ends[g + 1]]``."""
        counts = self._counts
        texts: list[str] = []
        ends = array("q", (0,))  # machine integers: no int object per group
        # Roles, names and tool fields repeat from message to message: each is taken once. A
        # content is taken each time it is missing (a set of every content would hold as much
        # as the batch; a repeated message is rare, and counting it twice costs only that).
        seen: set[str] = set()

        def add(text: str) -> None:
            if text and text not in counts and text not in seen:
                seen.add(text)
                texts.append(text)

        for msgs in groups:
            for m in msgs:
                text = m.content  # inline for content and role, which every message has
                if text and text not in counts:
                    texts.append(text)
                role = m.role
                if role not in seen:  # (one look-up a message once the role is seen, counted or not)
                    seen.add(role)
                    if role not in counts:
                        texts.append(role)
                if m.extra is not None:  # a name or tool calls, maybe (most messages have neither)
                    if m.name:
                        add(m.name)
                    for call in m.tool_calls:
                        add(call.name)
                        add(call.arguments)
            ends.append(len(texts))
        return texts, ends

    def message(self, message: Message) -> int:
        n = MESSAGE_OVERHEAD + self.text(message.role) + self.text(message.content)
        return n if message.extra is None else n + self._extras(message)

    def _extras(self, message: Message) -> int:
        """The tokens a message's name and tool calls add to its role and content."""
        n = NAME_OVERHEAD + self.text(message.name) if message.name else 0
        for call in message.tool_calls:
            n += self.text(call.name) + self.text(call.arguments)
        return n

    def messages(self, messages: Sequence[Message]) -> tuple[int, ...]:
        """:meth:`message` of each message."""
        return tuple(self.message_counts(messages))

    def message_list(self, messages: Iterable[Message]) -> list[int]:
        """:meth:`message` of each message, as a list (see :meth:`message_counts`)."""
        return list(self.message_counts(messages))

    def message_counts(self, messages: Iterable[Message]) -> Iterator[int]:
        """:meth:`message` of each message, in turn; a message whose role and content are counted
        already costs two look-ups, and its name and tool fields when it has ``extra`` (a replay
        asks this of every message of a conversation, in long batches)."""
        get, extras = self._counts.get, self._extras
        for m in messages:
            role, content = get(m.role), get(m.content)
            if role is None or content is None:
                yield self.message(m)
            elif m.extra is None:  # no name, no tool calls: most messages
                yield MESSAGE_OVERHEAD + role + content
            else:
                yield MESSAGE_OVERHEAD + role + content + extras(m)

    def chat(self, role: str, content: str, name: str | None = None) -> int:
        n = MESSAGE_OVERHEAD + self.text(role) + self.text(content)
        if name:
            n += NAME_OVERHEAD + self.text(name)
        return n

    def prompt(self, messages: Iterable[Message]) -> int:
        return REPLY_PRIMING + sum(self.message(m) for m in messages)

    def describe(self) -> str:
        return f"{self.encoding_name}, {'exact' if self.exact else 'estimated'}"


@lru_cache(maxsize=None)
def _counter(model: str) -> TokenCounter:
    return TokenCounter(model)


def counter_for(model: str) -> TokenCounter:
    """A shared counter per model, so a text is encoded once per process."""
    return _counter(model)


@dataclass(frozen=True)
class ModelFacts:
    model: str
    context_size: int | None
    max_output: int | None
    known: bool
    source: str  # "litellm model map", "MemLens demo model" or "unknown"


@lru_cache(maxsize=1)
def _model_map() -> dict:
    base = _litellm_dir()
    if not base:
        return {}
    path = os.path.join(base, "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    data.pop("sample_spec", None)
    return data


def model_facts(model: str) -> ModelFacts:
    """Context size and max output of a model from litellm's bundled map; unknown → None."""
    if model == DEMO_MODEL:
        return ModelFacts(
            model, DEMO_MODEL_FACTS["context_size"], DEMO_MODEL_FACTS["max_output"], True, "MemLens demo model"
        )
    for entry in _map_entries(model):
        context = entry.get("max_input_tokens") or entry.get("max_tokens")
        output = entry.get("max_output_tokens") or None
        if context:
            return ModelFacts(model, int(context), int(output) if output else None, True, "litellm model map")
    return ModelFacts(model, None, None, False, "unknown")


def _map_entries(model: str) -> Iterator[dict]:
    """litellm's bundled map's entries for a model, in the order they are looked up by: its name,
    without an OpenAI-style prefix, then after its first provider."""
    table = _model_map()
    for name in (model, _strip_provider(model), model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, dict):
            yield entry


def _map_says(model: str, feature: str) -> bool | None:
    """What the map's first entry for a model says of its ``feature`` (a ``supports_…`` key): None when
    the map does not list the model or does not say."""
    said = next((entry.get(feature) for entry in _map_entries(model)), None)
    return None if said is None else bool(said)


def model_supports_vision(model: str) -> bool:
    """Whether a model takes images, from litellm's bundled map (unknown models and the demo
    model: no — Dify's filter then sends them text only)."""
    return model != DEMO_MODEL and bool(_map_says(model, "supports_vision"))


def model_supports_tool_calls(model: str) -> bool | None:
    """Whether a model calls tools, from litellm's bundled map (``supports_function_calling``);
    None when the map does not know the model or does not say (the demo model calls none)."""
    return False if model == DEMO_MODEL else _map_says(model, "supports_function_calling")


# -- LangChain's counters (trim_messages' token_counter, ConversationSummaryBufferMemory's LLM) -------

#: langchain-openai counts a tool result's ``tool_call_id`` as 3 tokens (its own approximation).
TOOL_CALL_ID_TOKENS = 3
#: ``count_tokens_approximately``'s defaults: characters per token and tokens added per message.
APPROX_CHARS_PER_TOKEN = 4
APPROX_TOKENS_PER_MESSAGE = 3


#: Every special token of an encoding begins so (``<|endoftext|>``): a text without it encodes alike
#: whether special tokens are allowed or not.
SPECIAL_TOKEN_START = "<|"


def count_allowing_special(encoding_name: str, text: str) -> int:
    """Tokens of ``text`` as a tokenizer counts that allows every special token (tiktoken's ``encode(text,
    allowed_special="all")``, LlamaIndex's global tokenizer): ``"<|endoftext|>"`` is 1 token, not the 6 of
    its characters. Texts without one are the process's cached counts."""
    if SPECIAL_TOKEN_START not in text:
        return count_cache(encoding_name).count(text)
    return len(_encoding(encoding_name).encode(text, allowed_special="all"))


def chat_model_message_tokens(counter: TokenCounter, message: Message) -> int:
    """One message as langchain-openai's ``ChatOpenAI.get_num_tokens_from_messages`` counts it: OpenAI's
    recipe (:meth:`TokenCounter.message`) plus :data:`TOOL_CALL_ID_TOKENS` for a tool result. Every
    list it counts adds :data:`REPLY_PRIMING` once."""
    n = counter.message(message) + (TOOL_CALL_ID_TOKENS if message.tool_call_id else 0)
    # The recipe counts the role; add it only where TokenCounter does not count it itself.
    return n + counter.text(message.role) - (counter.chat(message.role, "") - MESSAGE_OVERHEAD)


def approximate_message_tokens(message: Message) -> int:
    """One message as langchain-core's ``count_tokens_approximately`` counts it (defaults): the
    characters of its content, role (OpenAI's name for it), name, tool calls (as LangChain prints
    them) and tool_call_id, 4 to a token rounded up, plus 3. A list is the sum, nothing added."""
    chars = len(message.content) + len(message.role) + len(message.name or "")
    if message.tool_calls:
        calls = [
            {"name": c.name, "args": _arguments(c.arguments), "id": c.id, "type": "tool_call"}
            for c in message.tool_calls
        ]
        chars += len(repr(calls))
    if message.tool_call_id:
        chars += len(message.tool_call_id)
    return -(-chars // APPROX_CHARS_PER_TOKEN) + APPROX_TOKENS_PER_MESSAGE


def _arguments(text: str):
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
