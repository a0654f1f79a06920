"""``memlens`` (also ``python -m core``): the entry point, the exit statuses and the list of commands
(``main``); ``replay`` and ``ls`` with the memory options ``why`` shares (``app``); every other command
is a module in ``commands/``; ``options`` holds the conventions they share (``--db``,
``--input-format``, ``--format`` and CSV, ISO times, progress); ``errors`` the command line's exception.

Where each rule lives:

* The command line's memory options: `--memory NAME`, `--set KEY=VALUE`, each setting's flag as an alias of
  `--set`, and `python -m core memories` listing them: `core/cli/memory_options.py` (used by `replay`, `why`
  and, per config, `report`); `core/cli/commands/memories.py`.
* `serve --workers N`: one `SO_REUSEPORT` socket per worker, so the kernel spreads connections over them, and
  the supervisor that replaces a dead worker on its socket: `core/cli/commands/serve.py`.
"""

from core import public_api

# ``main`` is the module (its ``main()`` is the entry point: ``core.cli.main:main``), never the function.
__all__, __getattr__ = public_api(
    __name__,
    {
        "errors": ("UsageError",),
    },
    modules=("main",),
)
