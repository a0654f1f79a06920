"""Every transcript format imports the shared samples with the expected turn and branch counts.

Expected counts come from tests/fixtures/transcripts/SOURCES.md (the upstream description of each
sample) or are recomputed here from the raw JSON, never from the reader's own output.
"""

import json

import pytest

from core.io import FORMATS, FormatError, ImportResult, detect_format, import_file, import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import ANSWER, QUERY, REASONING, TOOL_CALL, TOOL_RESULT, active_thread
from core.model.ledger import KEPT, OTHER_BRANCH
from tests.conftest import FIXTURES

T = FIXTURES / "transcripts"
GLAIVE_EN = T / "llamafactory__glaive_toolcall_en_demo.subset.json"
GLAIVE_ZH = T / "llamafactory__glaive_toolcall_zh_demo.subset.json"
REASON = T / "llamafactory__reason_tool_use_demo_50.subset.jsonl"
OASST = T / "oasst__en_100_tree.subset.jsonl"
BFCL = T / "bfcl__memory_notetaker.json"


def kinds(conv):
    return [m.kind for t in conv.turns for m in t.messages]


def test_every_named_format_is_listed_and_detected_from_its_sample():
    assert {"openai", "dify-messages", "dify-web", "sharegpt", "oasst", "bfcl"} <= set(FORMATS)
    cases = {
        GLAIVE_EN: "sharegpt",
        GLAIVE_ZH: "sharegpt",
        REASON: "openai",
        OASST: "oasst",
        BFCL: "bfcl",
        T / "taubench__gpt-4o-airline.sample.jsonl": "openai",
        T / "dify-web__realWorldMessages.json": "dify-web",
    }
    for path, fmt in cases.items():
        result = import_file(path, skip_bad=True)
        assert isinstance(result, ImportResult) and result.format == fmt, path.name


def test_tau_bench_s_own_files_read_their_trajectories_from_traj():
    """tau-bench writes its results and historical trajectories as ``{task_id, reward, info, traj, trial}``
    (a JSON array); the sample keeps each trajectory under ``messages``. Both read the same."""
    sample = T / "taubench__gpt-4o-airline.sample.jsonl"
    records = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    own = [{"traj" if k == "messages" else k: v for k, v in r.items()} for r in records]
    expected = import_file(sample).conversations
    for text in (json.dumps(own), "\n".join(map(json.dumps, own))):
        result = import_text(text, name="taubench__gpt-4o-airline.sample.jsonl")
        assert result.format == "openai" and len(result.conversations) == len(records) > 1
        for conv, want in zip(result.conversations, expected):
            assert conv.system_prompt == want.system_prompt and conv.meta == want.meta
            assert [[(m.role, m.kind, m.content, m.tool_calls) for m in t.messages] for t in conv.turns] == [
                [(m.role, m.kind, m.content, m.tool_calls) for m in t.messages] for t in want.turns
            ]
    with pytest.raises(FormatError, match="record 1 \\(conversation '2'\\): 'traj' must be a list"):
        import_text(json.dumps([own[0], {"task_id": 2, "traj": "none"}]), name="r.json")


# -- ShareGPT -----------------------------------------------------------------------------------------


def test_glaive_english_sample_has_26_conversations_with_every_message_in_place():
    result = import_file(GLAIVE_EN)
    convs = result.conversations
    assert len(convs) == 26 and not result.problems and result.records == 26
    all_kinds = [k for c in convs for k in kinds(c)]
    # SOURCES.md: 77 human, 77 gpt, 42 function_call, 42 observation.
    assert all_kinds.count(QUERY) == 77
    assert all_kinds.count(ANSWER) == 77
    assert all_kinds.count(TOOL_CALL) == 42
    assert all_kinds.count(TOOL_RESULT) == 42
    assert sum(len(c.turns) for c in convs) == 77
    assert all(c.source_format == "sharegpt" for c in convs)
    assert len({c.id for c in convs}) == 26


def test_sharegpt_observation_is_paired_with_the_call_before_it():
    conv = import_file(GLAIVE_EN).conversations[0]
    turn = conv.turns[0]
    assert [m.kind for m in turn.messages] == [QUERY, TOOL_CALL, TOOL_RESULT, ANSWER]
    call = turn.messages[1].tool_calls[0]
    assert call.name == "calculate_area"
    assert json.loads(call.arguments) == {"shape": "rectangle", "dimensions": [5, 3]}
    assert turn.messages[2].role == "tool" and turn.messages[2].tool_call_id == call.id
    assert turn.messages[2].content == '{"area": 15}'
    raw = json.loads(GLAIVE_EN.read_text())[0]
    assert conv.meta["tools"] == raw["tools"]  # the tools as the file wrote them
    assert [m.ref for m in turn.messages] == [0, 1, 2, 3]  # index in the record's list


