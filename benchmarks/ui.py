"""Server-side time of one rerun of the debugger page for a 2,000-turn conversation (AppTest).

Builds (once, cached in benchmarks/results/) a SQLite store holding one support-bot conversation
of 2,000 demo-model turns, then opens the debugger page on it with Streamlit's AppTest and times:

* cold: the first run in a fresh process (nothing cached: the conversation, flow and the selected
  turn's node runs are read and unpacked);
* warm: further reruns of the same session (what every click costs), and a rerun after inspecting
  another turn.

Reported as seconds and as a ratio against a baseline measured in the same process: a rerun of the
trivial ledger-explorer page. Target: a warm rerun under one second on this machine.
Run: ``.venv/bin/python benchmarks/ui.py [--turns 2000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"


def build_store(path: Path, turns: int) -> None:
    from core.flow.graph import load_flow
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn
    from core.llm.client import DemoClient
    from core.service.sessions import ConversationService
    from core.service.turn_rows import turn_from_record
    from core.store import repo
    from core.store.db import Database

    flow_path = ROOT / "sample_data" / "flows" / "support-bot.yml"
    flow = load_flow(flow_path)
    state = ConversationState.new(flow)
    records = []
    start = time.perf_counter()
    facts = [
        "Hi, I'm Dana.",
        "My order number is 4411.",
        "I'm vegetarian.",
        "Where is my parcel?",
        "What's my name?",
        "Can you change the delivery address?",
        "What is my order number?",
    ]
    for i in range(turns):
        record = run_turn(flow, state, f"{facts[i % len(facts)]} (message {i})", llm=DemoClient())
        records.append(record)
        state = state.apply(record)
    print(f"ran {turns:,} turns in memory in {time.perf_counter() - start:.1f} s")
    db = Database(f"sqlite:///{path}")
    service = ConversationService(db)
    version = service.import_flow(flow_path, name="support-bot")
    conv = service.start(version.flow_id, name=f"{turns:,}-turn support conversation")
    for record in records:
        repo.save_turn(db, conv.id, turn_from_record(record, version.id))
    repo.write_variable_changes(
        db,
        conv.id,
        [
            {"name": k, "old": None, "new": v, "operation": "import", "node_id": "bench"}
            for k, v in state.variables.items()
        ],
        turn_id=None,
        turn_seq=None,
    )
    repo.set_setting(db, "demo.seeded", True)  # open straight on this conversation
    db.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--reruns", type=int, default=5)
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"ui-{args.turns}.db"
    if not path.exists():
        tmp = path.with_suffix(".building")
        for p in RESULTS.glob(tmp.name + "*"):
            p.unlink()
        build_store(tmp, args.turns)
        tmp.rename(path)
        for suffix in ("-wal", "-shm"):
            side = Path(str(tmp) + suffix)
            if side.exists():
                side.rename(Path(str(path) + suffix))
    os.environ["MEMLENS_DATABASE_URL"] = f"sqlite:///{path}"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    from streamlit.testing.v1 import AppTest

    def timed(at: AppTest) -> float:
        start = time.perf_counter()
        at.run()
        if at.exception:
            raise SystemExit(f"the page failed: {at.exception}")
        return time.perf_counter() - start

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    cold = timed(at)
    shown = len(at.chat_message)
    warm = [timed(at) for _ in range(args.reruns)]
    conv_id = at.session_state["conv_id"]
    from core.store import repo
    from core.store.db import Database

    turns = repo.load_turn_rows(Database(os.environ["MEMLENS_DATABASE_URL"]), conv_id)
    at.session_state["selected_turn"] = turns[-5]["id"]
    inspect = timed(at)
    inspect_warm = timed(at)

    base = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    base.run()
    base.switch_page("pages/ledger.py")
    timed(base)
    baseline = statistics.median(timed(base) for _ in range(args.reruns))

    median = statistics.median(warm)
    print(f"debugger page, {len(turns):,}-turn conversation ({shown} chat messages shown):")
    print(f"  cold first run:            {cold:.2f} s ({cold / baseline:.1f}× the baseline)")
    print(
        f"  warm rerun (median of {args.reruns}): {median:.3f} s ({median / baseline:.1f}× the baseline); "
        f"target < 1 s: {'met' if median < 1 else 'MISSED'}"
    )
    print(f"  inspect another turn:      {inspect:.3f} s, then {inspect_warm:.3f} s warm")
    print(f"  baseline — warm rerun of the ledger explorer page: {baseline:.3f} s")


if __name__ == "__main__":
    main()
