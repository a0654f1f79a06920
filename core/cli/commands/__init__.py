"""The commands of ``memlens`` beyond ``replay`` and ``ls`` (which are in ``core/cli/app.py``).

Each module here defines ``register(subparsers)``, which adds its command(s) with
``set_defaults(func=...)``, and has a line per command in ``COMMANDS`` (``core/cli/main.py``), which
imports the module only when one of its commands runs: a module's top-level imports are paid by its
own commands alone. A command function takes the parsed arguments and returns the exit status; bad
input raises ``core.cli.errors.UsageError`` (or another ``MemLensError``) to print one line and exit 2,
a :class:`core.errors.RuntimeFailure` exits 1. Shared options (``--db``, ``--input-format``,
``--format`` with csv, ISO times, progress) are in ``core/cli/options.py``.
"""

__all__: list[str] = []  # core.cli.main imports the commands; none is imported by name
