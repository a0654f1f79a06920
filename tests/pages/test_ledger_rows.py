"""The ledger table's rows: every earlier message with its reason in words, and what the memory sends
in place of dropped ones right after the message it stands in for, worded as the report words it."""

from __future__ import annotations

from core.memory.replay import MemoryConfig, Replay
from core.report.html import _sent_instead
from tests.memory.test_dify_agent_react import LOOKUP, two_turns
from ui.ledger_table import ledger_rows


def test_a_scratchpad_is_listed_right_after_the_step_it_stands_in_for():
    conv = two_turns(("Let me check.", [LOOKUP]))
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent", agent_strategy="react")).ledger(2)
    rows = ledger_rows(ledger, conv)
    assert [(r["kept"], r["kind"], r["reason"]) for r in rows] == [
        ("yes", "query", "kept"), ("no", "tool_call", "rewritten"), ("yes", "scratchpad", "sent instead (scratchpad)"),
        ("no", "tool_result", "rewritten"), ("no", "answer", "omitted")]
    pad = rows[2]
    assert (pad["turn"], pad["role"], pad["why"]) == ("1", "assistant", "scratchpad standing for turn 1")
    assert pad["message"].startswith('Thought: Let me check. Action: {"action": "lookup"')
    (synthetic,) = ledger.synthetic
    html = _sent_instead(synthetic)
    assert f'<td class="kept">{pad["reason"]}</td><td>{pad["why"]}</td>' in html
