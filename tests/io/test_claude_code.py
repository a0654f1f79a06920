"""Claude Code session transcripts: one event a line, a tree by ``parentUuid``.

The lines follow the shape Claude Code 2.x writes (a reply one content block a line, tool results as
user lines, bookkeeping lines between them, a subagent's lines marked ``isSidechain``, a fresh root
after ``/compact``).
"""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, import_text
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import ANSWER, INTERMEDIATE, QUERY, REASONING, TOOL_CALL, TOOL_RESULT

SESSION = "5f0c2a9e-1b7d-4c1e-9a53-0d2b7e6f4a11"


def line(uid, parent, kind, content, **extra):
    role = "user" if kind == "user" else "assistant"
    message = {"role": role, "content": content}
    if role == "assistant":
        message = {
            "id": extra.pop("msg", f"msg_{uid}"),
            "type": "message",
            "role": role,
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 5},
        }
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dana/shop",
        "sessionId": SESSION,
        "version": "2.0.76",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uid,
        "timestamp": f"2026-11-30T10:00:{len(uid):02d}.000Z",
        **extra,
    }


TRANSCRIPT = [
    {"type": "summary", "summary": "Fix the failing order test", "leafUuid": "a5"},
    {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {"messageId": "u1", "trackedFileBackups": {}}},
    line("u1", None, "user", "The order test fails. Fix it."),
    line(
        "a1",
        "u1",
        "assistant",
        [{"type": "thinking", "thinking": "Run the test first.", "signature": "s"}],
        msg="msg_1",
    ),
    line("a2", "a1", "assistant", [{"type": "text", "text": "I'll run the test."}], msg="msg_1"),
    line(
        "a3",
        "a2",
        "assistant",
        [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest tests/test_order.py"}}],
        msg="msg_1",
    ),
    line(
        "u2",
        "a3",
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1 failed"}],
        toolUseResult={"stdout": "1 failed", "stderr": ""},
    ),
    {
        "parentUuid": "a3",
        "isSidechain": True,
        "sessionId": SESSION,
        "type": "user",
        "uuid": "s1",
        "message": {"role": "user", "content": "Subagent: find the order model."},
    },
    line("a4", "u2", "assistant", [{"type": "text", "text": "The total skips tax; fixed."}], msg="msg_2"),
    {
        "type": "system",
        "subtype": "informational",
        "content": "Hook ran",
        "uuid": "h1",
        "parentUuid": "a4",
        "sessionId": SESSION,
    },
    line("u3", "a4", "user", "Now run all tests."),
    line("a5", "u3", "assistant", [{"type": "text", "text": "All 42 pass."}], msg="msg_3"),
    # The prompt edited: a sibling of u3 under the same reply.
    line("u4", "a4", "user", "Run only the order tests."),
    line("a6", "u4", "assistant", [{"type": "text", "text": "3 pass."}], msg="msg_4"),
    # After /compact: a new root, the summary Claude Code writes, then the session goes on.
    line(
        "c1",
        None,
        "user",
        "This session is being continued from a previous conversation. Summary: the order total now includes tax.",
        isCompactSummary=True,
    ),
    line("u5", "c1", "user", "Commit it."),
    line("a7", "u5", "assistant", [{"type": "text", "text": "Committed."}], msg="msg_5"),
]


def read(lines=TRANSCRIPT, name=f"{SESSION}.jsonl"):
    return import_text("\n".join(json.dumps(x) for x in lines), name=name)


def test_a_session_reads_as_its_tree_of_turns():
    result = read()
    assert result.format == "claude-code"
    (conv,) = result.conversations
    assert conv.id == SESSION and conv.name == "Fix the failing order test"
    assert conv.meta["sidechain_lines_left_out"] == 1 and conv.meta["cwd"] == "/home/dana/shop"
    by_id = {t.id: t for t in conv.turns}
    first = by_id["a4"]
    # One reply written a block a line is one turn: thinking, the words before the call, the call, its result.
    assert [(m.kind, m.content) for m in first.messages] == [
        (QUERY, "The order test fails. Fix it."),
        (REASONING, "Run the test first."),
        (INTERMEDIATE, "I'll run the test."),
        (TOOL_CALL, ""),
        (TOOL_RESULT, "1 failed"),
        (ANSWER, "The total skips tax; fixed."),
    ]
    call = first.messages[3].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "toolu_1",
        "Bash",
        {"command": "pytest tests/test_order.py"},
    )
    assert first.messages[4].tool_call_id == "toolu_1"
    assert len({m.ref for t in conv.turns for m in t.messages}) == sum(len(t.messages) for t in conv.turns)
    # The edited prompt is a branch beside the first one; the compacted session is a thread of its own.
    assert conv.tree.siblings(conv.index_of("a5")) == conv.tree.siblings(conv.index_of("a6"))
    assert by_id["a5"].parent_id == by_id["a6"].parent_id == "a4"
    compacted = conv.tree.thread(conv.index_of("a7"))
    assert [conv.turns[p].query[:31] for p in compacted] == ["This session is being continued", "Commit it."]
    assert conv.meta["active_turn_id"] == "a7" and conv.turns[-1].id == "a7"


