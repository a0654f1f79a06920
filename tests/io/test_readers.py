"""Auto-detected readers for OpenAI messages, Dify /v1/messages and Dify web chat items."""

import json

import pytest

from core.io import FormatError, detect_format, parse_conversations, read_conversations
from tests.conftest import FIXTURES

T = FIXTURES / "transcripts"


def parse(obj, name="x.json"):
    return parse_conversations(json.dumps(obj), name=name)


def test_openai_array_object_and_jsonl_are_all_read():
    msgs = [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    a = parse(msgs)[0]
    b = parse({"messages": msgs})[0]
    c = parse_conversations("\n".join(json.dumps({"messages": msgs}) for _ in range(3)), name="x.jsonl")
    assert a.system_prompt == b.system_prompt == "be nice"
    assert [t.query for t in a.turns] == ["hi"] and a.turns[0].answer == "hello"
    assert len(c) == 3 and all(x.source_format == "openai" for x in c)


def test_openai_typed_content_parts_are_flattened():
    conv = parse(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "a cat"}]},
        ]
    )[0]
    assert conv.turns[0].query == "look\n[image]" and conv.turns[0].answer == "a cat"


def test_final_answer_is_the_last_assistant_message_and_others_are_intermediate():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    conv = parse(
        [
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": "thinking aloud"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "it is 42"},
        ]
    )[0]
    assert [m.kind for m in conv.turns[0].messages] == ["query", "intermediate", "tool_call", "tool_result", "answer"]
    assert conv.turns[0].messages[2].tool_calls[0].arguments == '{"x": 1}'


@pytest.mark.parametrize(
    "ending",
    [
        [{"role": "assistant", "content": None, "tool_calls": ["CALL"]}],  # stopped at the call
        [
            {"role": "assistant", "content": "let me look", "tool_calls": ["CALL"]},  # cut after the result
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
    ],
)
def test_a_turn_that_ends_in_a_tool_step_has_no_answer_yet(ending):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ending = [{**m, "tool_calls": [call]} if "tool_calls" in m else m for m in ending]
    conv = parse(
        [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "do it"},
            *ending,
        ]
    )[0]
    last = conv.turns[-1]
    assert last.answer_index is None and last.answer == ""
    assert [m.kind for m in last.messages] == ["query", "tool_call", "tool_result"][: len(last.messages)]
    assert conv.turns[0].answer == "done"  # a turn with a reply after its tool steps keeps it as its answer


def test_reasoning_content_becomes_its_own_reasoning_message():
    conv = parse(
        [
            {"role": "user", "content": "why?"},
            {"role": "assistant", "content": "because", "reasoning_content": "let me think"},
        ]
    )[0]
    assert [(m.kind, m.ref) for m in conv.turns[0].messages] == [
        ("query", 0),
        ("reasoning", "1:reasoning"),
        ("answer", 1),
    ]


def test_dify_messages_object_and_bare_list_group_by_conversation_and_sort_by_time():
    items = [
        {"id": "b", "conversation_id": "c1", "parent_message_id": "a", "query": "q2", "answer": "a2", "created_at": 20},
        {
            "id": "a",
            "conversation_id": "c1",
            "parent_message_id": None,
            "query": "q1",
            "answer": "a1",
            "created_at": 10,
        },
        {
            "id": "z",
            "conversation_id": "c2",
            "parent_message_id": None,
            "query": "other",
            "answer": "x",
            "created_at": 5,
        },
    ]
    convs = parse({"limit": 20, "has_more": False, "data": items})
    assert [c.id for c in convs] == ["c1", "c2"]
    assert [t.id for t in convs[0].turns] == ["a", "b"]
    assert [c.id for c in parse(items)] == ["c1", "c2"]


def test_the_documented_messages_api_example_reads():
    doc = json.loads((T / "dify-docs__messages_api_examples.json").read_text())
    example = doc["GET /messages"]["response_example"]["conversationHistory"]["value"]
    conv = parse(example)[0]
    assert conv.source_format == "dify-messages"
    assert conv.turns[0].query == "What are the specs of the iPhone 13 Pro Max?"
    assert conv.turns[0].messages[0].ref == "9da23599-e713-473b-982c-4328d4f5c78a:query"


def test_dify_web_items_pair_questions_with_answers_and_use_answer_ids_as_refs():
    conv = read_conversations(T / "dify-web__realWorldMessages.json")[0]
    assert conv.source_format == "dify-web" and len(conv.turns) == 7
    assert conv.turns[0].messages[1].ref == "ff4c2b43-48a5-47ad-9dc5-08b34ddba61b:answer"
    assert conv.id == "dd6c9cfd-2656-48ec-bd51-2139c1790d80"


def test_all_shared_formats_are_detected():
    assert detect_format([{"isAnswer": False, "id": "q"}]) == "dify-web"
    assert detect_format({"data": [{"query": "", "answer": ""}]}) == "dify-messages"
    assert detect_format([{"role": "user", "content": "x"}]) == "openai"


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "is empty"),
        ("not json at all", "not JSON or JSON Lines"),
        ('{"a": 1}', "unknown format"),
        ("[1, 2, 3]", "unknown format"),
        ('[{"content": "no role"}]', "message 0 has no 'role'"),
        # A Responses item that stands for no message (an Agents SDK session's reference to an earlier
        # item) is named by its type, not reported as a message without a role.
        (
            '[{"role": "user", "content": "hi"}, {"type": "item_reference", "id": "msg_1"}]',
            "message 1 is an item of type 'item_reference', which stands for no message",
        ),
        (
            '[{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}]',
            "message 1 has an unknown role 'wizard'",
        ),
        ('[{"role": "user", "content": 5}]', "'content' must be a string or a list"),
        ('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": 3}', "record 1: 'messages' must be a list"),
        ('{"messages": []}\nnot json', "line 2 is not valid JSON"),
        ('{"data": [{"query": "q", "answer": "a"}]}', "has no 'id'"),
    ],
)
def test_bad_input_gets_a_clear_error(text, message):
    with pytest.raises(FormatError, match=message):
        parse_conversations(text, name="f.json")


def test_missing_and_unreadable_files_get_a_clear_error(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_conversations(tmp_path / "nope.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_conversations(tmp_path / "bin.json")
