"""How a driver records what a model received: each message as its position in the conversation's stored
messages when it is one of them (the same JSON), else the message itself (a system prompt, a summary), so
a recording holds each stored message once. Plain Python: every driver's environment runs it."""

from __future__ import annotations

import json
from typing import Any, Callable


def refer(sent: list, stored: list, shape: Callable[[Any], Any] = lambda m: m) -> list:
    """``sent`` as positions in ``stored`` where ``shape(message)`` equals a stored message's, else as itself;
    a message sent twice refers to the next stored copy (a repeated text is a message of its own)."""
    where: dict[str, list[int]] = {}
    for i, message in enumerate(stored):
        where.setdefault(json.dumps(shape(message), sort_keys=True), []).append(i)
    used: set[int] = set()
    out: list = []
    for message in sent:
        shaped = shape(message)
        free = [i for i in where.get(json.dumps(shaped, sort_keys=True), []) if i not in used]
        if free:
            used.add(free[0])
            out.append(free[0])
        else:
            out.append(shaped)
    return out


def resolve(sent: list, stored: list, shape: Callable[[Any], Any] = lambda m: m) -> list:
    """The messages :func:`refer` recorded, each a position in ``stored`` or the message itself."""
    return [shape(stored[m]) if isinstance(m, int) else m for m in sent]