def hermes(record):
    """A ShareGPT record written as Hermes function-calling data writes it: each call inside a ``gpt``
    message's ``<tool_call>`` tags, each result a ``tool`` message's ``<tool_response>``."""
    out = []
    for m in record["conversations"]:
        if m["from"] == "function_call":
            out.append({"from": "gpt", "value": f"<tool_call>\n{m['value']}\n</tool_call>"})
        elif m["from"] == "observation":
            out.append({"from": "tool", "value": f"<tool_response>\n{m['value']}\n</tool_response>"})
        else:
            out.append(m)
    return {**record, "conversations": out}


def test_hermes_tool_calls_in_tags_read_as_the_same_calls_and_results():
    records = json.loads(GLAIVE_EN.read_text())
    expected = import_file(GLAIVE_EN).conversations
    got = import_text(json.dumps([hermes(r) for r in records]), name=GLAIVE_EN.name).conversations
    assert sum(k == TOOL_CALL for c in got for k in kinds(c)) == 42

    def shape(conv):
        return [
            [(m.role, m.kind, m.content, m.tool_calls, m.tool_call_id, m.ref) for m in t.messages] for t in conv.turns
        ]

    assert [shape(c) for c in got] == [shape(c) for c in expected]
    # Text beside the tags is the step's content; two calls answered in one tool message are two results.
    calls = [{"name": "weather", "arguments": {"city": c}} for c in ("Porto", "Lisbon")]
    text = "Checking both.\n" + "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
    record = {
        "conversations": [
            {"from": "human", "value": "Weather in Porto and Lisbon?"},
            {"from": "gpt", "value": text},
            {"from": "tool", "value": "<tool_response>sunny</tool_response>\n<tool_response>rain</tool_response>"},
            {"from": "gpt", "value": "Sunny in Porto, rain in Lisbon."},
        ]
    }
    turn = import_text(json.dumps(record), name="h.json").conversations[0].turns[0]
    assert [(m.kind, m.content, m.ref) for m in turn.messages] == [
        (QUERY, "Weather in Porto and Lisbon?", 0),
        (TOOL_CALL, "Checking both.", 1),
        (TOOL_RESULT, "sunny", 2),
        (TOOL_RESULT, "rain", "2:response1"),
        (ANSWER, "Sunny in Porto, rain in Lisbon.", 3),
    ]
    step = turn.messages[1]
    assert [(c.name, json.loads(c.arguments)) for c in step.tool_calls] == [
        ("weather", {"city": "Porto"}),
        ("weather", {"city": "Lisbon"}),
    ]
    assert [m.tool_call_id for m in turn.messages[2:4]] == [c.id for c in step.tool_calls]


def test_sharegpt_counts_of_conversations_with_tools_but_no_call():
    convs = import_file(GLAIVE_EN).conversations
    calls = [sum(k == TOOL_CALL for k in kinds(c)) for c in convs]
    # SOURCES.md: 20 have ≥2 function calls, 4 have tools but no call, 2 have tools "[]".
    assert sum(n >= 2 for n in calls) == 20
    assert sum(1 for c, n in zip(convs, calls) if n == 0 and c.meta.get("tools") not in (None, "[]")) == 4
    assert sum(1 for c in convs if c.meta.get("tools") == "[]") == 2


def test_glaive_chinese_good_records_import_and_tool_results_point_to_their_calls():
    result = import_file(GLAIVE_ZH, skip_bad=True)
    assert len(result.conversations) == 9 and result.records == 11
    convs = result.conversations
    # SOURCES.md: 35 human, 37 gpt, 20 function_call, 22 observation over 11 records; the two
    # malformed ones (2 human, 3 gpt, 1 observation each, no call) are left out.
    assert sum(k == QUERY for c in convs for k in kinds(c)) == 35 - 4
    assert sum(k == TOOL_CALL for c in convs for k in kinds(c)) == 20
    results = [m for c in convs for t in c.turns for m in t.messages if m.kind == TOOL_RESULT]
    assert len(results) == 22 - 2
    for c in convs:
        ids = {call.id for t in c.turns for m in t.messages for call in m.tool_calls}
        assert all(m.tool_call_id in ids for t in c.turns for m in t.messages if m.kind == TOOL_RESULT)


