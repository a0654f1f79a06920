"""The exceptions of ``core.io`` (see the tree in ``core/errors.py``): a file no reader can read, one bad
record in it, a conversation export the store cannot take, a Dify app that cannot be pulled; and
:class:`TooManyProblems`, the readers' own signal to stop reading, which never leaves an import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from core.errors import MemLensError, RuntimeFailure
from core.store.errors import StoreError

if TYPE_CHECKING:
    from core.io.readers.records import Problem


class FormatError(MemLensError):
    """The input is not a conversation in a supported format; the message says what to fix.

    ``problems`` lists every bad record found (empty when the file as a whole is unreadable).
    """

    def __init__(self, message: str, problems: Iterable[Problem] = ()):
        super().__init__(message)
        self.problems: list[Problem] = list(problems)


class RecordError(FormatError):
    """One record is malformed. ``message`` names the field ("message 3 has no 'role'")."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


class BundleError(StoreError):
    """The document is not a MemLens conversation export this version can store."""


class PullError(MemLensError):
    """The app could not be read; the message says what went wrong and what to check."""


class PullFailedError(PullError, RuntimeFailure):
    """The app was asked as it should be and did not answer so: no answer in time, no connection, a
    refused key, an unknown conversation, a server error or an answer that is not the API's."""


class TooManyProblems(Exception):
    """Raised inside an all-or-nothing import once it has :data:`MAX_PROBLEMS` problems."""
