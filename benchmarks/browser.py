"""What the pages cost a real browser as a conversation grows: time, bytes over the websocket, DOM size.

Seeds one temporary SQLite store per size with a recorded support-bot conversation of 10, 1,000
and 10,000 turns (``workload.seed_support_conversation``), starts ``streamlit run app.py`` on each,
and drives Debian's Chromium through Playwright:

* page loads — Debugger, Compare, Present, Ledger explorer (the last three open on a sample, then
  pick the stored conversation: a step of its own);
* steps on the Debugger — inspect an earlier turn, switch the side panel's tab, change a node's
  window on the switchboard.

For each it prints the time until the page settled (the last websocket frame or change in the
number of elements), the bytes received over the websocket (``framereceived`` payloads) and the
number of DOM elements afterwards — and, for the longer conversations, each as a ratio against the
10-turn case of the same run. Targets (checked at the longest size): every load and step within 2×
the 10-turn time, at most 1.5 MB per load or step, at most 25,000 DOM elements.

Every visit is a fresh browser page (a new Streamlit session). The first visit of each page warms
the server's caches, as any earlier visitor would, and is printed as the cold figures; the medians
of the next visits are measured against the targets. Each Debugger visit inspects a different turn
and sets a different window, so those steps compute afresh every time.
Run: ``.venv/bin/python benchmarks/browser.py [--sizes 10 1000 10000] [--loads 3]``.
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

MAX_RATIO = 2.0
MAX_BYTES = 1_500_000
MAX_ELEMENTS = 25_000
QUIET = 0.6  # seconds without a frame or a DOM change: the page has settled

ELEMENTS = 25_000
QUIET = 0.6  # seconds without a frame or a DOM change: the page has settled

# Records when elements were last added, removed or given new text, so a load or step counts the
# browser's building of the page too. Attribute changes are left out: charts keep adjusting their
# layout (sizes, hover layers) for a while after they are on the page.
WATCH_DOM = """
window.__lastChange = performance.now();
new MutationObserver(() => { window.__lastChange = performance.now(); })
  .observe(document, {subtree: true, childList: true, characterData: true});