def test_sharegpt_system_and_single_record_documents_are_read():
    doc = {"system": "be brief", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    conv = import_text(json.dumps(doc), name="one.json").conversations[0]
    assert conv.system_prompt == "be brief" and conv.id == "one"
    assert [(t.query, t.answer) for t in conv.turns] == [("hi", "yo")]


def test_sharegpt_parallel_calls_each_get_their_observation():
    conv = import_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "weather in A and B"},
                        {
                            "from": "function_call",
                            "value": json.dumps(
                                [{"name": "w", "arguments": {"c": "A"}}, {"name": "w", "arguments": {"c": "B"}}]
                            ),
                        },
                        {"from": "observation", "value": "sun"},
                        {"from": "observation", "value": "rain"},
                        {"from": "gpt", "value": "A sun, B rain"},
                    ]
                }
            ]
        ),
        name="p.json",
    ).conversations[0]
    msgs = conv.turns[0].messages
    call_ids = [c.id for c in msgs[1].tool_calls]
    assert len(set(call_ids)) == 2 and [msgs[2].tool_call_id, msgs[3].tool_call_id] == call_ids


def test_sharegpt_preference_record_reads_chosen_as_the_answer_and_rejected_as_a_sibling_branch():
    # LLaMA-Factory's preference data: the conversation ends with a human message, answered twice.
    conv = import_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "Name a colour."},
                        {"from": "gpt", "value": "Green."},
                        {"from": "human", "value": "Another one?"},
                    ],
                    "chosen": {"from": "gpt", "value": "Blue."},
                    "rejected": {"from": "gpt", "value": "Green again."},
                }
            ]
        ),
        name="dpo.json",
    ).conversations[0]
    first, rejected, chosen = conv.turns
    assert (rejected.query, rejected.answer, chosen.query, chosen.answer) == (
        "Another one?",
        "Green again.",
        "Another one?",
        "Blue.",
    )
    assert rejected.parent_id == chosen.parent_id == first.id and rejected.id != chosen.id
    assert [m.kind for t in conv.turns for m in t.messages] == [QUERY, ANSWER] * 3
    assert len({m.ref for t in conv.turns for m in t.messages}) == 6
    assert [conv.turns[i].answer for i in active_thread(conv)] == ["Green.", "Blue."]  # chosen is the active thread
    ledger = Replay(conv, MemoryConfig(window=10)).ledger_at(2)
    assert [e.reason for e in ledger.entries] == [KEPT, KEPT, OTHER_BRANCH, OTHER_BRANCH]


def test_sharegpt_multimodal_record_attaches_each_file_where_its_placeholder_is():
    conv = import_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "<image>What is this?"},
                        {"from": "gpt", "value": "A cat."},
                        {"from": "human", "value": "And <image> with <video>?"},
                        {"from": "gpt", "value": "A dog running."},
                    ],
                    "images": ["imgs/cat.png", "imgs/dog.png", "imgs/extra.png"],
                    "videos": ["v/run.mp4"],
                }
            ]
        ),
        name="mllm.json",
    ).conversations[0]
    files = [[(f.type, f.url, f.name) for f in t.messages[t.query_index].files] for t in conv.turns]
    assert files == [
        [("image", "imgs/cat.png", "cat.png"), ("image", "imgs/extra.png", "extra.png")],
        [("image", "imgs/dog.png", "dog.png"), ("video", "v/run.mp4", "run.mp4")],
    ]
    assert all(not m.files for t in conv.turns for m in t.messages if m.kind == ANSWER)


# -- LLaMA-Factory v1 (OpenAI reader with typed parts) -----------------------------------------------


