"""What the pages cost a real browser as a conversation grows: time, bytes over the websocket, DOM size.

Seeds one temporary SQLite store per size with a recorded support-bot conversation of 10, 1,000
and 10,000 turns (``workload.seed_support_conversation``), starts ``streamlit run app.py`` on each,
and drives Debian's Chromium through Playwright:

* page loads — Debugger, Compare, Present, Ledger explorer (the last three open on a sample, then
  pick the stored conversation: a step of its own);
* steps on the Debugger — inspect an earlier turn, switch the side panel's tab (only the open tab is
  drawn, so a switch reruns the workspace), change a node's window on the switchboard.

A load or step is over when the page has settled: the script run it started has finished (the app
says it is not running, no element is left stale from the previous run and none is still a
placeholder waiting for its code, the running indicator is gone), a marker that only the new state
shows is on the page (the inspected turn's receipt, the picked conversation's length…), no HTTP
request is in flight (a chart's script chunk), and neither a websocket frame, the end of a request
nor a change in the number of elements came for :data:`QUIET` seconds. Its time runs from the action
to the last frame or change in the number of elements (or to the marker, when neither came after
it), measured by the page's own clock (a load's from the start of its navigation), so the
benchmark's polling adds nothing. Bytes are the websocket messages' payloads; the number of elements
is counted once settled.

For each it prints the medians (and the spread of the measured visits) with the server's CPU time for
the load or step and, for the longer conversations, each as a ratio against the 10-turn case of the same
run. Targets (at every size): every load and step within 2× the 10-turn time, at most 1.5 MB per load or
step, at most 25,000 DOM elements; at the largest size, inspecting a turn and a switchboard change within
:data:`STEP_TARGET` seconds (they rerun the Debugger's transcript and inspector alone, a fragment).

Before the sizes, the first page of a fresh install: an empty store, the server just started, the
Debugger opened until the demo's newest turn's receipt is on the page (the demo is seeded from its
prepared bundle), within :data:`FIRST_PAGE_TARGET` seconds — several fresh installs, median and spread.

Every visit is a fresh browser page (a new Streamlit session). The first visit of each page warms
the server's caches, as any earlier visitor would, and is printed as the cold figures; the medians
of the next visits are measured against the targets. Each Debugger visit inspects a different turn
and sets a different window, so those steps compute afresh every time.
On a shared machine the wall-clock times are noisy: the server's CPU seconds (its process's user and
system time over the load or step) say what the page cost it, whatever else runs.
Run: ``.venv/bin/python benchmarks/browser.py [--turns 10,1000,10000] [--repeats 3] [--fresh 3]``.
"""

from __future__ import annotations

import argparse
import os
import re
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
QUIET = 0.75  # seconds without a websocket frame or a change in the number of elements
TIMEOUT = 600  # seconds a load or step may take before the benchmark gives up
STEP_TARGET = 0.5  # seconds: inspect a turn, change the switchboard, at the largest size
FIRST_PAGE_TARGET = 3.0  # seconds: the Debugger's first page on a fresh install
STEPS_TARGETED = ("Debugger: inspect an earlier turn", "Debugger: switchboard — change the Responder's window")

