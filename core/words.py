"""Counting words for people: "1 turn", "7 turns (12 with branches)".

Where each rule lives:

* Counting words for people (plurals, lengths, file names): `core/words.py`.
* A label shown once among its kind: a comparison's config columns, a select box's choices (which come back as
  their labels): `core/words.py` (`distinct`).
"""

from __future__ import annotations

from typing import Mapping, TypeVar

K = TypeVar("K")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the word in the right number: ``plural(1, "turn")`` is "1 turn"."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def turns_summary(thread: int, total: int) -> str:
    """A conversation's length as a person counts it: the turns of its active thread, and the
    total when branches (regenerated or edited answers) add more."""
    text = plural(thread, "turn")
    return text if total <= thread else f"{text} ({total:,} with branches)"


def conversation_length(info) -> str:
    """:func:`turns_summary` of a stored conversation (a ``repo.ConversationInfo``)."""
    return turns_summary(info.thread_turns or info.turn_count, info.turn_count)


def conversation_turns(conversation) -> str:
    """:func:`turns_summary` of a conversation in hand (a :class:`~core.model.conversation.Conversation`):
    its active thread's turns, and the total with branches."""
    from core.model.conversation import active_thread

    return turns_summary(len(active_thread(conversation)) if conversation.turns else 0, len(conversation.turns))


def file_stem(name: str, fallback: str = "report", width: int = 60) -> str:
    """A file name from a title: letters and digits kept (any script), every run of anything
    else one dash, none at either end — "Demo: support-bot forgets a name" → "Demo-support-bot-forgets-a-name"."""
    words = "".join(ch if ch.isalnum() or ch in "_" else " " for ch in name).split()
    stem = "-".join(words)[:width].strip("-")
    return stem or fallback


def excerpt(text: str, width: int = 28) -> str:
    """The first words of a text, cut at a word when one ends in its second half, with "…" when cut:
    ``excerpt("Hi, I'm Dana. My order number is 4411.")`` is "Hi, I'm Dana. My order…"."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[:width]
    if " " in cut[width // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


__all__ = ["plural", "turns_summary", "conversation_length", "conversation_turns", "file_stem", "excerpt"]


def distinct(labels: Mapping[K, str]) -> dict[K, str]:
    """``labels`` (by key, in order) with each repeated one numbered from its second use —
    "dify window 3 (2)" — never taking a label already in use: every column of a comparison, and
    every choice of a select box (which sends a choice back as the label it shows), named apart."""
    used = set(labels.values())
    seen: set[str] = set()
    out: dict[K, str] = {}
    for key, label in labels.items():
        if label in seen:
            n = 2
            while f"{label} ({n})" in used:
                n += 1
            label = f"{label} ({n})"
            used.add(label)
        seen.add(label)
        out[key] = label
    return out
