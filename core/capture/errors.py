"""The capture package's exceptions, each a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py)."""

from core.errors import MemLensError


class CaptureError(MemLensError):
    """A captured call, a capture setting or an inference question that cannot be used (the message says
    which and what to do)."""


__all__ = ["CaptureError"]
