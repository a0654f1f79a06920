"""A report as one self-contained HTML file.

It opens in any browser with no server and no network: the styles are inline, the heatmaps and
line charts are inline SVG (a ``<title>`` per cell is the hover: the message, its tokens and the
reason), there is no script, no font, no image and no link to any other file. Every piece of text
from the conversation, the configs or the findings is HTML-escaped.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from core.analysis.compare.comparison import Comparison
from core.analysis.compare.configs import NamedConfig
from core.analysis.compare.heatmap import RetentionMatrix
from core.analysis.compare.replies import ReplyGrid
from core.analysis.findings.base import Finding, TurnNamer, turn_namer
from core.memory.replay import turn_numbers
from core.memory.strategies.settings import COMMON, NODE_SHAPE
from core.memory.words import explain
from core.model.conversation import Conversation, Message, message_text, turn_label
from core.model.ledger import (
    CLEARED,
    EMPTY,
    FLUSHED,
    GRANULARITY,
    KEPT,
    MEMORY_OFF,
    NOT_SENT,
    OMITTED,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    REASON_LABELS,
    REWRITTEN,
    SCOPE,
    SUMMARIZED,
    TRIMMED_EARLIER,
    LedgerEntry,
    SyntheticMessage,
)

from .build import REPORT_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    from .build import Report

#: Conversations up to this many answered turns list every turn's ledger in a report; longer ones
#: list :data:`LEDGER_TURNS_LONG` turns: the last, the selected one and the first findings' turns.
LEDGER_TURNS = 30
LEDGER_TURNS_LONG = 8
#: A report's facts section lists this many facts, in the order they were stated; the JSON bundle has all
#: (a conversation that states something in every turn would make a page of hundreds of thousands).
REPORT_FACTS = 200

#: One colour per reason, shared by the page's heatmaps and the report's.
REASON_COLOURS = {
    KEPT: "#10b981",
    OUTSIDE_WINDOW: "#f59e0b",
    OVER_BUDGET: "#ef4444",
    TRIMMED_EARLIER: "#a855f7",
    SUMMARIZED: "#eab308",
    CLEARED: "#fb923c",
    FLUSHED: "#78716c",
    GRANULARITY: "#93c5fd",
    EMPTY: "#e5e7eb",
    MEMORY_OFF: "#9ca3af",
    SCOPE: "#cbd5e1",
    OTHER_BRANCH: "#f1f5f9",
    REWRITTEN: "#2dd4bf",
    OMITTED: "#c026d3",
    NOT_SENT: "#be123c",
}
#: Reasons in legend order; a heatmap cell's code is its index here.
REASON_ORDER = tuple(REASON_COLOURS)
#: Line colours of the configs (a comparison has at most six).
CONFIG_COLOURS = ("#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed", "#0891b2")


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;margin:0;background:#fff}
main{max-width:1200px;margin:0 auto;padding:1.5rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #e5e7eb}
h3{font-size:1rem;margin:.6rem 0 .2rem}
nav a{margin-right:1rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #e5e7eb;padding:.2rem .45rem;
vertical-align:top;text-align:left}th{background:#f9fafb}
.meta{color:#6b7280}.warning{color:#92400e}.info{color:#1f2937}
.findings li{margin:.3rem 0}.finding-kind{font-weight:600}
.legend span{display:inline-block;margin:0 .6rem .3rem 0;font-size:.8rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.25rem;vertical-align:-.1rem;border-radius:2px}
.heatmaps{display:flex;flex-wrap:wrap;gap:1rem}.heatmaps figure{margin:0}
figcaption{font-weight:600;margin-bottom:.2rem}
.turn{border-left:3px solid #e5e7eb;padding:.2rem .8rem;margin:.6rem 0}.turn:target{border-color:#2563eb;
background:#eff6ff}
.msg{margin:.25rem 0}.role{font-size:.75rem;font-weight:600;text-transform:uppercase;color:#6b7280;margin-right:.4rem}
.turn p{margin:.25rem 0;white-space:pre-wrap;overflow-wrap:anywhere}.turn p>b{font-size:.75rem;
text-transform:uppercase;color:#6b7280;margin-right:.4rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.kept{color:#047857}.dropped{color:#b91c1c}.back{color:#b45309}
details{margin:.3rem 0}summary{cursor:pointer}
svg text{font:11px system-ui,sans-serif;fill:#374151}
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _t(value: Any) -> str:
    """Element text (never an attribute): quotes need no escaping there."""
    return escape(str(value), quote=False)


def _run_title(matrix: RetentionMatrix, rows: tuple[int, int], start: int, end: int, why: str) -> str:
    """The hover of a block of cells with one reason: a single cell names its message; a block
    names its turns, how many messages it spans and their tokens, and the reason once."""
    first_row, last_row = matrix.rows[rows[0]], matrix.rows[rows[1]]
    turn = f"turn {first_row}: " if first_row == last_row else f"turns {first_row}–{last_row}: "
    if end - start == 1:
        return f"{turn}{matrix.message(start)} — {why}"
    first, last = matrix.columns[start], matrix.columns[end - 1]
    return f"{turn}{end - start} messages of turns {first.turn}–{last.turn}, {sum(matrix.tokens[start:end]):,} tokens — {why}"


def _blocks(matrix: RetentionMatrix) -> list[tuple[int, int, int, int, str, str]]:
    """The matrix as rectangles of one reason and one explanation: ``(first_row, last_row,
    first_column, end_column, reason, why)``. Neighbouring cells of a row with the same reason
    are one run, and the same run in consecutive rows is one block (a tool message left out by
    granularity is one tall block, not a cell per turn)."""
    done: list[tuple[int, int, int, int, str, str]] = []
    open_: dict[tuple[int, int, str, str], int] = {}
    for r, cells in enumerate(matrix.cells):
        here: list[tuple[int, int, str, str]] = []
        c = 0
        while c < len(cells):
            reason, end = cells[c], c + 1
            while end < len(cells) and cells[end] == reason:
                end += 1
            if reason is not None:
                here.append((c, end, reason, matrix.why(r, c)))
            c = end
        current = set(here)
        for key in [k for k in open_ if k not in current]:
            done.append((open_.pop(key), r - 1, *key))
        for key in here:
            open_.setdefault(key, r)
    done += [(first, len(matrix.cells) - 1, *key) for key, first in open_.items()]
    return sorted(done)


#: The widest a character of the SVGs' 11px text runs, in pixels (what a caption's room is sized by).
SVG_CHAR_WIDTH = 6


def heatmap_svg(matrix: RetentionMatrix, *, cell: int = 10, selected_turn: int | None = None) -> str:
    """One config's retention heatmap as inline SVG: rows = turns, columns = earlier messages,
    a cell's colour is its reason.

    Size grows with what changes, not with rows × columns: cells with one reason and one
    explanation form one ``<rect>`` (``data-row``/``data-rows`` and ``data-column``/``data-span``
    give the cells it covers) whose ``<title>`` gives the reason once, and each message is named
    once, by the ``<title>`` of its mark in the strip above the grid (turn, role, tokens, first words)."""
    rows, cols = len(matrix.rows), len(matrix.columns)
    cw = max(3, min(cell + 6, 720 // max(cols, 1)))
    ch = cell if rows > 30 else cell + 4
    strip = 6
    left, top = 56, 4 + strip + 2
    caption = f"earlier messages, oldest → newest ({cols:,} shown; hover the strip above for a message)"
    # Wide enough for the caption under the grid, however few columns (an 11px character is at most ~6px).
    width, height = max(left + cols * cw + 4, left + SVG_CHAR_WIDTH * len(caption)), top + rows * ch + 22
    out = [
        f'<svg class="heatmap" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e("retention heatmap: " + matrix.label)}">'
    ]
    out.append(
        '<g class="messages">'
        + "".join(
            f'<rect class="message" x="{left + c * cw}" y="4" width="{cw}" height="{strip}" '
            f'fill="{"#9ca3af" if col.role == "user" else "#d1d5db"}"><title>{_e(matrix.message(c))}</title></rect>'
            for c, col in enumerate(matrix.columns)
        )
        + "</g>"
    )
    step = max(1, rows // 20)
    for r, turn in enumerate(matrix.rows):
        if r % step == 0 or turn == selected_turn:
            out.append(f'<text x="{left - 4}" y="{top + r * ch + ch - 2}" text-anchor="end">turn {turn}</text>')
    for first, last, c, end, reason, why in _blocks(matrix):
        out.append(
            f'<rect data-reason="{reason}" data-row="{first}" data-rows="{last - first + 1}" data-column="{c}" '
            f'data-span="{end - c}" x="{left + c * cw}" y="{top + first * ch}" width="{(end - c) * cw}" '
            f'height="{(last - first + 1) * ch}" fill="{REASON_COLOURS.get(reason, "#000000")}">'
            f"<title>{_e(_run_title(matrix, (first, last), c, end, why))}</title></rect>"
        )
    if selected_turn in matrix.rows:
        y = top + matrix.rows.index(selected_turn) * ch
        out.append(
            f'<rect x="{left}" y="{y}" width="{cols * cw}" height="{ch}" fill="none" stroke="#111827" '
            f'stroke-width="1.5"/>'
        )
    out.append(f'<text x="{left}" y="{height - 6}">{_e(caption)}</text>')
    out.append("</svg>")
    return "".join(out)


def line_chart_svg(
    title: str,
    x: Sequence[int],
    series: Sequence[tuple[str, Sequence[float | None], str, bool]],
    *,
    width: int = 560,
    height: int = 200,
) -> str:
    """A small line chart as inline SVG: ``series`` are (label, values, colour, dashed); ``None``
    values break the line."""
    left, right, top, bottom = 48, 12, 20, 28
    values = [v for _, vs, _, _ in series for v in vs if v is not None]
    ymax = max(values) if values else 1
    ymax = ymax if ymax > 0 else 1
    xmin, xmax = (min(x), max(x)) if x else (0, 1)
    span = (xmax - xmin) or 1
    pw, ph = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + (v - xmin) / span * pw

    def py(v: float) -> float:
        return top + ph - v / ymax * ph

    out = [
        f'<svg class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text x="{left}" y="13" font-weight="600">{_e(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#9ca3af"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#9ca3af"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{_e(f"{ymax:,.0f}")}</text>',
        f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">0</text>',
        f'<text x="{left}" y="{height - 8}">turn {_e(xmin)}</text>',
        f'<text x="{left + pw}" y="{height - 8}" text-anchor="end">turn {_e(xmax)}</text>',
    ]
    for label, vs, colour, dashed in series:
        segment: list[str] = []
        segments = []
        for t, v in zip(x, vs):
            if v is None:
                if segment:
                    segments.append(segment)
                segment = []
            else:
                segment.append((round(px(t), 1), round(py(v), 1)))
        if segment:
            segments.append(segment)
        segments = [[f"{a:g},{b:g}" for a, b in _thin(seg)] for seg in segments]
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"><title>{_e(label)}</title></circle>')
            else:
                out.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} '
                    f'points="{" ".join(seg)}"><title>{_e(label)}</title></polyline>'
                )
    out.append("</svg>")
    return "".join(out)


def _thin(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points of a line that can be seen: within one pixel column only the first, lowest,
    highest and last (the line's envelope there), and no middle point of a flat stretch. A
    2,000-turn series draws the same line from a few hundred points."""
    columns: list[list[tuple[float, float]]] = []
    for point in points:
        if columns and round(columns[-1][0][0]) == round(point[0]):
            columns[-1].append(point)
        else:
            columns.append([point])
    kept: list[tuple[float, float]] = []
    for col in columns:
        low, high = min(col, key=lambda q: q[1]), max(col, key=lambda q: q[1])
        for q in dict.fromkeys([col[0], *sorted({low, high}, key=col.index), col[-1]]):
            kept.append(q)
    out: list[tuple[float, float]] = []
    for i, q in enumerate(kept):
        if 0 < i < len(kept) - 1 and kept[i - 1][1] == q[1] == kept[i + 1][1]:
            continue
        out.append(q)
    return out


