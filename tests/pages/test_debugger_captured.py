"""A captured conversation opens in the Debugger like an import: its markers are the observed ones, its
receipt the exact payload as sent (tokens counted under its model), each node's inferred rule and fit are
shown, and the inferred rule is a lens the switchboard's what-ifs start from. Captured text is literal."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from core.capture.threader import Threader
from core.capture.view import captured_view, observed_run
from core.proxy.recorder import save_threads
from core.service.sessions import ConversationService
from core.store.db import Database
from tests.capture.test_threader import Bot
from tests.conftest import ROOT
from tests.rendered import shown

HOSTILE = "<img src=x onerror=alert(1)> **bold** [link](http://x.example)"


def captured(db) -> str:
    bot = Bot(Threader(), system=f"You help. {HOSTILE}", window=lambda h: h[-4:])
    for k in range(5):
        bot.ask(f"question {k} {HOSTILE}" if k == 3 else f"question {k}")
    [conversation_id] = save_threads(db, bot.threader.threads)
    return conversation_id


def test_the_observed_receipt_is_the_payload_as_sent_and_its_reasons_the_explaining_rules(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    conversation_id = captured(db)
    service = ConversationService(db)
    conv = service.conversation(conversation_id)
    runs = {p: service.node_runs(conv, t.id) for p, t in enumerate(conv.turns)}
    [view] = captured_view(conv, service.info(conversation_id).meta, runs)
    assert view.fit == "explained by: last 4 messages (the Window Memory node, window 4), 5/5 calls"
    run = observed_run(conv, view, 4)
    payload = view.calls[4][0]
    assert [(row["role"], row["content"]) for row in run["prompt"]] == [
        ("system", f"You help. {HOSTILE}"),
        ("user", "question 2"),
        ("assistant", "answer to question 2"),
        ("user", f"question 3 {HOSTILE}"),
        ("assistant", f"answer to question 3 {HOSTILE}"),
        ("user", "question 4"),
    ]
    assert run["prompt"] == payload["prompt"] and all(row["tokens"] > 0 for row in run["prompt"])
    # The reasons are the explaining rule's (the Window Memory node trims its store for good), the kept set observed.
    assert [e.reason for e in run["ledger"].entries] == ["trimmed_earlier"] * 2 + ["outside_window"] * 2 + ["kept"] * 4
    assert run["ledger"].config["strategy"] == "window" and run["notes"][0].startswith("Observed: the payload")


def test_where_a_named_platform_parts_from_the_observation_the_receipt_of_that_call_says_so(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    bot = Bot(Threader(), window=lambda h: h[-6:])
    for k in range(4):
        bot.ask(f"question {k}")
    bot.ask("question 3", "regenerated", keep=False)  # Dify's rows would count this sibling
    for k in range(4, 7):
        bot.ask(f"question {k}")
    [conversation_id] = save_threads(db, bot.threader.threads)
    service = ConversationService(db)
    conv = service.conversation(conversation_id)
    [view] = captured_view(
        conv, service.info(conversation_id).meta, {p: service.node_runs(conv, t.id) for p, t in enumerate(conv.turns)}
    )
    [dify] = [d for d in view.inference.differences if d.platform == "Dify as shipped"]
    position = next(p for p, (_, number, _) in view.calls.items() if number == dify.call)
    assert dify.sentence() in observed_run(conv, view, position)["notes"]


@pytest.fixture
def page(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    conversation_id = captured(db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.session_state["conv_id"] = conversation_id
    at.run()
    assert not at.exception, at.exception
    at.db, at.conversation_id = db, conversation_id
    yield at
    db.dispose()


def test_a_captured_conversation_opens_with_observed_markers_its_rule_and_its_payload(page):
    assert any("Captured calls" in shown(c.value) for c in page.caption)
    assert any(
        "explained by: last 4 messages (the Window Memory node, window 4), 5/5 calls" in shown(c.value)
        for c in page.sidebar.caption
    )
    html = "".join(md.value for m in page.chat_message for md in m.markdown)
    nodes = {shown(n) for n in re.findall(r'data-node="([^"]+)"', html)}
    assert {"observed-node-1", "inferred-node-1", "lens-default"} <= nodes
    assert any(shown(t.label).startswith("Observed · node 1") for t in page.tabs)
    assert any("prompt tokens" in c.value for c in page.caption)
    # Captured text is shown as typed: never markup.
    everything = " ".join(
        [
            html,
            *(c.value for c in page.caption),
            *(c.value for c in page.sidebar.caption),
            *(m.value for m in page.markdown),
            *(t.label for t in page.tabs),
        ]
    )
    assert "<img" not in everything and "**bold**" not in everything
    assert "<img src=x" in shown(html.replace("&lt;", "<"))


def test_the_inferred_rule_is_a_lens_whose_what_if_changes_the_markers(page):
    key = f"rsb-{page.conversation_id}-inferred-node-1_window_msgs"
    page.number_input(key=key).set_value(2).run()
    assert not page.exception, page.exception
    assert any("What-if" in shown(w.value) for w in page.warning)


def test_a_conversation_the_openai_client_drove_through_the_proxy_opens_with_observed_markers_and_its_rule(
    tmp_path, monkeypatch
):
    from openai import OpenAI

    from tests.capture.conftest import running_proxy

    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    db = Database(url)
    with running_proxy(db) as (base, recorder):  # the demo model answers
        client = OpenAI(base_url=base, api_key="unused", max_retries=0)
        history = [{"role": "system", "content": "You are the Acme order desk."}]
        for question in ["Hi, I'm Dana.", "My order is 4411.", "What's my name?", "What's my order number?"]:
            history.append({"role": "user", "content": question})
            answer = client.chat.completions.create(model="gpt-4o-mini", messages=history[:1] + history[-3:])
            history.append({"role": "assistant", "content": answer.choices[0].message.content})
        assert recorder.wait()
    [info] = ConversationService(db).conversations()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.session_state["conv_id"] = info.id
    at.run()
    assert not at.exception, at.exception
    assert any(
        "explained by: last 2 messages (the Window Memory node, window 2), 4/4 calls" in shown(c.value)
        for c in at.sidebar.caption
    )
    html = "".join(md.value for m in at.chat_message for md in m.markdown)
    markers = {(shown(n), shown(r)) for n, r in re.findall(r'data-node="([^"]+)" data-reason="([^"]+)"', html)}
    # The last turn's payload held the turn before it and not the first two: observed kept and dropped.
    assert ("observed-node-1", "kept") in markers and ("observed-node-1", "trimmed_earlier") in markers
    assert any(shown(t.label).startswith("Observed · node 1") for t in at.tabs)
    db.dispose()
