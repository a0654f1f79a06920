"""The receipt's budget bar reads at a glance: the budget is the scale, not a far-off context window."""

from core.analysis.debug_view import Receipt
from ui.receipt_view import budget_figure, context_summary, dropped_summary, receipt_caption


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


def test_without_a_budget_the_bar_fills_the_chart_and_the_context_is_said_in_words():
    fig = budget_figure(receipt())
    low, high = fig.layout.xaxis.range
    assert low == 0 and 215 <= high < 300  # prompt + overflow, not 16,384
    assert not fig.layout.shapes  # no context line far off the scale
    assert fig.layout.legend.y < 0 and fig.layout.legend.yanchor == "top"  # under the axis, outside the plot
    assert context_summary(receipt()) == "Context 16,384 tokens: this call used 155 (1%), 16,229 were left."


def test_a_budget_is_drawn_on_the_scale_and_its_label_does_not_share_a_side_with_the_context():
    fig = budget_figure(receipt(limit=400, context_size=500))
    assert fig.layout.xaxis.range[1] >= 66 + 400  # the budget line (fixed prompt + budget) is on the scale
    lines = sorted(shape.x0 for shape in fig.layout.shapes)
    assert lines == [466, 500]
    positions = {a.text: (a.xanchor, a.yanchor) for a in fig.layout.annotations}
    assert positions["history budget 400"] != positions["context 500"]


def test_the_dropped_bar_is_not_called_an_overflow_and_its_reasons_are_said_under_the_chart():
    r = receipt(dropped_tokens=75, dropped_by_reason={"outside_window": 60, "granularity": 15})
    dropped = [bar for bar in budget_figure(r).data if bar.name.startswith("dropped")]
    assert len(dropped) == 1 and dropped[0].x == (75,) and dropped[0].name == "dropped"  # short: one legend row
    # the pipeline's order (granularity before the window) and the ledger's words for each reason
    assert "intermediate message 15, outside window 60" in dropped[0].hovertemplate
    assert dropped_summary(r) == "Dropped 75 tokens: intermediate message 15, outside window 60."
    assert (
        dropped_summary(receipt(dropped_tokens=60, dropped_by_reason={"over_budget": 60}))
        == "Dropped 60 tokens: over token budget 60."
    )


def test_nothing_dropped_draws_no_dropped_bar_and_says_nothing():
    r = receipt(dropped_tokens=0, dropped_by_reason={})
    assert not [bar for bar in budget_figure(r).data if bar.name.startswith("dropped")]
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
    (line,) = [shape.x0 for shape in budget_figure(r).layout.shapes]
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
