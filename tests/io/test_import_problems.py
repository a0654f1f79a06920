"""Malformed records are reported by record and field; import is all-or-nothing unless bad
records are skipped, and a conversation is never half-read."""

import json

import pytest

from core.errors import MemLensError
from core.io import MAX_PROBLEMS, FormatError, Problem, import_bytes, import_file, import_text
from tests.conftest import FIXTURES

T = FIXTURES / "transcripts"
GLAIVE_ZH = T / "llamafactory__glaive_toolcall_zh_demo.subset.json"


def test_the_two_malformed_glaive_records_are_named_and_nothing_is_imported():
    with pytest.raises(FormatError) as err:
        import_file(GLAIVE_ZH)
    message = str(err.value)
    assert message.startswith("llamafactory__glaive_toolcall_zh_demo.subset.json: record 7 (conversation '你好，我买了")
    assert "record 7 (conversation" in message and "record 10 (conversation" in message
    assert "message 2: 'observation' must follow a 'function_call'" in message
    assert "nothing was imported" in message and "skip bad records" in message
    assert [(p.record, p.field) for p in err.value.problems] == [(7, "message 2"), (10, "message 2")]
    assert isinstance(err.value, MemLensError)


def test_skipping_bad_records_returns_the_good_ones_and_the_problems():
    result = import_file(GLAIVE_ZH, skip_bad=True)
    assert len(result.conversations) == 9 and result.skipped == 2
    assert [p.record for p in result.problems] == [7, 10]
    assert result.problems[0].text.startswith("record 7 (conversation '你好")
    raw = json.loads(GLAIVE_ZH.read_text())
    good_first_queries = [r["conversations"][0]["value"] for i, r in enumerate(raw) if i not in (7, 10)]
    assert [c.turns[0].query for c in result.conversations] == good_first_queries
    assert "2 bad records left out" in result.summary()


def sharegpt(*messages, **extra):
    return dict(conversations=[{"from": f, "value": v} for f, v in messages], **extra)


GOOD = sharegpt(("human", "hi"), ("gpt", "hello"))


@pytest.mark.parametrize(
    "record,field,message",
    [
        (
            sharegpt(("human", "hi"), ("observation", "{}")),
            "message 1",
            "message 1: 'observation' must follow a 'function_call'",
        ),
        (sharegpt(("human", "hi"), ("wizard", "x")), "message 1", "message 1 has an unknown 'from' 'wizard'"),
        (
            sharegpt(("human", "hi"), ("function_call", "calc(1)")),
            "message 1",
            "message 1: a 'function_call' value must be JSON",
        ),
        (
            sharegpt(("human", "hi"), ("function_call", '{"arguments": {}}')),
            "message 1",
            "message 1: a 'function_call' needs a 'name'",
        ),
        ({"conversations": [{"from": "human"}]}, "message 0", "message 0 has no 'value' string"),
        ({"conversations": []}, "conversations", "'conversations' is empty"),
        ({"conversations": "hi"}, "conversations", "'conversations' must be a list"),
        (sharegpt(("human", "hi"), tools="[{bad json"), "tools", "'tools' is not valid JSON"),
        (sharegpt(("system", "only a system line")), "conversations", "has no human or gpt message"),
        (
            sharegpt(("human", "hi"), ("gpt", "sure"), ("tool", "<tool_response>x</tool_response>")),
            "message 2",
            "message 2: 'tool' must follow a 'function_call' (or a message with <tool_call> tags)",
        ),
        (
            sharegpt(("human", "hi"), ("gpt", "<tool_call>calc(1)</tool_call>")),
            "message 1",
            "message 1: a <tool_call> must hold JSON",
        ),
        (
            sharegpt(
                ("human", "hi"),
                ("gpt", '<tool_call>{"name": "a"}</tool_call>'),
                ("tool", "<tool_response>1</tool_response><tool_response>2</tool_response>"),
            ),
            "message 2",
            "message 2: 2 <tool_response> blocks answer 1 outstanding tool call(s)",
        ),
        (
            sharegpt(("human", "hi"), chosen={"from": "gpt", "value": "a"}),
            "rejected",
            "'rejected' must be a gpt reply {from, value}",
        ),
        (
            sharegpt(("human", "hi"), chosen={"from": "human", "value": "a"}, rejected={"from": "gpt", "value": "b"}),
            "chosen",
            "'chosen' must be a gpt reply {from, value}",
        ),
        (
            sharegpt(
                ("human", "hi"),
                ("gpt", "yo"),
                chosen={"from": "gpt", "value": "a"},
                rejected={"from": "gpt", "value": "b"},
            ),
            "conversations",
            "'chosen' and 'rejected' answer the last human message: 'conversations' must end with one",
        ),
        (sharegpt(("human", "<image>hi"), images="cat.png"), "images", "'images' must be a list of paths or URLs"),
        (
            sharegpt(("gpt", "hello"), videos=["v.mp4"]),
            "videos",
            "'videos' has files but there is no human message to attach them to",
        ),
    ],
)
def test_each_malformed_sharegpt_record_gives_its_message(record, field, message):
    text = json.dumps([GOOD, record, GOOD])
    with pytest.raises(FormatError, match="record 1") as err:
        import_text(text, name="s.json")
    assert message in str(err.value)
    assert [(p.record, p.field) for p in err.value.problems] == [(1, field)]
    kept = import_text(text, name="s.json", skip_bad=True)
    assert [c.id for c in kept.conversations] == ["s#0", "s#2"] and len(kept.problems) == 1


