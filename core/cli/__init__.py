"""``python -m core``: the parser, the ``replay`` command and the one-line errors (``app``); every
other subcommand is a module in ``commands/``.
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "app": ("main",),
})
