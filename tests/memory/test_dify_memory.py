"""The ``dify`` strategy against spec/dify-memory.md §8 items 1–14 and 24, one test per item."""

import json
import random

import pytest

from core.analysis.compare import retention_matrix
from core.flow.prompt import to_prompt_messages
from core.io import parse_conversations
from core.memory.config import MemoryConfig
from core.memory.replay import Replay, compute_ledger
from core.model.conversation import ANSWER, QUERY, TOOL_CALL, UUID_NIL, FileRef, Message, ToolCall, Turn
from core.model.ledger import EMPTY, KEPT, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET
from core.model.tokens import counter_for
from tests.builders import dify, linear, record

DOC = MemoryConfig(fidelity="documented")
CODE = MemoryConfig(fidelity="code")


def kept_refs(ledger):
    return [e.ref for e in ledger.entries if e.kept]


def kept_turns(ledger):
    return sorted({e.turn for e in ledger.entries if e.kept})


# 1. History rows: limited to min(window, 500) when the window is enabled and > 0, else 500.
def test_item1_window_limits_rows_and_disabled_window_is_the_500_cap():
    conv = linear(503)
    assert kept_turns(Replay(conv, DOC.with_(window=3)).ledger(503)) == [500, 501, 502]
    no_window = Replay(conv, DOC).ledger(503)
    assert kept_turns(no_window) == list(range(3, 503))  # 500 earlier turns
    assert {e.reason for e in no_window.entries if e.turn < 3} == {OUTSIDE_WINDOW}


def test_item1_window_of_zero_means_no_limit_as_in_dify():
    conv = linear(8)
    assert kept_turns(Replay(conv, DOC.with_(window=0)).ledger(8)) == list(range(1, 8))


# 2. The row limit is applied before thread extraction and counts rows (turns), not prompt messages.
def test_item2_code_fidelity_limits_rows_before_the_thread_is_extracted():
    # 1 ← 2, then 3 regenerates 2 (same parent), then 4 continues after 3.
    conv = dify([("1", None), ("2", "1"), ("3", "1"), ("4", "3")])
    ledger = Replay(conv, CODE.with_(window=3)).ledger(4)
    # The 3 newest rows are 4 (the placeholder), 3 and 2; 2 is another branch: only turn 3 is history.
    assert kept_turns(ledger) == [3]
    reasons = {e.turn: e.reason for e in ledger.entries if e.role == "user"}
    assert reasons == {1: OUTSIDE_WINDOW, 2: OTHER_BRANCH, 3: KEPT}


def test_item2_window_counts_turns_not_messages():
    conv = linear(6)
    ledger = Replay(conv, DOC.with_(window=2)).ledger(6)
    assert len(ledger.kept) == 4  # 2 turns = 4 prompt messages


# 3. The thread walk starts from the newest row of the conversation.
def test_item3_memory_follows_the_branch_of_the_newest_row():
    conv = dify([("1", None), ("2", "1"), ("3", "2"), ("4", "1")])
    ledger = Replay(conv, DOC).ledger(4)
    assert kept_turns(ledger) == [1]
    assert {e.turn: e.reason for e in ledger.entries}[3] == OTHER_BRANCH


# 4. A row with a NULL/empty parent is included and ends the walk.
def test_item4_null_parent_row_is_kept_and_older_rows_are_not():
    conv = dify([("1", None), ("2", "1"), ("3", None), ("4", "3")])
    ledger = Replay(conv, DOC).ledger(4)
    assert kept_turns(ledger) == [3]
    assert {e.turn: e.reason for e in ledger.entries}[1] == OTHER_BRANCH


# 5. A row is kept if its id is the expected parent, or the expected parent is UUID_NIL.
def test_item5_uuid_nil_keeps_the_next_older_row_and_ids_are_followed():
    conv = dify([("1", UUID_NIL), ("2", UUID_NIL), ("x", "1"), ("3", "x")])
    ledger = Replay(conv, DOC).ledger(4)
    assert kept_turns(ledger) == [1, 3]
    assert {e.turn: e.reason for e in ledger.entries}[2] == OTHER_BRANCH


