"""A 1,000-turn conversation in a real browser: every page stays small, the full ledger is still there.

Each page load (and, on the pages that open on a sample, the pick of the stored conversation) must
receive at most 1.5 MB over the websocket and build at most 25,000 DOM elements — the limits
benchmarks/browser.py checks at 10,000 turns. The receipt's raw JSON is a download built on click; it must hold every
earlier message of the ledger.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from benchmarks.browser import MAX_BYTES, MAX_ELEMENTS, PAGES, PICKS, Meter, loaded, pick_stored, picked
from benchmarks.workload import seed_support_conversation
from core.store import repo
from core.store.db import Database
from tests.browser import chromium, streamlit_server

TURNS = 1_000


@pytest.fixture(scope="module")
def long_app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("long")
    url = f"sqlite:///{tmp / 'memlens.db'}"
    db = Database(url)
    seed_support_conversation(db, TURNS)
    repo.set_setting(db, "demo.seeded", True)  # the store holds the long conversation only
    db.dispose()
    with streamlit_server({"MEMLENS_DATABASE_URL": url}, tmp / "streamlit.log") as base, chromium() as browser:
        yield base, browser, tmp


def _open(browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1200})
    page.set_default_timeout(180_000)  # a shared machine can be slow; every wait is for an element
    return page, Meter(page)


def _within_limits(what: str, received: int, elements: int) -> None:
    assert received <= MAX_BYTES, f"{what}: {received / 1e6:.2f} MB received over the websocket"
    assert elements <= MAX_ELEMENTS, f"{what}: {elements:,} DOM elements"


@pytest.mark.parametrize("name, path", PAGES, ids=[p[0] for p in PAGES])
def test_a_page_on_a_1000_turn_conversation_stays_under_the_size_limits(long_app, name, path):
    url, browser, _ = long_app
    page, meter = _open(browser)
    _, received, elements, _ = meter.measure(lambda: page.goto(url + path), loaded(page, name, TURNS), timeout=180)
    _within_limits(f"{name} load", received, elements)
    if name in PICKS:  # the page shows the stored conversation (the Ledger explorer: at its newest turn)
        _, received, elements, _ = meter.measure(
            lambda: pick_stored(page, PICKS[name]), picked(page, name, TURNS), timeout=180
        )
        stored = page.get_by_role("combobox", name="Stored conversation")
        expect(stored).to_have_value(re.compile(r"1,?000 turns"))
        _within_limits(f"{name} with the stored conversation", received, elements)
    if name == "Debugger":
        expect(page.get_by_test_id("stChatMessage").first).to_be_visible()
        assert page.get_by_test_id("stChatMessage").count() == 40  # one page of 20 turns
    page.close()


def test_the_receipts_raw_json_and_full_ledger_are_one_click_away_and_complete(long_app):
    url, browser, tmp = long_app
    page, meter = _open(browser)
    meter.measure(lambda: page.goto(url))
    meter.measure(lambda: page.get_by_role("tab", name="Responder").click(), reruns=False)
    panel = page.get_by_role("tabpanel", name="Responder")
    with page.expect_download() as download:
        panel.get_by_role("button", name="Raw JSON").click()
    download.value.save_as(tmp / "raw.json")
    doc = json.loads((tmp / "raw.json").read_text())
    entries = doc["ledger"]["entries"]
    assert len(entries) == 2 * (TURNS - 1)  # a query and an answer of every earlier turn
    assert [e["reason"] for e in entries].count("kept") == 6  # the Responder's window: 3 turns
    assert doc["ledger"]["turn"] == TURNS and doc["prompt"][-1]["origin"] == "current query"

    # The whole ledger as a table, a page at a time, ending on the newest messages.
    _, received, elements, _ = meter.measure(
        lambda: panel.get_by_text(f"Show every earlier message ({2 * (TURNS - 1):,}), kept or not").click()
    )
    expect(panel).to_contain_text(f"Earlier messages 1,801–{2 * (TURNS - 1):,} of {2 * (TURNS - 1):,}")
    expect(panel.locator(".ml-ledger tbody tr")).to_have_count(2 * (TURNS - 1) - 1800)  # the last page, whole
    _within_limits("the ledger table", received, elements)
