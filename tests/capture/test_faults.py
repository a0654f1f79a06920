"""What can go wrong between a bot, the proxy and its upstream, and what is left: a Host that is not this
machine and a body over the limit are refused before anything is forwarded; an upstream error comes back
as it was sent; a timeout, a refused connection and a client that leaves mid-stream each leave a clear
record of what happened and a whole conversation, never half of one."""

from __future__ import annotations

import json
import socket

import httpx

from core.store import repo
from tests.capture.conftest import KEY, running_proxy
from tests.capture.servers import serving
from tests.capture.stub_upstream import StubUpstream

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello?"}]}


def captured(db) -> list[dict]:
    out = []
    for info in repo.list_conversations(db, source="capture"):
        for turn in repo.load_turn_rows(db, info.id, with_node_runs=True):
            out.append(turn)
    return out


def test_a_request_for_another_host_is_refused_before_it_is_forwarded(proxy, stub, capture_db):
    url, recorder = proxy
    r = httpx.post(f"{url}/chat/completions", json=CHAT, headers={"Host": "evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["error"]["message"]
    assert "MEMLENS_ALLOWED_HOSTS" in r.json()["error"]["message"]
    assert stub.requests == []
    assert recorder.wait() and captured(capture_db) == []


def test_an_allowed_host_is_answered(capture_db, stub):
    with running_proxy(capture_db, f"{stub.url}/v1", allowed_hosts=["host.docker.internal"]) as (url, recorder):
        r = httpx.post(f"{url}/chat/completions", json=CHAT, headers={"Host": "host.docker.internal:4000"})
    assert r.status_code == 200 and len(stub.requests) == 1


def test_a_body_over_the_limit_is_refused_with_413_and_never_forwarded(capture_db, stub):
    with running_proxy(capture_db, f"{stub.url}/v1", max_body_bytes=1000) as (url, recorder):
        big = {**CHAT, "messages": [{"role": "user", "content": "x" * 2000}]}
        declared = httpx.post(f"{url}/chat/completions", json=big)

        def chunks():  # no Content-Length: refused as the chunks pass the limit
            yield json.dumps(big).encode()[:600]
            yield json.dumps(big).encode()[600:]

        streamed = httpx.post(f"{url}/chat/completions", content=chunks(), headers={"content-type": "application/json"})
        assert recorder.wait()
    assert (declared.status_code, streamed.status_code) == (413, 413)
    assert "MEMLENS_MAX_PROXY_MB" in declared.json()["error"]["message"]
    assert stub.requests == [] and captured(capture_db) == []


def test_an_upstream_error_comes_back_as_sent_and_is_recorded_as_a_failed_call(proxy, stub, capture_db):
    url, recorder = proxy
    r = httpx.post(f"{url}/chat/completions", json=CHAT, headers={"x-stub-status": "429", "authorization": KEY})
    assert r.status_code == 429 and r.json() == {
        "error": {"message": "stub refused with 429", "type": "stub_error", "code": 429}
    }
    assert recorder.wait()
    [turn] = captured(capture_db)
    [run] = turn["node_runs"]
    assert turn["status"] == "failed" and run["status"] == "failed" and run["call"]["status_code"] == 429
    assert run["error"] == "upstream answered 429: stub refused with 429"


def test_an_upstream_that_does_not_answer_in_time_leaves_a_failed_call(capture_db):
    hanging = StubUpstream(hang=True)
    with serving(hanging) as upstream, running_proxy(capture_db, f"{upstream}/v1", timeout=0.5) as (url, recorder):
        r = httpx.post(f"{url}/chat/completions", json=CHAT, timeout=30)
        assert recorder.wait()
    assert r.status_code == 504 and "did not answer within 0.5 s" in r.json()["error"]["message"]
    [turn] = captured(capture_db)
    assert turn["status"] == "failed" and turn["node_runs"][0]["call"]["outcome"] == "upstream_timeout"
    assert turn["query"] == "Hello?" and turn["answer"] == ""


def test_a_refused_upstream_leaves_a_failed_call(capture_db):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    with running_proxy(capture_db, f"http://127.0.0.1:{port}/v1") as (url, recorder):
        r = httpx.post(
            f"{url}/messages",
            json={"model": "claude", "max_tokens": 9, "messages": [{"role": "user", "content": "Hello?"}]},
        )
        assert recorder.wait()
    assert r.status_code == 502 and r.json()["type"] == "error"  # in Anthropic's own shape on its endpoint
    assert "could not be reached" in r.json()["error"]["message"]
    [turn] = captured(capture_db)
    assert turn["status"] == "failed" and turn["node_runs"][0]["call"]["outcome"] == "upstream_refused"
    assert any("failed" in line for line in recorder.lines)


def test_a_client_that_leaves_mid_stream_leaves_a_stopped_call_with_the_reply_so_far(capture_db):
    slow = StubUpstream(chunk_delay=0.3, chunks=20)
    with serving(slow) as upstream, running_proxy(capture_db, f"{upstream}/v1") as (url, recorder):
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", f"{url}/chat/completions", json={**CHAT, "stream": True}) as r:
                first = next(r.iter_raw())
                assert first.startswith(b"data: ")
        assert recorder.wait()
    [turn] = captured(capture_db)
    [run] = turn["node_runs"]
    assert run["status"] == "stopped" and run["call"]["outcome"] == "client_disconnected"
    assert "disconnected" in run["error"] and turn["status"] == "stopped"
    assert run["reply"] is not None and len(run["reply"]) < len("stub answer to: Hello? (saw 1 messages)")


def test_a_body_that_is_not_a_call_is_forwarded_and_not_recorded(proxy, stub, capture_db):
    url, recorder = proxy
    r = httpx.post(f"{url}/chat/completions", content=b"not json", headers={"content-type": "text/plain"})
    assert r.status_code == 400 and r.json()["error"]["message"] == "the body is not JSON"  # the upstream's answer
    assert len(stub.requests) == 1 and stub.requests[0]["body"] == b"not json"
    assert recorder.wait() and captured(capture_db) == []
    assert any("not JSON" in line for line in recorder.lines)


def test_other_paths_pass_through_unrecorded(proxy, stub, capture_db):
    url, recorder = proxy
    r = httpx.get(f"{url}/models", headers={"authorization": f"Bearer {KEY}"})
    assert r.json()["data"][0]["id"] == "stub-model"
    assert stub.requests[0]["path"] == "/v1/models" and stub.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert recorder.wait() and captured(capture_db) == []


def test_a_connection_the_upstream_closed_while_idle_is_replaced_and_the_call_goes_through(capture_db):
    import time

    quick = StubUpstream()
    with serving(quick, keep_alive=0.2) as upstream, running_proxy(capture_db, f"{upstream}/v1") as (url, recorder):
        first = httpx.post(f"{url}/chat/completions", json=CHAT)
        time.sleep(0.6)  # the upstream has closed the kept connection by now
        second = httpx.post(f"{url}/chat/completions", json=CHAT)
        assert recorder.wait()
    assert (first.status_code, second.status_code) == (200, 200) and len(quick.requests) == 2


def test_behind_an_http_proxy_setting_calls_go_through_httpx_and_are_recorded_alike(capture_db, stub, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # never used: the upstream is in NO_PROXY
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with running_proxy(capture_db, f"{stub.url}/v1") as (url, recorder):
        with httpx.stream("POST", f"{url}/chat/completions", json={**CHAT, "stream": True}) as r:
            body = b"".join(r.iter_raw())
        assert recorder.wait()
    assert body.endswith(b"data: [DONE]\n\n")
    [turn] = captured(capture_db)
    assert turn["node_runs"][0]["reply"] == "stub answer to: Hello? (saw 1 messages)"


def test_an_upstream_that_quotes_the_key_in_its_refusal_is_recorded_without_it(capture_db):
    class Quoting(StubUpstream):
        async def __call__(self, scope, receive, send):
            if scope["type"] != "http":
                return await super().__call__(scope, receive, send)
            await receive()
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}).encode()
            await send(
                {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})

    with serving(Quoting()) as upstream, running_proxy(capture_db, f"{upstream}/v1") as (url, recorder):
        r = httpx.post(f"{url}/chat/completions", json=CHAT, headers={"authorization": f"Bearer {KEY}"})
        assert recorder.wait()
    assert r.status_code == 401 and KEY in r.text  # the answer comes back as the upstream sent it
    data = capture_db.path.read_bytes()
    wal = capture_db.path.with_name(capture_db.path.name + "-wal")
    assert KEY.encode() not in data + (wal.read_bytes() if wal.exists() else b"")
    [turn] = captured(capture_db)
    assert "[redacted]" in turn["node_runs"][0]["error"] and turn["node_runs"][0]["status"] == "failed"
