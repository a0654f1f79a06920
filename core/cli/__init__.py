"""``python -m core``: the parser, the ``replay`` command and the one-line errors (``app``); every
other subcommand is a module in ``commands/``; ``options`` holds what they share (the ``--db`` option, the
store it opens, how a stored time prints); ``errors`` the command line's exception.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "app": ("main",),
    "errors": ("UsageError",),
})
