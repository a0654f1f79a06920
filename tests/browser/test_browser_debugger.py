"""One real-browser run of the debugger: send a message, see the markers, open the context receipt."""

import re

from playwright.sync_api import expect

from tests.browser import chromium, expect_settled, open_demo, streamlit_server

XSS = "<img src=x onerror=alert(1)>"
# After a blank line, markdown would turn these into an image and bold text; they must stay as typed.
PAYLOAD_HOST = "http://127.0.0.1:9/"
MARKDOWN = f"![pic]({PAYLOAD_HOST}pic.png) **not bold**"


def test_send_a_message_see_markers_and_the_receipt_in_a_real_browser(tmp_path):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 2400})
        page.set_default_timeout(90_000)  # a shared machine can be slow; every wait below is for an element
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        requested = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(url)
        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(16, timeout=90_000)  # the demo conversation, 8 turns

        box = page.get_by_test_id("stChatInputTextArea")
        expect(box).to_be_editable(timeout=90_000)
        box.fill(f"{XSS}\n\n{MARKDOWN}")
        box.press("Enter")
        expect(messages).to_have_count(18, timeout=90_000)
        expect_settled(page)  # the previous turn's elements are gone, so every check below sees the new turn
        # The conversation picker shows the conversation as it is now, not as it was picked.
        picker = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").nth(1).locator("input")
        expect(picker).to_have_value("Demo: support-bot forgets a name · 9 turns · flow")

        # The message shows as text: no image element, no script ran.
        sent = messages.nth(16)
        expect(sent).to_contain_text(XSS)
        expect(sent).to_contain_text(MARKDOWN)
        assert sent.locator("img").count() == 0 and sent.locator("strong").count() == 0
        assert dialogs == []
        # Offline as a whole: the favicon is bundled, nothing is fetched from anywhere but the app.
        assert requested and [u for u in requested if not u.startswith((url, "data:", PAYLOAD_HOST))] == []
        assert page.locator('link[rel~="icon"]').first.get_attribute("href").startswith(("./media/", "/media/", url))

        # Markers: one per LLM node on earlier messages, with the reason on hover.
        chips = page.locator(".ml-chip")
        expect(chips.first).to_be_visible()
        kept = page.locator('.ml-chip[data-node="responder"][data-reason="kept"]')
        assert kept.count() == 6
        assert "kept" in kept.first.get_attribute("title")
        assert page.locator('.ml-chip[data-node="classifier"][data-reason="memory_off"]').count() >= 16

        # The context receipt of the new turn, Responder's tab.
        page.get_by_role("tab", name="Context receipt").click()
        page.get_by_role("tab", name="Responder").click()
        panel = page.get_by_role("tabpanel", name="Responder")
        expect(panel).to_contain_text("memory history")
        expect(panel).to_contain_text("current query")
        expect(panel).to_contain_text("tokens exact (o200k_base)")
        expect(panel.locator(".ml-budget")).to_have_count(1)  # the new turn's budget bar, and only it
        expect(panel.locator(".ml-budget")).to_be_visible()
        page.screenshot(path=str(tmp_path / "debugger.png"), full_page=True)
        assert (tmp_path / "debugger.png").stat().st_size > 10_000