# Installed in every document before the app's own scripts: counts the bytes and times of the
# websocket's messages and when the number of elements last changed, on the page's clock (epoch ms).
# The count is taken at most every 50 ms after a mutation, so a page of many elements is not slowed
# by counting; the time recorded is the mutation's. Attribute changes are left out: charts keep
# adjusting their layout (sizes, hover layers) for a while after they are on the page. So are hover
# tooltips (floating-ui portals): the pointer rests on the button just clicked, whose help appears a
# moment after the step's result, as the hover's doing, not the step's. So is a canvas's content: a
# data frame's grid fills its accessibility table inside its canvas about 300 ms after drawing the
# rows, and a canvas's children are never shown.
METER = """
(() => {
  const now = () => performance.timeOrigin + performance.now();
  const m = window.__ml = {bytes: 0, frames: 0, lastFrame: 0, count: 0, lastCount: now(), dirty: 0};
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        const d = e.data;
        m.bytes += typeof d === 'string' ? new TextEncoder().encode(d).length : (d.byteLength ?? d.size ?? 0);
        m.frames += 1;
        m.lastFrame = now();
      });
    }
  };
  const all = document.getElementsByTagName('*');
  const UNSEEN = '[data-floating-ui-portal], canvas';
  const unseen = (node) => node.nodeType === 1 && !!node.closest(UNSEEN);
  new MutationObserver((changes) => {
    if (!m.dirty && changes.some((c) => !unseen(c.target) && ![...c.addedNodes, ...c.removedNodes].every(unseen)))
      m.dirty = now();
  }).observe(document, {subtree: true, childList: true});
  setInterval(() => {
    if (!m.dirty) return;
    const n = all.length - document.querySelectorAll('[data-floating-ui-portal], [data-floating-ui-portal] *, canvas *').length;
    if (n !== m.count) { m.count = n; m.lastCount = m.dirty; }
    m.dirty = 0;
  }, 50);
})();
"""
STATE = """() => {
  const m = window.__ml;
  const app = document.querySelector('[data-testid=stApp]');
  return {now: performance.timeOrigin + performance.now(), bytes: m.bytes, frames: m.frames,
          lastFrame: m.lastFrame, lastCount: m.lastCount, dirty: m.dirty,
          elements: document.getElementsByTagName('*').length,
          script: app ? app.dataset.testScriptState : null,
          stale: document.querySelectorAll('[data-testid=stElementContainer][data-stale=true]').length,
          skeletons: document.querySelectorAll('[data-testid=stSkeleton]').length,
          running: document.querySelectorAll('[data-testid=stStatusWidgetRunningIcon],'
                                              + '[data-testid=stStatusWidgetRunningManIcon]').length};
}"""
RESET = "() => { window.__ml.bytes = 0; window.__ml.frames = 0; return performance.timeOrigin + performance.now(); }"


class Meter:
    """Measures one page's loads and steps (see the module's docstring for when a page has settled)."""

    def __init__(self, page, server_cpu=None) -> None:
        self.page = page
        self.server_cpu = server_cpu or (lambda: 0.0)  # the server's CPU seconds so far
        page.add_init_script(METER)
        # HTTP requests in flight (the app's script chunks load when an element first needs them: a
        # chart's drawing starts only after its chunk arrived), and when the last one ended.
        self.requests, self.request_ended = set(), 0.0
        page.on("request", lambda request: self.requests.add(request))
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _ended(self, request) -> None:
        self.requests.discard(request)
        self.request_ended = time.time()

    def measure(
        self, action, ready=None, *, reruns: bool = True, timeout: float | None = None
    ) -> tuple[float, int, int, float]:
        """Run ``action`` and wait until the page settles; (seconds, bytes received, DOM elements, the server's
        CPU seconds meanwhile).

        ``ready``: a locator that is visible only once the action's result is on the page.
        ``reruns``: the action starts a script run (a click on a node's tab in the receipt does not), so a frame must come
        and that run must finish.
        """
        # Times are on the page's clock: a step's from just before it, a load's from its navigation.
        navigates = not self.page.url.startswith("http")
        cpu = self.server_cpu()
        start = None if navigates else self.page.evaluate(RESET)
        action()
        if navigates:
            start = self.page.evaluate("performance.timeOrigin")
        marked = None if ready is not None else start
        while True:
            self.page.wait_for_timeout(50)
            s = self.page.evaluate(STATE)
            if s["now"] > start + (timeout or TIMEOUT) * 1000:
                raise RuntimeError(f"the page did not settle: {s}")
            if marked is None and ready.first.is_visible():
                marked = s["now"]
            if reruns and (not s["frames"] or s["script"] != "notRunning"):
                continue
            if marked is None or s["stale"] or s["skeletons"] or s["running"] or s["dirty"]:
                continue
            if self.requests or time.time() - self.request_ended < QUIET:
                continue
            last = max(s["lastFrame"], s["lastCount"])
            if s["now"] - last >= QUIET * 1000:
                return (max(last, marked) - start) / 1000, s["bytes"], s["elements"], self.server_cpu() - cpu


