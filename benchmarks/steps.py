"""How long does a person wait for the steps they take most? Measured in one process, with AppTest
(the page's own script run, without a browser's drawing) and the service, on the demo:

* first load of a fresh install — the debugger on an empty database: the demo is seeded then;
* Inspect an earlier turn on the debugger, warm (the second time a turn is inspected);
* a Present step (Next), warm;
* "Re-run as a branch" with the demo model, after the app's litellm warm-up.

Each is printed in seconds, against its target, and as a ratio of a baseline measured in the same run:
one run of a trivial Streamlit script (what any page costs before it does anything).

Run: ``.venv/bin/python benchmarks/steps.py``
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from streamlit.testing.v1 import AppTest  # noqa: E402

TARGETS = {
    "first load of a fresh install": 5.0,
    "Inspect (warm)": 0.5,
    "Present step (warm)": 0.5,
    "Re-run a turn as a branch": 3.0,
}


def timed(fn, repeat: int = 1) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    baseline_app = AppTest.from_string("import streamlit as st\nst.title('x')\nst.write('y')", default_timeout=60)
    baseline_app.run()  # pays Streamlit's imports once
    baseline = timed(
        lambda: AppTest.from_string("import streamlit as st\nst.title('x')", default_timeout=60).run(), repeat=5
    )

    from core.llm.client import _litellm

    _litellm()  # the app warms litellm up in the background at start; here, up front

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEMLENS_DATABASE_URL"] = f"sqlite:///{Path(tmp) / 'memlens.db'}"
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        results["first load of a fresh install"] = timed(at.run)
        assert not at.exception, at.exception

        from core.store import repo
        from core.store.db import Database

        conv_id = at.session_state["conv_id"]
        rows = repo.load_turn_rows(Database(os.environ["MEMLENS_DATABASE_URL"]), conv_id)

        def inspect(i: int):
            return lambda: at.button(key=f"tx-{conv_id}-{rows[i]['id']}-1-inspect").click().run()

        inspect(2)()  # first inspection of each turn fills the caches
        inspect(4)()
        results["Inspect (warm)"] = statistics.median([timed(inspect(i)) for i in (2, 4, 2, 4)])

        at.switch_page("pages/present.py").run()
        at.button(key="pre_next").click().run()
        at.button(key="pre_first").click().run()
        steps = []
        for _ in range(4):
            steps.append(timed(lambda: at.button(key="pre_next").click().run()))
        results["Present step (warm)"] = statistics.median(steps)

        from core.service.sessions import ConversationService

        svc = ConversationService(Database(os.environ["MEMLENS_DATABASE_URL"]))
        results["Re-run a turn as a branch"] = timed(
            lambda: svc.rerun_from(conv_id, rows[5]["id"], {"responder": {"window": 6}}), repeat=3
        )

    print(f"baseline — a trivial Streamlit script run: {baseline * 1000:.0f} ms")
    for name, seconds in results.items():
        target = TARGETS[name]
        verdict = "met" if seconds <= target else "NOT met"
        print(f"{name:<32} {seconds:6.2f} s = {seconds / baseline:6.1f}× baseline   target ≤ {target:g} s: {verdict}")


if __name__ == "__main__":
    main()
