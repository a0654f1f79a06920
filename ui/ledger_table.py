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


class LedgerRows:
    """The ledger's rows, one per earlier message (and per message sent instead), each made only when shown:
    a late turn of a long conversation lists tens of thousands of earlier messages and a page shows
    :data:`LEDGER_PAGE`. Filtering reads only what a row is kept or dropped for; given the call's
    ``position``, an other-branch copy of a message on this branch says whose it is."""

    def __init__(
        self, ledger: Ledger, conversation: Conversation, node: str | None = None, position: int | None = None
    ):
        self.ledger, self.conversation, self.node, self.position = ledger, conversation, node, position
        self.items = ledger.rows()
        self.copies = (
            {}
            if position is None
            else branch_copies(ledger, (m.ref for m in conversation.turns[position].messages), position)
        )

    def __len__(self) -> int:
        return len(self.items)

    def _words(self, i: int) -> tuple[str, str | None]:
        """Row ``i``'s reason in words and, for a branch copy, its sentence."""
        e = self.items[i]
        if isinstance(e, SyntheticMessage):
            return e.reason_words, e.why
        holder = self.copies.get((e.position, e.index))
        if holder is not None:
            here = holder == self.position
            return copy_words("this turn" if here else turn_label(self.conversation, holder), here)
        return REASON_LABELS.get(e.reason, e.reason), None

    def reasons(self) -> list[str]:
        """Every reason the rows give, in words, sorted."""
        return sorted({self._words(i)[0] for i in range(len(self))})

    def select(self, show: str | None, reasons: list[str] | None) -> list[int]:
        """The rows kept or dropped only (``show``), and of the given reasons (none given: every reason).
        Dropped means what the memory left out (:attr:`LedgerEntry.dropped`): a message it could not send
        (memory off, out of scope, another branch) is neither kept nor dropped, as the metrics say; a
        message sent instead counts as kept."""
        picked = range(len(self))
        if show == "dropped":
            picked = [i for i in picked if isinstance(self.items[i], LedgerEntry) and self.items[i].dropped]
        elif show == "kept":
            picked = [i for i in picked if not isinstance(self.items[i], LedgerEntry) or self.items[i].kept]
        if reasons:
            wanted = set(reasons)
            picked = [i for i in picked if self._words(i)[0] in wanted]
        return list(picked)

    def row(self, i: int) -> dict:
        """Row ``i`` with its columns (:data:`COLUMNS`)."""
        e = self.items[i]
        reason, why = self._words(i)
        if isinstance(e, SyntheticMessage):
            text = " ".join(e.content.split())
            kept, turn, kind = YES, str(e.turn), e.origin
        else:
            text = " ".join(message_text(self.conversation.turns[e.position].messages[e.index]).split())
            kept, kind = YES if e.kept else NO, e.kind
            turn = turn_label(self.conversation, e.position).removeprefix("turn ")
            why = why or explain(e, self.ledger.config, self.node)
        return {
            "kept": kept,
            "turn": turn,
            "role": e.role,
            "kind": kind,
            "tokens": e.tokens,
            "reason": reason,
            "why": why,
            "message": text[:160] + ("…" if len(text) > 160 else ""),
        }


def ledger_rows(
    ledger: Ledger, conversation: Conversation, node: str | None = None, position: int | None = None
) -> list[dict]:
    """Every row of the ledger (:class:`LedgerRows`), for a whole table or a test."""
    rows = LedgerRows(ledger, conversation, node, position)
    return [rows.row(i) for i in range(len(rows))]


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
    rows = LedgerRows(ledger, conversation, node, position)
    if not len(rows):
        st.info("This is the first turn: there is no earlier message for memory to keep or drop.")
        return
    c1, c2 = st.columns([3, 2])  # the three choices fit beside the reasons in the Debugger's side column
    show = c1.segmented_control("Show", ["all", "dropped", "kept"], default="all", key=f"{key}-show", required=True)
    picked = c2.multiselect("Reasons", rows.reasons(), key=f"{key}-reasons", placeholder="every reason")
    selected = rows.select(show, picked)
    if not selected:
        st.caption("No earlier message matches these filters.")
        return
    # One page of rows, each made only now: a data frame sends every row it holds to the browser.
    page = selected[page_slice(len(selected), LEDGER_PAGE, key=f"{key}-page", noun="earlier messages")]
    shown = [rows.row(i) for i in page]
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