def _legend(reasons: Iterable[str]) -> str:
    shown = [r for r in REASON_ORDER if r in set(reasons)]
    return (
        '<div class="legend">'
        + "".join(
            f'<span><i style="background:{REASON_COLOURS[r]}"></i>{_e(REASON_LABELS.get(r, r))}</span>' for r in shown
        )
        + "</div>"
    )


def _config_table(configs: Sequence[NamedConfig]) -> str:
    """Every config's settings: the common ones, each of its memory system's own (as the system declares
    them; "—" under a setting another config's system has), and a node-shape flag any of them sets."""
    keys = ["strategy", *(s.name for s in COMMON)]
    for c in configs:
        keys += [s.name for s in c.config.system.settings if s.name not in keys]
    keys += [s.name for s in NODE_SHAPE if any(getattr(c.config, s.name) != s.default for c in configs)]
    head = "".join(f"<th>{_e(k)}</th>" for k in ["config"] + keys)
    rows = []
    for i, c in enumerate(configs):
        d = {"strategy": c.config.strategy, **c.config.values()}
        cells = "".join(f"<td>{_e('—' if d.get(k) is None else d.get(k))}</td>" for k in keys)
        rows.append(f'<tr><td><span style="color:{CONFIG_COLOURS[i % 6]}">■</span> {_e(c.label)}</td>{cells}</tr>')
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _findings_html(findings: Sequence[Finding], name: TurnNamer) -> str:
    if not findings:
        return "<p>No findings: nothing surprising in how these configs remember this conversation.</p>"
    items = []
    for f in findings:
        link = f' <a href="#turn-{_e(f.turn)}">{_e(name(f.turn))}</a>' if f.turn is not None else ""
        detail = f'<br><span class="meta">{_e(f.detail)}</span>' if f.detail else ""
        items.append(
            f'<li class="{_e(f.severity)}" data-kind="{_e(f.kind)}"><span class="finding-kind">'
            f"{_e(f.title)}</span> · {_e(f.subject)}{link}<br>{_e(f.text)}{detail}</li>"
        )
    return f'<ol class="findings">{"".join(items)}</ol>'


