"""Real-browser helpers: the Streamlit server as a subprocess and Debian's Chromium through Playwright."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import ROOT

CHROMIUM = "/usr/bin/chromium"
#: How long an ``expect`` waits for what a person would see (Playwright's own default is 5 s): a turn on
#: the demo model on a machine busy with other tests can take longer than that to be drawn.
EXPECT_TIMEOUT_MS = 60_000
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(env: dict, log: Path, *, config_file_only: bool = False):
    """Start the app as ``memlens ui`` does (:mod:`ui.serve`) on a free loopback port; yield its base URL.

    ``config_file_only``: give only the port, as a user would, so ``.streamlit/config.toml``
    decides the address, the file watcher and usage statistics.
    """
    port = free_port()
    safe = (
        []
        if config_file_only
        else [
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ]
    )
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ui.serve", "app.py", "--server.port", str(port), *safe],
            cwd=ROOT,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.time() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{log.read_text()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"streamlit did not become healthy:\n{log.read_text()}") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def expect_settled(page, timeout: int = 90_000) -> None:
    """Wait until the app's script run has ended: no element is still marked stale.

    Until a rerun ends, Streamlit keeps the previous run's elements beside the new ones (marked stale),
    so a check made in that moment can find the previous turn's chart as well as the new turn's.
    """
    from playwright.sync_api import expect

    expect(page.locator('[data-stale="true"]')).to_have_count(0, timeout=timeout)


@contextmanager
def chromium():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    if not os.path.exists(CHROMIUM):
        raise RuntimeError("Chromium is not installed: run ./scripts/setup.sh --test (it installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_demo(browser, url: str, viewport: dict):
    """A new page on the Debugger at ``url``, once the demo conversation's 8 turns (16 messages) are drawn."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(90_000)  # a shared machine can be slow; every wait is for an element
    page.goto(url)
    expect(page.get_by_test_id("stChatMessage")).to_have_count(16, timeout=90_000)
    return page
