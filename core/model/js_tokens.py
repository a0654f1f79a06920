"""Token counts as LangChain JS's chat models give them (``BaseLanguageModel.getNumTokens``).

n8n's agent (``maxTokensFromMemory``) and Flowise's Agentflow (its summary buffer's limit) count a text
with the chat model's ``getNumTokens``: a model that names no tokenizer model (``ChatOpenAI`` there)
encodes with GPT-2's vocabulary, which LangChain downloads on first use; when the download fails, or
the encoder refuses the text (it holds ``<|endoftext|>``), the count is ``ceil(length / 4)`` in UTF-16
code units, JavaScript's string length. So a counter is ``gpt2`` (the vocabulary, bundled in
``vocab/gpt2.tiktoken.gz``; see ``vocab/SOURCES.md``) or ``chars4`` (no download). For example
``count("question 1: what about Lisbon?", "gpt2")`` is 7; with ``chars4`` it is 8 (30 characters).
"""

from __future__ import annotations

import base64
import gzip
import math
from functools import lru_cache
from pathlib import Path

#: The counters: GPT-2's vocabulary, or characters / 4 (rounded up) when LangChain could not load it.
GPT2, CHARS4 = "gpt2", "chars4"
JS_COUNTERS = (GPT2, CHARS4)
#: GPT-2's split pattern and its one special token (tiktoken's ``r50k_base``, js-tiktoken's ``gpt2``).
_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_END_OF_TEXT = 50256
RANKS = Path(__file__).resolve().parent / "vocab" / "gpt2.tiktoken.gz"


@lru_cache(maxsize=1)
def gpt2_encoding():
    """GPT-2's encoding, read from the bundled ranks (no download)."""
    import tiktoken

    ranks: dict[bytes, int] = {}
    with gzip.open(RANKS, "rt", encoding="ascii") as lines:
        for line in lines:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        "gpt2",
        pat_str=_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": _END_OF_TEXT},
        explicit_n_vocab=_END_OF_TEXT + 1,
    )


def js_length(text: str) -> int:
    """A string's length as JavaScript counts it: UTF-16 code units (a character beyond U+FFFF is two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@lru_cache(maxsize=65536)
def count(text: str, counter: str) -> int:
    """``getNumTokens(text)`` of a LangChain JS chat model with the ``counter`` it could load."""
    if counter == GPT2:
        try:
            return len(gpt2_encoding().encode(text))
        except ValueError:  # a special token in the text: the encoder refuses it and LangChain estimates
            pass
    return math.ceil(js_length(text) / 4)


__all__ = ["CHARS4", "GPT2", "JS_COUNTERS", "RANKS", "count", "gpt2_encoding", "js_length"]
