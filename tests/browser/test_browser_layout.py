"""The debugger's layout in a real browser: at 1280 and 1920 wide the page opens at the top with the
title, the newest turn, its receipt and the whole chat input in view (1280×800 too), and the receipt stays in view beside the transcript."""

import pytest
from playwright.sync_api import expect

from tests.browser import chromium, expect_settled, streamlit_server


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return (
        bool(box)
        and box["y"] >= 0
        and box["y"] + min(box["height"], 40) <= size["height"]
        and box["x"] >= 0
        and box["x"] + 40 <= size["width"]
    )


@pytest.mark.parametrize("width,height", [(1280, 800), (1920, 1080)])
def test_the_receipt_and_the_newest_turn_are_in_view_when_the_debugger_opens(tmp_path, width, height):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(90_000)
        page.goto(url)
        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(16, timeout=90_000)
        receipt = page.get_by_text("Turn 8", exact=False).first
        expect(receipt).to_be_visible(timeout=90_000)
        page.wait_for_timeout(1500)  # let the transcript box settle on its newest message
        page.screenshot(path=str(tmp_path / f"debugger-{width}.png"))
        assert page.evaluate("window.scrollY") == 0  # opened at the top
        assert in_view(page, page.locator("h1").first)
        assert in_view(page, receipt)
        assert in_view(page, messages.last)  # the newest turn, scrolled to inside its box
        box = page.get_by_test_id("stChatInput").bounding_box()  # the chat input, all of it
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, box
        # Every tab of the inspector shows its whole name: none behind the tab strip's scroll arrow.
        strip = page.locator('.st-key-ml-side [role="tablist"]').first
        assert strip.evaluate("e => e.scrollWidth <= e.clientWidth"), strip.all_inner_texts()

        # Inspect an earlier turn: the receipt moves to it and stays in view.
        messages.nth(4).hover()
        page.locator('button:has-text("Inspect")').first.click()
        header = page.get_by_text("Turn 1 —", exact=False).first
        expect(header).to_be_visible(timeout=90_000)
        expect_settled(page)  # the layout of the finished run, not one with the previous turn's elements
        assert in_view(page, header)


def test_a_page_opened_by_its_address_on_a_fresh_server_has_the_apps_navigation(tmp_path):
    """The first visit of a new server, by a page's address: Streamlit would list the pages folder's
    file names ("app", "compare", …) in the sidebar for that visitor; the page starts again through
    app.py and its navigation instead, on the page asked for."""
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(90_000)
        page.goto(url + "/ledger")
        expect(page.locator("h1").first).to_have_text("Ledger explorer", timeout=90_000)
        nav = page.get_by_test_id("stSidebarNav")
        expect(nav).to_contain_text("Long-term memory", timeout=90_000)
        links = [t.strip() for t in nav.locator("a").all_inner_texts()]
        assert not {"app", "debugger", "ledger", "import"} & set(links), links
        assert page.url.endswith("/ledger")


@pytest.mark.parametrize("width,height", [(1280, 800), (1920, 1080)])
def test_compare_charts_keep_their_legends_outside_and_replies_side_by_side(tmp_path, width, height):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(90_000)
        page.goto(url + "/compare")
        charts = page.locator(".js-plotly-plot")
        expect(charts.nth(5)).to_be_visible(timeout=90_000)  # three heatmaps and three line charts
        assert page.locator(".js-plotly-plot .legend").count() == 0  # no legend inside any plot
        page.get_by_text("Re-ask every query under each config").click()
        cards = page.locator(".ml-reply")
        expect(cards.first).to_be_visible(timeout=90_000)
        expect_settled(page)
        first_row = [cards.nth(i).bounding_box() for i in range(3)]
        assert len({round(b["y"]) for b in first_row}) == 1  # one row: the three configs side by side
        assert all(b["x"] + b["width"] <= width for b in first_row)  # wrapped, nothing runs off the page
        page.screenshot(path=str(tmp_path / f"compare-{width}.png"), full_page=True)


def test_the_facts_table_of_six_configs_fits_a_1280_page_without_scrolling_sideways(tmp_path):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(90_000)
        page.goto(url + "/compare")
        expect(page.locator("table.ml-facts")).to_be_visible(timeout=90_000)
        page.get_by_text("Memory configs", exact=True).click()  # the configs' forms are folded away
        how_many = page.get_by_label("How many configs")
        how_many.fill("6")
        how_many.press("Enter")
        table = page.locator("table.ml-facts")
        expect(table.locator("thead th")).to_have_count(8, timeout=90_000)  # fact, stated at, six configs
        table.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "facts-1280.png"), full_page=True)
        sizes = table.evaluate("""t => [t, t.parentElement, ...t.querySelectorAll('td, th')].map(
            e => [e.scrollWidth, e.clientWidth])""")
        assert all(scroll <= client for scroll, client in sizes), sizes
        box = table.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1280
        assert "lost at turn" in table.inner_text()