"""
ELEMENTS = "document.getElementsByTagName('*').length"


class Meter:
    """Bytes and arrival time of every websocket frame the page receives."""

    def __init__(self, page) -> None:
        self.page = page
        self.bytes = 0
        self.frames = 0
        self.last = 0.0
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        self.bytes += len(payload) if isinstance(payload, (bytes, bytearray)) else len(payload.encode())
        self.frames += 1
        self.last = time.perf_counter()

    def measure(self, action, *, reruns: bool = True, timeout: float = 600) -> tuple[float, int, int]:
        """Run ``action`` and wait until the page settles; (seconds, bytes received, DOM elements).

        Settled: the script has finished, and neither a websocket frame nor a change in the number of
        elements for :data:`QUIET` seconds. The time is until the last of those — the page built. (A
        chart redrawing its own parts at the same size does not count: charts keep adjusting their
        layout for a while after they are on the page.)
        """
        self.bytes = self.frames = 0
        start = time.perf_counter()
        action()
        changed, count = start, None
        while True:
            self.page.wait_for_timeout(100)
            now = time.perf_counter()
            if now > start + timeout:
                raise RuntimeError("the page did not settle")
            n = self.page.evaluate(ELEMENTS)
            if n != count:
                changed, count = now, n
            state = self.page.evaluate("document.querySelector('[data-testid=stApp]')?.dataset.testScriptState")
            if reruns and (not self.frames or state != "notRunning"):
                continue
            if now - max(self.last, changed) >= QUIET:
                return max(self.last, changed) - start, self.bytes, count


def new_page(browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1200})
    page.set_default_timeout(600_000)
    return page, Meter(page)


PAGES = (("Debugger", ""), ("Compare", "/compare"), ("Present", "/present"), ("Ledger explorer", "/ledger"))


# The pages that open on a sample and offer the store in their sidebar, and the option's label.
PICKS = {"Compare": "Stored", "Present": "Stored", "Ledger explorer": "the store"}


def pick_stored(page, label: str) -> None:
    page.get_by_test_id("stSidebar").get_by_text(label, exact=True).click()


def measure_size(browser, url: str, loads: int) -> dict[str, tuple[float, int, int]]:
    """Every page: one warm-up visit (printed as the cold figures), then ``loads`` measured visits
    (medians). Each visit also takes the page's steps; a Debugger visit inspects a turn and sets a
    window no earlier visit used, so those steps compute afresh every time."""
    out: dict[str, tuple[float, int, int]] = {}
    for name, path in PAGES:
        samples: dict[str, list] = {}
        for i in range(loads + 1):
            page, meter = new_page(browser)
            figures = {f"{name}: load": meter.measure(lambda: page.goto(url + path))}
            if name in PICKS:
                figures[f"{name}: pick the stored conversation"] = meter.measure(
                    lambda: pick_stored(page, PICKS[name]))
            if name == "Debugger":
                figures.update(debugger_steps(page, meter, i))
            page.close()
            for step, value in figures.items():
                if i == 0:
                    out[f"{step} — first visit (cold, not targeted)"] = value
                else:
                    samples.setdefault(step, []).append(value)
        out.update({step: _median(values) for step, values in samples.items()})
    return out


def debugger_steps(page, meter: Meter, visit: int) -> dict[str, tuple[float, int, int]]:
    out = {}
    inspect = page.get_by_test_id("stButton").filter(has_text="Inspect")
    out["Debugger: inspect an earlier turn"] = meter.measure(
        lambda: inspect.nth(inspect.count() - 2 - visit).click())
    out["Debugger: switch to the Variables tab"] = meter.measure(
        lambda: page.get_by_role("tab", name="Variables").click(), reruns=False)
    meter.measure(lambda: page.get_by_role("tab", name="Switchboard").click(), reruns=False)
    window = page.get_by_label("Window (turns)").nth(1)  # the Responder's

    def change() -> None:
        window.fill(str(4 + visit))
        window.press("Enter")
    out["Debugger: switchboard — change the Responder's window"] = meter.measure(change)
    return out


def _median(samples: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    return (statistics.median(s[0] for s in samples), int(statistics.median(s[1] for s in samples)),
            int(statistics.median(s[2] for s in samples)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 10000])
    ap.add_argument("--loads", type=int, default=3, help="measured loads per page (after one warm-up)")
    args = ap.parse_args()
    from benchmarks.workload import seed_support_conversation
    from core.store import repo
    from core.store.db import Database
    from tests.browser import chromium, streamlit_server

    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="memlens-browser-") as tmp, chromium() as browser:
        for size in args.sizes:
            path = Path(tmp) / f"{size}.db"
            db = Database(f"sqlite:///{path}")
            start = time.perf_counter()
            seed_support_conversation(db, size)
            repo.set_setting(db, "demo.seeded", True)  # the store holds this conversation only
            db.dispose()
            print(f"seeded {size:,} turns in {time.perf_counter() - start:.1f} s", flush=True)
            with streamlit_server({"MEMLENS_DATABASE_URL": f"sqlite:///{path}"}, Path(tmp) / f"{size}.log") as url:
                results[size] = measure_size(browser, url, args.loads)
            report(results, args.sizes[0])
    failed = check(results, args.sizes[0], max(args.sizes))
    print("\nall targets met" if not failed else f"\nMISSED {len(failed)} target(s):\n  " + "\n  ".join(failed))


def report(results: dict[int, dict], base: int) -> None:
    size = max(results)
    print(f"\n{size:,} turns" + (f" (ratios against {base:,} turns)" if size != base else "") + ":")
    print(f"  {'':52} {'time':>8} {'ratio':>6} {'received':>10} {'ratio':>6} {'elements':>9} {'ratio':>6}")
    for name, (sec, sent, elements) in results[size].items():
        b = results[base].get(name)
        ratio = (lambda x, y: f"{x / y:5.1f}×" if y else "   – ") if b and size != base else (lambda x, y: "")
        print(f"  {name:52} {sec:7.2f}s {ratio(sec, b[0]) if b else '':>6} {sent / 1e6:8.3f}MB "
              f"{ratio(sent, b[1]) if b else '':>6} {elements:9,} {ratio(elements, b[2]) if b else '':>6}")
    print(f"  targets: time ≤ {MAX_RATIO:g}× the {base:,}-turn case · ≤ {MAX_BYTES / 1e6:g} MB received · "
          f"≤ {MAX_ELEMENTS:,} DOM elements", flush=True)


def check(results: dict[int, dict], base: int, size: int) -> list[str]:
    failed = []
    for name, (sec, sent, elements) in results[size].items():
        if "not targeted" in name:
            continue
        b = results[base][name]
        if size != base and sec > MAX_RATIO * max(b[0], 0.05):
            failed.append(f"{name}: {sec:.2f} s is {sec / b[0]:.1f}× the {base:,}-turn case")
        if sent > MAX_BYTES:
            failed.append(f"{name}: {sent / 1e6:.2f} MB received")
        if elements > MAX_ELEMENTS:
            failed.append(f"{name}: {elements:,} DOM elements")
    return failed


if __name__ == "__main__":
    main()
