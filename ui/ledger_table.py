"""The ledger as a table: one row per earlier message, kept or not, with the reason in words."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.memory import explain
from core.model import (
    REASON_LABELS,
    Conversation,
    Ledger,
    LedgerEntry,
    SyntheticMessage,
    branch_copies,
    copy_words,
    message_text,
    turn_label,
)
from ui.html import safe_text
from ui.paging import page_slice

LEDGER_PAGE = 200  # rows of the table at once
# The "kept" column in words: a ballot cross renders as a bare italic X in the table's font.
YES, NO = "yes", "no"
#: The table's columns, left to right.
COLUMNS = ("turn", "reason", "message", "tokens", "kept", "role", "kind", "why")


def ledger_rows(
    ledger: Ledger, conversation: Conversation, node: str | None = None, position: int | None = None
) -> list[dict]:
    """One row per earlier message (and per message sent instead), with the reason in words; given
    the call's ``position``, an other-branch copy of a message on this branch says whose it is."""
    copies = (
        {}
        if position is None
        else branch_copies(ledger, (m.ref for m in conversation.turns[position].messages), position)
    )
    rows = []
    for e in ledger.rows():
        if isinstance(e, SyntheticMessage):
            text = " ".join(e.content.split())
            rows.append(
                {
                    "kept": YES,
                    "turn": str(e.turn),
                    "role": e.role,
                    "kind": e.origin,
                    "tokens": e.tokens,
                    "reason": e.reason_words,
                    "why": e.why,
                    "message": text[:160] + ("…" if len(text) > 160 else ""),
                }
            )
            continue
        msg = conversation.turns[e.position].messages[e.index]
        text = " ".join(message_text(msg).split())
        reason, why = REASON_LABELS.get(e.reason, e.reason), None
        holder = copies.get((e.position, e.index))
        if holder is not None:
            reason, why = copy_words(
                "this turn" if holder == position else turn_label(conversation, holder), holder == position
            )
        rows.append(
            {
                "kept": YES if e.kept else NO,
                "turn": turn_label(conversation, e.position).removeprefix("turn "),
                "role": e.role,
                "kind": e.kind,
                "tokens": e.tokens,
                "reason": reason,
                "why": why or explain(e, ledger.config, node),
                "message": text[:160] + ("…" if len(text) > 160 else ""),
            }
        )
    return rows


def ledger_html(rows: list[dict]) -> str:
    """Rows as an HTML table whose cells wrap, for a narrow column (the Debugger's inspector): every
    message snippet is read whole, where a data frame's one-line cells cut it. Each reason's whole
    sentence is its cell's hover and is said once under the table. One HTML block: every text is
    escaped as a block's (:func:`ui.html.safe_text`)."""
    body = "".join(
        f'<tr class="{"ml-kept" if r["kept"] == YES else "ml-not-kept"}"><td>{safe_text(r["turn"])}</td>'
        f'<td title="{safe_text(r["why"])}">{safe_text(r["reason"])}</td>'
        f'<td><span class="ml-ledger-role">{safe_text(r["role"])}</span> {safe_text(r["message"])}</td>'
        f'<td class="ml-num">{r["tokens"]:,}</td></tr>'
        for r in rows
    )
    said = dict.fromkeys((r["reason"], r["why"]) for r in rows if r["why"] and r["why"] != r["reason"])
    legend = "".join(f"<div><b>{safe_text(reason)}</b>: {safe_text(why)}</div>" for reason, why in said)
    return (
        f'<div class="ml-ledger"><table><thead><tr><th>turn</th><th>reason</th><th>message</th>'
        f'<th class="ml-num">tokens</th></tr></thead><tbody>{body}</tbody></table>'
        + (f'<div class="ml-ledger-why">{legend}</div>' if legend else "")
        + "</div>"
    )


def render_ledger_table(
    ledger: Ledger,
    conversation: Conversation,
    *,
    key: str,
    node: str | None = None,
    position: int | None = None,
    narrow: bool = False,
) -> None:
    """The ledger's rows, filtered to kept or dropped ones and by reason, a page at a time: a data frame
    (sortable, searchable), or with ``narrow`` an HTML table whose cells wrap (:func:`ledger_html`)."""
    rows = ledger_rows(ledger, conversation, node, position)
    if not rows:
        st.info("This is the first turn: there is no earlier message for memory to keep or drop.")
        return
    c1, c2 = st.columns([3, 2])  # the three choices fit beside the reasons in the Debugger's side column
    show = c1.segmented_control("Show", ["all", "dropped", "kept"], default="all", key=f"{key}-show", required=True)
    reasons = sorted({r["reason"] for r in rows})
    picked = c2.multiselect("Reasons", reasons, key=f"{key}-reasons", placeholder="every reason")
    rows = filter_rows(rows, show, picked, [isinstance(e, LedgerEntry) and e.dropped for e in ledger.rows()])
    if not rows:
        st.caption("No earlier message matches these filters.")
        return
    # One page of rows: a data frame sends every row it holds to the browser.
    shown = rows[page_slice(len(rows), LEDGER_PAGE, key=f"{key}-page", noun="earlier messages")]
    if narrow:
        st.markdown(ledger_html(shown), unsafe_allow_html=True)
        return
    frame = pd.DataFrame(shown)
    # Data frames render cell text as text, never as HTML, so message content is safe here.
    # Which turn, why it was kept or not, and the message lead: in a narrow column (the Debugger's
    # side) they are what shows before the table scrolls sideways.
    st.dataframe(
        frame,
        key=key,
        hide_index=True,
        width="stretch",
        column_order=COLUMNS,
        column_config={
            "kept": st.column_config.TextColumn(width="small"),
            "turn": st.column_config.TextColumn(width="small"),
            "tokens": st.column_config.NumberColumn(format="%d", width="small"),
            "message": st.column_config.TextColumn(width="large"),
            "why": st.column_config.TextColumn(width="large"),
        },
    )


def filter_rows(rows: list[dict], show: str | None, reasons: list[str] | None, dropped: list[bool]) -> list[dict]:
    """Rows kept or dropped only (``show``), and of the given reasons (none given: every reason).
    ``dropped`` says which rows the memory left out (:attr:`LedgerEntry.dropped`): a message it could
    not send (memory off, out of scope, another branch) is neither kept nor dropped, as the metrics say."""
    if show == "dropped":
        rows = [r for r, left_out in zip(rows, dropped) if left_out]
    elif show == "kept":
        rows = [r for r in rows if r["kept"] == YES]
    if reasons:
        wanted = set(reasons)
        rows = [r for r in rows if r["reason"] in wanted]
    return rows
