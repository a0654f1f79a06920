"""Summarisers: what folds older messages into a running summary.

Every summarising strategy (``summary_buffer``, ``compaction``) calls one method,
``summarize(messages, previous_summary) -> str``, exactly as LangChain's
``predict_new_summary(messages, existing_summary)`` does (spec/memory-models.md §C.4): the
messages being folded now, oldest first, and the summary text returned by the previous call
("" the first time). It returns the new summary text; the strategy adds the header that says
which turns the summary covers, so the header is the same whichever summariser wrote the text.

:class:`FactSummarizer` is the offline one the demo uses: deterministic and instant, it keeps
the facts users state about themselves (:mod:`core.model.facts`) — read from the *user* messages
being folded — and nothing else, so a summary visibly remembers "Your name is Dana." and
visibly forgets small talk. A model-backed summariser plugs in behind the same protocol
(``Replay(..., summarizer=...)``); it must be deterministic for a given input if ledgers are to
be reproducible, and it must not be called for messages that were not folded.

Dify 1.17's agent compaction (``compaction`` as shipped) has the run's own model write a
structured summary: six sections — intent, key decisions, artifacts, current state, next steps,
open questions — from a transcript of the folded messages with tool output cut to 500
characters, updating the previous summary when there is one. :class:`ModelSectionSummarizer`
asks a real model for that (:func:`section_prompt`, in MemLens's own words);
:class:`SectionSummarizer` fills the same sections offline from the folded messages, so the
demo's summaries have the same shape and a comparable size.
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence, runtime_checkable

from core.llm.client import one_line
from core.model.conversation import Message
from core.model.facts import extract_facts

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

#: The sections of Dify 1.17's compaction summary, in its order.
SECTIONS = ("Intent", "Key decisions", "Artifacts", "Current state", "Next steps", "Open questions")
#: How many items a section of the offline summary keeps (the newest win).
SECTION_ITEMS = 6
_SECTION_HEAD = re.compile(r"^## (.+)$")


def transcript_lines(messages: Sequence[Message]) -> list[str]:
    """The folded messages as the summariser prompt lists them, one line each."""
    lines: list[str] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            lines.extend(f"Tool Call [{c.name}]: {c.arguments}" for c in m.tool_calls)
        elif m.role == "tool":
            lines.append(f"Tool [{m.name or 'tool'}]: {m.content}")
        else:
            lines.append(f"{m.role.capitalize()}: {m.content}")
    return lines


def transcript(messages: Sequence[Message]) -> str:
    """The folded messages one per line, as the summariser reads them."""
    return "\n".join(transcript_lines(messages))


def section_prompt(messages: Sequence[Message], previous_summary: str = "") -> str:
    """What a real model is asked (Dify's structure, MemLens's words)."""
    heads = "\n".join(f"## {name}" for name in SECTIONS)
    prompt = (
        "The conversation below is about to be replaced by your summary, so the summary must hold everything "
        "needed to carry on. Use these headings in this order and leave out a heading with nothing under it:\n"
        f"{heads}\n"
        "Intent is the user's goal and lasting preferences; key decisions are what was settled and why; "
        "artifacts are the exact names of files, ids, commands and tools used; current state is what is done "
        "and under way; next steps are what is left; open questions are what is unresolved. Report results "
        "rather than retelling every action, and answer with the summary alone.\n\n"
        f"<messages>\n{transcript(messages)}\n</messages>"
    )
    if previous_summary:
        prompt += (
            "\n\nAn earlier summary follows. Bring it up to date with the conversation above: keep what is "
            "still true, drop what is outdated, add what is new, and keep its headings.\n\n"
            f"<previous-summary>\n{previous_summary}\n</previous-summary>"
        )
    return prompt


class ModelSectionSummarizer:
    """Dify's structured summary written by a real model (the run's own, as Dify uses)."""

    name = "model"

    def __init__(self, client, model: str):
        self.client = client
        self.model = model

    def summarize(self, messages: Sequence[Message], previous_summary: str = "") -> str:
        # Asked once per compaction: the summary is stored with its turn and given back from there on
        # (core.memory.strategies.compaction.RecordedSummaries), as Dify keeps the history it compacted.
        reply = self.client.complete(
            self.model,
            [
                {"role": "system", "content": "You summarise conversations so that work can go on from the summary."},
                {"role": "user", "content": section_prompt(messages, previous_summary)},
            ],
        )
        return reply.text.strip()


def parse_sections(text: str) -> dict[str, list[str]]:
    """A sectioned summary's items by section (lines under ``## Name``, bullets stripped)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        head = _SECTION_HEAD.match(line.strip())
        if head:
            current = out.setdefault(head.group(1).strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip().removeprefix("- "))
    return out


class SectionSummarizer:
    """The offline stand-in for the model's structured summary: each section filled from the folded
    messages (and kept from the previous summary), newest items winning when a section is full.

    * intent — the first folded user message and the facts users stated (:mod:`core.model.facts`);
    * key decisions — what the assistant said;
    * artifacts — every tool call, with its arguments;
    * current state — the last assistant text or tool output folded;
    * next steps — a user message the assistant had not answered yet;
    * open questions — the questions users asked.
    """

    name = "offline sections"

    def summarize(self, messages: Sequence[Message], previous_summary: str = "") -> str:
        sections = {name: list(items) for name, items in parse_sections(previous_summary).items() if name in SECTIONS}
        new: dict[str, list[str]] = {name: [] for name in SECTIONS}
        users = [m for m in messages if m.role == "user" and m.content.strip()]
        if users and not sections.get("Intent"):
            new["Intent"].append(one_line(users[0].content, 300))
        for m in users:
            new["Intent"].extend(f"Stated: {f.text}" for f in extract_facts(m.content))
            if m.content.rstrip().endswith("?"):
                new["Open questions"].append(one_line(m.content, 200))
        for m in messages:
            if m.role == "assistant" and m.content.strip():
                new["Key decisions"].append(one_line(m.content, 200))
            for c in m.tool_calls:
                new["Artifacts"].append(one_line(f"{c.name} {c.arguments}", 200))
        last = next((m for m in reversed(messages) if m.role in ("assistant", "tool") and m.content.strip()), None)
        if last is not None:
            new["Current state"] = [one_line(last.content, 300)]
            sections.pop("Current state", None)
        if messages and messages[-1].role == "user" and messages[-1].content.strip():
            new["Next steps"] = [f"Answer: {one_line(messages[-1].content, 200)}"]
            sections.pop("Next steps", None)
        out = []
        for name in SECTIONS:
            items = list(dict.fromkeys(sections.get(name, []) + new[name]))[-SECTION_ITEMS:]
            if items:
                out.append(f"## {name}\n" + "\n".join(f"- {item}" for item in items))
        return "\n\n".join(out) if out else "## Current state\n- Nothing to carry over."


SECTIONS_OFFLINE = SectionSummarizer()

__all__ = [
    "Summarizer",
    "FactSummarizer",
    "OFFLINE",
    "NO_FACTS",
    "SECTIONS",
    "SectionSummarizer",
    "SECTIONS_OFFLINE",
    "ModelSectionSummarizer",
    "section_prompt",
    "parse_sections",
    "transcript",
    "transcript_lines",
]
