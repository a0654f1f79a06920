"""Do a stored conversation's report and export cost time and memory linear in its length?

For 2,000, 10,000 and 100,000 turns (``--turns`` picks others) this builds a conversation that states a
new fact about the user in every turn (a name and a town: two facts per turn, each followed under every
config) and asks for the name every tenth turn, writes it as an OpenAI messages file and, each step in a
process of its own, as a user runs them:

1. ``python -m core import FILE --db URL`` into a fresh SQLite database;
2. ``python -m core report --conversation ID --db URL -o report.html`` with the default configs;
3. ``python -m core export ID --db URL`` and ``python -m core import`` of that export into another database.

Each step's wall time, CPU time (user + system: what the step itself used of a core, which a shared
machine disturbs less than the wall clock) and peak memory (maximum resident set) are printed, then the
report's growth from 10,000 to 100,000 turns against its targets: at most 10× the time (CPU) and at most
2 GB at 100,000 turns.

Run: ``.venv/bin/python benchmarks/report_scale.py`` (``--turns 2000 10000``, ``--keep DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (2_000, 10_000, 100_000)
#: The report at 100,000 turns: at most this many times its CPU time at 10,000, and at most this much memory.
TIME_RATIO_TARGET = 10
MEMORY_TARGET_MB = 2048

NAMES = ("Dana", "Sam", "Ana", "Lee", "Noor", "Ivo", "Mei", "Tom")
TOWNS = ("Porto", "Lisbon", "Faro", "Braga", "Evora", "Sintra")


def write_conversation(path: Path, turns: int) -> None:
    """An OpenAI messages file of ``turns`` turns: each query states a name and a town no earlier
    turn stated (two facts), every tenth asks for the name; the answers are short."""
    messages = []
    for i in range(turns):
        if i % 10 == 9:
            query = "What's my name?"
        else:
            query = f"My name is {NAMES[i % len(NAMES)]}{i}. I live in {TOWNS[i % len(TOWNS)]}{i}."
        messages.append({"role": "user", "content": query})
        messages.append({"role": "assistant", "content": f"Noted, thanks ({i})."})
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")


class Children:
    """CPU time and peak memory of one child, from the running totals of all of them."""

    def __init__(self):
        import resource

        self._resource = resource
        self.cpu = self._cpu()

    def _cpu(self) -> float:
        u = self._resource.getrusage(self._resource.RUSAGE_CHILDREN)
        return u.ru_utime + u.ru_stime

    def step(self, args: list[str], out: Path | None = None) -> tuple[float, float, float, str]:
        """Run ``python -m core ARGS`` (stdout to ``out`` when given): its wall seconds, CPU seconds, peak MB
        and stdout. A failing step stops the benchmark with its error line."""
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
            start = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "core", *args],
                cwd=ROOT,
                env=env,
                stdout=open(out, "w") if out is not None else stdout,
                stderr=stderr,
            )
            # wait4 gives this child's own peak memory (RUSAGE_CHILDREN keeps the largest of them all).
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - start
            stdout.seek(0)
            stderr.seek(0)
            printed, errors = stdout.read(), stderr.read()
        cpu_now = self._cpu()
        cpu, self.cpu = cpu_now - self.cpu, cpu_now
        if proc.returncode != 0:
            last = errors.strip().splitlines()[-1] if errors.strip() else f"exit status {proc.returncode}"
            sys.exit(f"python -m core {' '.join(args)} failed: {last}")
        return wall, cpu, usage.ru_maxrss / 1024, printed


def measure(turns: int, work: Path, children: Children) -> dict:
    source = work / f"chat-{turns}.json"
    write_conversation(source, turns)
    db = f"sqlite:///{work / f'store-{turns}.db'}"
    again = f"sqlite:///{work / f'again-{turns}.db'}"
    out: dict = {"turns": turns, "file_mb": source.stat().st_size / 1e6}
    out["import"] = children.step(["import", str(source), "--db", db])[:3]
    listed = children.step(["conversations", "--db", db, "--format", "json"])[3]
    conversation_id = json.loads(listed)[0]["id"]
    html = work / f"report-{turns}.html"
    out["report"] = children.step(["report", "--conversation", conversation_id, "--db", db, "-o", str(html)])[:3]
    out["html_mb"] = html.stat().st_size / 1e6
    exported = work / f"export-{turns}.json"
    out["export"] = children.step(["export", conversation_id, "--db", db], out=exported)[:3]
    out["export_mb"] = exported.stat().st_size / 1e6
    out["reimport"] = children.step(["import", str(exported), "--db", again])[:3]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--keep", default=None, help="keep the files in this folder (default: a temporary one)")
    args = ap.parse_args()
    children = Children()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = []
        print(f"{'turns':>8}  {'step':<9} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  size")
        for turns in args.turns:
            r = measure(turns, work, children)
            results.append(r)
            sizes = {
                "import": f"file {r['file_mb']:.1f} MB",
                "report": f"HTML {r['html_mb']:.1f} MB",
                "export": f"export {r['export_mb']:.1f} MB",
                "reimport": "the export, imported back",
            }
            for step in ("import", "report", "export", "reimport"):
                wall, cpu, peak = r[step]
                print(f"{turns:>8,}  {step:<9} {wall:>8.1f} {cpu:>8.1f} {peak:>8.0f}  {sizes[step]}")
    by_turns = {r["turns"]: r for r in results}
    if 10_000 in by_turns and 100_000 in by_turns:
        small, big = by_turns[10_000]["report"], by_turns[100_000]["report"]
        ratio = big[1] / small[1]
        print(
            f"report, 100,000 against 10,000 turns: {ratio:.1f}× the CPU time ({big[0] / small[0]:.1f}× the wall "
            f"time; target at most {TIME_RATIO_TARGET}×: {'met' if ratio <= TIME_RATIO_TARGET else 'NOT met'}); "
            f"peak {big[2]:,.0f} MB (target at most {MEMORY_TARGET_MB:,} MB: "
            f"{'met' if big[2] <= MEMORY_TARGET_MB else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
