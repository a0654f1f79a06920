"""The exceptions of ``core.report`` (see the tree in ``core/errors.py``): a report, a report bundle, a
source file or a saved config set that cannot be made or read, and one bad field of a bundle."""

from core.errors import MemLensError


class ReportError(MemLensError):
    """A report, a report bundle, a source file or a saved config set cannot be made or read; the
    message says what to change."""


class BundleFieldError(ReportError):
    """One field of a bundle is malformed; ``field`` names it (``conversation.turns[2].id``)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
