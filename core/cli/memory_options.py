"""The command line's memory options, read from the memory systems' declarations.

``--memory NAME`` picks a memory system (:data:`core.memory.strategies.STRATEGIES`) and ``--set
KEY=VALUE`` sets one of its settings, or one every config has (``--set window=6``, ``--set
model=gpt-4o``); each setting's own flag (``--window 6``, ``--fidelity documented``, ``--max-tokens
200``…) is an alias of ``--set``. A flag sets its setting when the chosen memory has it and is left
out otherwise (``--window`` means nothing to ``buffer``), while ``--set`` refuses a setting the memory
does not have. ``memlens memories`` lists every memory and its settings.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from core.memory.config import MemoryConfig
from core.memory.errors import ConfigError
from core.memory.strategies import STRATEGIES
from core.memory.strategies.settings import BOOL, CHANGES, COMMON, Setting

from .errors import UsageError

#: Who declares a setting: a memory system's name, or "" for the settings every config has.
Owner = tuple[str, Setting]


def memory_flags() -> dict[str, list[Owner]]:
    """Every setting's flag and the settings it stands for (a flag two systems share, like ``--window``,
    stands for each one's), the common settings' first, then each system's in the registry's order."""
    out: dict[str, list[Owner]] = {}
    for owner, settings in [("", COMMON), *((name, s.settings) for name, s in STRATEGIES.items())]:
        for setting in settings:
            if setting.flag:
                out.setdefault(setting.flag, []).append((owner, setting))
    return out


def _dest(flag: str) -> str:
    return "memory_" + flag.lstrip("-").replace("-", "_")


def _flag_parser(flag: str, owners: Sequence[Owner]):
    """The flag's value from its text: what the first of its settings that takes it makes of it, else
    the first one's refusal (one line, as argparse shows it)."""

    def parse(text: str) -> Any:
        refusal = None
        for _, setting in owners:
            try:
                return setting.parse(text, flag)
            except ConfigError as e:
                refusal = refusal or e
        raise argparse.ArgumentTypeError(str(refusal))

    return parse


def _flag_help(owners: Sequence[Owner]) -> str:
    helps: dict[str, list[str]] = {}
    for owner, setting in owners:
        helps.setdefault(setting.help, []).append(owner)
    return "; ".join(f"{', '.join(names)}: {text}" if names != [""] else text for text, names in helps.items())


def add_memory_flags(p, flags: dict[str, list[Owner]] | None = None, **kinds: Any) -> None:
    """Add every setting's flag to ``p`` (a parser or an argument group); ``kinds`` gives each flag's
    argparse ``action`` when it is not the plain one (the report's per-config flags)."""
    for flag, owners in (flags or memory_flags()).items():
        first = owners[0][1]
        options: dict[str, Any] = {"dest": _dest(flag), "default": None, "help": _flag_help(owners)}
        if first.kind != BOOL:
            options["metavar"] = "TURN:N" if first.kind == CHANGES else first.name.upper()
        if "action" in kinds:
            options["action"] = kinds["action"]
        if first.kind == BOOL:  # a switch: given means on
            options.update({"nargs": 0} if "action" in kinds else {"action": "store_const", "const": True})
        else:
            options["type"] = _flag_parser(flag, owners)
            choices = [c for _, s in owners for c in s.choices if c is not None]
            if choices and all(s.choices for _, s in owners):
                options["choices"] = tuple(dict.fromkeys(choices))
                del options["metavar"]  # argparse lists the choices
            if first.kind == CHANGES and "action" not in kinds:
                options["action"] = "append"
        p.add_argument(flag, **options)


def setting_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--set``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE (e.g. --set window=6), not {text!r}")
    return name.strip(), value


def add_memory_options(p: argparse.ArgumentParser) -> None:
    """``--memory``, ``--set`` and every setting's flag, for a command that replays under one config."""
    p.add_argument(
        "--memory",
        choices=tuple(STRATEGIES),
        default=None,
        metavar="NAME",
        help=f"the memory system: {', '.join(STRATEGIES)} (default: the one the conversation's platform "
        f"remembers with, e.g. dify_agent for a Dify Agent app's log, else dify); "
        f"`memlens memories` lists each one's settings",
    )
    p.add_argument(
        "--set",
        dest="memory_set",
        action="append",
        type=setting_pair,
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the chosen memory, or one every config has (repeatable), e.g. --set window=6",
    )
    add_memory_flags(
        p.add_argument_group(
            "memory settings",
            "each the same as --set NAME=VALUE, for the memories that have the setting (left out for "
            "the others); python -m core memories lists them by memory",
        )
    )


def parse_setting(config_strategy: str, name: str, text: str) -> tuple[str, Any]:
    """``--set NAME=TEXT`` for a config of the memory system ``config_strategy``: the setting's name and
    value. A name the memory does not have is refused, naming the ones it has."""
    system = STRATEGIES[config_strategy]
    setting = system.setting(name) or next((s for s in COMMON if s.name == name), None)
    if setting is None:
        own = ", ".join(s.name for s in system.settings) or "none of its own"
        raise UsageError(
            f"--set {name}: memory {config_strategy!r} has no setting {name!r}; its settings: {own} "
            f"(and {', '.join(s.name for s in COMMON)}); see memlens memories"
        )
    return name, setting.parse(text, f"--set {name}")


def flag_values(args: argparse.Namespace, strategy: str) -> dict[str, Any]:
    """The settings the flags given set for a config of ``strategy``: the common ones, and the memory's own
    (a flag of another memory's setting is left out)."""
    out: dict[str, Any] = {}
    for flag, owners in memory_flags().items():
        given = getattr(args, _dest(flag), None)
        if given is None:
            continue
        for owner, setting in owners:
            if owner in ("", strategy):
                out[setting.name] = tuple(c for part in given for c in part) if setting.kind == CHANGES else given
    return out


def config_from_args(args: argparse.Namespace, conversation=None) -> MemoryConfig:
    """The memory config the options give; with no ``--memory``, the one that fits ``conversation``
    (:func:`core.analysis.debug_view.fitting_config`: a Dify Agent app's log replays as ``dify_agent``,
    a Claude Code transcript as everything on the thread), its settings then changed by the flags and
    ``--set``."""
    from core.analysis.debug_view import fitting_config

    base = fitting_config(conversation) if args.memory is None else MemoryConfig(args.memory)
    values = {**base.values(), **flag_values(args, base.strategy)}
    for name, text in args.memory_set:
        name, values[name] = parse_setting(base.strategy, name, text)
    return MemoryConfig(base.strategy, **values).validate()


def memories_text() -> str:
    """Every memory system and its settings: ``memlens memories``."""
    lines = []
    for name, system in STRATEGIES.items():
        lines.append(f"{name}: {system.help or name}")
        for s in system.settings:
            flag = f" ({s.flag})" if s.flag else ""
            lines.append(f"  --set {s.name}=…{flag}  {s.described()}")
    lines.append(f"every memory: {', '.join(s.name for s in COMMON)}")
    for s in COMMON:
        lines.append(f"  --set {s.name}=…  ({s.flag})  {s.described()}")
    return "\n".join(lines)


__all__ = [
    "add_memory_flags",
    "add_memory_options",
    "config_from_args",
    "flag_values",
    "memories_text",
    "memory_flags",
    "parse_setting",
    "setting_pair",
]
