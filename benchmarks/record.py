"""Does recording a turn cost more the longer the conversation gets?

Records one support-bot conversation of ``--turns`` turns (default 2,000) through the service,
as the app and the API do (the demo model answers), timing every turn, and compares in this one
run:

(a) the mean cost of the last 50 turns (1,951–2,000) against that of turns 51–100 on the same
    conversation — target at most 1.5×;
(b) the time to build the whole conversation — target under a minute.

On SQLite (a new file in a temporary folder) by default; ``--postgres`` starts a throwaway
PostgreSQL cluster (Debian's binaries, as the store tests do) and ``--db URL`` uses a database of
yours (it must be empty).
Run: ``.venv/bin/python benchmarks/record.py [--turns 2000] [--postgres | --db URL]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workload import SUPPORT_QUERIES  # noqa: E402

FLOW = ROOT / "sample_data" / "flows" / "support-bot.yml"
EARLY = (51, 100)
LATE_SPAN = 50
BUILD_TARGET_S = 60.0
RATIO_TARGET = 1.5


def record(db_url: str, turns: int, progress: bool) -> list[float]:
    """Seconds per turn, for turns 1..turns of one new conversation."""
    from core.llm import DemoClient
    from core.sessions import ConversationService
    from core.store.db import Database

    db = Database(db_url)
    try:
        service = ConversationService(db, DemoClient())
        conv = service.start(service.import_flow(FLOW).flow_id, name=f"{turns:,}-turn recording benchmark")
        seconds = []
        for i in range(turns):
            query = f"{SUPPORT_QUERIES[i % len(SUPPORT_QUERIES)]} (message {i})"
            start = time.perf_counter()
            service.send(conv.id, query)
            seconds.append(time.perf_counter() - start)
            if progress and (i + 1) % 100 == 0:
                print(f"  turn {i + 1:,}: {seconds[-1] * 1000:.0f} ms", file=sys.stderr, flush=True)
        return seconds
    finally:
        db.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2_000)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL cluster")
    where.add_argument("--db", default=None, help="an empty database of yours (SQLAlchemy URL)")
    ap.add_argument("--progress", action="store_true", help="print every 100th turn's time")
    args = ap.parse_args()
    if args.turns < EARLY[1] + LATE_SPAN:
        ap.error(f"--turns {args.turns} is too short: give at least {EARLY[1] + LATE_SPAN}")

    cluster = None
    with tempfile.TemporaryDirectory(prefix="memlens-record-") as folder:
        if args.db:
            url, label = args.db, "the given database"
        elif args.postgres:
            from tests.pg_cluster import Cluster

            cluster = Cluster().start()
            url, label = cluster.create_database(), "PostgreSQL (throwaway cluster)"
        else:
            url, label = f"sqlite:///{Path(folder) / 'record.db'}", "SQLite"
        try:
            start = time.perf_counter()
            seconds = record(url, args.turns, args.progress)
            build = time.perf_counter() - start
        finally:
            if cluster is not None:
                cluster.stop()

    early = statistics.fmean(seconds[EARLY[0] - 1:EARLY[1]])
    late_first = args.turns - LATE_SPAN + 1
    late = statistics.fmean(seconds[late_first - 1:])
    ratio = late / early
    print(f"{label}: one support-bot conversation of {args.turns:,} turns, demo model")
    print(f"(a) turns {late_first:,}–{args.turns:,}: {late * 1000:.1f} ms per turn; turns {EARLY[0]}–{EARLY[1]}: "
          f"{early * 1000:.1f} ms = {ratio:.2f}× (target ≤ {RATIO_TARGET}×) "
          f"{'met' if ratio <= RATIO_TARGET else 'NOT met'}")
    print(f"(b) building the {args.turns:,}-turn conversation: {build:.1f} s = {build / BUILD_TARGET_S:.2f}× "
          f"the target of {BUILD_TARGET_S:.0f} s {'met' if build < BUILD_TARGET_S else 'NOT met'}")
    print("targets met" if ratio <= RATIO_TARGET and build < BUILD_TARGET_S else "TARGETS MISSED")


if __name__ == "__main__":
    main()
