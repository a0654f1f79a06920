"""The analysis package's exceptions, each a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py)."""

from core.errors import MemLensError


class CompareError(MemLensError):
    """A comparison was asked for with bad input (too few or too many configs, an unknown turn or
    message); the message says what to change."""


class WhyError(MemLensError):
    """The question cannot be asked: an empty or too long phrase, or a turn that does not exist."""


__all__ = ["CompareError", "WhyError"]