def _facts_html(comparison: Comparison) -> str:
    if not comparison.facts:
        return "<p>No facts followed.</p>"
    shown = min(len(comparison.facts), REPORT_FACTS)
    sentences = "".join(f"<li>{_e(s)}</li>" for s in comparison.sentences[:shown])
    head = "<th>fact</th><th>stated</th>" + "".join(f"<th>{_e(c.label)}</th>" for c in comparison.configs)
    rows = []
    for fact, fates in zip(comparison.facts[:shown], comparison.fates[:shown]):
        cells = []
        for fate in fates:
            if fate.lost_turn is None:
                cells.append('<td class="kept">kept</td>')
            else:
                why = REASON_LABELS.get(fate.lost_reason or "", fate.lost_reason or "")
                cells.append(
                    f'<td class="{"back" if fate.state == "back" else "dropped"}">lost at '
                    f'<a href="#turn-{fate.lost_turn}">{_e(fate.lost_label)}</a>'
                    f"{' (' + _e(why) + ')' if why else ''}{_e(fate.after_loss())}</td>"
                )
        stated = fates[0].stated_label if fates else ""
        rows.append(f"<tr><td>{_e(fact.label)}</td><td>{_e(stated)}</td>{''.join(cells)}</tr>")
    more = (
        (
            f'<p class="meta">The first {shown:,} of {len(comparison.facts):,} facts, in the order they were '
            f"stated; the JSON bundle (--bundle) follows every one.</p>"
        )
        if shown < len(comparison.facts)
        else ""
    )
    return f"{more}<ul>{sentences}</ul><table><tr>{head}</tr>{''.join(rows)}</table>"


