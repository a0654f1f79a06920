"""Secrets out of error texts: what a provider or gateway says when it refuses a key never carries the key on.

A gateway answering 401 often quotes what it was sent ("Incorrect API key provided: sk-…", the
``Authorization`` header). :func:`redact` takes out, before such a text is stored, returned, streamed,
exported or logged:

* every key MemLens holds — the value of each environment variable whose name says it is a key, token,
  secret or password (``OPENAI_API_KEY``, ``DIFY_API_KEY``…) — or was given (:func:`hold`: a key passed
  on the command line);
* whatever has a key's shape: ``sk-…``, ``Bearer …``, the value of an ``Authorization``, ``api-key`` or
  ``x-api-key`` header or field, a URL's ``key=`` parameter and its password (``scheme://user:password@``).

It is applied where errors enter — :class:`core.llm.errors.LLMError`, a pull's answer — and where
they are stored (:mod:`core.store.repo`); :class:`RedactingFilter` applies it to a logger's records.

    >>> redact("401 Incorrect API key provided: sk-proj-abcdefgh12345678. Sent Authorization: Bearer abc.def-123")
    '401 Incorrect API key provided: sk-[redacted]. Sent Authorization: [redacted]'

Where each rule lives:

* Keys out of error texts (held keys, key-shaped text), applied where errors enter and where they are stored:
  `core/redact.py` (`redact`, `hold`, `RedactingFilter`); applied by `LLMError` (`core/llm/errors.py`), the
  model client, `pull` (`core/service/dify_pull.py`), the store's writes of `error`
  (`core/store/repo/turns.py`) and the API's and model client's loggers.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from functools import lru_cache

MARK = "[redacted]"
#: Shorter values are not taken for keys (a variable named ``…_TOKEN`` set to ``1`` is a switch).
MIN_SECRET_LENGTH = 8
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_SHAPES = (
    # A header or field that carries a credential, with its scheme word when it has one.
    (
        re.compile(
            r"""(\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key)(["']?\s*[:=]\s*["']?)"""
            r"""(?:(?:basic|bearer|token|digest)\s+)?(?:\[redacted\]|[^\s"',;&}\]]+)""",
            re.IGNORECASE,
        ),
        rf"\1\2{MARK}",
    ),
    (re.compile(r"\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE), rf"\1 {MARK}"),
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}"), f"sk-{MARK}"),
    (re.compile(r"([?&]key=)[^\s&#\"']+"), rf"\1{MARK}"),  # a key in a URL's query (Google's APIs)
    (re.compile(r"\b([a-z][a-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+@", re.IGNORECASE), rf"\1{MARK}@"),
)

_given: set[str] = set()
_given_lock = threading.Lock()


def hold(secret: str | None) -> None:
    """Remember a key MemLens was given other than through the environment, so no text carries it on."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        with _given_lock:
            _given.add(secret)


@lru_cache(maxsize=4096)
def _names_a_secret(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def held() -> list[str]:
    """Every key this process holds, the longest first (so a key that contains another goes whole)."""
    found = {value for name, value in os.environ.items() if len(value) >= MIN_SECRET_LENGTH and _names_a_secret(name)}
    with _given_lock:
        found |= _given
    return sorted(found, key=len, reverse=True)


def redact(text: str, *secrets: str) -> str:
    """``text`` without the keys held or given (and ``secrets``), nor anything shaped like a key."""
    if not text:
        return text
    for secret in (*sorted((s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True), *held()):
        if secret in text:
            text = text.replace(secret, MARK)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def redact_optional(text: str | None) -> str | None:
    """:func:`redact` for a text that may be missing (a stored ``error`` column)."""
    return redact(text) if isinstance(text, str) else text


class RedactingFilter(logging.Filter):
    """Redacts a record's message and traceback before any handler formats it (a logger's filters
    see only the records logged on that logger itself, so each logger that may carry a provider's
    words gets one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def redact_log(logger: logging.Logger) -> logging.Logger:
    """``logger`` with a :class:`RedactingFilter` (once)."""
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
    return logger


__all__ = ["MARK", "RedactingFilter", "hold", "held", "redact", "redact_log", "redact_optional"]