def new_page(browser, server_cpu=None):
    page = browser.new_page(viewport={"width": 1500, "height": 1200})
    page.set_default_timeout(600_000)
    return page, Meter(page, server_cpu)


def server_cpu(url: str):
    """A function giving the CPU seconds (user + system) the app's server at ``url`` has used so far (started as
    ``memlens ui`` starts it, ``python -m ui.serve``, or as ``streamlit run``)."""
    port = url.rsplit(":", 1)[1]
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        command = b" ".join(args)
        if (b"streamlit" in command or b"ui.serve" in command) and port.encode() in args:
            stat = proc / "stat"
            tick = os.sysconf("SC_CLK_TCK")

            def used() -> float:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / tick

            return used
    return lambda: 0.0


PAGES = (("Debugger", ""), ("Compare", "/compare"), ("Present", "/present"), ("Ledger explorer", "/ledger"))


# The pages that open on a sample and offer the store in their sidebar, and the option's label.
PICKS = {"Compare": "Stored", "Present": "Stored", "Ledger explorer": "the store"}


def pick_stored(page, label: str) -> None:
    page.get_by_test_id("stSidebar").get_by_text(label, exact=True).click()


def _text(page, pattern: str):
    return page.get_by_text(re.compile(pattern))


def loaded(page, name: str, turns: int):
    """What only the page opened (the Debugger: on the stored conversation's newest turn) shows."""
    if name == "Debugger":
        return _text(page, rf"^Turn {turns} — ")  # the receipt of the newest turn
    if name == "Compare":
        return page.get_by_role("heading", name="Retention heatmaps")
    if name == "Present":
        return _text(page, r"^Turn 1 · 1 of \d+$")
    return _text(page, r"^Turn \d+ — the user asks:")


def picked(page, name: str, turns: int):
    """What only the page showing the stored conversation of ``turns`` turns shows."""
    if name == "Compare":  # the sidebar's caption: where it comes from and its length
        return page.get_by_test_id("stSidebar").get_by_text(re.compile(rf"· {turns:,} turns?( ·|$)"))
    if name == "Present":
        return _text(page, rf"^Turn 1 · 1 of {turns}$")
    return _text(page, rf"^Turn {turns} — the user asks:")  # opens at its newest turn


#: Every measured visit's seconds and server CPU seconds, by (size, step): the spread printed beside the medians.
SPREAD: dict[tuple[int, str], list[tuple[float, float]]] = {}


def measure_size(browser, url: str, turns: int, repeats: int) -> dict[str, tuple[float, int, int, float]]:
    """Every page: one warm-up visit (printed as the cold figures), then ``repeats`` measured visits
    (medians). Each visit also takes the page's steps; a Debugger visit inspects a turn and sets a
    window no earlier visit used, so those steps compute afresh every time."""
    out: dict[str, tuple[float, int, int, float]] = {}
    cpu = server_cpu(url)
    for name, path in PAGES:
        samples: dict[str, list] = {}
        for i in range(repeats + 1):
            page, meter = new_page(browser, cpu)
            figures = {f"{name}: load": meter.measure(lambda: page.goto(url + path), loaded(page, name, turns))}
            if name in PICKS:
                figures[f"{name}: pick the stored conversation"] = meter.measure(
                    lambda: pick_stored(page, PICKS[name]), picked(page, name, turns)
                )
            if name == "Debugger":
                figures.update(debugger_steps(page, meter, turns, i))
            page.close()
            for step, value in figures.items():
                if i == 0:
                    out[f"{step} (cold: first visit, not targeted)"] = value
                else:
                    samples.setdefault(step, []).append(value)
                    SPREAD.setdefault((turns, step), []).append((value[0], value[3]))
        out.update({step: _median(values) for step, values in samples.items()})
    return out


