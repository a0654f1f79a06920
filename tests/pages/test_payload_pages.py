"""AppTest: stored payloads reach every markdown-capable element of the pages already escaped.

A flow whose name, node title and variable description and value are markdown and HTML, a turn
whose query is one (it names the conversation), and a user id and memory text that are: every
title, caption, markdown block, alert, tab, expander, radio option and widget label of the
debugger (every tab) and the long-term memory page must carry them only as character references —
no image, link, auto-link or tag is left for Streamlit's markdown renderer to build.
"""

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from core.llm.client import DemoClient
from core.service.samples import seed_demo
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.browser.test_browser_payloads import payload, payload_flow
from tests.conftest import ROOT
from tests.rendered import open_tab, shown

HOST = "127.0.0.2:9"
# Markup that would load or link something; none of it may reach an element's markdown source.
RAW = ("![", "](", "<img", "://", "www.", "javascript:")


def markdown_sources(at) -> list[str]:
    """The markdown source of every element Streamlit renders as markdown."""
    out = []
    for kind in ("title", "header", "subheader", "caption", "markdown", "info", "warning", "error", "success", "toast"):
        out += [e.value for e in getattr(at, kind)]
    for kind in (
        "tabs",
        "expander",
        "button",
        "toggle",
        "text_input",
        "text_area",
        "checkbox",
        "selectbox",
        "radio",
        "metric",
    ):
        out += [e.label for e in at.get(kind) if getattr(e, "label", None)]
    for radio in at.radio:
        out += [str(o) for o in radio.options]
    return out


@pytest.fixture
def seeded(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    service = ConversationService(Database(url), DemoClient())
    seed_demo(service)
    flow_file = tmp_path / "payload.yml"
    flow_file.write_text(yaml.safe_dump(payload_flow(HOST), allow_unicode=True), encoding="utf-8")
    version = service.import_flow(flow_file)
    user = payload(HOST, "userid")[:200]
    conv = service.start(version.flow_id, user_id=user, name=payload(HOST, "convname")).id
    service.send(conv, payload(HOST, "query1"))
    service.send(conv, payload(HOST, "query2"))
    service.long_term.add(user, payload(HOST, "memorytext"))
    return user


def assert_literal(sources: list[str], *tags: str) -> None:
    for source in sources:
        assert not [r for r in RAW if r in source], source
    seen = " ".join(shown(s) for s in sources)
    for tag in tags:
        assert f"{tag}.png" in seen, tag


def test_every_debugger_element_carries_stored_text_escaped(seeded):
    from ui.workspace import INSPECTOR_TABS

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    # The newest conversation is the payload one: its name, flow, turns, node tabs, variables — in every
    # tab of the inspector, each drawn only while open.
    sources = []
    for tab in INSPECTOR_TABS:
        sources += markdown_sources(open_tab(at, tab))
        assert not at.exception, (tab, at.exception)
    assert_literal(sources, "convname", "flowname", "query2", "nodetitle", "vardesc", "varvalue")


def test_every_long_term_memory_element_carries_user_ids_and_memories_escaped(seeded):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page("pages/memories.py").run()
    at.text_input(key="mem_user_other").set_value(seeded).run()
    assert not at.exception, at.exception
    assert_literal(markdown_sources(at), "userid", "memorytext")


def test_every_replay_view_element_carries_imported_text_escaped(seeded, tmp_path):
    """An imported conversation (no flow) named, asked and answered in payloads, under a lens made
    from the payload flow's LLM node: the replay view's every tab."""
    import os

    from core.io import conversation_from_messages
    from core.model.conversation import Message
    from core.service.transfer import store_conversations
    from core.store import repo

    db = Database(os.environ["MEMLENS_DATABASE_URL"])
    messages = [
        Message("system", payload(HOST, "system"), "", 0),
        Message("user", payload(HOST, "imq1"), "", 1),
        Message("assistant", payload(HOST, "ima1"), "", 2),
        Message("user", payload(HOST, "imq2"), "", 3),
        Message("assistant", payload(HOST, "ima2"), "", 4),
    ]
    conv = conversation_from_messages(messages, "x", name=payload(HOST, "imname"))
    (conv_id,) = store_conversations(db, [conv], source="import")
    repo.set_feedback(db, repo.load_conversation(db, conv_id).turns[-1].id, "u", "like", payload(HOST, "rating"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.session_state["conv_id"] = conv_id
    at.run()
    at.button(key=f"attach-rescore-{conv_id}").click().run()
    assert not at.exception, at.exception
    assert_literal(markdown_sources(at), "imname", "imq2", "rating", "nodetitle", "flowname")
    db.dispose()