def test_rerun_a_turn_as_a_branch_then_flip_back_and_the_switchboard_agrees_with_the_markers(tmp_path):
    """The sequence that once left the switchboard at window 6 over markers of window 3."""
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(90_000)
        page.goto(url)
        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(16, timeout=90_000)
        box = page.locator(".st-key-ml-transcript")

        def inspect(answer_index: int) -> None:
            answer = messages.nth(answer_index)
            answer.scroll_into_view_if_needed()
            answer.get_by_role("button", name="Inspect").click()
            expect(answer).to_contain_text("inspected", timeout=90_000)

        inspect(11)  # turn 6's answer
        page.get_by_role("tab", name="Switchboard").click()
        # The Responder's window (the memory-config editor's key ends in <node>_window_turns).
        # Not one Streamlit marks stale: until a rerun ends, the previous turn's editor stays beside the new one.
        responder_window = '[data-stale="false"][class*="-responder_window_turns"] input'
        window = page.locator(responder_window)
        expect(window).to_have_count(1, timeout=90_000)
        recorded = window.input_value()
        window.fill("6")
        window.press("Enter")
        expect(page.get_by_text("replies might now differ").first).to_be_visible(timeout=90_000)
        page.get_by_role("button", name="Re-run turn 6 as a branch").click()
        expect(box.get_by_text("turn 6 · 2/2").first).to_be_visible(timeout=90_000)
        page.get_by_role("tab", name="Switchboard").click()
        # Until the rerun ends, the previous turn's editor can stay in the page beside the new one (its key
        # names the inspected turn), so wait for the one editor left rather than the first look.
        expect(page.locator(responder_window)).to_have_count(1, timeout=90_000)  # (a strict check fails at once)
        expect(page.locator(responder_window)).to_have_value("6", timeout=90_000)  # what the re-run ran with

        # Flip turn 6 back to its first version: the thread of the recorded turns, window as recorded.
        query6 = messages.filter(has_text="turn 6 · 2/2").first
        query6.get_by_role("button").first.click()  # ‹ previous version
        expect(box.get_by_text("turn 6 · 1/2").first).to_be_visible(timeout=90_000)
        page.get_by_role("tab", name="Switchboard").click()
        expect(page.locator(responder_window)).to_have_count(1, timeout=90_000)
        expect(page.locator(responder_window)).to_have_value(recorded, timeout=90_000)
        expect(page.get_by_text("No change: ledgers are as recorded.")).to_be_visible(timeout=90_000)
        assert page.get_by_text("new turns use dify window 6", exact=False).count() >= 1
        # Markers of the inspected turn (the version flipped to): turn 1 is outside the recorded window.
        first = messages.nth(0).locator('.ml-chip[data-node="responder"]')
        assert first.get_attribute("data-reason") == "outside_window"
        page.screenshot(path=str(tmp_path / "flip.png"))


def test_an_imported_conversation_opens_at_the_top_with_its_transcript_in_a_box(tmp_path):
    """An imported log (no flow) opens in the Debugger's replay view: its transcript scrolls in its own
    box as a flow conversation's does, so the page does not grow with the log (it was one long page,
    opened far from the newest turn and its receipt)."""
    from core.service.imports import import_upload
    from core.store import repo
    from core.store.db import Database
    from tests.conftest import FIXTURES

    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    repo.set_setting(db, "demo.seeded", True)  # this store holds only the imported log
    sample = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
    first = sample.read_bytes().splitlines()[0]  # one long conversation
    import_upload(db, first, "airline.jsonl")
    db.dispose()
    with streamlit_server({"MEMLENS_DATABASE_URL": url}, tmp_path / "streamlit.log") as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(90_000)
        page.goto(base)
        box = page.locator(".st-key-ml-transcript")
        expect(box).to_be_visible(timeout=90_000)
        messages = box.get_by_test_id("stChatMessage")
        expect(messages.last).to_be_visible(timeout=90_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(tmp_path / "imported-1280.png"))
        assert page.evaluate("window.scrollY") == 0
        assert messages.count() > 10
        assert page.evaluate("document.documentElement.scrollHeight") <= 2 * 800  # not one long page
        assert in_view(page, page.locator(".st-key-ml-side").first)  # the inspector beside it
        # From 1,440 px wide, every tab of the inspector shows its whole name (Needs a flow was behind
        # the tab strip's scroll arrow).
        page.set_viewport_size({"width": 1440, "height": 900})
        strip = page.locator('.st-key-ml-side [role="tablist"]').first
        expect(strip).to_contain_text("Needs a flow")
        page.wait_for_timeout(500)
        assert strip.evaluate("e => e.scrollWidth <= e.clientWidth"), strip.inner_text()
