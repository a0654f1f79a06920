"""The exceptions of ``core.cli`` (see the tree in ``core/errors.py``): bad input on the command line."""

from core.errors import MemLensError


class UsageError(MemLensError):
    """Bad input on the command line: printed as one line, exit status 2."""
