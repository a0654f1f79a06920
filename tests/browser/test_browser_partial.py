"""Inspecting a turn, a switchboard change and a tab switch rerun the Debugger's workspace alone (a fragment):
the server sends nothing of the page outside it, so the sidebar and the title are not redrawn. Sending a
message reruns the whole page, as it must (a new turn changes the conversation picker's count).

Read from the websocket: each script run ends with a ``script_finished`` message that says whether it was
a fragment's run, and every element the run draws comes as a ``delta`` whose path starts with the root
container it is in (the main area or the sidebar)."""

import re

from playwright.sync_api import expect
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.RootContainer_pb2 import RootContainer

from tests.browser import chromium, expect_settled, streamlit_server


class Wire:
    """The app's messages to the page, decoded, since the last :meth:`clear`."""

    def __init__(self, page) -> None:
        self.messages: list[ForwardMsg] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._received))

    def _received(self, payload) -> None:
        if isinstance(payload, bytes):
            msg = ForwardMsg()
            msg.ParseFromString(payload)
            self.messages.append(msg)

    def clear(self) -> None:
        self.messages.clear()

    def runs(self) -> list[str]:
        """How each script run since :meth:`clear` ended (``FINISHED_FRAGMENT_RUN_SUCCESSFULLY``…)."""
        return [
            ForwardMsg.ScriptFinishedStatus.Name(m.script_finished)
            for m in self.messages
            if m.WhichOneof("type") == "script_finished"
        ]

    def roots(self) -> set[str]:
        """The root containers the elements drawn since :meth:`clear` are in."""
        return {
            RootContainer.Name(m.metadata.delta_path[0])
            for m in self.messages
            if m.WhichOneof("type") == "delta" and m.metadata.delta_path
        }

    def element_kinds(self) -> set[str]:
        return {
            m.delta.new_element.WhichOneof("type")
            for m in self.messages
            if m.WhichOneof("type") == "delta" and m.delta.WhichOneof("type") == "new_element"
        }


def _step(page, wire: Wire, action, ready) -> tuple[list[str], set[str], set[str]]:
    """Do ``action``, wait for ``ready`` and the run's end; how the runs ended, where and what they drew.

    The run's end is read from the wire, not the page: a tab's panel shows as soon as it is clicked, before
    the rerun it asks for has even started, so nothing on the page marks that run as still to come."""
    page.wait_for_timeout(300)  # any message of the previous step has come
    wire.clear()
    action()
    expect(ready).to_be_visible()
    for _ in range(900):  # up to 90 s on a loaded machine
        if wire.runs():
            break
        page.wait_for_timeout(100)
    expect_settled(page)
    page.wait_for_timeout(300)  # a second run, if the action caused one, has ended too
    return wire.runs(), wire.roots(), wire.element_kinds()


def test_inspect_a_switchboard_change_and_a_tab_rerun_the_workspace_alone(tmp_path):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(90_000)
        wire = Wire(page)
        page.goto(url)
        expect(page.get_by_test_id("stChatMessage")).to_have_count(16, timeout=90_000)  # the demo's 8 turns
        expect_settled(page)
        side = page.locator(".st-key-ml-side")
        fragment = ["FINISHED_FRAGMENT_RUN_SUCCESSFULLY"]

        inspect = page.get_by_test_id("stButton").filter(has_text="Inspect")
        runs, roots, kinds = _step(
            page, wire, lambda: inspect.nth(inspect.count() - 2).click(), side.get_by_text(re.compile(r"^Turn 7 — "))
        )
        assert runs == fragment and roots == {"MAIN"}, (runs, roots)
        assert "heading" not in kinds  # the page's title is not sent again

        runs, roots, _ = _step(
            page,
            wire,
            lambda: page.get_by_role("tab", name="Variables").click(),
            side.locator(".ml-changes table"),
        )
        assert runs == fragment and roots == {"MAIN"}, (runs, roots)

        window = side.locator('[data-stale="false"][class*="-responder_window_turns"] input')
        runs, roots, _ = _step(
            page,
            wire,
            lambda: page.get_by_role("tab", name="Switchboard").click(),
            window,
        )
        assert runs == fragment and roots == {"MAIN"}, (runs, roots)

        def change() -> None:
            window.fill("6")
            window.press("Enter")

        runs, roots, kinds = _step(page, wire, change, side.get_by_role("button", name="Re-run turn 7 as a branch"))
        assert runs == fragment and roots == {"MAIN"}, (runs, roots)
        assert "heading" not in kinds

        # A message sent: the whole page reruns, the sidebar with it.
        box = page.get_by_test_id("stChatInputTextArea")
        runs, roots, _ = _step(
            page,
            wire,
            lambda: (box.fill("Do you know my name?"), box.press("Enter")),
            page.get_by_test_id("stChatMessage").nth(17),
        )
        assert "FINISHED_SUCCESSFULLY" in runs and "SIDEBAR" in roots, (runs, roots)
