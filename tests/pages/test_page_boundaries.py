"""Pages and UI components reach the store through services (core.service.sessions, ui.data), and a page
writes only its own session keys (ui.state names them): the rules ARCHITECTURE.md gives for a page."""

import re

import pytest

from tests.conftest import ROOT
from ui import state

UI_FILES = sorted([*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py"), ROOT / "app.py"])
PAGE_PREFIXES = {
    "compare.py": state.COMPARE,
    "present.py": state.PRESENT,
    "import.py": state.IMPORT,
    "ledger.py": state.LEDGER,
    "memories.py": state.MEMORIES,
}


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pages_and_components_do_not_call_the_repository(path):
    source = path.read_text()
    assert not re.search(
        r"from core\.store import repo|from core\.store\.repo import (?!ConversationInfo\b)|\brepo\.[a-z_]+\(", source
    ), f"{path.name} calls the repository: go through ConversationService or ui.data"


@pytest.mark.parametrize("page", sorted(PAGE_PREFIXES))
def test_a_page_names_no_other_pages_session_keys(page):
    source = (ROOT / "pages" / page).read_text()
    others = [p for name, p in PAGE_PREFIXES.items() if name != page]
    for prefix in others:
        assert not re.search(rf"[\"']{prefix}_", source), f"{page} uses a key of the page prefixed {prefix}_"


def test_every_page_prefix_is_distinct():
    assert len(set(PAGE_PREFIXES.values())) == len(PAGE_PREFIXES)