def _replies_html(grid: ReplyGrid) -> str:
    differ = set(grid.differing())
    head = "<th>turn</th><th>query</th>" + "".join(f"<th>{_e(label)}</th>" for label in grid.labels)
    rows = []
    for r, (turn, query, replies) in enumerate(zip(grid.turns, grid.queries, grid.replies)):
        mark = ' class="differ"' if r in differ else ""
        cells = "".join(f'<td class="text">{_e(x)}</td>' for x in replies)
        rows.append(
            f'<tr{mark}><td><a href="#turn-{turn}">{turn}</a>{" ≠" if r in differ else ""}</td>'
            f'<td class="text">{_e(query)}</td>{cells}</tr>'
        )
    note = (
        f'<p class="meta">{len(differ)} of {len(grid.turns)} rows differ (marked ≠). Models: '
        f"{_e(', '.join(sorted(set(grid.models))))}.</p>"
    )
    if grid.skipped:
        note += f'<p class="meta">The first {grid.skipped} turns were not re-asked.</p>'
    return note + f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _message_html(m: Message) -> str:
    text = message_text(m)
    kind = f" · {m.kind}" if m.kind and m.kind not in ("query", "answer") else ""
    # Terse markup: a long conversation's transcript is most of a report's size.
    return f"<p><b>{_e(m.role)}{_e(kind)}</b>{_t(text) if text else '<i>(empty)</i>'}</p>"


