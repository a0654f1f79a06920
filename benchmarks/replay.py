"""How fast is a full replay compared with simply tokenising the conversation once?

Builds a 10,000-turn conversation (varied message lengths, a tool round every seventh turn) and
measures, in this one process:

(a) the floor: tiktoken encoding every message's text once;
(b) a full replay (every turn's kept set, as ``--format summary`` needs) for ``dify`` (window 50,
    a budget small enough to prune), ``window`` (N=20) and ``buffer``, each with a fresh token
    counter so it pays its own tokenisation;
(c) a literal baseline of Dify's loop — recount the whole history after every pop — on the first
    1,000 turns, against our ``dify`` replay of the same 1,000 turns.

Targets: each full replay within 2× the floor; at least 50× faster than the literal baseline.
Run: ``.venv/bin/python benchmarks/replay.py`` (``--turns`` and ``--baseline-turns`` to change sizes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import build_conversation, floor_seconds  # noqa: E402
from core.conversation import Conversation  # noqa: E402
from core.memory import MemoryConfig, Replay  # noqa: E402
from core.tokens import TokenCounter, _encoding  # noqa: E402

MODEL = "gpt-4o-mini"
#: Small enough that the budget prunes on most turns (about 1,900 tokens of history are left).
CONTEXT = 2_000 + 1_000


def replay_seconds(conv: Conversation, config: MemoryConfig) -> tuple[float, int]:
    start = time.perf_counter()
    summaries = Replay(conv, config, counter=TokenCounter(MODEL)).summaries()
    return time.perf_counter() - start, sum(s.dropped for s in summaries)


def literal_dify_seconds(conv: Conversation, window: int, context: int) -> float:
    """Dify's TokenBufferMemory loop, literally: recount the whole list after every pop."""
    encode = _encoding(TokenCounter(MODEL).encoding_name).encode_ordinary
    system = conv.system_prompt
    start = time.perf_counter()
    for k in range(len(conv.turns)):
        history = []
        for t in conv.turns[max(0, k - window):k]:
            history += [t.query, t.answer]
        rest = context - (len(encode(system)) + 3 + len(encode(conv.turns[k].query)) + 3 + 3)

        def count(msgs):
            return sum(len(encode(m)) + 3 for m in msgs)

        tokens = count(history)
        while tokens > rest and len(history) > 1:
            history.pop(0)
            tokens = count(history)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--baseline-turns", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    conv = build_conversation(args.turns)
    _encoding("o200k_base")  # load the encoding outside every measurement
    n_messages = sum(len(t.messages) for t in conv.turns)
    dify_cfg = MemoryConfig(strategy="dify", window=50, model=MODEL, context_size=CONTEXT)
    configs = {f"dify (window 50, {CONTEXT:,}-token context)": dify_cfg,
               "window (N=20)": MemoryConfig(strategy="window", window=20, model=MODEL),
               "buffer": MemoryConfig(strategy="buffer", model=MODEL)}

    # The machine is shared: each figure is the best of several runs, and the floor is measured
    # between the replays so that both see the same conditions.
    floors: list[float] = []
    results: dict[str, tuple[float, int]] = {}
    for _ in range(args.repeat):
        for label, cfg in configs.items():
            floors.append(floor_seconds(conv, MODEL))
            run = replay_seconds(conv, cfg)
            results[label] = min(results.get(label, run), run)
    floor = min(floors)
    print(f"conversation: {args.turns:,} turns, {n_messages:,} messages; best of {args.repeat} runs each")
    print(f"(a) floor — tiktoken encodes every message once: {floor:.3f} s")
    ok = True
    for label, cfg in configs.items():
        seconds, dropped = results[label]
        ratio = seconds / floor
        ok &= ratio <= 2.0
        print(f"(b) replay {label}: {seconds:.3f} s = {ratio:.2f}× floor (target ≤ 2×); "
              f"{dropped / args.turns:,.0f} earlier messages left out per turn on average")

    head = Conversation(id="head", turns=conv.turns[: args.baseline_turns], system_prompt=conv.system_prompt)
    literal = literal_dify_seconds(head, 50, CONTEXT)
    ours, _ = min(replay_seconds(head, dify_cfg) for _ in range(args.repeat))
    speedup = literal / ours
    ok &= speedup >= 50
    pruned = sum(1 for s in Replay(head, dify_cfg).summaries() if s.budget is not None and s.history_tokens and
                 s.kept < 2 * min(50, s.turn - 1))
    print(f"    the budget pruned history on {pruned:,} of the first {args.baseline_turns:,} turns")
    print(f"(c) first {args.baseline_turns:,} turns, dify window 50: literal loop {literal:.3f} s, "
          f"ours {ours:.4f} s = {speedup:.0f}× faster (target ≥ 50×)")
    print("targets met" if ok else "TARGETS MISSED")


if __name__ == "__main__":
    main()
