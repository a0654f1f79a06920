"""MemLens — see which messages each LLM node's memory kept or dropped, and why."""

import streamlit as st

from pathlib import Path

# A bundled image, not a material icon: the favicon must not need a font from the network.
st.set_page_config(page_title="MemLens", page_icon=str(Path(__file__).parent / "ui" / "favicon.png"),
                   layout="wide")


def login_required() -> bool:
    """An ``[auth]`` section in ``.streamlit/secrets.toml`` turns on Streamlit's OIDC login for every page."""
    return st.secrets.load_if_toml_exists() and "auth" in st.secrets


pages = [
    st.Page("pages/debugger.py", title="Debugger", icon=":material/troubleshoot:", default=True),
    st.Page("pages/ledger.py", title="Ledger explorer", icon=":material/receipt_long:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
    st.Page("pages/present.py", title="Present", icon=":material/slideshow:"),
    st.Page("pages/import.py", title="Import", icon=":material/upload_file:"),
    st.Page("pages/memories.py", title="Long-term memory", icon=":material/psychology:"),
]
locked = login_required() and not st.user.get("is_logged_in")
# The navigation is set before the login screen, hidden while it shows: a session that started on a
# page's address (ui.entry) would otherwise keep listing the pages/ folder's file names beside it.
page = st.navigation(pages, position="hidden" if locked else "sidebar")
if locked:
    st.title("MemLens")
    st.caption("Log in to open the debugger: this MemLens is shared, and its conversations are private.")
    st.button("Log in", key="login", on_click=st.login, icon=":material/login:", type="primary")
    st.stop()
if login_required():
    st.sidebar.button("Log out", key="logout", on_click=st.logout, icon=":material/logout:")
page.run()
