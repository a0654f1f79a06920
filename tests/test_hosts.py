"""DNS rebinding: every MemLens server answers only requests whose Host is this machine or a host the
operator allowed (core/hosts.py). The rule itself, then the real servers — the Streamlit app started
the README's way (``streamlit run app.py``) and the Service API (``python -m core serve``) — on a free
loopback port, reached with plain HTTP and a real websocket carrying a foreign Host."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from benchmarks.api_load import ServerProcess
from core.hosts import ALLOWED_HOSTS_ENV, HostsError, allowed_hosts, host_allowed, host_name
from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store.db import Database
from tests.browser import streamlit_server
from tests.conftest import ROOT

SUPPORT_BOT = ROOT / "sample_data" / "flows" / "support-bot.yml"
FOREIGN = "evil.example"
SHARED = "memlens.test"  # the host the tests' operator allows
CANARY = "the rebinding canary 7f3a9c"


# -- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8501",
        "LocalHost.:8501",
        "127.0.0.1",
        "127.0.0.1:8501",
        "127.45.0.9:80",
        "[::1]",
        "[::1]:5001",
        "[::ffff:127.0.0.1]:8501",
    ],
)
def test_a_loopback_name_or_address_is_answered_whatever_its_port(host):
    assert host_allowed(host, allowed=())


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8501",
        "localhost.evil.example:8501",
        "127.0.0.1.evil.example",
        "10.0.0.5:8501",
        "0.0.0.0:8501",
        "[fe80::1]:80",
        "",
        None,
        "::1",
        "127.0.0.1:port",
        "127.0.0.1@evil.example",
        "evil.example/127.0.0.1",
        "[::1",
        "local host",
    ],
)
def test_any_other_host_and_anything_that_names_no_host_is_refused(host):
    assert not host_allowed(host, allowed=())


def test_a_host_the_operator_allowed_is_answered_on_any_port_and_only_it():
    allowed = allowed_hosts({ALLOWED_HOSTS_ENV: "MemLens.Test, 10.0.0.5 [fe80::2]"})
    assert allowed == (SHARED, "10.0.0.5", "fe80::2")
    for host in ("memlens.test", "MEMLENS.TEST:8501", "10.0.0.5:5001", "[fe80::2]:8501"):
        assert host_allowed(host, allowed)
    for host in ("sub.memlens.test", "memlens.test.evil.example", "10.0.0.6", FOREIGN):
        assert not host_allowed(host, allowed)
    assert host_name("[FE80::0:2]:8501") == "fe80::2"


@pytest.mark.parametrize("entry", ["http://memlens.test", "memlens.test:8501", "memlens.test/app", "user@memlens.test"])
def test_an_allowed_host_that_is_not_a_bare_name_or_address_is_refused_in_one_line(entry):
    with pytest.raises(HostsError) as e:
        allowed_hosts({ALLOWED_HOSTS_ENV: f"ok.example,{entry}"})
    assert "\n" not in str(e.value) and repr(entry) in str(e.value) and "no scheme, port or path" in str(e.value)


# -- the Streamlit app ---------------------------------------------------------------------------------


def _seeded_store(tmp_path) -> tuple[str, str]:
    """A store with one conversation that says CANARY; its URL and the conversation's id."""
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    service = ConversationService(Database(url), DemoClient())
    flow = service.import_flow(SUPPORT_BOT).flow_id
    conversation = service.start(flow, name="private").id
    service.send(conversation, f"Please remember {CANARY}.")
    return url, conversation


