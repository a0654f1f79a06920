"""How each memory system's replay grows with the conversation: every lens of every system, at two lengths.

Builds one tool-using session (each turn a question, a reasoning item, a call, its result and an
answer; every tenth call is left without its result, as an approval still pending) of N turns and of
4N turns, then replays it from cold under each lens the registry offers (``Strategy.lenses``: Dify's
profiles, n8n's and Flowise's windows, the Agents SDK session with and without a limit…) and times
every turn's summary (:meth:`core.memory.replay.Replay.summaries`, what Compare and the CLI read).

A replay that costs the same per turn at any length takes 4× as long on 4× the turns. For each lens it
prints the two times and their ratio; the target is at most 6× (linear growth, with room for a
shared machine's noise): a ratio near 16× is a rule that walks the whole conversation at every turn.
Run: ``.venv/bin/python benchmarks/memories.py [--turns 500]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GROWTH = 4  # the longer conversation is this many times the shorter
MAX_RATIO = 6.0  # linear growth is GROWTH×; this leaves room for noise


def session(turns: int):
    """An Agents SDK session of ``turns`` tool turns, read as MemLens reads one."""
    from core.io import import_text

    items = []
    for k in range(turns):
        items += [
            {"role": "user", "content": f"Question {k}: what is the weather in city {k % 17}?"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"Look up city {k % 17}."}]},
            {"type": "function_call", "call_id": f"call-{k}", "name": "weather", "arguments": '{"city": 1}'},
        ]
        if k % 10 != 9:  # every tenth call is still waiting for its result
            items.append({"type": "function_call_output", "call_id": f"call-{k}", "output": f"sunny, {k % 30} °C"})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"It is sunny in city {k % 17}, {k % 30} °C."}],
            }
        )
    return import_text(json.dumps(items), name="session.json", fmt="openai-agents").conversations[0]


def lenses():
    """Every lens of every memory system: (system, lens name, config)."""
    from core.memory import MemoryConfig
    from core.memory.strategies import STRATEGIES

    return [
        (name, label, MemoryConfig(strategy=name, **settings).validate())
        for name, system in STRATEGIES.items()
        for label, settings in system.lenses
    ]


def replay_seconds(conversation, config) -> float:
    """CPU seconds of one cold replay's summaries; a fast one is repeated until a quarter of a second has
    passed and averaged, so a ratio of two short times is not a ratio of clock ticks."""
    from core.memory import Replay

    runs, start = 0, time.process_time()
    while not runs or time.process_time() - start < 0.25:
        Replay(conversation, config, system_prompt=conversation.system_prompt).summaries()
        runs += 1
    return (time.process_time() - start) / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=500, help=f"the shorter conversation's turns (the longer: {GROWTH}×)")
    args = ap.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    short, long = session(args.turns), session(GROWTH * args.turns)
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; CPU seconds to replay every turn, "
        f"{args.turns:,} and {GROWTH * args.turns:,} tool turns ({sum(len(t.messages) for t in long.turns):,} "
        "messages)"
    )
    rows = lenses()
    width = max(len(f"{name}: {label}") for name, label, _ in rows)
    print(f"  {'':{width}} {args.turns:>9,} {GROWTH * args.turns:>9,}  ratio")
    missed = []
    for name, label, config in rows:
        replay_seconds(short, config)  # the first replay of a system warms its caches (token counts, encodings)
        a, b = replay_seconds(short, config), replay_seconds(long, config)
        ratio = b / a
        print(f"  {f'{name}: {label}':{width}} {a:8.3f}s {b:8.3f}s  {ratio:4.1f}×", flush=True)
        if ratio > MAX_RATIO:
            missed.append(f"{name}: {label}: {ratio:.1f}× for {GROWTH}× the turns")
    print(f"\ntarget: at most {MAX_RATIO:g}× the time for {GROWTH}× the turns")
    print("all targets met" if not missed else f"MISSED {len(missed)} target(s):\n  " + "\n  ".join(missed))


if __name__ == "__main__":
    main()