def _transcript_html(conv: Conversation) -> str:
    numbers = turn_numbers(conv)
    tree = conv.tree
    out = []
    if conv.system_prompt:
        out.append(f'<div class="turn"><h3>System prompt</h3><div class="text">{_e(conv.system_prompt)}</div></div>')
    for p, t in enumerate(conv.turns):
        parent = tree.parent[p]
        note = ""
        if p and parent is not None and parent != p - 1:
            note = (
                f' <span class="meta">(continues <a href="#turn-{numbers[parent]}">'
                f"{_e(turn_label(conv, parent))}</a>)</span>"
            )
        elif p and parent is None and t.parent_id is not None:
            note = ' <span class="meta">(starts a new thread)</span>'
        messages = "".join(_message_html(m) for m in t.messages)
        # The anchor is the turn's address (creation order); the heading is its place on its thread.
        out.append(
            f'<article class="turn" id="turn-{numbers[p]}"><h3>{_e(turn_label(conv, p).capitalize())}{note}'
            f"</h3>{messages}</article>"
        )
    return "".join(out)


def _ledger_turns(report: Report) -> list[int]:
    numbers = turn_numbers(report.conversation)
    answered = [numbers[p] for p in report.conversation.answered_turns()]
    if len(answered) <= LEDGER_TURNS:
        return answered
    have = set(answered)
    wanted = [answered[-1]] + ([report.selected_turn] if report.selected_turn in have else [])
    for f in report.findings:
        if len(set(wanted)) >= LEDGER_TURNS_LONG:
            break
        if f.turn in have:
            wanted.append(f.turn)
    return sorted(set(wanted))


def _ledgers_html(report: Report, columns: int = REPORT_COLUMNS) -> str:
    conv = report.conversation
    turns = _ledger_turns(report)
    out = []
    for c, replay in zip(report.configs, report.comparison.replays_for(conv)):
        parts = []
        for turn in turns:
            # Lazily: only the shown entries are listed; the hidden ones are counted from the runs.
            ledger = replay.ledger_at(replay.position_of(turn), lazy=True)
            shown = ledger.last_entries(columns)
            hidden = ledger.entry_count() - len(shown)
            stand_ins = ledger.stand_ins()
            rows = [_sent_instead(x) for x in ledger.synthetic if x.replaces is None]  # a summary goes first
            for run in _reason_runs(shown):
                rows.append(_ledger_rows(run, conv, ledger.config, len(shown) > LEDGER_LIST))
                rows += [_sent_instead(x) for e in run for x in stand_ins.get((e.position, e.index), ())]
            more = ""
            if hidden:
                kept = len(ledger.kept) - sum(1 for e in shown if e.kept)
                more = f'<p class="meta">{hidden:,} earlier messages not listed ({kept:,} of them kept).</p>'
            table = (
                (
                    "<table><tr><th>turn</th><th>role</th><th>tokens</th><th>reason</th><th>why</th>"
                    f"<th>message</th></tr>{''.join(rows)}</table>"
                )
                if rows
                else "<p>First turn: no earlier message.</p>"
            )
            budget = f"{ledger.budget:,}" if ledger.budget is not None else "none"
            not_eligible = ledger.not_eligible_count()
            outside = f"{not_eligible:,} not eligible, " if not_eligible else ""
            parts.append(
                f"<details><summary>Turn {turn}: {len(ledger.kept):,} kept, {ledger.dropped_count():,} dropped, "
                f"{outside}{ledger.history_tokens:,} history tokens (budget {budget})</summary>{more}{table}"
                "</details>"
            )
        out.append(
            f'<details class="ledger" data-config="{_e(c.label)}"><summary><b>{_e(c.label)}</b></summary>'
            f"{''.join(parts)}</details>"
        )
    return "".join(out)


