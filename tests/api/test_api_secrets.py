"""Secrets never leave: a gateway that answers 401 quoting the key it refused (and the Authorization header
it was sent) hands the key to no API answer, stream, stored turn, export, report or log (core/redact.py).

The gateway is a local HTTP server standing in for OpenAI's; the Service API runs as ``python -m core
serve`` with the key in its environment, as a user runs it, and its LLM node calls the gateway through
litellm, the real client path.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from benchmarks.api_load import ServerProcess, parse_sse
from core.llm.client import LiteLLMClient
from core.llm.errors import LLMError
from core.redact import MARK, RedactingFilter, hold, redact
from core.service.sessions import ConversationService
from core.store import keys as app_keys
from core.store.db import Database
from tests.conftest import ROOT

# Not shaped like any provider's key: only knowing it as the key MemLens holds can take it out.
KEY = f"gw-{uuid.uuid4().hex}{uuid.uuid4().hex}"

GATEWAY_FLOW = """\
format: memlens-flow
version: 1
name: through-a-gateway
nodes:
  - {id: start, type: start, title: Start}
  - id: llm
    type: llm
    title: LLM
    model: openai/gpt-4o-mini
    prompt_template:
      - {role: system, text: You are a helpful assistant.}
    memory: {window: 10}
  - {id: answer, type: answer, title: Answer, answer: "{{#llm.text#}}"}
edges:
  - [start, llm]
  - [llm, answer]
"""


class _EchoingGateway(BaseHTTPRequestHandler):
    """Refuses every call with OpenAI's 401 body, quoting the key and the Authorization header it got."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        body = json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {key}. The request carried Authorization: {auth}.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingGateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    yield
    server.shutdown()
    server.server_close()


def _leaks(text: str | bytes) -> bool:
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return KEY in text or KEY[:24] in text  # a cut-off key is still a leak


