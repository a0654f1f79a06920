"""What every page runs first: the app's page settings and its login check (app.py's preamble)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from core import __version__

FAVICON = Path(__file__).parent / "favicon.png"  # bundled: the favicon must not need a font from the network


def login_required() -> bool:
    """An ``[auth]`` section in ``.streamlit/secrets.toml`` turns on Streamlit's OIDC login for every page."""
    return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)


def locked() -> bool:
    """Whether this visitor must log in before seeing anything."""
    return login_required() and not st.user.get("is_logged_in")


def about() -> str:
    """The text of the app menu's About (markdown)."""
    return (
        f"**MemLens {__version__}** — a chat memory debugger: for each turn and LLM node, which earlier "
        "messages the model received, and why the others were left out."
    )


def page_settings() -> None:
    st.set_page_config(
        page_title="MemLens",
        page_icon=str(FAVICON),
        layout="wide",
        menu_items={"About": about(), "Get help": None, "Report a bug": None},
    )


def login_screen() -> None:
    """The login prompt, and nothing after it."""
    st.title("MemLens")
    st.caption("Log in to open the debugger: this MemLens is shared, and its conversations are private.")
    st.button("Log in", key="login", on_click=st.login, icon=":material/login:", type="primary")
    st.stop()


def through_app() -> None:
    """Called first by every page. Streamlit serves a ``pages/`` folder on its own — each file a
    page, run without app.py, its sidebar listing the files' names — until some run of app.py has
    called ``st.navigation``: on a fresh server a page opened by its address would skip app.py's
    login check and navigation. Such a run switches the folder's pages off; a session's first run,
    which has nothing to lose, starts again so it goes through app.py (its navigation, on the page
    asked for). A later run — a click, which a new start would drop — takes app.py's settings and
    login check here."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        if not st.session_state:
            st.rerun()
        page_settings()
        if locked():
            login_screen()
