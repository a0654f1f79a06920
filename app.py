"""MemLens — see which messages each LLM node's memory kept or dropped, and why."""

import streamlit as st

from pathlib import Path

# A bundled image, not a material icon: the favicon must not need a font from the network.
st.set_page_config(page_title="MemLens", page_icon=str(Path(__file__).parent / "ui" / "favicon.png"),
                   layout="wide")

pages = [
    st.Page("pages/debugger.py", title="Debugger", icon=":material/troubleshoot:", default=True),
    st.Page("pages/ledger.py", title="Ledger explorer", icon=":material/receipt_long:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
    st.Page("pages/present.py", title="Present", icon=":material/slideshow:"),
    st.Page("pages/import.py", title="Import", icon=":material/upload_file:"),
    st.Page("pages/memories.py", title="Long-term memory", icon=":material/psychology:"),
]
st.navigation(pages).run()
