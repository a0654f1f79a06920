"""Takes the README's screenshot, docs/debugger.png: the Debugger on the demo conversation at 1440×900
in Chromium, turn 6 ("What's my name?") inspected, so the receipt shows what the Responder received
and the transcript's markers show turn 1 dropped. Run from a clone set up with
``./scripts/setup.sh --test`` (Chromium and Playwright):

    .venv/bin/python scripts/screenshot.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect  # noqa: E402

from tests.browser import chromium, expect_settled, open_demo, streamlit_server  # noqa: E402

TURN_6_ANSWER = 11  # the demo's messages: a query and an answer per turn


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp / 'memlens.db'}"}
        with streamlit_server(env, tmp / "streamlit.log") as url, chromium() as browser:
            page = open_demo(browser, url, {"width": 1440, "height": 900})
            messages = page.get_by_test_id("stChatMessage")
            answer = messages.nth(TURN_6_ANSWER)
            answer.scroll_into_view_if_needed()
            answer.get_by_role("button", name="Inspect").click()
            expect(answer).to_contain_text("inspected", timeout=90_000)
            expect_settled(page)
            page.mouse.move(0, 0)  # no hover state in the picture
            page.wait_for_timeout(1500)
            page.screenshot(path=str(ROOT / "docs" / "debugger.png"))
    print(ROOT / "docs" / "debugger.png")


if __name__ == "__main__":
    main()