def oasst(root, tree_id="t"):
    return json.dumps({"message_tree_id": tree_id, "tree_state": "ready_for_export", "prompt": root})


def node(mid, role, *replies, **extra):
    return {"message_id": mid, "role": role, "text": extra.pop("text", mid), "replies": list(replies), **extra}


@pytest.mark.parametrize(
    "root,message",
    [
        (
            node("p", "prompter", node("q", "prompter")),
            "message 'q' has role 'prompter' where 'assistant' was expected",
        ),
        (node("a", "assistant"), "message 'a' has role 'assistant' where 'prompter' was expected"),
        (node("p", "prompter", node("a", "assistant", text=None)), "message 'a' has no 'text' string"),
        (node("p", "prompter", node("p", "assistant")), "message 'p' appears twice in the tree"),
        (node("p", "prompter", deleted=True), "the tree's first message is deleted"),
        ({"role": "prompter", "text": "x", "replies": []}, "the tree's first message has no 'message_id'"),
        (
            node("p", "prompter", node("a", "assistant", {"role": "prompter", "text": "?"})),
            "a reply of message 'a' has no 'message_id'",
        ),
        (node("p", "prompter", "just text"), "a reply of message 'p' is not an object"),
    ],
)
def test_each_malformed_oasst_tree_gives_its_message(root, message):
    if message.endswith("'text' string"):
        root["replies"][0]["text"] = None
    good = oasst(node("g", "prompter", node("h", "assistant")), "good")
    text = good + "\n" + oasst(root, "bad") + "\n"
    with pytest.raises(FormatError, match="record 1 \\(conversation 'bad'\\)") as err:
        import_text(text, name="o.jsonl")
    assert message in str(err.value)
    result = import_text(text, name="o.jsonl", skip_bad=True)
    assert [c.id for c in result.conversations] == ["good"] and result.problems[0].record == 1


def row(mid, role, parent=None, tree="t", **extra):
    return json.dumps(
        {"message_id": mid, "parent_id": parent, "message_tree_id": tree, "role": role, "text": mid, **extra}
    )


