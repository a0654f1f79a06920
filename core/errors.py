"""The one base class for bad input anywhere in the core.

Every error a user can cause (a malformed file, an out-of-range setting, a type mismatch) is a
``MemLensError`` whose message says what was wrong and what to do; the CLI prints it as one line
and exits with status 2, the UI shows it in place. Anything else is a bug: the CLI still prints one
line (``MEMLENS_DEBUG=1`` shows the traceback) and the API answers 500 and logs the detail.
"""


class MemLensError(ValueError):
    """Bad input: the message names the problem and, where it helps, the way forward."""


class ReportError(MemLensError):
    """A report, a report bundle, a source file or a saved config set cannot be made or read; the
    message says what to change."""
