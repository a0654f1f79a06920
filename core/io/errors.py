"""The exceptions of ``core.io``: a file no reader can read, one bad record in it (see the tree in
``core/errors.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from core.errors import MemLensError

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
