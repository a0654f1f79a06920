"""``memlens ui [STREAMLIT OPTIONS]``: the app, in Streamlit, from wherever MemLens is installed.

It runs ``streamlit run app.py`` on the ``app.py`` that lies beside ``core/`` — the checkout's, or
the installed copy with its ``pages/``, ``ui/`` and ``sample_data/`` — in the current folder, so a
``.streamlit/secrets.toml`` there (the login) is read. Beside that ``app.py`` lies MemLens's
``.streamlit/config.toml``, which Streamlit reads as the script's own settings: the app listens on
127.0.0.1 only and sends no usage statistics. Every word after ``ui`` goes to Streamlit, whose
options win over those settings::

    memlens ui --server.port 8502
    memlens ui --server.address 10.0.0.5     # behind an authenticating proxy: docs/team.md
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def app_path() -> Path:
    """The ``app.py`` beside the ``core`` package, with its ``pages/`` beside it."""
    import core
    from core.errors import RuntimeFailure

    root = Path(core.__file__).resolve().parent.parent
    app = root / "app.py"
    if not app.is_file() or not (root / "pages").is_dir():
        raise RuntimeFailure(
            f"MemLens's app.py and pages/ are not beside {root / 'core'}; reinstall MemLens "
            "(pip install --force-reinstall memlens)"
        )
    return app


def cmd_ui(args) -> int:
    # ui.serve is `streamlit run` that loads the app's code and seeds the demo before the first visit.
    command = [sys.executable, "-m", "ui.serve", str(app_path()), *args.rest]
    process = subprocess.Popen(command)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:  # Streamlit got the same Ctrl+C and is shutting down: wait for it
            continue


def register(sub) -> None:
    p = sub.add_parser(
        "ui",
        allow_abbrev=False,
        usage="%(prog)s [--help] [STREAMLIT OPTIONS, e.g. --server.port 8502]",
        epilog="Streamlit's own options (`streamlit run --help`) are passed on; they win over the "
        "settings MemLens ships (127.0.0.1 only, port 8501, no usage statistics).",
    )
    p.set_defaults(func=cmd_ui, pass_through=True)
