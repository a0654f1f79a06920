"""One codec for a ledger (``Ledger.to_dict`` / ``Ledger.from_dict``) and one for a message
(``Message.to_dict`` / ``Message.from_dict``): records, the store and the API all go through them."""

import json

from core.flow.records import NodeRun
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import ANSWER, FileRef, Message, ToolCall
from core.model.ledger import ENTRY_FIELDS, HEADER_FIELDS, Ledger
from core.store.ledger_codec import pack_ledger, unpack_ledger
from tests.builders import linear


def _summarised_ledger() -> tuple:
    conv = linear(8, answer=lambda i: f"answer number {i} " + "with quite a few words " * 20)
    replay = Replay(conv, MemoryConfig(strategy="summary_buffer", max_history_tokens=120))
    ledger = replay.ledger_at(7)
    assert ledger.synthetic, "the summary buffer should have folded earlier turns into a summary"
    return conv, ledger


def test_a_ledger_with_a_summary_survives_json_and_back():
    _, ledger = _summarised_ledger()
    data = json.loads(json.dumps(ledger.to_dict()))
    assert Ledger.from_dict(data) == ledger


def test_the_lossless_form_lists_every_entry_field_and_the_header():
    _, ledger = _summarised_ledger()
    data = ledger.to_dict()
    assert list(data) == ["turn", "entries", *HEADER_FIELDS[1:], "synthetic"]
    assert all(list(e) == list(ENTRY_FIELDS) for e in data["entries"])


def test_the_store_packs_a_ledger_and_its_dict_alike_and_unpacks_the_same_ledger():
    conv, ledger = _summarised_ledger()
    packed = pack_ledger(ledger)
    assert packed == pack_ledger(ledger.to_dict())
    assert unpack_ledger(json.loads(json.dumps(packed)), conv, 7) == ledger
    assert unpack_ledger(ledger.to_dict(), conv, 7) == ledger


def test_a_node_run_record_carries_its_ledger_through_the_ledger_codec():
    _, ledger = _summarised_ledger()
    run = NodeRun(node_id="llm", type="llm", title="LLM", emulated=False, ledger=ledger)
    assert NodeRun.from_dict(json.loads(json.dumps(run.to_dict()))).ledger == ledger


def test_a_message_as_exchanged_leaves_out_the_files_and_usage_only_a_recording_has():
    m = Message(
        "assistant",
        "sure",
        ANSWER,
        "7:answer",
        name="bot",
        tool_calls=(ToolCall("c1", "calc", "{}"),),
        files=(FileRef("image", "https://example.com/a.png"),),
        usage=(120, 8),
    )
    full = m.to_dict()
    assert full["files"] and full["usage"] == [120, 8]
    exchanged = m.to_dict(exchanged_only=True)
    assert {k: v for k, v in full.items() if k not in ("files", "usage")} == exchanged
    assert Message.from_dict(full) == m
    assert Message.from_dict(exchanged) == Message(
        "assistant", "sure", ANSWER, "7:answer", name="bot", tool_calls=(ToolCall("c1", "calc", "{}"),)
    )


def test_an_unpacked_ledger_lists_its_entries_only_when_they_are_read():
    """Opening a turn of a long conversation builds its kept entries and its counts, not an entry per
    earlier message: the Debugger's Inspect reads those; a view that lists them builds them then."""
    from tests.builders import branched

    conv = branched(40)
    for config in (MemoryConfig(window=4), MemoryConfig(strategy="window", window=6)):
        replay = Replay(conv, config)
        for position in (12, 39):
            full = replay.ledger_at(position)
            stored = unpack_ledger(json.loads(json.dumps(pack_ledger(full))), conv, position)
            assert stored.kept == full.kept and stored.dropped_count() == full.dropped_count()
            assert stored.tokens_by_reason() == Ledger.tokens_by_reason(full)
            assert stored.entries_at([3, 4]) == [e for e in full.entries if e.position in (3, 4)]
            for reasons in (["outside_window"], ["other_branch", "kept"], ["memory_off"]):
                assert stored.positions_with(reasons) == Ledger.positions_with(full, reasons)
                for n in (0, 1, 5, 1000):
                    assert stored.last_entries_with(reasons, n) == Ledger.last_entries_with(full, reasons, n)
            assert stored._entries is None  # none of those listed every entry
            assert stored == full and stored._entries is not None  # comparing does


def test_the_ledgers_of_a_growing_conversation_share_its_running_token_totals():
    """Every ledger of a conversation reads one running total of its messages' tokens; turns added later
    extend it, so a later turn's dropped tokens count the new messages too."""
    from dataclasses import replace as replaced

    from tests.builders import branched

    whole = branched(40)
    conv = replaced(whole, turns=list(whole.turns[:20]))
    replay_config = MemoryConfig(window=4)
    early = unpack_ledger(json.loads(json.dumps(pack_ledger(Replay(conv, replay_config).ledger_at(12)))), conv, 12)
    assert early.tokens_by_reason() == Ledger.tokens_by_reason(Replay(conv, replay_config).ledger_at(12))
    conv.turns.extend(whole.turns[20:])  # turns are only ever added
    full = Replay(conv, replay_config).ledger_at(39)
    late = unpack_ledger(json.loads(json.dumps(pack_ledger(full))), conv, 39)
    assert late.tokens_by_reason() == Ledger.tokens_by_reason(full)
    assert sum(late.tokens_by_reason().values()) == sum(e.tokens for e in full.entries)
