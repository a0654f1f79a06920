"""ChatGPT exports found in public repositories (tests/fixtures/exports/public, sources in SOURCES.md there):
a real Code Interpreter export, an older export whose nodes link only to their parents, and a fixture with
deliberately broken records. Each reads as the conversation a person saw, or is refused with one clear line."""

from __future__ import annotations

import pytest

from core.io import FormatError, import_text, read_conversations
from core.io.readers.registry import import_file
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, active_thread
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


def test_librechat_exports_keep_every_branch_and_show_the_newest():
    """LibreChat's own import fixtures (its export's three shapes): an older recursive export under
    `messagesTree`, a nested tree with an edit and a regeneration, and a flat list with two first messages."""
    (linear,) = read_conversations(P / "librechat__danny-avila__LibreChat__export.json")
    assert len(linear.turns) == 3 and _one_thread(linear)
    assert linear.turns[0].query.startswith("What is the fuel consumption")

    (tree,) = read_conversations(P / "librechat__danny-avila__LibreChat__tree.json")
    first, thanks_a, thanks_b, happy, lol = tree.turns
    assert [t.query for t in tree.turns] == [first.query, "thanks", "thanks", "does coding make you happy", "lol"]
    assert thanks_a.parent_id == thanks_b.parent_id == lol.parent_id == first.id  # a regeneration, then an edit
    assert happy.parent_id == thanks_b.id
    assert [tree.turns[i].id for i in active_thread(tree)] == [
        first.id,
        lol.id,
    ]  # the newest sibling at each fork, as LibreChat shows
    assert tree.system_prompt == "You are an expert software engineer."  # options.promptPrefix

    (flat,) = read_conversations(P / "librechat__danny-avila__LibreChat__opts-nonr-branches.json")
    story_a, story_b, longer = flat.turns
    assert story_a.parent_id is story_b.parent_id is longer.parent_id is None
    assert story_a.query == story_b.query == "tell me a long story" and story_a.answer != story_b.answer
    assert [flat.turns[i].id for i in active_thread(flat)] == [longer.id]


def test_a_real_open_webui_chat_export_reads_as_its_one_exchange():
    (conv,) = read_conversations(P / "openwebui__yetanotherchris__openwebui-importer.json")
    assert conv.name == "🧠 Goldwater Rule Ethics"
    (turn,) = conv.turns
    assert turn.query.startswith("what was the ruling in the US")
    assert turn.answer.startswith("The principle you''re referring to is known as the")  # its text, quotes as found
