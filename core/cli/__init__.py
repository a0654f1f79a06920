"""``memlens`` (also ``python -m core``): the entry point, the exit statuses and the list of commands
(``main``); ``replay`` and ``ls`` with the memory options ``why`` shares (``app``); every other command
is a module in ``commands/``; ``options`` holds the conventions they share (``--db``,
``--input-format``, ``--format`` and CSV, ISO times, progress); ``errors`` the command line's exception.
"""

from core import public_api

# ``main`` is the module (its ``main()`` is the entry point: ``core.cli.main:main``), never the function.
__all__, __getattr__ = public_api(__name__, {
    "errors": ("UsageError",),
}, modules=("main",))
