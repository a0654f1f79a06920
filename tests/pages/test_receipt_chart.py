"""The receipt's budget bar reads at a glance: the budget is the scale, not a far-off context window."""

import re

import pytest

from core.analysis.debug_view import Receipt
from ui.receipt_view import budget_bar, budget_html, context_summary, dropped_summary, receipt_caption


def receipt(**kw) -> Receipt:
    base = dict(
        node_id="n",
        title="N",
        rows=[],
        used_by_origin={"system": 26, "memory history": 89, "current query": 40},
        dropped_tokens=60,
        dropped_by_reason={"outside_window": 60},
        limit=None,
        context_size=16_384,
        prompt_tokens=155,
        exact=True,
        encoding="o200k_base",
        budget_note="",
        reply=None,
        model=None,
        notes=[],
    )
    return Receipt(**{**base, **kw})


def test_without_a_budget_the_bar_fills_its_width_and_the_context_is_said_in_words():
    bar = budget_bar(receipt())
    assert 215 <= bar.scale < 300  # prompt + dropped, not 16,384
    assert not bar.lines  # no context line far off the scale
    assert [(s.label, s.tokens) for s in bar.segments] == [
        ("system", 26),
        ("memory history", 89),
        ("current query", 40),
        ("dropped", 60),
    ]
    assert context_summary(receipt()) == "Context 16,384 tokens: this call used 155 (1%), 16,229 were left."


def test_a_budget_is_drawn_on_the_scale_and_its_label_does_not_share_a_side_with_the_context():
    bar = budget_bar(receipt(limit=400, context_size=500))
    assert bar.scale >= 66 + 400  # the budget line (fixed prompt + budget) is on the scale
    assert sorted((line.at, line.label) for line in bar.lines) == [(466, "history budget 400"), (500, "context 500")]
    page = budget_html(bar)
    # The budget's label above the bar, the context's under it.
    assert 'ml-mark-label-budget" style="right:' in page and 'ml-mark-label-context" style="right:' in page
    assert page.index("history budget 400") < page.index("context 500")


def test_a_mark_near_the_start_labels_rightwards_so_it_stays_inside_the_bar():
    r = receipt(limit=10, used_by_origin={"system": 5, "memory history": 400}, prompt_tokens=405)
    assert budget_bar(r).lines[0].at == 15  # the 5 fixed tokens and the budget of 10
    page = budget_html(budget_bar(r))
    assert 'ml-mark-label-budget" style="left:' in page


def test_the_stretches_widths_are_their_share_of_the_scale():
    bar = budget_bar(receipt(dropped_tokens=0, dropped_by_reason={}))
    page = budget_html(bar)
    widths = [float(w) for w in re.findall(r'class="ml-seg[^"]*" style="width:([0-9.]+)%', page)]
    assert widths == pytest.approx([100 * n / bar.scale for n in (26, 89, 40)], abs=0.01)
    assert sum(widths) == pytest.approx(100 / 1.1, abs=0.05)  # the prompt fills the bar but its last tenth


def test_the_bar_shows_its_labels_as_text_and_loads_nothing():
    """An origin or reason label is escaped like every other text: it can never add markup."""
    r = receipt(dropped_by_reason={'<img src=x onerror="alert(1)">': 60})
    page = budget_html(budget_bar(r))
    assert "<img" not in page and 'onerror="' not in page
    assert page.count("<") == page.count(">")  # every tag the bar opens is its own


def test_the_dropped_bar_is_not_called_an_overflow_and_its_reasons_are_said_under_the_chart():
    r = receipt(dropped_tokens=75, dropped_by_reason={"outside_window": 60, "granularity": 15})
    dropped = [s for s in budget_bar(r).segments if s.dropped]
    assert len(dropped) == 1 and dropped[0].tokens == 75 and dropped[0].label == "dropped"
    # the pipeline's order (granularity before the window) and the ledger's words for each reason
    assert "intermediate message 15, outside window 60" in dropped[0].hover
    assert dropped_summary(r) == "Dropped 75 tokens: intermediate message 15, outside window 60."
    assert (
        dropped_summary(receipt(dropped_tokens=60, dropped_by_reason={"over_budget": 60}))
        == "Dropped 60 tokens: over token budget 60."
    )


def test_nothing_dropped_draws_no_dropped_bar_and_says_nothing():
    r = receipt(dropped_tokens=0, dropped_by_reason={})
    assert not [s for s in budget_bar(r).segments if s.dropped]
    assert "ml-seg-dropped" not in budget_html(budget_bar(r))
    assert dropped_summary(r) == ""


def test_a_text_form_prompts_history_is_memory_history_and_the_budget_line_is_after_the_rest():
    """A completion or classifier prompt holds its history inside its template message: the bar
    shows that share as memory history, and the budget line starts after the prompt without it."""
    from core.analysis.debug_view import receipt as receipt_of

    run = {
        "node_id": "n",
        "prompt": [
            {
                "role": "user",
                "origin": "template",
                "content": "Q\nHuman: hi\nAssistant: yo",
                "tokens": 30,
                "template": "Q\n#histories#",
                "history_tokens": 12,
            }
        ],
    }
    r = receipt_of(run, "N", exact=True, encoding="o200k_base")
    assert r.used_by_origin == {"template": 18, "memory history": 12}
    r = receipt(
        used_by_origin=r.used_by_origin,
        dropped_tokens=0,
        dropped_by_reason={},
        limit=100,
        prompt_tokens=33,
        context_size=None,
    )
    (line,) = [line.at for line in budget_bar(r).lines]
    assert line == 33 - 12 + 100


def test_the_receipts_first_line_counts_in_the_right_number():
    one = receipt(rows=["query"], prompt_tokens=1, model="gpt-4o")
    assert receipt_caption(one) == "1 message · 1 prompt token · tokens exact (o200k_base) · model gpt-4o"
    many = receipt(rows=["system", "query"], prompt_tokens=1_234, exact=False, model=None)
    assert receipt_caption(many) == "2 messages · 1,234 prompt tokens · tokens estimated (o200k_base)"
    stand_in = receipt(rows=["query"], prompt_tokens=9, model="memlens/demo", configured_model="gpt-4o")
    assert receipt_caption(stand_in) == (
        "1 message · 9 prompt tokens · tokens exact (o200k_base) for the node's "
        "model gpt-4o · answered by memlens/demo in its place"
    )


def test_a_folded_history_message_shows_its_first_line_and_says_more_follows():
    from ui.receipt_view import first_line

    assert first_line("Your order is 4411.\nIt ships Monday.") == "Your order is 4411. …"
    assert first_line("word " * 40) == ("word " * 40).strip()[:140] + "…"
    assert first_line("  one line only  ") == "one line only"
    assert first_line("") == "" and first_line("x" * 140) == "x" * 140