LEDGER_RUN = 3  # this many or more neighbouring messages with one reason are listed as one row…
LEDGER_LIST = 40  # …kept ones only in a ledger longer than this (a short one lists everything sent)


def _reason_runs(entries: Sequence[LedgerEntry]) -> list[list[LedgerEntry]]:
    """Neighbouring entries grouped by reason."""
    runs: list[list[LedgerEntry]] = []
    for e in entries:
        if runs and runs[-1][-1].reason == e.reason:
            runs[-1].append(e)
        else:
            runs.append([e])
    return runs


def _ledger_rows(run: Sequence[LedgerEntry], conv: Conversation, config: Mapping[str, Any], long: bool) -> str:
    """One row per entry; a run of dropped ones (of kept ones too in a ledger of over
    ``LEDGER_LIST`` rows) as one row that links to the transcript."""
    first = run[0]
    cls = "kept" if first.kept else "dropped"
    label, why = _e(REASON_LABELS.get(first.reason, first.reason)), _e(explain(first, config))
    if len(run) >= LEDGER_RUN and (not first.kept or long):
        last = run[-1]
        return (
            f'<tr><td><a href="#turn-{first.turn}">{first.turn}</a>–<a href="#turn-{last.turn}">{last.turn}</a>'
            f'</td><td>{len(run):,} messages</td><td>{sum(e.tokens for e in run):,}</td><td class="{cls}">{label}'
            f'</td><td>{why}</td><td class="meta">in the transcript</td></tr>'
        )
    return "".join(
        f'<tr><td><a href="#turn-{e.turn}">{e.turn}</a></td><td>{_e(e.role)}</td><td>{e.tokens:,}</td>'
        f'<td class="{cls}">{label}</td><td>{why}</td>'
        f'<td class="text">{_e(_short(conv.turns[e.position].messages[e.index], 80))}</td></tr>'
        for e in run
    )


def _sent_instead(message: SyntheticMessage) -> str:
    """A row for what the memory sends in place of earlier messages (a summary, a placeholder, a
    partial message, a scratchpad), with its text, as the page's ledger table lists it."""
    return (
        f'<tr><td><a href="#turn-{message.turn}">{message.turn}</a></td><td>{_e(message.role)}</td>'
        f'<td>{message.tokens:,}</td><td class="kept">{_e(message.reason_words)}</td><td>{_e(message.why)}</td>'
        f'<td class="text">{_e(_clip(message.content, 80))}</td></tr>'
    )


def _short(m: Message, width: int = 160) -> str:
    return _clip(message_text(m), width)