def test_memory_at_the_newest_turn_sees_only_what_the_compaction_left():
    conv = read().conversations[0]
    ledger = Replay(conv, MemoryConfig(strategy="buffer")).ledger_at(conv.index_of("a7"))
    assert [(conv.turns[e.position].id, e.role) for e in ledger.entries if e.kept] == [("c1", "user")]
    # Everything before the compaction is off this thread: the model no longer receives it.
    assert {e.reason for e in ledger.entries if not e.kept} == {"other_branch"}
    assert sum(not e.kept for e in ledger.entries) == 10


def test_a_transcript_opens_under_what_claude_code_sends_the_whole_thread():
    from core.analysis.debug_view import default_lens, fitting_config

    conv = read().conversations[0]
    lens = default_lens(conversation=conv)
    # counted for the model the session's replies name
    assert (
        lens.config
        == fitting_config(conv)
        == MemoryConfig(strategy="buffer", granularity="all_messages", model="claude-sonnet-4-5")
    )
    assert lens.title == f"Default · {lens.config.label()}"
    ledger = Replay(conv, lens.config).ledger_at(conv.index_of("a5"))
    assert [e.ref for e in ledger.entries if e.kept] == ["u1", "a1:reasoning", "a2", "a3", "u2", "a4"]
    # Another source keeps Dify's LLM-node memory; a Dify Agent app's log its runner's.
    other = import_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]), name="o.json"
    ).conversations[0]
    assert fitting_config(other, 4) == MemoryConfig(window=4) and fitting_config(agent=True).strategy == "dify_agent"


def test_a_session_is_counted_for_the_model_its_last_reply_names():
    """A session switched to another model (/model) runs on the newest; a reply Claude Code wrote
    itself (an API error's, model "<synthetic>") names no model."""
    lines = [
        *TRANSCRIPT[:-1],
        {**TRANSCRIPT[-1], "message": {**TRANSCRIPT[-1]["message"], "model": "claude-opus-4-1"}},
        line("u6", "a7", "user", "And push."),
        line("a8", "u6", "assistant", [{"type": "text", "text": "API Error"}], msg="msg_6"),
    ]
    lines[-1]["message"]["model"] = "<synthetic>"
    assert read(lines).conversations[0].meta["model"] == "claude-opus-4-1"
    no_model = [
        {**x, "message": {k: v for k, v in x["message"].items() if k != "model"}} if "message" in x else x
        for x in TRANSCRIPT
    ]
    assert "model" not in read(no_model).conversations[0].meta


def test_a_stored_transcript_reopens_under_the_same_memory(db):
    """Stored and loaded again (as the Debugger opens it), a transcript keeps its format, so it opens
    under what Claude Code sends, not under a Dify LLM node's memory."""
    from core.analysis.debug_view import fitting_config
    from core.service.transfer import store_conversations
    from core.store import repo

    [conv_id] = store_conversations(db, read().conversations)
    stored = repo.load_conversation(db, conv_id)
    assert stored.source_format == "claude-code"
    assert fitting_config(stored) == MemoryConfig(
        strategy="buffer", granularity="all_messages", model="claude-sonnet-4-5"
    )


def test_a_bad_line_leaves_the_whole_session_out_naming_the_line():
    bad = [
        *TRANSCRIPT[:4],
        {**TRANSCRIPT[4], "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}},
    ]
    with pytest.raises(FormatError, match="line 'a2': content part 0 \\(tool_use\\) has no 'name'"):
        read(bad)
    result = import_text("\n".join(json.dumps(x) for x in bad), name="s.jsonl", skip_bad=True)
    assert result.conversations == [] and len(result.problems) == 1
    looped = [line("u1", "a1", "user", "hi"), line("a1", "u1", "assistant", [{"type": "text", "text": "ok"}])]
    with pytest.raises(FormatError, match="the 'parentUuid' links form a cycle"):
        read([TRANSCRIPT[0], *looped])
    with pytest.raises(FormatError, match="two lines share the uuid 'u1'"):
        read([*TRANSCRIPT[:3], TRANSCRIPT[2]])
