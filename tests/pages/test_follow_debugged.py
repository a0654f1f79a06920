"""Every page opened from the menu shows the conversation being debugged, at its inspected turn, until
another is picked there; the Debugger opens on it again on the way back."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT
from tests.rendered import shown


def _debugging(tmp_path, monkeypatch, turn: int):
    """The app on the Debugger, a conversation other than the newest opened and its ``turn`` (0 or 1) inspected."""
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    db = Database(url)
    first_visit = next(c for c in repo.list_conversations(db) if c.name == "Demo: long-term memory, first visit")
    at.selectbox(key="conv_id").set_value(first_visit.id).run()
    inspected = repo.load_turn_rows(db, first_visit.id)[turn]["id"]
    at.button(key=f"tx-{first_visit.id}-{inspected}-1-inspect").click().run()
    assert not at.exception, at.exception
    assert at.session_state["debugged"] == (first_visit.id, inspected)
    return at, first_visit.id, inspected


@pytest.fixture
def debugged(tmp_path, monkeypatch):
    """Turn 1 inspected: Compare and the Ledger explorer would otherwise open on the newest turn (2)."""
    return _debugging(tmp_path, monkeypatch, 0)


def test_compare_opens_on_the_debugged_conversation_at_its_inspected_turn(debugged):
    at, conv_id, _ = debugged
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.radio(key="cmp_from").value == "Stored" and at.selectbox(key="cmp_stored").value == conv_id
    assert at.select_slider(key="cmp_turn").value == 1  # turn 1, as inspected; not the newest
    # Another picked there stays picked on the next run.
    at.radio(key="cmp_from").set_value("Sample").run()
    at.run()
    assert at.radio(key="cmp_from").value == "Sample"


def test_the_ledger_explorer_opens_on_it_too(debugged):
    at, conv_id, _ = debugged
    at.switch_page("pages/ledger.py").run()
    assert not at.exception, at.exception
    assert at.radio(key="ledger_from").value == "stored" and at.selectbox(key="ledger_stored").value == conv_id
    assert at.select_slider(key="ledger_turn").value == 1


def test_present_opens_on_it_at_its_inspected_turn(tmp_path, monkeypatch):
    at, conv_id, _ = _debugging(tmp_path, monkeypatch, 1)  # turn 2: Present would otherwise open on turn 1
    at.switch_page("pages/present.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="pre_stored").value == conv_id
    assert any("Turn 2</b> · 2 of 2" in md.value for md in at.markdown)


def test_the_debugger_opens_on_it_again_on_the_way_back(debugged):
    at, conv_id, turn1 = debugged
    at.switch_page("pages/compare.py").run()
    at.switch_page("pages/debugger.py").run()
    assert not at.exception, at.exception
    assert at.session_state["conv_id"] == conv_id and at.session_state["selected_turn"] == turn1
    assert shown(at.title[0].value) == "Demo: long-term memory, first visit"