# 6. Service API messages are stored with UUID_NIL: the history is linear.
def test_item6_service_api_history_is_linear():
    data = {
        "data": [
            {
                "id": f"m{i}",
                "conversation_id": "c",
                "parent_message_id": UUID_NIL,
                "query": f"q{i}",
                "answer": f"a{i}",
                "created_at": 1000 + i,
            }
            for i in range(4)
        ]
    }
    conv = parse_conversations(json.dumps(data))[0]
    assert kept_refs(Replay(conv, DOC).ledger(4)) == [
        "m0:query",
        "m0:answer",
        "m1:query",
        "m1:answer",
        "m2:query",
        "m2:answer",
    ]


# 7. Only the current turn's placeholder (the newest thread row) is left out of its own history.
def test_item7_the_current_turn_is_never_its_own_history_but_failed_turns_are():
    conv = dify(
        [
            record("1", None, "q1", "a1"),
            record("2", "1", "q2", "", status="error", answer_tokens=0),
            record("3", "2", "q3", ""),
        ]
    )
    ledger = Replay(conv, DOC).ledger(3)
    assert [e.ref for e in ledger.entries] == ["1:query", "1:answer", "2:query", "2:answer"]
    assert kept_refs(ledger) == ["1:query", "1:answer", "2:query"]


def test_read_as_text_a_failed_turns_empty_answer_is_kept_as_an_empty_line():
    """A node that reads its history as text lines (completion models, the Question Classifier) sends
    the empty answer as ``Assistant: ``: the chat filter that drops empty messages does not apply."""
    conv = dify(
        [
            record("1", None, "q1", "a1"),
            record("2", "1", "q2", "", status="error", answer_tokens=0),
            record("3", "2", "q3", "a3"),
            record("4", "3", "q4", ""),
        ]
    )
    text = MemoryConfig(window=10, history_as_text=True)
    tool = dify(
        [
            record("1", None, "q1", "a1"),
            Turn(
                id="2",
                parent_id="1",
                query_index=0,
                answer_index=2,
                messages=(
                    Message("user", "q2", QUERY, "2:query"),
                    Message("assistant", "", TOOL_CALL, "2:call", tool_calls=(ToolCall("c", "lookup", "{}"),)),
                    Message("assistant", "", ANSWER, "2:answer"),
                ),
            ),
            record("3", "2", "q3", ""),
        ]
    )
    for config, reason, kept in ((text, KEPT, 6), (MemoryConfig(window=10), EMPTY, 5)):
        # Summaries first, on a replay of their own: the per-turn walk counts the texts itself.
        assert Replay(conv, config).summaries()[-1].kept == kept
        replay = Replay(conv, config)
        ledger = replay.ledger_at(3)
        assert [e.reason for e in ledger.entries if e.ref == "2:answer"] == [reason]
        assert len(ledger.kept) == kept == replay.summaries()[-1].kept
        assert replay.drops_empty is (reason == EMPTY)
        # A tool call without content is not an empty message, read as text or not; the per-turn walk
        # and the ledger (each on a replay of its own) keep the same messages.
        all_messages = config.with_(granularity="all_messages")
        summary = Replay(tool, all_messages).summaries()[-1]
        kept_entries = Replay(tool, all_messages).ledger_at(2).kept
        assert [e.ref for e in kept_entries] == ["1:query", "1:answer", "2:query", "2:call"] + (
            ["2:answer"] if reason == KEPT else []
        )
        assert (summary.kept, summary.history_tokens) == (len(kept_entries), sum(e.tokens for e in kept_entries))
        # The heatmap reads the same rule from the walk (Compare and the report).
        matrix = retention_matrix(Replay(conv, config))
        column = next(c for c, col in enumerate(matrix.columns) if col.ref == "2:answer")
        assert matrix.cells[matrix.rows.index(4)][column] == reason
    assert text.to_dict()["history_as_text"] is True and MemoryConfig.from_dict(text.to_dict()) == text
    assert "history_as_text" not in MemoryConfig(window=10).to_dict()


