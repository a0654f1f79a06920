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
replays of long conversations) are split across every core in forked processes. Not threads:
tiktoken lets go of Python's global lock while it encodes, but a chat message takes it a few
microseconds, and two threads handing the lock back and forth for every message took as long as
one thread on all of them (Python 3.11, tiktoken 0.14).
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import sys
import threading
import time
from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from .conversation import Message

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
            return model[len(prefix):]
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


def _shares(texts: list[str], chars: int, workers: int) -> list[list[str]]:
    """``texts`` (``chars`` characters in all) in at most ``workers`` contiguous shares of about
    equal text: a share ends on the text that brings it to its part of the whole; the last takes
    whatever is left."""
    shares: list[list[str]] = []
    share: list[str] = []
    size, target = 0, chars / workers
    for t in texts:
        share.append(t)
        size += len(t)
        if size >= target and len(shares) < workers - 1:
            shares.append(share)
            share, size = [], 0
    shares.append(share)
    return shares


def _fork_counting(lengths: Callable[[list[str]], list[int]], texts: list[str]) -> tuple[int, int] | None:
    """Starts a child that counts ``texts`` with ``lengths`` and writes the counts to a pipe, as
    machine integers; the child shares the parent's memory, so nothing is sent to it. The child's
    pid and the pipe's reading end, or None when no child could be started."""
    try:
        read, write = os.pipe()
    except OSError:
        return None
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
            data = memoryview(array("q", lengths(texts)).tobytes())
            while data:
                data = data[os.write(write, data):]
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def _collect(child: tuple[int, int], expected: int, deadline: float) -> list[int] | None:
    """A counting child's counts, or None when it failed, sent the wrong number of counts or was
    still silent at ``deadline`` (then it is killed). The child is always reaped."""
    pid, read = child
    chunks: list[bytes] = []
    finished = False
    try:
        while True:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(read, 1 << 20)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if not finished or status != 0:
        return None
    counts = array("q")
    counts.frombytes(b"".join(chunks))
    return counts.tolist() if len(counts) == expected else None


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
        if not missing:
            return
        workers = encoding_workers() if workers is None else max(1, workers)
        chars = sum(map(len, missing))
        if workers == 1 or chars < PARALLEL_MIN_CHARS:
            self._remember(missing, self._lengths(missing))
            return
        shares = _shares(missing, chars, workers)
        _encoding(self.encoding_name)  # loaded before forking, so every child has it
        children = [_fork_counting(self._lengths, s) for s in shares[1:]]
        start = time.monotonic()
        self._remember(shares[0], self._lengths(shares[0]))
        deadline = time.monotonic() + CHILD_PATIENCE * (time.monotonic() - start) + CHILD_GRACE_SECONDS
        for s, child in zip(shares[1:], children):
            found = _collect(child, len(s), deadline) if child is not None else None
            self._remember(s, found if found is not None else self._lengths(s))

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


class TokenCounter:
    """Counts tokens for one model; counts come from the process's cache for its encoding (a
    private cache with ``shared=False``, for measuring tokenisation from cold). ``workers`` caps
    the processes a long batch is split across (default: :func:`encoding_workers`)."""

    def __init__(self, model: str = "gpt-4o-mini", *, shared: bool = True, workers: int | None = None):
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
        the cores (for long conversations: replays, imports). Texts already counted are skipped
        here, so a warm cache costs one look-up per message."""
        counts = self._counts
        missing: list[str] = []
        add = missing.append
        roles: set[str] = set()  # a role once, not once per message (a long batch's list would double)
        for m in messages:
            if m.content not in counts:
                add(m.content)
            if m.role not in counts and m.role not in roles:
                roles.add(m.role)
                add(m.role)
            if m.name:
                add(m.name)
            for call in m.tool_calls:
                add(call.name)
                add(call.arguments)
        if missing:
            self.counts.count_all(missing, self.workers if workers is None else workers)

    def message(self, message: Message) -> int:
        n = MESSAGE_OVERHEAD + self.text(message.role) + self.text(message.content)
        if message.name:
            n += NAME_OVERHEAD + self.text(message.name)
        for call in message.tool_calls:
            n += self.text(call.name) + self.text(call.arguments)
        return n

    def messages(self, messages: Iterable[Message]) -> tuple[int, ...]:
        """:meth:`message` of each message; a message with neither a name nor tool calls whose
        role and content are counted already costs two look-ups (a replay asks this of every turn)."""
        counts, message = self._counts, self.message
        out = []
        for m in messages:
            role, content = counts.get(m.role), counts.get(m.content)
            if role is None or content is None or m.name or m.tool_calls:
                out.append(message(m))
            else:
                out.append(MESSAGE_OVERHEAD + role + content)
        return tuple(out)

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
        return ModelFacts(model, DEMO_MODEL_FACTS["context_size"], DEMO_MODEL_FACTS["max_output"], True,
                          "MemLens demo model")
    table = _model_map()
    candidates = [model, _strip_provider(model)]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict):
            context = entry.get("max_input_tokens") or entry.get("max_tokens")
            output = entry.get("max_output_tokens") or None
            if context:
                return ModelFacts(model, int(context), int(output) if output else None, True,
                                  "litellm model map")
    return ModelFacts(model, None, None, False, "unknown")


def model_supports_vision(model: str) -> bool:
    """Whether a model takes images, from litellm's bundled map (unknown models and the demo
    model: no — Dify's filter then sends them text only)."""
    if model == DEMO_MODEL:
        return False
    table = _model_map()
    for name in (model, _strip_provider(model), model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, dict):
            return bool(entry.get("supports_vision"))
    return False


# -- LangChain's counters (trim_messages' token_counter, ConversationSummaryBufferMemory's LLM) -------

#: langchain-openai counts a tool result's ``tool_call_id`` as 3 tokens (its own approximation).
TOOL_CALL_ID_TOKENS = 3
#: ``count_tokens_approximately``'s defaults: characters per token and tokens added per message.
APPROX_CHARS_PER_TOKEN = 4
APPROX_TOKENS_PER_MESSAGE = 3


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
        calls = [{"name": c.name, "args": _arguments(c.arguments), "id": c.id, "type": "tool_call"}
                 for c in message.tool_calls]
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