@pytest.mark.parametrize(
    "bad,message",
    [
        (
            [row("p", "prompter", tree="bad"), row("a", "assistant", "gone", tree="bad")],
            "message 'a' replies to 'gone', which is not in tree 'bad'",
        ),
        (
            [row("p", "prompter", tree="bad"), row("q", "prompter", tree="bad")],
            "tree 'bad' has 2 messages without a 'parent_id'",
        ),
        (
            [row("p", "prompter", tree="bad"), row("p", "assistant", "p", tree="bad")],
            "message 'p' appears twice in tree 'bad'",
        ),
        (
            [row("p", "prompter", tree="bad"), row("a", "prompter", "p", tree="bad")],
            "message 'a' has role 'prompter' where 'assistant' was expected",
        ),
        (
            [row("p", "prompter", tree="bad"), row("a", "assistant", 7, tree="bad")],
            "'parent_id' must be a message id or null",
        ),
        (
            [
                row("p", "prompter", tree="bad"),
                json.dumps({"message_id": "a", "role": "assistant", "text": "a", "parent_id": "p"}),
            ],
            "the message has no 'message_tree_id'",
        ),
    ],
)
def test_a_bad_oasst_row_leaves_its_whole_tree_out_and_says_why(bad, message):
    good = [row("g", "prompter", tree="good"), row("h", "assistant", "g", tree="good")]
    text = "\n".join(good[:1] + bad + good[1:])
    with pytest.raises(FormatError) as err:
        import_text(text, name="rows.jsonl")
    assert message in str(err.value) and "nothing was imported" in str(err.value)
    result = import_text(text, name="rows.jsonl", skip_bad=True)
    assert [c.id for c in result.conversations] == ["good"] and len(result.problems) == 1
    assert [(t.query, t.answer) for t in result.conversations[0].turns] == [("g", "h")]


def test_an_oasst_row_that_names_no_tree_is_left_out_and_the_rest_kept_when_asked():
    # Neither its tree nor a parent to find it by: the row alone is left out (and refused by default).
    stray = json.dumps({"message_id": "a", "role": "assistant", "text": "a", "parent_id": ["p"]})
    text = "\n".join([row("g", "prompter", tree="good"), stray, row("h", "assistant", "g", tree="good")])
    with pytest.raises(FormatError, match="record 1: the message has no 'message_tree_id'"):
        import_text(text, name="rows.jsonl")
    result = import_text(text, name="rows.jsonl", skip_bad=True)
    assert [c.id for c in result.conversations] == ["good"] and [p.record for p in result.problems] == [1]


def test_a_json_lines_line_that_is_not_json_is_a_bad_record():
    good = json.dumps({"messages": [{"role": "user", "content": "a"}]})
    text = "\n".join([good, "{oops", good])
    with pytest.raises(FormatError, match="record 1: line 2 is not valid JSON"):
        import_text(text, name="x.jsonl")
    result = import_text(text, name="x.jsonl", skip_bad=True)
    assert [c.id for c in result.conversations] == ["x#0", "x#2"]
    assert result.problems == [Problem(1, "line 2", result.problems[0].message)]


def test_v1_tool_call_part_that_is_not_json_is_reported_with_its_message():
    bad = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "value": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_call", "value": "f(1)"}]},
        ]
    }
    good = {"messages": [{"role": "user", "content": [{"type": "text", "value": "hi"}]}]}
    with pytest.raises(
        FormatError, match="record 1 \\(conversation 'go'\\), message 1: content part 0: tool_call is not valid JSON"
    ):
        import_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", name="v1.jsonl")


def test_bfcl_turn_that_is_not_a_list_is_reported():
    doc = {
        "prereq_conversations": [
            {"id": "a", "question": [[{"role": "user", "content": "x"}]]},
            {"id": "b", "question": ["not a turn"]},
        ],
        "probes": [],
    }
    with pytest.raises(FormatError, match="record 1 \\(conversation 'b'\\): turn 0 must be a list of messages"):
        import_text(json.dumps(doc), name="b.json")
    assert [c.id for c in import_text(json.dumps(doc), name="b.json", skip_bad=True).conversations] == ["a"]


