"""``pull`` against a hostile or mistaken server, a real one on loopback: an endless or huge answer is
read only up to the limit, a base URL carrying ``user:password@`` is refused before anything is sent,
only the Bearer key is ever sent, and a refusal that quotes the key does not carry it on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import core.service.dify_pull as pull_module
from core.io.errors import PullFailedError
from core.redact import MARK
from core.service.dify_pull import pull
from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT

KEY = "app-pull-limits-0123456789abcdef"
CHUNK = b"[" + b" " * 65_535
LIMIT = 1024 * 1024  # the limit these tests set, so an endless answer costs megabytes, not hundreds


class _Server:
    """A server on a free loopback port; ``answer(handler)`` answers each GET; every request's path and
    headers are kept, and ``sent`` counts the body bytes it managed to write."""

    def __init__(self, answer):
        self.requests: list[tuple[str, dict]] = []
        self.sent = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (http.server's name)
                server.requests.append((self.path, dict(self.headers)))
                answer(self, server)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@contextmanager
def serving(answer):
    server = _Server(answer)
    try:
        yield server
    finally:
        server.close()


def _endless(declared: int | None, cap: int = 64 * LIMIT):
    """An answer that never ends (``cap`` bytes at most, so a client that reads on stops one day)."""

    def answer(handler, server):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if declared is not None:
            handler.send_header("Content-Length", str(declared))
        handler.send_header("Connection", "close")
        handler.end_headers()
        try:
            while server.sent < cap:
                handler.wfile.write(CHUNK)
                server.sent += len(CHUNK)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading and hung up

    return answer


def _json(status: int, body: dict):
    def answer(handler, server):
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return answer


@pytest.fixture
def store(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'pull.db'}")
    yield db
    db.dispose()


@pytest.mark.parametrize("declared", [None, 400 * 1024 * 1024], ids=["no length", "says 400 MB"])
def test_an_endless_answer_is_read_only_up_to_the_limit(store, monkeypatch, declared):
    monkeypatch.setattr(pull_module, "MAX_RESPONSE_BYTES", LIMIT)
    with serving(_endless(declared)) as server:
        with pytest.raises(PullFailedError) as refused:
            pull(store, server.base_url, KEY, "u", everything=True)
        sent = server.sent
    assert str(refused.value) == (
        f"{server.base_url}/conversations: the answer is larger than 1 MB, the most a pull "
        "reads; check that --base-url is the app's API base, ending in /v1"
    )
    # What the server got out before the client hung up: the limit and what the sockets' buffers held.
    assert sent < 16 * LIMIT
    assert repo.list_conversations(store) == []


def test_the_real_limit_stops_a_400_mb_answer_in_a_pull_process(tmp_path):
    """The command as a user runs it, against a 400 MB answer: it stops at 20 MB and says so in one line."""
    with serving(_endless(None, cap=400 * 1024 * 1024)) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "core",
                "pull",
                "--base-url",
                server.base_url,
                "--user",
                "u",
                "--all",
                "--db",
                f"sqlite:///{tmp_path / 'pull.db'}",
            ],
            cwd=ROOT,
            env={**os.environ, "DIFY_API_KEY": KEY},
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = server.sent
    assert done.returncode == 1  # a runtime failure: the app's answer, not the command, is at fault
    assert done.stderr.strip() == (
        f"error: {server.base_url}/conversations: the answer is larger than 20 MB, the most "
        "a pull reads; check that --base-url is the app's API base, ending in /v1"
    )
    assert sent < 60 * 1024 * 1024


@pytest.mark.parametrize("credentials", ["dana:hunter22@", "dana@", ":hunter22@"])
def test_a_base_url_carrying_credentials_is_refused_in_one_line_before_anything_is_sent(tmp_path, credentials):
    with serving(_json(200, {"data": [], "has_more": False})) as server:
        url = server.base_url.replace("http://", f"http://{credentials}")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "core",
                "pull",
                "--base-url",
                url,
                "--user",
                "u",
                "--all",
                "--db",
                f"sqlite:///{tmp_path / 'pull.db'}",
            ],
            cwd=ROOT,
            env={**os.environ, "DIFY_API_KEY": KEY},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert server.requests == []
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --base-url must not carry a user name or password (user:password@): give the app's address alone, "
        "e.g. https://api.dify.ai/v1, and its key with --key or DIFY_API_KEY"
    )
    assert "hunter22" not in done.stdout + done.stderr


def test_only_the_bearer_key_is_sent(store):
    with serving(_json(200, {"data": [], "has_more": False})) as server:
        result = pull(store, server.base_url, KEY, "u", everything=True)
    assert result.ids == {}
    assert [(path.split("?")[0], headers.get("Authorization")) for path, headers in server.requests] == [
        ("/v1/conversations", f"Bearer {KEY}")
    ]


def test_a_refusal_that_quotes_the_key_does_not_carry_it_on(store):
    quoting = _json(
        401,
        {
            "code": "unauthorized",
            "status": 401,
            "message": f"Access token {KEY} is invalid.\nSent: Authorization: Bearer {KEY}",
        },
    )
    with serving(quoting) as server:
        with pytest.raises(PullFailedError) as refused:
            pull(store, server.base_url, KEY, "u", everything=True)
    assert str(refused.value) == (
        f"{server.base_url}/conversations: the app refused the key (401: Access token "
        f"{MARK} is invalid. Sent: Authorization: {MARK}); check --key"
    )


def test_an_answer_nested_too_deep_is_one_line(store):
    def deep(handler, server):
        data = b"[" * 100_000 + b"]" * 100_000
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    with serving(deep) as server:
        with pytest.raises(PullFailedError) as refused:
            pull(store, server.base_url, KEY, "u", everything=True)
    assert str(refused.value) == (
        f"{server.base_url}/conversations's answer is nested more than 100 levels deep "
        "(raise MEMLENS_MAX_DEPTH if it really needs to be)"
    )