def test_a_gateway_that_echoes_the_key_leaks_it_nowhere(tmp_path, gateway):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    flow_file = tmp_path / "gateway.yml"
    flow_file.write_text(GATEWAY_FLOW, encoding="utf-8")
    flow = ConversationService(db, None).import_flow(flow_file).flow_id
    app_key = app_keys.create_key(db, flow)[1]
    db.dispose()

    with (
        ServerProcess(url, demo=False) as server,
        httpx.Client(base_url=server.base_url, timeout=120, headers={"Authorization": f"Bearer {app_key}"}) as http,
    ):
        blocking = http.post(
            "/chat-messages", json={"query": "hi", "user": "u", "inputs": {}, "response_mode": "blocking"}
        )
        streamed = http.post(
            "/chat-messages", json={"query": "hi again", "user": "u", "inputs": {}, "response_mode": "streaming"}
        )
        server.stop()
    assert not _leaks(blocking.text)
    assert blocking.status_code == 400
    assert "Incorrect API key provided" in blocking.json()["message"] and MARK in blocking.json()["message"]
    assert not _leaks(streamed.text)
    events = parse_sse(streamed.text)
    error = next(e for e in events if e["event"] == "error")
    assert "Incorrect API key provided" in error["message"] and MARK in error["message"]
    assert not _leaks("".join(server.output))  # the server's log

    stored = tmp_path / "memlens.db"
    assert not any(_leaks(p.read_bytes()) for p in tmp_path.glob("memlens.db*") if p.is_file())
    db = Database(url)
    from core.store import repo

    conversations = repo.list_conversations(db)
    assert len(conversations) == 2
    rows = [row for c in conversations for row in repo.load_turn_rows(db, c.id, with_node_runs=True)]
    assert all(MARK in row["error"] and "Incorrect API key provided" in row["error"] for row in rows)
    assert all(MARK in run["error"] for row in rows for run in row["node_runs"] if run["type"] == "llm")
    db.dispose()

    for c in conversations:
        export = subprocess.run(
            [sys.executable, "-m", "core", "export", c.id, "--db", url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert not _leaks(export.stdout + export.stderr)
        assert export.returncode == 0 and "Incorrect API key provided" in export.stdout, export.stderr
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "core",
                "report",
                "--conversation",
                c.id,
                "--db",
                url,
                "-o",
                str(tmp_path / "r.html"),
                "--bundle",
                str(tmp_path / "r.json"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert report.returncode == 0, report.stderr
        bundle = (tmp_path / "r.json").read_text(encoding="utf-8")
        assert not _leaks(bundle) and not _leaks((tmp_path / "r.html").read_bytes())
        assert "Incorrect API key provided" in bundle
    assert stored.exists()


def test_the_store_redacts_an_error_whatever_wrote_it(tmp_path, monkeypatch):
    """The storage boundary: a turn's and a node run's error are stored redacted even when they did not
    come through the model client (an import, a client of another kind)."""
    from core.store import repo

    monkeypatch.setenv("SOME_GATEWAY_TOKEN", KEY)
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    conversation = repo.create_conversation(db, flow_version_id=None).id
    turn = repo.save_turn(
        db,
        conversation,
        {
            "query": "hi",
            "status": "failed",
            "error": f"refused {KEY}",
            "node_runs": [
                {"node_id": "llm", "type": "llm", "status": "failed", "error": f"Authorization: Bearer {KEY}"}
            ],
        },
    )
    row = repo.load_turn_rows(db, conversation, with_node_runs=True)[0]
    assert (row["id"], row["error"], row["node_runs"][0]["error"]) == (
        turn,
        f"refused {MARK}",
        f"Authorization: {MARK}",
    )
    db.dispose()
    assert not any(_leaks(p.read_bytes()) for p in tmp_path.glob("memlens.db*") if p.is_file())


def test_the_model_client_redacts_the_providers_words_before_they_are_shortened(gateway):
    with pytest.raises(LLMError) as e:
        LiteLLMClient(fallback_to_demo=False).complete("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])
    assert "authentication failed" in str(e.value) and MARK in str(e.value) and not _leaks(str(e.value))


def test_an_error_raised_by_any_model_client_is_redacted_when_it_is_made(monkeypatch):
    monkeypatch.setenv("SOME_GATEWAY_TOKEN", KEY)
    assert str(LLMError(f"refused {KEY}")) == f"refused {MARK}"


def test_a_key_given_on_the_command_line_is_redacted_once_held():
    given = f"dify-{uuid.uuid4().hex}"
    assert redact(f"app-key {given} refused") == f"app-key {given} refused"
    hold(given)
    assert redact(f"app-key {given} refused") == f"app-key {MARK} refused"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Incorrect API key provided: sk-proj-Ab12Cd34Ef56_gh-78.", f"Incorrect API key provided: sk-{MARK}."),
        ('{"Authorization": "Bearer abc.def-1234567"}', f'{{"Authorization": "{MARK}"}}'),
        ("authorization: Basic dXNlcjpwYXNzd29yZA==", f"authorization: {MARK}"),
        ("{'x-api-key': 'k-1234-5678'}", f"{{'x-api-key': '{MARK}'}}"),
        ("GET /v1/models?api_key=AIzaSy1234567890&alt=json", f"GET /v1/models?api_key={MARK}&alt=json"),
        (
            "POST https://generativelanguage.googleapis.com/v1beta/models/g:generate?key=AIzaSy12345678 failed",
            f"POST https://generativelanguage.googleapis.com/v1beta/models/g:generate?key={MARK} failed",
        ),
        ("the proxy said: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", f"the proxy said: Bearer {MARK}"),
        ("cannot reach https://me:hunter2222@gateway.example/v1", f"cannot reach https://me:{MARK}@gateway.example/v1"),
        # Words are not keys: nothing changes.
        (
            "a risk-averse bearer token expired; see https://platform.openai.com/account/api-keys.",
            "a risk-averse bearer token expired; see https://platform.openai.com/account/api-keys.",
        ),
    ],
)
def test_what_is_shaped_like_a_key_is_redacted_and_nothing_else(text, expected):
    assert redact(text) == expected


def test_a_log_record_and_its_traceback_are_redacted_before_any_handler_formats_them(monkeypatch, caplog):
    monkeypatch.setenv("SOME_GATEWAY_TOKEN", KEY)
    logger = logging.getLogger("memlens.test-redaction")
    logger.addFilter(RedactingFilter())
    try:
        raise RuntimeError(f"upstream said {KEY}")
    except RuntimeError:
        with caplog.at_level(logging.ERROR, logger=logger.name):
            logger.error("the call with %s failed", KEY, exc_info=True)
    assert caplog.records and not _leaks(caplog.text) and caplog.text.count(MARK) == 2
