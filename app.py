"""MemLens — see which messages each LLM node's memory kept or dropped, and why."""

import streamlit as st

if __name__ != "__main__":
    # `streamlit run app.py` finds the `app` below and serves it; its script is this same file, which
    # Streamlit then runs as "__main__" for every session. The server answers no request, page or
    # websocket, whose Host is not this machine or a host in MEMLENS_ALLOWED_HOSTS (core/hosts.py).
    from starlette.middleware import Middleware

    from core.hosts import HostCheck, HostsError, allowed_hosts

    try:
        allowed = allowed_hosts()
    except HostsError as e:
        raise SystemExit(f"error: {e}") from None
    app = st.App(__file__, middleware=[Middleware(HostCheck, allowed=allowed)])
else:
    from ui.entry import locked, login_required, login_screen, page_settings

    page_settings()

    pages = [
        st.Page("pages/debugger.py", title="Debugger", icon=":material/troubleshoot:", default=True),
        st.Page("pages/ledger.py", title="Ledger explorer", icon=":material/receipt_long:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
        st.Page("pages/present.py", title="Present", icon=":material/slideshow:"),
        st.Page("pages/import.py", title="Import", icon=":material/upload_file:"),
        st.Page("pages/memories.py", title="Long-term memory", icon=":material/psychology:"),
    ]
    shut = locked()
    # The navigation is set before the login screen, hidden while it shows: a session that started on a
    # page's address (ui.entry) would otherwise keep listing the pages/ folder's file names beside it.
    page = st.navigation(pages, position="hidden" if shut else "sidebar")
    if shut:
        login_screen()
    if login_required():
        st.sidebar.button("Log out", key="logout", on_click=st.logout, icon=":material/logout:")
    page.run()