@pytest.mark.parametrize(
    "reserve, budget", [(None, 10_000 - 50 - 3), (0, 10_000 - 50 - 40), (1000, 10_000 - 50 - 1040)]
)
def test_the_code_profiles_budget_counts_the_nodes_own_prompt_only_with_a_prompt_reserve(reserve, budget):
    """The LLM node budgets with an empty list (3); the Question Classifier (reserve 0) and the
    Parameter Extractor (1,000) with their prompt without history, plus the reserve."""
    from core.memory.strategies import get_strategy
    from core.model.tokens import model_facts

    config = MemoryConfig(
        window=10, context_size=10_000, max_tokens=50, plugin_token_counting=True, prompt_reserve=reserve
    )
    assert get_strategy("dify").budget_limit(config, model_facts("gpt-4o-mini"), 40) == (budget, 3)
    made = get_strategy("dify").budget(config, model_facts("gpt-4o-mini"), 40)
    assert (made.limit, made.overhead, made.context_size) == (budget, 3, 10_000)  # the list's own +3 is compared
    # Unknown context: Dify's 2,000 whatever the prompt; the documented profile subtracts the prompt alone.
    unknown = config.with_(context_size=None, model="nobody/knows")
    assert get_strategy("dify").budget_limit(unknown, model_facts("nobody/knows"), 40) == (2_000, 3)
    docs = config.with_(fidelity="documented")
    assert get_strategy("dify").budget_limit(docs, model_facts("gpt-4o-mini"), 40) == (10_000 - 50 - 40, 0)
    assert ("prompt_reserve" in config.to_dict()) is (reserve is not None)
    assert MemoryConfig.from_dict(config.to_dict()) == config


def test_a_negative_prompt_reserve_is_refused():
    from core.memory.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        MemoryConfig(prompt_reserve=-1).validate()
    assert str(refused.value) == "prompt_reserve -1 is out of range: it must be 0 or more"
    assert MemoryConfig(prompt_reserve=0).validate().prompt_reserve == 0


# 8. Window size N yields at most N − 1 previous turns in Dify's code.
def test_item8_code_fidelity_window_of_n_gives_n_minus_one_turns():
    conv = linear(10)
    assert kept_turns(Replay(conv, CODE.with_(window=4)).ledger(10)) == [7, 8, 9]
    assert kept_turns(Replay(conv, DOC.with_(window=4)).ledger(10)) == [6, 7, 8, 9]


# 9. Each kept row yields User(query) then Assistant(answer), oldest first; empty answers give empty messages.
def test_item9_rows_become_user_then_assistant_and_empty_answers_are_dropped_as_empty():
    conv = dify([record("1", None, "hello", "hi!"), record("2", "1", "again", ""), record("3", "2", "now", "")])
    replay = Replay(conv, DOC)
    ledger = replay.ledger(3)
    assert [(e.role, e.reason) for e in ledger.entries] == [
        ("user", KEPT),
        ("assistant", KEPT),
        ("user", KEPT),
        ("assistant", EMPTY),
    ]
    assert [m.content for m in replay.history_messages(ledger)] == ["hello", "hi!", "again"]


# 10. User files = belongs_to user or NULL; assistant files = belongs_to assistant; parts: files, then text.
def test_item10_message_files_are_split_by_owner_and_placed_before_the_text():
    data = [
        {
            "id": "m1",
            "parent_message_id": None,
            "query": "look",
            "answer": "a cat",
            "message_files": [
                {"id": "f1", "type": "image", "url": "u1", "belongs_to": "user"},
                {"id": "f2", "type": "image", "url": "u2", "belongs_to": None},
                {"id": "f3", "type": "image", "url": "u3", "belongs_to": "assistant"},
            ],
        }
    ]
    turn = parse_conversations(json.dumps(data))[0].turns[0]
    assert [f.id for f in turn.query_message.files] == ["f1", "f2"]
    assert [f.id for f in turn.answer_message.files] == ["f3"]
    wire = to_prompt_messages([turn.query_message])[0]
    assert [p["type"] for p in wire["content"]] == ["image_url", "image_url", "text"]
    assert wire["content"][-1]["text"] == "look"


# 11. Files are ignored when file upload is disabled; image detail defaults to high.
def test_item11_files_are_plain_text_without_file_upload_and_detail_defaults_to_high():
    msg = Message("user", "see this", "query", "m:query", files=(FileRef("image", "u"),))
    assert to_prompt_messages([msg], file_upload=False)[0]["content"] == "see this"
    assert to_prompt_messages([msg])[0]["content"][0]["image_url"]["detail"] == "high"


# 12. Token pruning pops the single oldest message while over the limit and more than one is left.
def _literal_dify_prune(tokens: list[int], limit: int) -> int:
    """Dify's loop, literally: recount the whole list after every pop. Returns how many were popped."""
    msgs = list(tokens)
    popped = 0
    while sum(msgs) > limit and len(msgs) > 1:
        msgs.pop(0)
        popped += 1
    return popped


