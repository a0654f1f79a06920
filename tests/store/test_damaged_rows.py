"""Readers of the store never crash on an old or odd row: a value written by hand (or by another
tool) is shown as damaged by `conversations`, `export`, the Debugger and Compare, which go on."""

import json

import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from core.cli.app import main
from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.conftest import ROOT

# Each: the SQL that damages one column of the stored conversation, and the field the readers name.
DAMAGE = {
    "inputs not an object": ("UPDATE conversations SET inputs = '\"notadict\"'", "conversation: inputs"),
    "inputs not JSON": ("UPDATE conversations SET inputs = 'not json {'", "conversation: inputs"),
    "string seq": ("UPDATE turns SET seq = 'two' WHERE seq = 2", "seq"),
    "string timestamp": ("UPDATE turns SET created_at = 'yesterday' WHERE seq = 1", "created_at"),
    "object dialogue_count": ("UPDATE turns SET dialogue_count = '{\"a\": 1}' WHERE seq = 1", "dialogue_count"),
    "messages not a list": ("UPDATE turns SET messages = '\"x\"' WHERE seq = 1", "messages"),
    "unreadable ledger": ('UPDATE node_runs SET ledger = \'{"packed": "runs-v1", "runs": 7}\'', "ledger"),
    "string turn_seq": ("UPDATE variable_changes SET turn_seq = 'one'", "turn_seq"),
}


def _stored(url):
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="odd rows").id
    for q in ("Hi, I'm Dana.", "Where is my order 4411?", "What is my name?"):
        service.send(conv, q)
    return db, conv


def _damage(db, sql):
    with db.engine.begin() as c:
        c.execute(text(sql))


@pytest.mark.parametrize("case", DAMAGE)
def test_listing_and_export_name_the_damaged_field_and_go_on(case, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    db, conv = _stored(url)
    sql, field = DAMAGE[case]
    _damage(db, sql)
    assert main(["conversations", "--db", url]) == 0
    listing = capsys.readouterr().out
    assert conv in listing
    if field.startswith("conversation:"):
        assert "[damaged: inputs]" in listing
    assert main(["export", conv, "--db", url]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert len(doc["turns"]) == 3
    if case == "unreadable ledger":  # exported as stored: only reading it back into a ledger fails
        assert doc["turns"][0]["node_runs"][-1]["ledger"] == {"packed": "runs-v1", "runs": 7}
        return
    assert any(field in d for d in doc["damaged"]), doc["damaged"]
    assert captured.err.startswith("warning: ") and field in captured.err and "Traceback" not in captured.err


def test_a_clean_conversation_exports_with_no_damage_mark(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _, conv = _stored(url)
    assert main(["export", conv, "--db", url]) == 0
    captured = capsys.readouterr()
    assert "damaged" not in json.loads(captured.out) and captured.err == ""


@pytest.fixture
def damaged_app(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db, conv = _stored(url)
    for sql, _ in DAMAGE.values():
        _damage(db, sql)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    return at, conv


def test_the_debugger_opens_a_damaged_conversation_and_says_so(damaged_app):
    at, conv = damaged_app
    at.switch_page("pages/debugger.py").run()
    at.session_state["conv_id"] = conv
    at.run()
    assert not at.exception, at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "damaged" in warning and "inputs" in warning and "ledger" in warning
    assert len(at.chat_message) >= 2  # the active turn is still shown (a damaged seq loses the order)


def test_compare_opens_a_damaged_stored_conversation(damaged_app):
    at, conv = damaged_app
    at.switch_page("pages/compare.py").run()
    at.radio(key="cmp_from").set_value("Stored").run()
    at.session_state["cmp_stored"] = conv
    at.run()
    assert not at.exception, at.exception
    assert "damaged" in " ".join(w.value for w in at.warning)
