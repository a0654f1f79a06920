"""The compare page's Facts table: one row per fact, one column per config, as an HTML table that
wraps its cells to the page's width (a dataframe of six configs needs horizontal scrolling)."""

from __future__ import annotations

from html import escape

import streamlit as st

from core.analysis.compare import Comparison
from core.model.ledger import REASON_LABELS
from ui.html import safe_text

CSS = ("<style>.ml-facts{width:100%;table-layout:fixed;border-collapse:collapse;font-size:.85rem}"
       ".ml-facts th,.ml-facts td{border:1px solid #e5e7eb;padding:.3rem .45rem;text-align:left;vertical-align:top;"
       "overflow-wrap:anywhere;white-space:normal}.ml-facts th{background:#f9fafb;font-weight:600}"
       ".ml-facts td.lost{color:#b91c1c}.ml-facts td.kept{color:#047857}</style>")


def fate_text(fate) -> str:
    """A fact under one config in a few words: "kept", or where and why it was lost."""
    if fate.lost_turn is None:
        return "kept"
    return f"lost at {fate.lost_label} ({REASON_LABELS.get(fate.lost_reason or '', fate.lost_reason)})"


def facts_table_html(comparison: Comparison) -> str:
    """The table, every text escaped; the first two columns narrow, the configs sharing the rest."""
    labels = [c.label for c in comparison.configs]
    head = "".join(f"<th>{safe_text(x)}</th>" for x in ["fact", "stated at", *labels])
    rows = []
    for fact, fates in zip(comparison.facts, comparison.fates):
        stated = fates[0].stated_label if fates else ""
        cells = "".join(f'<td class="{"kept" if f.lost_turn is None else "lost"}" '
                        f'data-config="{escape(f.label, quote=True)}">{safe_text(fate_text(f))}</td>' for f in fates)
        rows.append(f"<tr><td>{safe_text(fact.label)}</td><td>{safe_text(stated)}</td>{cells}</tr>")
    widths = '<col style="width:16%"><col style="width:9%">' + "<col>" * len(labels)
    return (f'{CSS}<table class="ml-facts"><colgroup>{widths}</colgroup><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def render_facts_table(comparison: Comparison) -> None:
    st.markdown(facts_table_html(comparison), unsafe_allow_html=True)
