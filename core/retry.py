"""Trying a call again when it failed for a passing reason: a rate limit (429), a server error
(5xx) or a timeout. Model calls (``core/llm/client.py``) and pulls from a Dify app
(``core/service/dify_pull.py``) both go through :func:`with_retries`, so both wait the same way and both say,
when every attempt failed, how many there were (:func:`attempts_note`).

The waits double from FIRST_WAIT_SECONDS (0.5 s, then 1 s, …), each with up to a quarter more at
random so that clients that failed together do not all come back at once, unless the server said
how long to wait (``Retry-After``); no wait is longer than MAX_WAIT_SECONDS. A failure that is not
passing — a refused key, a bad request, an unknown model — is raised at once.

Where each rule lives:

* When a failure is tried again (a 429, a 5xx, a timeout: three tries, growing pauses or the server's
  `Retry-After`) and how the error says the tries, for model calls and pulls: `core/retry.py`
  (`with_retries`), used by `core/llm/client.py` and `core/service/dify_pull.py`.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: Tries in all, the first included: two more after a passing failure.
ATTEMPTS = 3
FIRST_WAIT_SECONDS = 0.5
MAX_WAIT_SECONDS = 20.0

#: How a pause is taken; tests replace it to run without waiting.
sleep: Callable[[float], None] = time.sleep


class Passing:
    """Why a failure may not happen again: returned by a ``passing`` test of :func:`with_retries`."""

    __slots__ = ("retry_after",)

    def __init__(self, retry_after: float | None = None):
        self.retry_after = retry_after  # seconds the server asked for, if it said


def passing_status(status: int | None) -> bool:
    """Whether an HTTP status is one a later attempt may not get: 408, 429 or any 5xx."""
    return status is not None and (status in (408, 429) or 500 <= status <= 599)


def retry_after(headers) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number; a date is not read), else None."""
    try:
        value = float((headers or {}).get("retry-after", ""))
    except (TypeError, ValueError, AttributeError):
        return None
    return value if value >= 0 else None


def wait_before(attempt: int, asked: float | None = None) -> float:
    """The pause before try ``attempt + 1``: what the server asked for, else the doubling wait with
    its random extra; never more than MAX_WAIT_SECONDS."""
    if asked is not None:
        return min(asked, MAX_WAIT_SECONDS)
    base = FIRST_WAIT_SECONDS * 2 ** (attempt - 1)
    return min(base * (1 + random.random() / 4), MAX_WAIT_SECONDS)


def with_retries(
    call: Callable[[], T], passing: Callable[[Exception], Passing | None], *, attempts: int = ATTEMPTS
) -> T:
    """``call()``, tried again after a pause while it raises an exception that ``passing`` returns
    a :class:`Passing` for, at most ``attempts`` times in all. When the last try fails too, its
    exception is raised with ``attempts`` (the number of tries) and ``waited`` (seconds paused) set
    on it, which :func:`attempts_note` puts in words."""
    waited = 0.0
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as error:
            why = passing(error)
            if why is None or attempt == attempts:
                if why is not None and attempt > 1:
                    error.attempts, error.waited = attempt, waited
                raise
            pause = wait_before(attempt, why.retry_after)
            sleep(pause)
            waited += pause
    raise AssertionError("unreachable: the loop returns or raises")


def attempts_note(error: BaseException) -> str:
    """`` (3 attempts over 1.6 s)`` for an error :func:`with_retries` gave up on, else ``""``."""
    attempts = getattr(error, "attempts", None)
    if not attempts:
        return ""
    return f" ({attempts} attempts over {getattr(error, 'waited', 0.0):.1f} s)"
