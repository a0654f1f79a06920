"""``python -m core proxy`` as it is run: its banner names where it listens; calls through it are recorded by
its recorder process into ``--db``, also when it is stopped right after; bad options are refused in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT


def test_the_proxy_command_records_calls_into_its_database_and_stops_cleanly(tmp_path):
    from openai import OpenAI

    url = f"sqlite:///{tmp_path / 'proxy.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "core", "proxy", "--demo", "--port", "0", "--db", url],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    try:
        banner = proc.stderr.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+)/v1", banner).group(1)
        assert "the demo model answers" in banner and "recording into sqlite:///" in banner
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-unused", max_retries=0)
        for _ in range(100):
            try:
                client.models.list()
                break
            except Exception:
                time.sleep(0.1)
        first = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "I'm Ana."}])
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "user", "content": "I'm Ana."},
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "Who am I?"},
            ],
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the recorder writes what it was given before the proxy ends
        proc.wait(60)
    db = Database(url)
    [info] = repo.list_conversations(db, source="capture")
    assert [t["query"] for t in repo.load_turn_rows(db, info.id)] == ["I'm Ana.", "Who am I?"]
    db.dispose()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--upstream", "api.openai.com"], "is not an http(s) URL"),
        (["--demo", "--upstream", "http://x"], "not allowed with argument"),
        (["--port", "4001"], "one of the arguments --upstream --demo is required"),
        (["--demo", "--timeout", "0"], "--timeout 0 is out of range"),
    ],
)
def test_bad_options_are_refused_in_one_line(args, words):
    p = subprocess.run(
        [sys.executable, "-m", "core", "proxy", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2 and words in p.stderr and p.stderr.count("\n") == 1, p.stderr