def _clip(text: str, width: int) -> str:
    """Text on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _series_html(comparison: Comparison) -> str:
    series = comparison.series
    x = comparison.turns
    colours = [CONFIG_COLOURS[i % 6] for i in range(len(series))]
    kept = line_chart_svg("Messages kept", x, [(s.label, s.kept, colours[i], False) for i, s in enumerate(series)])
    tokens_lines = []
    top = max((t for s in series for t in s.history_tokens), default=0)
    off_chart = []
    for i, s in enumerate(series):
        tokens_lines.append((s.label, s.history_tokens, colours[i], False))
        budgets = [b for b in s.budget if b is not None]
        if budgets and max(budgets) <= 3 * max(top, 1):
            tokens_lines.append((f"{s.label} budget", s.budget, colours[i], True))
        elif budgets:
            off_chart.append(
                f"{s.label}: {min(budgets):,}" + (f"–{max(budgets):,}" if max(budgets) != min(budgets) else "")
            )
    tokens = line_chart_svg("History tokens (dashed: budget)", x, tokens_lines)
    if off_chart:
        tokens += f'<p class="meta">Budgets far above the history (not drawn): {_e("; ".join(off_chart))}.</p>'

    oldest = line_chart_svg(
        "Oldest turn remembered", x, [(s.label, s.oldest_kept_turn, colours[i], False) for i, s in enumerate(series)]
    )
    legend = (
        '<div class="legend">'
        + "".join(f'<span><i style="background:{colours[i]}"></i>{_e(s.label)}</span>' for i, s in enumerate(series))
        + "</div>"
    )
    return legend + kept + tokens + oldest


def report_html(report: Report) -> str:
    """The report as one self-contained HTML document (see the module docstring)."""
    conv = report.conversation
    comparison = report.comparison
    window = comparison.window
    when = datetime.fromtimestamp(report.created_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    answered = len(conv.answered_turns())
    reasons = {x for m in comparison.matrices for row in m.cells for x in row if x is not None}
    scope = (
        "the whole conversation"
        if window.whole
        else (
            f"turns {comparison.matrices[0].rows[0]}–{comparison.matrices[0].rows[-1]} × the latest "
            f"{window.last_column - window.first_column} messages before them"
            if comparison.matrices and window.rows
            else "no turns"
        )
    )
    heatmaps = "".join(
        f'<figure data-config="{_e(m.label)}"><figcaption>{_e(m.label)}</figcaption>'
        f"{heatmap_svg(m, selected_turn=report.selected_turn)}</figure>"
        for m in comparison.matrices
    )
    flow_note = f" · flow {_e(report.source.flow.name)}" if report.source.flow is not None else ""
    sections = [
        ("configs", "Configs compared", _config_table(report.configs)),
        ("findings", "Findings", _findings_html(report.findings, turn_namer(report.conversation))),
        (
            "heatmaps",
            "Retention heatmaps",
            f'<p class="meta">Rows are turns, columns the messages written before them; hover a cell for the '
            f"message, its tokens and the reason. Showing {_e(scope)}.</p>{_legend(reasons)}"
            f'<div class="heatmaps">{heatmaps}</div>',
        ),
        ("series", "Turn by turn", _series_html(comparison)),
        ("facts", "Facts", _facts_html(comparison)),
    ]
    if report.replies is not None:
        sections.append(("replies", "Replies under each config", _replies_html(report.replies)))
    sections += [("ledgers", "Ledgers", _ledgers_html(report)), ("transcript", "Transcript", _transcript_html(conv))]
    nav = "".join(f'<a href="#{key}">{_e(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{_e(title)}</h2>{html}</section>' for key, title, html in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e('MemLens report — ' + report.title)}</title><style>{_CSS}</style></head>"
        f"<body><main><header><h1>{_e('MemLens report — ' + report.title)}</h1>"
        f'<p class="meta">Conversation {_e(conv.name or conv.id)}{flow_note} · {len(conv.turns)} turns '
        f"({answered} answered) · {len(report.configs)} memory configs · generated {_e(when)} · "
        f"opens without a server or network</p></header><nav>{nav}</nav>{body}"
        '<footer class="meta"><p>Made with MemLens. The JSON bundle of this report loads back into the '
        "compare page (Import).</p></footer></main></body></html>\n"
    )


__all__ = [
    "REASON_COLOURS",
    "REASON_ORDER",
    "CONFIG_COLOURS",
    "LEDGER_TURNS",
    "LEDGER_TURNS_LONG",
    "report_html",
    "heatmap_svg",
    "line_chart_svg",
]