def first_page(browser, tmp: Path, fresh: int) -> list[tuple[float, int, int, float]]:
    """The Debugger's first page on ``fresh`` fresh installs: each an empty store and a server just started
    (healthy), the page opened until the demo's newest turn's receipt is on it."""
    from tests.browser import streamlit_server

    out = []
    for k in range(fresh):
        path = tmp / f"fresh-{k}.db"
        with streamlit_server({"MEMLENS_DATABASE_URL": f"sqlite:///{path}"}, tmp / f"fresh-{k}.log") as url:
            page, meter = new_page(browser, server_cpu(url))
            out.append(meter.measure(lambda: page.goto(url), loaded(page, "Debugger", 8)))
            page.close()
    return out


def debugger_steps(page, meter: Meter, turns: int, visit: int) -> dict[str, tuple[float, int, int]]:
    out = {}
    inspect = page.get_by_test_id("stButton").filter(has_text="Inspect")  # one per answer, oldest first
    turn = turns - 1 - visit
    out["Debugger: inspect an earlier turn"] = meter.measure(
        lambda: inspect.nth(inspect.count() - 2 - visit).click(), _text(page, rf"^Turn {turn} — ")
    )
    variables = page.get_by_role("tabpanel", name="Variables")
    out["Debugger: switch to the Variables tab"] = meter.measure(
        lambda: page.get_by_role("tab", name="Variables").click(),
        variables.get_by_text(re.compile(rf"^after turn {turn}:")),
    )
    switchboard = page.get_by_role("tabpanel", name="Switchboard")
    meter.measure(lambda: page.get_by_role("tab", name="Switchboard").click(), switchboard)
    window = switchboard.locator(
        '[data-stale="false"][class*="-responder_window_turns"] input'
    )  # its key names the node

    def change() -> None:
        window.fill(str(6 + visit))  # the flow sets 4
        window.press("Enter")

    out["Debugger: switchboard — change the Responder's window"] = meter.measure(
        change, page.get_by_role("button", name=f"Re-run turn {turn} as a branch")
    )
    return out


def _median(samples: list[tuple[float, int, int, float]]) -> tuple[float, int, int, float]:
    return (
        statistics.median(s[0] for s in samples),
        int(statistics.median(s[1] for s in samples)),
        int(statistics.median(s[2] for s in samples)),
        statistics.median(s[3] for s in samples),
    )


def _turns(text: str) -> list[int]:
    try:
        sizes = [int(t.replace("_", "")) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give turn counts separated by commas, e.g. 10,1000") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive turn counts separated by commas, e.g. 10,1000")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--turns",
        type=_turns,
        default=[10, 1000, 10000],
        help="conversation lengths, the first one the baseline (default 10,1000,10000)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="measured visits per page after one warm-up, their median printed (default 3)",
    )
    ap.add_argument(
        "--fresh",
        type=int,
        default=3,
        help="fresh installs whose first page is measured, their median printed (default 3; 0: none)",
    )
    args = ap.parse_args()
    from benchmarks.workload import seed_support_conversation
    from core.store import repo
    from core.store.db import Database
    from tests.browser import chromium, streamlit_server

    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start: the machine may be "
        "shared, so absolute times are noisy; the ratios against the first size come from the same run.",
        flush=True,
    )
    base = args.turns[0]
    results: dict[int, dict] = {}
    firsts: list = []
    with tempfile.TemporaryDirectory(prefix="memlens-browser-") as tmp, chromium() as browser:
        if args.fresh:
            firsts = first_page(browser, Path(tmp), args.fresh)
            report_first_page(firsts)
        for size in args.turns:
            path = Path(tmp) / f"{size}.db"
            db = Database(f"sqlite:///{path}")
            start = time.perf_counter()
            seed_support_conversation(db, size)
            repo.set_setting(db, "demo.seeded", True)  # the store holds this conversation only
            db.dispose()
            print(f"\nseeded {size:,} turns in {time.perf_counter() - start:.1f} s", flush=True)
            with streamlit_server({"MEMLENS_DATABASE_URL": f"sqlite:///{path}"}, Path(tmp) / f"{size}.log") as url:
                results[size] = measure_size(browser, url, size, args.repeats)
            report(results, base, size)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    failed = [f for size in args.turns for f in check(results, base, size)]
    report_targets(results, args.turns[-1])
    failed += check_targets(results, args.turns[-1], firsts)
    print("\nall targets met" if not failed else f"\nMISSED {len(failed)} target(s):\n  " + "\n  ".join(failed))


