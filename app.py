"""MemLens — see which messages each LLM node's memory kept or dropped, and why."""

import streamlit as st

st.set_page_config(page_title="MemLens", page_icon="🔍", layout="wide")

pages = [
    st.Page("pages/ledger.py", title="Ledger explorer", icon="🧾", default=True),
]
st.navigation(pages).run()
