"""Real clients, unchanged, through the capture proxy: the official ``openai`` client (chat completions and
the Responses API, streaming and not), litellm and langchain-openai's ChatOpenAI. Each call reaches the
upstream exactly as the client sent it, with the client's own key; each answer reaches the client as the
upstream sent it; each call is recorded exactly — the request as sent, the reply (a stream put together),
the usage — threaded into one conversation, and the key is nowhere in the store."""

from __future__ import annotations

import json

import pytest

from core.store import repo
from tests.capture.conftest import KEY

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def stored(db) -> list[dict]:
    """Every captured conversation: its info and its turns with their node runs."""
    out = []
    for info in repo.list_conversations(db, source="capture"):
        out.append({"info": info, "turns": repo.load_turn_rows(db, info.id, with_node_runs=True)})
    return out


def runs_of(conversation: dict) -> list[dict]:
    return sorted((run for t in conversation["turns"] for run in t["node_runs"]), key=lambda r: r["started_at"])


def assert_no_key(db) -> None:
    data = db.path.read_bytes()
    wal = db.path.with_name(db.path.name + "-wal")
    if wal.exists():
        data += wal.read_bytes()
    assert KEY.encode() not in data


def test_the_openai_client_chat_completions_pass_through_and_are_recorded_exactly(proxy, stub, capture_db):
    from openai import OpenAI

    url, recorder = proxy
    client = OpenAI(base_url=url, api_key=KEY, max_retries=0)
    history = [{"role": "system", "content": "You keep notes."}]
    received = []
    for k, question in enumerate(["I'm Dana.", "My order is 4411.", "What's my order?"]):
        history.append({"role": "user", "content": question})
        if k == 1:  # streamed, with the usage chunk
            stream = client.chat.completions.create(
                model="gpt-4o-mini", messages=history, stream=True, stream_options={"include_usage": True}
            )
            answer = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        else:
            answer = (
                client.chat.completions.create(model="gpt-4o-mini", messages=history, temperature=0.2)
                .choices[0]
                .message.content
            )
        received.append(answer)
        history.append({"role": "assistant", "content": answer})
    assert recorder.wait()
    # The upstream got each request as the client sent it, with the client's key.
    assert [r["headers"]["authorization"] for r in stub.requests] == [f"Bearer {KEY}"] * 3
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    assert [json.loads(r["body"]) for r in stub.requests] == [run["call"]["request"] for run in runs]
    assert [run["reply"] for run in runs] == received
    assert runs[1]["call"]["streamed"] and runs[1]["usage"]["completion_tokens"] > 0
    assert runs[0]["call"]["request"]["temperature"] == 0.2
    # One conversation of three turns, each call a node run of the same node; what the payload held is kept.
    assert [t["query"] for t in conversation["turns"]] == ["I'm Dana.", "My order is 4411.", "What's my order?"]
    assert {run["node_id"] for run in runs} == {"node-1"} and [run["emulated"] for run in runs] == [False] * 3
    assert runs[2]["kept"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert [row["origin"] for row in runs[2]["prompt"]] == ["system"] + ["memory history"] * 4 + ["current query"]
    assert "authorization" not in runs[0]["call"]["request_headers"]
    assert_no_key(capture_db)


def test_the_openai_client_responses_api_streaming_and_not(proxy, capture_db):
    from openai import OpenAI

    url, recorder = proxy
    client = OpenAI(base_url=url, api_key=KEY, max_retries=0)
    first = client.responses.create(model="gpt-4o-mini", instructions="Be brief.", input="Hello, I'm Ana.")
    with client.responses.create(
        model="gpt-4o-mini",
        instructions="Be brief.",
        stream=True,
        input=[
            {"role": "user", "content": "Hello, I'm Ana."},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "Who am I?"},
        ],
    ) as events:
        streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert recorder.wait()
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    assert [run["reply"] for run in runs] == [first.output_text, streamed]
    assert runs[1]["kept"] == [[0, 0], [0, 1]] and runs[1]["prompt"][0] == {
        "role": "system",
        "origin": "system",
        "tokens": runs[1]["prompt"][0]["tokens"],
        "content": "Be brief.",
    }
    assert runs[0]["usage"]["prompt_tokens"] == 10 and runs[1]["call"]["api"] == "responses"
    assert_no_key(capture_db)


def test_litellm_through_the_proxy_streaming_and_not(proxy, stub, capture_db):
    import litellm

    url, recorder = proxy
    messages = [{"role": "user", "content": "Ping?"}]
    plain = litellm.completion(model="openai/gpt-4o-mini", api_base=url, api_key=KEY, messages=messages, num_retries=0)
    messages += [
        {"role": "assistant", "content": plain.choices[0].message.content},
        {"role": "user", "content": "Again?"},
    ]
    chunks = litellm.completion(
        model="openai/gpt-4o-mini", api_base=url, api_key=KEY, messages=messages, stream=True, num_retries=0
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert recorder.wait()
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    assert [run["reply"] for run in runs] == [plain.choices[0].message.content, streamed]
    assert [json.loads(r["body"])["messages"] for r in stub.requests] == [
        r["call"]["request"]["messages"] for r in runs
    ]
    assert runs[1]["kept"] == [[0, 0], [0, 1]]
    assert_no_key(capture_db)


def test_langchain_chat_openai_through_the_proxy(proxy, capture_db):
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    url, recorder = proxy
    model = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key=KEY, max_retries=0)
    history = [SystemMessage("You answer briefly."), HumanMessage("Hi, I'm Lee.")]
    first = model.invoke(history)
    history += [first, HumanMessage("Who am I?")]
    second = "".join(chunk.content for chunk in model.stream(history))
    assert recorder.wait()
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    assert [run["reply"] for run in runs] == [first.content, second]
    assert isinstance(first, AIMessage) and runs[1]["kept"] == [[0, 0], [0, 1]]
    assert_no_key(capture_db)


