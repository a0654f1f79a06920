"""Runs the app in Streamlit with its code loaded, and the demo seeded, before the first visitor needs them.

``memlens ui`` starts ``python -m ui.serve APP [STREAMLIT OPTIONS]``: Streamlit's own ``streamlit run``
with one addition. Streamlit imports a page's modules on the first visit, so without it the first page
waits for the memory core, SQLAlchemy, pandas and plotly to load and for the demo conversations to be
seeded into an empty store. Here a background thread does that work while the server starts; a visitor
who comes sooner finds it half done, never done twice (an import or a cached service is made once).
"""

from __future__ import annotations

import sys
import threading


def warm_up() -> None:
    """Load what the Debugger's first page imports and open (and seed) the configured store. A failure is
    left to that page, which does the same work and says what went wrong."""
    try:
        from core.store import resolve_url
        from ui import conversation_picker, data, flow_sidebar, replay_view, workspace  # noqa: F401

        data.service_for(resolve_url())
    except Exception:  # the first page reports it, with the error the user can act on
        return


def main(argv: list[str] | None = None) -> None:
    """``streamlit run`` with ``argv`` (default: this command's own), the warm-up started first."""
    threading.Thread(target=warm_up, name="memlens-warm-up", daemon=True).start()
    from streamlit.web import cli

    cli.main(["run", *(sys.argv[1:] if argv is None else argv)], prog_name="streamlit")


if __name__ == "__main__":
    main()