def _page_data(port: int, host: str, query: str, wait_for: bytes) -> bytes:
    """What the app's websocket sends a session opened with ``Host: host`` (and the matching Origin, as a
    page served from that host sends): the script run's messages, until ``wait_for`` is among them."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    sock = socket.create_connection(("127.0.0.1", port))
    with connect(
        f"ws://{host}/_stcore/stream",
        sock=sock,
        origin=f"http://{host}",
        subprotocols=["streamlit"],
        max_size=None,
        open_timeout=30,
    ) as ws:
        rerun = BackMsg()
        rerun.rerun_script.query_string = query
        rerun.rerun_script.page_script_hash = ""
        ws.send(rerun.SerializeToString())
        data, deadline = b"", time.monotonic() + 90
        while wait_for not in data and time.monotonic() < deadline:
            try:
                data += ws.recv(timeout=5)
            except TimeoutError:
                pass
        return data


def test_the_app_answers_no_request_or_websocket_for_a_foreign_host(tmp_path):
    url, conversation = _seeded_store(tmp_path)
    env = {"MEMLENS_DATABASE_URL": url, ALLOWED_HOSTS_ENV: SHARED}
    with streamlit_server(env, tmp_path / "streamlit.log", config_file_only=True) as base:
        port = int(base.rsplit(":", 1)[1])
        with httpx.Client(base_url=base, timeout=30) as http:
            for path in ("/", "/_stcore/health", "/_stcore/host-config", "/debugger"):
                refused = http.get(path, headers={"Host": f"{FOREIGN}:{port}"})
                assert refused.status_code == 403, path
                assert refused.text.count("\n") == 0 and f"'{FOREIGN}:{port}'" in refused.text
                assert ALLOWED_HOSTS_ENV in refused.text and "docs/security.md" in refused.text
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{SHARED}:{port}"):
                assert http.get("/_stcore/health", headers={"Host": host}).text == "ok", host

        with pytest.raises(InvalidStatus) as refused_socket:
            _page_data(port, f"{FOREIGN}:{port}", f"conversation={conversation}", CANARY.encode())
        assert refused_socket.value.response.status_code == 403
        assert f"'{FOREIGN}:{port}'".encode() in bytes(refused_socket.value.response.body)

        # The same session on this machine's address, or on the allowed host, reads the conversation.
        for host in (f"127.0.0.1:{port}", f"{SHARED}:{port}"):
            assert CANARY.encode() in _page_data(port, host, f"conversation={conversation}", CANARY.encode()), host


def test_the_app_refuses_to_start_on_a_bad_allowed_host_in_one_line(tmp_path):
    env = {
        **os.environ,
        "MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}",
        ALLOWED_HOSTS_ENV: "http://memlens.test:8501",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {ALLOWED_HOSTS_ENV}: 'http://memlens.test:8501' is not a host name or address; list bare names or "
        f"addresses, e.g. {ALLOWED_HOSTS_ENV}=memlens.example.com,10.0.0.5 (no scheme, port or path)"
    )
    assert "Traceback" not in done.stderr


# -- the Service API -----------------------------------------------------------------------------------


def test_the_service_api_answers_no_request_for_a_foreign_host(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    flow = ConversationService(db, DemoClient()).import_flow(SUPPORT_BOT).flow_id
    key = app_keys.create_key(db, flow)[1]
    db.dispose()
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, SHARED)
    with ServerProcess(url) as server, httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        base = f"http://127.0.0.1:{server.port}"
        chat = {"query": CANARY, "user": "u", "inputs": {}, "response_mode": "blocking"}
        for method, path, body in (
            ("GET", "/v1/parameters", None),
            ("POST", "/v1/chat-messages", chat),
            ("GET", "/v1/conversations?user=u", None),
            ("GET", "/openapi.json", None),
        ):
            refused = http.request(method, base + path, json=body, headers={"Host": f"{FOREIGN}:{server.port}"})
            assert refused.status_code == 403, path
            assert refused.json()["code"] == "forbidden" and refused.json()["status"] == 403
            assert "\n" not in refused.json()["message"] and f"'{FOREIGN}:{server.port}'" in refused.json()["message"]
        assert http.get(base + "/v1/conversations", params={"user": "u"}).json()["data"] == []  # nothing ran
        for host in (f"localhost:{server.port}", f"{SHARED}:{server.port}"):
            answered = http.post(base + "/v1/chat-messages", json=chat, headers={"Host": host})
            assert answered.status_code == 200, answered.text
        assert len(http.get(base + "/v1/conversations", params={"user": "u"}).json()["data"]) == 2


def test_serve_refuses_a_bad_allowed_host_in_one_line_before_it_listens(tmp_path):
    env = {**os.environ, ALLOWED_HOSTS_ENV: "memlens.test:5001"}
    done = subprocess.run(
        [sys.executable, "-m", "core", "serve", "--port", "0", "--db", f"sqlite:///{tmp_path / 'memlens.db'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {ALLOWED_HOSTS_ENV}: 'memlens.test:5001' is not a host name or address; list bare names or "
        f"addresses, e.g. {ALLOWED_HOSTS_ENV}=memlens.example.com,10.0.0.5 (no scheme, port or path)"
    )