def test_dify_history_conversation_with_a_bad_record_is_left_out_whole():
    items = [
        {"id": "1", "conversation_id": "c1", "parent_message_id": None, "query": "q", "answer": "a"},
        {"id": "2", "conversation_id": "c1", "parent_message_id": "1", "query": 5, "answer": "a"},
        {"id": "3", "conversation_id": "c2", "parent_message_id": None, "query": "q", "answer": "a"},
    ]
    with pytest.raises(FormatError, match="record 1 \\(conversation 'c1'\\): 'query' must be a string"):
        import_text(json.dumps({"data": items}), name="d.json")
    result = import_text(json.dumps({"data": items}), name="d.json", skip_bad=True)
    assert [c.id for c in result.conversations] == ["c2"]  # never c1 with a turn missing


def test_dify_web_items_are_one_conversation_read_whole_or_not_at_all():
    items = [
        {"id": "q1", "isAnswer": False, "parentMessageId": None, "content": "hi"},
        {"id": "a1", "isAnswer": True, "parentMessageId": "q1", "content": ["not", "text"]},
    ]
    with pytest.raises(FormatError, match="record 1: chat item 'a1' has a 'content' that is not a string"):
        import_text(json.dumps(items), name="w.json")
    result = import_text(json.dumps(items), name="w.json", skip_bad=True)
    assert result.conversations == [] and len(result.problems) == 1


def test_skipping_when_every_record_is_bad_returns_nothing_but_the_problems():
    text = json.dumps([sharegpt(("observation", "x")), sharegpt(("gpt", "y"), ("observation", "z"))])
    result = import_text(text, name="s.json", skip_bad=True)
    assert result.conversations == [] and [p.record for p in result.problems] == [0, 1]


def test_all_or_nothing_stops_after_many_problems_and_says_how_many_more():
    text = json.dumps([sharegpt(("observation", "x"))] * (MAX_PROBLEMS + 50))
    with pytest.raises(FormatError) as err:
        import_text(text, name="s.json")
    assert len(err.value.problems) == MAX_PROBLEMS
    assert f"and {MAX_PROBLEMS - 3}+ more" in str(err.value)
    skipped = import_text(text, name="s.json", skip_bad=True)
    assert len(skipped.problems) == MAX_PROBLEMS + 50


@pytest.mark.parametrize(
    "text,message",
    [
        (
            '[{"conversations": []} {"conversations": []}]',
            "is not valid JSON: expected ',' or ']' at line 1, column 24",
        ),
        ('[{"conversations": []}] trailing', "is not valid JSON: Extra data at line 1"),
        ('{\n "messages": []\n}\n{"messages": []}', "is not JSON or JSON Lines: Extra data at line 4, column 1"),
        ('[{"conversations": [{"from": "human", "value": "x"}]}, {bad}]', "is not valid JSON: Expecting property name"),
    ],
)
def test_a_file_that_is_not_json_as_a_whole_fails_even_when_skipping(text, message):
    with pytest.raises(FormatError, match=message):
        import_text(text, name="f.json", skip_bad=True)


def test_unknown_format_name_and_forced_format_mismatch_are_clear():
    with pytest.raises(FormatError, match="unknown format 'csv'; expected one of .*sharegpt"):
        import_text("[]", name="x.json", fmt="csv")
    with pytest.raises(FormatError, match="'conversations' must be a list"):
        import_text(json.dumps([{"messages": []}]), name="x.json", fmt="sharegpt")


def test_files_over_the_limit_are_refused_before_reading(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "x" * 3000}]}) + "\n")
    with pytest.raises(FormatError, match=r"big.jsonl is 3,048 bytes; MemLens imports files up to 1,000 bytes"):
        import_file(path, max_bytes=1000)
    with pytest.raises(FormatError, match="imports files up to"):
        import_bytes(path.read_bytes(), "big.jsonl", max_bytes=1000)
    assert len(import_file(path, max_bytes=None).conversations) == 1
