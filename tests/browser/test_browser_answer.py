"""The answer at a glance and a fix that does what it previews, as a person sees them in Chromium at
1280×800 and 1440×900: on the demo, and on Dify's "Question Classifier + Knowledge + Chatbot" template
uploaded as one's own flow.

1. the inspector opens on what each node left out (above the fold), then the receipt, then Dify's docs vs code;
2. "Replay the conversation with these settings" gives what the switchboard previews; a re-run says first
   what it will keep when that differs;
3. Compare, Present and the Ledger explorer opened from the menu show the conversation being debugged;
4. at 1440 px the inspector's tables, button labels and tab names are whole, and the transcript box takes the
   window's height;
5. the demo model is no dead end on the template: it sorts by shared words and says so, knows a name, and the
   flow's first use says which model answers;
6. a conversation on the template is named by its first message, its two nodes titled "LLM" and "LLM " are
   told apart, and "where did it go?" says "never ran" and names each Inspect button's nodes.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import chromium, expect_settled, streamlit_server
from tests.conftest import FIXTURES

SIZES = [(1280, 800), (1440, 900)]
TEMPLATE = FIXTURES / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml"
WAIT = 180_000  # a shared machine can be slow; every wait is for an element, never a timed assertion


def _open(browser, url: str, width: int, height: int):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT)
    page.goto(url)
    expect(page.get_by_test_id("stChatMessage").first).to_be_visible(timeout=WAIT)
    expect_settled(page, WAIT)
    return page


def _settled(page) -> None:
    expect_settled(page, WAIT)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=WAIT)


def _above_the_fold(page, locator) -> bool:
    box = locator.bounding_box()
    return bool(box) and 0 <= box["y"] and box["y"] + min(box["height"], 40) <= page.viewport_size["height"]


def _shown(text: str, *, whole: bool = True) -> re.Pattern:
    """``text`` as the page shows it: markdown text carries an invisible word joiner after each ":" (ui/html.py's
    ``plain``, against shortcodes and auto-links); a person reads the same words."""
    pattern = re.escape(text).replace(":", ":\u2060?")
    return re.compile(f"^{pattern}$" if whole else pattern)


def _glance(page, node: str):
    return page.locator(f'.ml-glance-line[data-node="{node}"]')


@pytest.mark.parametrize("width,height", SIZES)
def test_the_demo_opens_on_what_each_node_left_out_then_its_receipt_above_the_fold(tmp_path, width, height):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = _open(browser, url, width, height)
        responder = _glance(page, "responder")
        expect(responder).to_have_text(
            re.compile(
                r"^Responder: dropped turns 1–4 — “Hi, I'm Dana\. My order…”.* — "
                r"outside window of 4$"
            ),
            timeout=WAIT,
        )
        assert "rows: the conversation's newest on any branch" in responder.get_attribute("title")  # the long words
        expect(_glance(page, "classifier")).to_have_text("Classifier: memory off: sends no earlier message")
        _settled(page)
        page.screenshot(path=str(tmp_path / f"demo-{width}.png"))
        assert page.evaluate("window.scrollY") == 0
        assert _above_the_fold(page, responder)
        bar = page.get_by_role("tabpanel", name="Responder").locator(".ml-budget")
        assert _above_the_fold(page, bar), bar.bounding_box()  # the receipt's budget bar: above the fold
        note = page.locator('[data-kind="docs_vs_code"]').filter(visible=True).first
        assert note.bounding_box()["y"] > bar.bounding_box()["y"]  # Dify's docs vs code: after the receipt

        # 4: the transcript box takes the window's height, above the whole chat input.
        box = page.locator(".st-key-ml-transcript").bounding_box()
        chat = page.get_by_test_id("stChatInput").bounding_box()
        assert box["height"] >= height - 260, box
        assert chat["y"] + chat["height"] <= height
        if width >= 1440:  # the inspector's tab names, button labels and tables, whole
            strip = page.locator('.st-key-ml-side [role="tablist"]').first
            assert strip.evaluate("e => e.scrollWidth <= e.clientWidth"), strip.inner_text()
            page.get_by_role("tab", name="Variables").click()
            _settled(page)
            changes = page.locator(".st-key-ml-side .ml-changes table").filter(visible=True).first
            expect(changes).to_be_visible()
            expect(changes.locator("tbody tr").first).to_be_visible()
            side = page.locator(".st-key-ml-side").bounding_box()
            grid = changes.bounding_box()
            assert grid["x"] + grid["width"] <= side["x"] + side["width"] + 1
            assert changes.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth + 1"), "the Changes table is cut"
            page.screenshot(path=str(tmp_path / f"variables-{width}.png"))
            # The full ledger: every message snippet whole, wrapped inside the inspector.
            page.get_by_role("tab", name="Context receipt").click()
            _settled(page)
            page.get_by_role("tabpanel", name="Responder").get_by_text(
                re.compile(r"^Show every earlier message")
            ).click()
            table = page.get_by_role("tabpanel", name="Responder").locator(".ml-ledger table")
            expect(table.locator("tbody tr")).to_have_count(14, timeout=WAIT)
            expect(table).to_contain_text("The delivery was due on Monday and it still hasn't arrived")
            assert table.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth + 1")
            box = table.bounding_box()
            assert box["x"] + box["width"] <= side["x"] + side["width"] + 1
            for cell in table.locator("td").all():
                assert cell.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), cell.inner_text()
            table.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / f"ledger-{width}.png"))


def _labels_whole(page, scope) -> None:
    for button in scope.get_by_role("button").all():
        if button.is_visible():
            assert button.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), button.inner_text()


@pytest.mark.parametrize("width,height", SIZES)
def test_a_fix_that_does_what_it_previews_on_the_demo(tmp_path, width, height):
    """Inspect turn 6, window 4→6: the preview keeps "Hi, I'm Dana"; a re-run would not (said first, with the
    reason); replaying the conversation from turn 1 with these settings does, and the bot then knows her name."""
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = _open(browser, url, width, height)
        messages = page.get_by_test_id("stChatMessage")
        answer6 = messages.nth(11)
        answer6.scroll_into_view_if_needed()
        answer6.get_by_role("button", name="Inspect").click()
        expect(answer6).to_contain_text("inspected", timeout=WAIT)
        page.get_by_role("tab", name="Switchboard").click()
        window = page.locator('[data-stale="false"][class*="-responder_window_turns"] input')
        expect(window).to_have_count(1, timeout=WAIT)
        window.fill("6")
        window.press("Enter")
        expect(_glance(page, "responder")).to_have_text("Responder: dropped nothing: kept all 10 earlier", timeout=WAIT)
        warning = page.get_by_text(
            re.compile(
                r"^Re-running turn 6 as a branch:\u2060? Responder would keep 4 earlier "
                r"messages \(turns 4–5\), not the 10 this preview shows"
            )
        )
        expect(warning).to_be_visible(timeout=WAIT)
        expect(page.get_by_text("turn 6's first answer and the 2 turns written after it").first).to_be_visible()
        side = page.locator(".st-key-ml-side")
        expect(side.get_by_role("button", name="Re-run turn 6 as a branch")).to_be_visible()
        replay = side.get_by_role("button", name="Replay the conversation with these settings")
        expect(replay).to_be_visible()
        _settled(page)
        if width >= 1440:
            _labels_whole(page, side)
        page.screenshot(path=str(tmp_path / f"fix-{width}.png"))
        replay.click()
        popover = page.get_by_test_id("stPopoverBody")
        expect(popover).to_contain_text("a new conversation")
        popover.get_by_role("button", name="Replay 8 questions").click()
        expect(page.locator("h1").first).to_have_text(
            _shown("Demo: support-bot forgets a name · replayed with Responder: dify window 6"), timeout=WAIT
        )
        _settled(page)
        expect(_glance(page, "responder")).to_have_text("Responder: dropped nothing: kept all 10 earlier")
        expect(page.get_by_test_id("stChatMessage").nth(11)).to_contain_text("Your name is Dana.")


def test_the_menus_pages_show_the_conversation_being_debugged_at_its_inspected_turn(tmp_path):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = _open(browser, url, 1280, 800)
        answer3 = page.get_by_test_id("stChatMessage").nth(5)
        answer3.scroll_into_view_if_needed()
        answer3.get_by_role("button", name="Inspect").click()
        expect(answer3).to_contain_text("inspected", timeout=WAIT)
        _settled(page)
        nav = page.get_by_test_id("stSidebarNav")
        nav.get_by_role("link", name="Compare").click()
        stored = page.get_by_role("combobox", name="Stored conversation")
        expect(stored).to_have_value(re.compile(r"^Demo:\u2060? support-bot forgets a name · 8 turns"), timeout=WAIT)
        expect(page.get_by_test_id("stSlider").filter(has_text="Selected turn")).to_contain_text("turn 3")
        nav.get_by_role("link", name="Present").click()
        expect(page.get_by_text("Turn 3 · 3 of 8")).to_be_visible(timeout=WAIT)
        nav.get_by_role("link", name="Ledger explorer").click()
        expect(page.get_by_text(re.compile(r"^Turn 3 — the user asks:"))).to_be_visible(timeout=WAIT)
        nav.get_by_role("link", name="Debugger").click()
        expect(page.locator("h1").first).to_have_text(_shown("Demo: support-bot forgets a name"), timeout=WAIT)
        expect(page.get_by_test_id("stChatMessage").nth(5)).to_contain_text("inspected", timeout=WAIT)


def _start_on_the_template(page) -> None:
    page.get_by_role("button", name="New conversation").click()
    popover = page.get_by_test_id("stPopoverBody")
    popover.get_by_text("your own file").click()
    popover.locator("input[type=file]").set_input_files(str(TEMPLATE))
    expect(popover).to_contain_text(f"Start uses {TEMPLATE.name}.", timeout=WAIT)
    popover.get_by_role("button", name="Start").click()
    expect(page.locator("h1").first).to_have_text("New conversation", timeout=WAIT)


def _say(page, text: str, turns: int) -> None:
    box = page.get_by_test_id("stChatInputTextArea")
    expect(box).to_be_editable(timeout=WAIT)
    box.fill(text)
    box.press("Enter")
    expect(page.get_by_test_id("stChatMessage")).to_have_count(2 * turns, timeout=WAIT)
    _settled(page)


@pytest.mark.parametrize("width,height", SIZES)
def test_difys_question_classifier_template_uploaded_as_ones_own_flow(tmp_path, width, height):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = _open(browser, url, width, height)
        _start_on_the_template(page)
        # 5: on first use, which model answers and how to use a real one.
        expect(page.get_by_text(re.compile(r"^This flow's nodes call openai/gpt-3\.5-turbo\."))).to_be_visible()
        _say(page, "How do I use the product?", 1)
        # 6: named by its first message.
        expect(page.locator("h1").first).to_have_text("How do I use the product?", timeout=WAIT)
        expect(page.get_by_text(re.compile(r"^The offline demo model memlens/demo answered for")).first).to_be_visible()
        # 5: the classifier sorted by shared words into the how-to branch, whose chatbot ran; 6: the two
        # chatbots titled "LLM" and "LLM " are told apart by their ids.
        how_to = _glance(page, "1711528815414")
        expect(how_to).to_contain_text("LLM (1711528815414): nothing earlier to leave out")
        expect(_glance(page, "1711528709608")).to_contain_text("Question Classifier:")
        page.get_by_role("tab", name="Question Classifier").click()
        expect(
            page.get_by_text(
                re.compile(
                    r"the demo model sorts by shared words:\u2060? “Questions about how to use "
                    r"products” shares product, use"
                )
            ).first
        ).to_be_visible(timeout=WAIT)
        _say(page, "Hi, I'm Dana.", 2)
        _say(page, "What's my name?", 3)
        expect(page.get_by_test_id("stChatMessage").nth(5)).to_contain_text("Your name is Dana.")
        # 1: the inspector opens on the answer, above the fold, here too.
        after_sales = _glance(page, "1711528802931")
        expect(after_sales).to_contain_text("LLM (1711528802931): ")
        assert _above_the_fold(page, after_sales)
        # 6: "where did it go?" — the how-to chatbot never ran after the name was said; Inspect names nodes.
        why = page.get_by_placeholder(re.compile("^Where did it go?"))
        why.fill("Dana")
        why.press("Enter")
        expect(
            page.get_by_text(
                _shown("LLM (1711528815414): never ran after it was said, so its memory never had to hold it.")
            )
        ).to_be_visible(timeout=WAIT)
        inspect = page.locator(".st-key-ml-side").get_by_role("button", name=re.compile(r"^Inspect turn \d+ \(.+\)$"))
        expect(inspect.first).to_be_visible(timeout=WAIT)
        _settled(page)
        if width >= 1440:
            _labels_whole(page, page.locator(".st-key-ml-side"))
        page.screenshot(path=str(tmp_path / f"template-{width}.png"))
