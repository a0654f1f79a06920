"""The ledger table's rows: every earlier message with its reason in words, and what the memory sends
in place of dropped ones right after the message it stands in for, worded as the report words it."""

from __future__ import annotations

from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.report.html import _sent_instead
from tests.memory.test_dify_agent_react import LOOKUP, two_turns
from ui.ledger_table import ledger_rows


def test_a_scratchpad_is_listed_right_after_the_step_it_stands_in_for():
    conv = two_turns(("Let me check.", [LOOKUP]))
    ledger = Replay(conv, MemoryConfig(strategy="dify_agent", agent_strategy="react")).ledger(2)
    rows = ledger_rows(ledger, conv)
    assert [(r["kept"], r["kind"], r["reason"]) for r in rows] == [
        ("yes", "query", "kept"),
        ("no", "tool_call", "rewritten"),
        ("yes", "scratchpad", "sent instead (scratchpad)"),
        ("no", "tool_result", "rewritten"),
        ("no", "answer", "omitted"),
    ]
    pad = rows[2]
    assert (pad["turn"], pad["role"], pad["why"]) == ("1", "assistant", "scratchpad standing for turn 1")
    assert pad["message"].startswith('Thought: Let me check. Action: {"action": "lookup"')
    (synthetic,) = ledger.synthetic
    html = _sent_instead(synthetic)
    assert f'<td class="kept">{pad["reason"]}</td><td>{pad["why"]}</td>' in html


def test_show_dropped_lists_what_the_memory_left_out_and_not_what_it_could_never_send():
    """A window of 1 on a branched conversation: the sibling branch's messages are not eligible, the
    older ones on the thread outside the window; 'dropped' lists only the latter, as many as the
    page's Dropped metric counts."""
    from core.model.conversation import ANSWER, QUERY, Conversation, Message, Turn
    from core.model.ledger import OTHER_BRANCH, OUTSIDE_WINDOW
    from ui.ledger_table import LedgerRows

    def turn(tid, parent, n):
        return Turn(
            id=tid,
            parent_id=parent,
            messages=(Message("user", f"q{n}", QUERY, f"{tid}:q"), Message("assistant", f"a{n}", ANSWER, f"{tid}:a")),
            query_index=0,
            answer_index=1,
        )

    conv = Conversation(
        id="c",
        turns=[
            turn("t1", None, 1),
            turn("t2", "t1", 2),
            turn("t2b", "t1", 3),
            turn("t3", "t2b", 4),
            turn("t4", "t3", 5),
        ],
    )
    ledger = Replay(conv, MemoryConfig(window=2, fidelity="documented")).ledger_at(4)
    reasons = [e.reason for e in ledger.entries]
    assert OTHER_BRANCH in reasons and OUTSIDE_WINDOW in reasons
    rows = LedgerRows(ledger, conv, position=4)
    shown = [rows.row(i) for i in rows.select("dropped", None)]
    assert len(shown) == ledger.dropped_count() == reasons.count(OUTSIDE_WINDOW)
    assert {r["reason"] for r in shown} == {"outside window"}
    assert rows.select("all", None) == list(range(len(rows))) == list(range(len(ledger_rows(ledger, conv))))
    assert [rows.row(i)["kept"] for i in rows.select("kept", None)] == ["yes"] * len(ledger.kept)
    # A reason picked: only its rows, in order; every reason the rows give is offered.
    assert rows.reasons() == sorted({r["reason"] for r in ledger_rows(ledger, conv, position=4)})
    other = [i for i in range(len(rows)) if rows.row(i)["reason"] == "on another branch"]
    assert other and rows.select("all", ["on another branch"]) == other
    assert rows.select("dropped", ["on another branch"]) == []  # never this node's to send: not dropped


def test_the_inspectors_ledger_table_shows_each_snippet_whole_and_each_reasons_sentence_once():
    """The Debugger's inspector is a narrow column: its ledger table wraps, so no snippet is cut; the
    reason's whole sentence is each cell's hover and is said once under the table; text stays literal."""
    from tests.builders import linear
    from ui.html import plain
    from ui.ledger_table import ledger_html

    said = "Hi, I'm Dana <img src=x onerror=alert(1)> and my order number is 4411, placed on Monday morning."
    conv = linear(6, query=lambda n: said if n == 1 else f"question {n}")
    ledger = Replay(conv, MemoryConfig(window=4)).ledger(6)
    rows = ledger_rows(ledger, conv)
    html = ledger_html(rows)
    assert html.startswith('<div class="ml-ledger"><table>') and "\n" not in html  # one HTML block
    assert plain(said).replace("\u2060", "") in html and "<img" not in html  # whole, and literal
    why = rows[0]["why"]
    assert (
        why.startswith("outside window of 4 rows")
        and html.count(f'title="{plain(why).replace(chr(0x2060), "")}"')
        == sum(r["reason"] == "outside window" for r in rows)
        == 4
    )
    assert html.count(plain(why).replace("\u2060", "") + "</div>") == 1  # the sentence said once under the table
    assert html.count("<tr") == 1 + len(rows)
