"""The Service API refuses oversized and over-nested requests with Dify's error body, never a 500."""

import pytest

from core.limits import MAX_QUERY_CHARS, MAX_REQUEST_BYTES
from core.store import repo
from tests.api.test_api import Api, _error


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    a = Api(tmp_path_factory.mktemp("api-limits"))
    yield a
    a.close()


def _conversations(api):
    return len(repo.list_conversations(api.db, source="api"))


def _nested(levels):
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def test_a_body_over_the_request_limit_is_413_in_difys_shape_and_runs_nothing(api):
    before = _conversations(api)
    body = {"inputs": {}, "query": "x" * (MAX_REQUEST_BYTES + 10), "user": "big", "response_mode": "blocking"}
    r = api.request("POST", "/chat-messages", json=body)
    assert set(_error(r, 413, "request_entity_too_large")) == {"code", "message", "status"}
    assert _conversations(api) == before


def test_a_chunked_body_without_a_length_is_cut_off_at_the_limit(api):
    chunk = b" " * 65536

    def body():
        yield b'{"inputs": {}, "user": "big", "query": "'
        for _ in range(MAX_REQUEST_BYTES // len(chunk) + 2):
            yield chunk
        yield b'"}'

    r = api.request("POST", "/chat-messages", content=body(), headers={"Content-Type": "application/json"})
    _error(r, 413, "request_entity_too_large")


def test_a_query_over_the_length_limit_is_an_invalid_param(api):
    before = _conversations(api)
    r = api.chat("q" * (MAX_QUERY_CHARS + 1))
    body = _error(r, 400, "invalid_param")
    assert body["params"] == "query" and f"{MAX_QUERY_CHARS:,}" in body["message"]
    assert _conversations(api) == before


@pytest.mark.parametrize("levels", [150, 600, 950, 5000])
def test_inputs_nested_deeper_than_the_limit_are_a_400_not_a_500(api, levels):
    text = (
        '{"inputs": {"deep": '
        + "[" * levels
        + "]" * levels
        + '}, "query": "hello", "user": "deep", "response_mode": "blocking"}'
    )
    r = api.request("POST", "/chat-messages", content=text, headers={"Content-Type": "application/json"})
    body = _error(r, 400, "invalid_param")
    assert "nested more than 100 levels" in body["message"], body


def test_a_variable_value_nested_deeper_than_the_limit_is_refused_and_the_value_kept(api):
    conversation_id, _ = api.new_conversation(user="vars")
    variables = api.request("GET", f"/conversations/{conversation_id}/variables", params={"user": "vars"}).json()
    target = next(v for v in variables["data"] if v["value_type"] in ("object", "array[object]", "array[string]"))
    r = api.request(
        "PUT",
        f"/conversations/{conversation_id}/variables/{target['id']}",
        json={"value": {"a": _nested(300)} if target["value_type"] == "object" else _nested(300), "user": "vars"},
    )
    body = _error(r, 400, "invalid_param")
    assert "nested more than" in body["message"]
    again = api.request("GET", f"/conversations/{conversation_id}/variables", params={"user": "vars"}).json()
    assert next(v for v in again["data"] if v["id"] == target["id"])["value"] == target["value"]


def test_an_unexpected_failure_is_a_500_in_difys_shape_with_the_detail_only_in_the_log(api, monkeypatch, caplog):
    from core.api.routes import conversations as api_module

    def boom(*_args, **_kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(api_module, "list_conversations", boom)
    r = api.request("GET", "/conversations", params={"user": "x"})
    body = _error(r, 500, "internal_server_error")
    assert "secret internal detail" not in r.text and "Traceback" not in r.text
    assert set(body) == {"code", "message", "status"}
