"""MemLens memory core: conversations, token accounting, memory strategies and their ledgers.

Pure Python; never imports Streamlit. Everything the app shows can be produced from here.
"""