def test_reason_tool_use_sample_keeps_reasoning_and_pairs_tool_results():
    convs = import_file(REASON).conversations
    assert len(convs) == 4
    for conv in convs:
        # SOURCES.md: 1 system, 3 user turns, 6 reasoning parts, 3 tool calls, 3 tool results, 3 final texts.
        assert conv.system_prompt.startswith("You are a methodical")
        assert len(conv.turns) == 3
        k = kinds(conv)
        assert (k.count(QUERY), k.count(REASONING), k.count(TOOL_CALL), k.count(TOOL_RESULT), k.count(ANSWER)) == (
            3,
            6,
            3,
            3,
            3,
        )
        for turn in conv.turns:
            calls = [c for m in turn.messages for c in m.tool_calls]
            results = [m for m in turn.messages if m.kind == TOOL_RESULT]
            named = [json.loads(m.content)[0]["tool_call_id"] for m in results]
            assert [c.id for c in calls] == named == [m.tool_call_id for m in results]
            assert all(m.role == "assistant" for m in turn.messages if m.kind == REASONING)


def test_reasoning_messages_are_history_only_under_all_messages_granularity():
    conv = import_file(REASON).conversations[0]
    qa = Replay(conv, MemoryConfig()).ledger(3)
    full = Replay(conv, MemoryConfig(granularity="all_messages")).ledger(3)
    assert {e.reason for e in qa.entries if e.kind == REASONING} == {"granularity"}
    assert {e.reason for e in full.entries if e.kind == REASONING} == {KEPT}


def test_openai_calls_without_ids_get_distinct_ids_and_results_pair_in_order():
    conv = import_text(
        json.dumps(
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "a", "arguments": "{}"}}]},
                {"role": "tool", "content": "1"},
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "b", "arguments": "{}"}}]},
                {"role": "tool", "content": "2"},
                {"role": "assistant", "content": "done"},
            ]
        ),
        name="x.json",
    ).conversations[0]
    msgs = conv.turns[0].messages
    a, b = msgs[1].tool_calls[0].id, msgs[3].tool_calls[0].id
    assert a != b and (msgs[2].tool_call_id, msgs[4].tool_call_id) == (a, b)


# -- OpenAssistant trees ----------------------------------------------------------------------------


def raw_trees():
    return [json.loads(line) for line in OASST.read_text().splitlines() if line.strip()]


def raw_leaf_paths(node, prefix=()):
    """Root-to-leaf paths of (role, text) in the raw tree."""
    here = prefix + ((node["role"], node["text"]),)
    if not node.get("replies"):
        return [here]
    return [p for r in node["replies"] for p in raw_leaf_paths(r, here)]


def turn_path_texts(conv, positions):
    out = []
    for p in positions:
        t = conv.turns[p]
        out.append(("prompter", t.query))
        if t.answer_index is not None:
            out.append(("assistant", t.answer))
    return tuple(out)


def test_oasst_sample_has_six_trees_with_five_to_seven_leaves():
    convs = import_file(OASST).conversations
    assert len(convs) == 6 and all(c.source_format == "oasst" for c in convs)
    for conv, raw in zip(convs, raw_trees()):
        tree = conv.tree
        leaves = [i for i in range(len(conv.turns)) if not tree.children[i]]
        assert len(leaves) == len(raw_leaf_paths(raw["prompt"]))
        assert 5 <= len(leaves) <= 7
        assert conv.id == raw["message_tree_id"]


def test_oasst_every_leaf_thread_is_its_path_from_the_root():
    for conv, raw in zip(import_file(OASST).conversations, raw_trees()):
        tree = conv.tree
        leaves = [i for i in range(len(conv.turns)) if not tree.children[i]]
        expected = sorted(raw_leaf_paths(raw["prompt"]))
        got = []
        for leaf in leaves:
            assert tree.thread(leaf) == tree.path(leaf), (conv.id, leaf)
            assert conv.turns[tree.path(leaf)[0]].parent_id is None
            got.append(turn_path_texts(conv, tree.thread(leaf)))
        assert sorted(got) == expected


def test_oasst_turns_cover_every_message_of_the_tree_once():
    def ids(node):
        return [node["message_id"]] + [i for r in node.get("replies", []) for i in ids(r)]

    for conv, raw in zip(import_file(OASST).conversations, raw_trees()):
        all_ids = ids(raw["prompt"])
        assert 12 <= len(all_ids) <= 15
        seen = {t.meta["prompter_id"] for t in conv.turns} | {t.meta["assistant_id"] for t in conv.turns}
        seen.discard(None)
        assert seen == set(all_ids)
        assert len({m.ref for t in conv.turns for m in t.messages}) == sum(len(t.messages) for t in conv.turns)


def shape(conv):
    return (
        conv.id,
        conv.meta.get("deleted_messages_left_out"),
        [
            (t.id, t.parent_id, t.query_index, t.answer_index, [(m.role, m.content, m.ref) for m in t.messages])
            for t in conv.turns
        ],
    )


