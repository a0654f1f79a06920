"""``memlens`` and ``python -m core``: the command line's entry point.

A command lives in a module that adds it to the parser (``register(subparsers)``), imported only
when the command runs, so ``memlens --help`` and each command start without the other commands'
imports (``replay`` needs the memory core, ``serve`` the web server, ``ui`` neither). :data:`COMMANDS`
names every command, the module that defines it and its line in ``memlens --help``: a new command is
one module plus one line there. (A module under ``commands/`` without its line still works — it is
imported on every run — and ``tests/cli/test_cli_conventions.py`` asks for the line.)

Exit statuses, the same for every command: 0 success; 1 a runtime failure — what the input names is
not there, or a network, database or model failed (:class:`core.errors.RuntimeFailure`), or a bug;
2 a usage error or bad input. Every failure is one line on stderr (``MEMLENS_DEBUG=1`` shows the
traceback of an unexpected one). Run bare, the command line — or a command, or a group such as
``flows`` — prints its help and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import Sequence

from core import __version__
from core.errors import MemLensError, RuntimeFailure

from .errors import UsageError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: Set to show the traceback of an unexpected failure instead of its one-line summary.
DEBUG_ENV = "MEMLENS_DEBUG"

#: Every command: the module that registers it, and its line in ``memlens --help``.
COMMANDS: dict[str, tuple[str, str]] = {
    "ui": ("core.cli.commands.ui", "start the app (the Debugger, Compare, Present, …) in Streamlit"),
    "replay": ("core.cli.app", "replay a conversation under one memory config and print the ledgers"),
    "ls": ("core.cli.app", "list the conversations in a file: index, turns, first query"),
    "memories": (
        "core.cli.commands.memories",
        "list the memory systems and their settings (what --memory and --set take)",
    ),
    "why": ("core.cli.commands.why", "where did a word or phrase go: when it was stated and when each node lost it"),
    "report": ("core.cli.commands.report", "compare memory configs on a conversation and write a one-file HTML report"),
    "run": (
        "core.cli.commands.run",
        "run a chatflow (a Dify DSL export or MemLens flow) over a list of queries with the demo model",
    ),
    "conversations": ("core.cli.commands.store", "list stored conversations"),
    "import": ("core.cli.commands.store", "store a MemLens export or a transcript file (OpenAI, Dify, ShareGPT, …)"),
    "export": ("core.cli.commands.store", "print a conversation with its tree, node runs and variable history as JSON"),
    "pull": ("core.cli.commands.pull", "pull conversations from a running Dify app (Service API) into the store"),
    "flows": ("core.cli.commands.flows", "import and list the flows in the store"),
    "keys": ("core.cli.commands.keys", "create, revoke and list Service API keys"),
    "serve": ("core.cli.commands.serve", "serve Dify's Service API (/v1) over the flows in the store"),
    "proxy": (
        "core.cli.commands.proxy",
        "an OpenAI/Anthropic-compatible proxy that records what a bot sends its model",
    ),
    "infer": ("core.cli.commands.infer", "name the memory rule behind each node of a captured conversation"),
}


class Parser(argparse.ArgumentParser):
    """argparse's parser with a one-line error, or its whole help when it was given no argument at all."""

    def parse_known_args(self, args=None, namespace=None):
        # A command's parser is handed the words after its name (a group's, those after its own).
        self._bare = args is not None and len(args) == 0
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        if getattr(self, "_bare", False):
            self.print_help()
            self.exit(EXIT_USAGE)
        raise UsageError(f"{self.prog}: {message}")


def _listing(extra: Sequence[tuple[str, str]] = ()) -> str:
    width = max(len(name) for name in COMMANDS) + 2
    lines = ["commands:"]
    lines += [f"  {name:<{width}}{line}" for name, (_, line) in COMMANDS.items()]
    lines += [f"  {name:<{width}}{line}" for name, line in extra]
    lines += [
        "",
        "Run `memlens COMMAND --help` for a command's options. Exit status: 0 done, 1 a runtime failure "
        "(not found, network, database, model), 2 a usage error or bad input.",
    ]
    return "\n".join(lines)


