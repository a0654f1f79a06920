"""Modules by concept: no module of the app or the core is over 800 lines, so each stays one thing a newcomer
can read through (a longer one is split by concept, not by cutting it in two)."""

from tests.conftest import ROOT

MAX_LINES = 800


def test_no_module_of_the_app_or_the_core_is_over_800_lines():
    files = [
        ROOT / "app.py",
        *(ROOT / "core").rglob("*.py"),
        *(ROOT / "ui").rglob("*.py"),
        *(ROOT / "pages").rglob("*.py"),
    ]
    long = {
        str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