def test_an_imported_chatgpt_export_opens_with_markers_and_a_receipt_in_a_real_browser(tmp_path):
    from core.io import read_conversations
    from core.service.transfer import store_conversations
    from core.store.db import Database
    from tests.conftest import FIXTURES

    url_db = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url_db)
    conversations = read_conversations(FIXTURES / "exports" / "chatgpt__conversations.json")
    store_conversations(db, conversations[:1], source="import")
    db.dispose()
    with streamlit_server({"MEMLENS_DATABASE_URL": url_db}, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 2400})
        page.set_default_timeout(90_000)
        page.goto(url)
        expect(page.get_by_test_id("stChatMessage")).to_have_count(16, timeout=90_000)  # the demo first
        source = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Source")
        source.click()
        page.get_by_role("option", name="import: chatgpt").click()
        expect(page.get_by_role("heading", name="Lisbon trip")).to_be_visible()
        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(6)  # the active branch: three turns
        expect(messages.nth(2)).to_contain_text("Add a day trip to Cascais instead.")
        expect_settled(page)  # no element of the demo conversation is left beside the imported one
        # Markers of the default lens on the earlier messages of the inspected (last) turn.
        expect(page.locator('.ml-chip[data-node="lens-default"]')).to_have_count(4)
        page.get_by_role("tab", name="Context receipt").click()
        panel = page.get_by_role("tabpanel").filter(has_text="current query").first
        expect(panel).to_contain_text("memory history")
        expect(panel).to_contain_text("Which day is the museum one?")
        page.screenshot(path=str(tmp_path / "imported.png"), full_page=True)

        # The address names the conversation and the turn: a reload opens them again, not the demo.
        expect(page).to_have_url(re.compile(r"[?&]conversation=[^&]+&turn=[^&]+"))
        page.reload()
        expect(page.get_by_role("heading", name="Lisbon trip")).to_be_visible(timeout=90_000)
        expect(page.get_by_test_id("stChatMessage")).to_have_count(6)
        expect(page.locator('.ml-chip[data-node="lens-default"]')).to_have_count(4)


def test_a_new_conversation_on_the_users_own_dify_export_in_a_real_browser(tmp_path):
    """New conversation → your own file → upload a Dify DSL export → Start: Start is offered only once
    the file has arrived; the popover closes off the new conversation and its chat answers at once
    (Start used to fail beside any listed conversation)."""
    from tests.conftest import FIXTURES

    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(90_000)
        page.goto(url)
        expect(page.get_by_test_id("stChatMessage")).to_have_count(16, timeout=90_000)
        page.get_by_role("button", name="New conversation").click()
        popover = page.get_by_test_id("stPopoverBody")
        popover.get_by_text("your own file").click()
        expect(popover).to_contain_text("Start waits for the file to arrive.")
        expect(popover.get_by_role("button", name="Start")).to_be_disabled()
        popover.locator("input[type=file]").set_input_files(str(FIXTURES / "dify_dsl" / "svcvit__记忆测试.yml"))
        # The uploader lists the file as it sends it; Start is offered once the app has it.
        expect(popover).to_contain_text("Start uses svcvit__记忆测试.yml.")
        expect(popover.get_by_role("button", name="Start")).to_be_enabled()
        popover.get_by_role("button", name="Start").click()
        expect(page.locator("h1").first).to_have_text("New conversation")
        expect(popover).to_have_count(0)  # closed: the chat input is free
        box = page.get_by_test_id("stChatInputTextArea")
        box.fill("Hi, I am Dana")
        box.press("Enter")
        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(2)
        expect(messages.nth(1)).to_contain_text("Dana")  # answered through the flow's aggregator
        expect(page.get_by_test_id("stSidebar")).to_contain_text("记忆测试")


def test_an_edited_message_runs_as_a_new_branch_in_a_real_browser(tmp_path):
    """The Edit popover's box is drawn when the popover opens; what is sent from it becomes a branch."""
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = open_demo(browser, url, {"width": 1440, "height": 900})
        messages = page.get_by_test_id("stChatMessage")
        expect_settled(page)
        assert page.get_by_label("Edited message").count() == 0  # no box until a popover opens
        page.get_by_test_id("stPopover").filter(has_text="Edit").last.click()
        box = page.get_by_label("Edited message")
        expect(box).to_be_visible()
        box.fill("Actually, what is my order number?")
        page.get_by_role("button", name="Send as a new branch").click()
        expect(messages.filter(has_text="Actually, what is my order number?")).to_have_count(1)
        expect(page.get_by_test_id("stMarkdown").filter(has_text=re.compile(r"^2/2$")).first).to_be_visible()