def report(results: dict[int, dict], base: int, size: int) -> None:
    print(
        f"{size:,} turns"
        + (f" (ratios against {base:,} turns)" if size != base else "")
        + f", medians of the measured visits, load average {os.getloadavg()[0]:.1f}:"
    )
    width = max(map(len, results[size]))
    print(
        f"  {'':{width}} {'time':>8} {'spread':>13} {'ratio':>6} {'server cpu':>10} {'received':>10} {'ratio':>6} "
        f"{'elements':>9} {'ratio':>6}"
    )
    for name, (sec, sent, elements, cpu) in results[size].items():
        b = results[base].get(name) if size != base else None

        def ratio(x, y):
            return "" if b is None else f"{x / y:5.1f}×" if y else "   –  "

        seen = [t for t, _ in SPREAD.get((size, name), [])]
        spread = f"{min(seen):5.2f}–{max(seen):5.2f}s" if seen else ""
        print(
            f"  {name:{width}} {sec:7.2f}s {spread:>13} {ratio(sec, b and b[0]):>6} {cpu:9.2f}s {sent / 1e6:8.3f}MB "
            f"{ratio(sent, b and b[1]):>6} {elements:9,} {ratio(elements, b and b[2]):>6}"
        )
    print(
        f"  targets: time ≤ {MAX_RATIO:g}× the {base:,}-turn case · ≤ {MAX_BYTES / 1e6:g} MB received · "
        f"≤ {MAX_ELEMENTS:,} DOM elements",
        flush=True,
    )


def report_first_page(firsts: list) -> None:
    times, cpus = [f[0] for f in firsts], [f[3] for f in firsts]
    print(
        f"\nfirst page of a fresh install ({len(firsts)} fresh installs): median {statistics.median(times):.2f} s "
        f"(spread {min(times):.2f}–{max(times):.2f} s), server CPU median {statistics.median(cpus):.2f} s · target "
        f"≤ {FIRST_PAGE_TARGET:g} s · load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def report_targets(results: dict[int, dict], size: int) -> None:
    """The Debugger's steps at the largest size against their own target."""
    print(f"\nDebugger steps at {size:,} turns against the {STEP_TARGET:g} s target (medians; spread; server CPU):")
    for step in STEPS_TARGETED:
        if step in results.get(size, {}):
            sec, _, _, cpu = results[size][step]
            seen = [t for t, _ in SPREAD.get((size, step), [])]
            print(
                f"  {step}: {sec:.2f} s (spread {min(seen):.2f}–{max(seen):.2f} s), server CPU {cpu:.2f} s · "
                f"{'met' if sec <= STEP_TARGET else 'missed'}"
            )


def check_targets(results: dict[int, dict], size: int, firsts: list) -> list[str]:
    failed = [
        f"{size:,} turns, {step}: {results[size][step][0]:.2f} s > {STEP_TARGET:g} s"
        for step in STEPS_TARGETED
        if step in results.get(size, {}) and results[size][step][0] > STEP_TARGET
    ]
    if firsts and statistics.median(f[0] for f in firsts) > FIRST_PAGE_TARGET:
        failed.append(
            f"first page of a fresh install: {statistics.median(f[0] for f in firsts):.2f} s > {FIRST_PAGE_TARGET:g} s"
        )
    return failed


def check(results: dict[int, dict], base: int, size: int) -> list[str]:
    failed = []
    for name, (sec, sent, elements, _) in results[size].items():
        if "not targeted" in name:
            continue
        b = results[base][name]
        if size != base and sec > MAX_RATIO * max(b[0], 0.05):
            failed.append(f"{size:,} turns, {name}: {sec:.2f} s is {sec / b[0]:.1f}× the {base:,}-turn case")
        if sent > MAX_BYTES:
            failed.append(f"{size:,} turns, {name}: {sent / 1e6:.2f} MB received")
        if elements > MAX_ELEMENTS:
            failed.append(f"{size:,} turns, {name}: {elements:,} DOM elements")
    return failed


if __name__ == "__main__":
    main()
