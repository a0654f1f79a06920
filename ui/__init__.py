"""Reusable Streamlit pieces. Pages stay thin: read state, call core, render with these."""
