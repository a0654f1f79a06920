"""``memories``: every memory system ``--memory`` takes, with its settings (what ``--set`` takes, each
with its flag, values and default), as the systems declare them."""

from __future__ import annotations


def cmd_memories(args) -> int:
    from ..memory_options import memories_text

    print(memories_text())
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "memories",
        description="List every memory system --memory takes and its settings: what "
        "--set takes, each setting's flag, values and default.",
    )
    p.set_defaults(func=cmd_memories)