@pytest.mark.parametrize("seed", range(40))
def test_item12_budget_pruning_equals_dify_loop(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 12)
    words = ["alpha", "beta gamma", "delta epsilon zeta eta", "theta " * 30, "iota kappa " * 8]
    conv = linear(n, answer=lambda i: rng.choice(words), query=lambda i: rng.choice(words))
    context = rng.randint(30, 400)
    replay = Replay(conv, DOC.with_(context_size=context))
    ledger = replay.ledger(n)
    eligible = [e for e in ledger.entries]
    limit = ledger.budget
    expected_pops = _literal_dify_prune([e.tokens for e in eligible], limit)
    assert [e.reason for e in eligible[:expected_pops]] == [OVER_BUDGET] * expected_pops
    assert all(e.kept for e in eligible[expected_pops:])


def test_item12_pruning_can_leave_an_assistant_message_first_and_keeps_the_last_one():
    conv = linear(3, answer=lambda i: "word " * 50)
    replay = Replay(conv, DOC.with_(context_size=replay_budget_context(conv, 60)))
    ledger = replay.ledger(3)
    kept = ledger.kept
    assert kept[0].role == "assistant"
    tiny = Replay(conv, DOC.with_(context_size=1)).ledger(3)
    assert tiny.budget == 0
    assert [e.ref for e in tiny.kept] == ["2:answer"]  # the last message stays even over budget


def replay_budget_context(conv, budget):
    """A context size that leaves ``budget`` tokens of history for the last turn of ``conv``."""
    fixed = Replay(conv, DOC).fixed_prompt_tokens(len(conv.turns) - 1)
    return budget + fixed


# 13. With plugin token counting off (Dify's default) nothing is pruned by tokens.
def test_item13_code_fidelity_never_prunes_without_plugin_token_counting():
    conv = linear(5, answer=lambda i: "word " * 400)
    ledger = Replay(conv, CODE.with_(context_size=100)).ledger(5)
    assert ledger.budget is None
    assert len(ledger.kept) == 8
    counting = Replay(conv, CODE.with_(context_size=100, plugin_token_counting=True)).ledger(5)
    assert counting.budget == 100 - 3 and len(counting.kept) == 1


# 14. rest = max(context − max_tokens − count([]), 0) in Dify's code (an empty list counts its +3
# priming); 2000 when the context size is unknown.
def test_item14_rest_tokens_in_code_do_not_subtract_the_prompt():
    conv = linear(2)
    code = Replay(conv, CODE.with_(plugin_token_counting=True, max_tokens=1000)).ledger(2)
    assert code.budget == 128_000 - 1000 - 3
    documented = Replay(conv, DOC.with_(max_tokens=1000)).ledger(2)
    assert documented.budget == 128_000 - 1000 - Replay(conv, DOC).fixed_prompt_tokens(1)
    assert Replay(conv, CODE.with_(plugin_token_counting=True, max_tokens=500_000)).ledger(2).budget == 0


def test_item14_unknown_model_gets_the_2000_token_default_and_says_so():
    conv = linear(2)
    ledger = Replay(conv, DOC.with_(model="acme/unknown-model")).ledger(2)
    assert ledger.budget == 2000
    assert "unknown" in ledger.budget_note and "2,000" in ledger.budget_note


def test_documented_budget_subtracts_system_prompt_and_query():
    conv = dify([("1", None, "q", "a"), ("2", "1", "what now?", "")], system="You are terse.")
    replay = Replay(conv, DOC.with_(context_size=1000, max_tokens=100))
    counter = counter_for("gpt-4o-mini")
    expected_prompt = counter.chat("system", "You are terse.") + counter.chat("user", "what now?") + 3
    assert replay.ledger(2).budget == 1000 - 100 - expected_prompt


# 24. sys.dialogue_count = thread length without the placeholder + 1.
def test_item24_dialogue_count_follows_the_thread():
    conv = dify([("1", None), ("2", "1"), ("3", "2"), ("4", "1"), ("5", "4")])
    assert [conv.tree.depth[i] for i in range(5)] == [1, 2, 3, 2, 3]


def test_compute_ledger_is_the_same_as_a_replay_ledger():
    conv = linear(6)
    assert (
        compute_ledger(conv, 5, DOC.with_(window=2)).to_json() == Replay(conv, DOC.with_(window=2)).ledger(6).to_json()
    )
