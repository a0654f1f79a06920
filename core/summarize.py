"""Summarisers: what folds older messages into a running summary.

Every summarising strategy (``summary_buffer``, ``compaction``) calls one method,
``summarize(messages, previous_summary) -> str``, exactly as LangChain's
``predict_new_summary(messages, existing_summary)`` does (spec/memory-models.md §C.4): the
messages being folded now, oldest first, and the summary text returned by the previous call
("" the first time). It returns the new summary text; the strategy adds the header that says
which turns the summary covers, so the header is the same whichever summariser wrote the text.

:class:`FactSummarizer` is the offline one the demo uses: deterministic and instant, it keeps
the facts users state about themselves (:mod:`core.facts`) — read from the *user* messages
being folded — and nothing else, so a summary visibly remembers "Your name is Dana." and
visibly forgets small talk. A model-backed summariser plugs in behind the same protocol
(``Replay(..., summarizer=...)``); it must be deterministic for a given input if ledgers are to
be reproducible, and it must not be called for messages that were not folded.
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence, runtime_checkable

from .conversation import Message
from .facts import extract_facts

#: What the offline summary says when the folded messages state no fact it recognises.
NO_FACTS = "No stated facts."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@runtime_checkable
class Summarizer(Protocol):
    """Folds messages into a running summary (see the module docstring)."""

    name: str

    def summarize(self, messages: Sequence[Message], previous_summary: str = "") -> str:
        """The new summary text: ``previous_summary`` updated with what ``messages`` add."""
        ...


def _topic(sentence: str) -> str:
    """What a fact sentence is about, so a newer statement replaces an older one.

    Single-valued facts ("Your order is 4411.", "You live in Porto.") are keyed by their lead;
    the others (likes, allergies, diets, things to remember) accumulate and are keyed by the
    whole sentence, so only exact repeats collapse.
    """
    if sentence.startswith("Your ") and " is " in sentence:
        return sentence[: sentence.index(" is ") + 4]
    for lead in ("You live in ", "You work as "):
        if sentence.startswith(lead):
            return lead
    return sentence


class FactSummarizer:
    """The offline summariser: the stated facts of the folded user messages, as sentences.

    Facts keep the order they were first stated in; a newer value of a single-valued fact
    replaces the older one in place ("Your order is 4411." → "Your order is 5120.").
    """

    name = "offline"

    def summarize(self, messages: Sequence[Message], previous_summary: str = "") -> str:
        sentences = [s for s in _SENTENCE_END.split(previous_summary.strip()) if s and s != NO_FACTS]
        topics = [_topic(s) for s in sentences]
        for message in messages:
            if message.role != "user":
                continue
            for fact in extract_facts(message.content):
                topic = _topic(fact.text)
                if topic in topics:
                    sentences[topics.index(topic)] = fact.text
                else:
                    sentences.append(fact.text)
                    topics.append(topic)
        return " ".join(sentences) if sentences else NO_FACTS


OFFLINE = FactSummarizer()

__all__ = ["Summarizer", "FactSummarizer", "OFFLINE", "NO_FACTS"]