def rows_of(node, tree_id, parent=None):
    """A nested tree as the Hugging Face datasets list it: one message per row, depth first."""
    row = {k: v for k, v in node.items() if k != "replies"}
    row.update(parent_id=parent, message_tree_id=tree_id)
    return [row] + [r for reply in node.get("replies", []) for r in rows_of(reply, tree_id, node["message_id"])]


def test_oasst_messages_and_rows_layouts_read_as_the_trees_they_were_written_from():
    """OpenAssistant publishes its trees three ways: wrapped trees, first messages with their replies
    nested (``*_message.jsonl``), and one message per row (the Hugging Face datasets). The sample's
    trees written the other two ways read as the same conversations."""
    trees = raw_trees()
    expected = [shape(c) for c in import_file(OASST).conversations]
    assert all(t["message_tree_id"] == t["prompt"]["message_id"] for t in trees)  # so the ids agree
    messages = "\n".join(json.dumps(t["prompt"]) for t in trees)
    rows = [r for t in trees for r in rows_of(t["prompt"], t["message_tree_id"])]
    assert all("replies" not in r for r in rows) and len(rows) > len(trees)
    for text in (messages, "\n".join(map(json.dumps, rows)), json.dumps(rows)):
        result = import_text(text, name="oasst.jsonl")
        assert result.format == "oasst" and [shape(c) for c in result.conversations] == expected
    # Rows in any order: a reply may come before the message it answers; every thread is still its path.
    shuffled = rows[::-1]
    for conv, raw in zip(import_text("\n".join(map(json.dumps, shuffled)), name="o.jsonl").conversations[::-1], trees):
        leaves = [i for i in range(len(conv.turns)) if not conv.tree.children[i]]
        assert sorted(turn_path_texts(conv, conv.tree.thread(i)) for i in leaves) == sorted(
            raw_leaf_paths(raw["prompt"])
        )


def tree(*replies, role="prompter", mid="p0", text=None):
    return {"message_id": mid, "role": role, "text": text or mid, "replies": list(replies)}


def test_oasst_regenerations_and_edits_become_sibling_turns():
    # p0 → (a1, a2) regenerated; a1 → (p1, p2) edited follow-ups; p1 → a3; p2 → a4.
    root = tree(
        tree(
            tree(tree(role="assistant", mid="a3"), mid="p1"),
            tree(tree(role="assistant", mid="a4"), mid="p2"),
            role="assistant",
            mid="a1",
        ),
        tree(role="assistant", mid="a2"),
    )
    conv = import_text(
        json.dumps({"message_tree_id": "t", "tree_state": "ready_for_export", "prompt": root}), name="t.jsonl"
    ).conversations[0]
    ids = [t.id for t in conv.turns]
    assert ids == ["a1", "a3", "a4", "a2"]  # depth first: a branch's follow-ups before the next regeneration
    tree_ = conv.tree
    assert [ids[i] for i in tree_.siblings(ids.index("a1"))] == ["a1", "a2"]
    assert [ids[i] for i in tree_.siblings(ids.index("a3"))] == ["a3", "a4"]
    assert conv.turns[ids.index("a4")].query == "p2" and conv.turns[ids.index("a4")].parent_id == "a1"
    # Memory at the edited branch sees a1's round only, never the sibling edit or the regeneration.
    ledger = Replay(conv, MemoryConfig()).ledger_at(ids.index("a4"))
    reasons = {e.ref: e.reason for e in ledger.entries}
    assert reasons == {"a1:query": KEPT, "a1:answer": KEPT, "a3:query": OTHER_BRANCH, "a3:answer": OTHER_BRANCH}


def test_oasst_unanswered_prompt_is_a_turn_without_answer_and_deleted_replies_are_left_out():
    gone = dict(tree(role="assistant", mid="a2"), deleted=True)
    root = tree(tree(tree(mid="p1"), role="assistant", mid="a1"), gone)
    conv = import_text(json.dumps({"message_tree_id": "t", "prompt": root}), name="t.jsonl").conversations[0]
    assert [t.id for t in conv.turns] == ["a1", "p1"]
    assert conv.turns[1].answer_index is None and conv.turns[1].parent_id == "a1"
    assert conv.answered_turns() == [0, 1]
    assert conv.meta["deleted_messages_left_out"] == 1


