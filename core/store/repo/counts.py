"""A turn's token counts, stored with it so that reopening a conversation does not tokenise it again."""

from __future__ import annotations

from typing import Iterable

from core.model.conversation import Turn

#: A turn's stored token counts: ``{encoding: [tokens of each message's content]}``, written with
#: the turn so that reopening a conversation does not tokenise it again.
TOKEN_COUNTS = "token_counts"


#: The counts of a turn's other short texts, its messages' roles and names: ``{encoding: {text:
#: tokens}}``. Without them a reopened conversation would load the encoding (seconds) to count "user".
TEXT_COUNTS = "text_counts"


def token_counts(messages, encodings) -> dict:
    """:data:`TOKEN_COUNTS` of a turn's messages under ``encodings``."""
    from core.model.tokens import count_cache

    return {e: [count_cache(e).count(m.content) for m in messages] for e in sorted(encodings)}


def text_counts(messages, encodings) -> dict:
    """:data:`TEXT_COUNTS` of a turn's messages under ``encodings``."""
    from core.model.tokens import count_cache

    texts = dict.fromkeys(t for m in messages for t in (m.role, m.name) if t)
    return {e: {t: count_cache(e).count(t) for t in texts} for e in sorted(encodings)}


def remember_token_counts(turns: Iterable[Turn]) -> None:
    """Hand the turns' stored counts to the process's token counters (turns stored before the
    counts were kept, or with counts that do not fit their messages, are counted when needed)."""
    from core.model.tokens import remember_counts

    found: dict[str, dict[str, int]] = {}
    for turn in turns:
        stored = (turn.meta or {}).get(TOKEN_COUNTS)
        for encoding, counts in stored.items() if isinstance(stored, dict) else ():
            if isinstance(counts, list) and len(counts) == len(turn.messages):
                texts = found.setdefault(str(encoding), {})
                for m, n in zip(turn.messages, counts):
                    if type(n) is int and n >= 0 and m.content:
                        texts[m.content] = n
        others = (turn.meta or {}).get(TEXT_COUNTS)
        if isinstance(others, dict):
            for encoding, counts in others.items():
                if isinstance(counts, dict):
                    texts = found.setdefault(str(encoding), {})
                    texts.update((t, n) for t, n in counts.items() if t and type(n) is int and n >= 0)
    for encoding, texts in found.items():
        remember_counts(encoding, texts)