def test_the_demo_model_answers_each_api_in_its_own_shape(demo_proxy, capture_db):
    from openai import OpenAI

    url, recorder = demo_proxy
    client = OpenAI(base_url=url, api_key="unused", max_retries=0)
    stated = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "I'm Dana."}])
    asked = client.chat.completions.create(
        model="gpt-4o-mini",
        stream=True,
        messages=[
            {"role": "user", "content": "I'm Dana."},
            {"role": "assistant", "content": stated.choices[0].message.content},
            {"role": "user", "content": "What's my name?"},
        ],
    )
    assert "Dana" in "".join(c.choices[0].delta.content or "" for c in asked if c.choices)
    assert client.responses.create(model="gpt-4o-mini", input="What's my name?").output_text.startswith("I don't know")
    assert [m.id for m in client.models.list()] == ["memlens/demo"]
    assert recorder.wait()
    assert sorted(len(c["turns"]) for c in stored(capture_db)) == [1, 2]


def test_anthropic_messages_through_the_proxy_with_litellms_anthropic_client(proxy, stub, capture_db):
    import litellm

    url, recorder = proxy
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi, I'm Bo."}]
    first = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        api_base=f"{url}/messages",
        api_key=KEY,
        messages=messages,
        max_tokens=64,
        num_retries=0,
    )
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Who am I?"},
    ]
    chunks = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        api_base=f"{url}/messages",
        api_key=KEY,
        messages=messages,
        max_tokens=64,
        stream=True,
        num_retries=0,
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert recorder.wait()
    assert [r["path"] for r in stub.requests] == ["/v1/messages"] * 2
    assert [r["headers"].get("x-api-key") for r in stub.requests] == [KEY, KEY]
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    assert [run["reply"] for run in runs] == [first.choices[0].message.content, streamed]
    assert runs[1]["call"]["api"] == "messages" and runs[1]["kept"] == [[0, 0], [0, 1]]
    assert runs[1]["prompt"][0]["content"] == "Be terse." and runs[1]["usage"]["completion_tokens"] > 0
    assert not any("api-key" in k for k in runs[0]["call"]["request_headers"])
    assert_no_key(capture_db)


def test_plain_payloads_read_fast_are_read_as_the_importer_reads_them():
    from core.io.readers.openai import openai_messages
    from core.proxy.exchange import _plain_messages, request_messages

    raw = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi", "name": "dana"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "x\ny"},
    ]
    assert _plain_messages(raw) == openai_messages(raw)
    assert request_messages("chat", {"messages": raw})[0] == openai_messages(raw)
    for other in (
        [{"role": "developer", "content": "x"}],
        [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
        [{"role": "tool", "content": "x", "tool_call_id": "1"}],
        [],
    ):
        assert _plain_messages(other) is None


def test_calls_naming_their_node_by_header_or_metadata_are_that_node_and_the_name_goes_on_as_the_pin_does(
    proxy, stub, capture_db
):
    from openai import OpenAI

    url, recorder = proxy
    pinned = {"X-MemLens-Conversation": "support-7"}
    drafter = OpenAI(base_url=url, api_key=KEY, max_retries=0, default_headers={**pinned, "X-MemLens-Node": "drafter"})
    reviewer = OpenAI(base_url=url, api_key=KEY, max_retries=0, default_headers=pinned)
    messages = [{"role": "system", "content": "You help."}]
    for question in ["I'm Dana.", "My order is 4411."]:
        messages.append({"role": "user", "content": question})
        drafter.chat.completions.create(model="gpt-4o-mini", messages=messages)
        answer = reviewer.chat.completions.create(
            model="gpt-4o-mini", messages=messages, extra_body={"metadata": {"memlens_node": "reviewer"}}
        )
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert recorder.wait()
    # Identical prompts and tools: only the names tell the two nodes apart, and they are the nodes' titles.
    [conversation] = stored(capture_db)
    runs = runs_of(conversation)
    titles = {n["id"]: n["title"] for n in conversation["info"].meta["capture"]["nodes"]}
    assert [titles[run["node_id"]] for run in runs] == ["drafter", "reviewer"] * 2
    assert [run["title"] for run in runs] == ["drafter", "reviewer"] * 2
    assert [len(t["node_runs"]) for t in conversation["turns"]] == [2, 2]
    # The node header is treated as the conversation header is: forwarded to the upstream and recorded; the
    # request body (its metadata) goes on exactly as sent.
    for header, value in (("x-memlens-conversation", "support-7"), ("x-memlens-node", "drafter")):
        assert stub.requests[0]["headers"].get(header) == value
        assert runs[0]["call"]["request_headers"].get(header) == value
    assert json.loads(stub.requests[1]["body"])["metadata"] == {"memlens_node": "reviewer"}
    assert "x-memlens-node" not in stub.requests[1]["headers"]
    assert_no_key(capture_db)
