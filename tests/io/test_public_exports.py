"""ChatGPT exports found in public repositories (tests/fixtures/exports/public, sources in SOURCES.md there):
a real Code Interpreter export, an older export whose nodes link only to their parents, and a fixture with
deliberately broken records. Each reads as the conversation a person saw, or is refused with one clear line."""

from __future__ import annotations

import pytest

from core.io import FormatError, import_text, read_conversations
from core.io.readers.registry import import_file
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT
from tests.conftest import FIXTURES

P = FIXTURES / "exports" / "public"


def _one_thread(conv) -> bool:
    return all(t.parent_id == (conv.turns[i - 1].id if i else None) for i, t in enumerate(conv.turns))


def test_a_real_code_interpreter_export_reads_as_one_thread_of_calls_and_results():
    path = P / "chatgpt__realazthat__chatgpt2graph.json"
    result = import_text(path.read_text(encoding="utf-8"), "conversations.json")
    assert result.format == "chatgpt"
    (conv,) = result.conversations
    assert conv.name == "Average Distance in U(0,1)"
    assert len(conv.turns) == 8 and _one_thread(conv)
    messages = [m for t in conv.turns for m in t.messages]
    assert not [m for m in messages if m.role == "system"]  # the export's hidden, empty system nodes
    calls = [m for m in messages if m.kind == TOOL_CALL]
    results = [m for m in messages if m.kind == TOOL_RESULT]
    assert len(calls) == len(results) == 11  # its `code` and `execution_output` messages
    assert {c.tool_calls[0].name for c in calls} == {"python"}
    for turn in conv.turns:  # each result answers a call made before it in the same turn
        made: set[str] = set()
        for m in turn.messages:
            if m.kind == TOOL_CALL:
                made.update(c.id for c in m.tool_calls)
            elif m.kind == TOOL_RESULT:
                assert m.tool_call_id in made, (turn.id, m.id)
        assert turn.messages[turn.query_index].kind == QUERY
        assert turn.messages[turn.answer_index].kind == ANSWER and turn.answer
    assert conv.turns[0].query.startswith("given two random independent variables x,y in U(0,1), what is the average")
    assert conv.turns[-1].query.startswith("where is the variance?")


def test_an_export_linked_only_by_parents_reads_every_conversation_in_order():
    """Only the root lists its children here; each message names its parent. The last question of the first
    conversation was never answered (`current_node` is that question)."""
    convs = read_conversations(P / "chatgpt__ArthurGareginyan__convonaut.json")
    assert len(convs) == 7
    assert all(len(c.turns) == 3 and _one_thread(c) for c in convs)
    first = convs[0]
    assert [t.query for t in first.turns] == ["Hi, what's up?", "How do you work?", "Can you recommend a good book?"]
    assert first.turns[1].answer == "I work based on machine learning algorithms."
    assert first.turns[2].answer_index is None and first.turns[2].answer == ""


def test_broken_records_refuse_the_whole_file_unless_skipped_and_then_keep_every_branch():
    path = P / "chatgpt__cl0ver012__chatlore.json"
    with pytest.raises(FormatError) as refused:
        read_conversations(path)
    message = str(refused.value)
    assert "\n" not in message
    assert "record 2 (conversation 'Broken record'): 'mapping' must be an object of message nodes" in message
    assert "record 3 (conversation 'No id')" in message and "skip bad re" in message

    result = import_file(path, skip_bad=True, max_bytes=None)
    assert [(c.name, len(c.turns)) for c in result.conversations] == [("Postgres indexing", 3), ("Trip ideas", 1)]
    regenerated, kept, follow_up = result.conversations[0].turns
    assert regenerated.parent_id is None and kept.parent_id is None  # two answers to one question: siblings
    assert regenerated.answer == "First answer that was regenerated."
    assert follow_up.parent_id == kept.id
    assert follow_up.query.startswith("[image]\nHere is the plan output.")  # the multimodal part, as a placeholder
    assert [m.kind for m in follow_up.messages].count(TOOL_RESULT) == 1
    assert follow_up.answer == "Done. The query should now use the index."
