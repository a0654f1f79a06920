"""Subcommands of ``python -m core`` beyond ``replay``.

Each module here defines ``register(subparsers)`` that adds its subcommand(s) with
``set_defaults(func=...)``; :mod:`core.cli.app` discovers them, so adding a command is adding a file.
A command function takes the parsed arguments and returns the exit status; bad input raises
``core.cli.errors.UsageError`` (or a ``ValueError`` subclass the CLI knows) to print one line and exit 2.
"""

__all__: list[str] = []  # core.cli.app finds the commands; none is imported by name
