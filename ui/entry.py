"""Every page runs through app.py, where the login check and the navigation are."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    """Called first by every page. Streamlit serves a ``pages/`` folder on its own — each file a
    page, run without the main script — until some run of app.py has called ``st.navigation``.
    On a fresh server, a page opened by its address would skip app.py and its login check: such
    a run switches the folder's pages off for good and starts again, through app.py."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
