"""One page of a long list at a time, so a page never grows with the conversation's length.

Streamlit sends every row of a table and every element of a page to the browser on each rerun:
a ledger, a receipt or a variable history of a 10,000-turn conversation would be megabytes.
Lists longer than a page show one page and a page picker; shorter ones show whole, unchanged.
"""

from __future__ import annotations

import streamlit as st


def page_slice(total: int, size: int, *, key: str, noun: str, newest_last: bool = True) -> slice:
    """The part of a ``total``-long list to show, with a page picker when there is more than one page.

    ``newest_last``: the list runs oldest → newest, so the picker opens on its last page (the
    newest entries); otherwise on the first page.
    """
    if total <= size:
        return slice(0, total)
    pages = -(-total // size)
    page = st.number_input(
        f"Page (of {pages:,})",
        1,
        pages,
        pages if newest_last else 1,
        key=key,
        help=f"{total:,} {noun}, {size:,} to a page",
    )
    start = (int(page) - 1) * size
    end = min(total, start + size)
    st.caption(f"{noun[:1].upper() + noun[1:]} {start + 1:,}–{end:,} of {total:,}")
    return slice(start, end)