def _unlisted_modules() -> list[str]:
    """Command modules under ``commands/`` that :data:`COMMANDS` does not name (found without importing them)."""
    from . import commands

    listed = {module for module, _ in COMMANDS.values()}
    names = (f"{commands.__name__}.{m.name}" for m in pkgutil.iter_modules(commands.__path__))
    return sorted(name for name in names if name not in listed)


def _modules(command: str | None, everything: bool) -> list[str]:
    """The modules to register: every one, or the one defining ``command``; modules without a line
    in :data:`COMMANDS` always, so that their commands are known."""
    unlisted = _unlisted_modules()
    if everything:
        return list(dict.fromkeys(module for module, _ in COMMANDS.values())) + unlisted
    if command in COMMANDS:
        return [COMMANDS[command][0]]
    return unlisted


def build_parser(command: str | None = None, *, prog: str = "memlens", everything: bool = True) -> Parser:
    """The parser. With ``everything`` (the default: what tests and docs read) every command is
    registered; otherwise only the module of ``command``, so nothing else is imported."""
    parser = Parser(
        prog=prog,
        usage="%(prog)s [--help] [--version] COMMAND ...",
        description="MemLens: which earlier messages each LLM call received, and why the others were left out.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memlens {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser, help=argparse.SUPPRESS, prog=prog
    )
    sub.required = True
    for module in _modules(command, everything):
        importlib.import_module(module).register(sub)
    for name, p in sub.choices.items():
        if not p.description and name in COMMANDS:
            p.description = COMMANDS[name][1][0].upper() + COMMANDS[name][1][1:] + "."
    parser.epilog = _listing([(name, "") for name in sub.choices if name not in COMMANDS])
    parser.commands = sub.choices  # the commands registered: what `main` may run
    return parser


def _command_word(argv: Sequence[str]) -> str | None:
    """The command named in ``argv``: its first word that is not an option (the top level's
    options, ``--help`` and ``--version``, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None, *, prog: str = "memlens") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv, start=1):
        try:  # bytes that are not UTF-8 reach Python as lone surrogates, which nothing can print or store
            arg.encode("utf-8")
        except UnicodeEncodeError:
            print(f"error: argument {i} ({ascii(arg)[:60]}) is not UTF-8 text", file=sys.stderr)
            return EXIT_USAGE
    command = _command_word(argv)
    try:
        parser = build_parser(command, prog=prog, everything=False)
        if not argv:
            parser.print_help()
            return EXIT_USAGE
        if command is not None and command not in parser.commands:
            raise UsageError(
                f"{prog}: unknown command {command!r}; expected one of {', '.join(COMMANDS)} (see `{prog} --help`)"
            )
        args, rest = parser.parse_known_args(argv)
        if rest and not getattr(args, "pass_through", False):  # only `ui` hands words on (to Streamlit)
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        args.rest = rest
        if len(argv) == 1 and getattr(args, "help_when_bare", False):  # e.g. `replay` needs a FILE or an ID
            parser.commands[command].print_help()
            return EXIT_USAGE
        return args.func(args)
    except SystemExit as e:  # argparse printed help (--help, a bare command) or the version
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    except MemLensError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILURE if isinstance(e, RuntimeFailure) else EXIT_USAGE
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug, or the environment failing mid-command: still one line
        if os.environ.get(DEBUG_ENV):
            raise
        if type(e).__module__.startswith("sqlalchemy"):  # the database failed: its own words, not the SQL
            from core.store.db import database_problem

            print(
                f"error: the database failed: {database_problem(e)} (set {DEBUG_ENV}=1 to see the traceback)",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        detail = " ".join(str(e).split())[:300]
        print(f"error: {type(e).__name__}: {detail} (set {DEBUG_ENV}=1 to see the traceback)", file=sys.stderr)
        return EXIT_FAILURE
