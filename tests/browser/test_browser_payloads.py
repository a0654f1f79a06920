"""Stored text never loads a URL or runs anything in the operator's browser (real Chromium).

Markdown and HTML payloads are seeded where users, clients and files put text — a flow file's
name, node titles and variable description and value (the flow importer); a query that names the
conversation, a user id and a rename (the Service API); a memory text; a transcript and a report
bundle with a config label (the conversation importer), a config set saved under a payload name —
then every page and every debugger tab is opened, for a flow conversation and an imported one. Every payload points at a trap server on 127.0.0.2: no request may reach it, no request for
it may leave the browser, no link to it or to ``javascript:`` may exist, and no dialog may open.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import yaml
from playwright.sync_api import expect

from core.analysis.compare import NamedConfig
from core.analysis.source import Source
from core.api.app import create_app
from core.cli.app import main
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.report.build import build_report
from core.report.bundle import bundle_json
from core.service.samples import load_sample, seed_demo
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store import repo
from core.store.db import Database
from tests.api.test_api import ThreadServer
from tests.browser import chromium, streamlit_server

WAIT = 90_000  # ms: a shared machine can be slow; every wait is for an element


class Trap:
    """An HTTP server on 127.0.0.2 (still loopback) that records every request it gets."""

    def __init__(self):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self.host = f"127.0.0.2:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def payload(host: str, tag: str) -> str:
    """Markdown and HTML that would load ``host`` (an image, a tag, an auto-link) or run a script."""
    return (
        f"![i](//{host}/{tag}.png) <img src=http://{host}/{tag}-tag.png onerror=alert(1)> "
        f"http://{host}/{tag}-auto www.{tag}.example [l](javascript:alert(1)) **{tag}**"
    )


def payload_flow(host: str) -> dict:
    return {
        "format": "memlens-flow",
        "version": 1,
        "name": payload(host, "flowname"),
        "mode": "advanced-chat",
        "variables": [
            {
                "name": "note",
                "type": "string",
                "default": payload(host, "varvalue"),
                "description": payload(host, "vardesc"),
            }
        ],
        "nodes": [
            {"id": "start", "type": "start", "title": "Start"},
            {
                "id": "recall",
                "type": "memory-retrieve",
                "title": "Recall",
                "query": "{{#sys.query#}}",
                "user": "{{#sys.user_id#}}",
                "top_k": 5,
            },
            {
                "id": "responder",
                "type": "llm",
                "title": payload(host, "nodetitle"),
                "model": "memlens/demo",
                "prompt_template": [
                    {"role": "system", "text": "You help."},
                    {"role": "assistant", "text": "{{#recall.text#}}"},
                ],
                "memory": {"window": 2},
            },
            {
                "id": "remember",
                "type": "memory-store",
                "title": "Remember",
                "user": "{{#sys.user_id#}}",
                "query": "{{#sys.query#}}",
                "answer": "{{#responder.text#}}",
            },
            {"id": "answer", "type": "answer", "title": "Answer", "answer": "{{#responder.text#}}"},
        ],
        "edges": [["start", "recall"], ["recall", "responder"], ["responder", "remember"], ["remember", "answer"]],
    }


def seed(tmp_path, url: str, host: str) -> str:
    """Everything through the importers and the API; returns the payload user id."""
    db = Database(url)
    service = ConversationService(db, DemoClient())
    seed_demo(service)  # the app's first-open demo, so the API conversation below is the newest
    flow_file = tmp_path / "payload-flow.yml"
    flow_file.write_text(yaml.safe_dump(payload_flow(host), allow_unicode=True), encoding="utf-8")
    assert main(["flows", "import", str(flow_file), "--db", url]) == 0
    flow_id = next(f.flow_id for f in repo.list_flows(db) if "flowname" in f.flow_name)
    key = app_keys.create_key(db, flow_id)[1]
    user = payload(host, "userid")[:200]
    server = ThreadServer(create_app(db, llm=DemoClient(), ping_interval=0.1))
    try:
        http = httpx.Client(base_url=server.base_url, timeout=120, headers={"Authorization": f"Bearer {key}"})
        first = http.post(
            "/chat-messages",
            json={"inputs": {}, "query": payload(host, "query1"), "user": user, "response_mode": "blocking"},
        )
        assert first.status_code == 200, first.text
        conv = first.json()["conversation_id"]
        second = http.post(
            "/chat-messages",
            json={
                "inputs": {},
                "query": payload(host, "query2"),
                "user": user,
                "conversation_id": conv,
                "response_mode": "blocking",
            },
        )
        assert second.status_code == 200, second.text
    finally:
        server.stop()
    service.long_term.add(user, payload(host, "memorytext"))
    transcript = tmp_path / "transcript.json"
    transcript.write_text(
        json.dumps(
            {
                "name": payload(host, "importname"),
                "messages": [
                    {"role": "user", "content": payload(host, "importq")},
                    {"role": "assistant", "content": payload(host, "importa")},
                    {"role": "user", "content": "My name is Dana. " + payload(host, "importq2")},
                    {"role": "assistant", "content": payload(host, "importa2")},
                ],
            }
        ),
        encoding="utf-8",
    )
    assert main(["import", str(transcript), "--db", url]) == 0
    configs = [
        NamedConfig(payload(host, "cfglabel"), MemoryConfig(window=1)),
        NamedConfig("long", MemoryConfig(window=9)),
    ]
    bundle = tmp_path / "payload.report.json"
    bundle.write_text(bundle_json(build_report(Source(load_sample("lisbon-trip.json")[0]), configs)), encoding="utf-8")
    assert main(["import", str(bundle), "--db", url]) == 0
    return user


def no_payload_markup(page, host: str) -> None:
    """Nothing on the page is an image, frame or link built from a payload."""
    for selector in (
        f'img[src*="{host}"]',
        f'[src*="{host}"]',
        f'a[href*="{host}"]',
        'a[href^="javascript"]',
        'a[href*=".example"]',
        'a[href^="mailto"]',
    ):
        assert page.locator(selector).count() == 0, selector


def visible_text(page) -> str:
    return page.locator("body").inner_text().replace("\u2060", "")


def wait_for_text(page, needles: list[str], seconds: int = 90) -> None:
    """Wait until each needle is shown: an inspector tab is drawn by the rerun its click starts, which a
    loaded machine can take seconds to end."""
    for _ in range(seconds * 4):
        text = visible_text(page)
        if all(n in text for n in needles):
            return
        page.wait_for_timeout(250)
    missing = [n for n in needles if n not in visible_text(page)]
    raise AssertionError(f"not shown after {seconds} s: {missing}")


def test_payloads_seeded_through_the_api_and_the_importers_stay_text_on_every_page(tmp_path):
    trap = Trap()
    host = trap.host
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    try:
        user = seed(tmp_path, url, host)
        with streamlit_server({"MEMLENS_DATABASE_URL": url}, tmp_path / "streamlit.log") as base, chromium() as browser:
            page = browser.new_page(viewport={"width": 1500, "height": 2600})
            page.set_default_timeout(90_000)
            requests, dialogs = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            # The debugger, on the API conversation: its auto-generated name is the page title.
            page.goto(base)
            expect(page.get_by_test_id("stChatMessage")).to_have_count(4, timeout=WAIT)
            title = page.get_by_role("main").get_by_role("heading", level=1).first
            expect(title).to_contain_text("![i](//127.0.0.2", timeout=WAIT)  # the name is the query's start
            page.wait_for_timeout(1500)
            no_payload_markup(page, host)
            assert [u for u in requests if host in u] == [] and trap.hits == []
            text = visible_text(page)
            for tag in ("query1", "query2", "flowname"):
                assert f"{tag}.png" in text, tag
            # A new turn through the chat box: progress lines name the node.
            box = page.get_by_test_id("stChatInputTextArea")
            box.fill(payload(host, "chatbox"))
            box.press("Enter")
            expect(page.get_by_test_id("stChatMessage")).to_have_count(6, timeout=WAIT)
            no_payload_markup(page, host)
            # Every tab of the inspector, and the node's own tab (its label is the payload title).
            page.get_by_role("tab", name="Context receipt").click()
            node_tab = page.get_by_role("tab").filter(has_text="nodetitle.png").first
            expect(node_tab).to_be_visible(timeout=WAIT)
            node_tab.click()
            page.wait_for_timeout(1500)
            no_payload_markup(page, host)
            for name, tags in (
                ("Switchboard", ["nodetitle"]),
                ("Variables", ["vardesc", "varvalue"]),
                ("Branches", []),
            ):
                page.get_by_role("tab", name=name).click()
                page.wait_for_timeout(1500)
                wait_for_text(page, [f"{tag}.png" for tag in tags])
                no_payload_markup(page, host)

            # Long-term memory: the payload user id and memory text.
            page.goto(f"{base}/memories")
            other = page.get_by_test_id("stTextInput").filter(has_text="Another user id").locator("input")
            other.fill(user)
            other.press("Enter")
            expect(page.get_by_test_id("stHeading").filter(has_text="userid.png")).to_be_visible(timeout=WAIT)
            assert "memorytext.png" in visible_text(page)
            no_payload_markup(page, host)

            # The imported transcript in the debugger's replay view, every tab of it.
            page.goto(base)
            page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").nth(1).click()  # "Open"
            page.get_by_role("option", name=re.compile("importname")).click()
            expect(page.get_by_role("main").get_by_role("heading", level=1).first).to_contain_text(
                "importname.png", timeout=WAIT
            )
            expect(page.get_by_test_id("stChatMessage")).to_have_count(4, timeout=WAIT)
            no_payload_markup(page, host)
            assert "importq.png" in visible_text(page) and "importa2.png" in visible_text(page)
            for tab in ("Context receipt", "Switchboard", "Findings", "Branches", "Needs a flow"):
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(1000)
                no_payload_markup(page, host)

            # Compare: a config labelled with a payload, saved as a set under a payload name.
            page.goto(f"{base}/compare")
            fold = page.get_by_text("Memory configs", exact=True)  # the configs' forms are folded away
            expect(fold).to_be_visible(timeout=WAIT)
            fold.click()
            label_box = page.get_by_role("textbox", name="Label (blank: automatic)").first
            expect(label_box).to_be_visible(timeout=WAIT)
            label_box.fill(payload(host, "cfglabel"))
            label_box.press("Enter")
            expect(page.get_by_text(re.compile(r"cfglabel\.png")).first).to_be_attached(timeout=WAIT)
            page.wait_for_timeout(3000)
            no_payload_markup(page, host)
            name_box = page.get_by_test_id("stTextInput").filter(has_text="Save these configs as").locator("input")
            name_box.fill(payload(host, "setname"))
            name_box.press("Enter")
            page.get_by_role("button", name="Save", exact=True).click()
            expect(page.get_by_test_id("stAlert").filter(has_text="setname.png")).to_be_visible(timeout=WAIT)
            no_payload_markup(page, host)

            # Compare and Present on the stored conversations; Ledger and Import pages as they open.
            for path, radio in (("compare", "cmp_from"), ("present", "pre_from")):
                page.goto(f"{base}/{path}")
                expect(page.get_by_test_id("stHeading").first).to_be_visible(timeout=WAIT)
                page.get_by_test_id("stRadio").first.get_by_text("Stored").click()
                page.wait_for_timeout(4000)
                no_payload_markup(page, host)
            for path in ("ledger", "import"):
                page.goto(f"{base}/{path}")
                expect(page.get_by_test_id("stHeading").first).to_be_visible(timeout=WAIT)
                page.wait_for_timeout(1500)
                no_payload_markup(page, host)

            leaked = [u for u in requests if "127.0.0.2" in u or ".example" in u or u.startswith("javascript")]
            assert leaked == [] and dialogs == []
        assert trap.hits == []
    finally:
        trap.close()
