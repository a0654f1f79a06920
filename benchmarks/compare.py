"""How fast is a six-config comparison of a 2,000-turn conversation?

Builds a 2,000-turn conversation (varied message lengths, a tool round every seventh turn, a
user fact stated every 40 turns and restated now and then) and measures, in this one process:

(a) the floor: tiktoken encoding every message's text once;
(b) ``core.analysis.compare.compare`` with six configs, cold (token counts not cached yet) and warm:
    every turn's memory decision for every config (the series, the fact timelines) plus the
    heatmap window (60 turns × 240 messages) — everything the compare page draws;
(c) for scale, the naive way to fill that heatmap window: one full ``Replay.ledger_at`` per row;
(d) the whole 2,000-row matrix of one config through the same walk (``--full``), to show what a
    window saves;
(e) everything the compare page draws, as the page does it: the comparison over the page's heatmap
    window (40 turns × 160 messages), the findings of all six configs, the six plotly heatmaps and
    the three line charts (figure data only, no browser) — and the one-file HTML report.

Everything is printed as a ratio of (a); the report's time and size also against their targets
(≤ 1.5 s and ≤ 2 MB at 2,000 turns × 6 configs).
Run: ``.venv/bin/python benchmarks/compare.py`` (``--turns N``, ``--full``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workload import build_conversation, floor_seconds  # noqa: E402
from core.analysis.compare import compare, heatmap_window, retention_matrix  # noqa: E402
from core.memory.config import MemoryConfig
from core.memory.replay import Replay  # noqa: E402
from core.model import tokens  # noqa: E402
from core.model.conversation import Conversation  # noqa: E402
from core.model.tokens import _encoding  # noqa: E402

FACTS = (
    "My name is Dana.",
    "I'm vegetarian.",
    "My order number is 4411.",
    "I live in Porto.",
    "I'm allergic to peanuts.",
    "My favourite colour is green.",
    "I work as a nurse.",
    "Call me Sam.",
)
MODEL = "gpt-4o-mini"
CONFIGS = [
    MemoryConfig(window=3, model=MODEL),
    MemoryConfig(window=10, model=MODEL),
    MemoryConfig(context_size=6_000, model=MODEL),
    MemoryConfig(strategy="window", window=20, model=MODEL),
    MemoryConfig(strategy="buffer", context_size=16_000, model=MODEL),
    MemoryConfig(strategy="off", model=MODEL),
]


#: The one-file HTML report of 2,000 turns × 6 configs: built in at most this long.
REPORT_TARGET_S = 1.5


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=2_000)
    ap.add_argument("--full", action="store_true", help="also compute one config's whole matrix")
    args = ap.parse_args()

    conv = build_conversation(args.turns, seed=11, facts=FACTS)
    _encoding("o200k_base")  # load the encodings outside every measurement
    n_messages = sum(len(t.messages) for t in conv.turns)
    floor = min(floor_seconds(conv, MODEL) for _ in range(3))
    print(
        f"conversation: {args.turns:,} turns, {n_messages:,} messages; configs: "
        + ", ".join(c.label() for c in CONFIGS)
    )
    print(f"(a) floor — tiktoken encodes every message once: {floor:.3f} s")

    tokens._counter.cache_clear()  # cold: the comparison pays for its own token counts
    cold, result = timed(lambda: compare(conv, CONFIGS))
    warm = min(timed(lambda: compare(conv, CONFIGS))[0] for _ in range(2))
    window = result.window
    cells = sum(len(r) for m in result.matrices for r in m.cells)
    print(
        f"(b) compare, 6 configs: cold {cold:.3f} s = {cold / floor:.1f}× floor; warm {warm:.3f} s = "
        f"{warm / floor:.1f}× floor"
    )
    print(
        f"    {len(result.turns):,} turns of series per config, {len(result.facts)} facts tracked, heatmap window "
        f"{len(window.rows)} rows × {window.last_column - window.first_column} columns ({cells:,} cells in all)"
    )
    for sentence in result.sentences[:3]:
        print(f"    e.g. {sentence}")

    replay = Replay(conv, CONFIGS[0])
    replay.summaries()
    naive, _ = timed(lambda: [replay.ledger_at(p) for p in window.rows])
    fast, _ = timed(lambda: retention_matrix(Replay(conv, CONFIGS[0]), window))
    print(
        f"(c) one config's heatmap window: {len(window.rows)} full ledgers {naive:.3f} s = {naive / floor:.1f}× "
        f"floor; through the walk {fast:.3f} s = {fast / floor:.1f}× floor ({naive / fast:.0f}× faster)"
    )

    page_figures(conv, floor)

    if args.full:
        whole = heatmap_window(conv, max_rows=10**9, max_columns=10**9)
        seconds, matrix = timed(lambda: retention_matrix(Replay(conv, CONFIGS[0]), whole))
        n = sum(1 for r in matrix.cells for x in r if x is not None)
        print(
            f"(d) one config's whole matrix: {len(whole.rows):,} × {whole.last_column:,}, {n:,} cells: "
            f"{seconds:.2f} s = {seconds / floor:.0f}× floor"
        )


def page_figures(conv: Conversation, floor: float) -> None:
    from core.analysis.findings import config_findings
    from core.analysis.source import Source
    from core.report.build import REPORT_COLUMNS, REPORT_ROWS, build_report
    from core.report.html import report_html
    from ui.compare_charts import kept_figure, oldest_figure, tokens_figure
    from ui.heatmap import heatmap_figure

    window = heatmap_window(conv, max_rows=REPORT_ROWS, max_columns=REPORT_COLUMNS)
    seconds, result = timed(lambda: compare(conv, CONFIGS, window=window))
    found_s, found = timed(lambda: config_findings(conv, CONFIGS, comparison=result))
    figs_s, figs = timed(
        lambda: (
            [heatmap_figure(m) for m in result.matrices]
            + [f(result) for f in (kept_figure, tokens_figure, oldest_figure)]
        )
    )
    size = sum(len(f.to_json()) for f in figs)
    total = seconds + found_s + figs_s
    print(
        f"(e) the compare page: comparison {seconds:.3f} s + findings {found_s:.3f} s ({len(found)} found) + "
        f"{len(figs)} figures {figs_s:.3f} s = {total:.3f} s = {total / floor:.1f}× floor; figure JSON "
        f"{size / 1e6:.1f} MB"
    )
    cpu = time.process_time()
    report_s, html = timed(lambda: report_html(build_report(Source(conv, "bench"), CONFIGS, window=window)))
    cpu = time.process_time() - cpu  # on a shared machine, what the build itself used of a core
    size = len(html.encode())
    print(
        f"    the HTML report: {report_s:.3f} s (CPU time {cpu:.3f} s) = {report_s / floor:.1f}× floor = "
        f"{report_s / REPORT_TARGET_S:.2f}× "
        f"the target of {REPORT_TARGET_S} s ({'met' if report_s <= REPORT_TARGET_S else 'NOT met'}), "
        f"{size / 1e6:.2f} MB (target at 2,000 turns × 6 configs: at most 2 MB — "
        f"{'met' if size <= 2_000_000 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