def test_oasst_leaf_ledgers_keep_their_thread_and_nothing_from_other_branches():
    for conv in import_file(OASST).conversations:
        replay = Replay(conv, MemoryConfig())
        tree_ = conv.tree
        for leaf in (i for i in range(len(conv.turns)) if not tree_.children[i]):
            ledger = replay.ledger_at(leaf)
            on_thread = set(tree_.thread(leaf)[:-1])
            for e in ledger.entries:
                assert (e.reason == KEPT) == (e.position in on_thread), (conv.id, leaf, e)


# -- BFCL ----------------------------------------------------------------------------------------------


def test_bfcl_prereq_conversations_are_user_only_turns_with_probes_attached():
    raw = json.loads(BFCL.read_text())
    result = import_file(BFCL)
    convs = result.conversations
    assert len(convs) == len(raw["prereq_conversations"]) == 5
    for conv, pre in zip(convs, raw["prereq_conversations"]):
        assert conv.id == pre["id"] and conv.name == pre["topic"]
        assert len(conv.turns) == len(pre["question"]) and 4 <= len(conv.turns) <= 5
        assert all(t.answer_index is None and t.messages[0].role == "user" for t in conv.turns)
    probes = [p for c in convs for p in c.meta.get("probes", [])]
    assert len(probes) == len(raw["probes"]) == 25 and not result.notes
    for conv in convs:
        texts = {t.query_message.ref: t.query for t in conv.turns}
        for probe in conv.meta.get("probes", []):
            words = probe["source"].split(":", 1)[-1].replace(" — ", "—").split()
            assert all(w in texts[probe["ref"]] for w in words), probe["id"]
        assert [f["ref"] for f in conv.meta.get("facts", [])] == [p["ref"] for p in conv.meta.get("probes", [])]


# -- Dify formats still read as before -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name,turns",
    [
        ("dify-web__realWorldMessages.json", 7),
        ("dify-web__branchedTestMessages.json", 4),
        ("dify-web__legacyTestMessages.json", 4),
        ("dify-web__mixedTestMessages.json", 4),
        ("dify-web__multiRootNodesMessages.json", 5),
        ("dify-web__multiRootNodesWithLegacyTestMessages.json", 5),
    ],
)
def test_dify_web_samples_pair_every_question_with_its_answer(name, turns):
    raw = json.loads((T / name).read_text())
    conv = import_file(T / name).conversations[0]
    assert len(conv.turns) == turns == sum(1 for x in raw if x["isAnswer"])


def test_detection_follows_the_first_record():
    assert detect_format([{"conversations": []}]) == "sharegpt"
    assert detect_format([{"message_tree_id": "t", "prompt": {}}], is_jsonl=True) == "oasst"
    assert detect_format({"prereq_conversations": [], "probes": []}) == "bfcl"
    with pytest.raises(FormatError, match="unknown format"):
        detect_format({"hello": "world"})


def test_a_registered_format_is_detected_before_the_generic_ones_and_reports_bad_records():
    from core.io import Format, RecordError, register_format, unregister_format
    from core.model.conversation import Conversation

    def parse(value, n):
        if not isinstance(value.get("title"), str):
            raise RecordError("'title' must be a string", "title")
        return Conversation(id=value["title"], turns=[], source_format="toy")

    def read(records, ctx):
        doc = records.first
        yield from ctx.each(records.inner(doc["toy_bundle"]), parse, lambda v: str(v.get("title", "")))

    register_format(
        Format("toy", "a toy bundle", lambda first, layout: isinstance(first, dict) and "toy_bundle" in first, read),
        before=FORMATS[0],
    )
    try:
        assert FORMATS[0] == "toy"
        text = json.dumps({"toy_bundle": [{"title": "a"}, {"title": 3}], "messages": []})
        result = import_text(text, name="t.json", skip_bad=True)
        assert result.format == "toy" and [c.id for c in result.conversations] == ["a"]
        assert result.problems[0].text == "record 1 (conversation '3'): 'title' must be a string"
    finally:
        unregister_format("toy")
    assert "toy" not in FORMATS
    assert import_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}), name="t.json").format == "openai"


def test_a_bare_message_list_counts_as_one_record():
    text = json.dumps([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    result = import_text(text, name="m.json")
    assert result.records == 1 and len(result.conversations) == 1 and result.conversations[0].id == "m"
