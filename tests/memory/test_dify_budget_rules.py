"""The Dify strategy's budget and window notes, branch by branch: the numbers each profile prunes
with, and the words the receipt shows for them (core/memory/strategies/dify.py)."""

import pytest

from core.memory.config import MemoryConfig
from core.memory.strategies.base import Budget
from core.memory.strategies.dify import DifyStrategy, window_note
from core.model.tokens import ModelFacts

DIFY = DifyStrategy()
KNOWN = ModelFacts("gpt-4o-mini", 16_384, 4_096, True, "litellm model map")
UNKNOWN = ModelFacts("someone/model", None, None, False, "unknown")


@pytest.mark.parametrize(
    "window, note",
    [
        (None, ""),
        (0, ""),
        (1, ""),
        (500, ""),
        (501, "window 501 runs as 500: Dify caps the rows it fetches at 500"),
        (2_000, "window 2,000 runs as 500: Dify caps the rows it fetches at 500"),
        (-1, "window -1 runs as 500: Dify reads a size of 0 or less as no limit (500 rows)"),
    ],
)
def test_a_window_dify_does_not_take_as_set_is_named(window, note):
    assert window_note(window) == note


def test_as_shipped_without_plugin_token_counting_nothing_is_pruned_and_the_receipt_says_why():
    config = MemoryConfig(fidelity="code", max_tokens=512)
    assert DIFY.budget_limit(config, KNOWN, 40) == (None, 0)
    assert DIFY.budget(config, KNOWN, 40) == Budget(
        None, "plugin token counting is off (Dify ships it off), so history is never pruned by tokens", 16_384
    )


def test_as_shipped_with_plugin_token_counting_the_budget_is_context_minus_max_tokens_minus_an_empty_list():
    config = MemoryConfig(fidelity="code", max_tokens=512, plugin_token_counting=True)
    assert DIFY.budget_limit(config, KNOWN, 40) == (16_384 - 512 - 3, 3)
    budget = DIFY.budget(config, KNOWN, 40)
    assert budget == Budget(
        16_384 - 512 - 3,
        "16,384 context − 512 max_tokens − 3 (Dify counts an empty list: the "
        "prompt is not subtracted); the history is compared with it counted "
        "as a list (+3)",
        16_384,
        3,
    )
    small = MemoryConfig(fidelity="code", max_tokens=600, context_size=500, plugin_token_counting=True)
    assert DIFY.budget_limit(small, KNOWN, 40) == (0, 3)  # never below 0


def test_as_shipped_an_unknown_context_size_falls_back_to_2000_counted_as_a_list():
    config = MemoryConfig(fidelity="code", model="someone/model", plugin_token_counting=True)
    assert DIFY.budget_limit(config, UNKNOWN, 40) == (2_000, 3)
    assert DIFY.budget(config, UNKNOWN, 40) == Budget(
        2_000,
        "context size of someone/model unknown: Dify's default budget of 2,000 tokens counted with the "
        "history list's own +3",
        None,
        3,
    )


def test_as_the_docs_describe_the_budget_subtracts_the_prompt_and_has_no_list_overhead():
    config = MemoryConfig(fidelity="documented", max_tokens=512)
    assert DIFY.budget_limit(config, KNOWN, 40) == (16_384 - 512 - 40, 0)
    assert DIFY.budget(config, KNOWN, 40) == Budget(
        16_384 - 512 - 40, "16,384 context − 512 max_tokens − 40 prompt", 16_384
    )
    tight = MemoryConfig(fidelity="documented", max_tokens=500, context_size=520)
    assert DIFY.budget_limit(tight, KNOWN, 40) == (0, 0)
    unknown = MemoryConfig(fidelity="documented", model="someone/model")
    assert DIFY.budget_limit(unknown, UNKNOWN, 40) == (2_000, 0)
    assert DIFY.budget(unknown, UNKNOWN, 40) == Budget(
        2_000, "context size of someone/model unknown: Dify's default budget of 2,000 tokens", None, 0
    )


def test_a_set_context_size_wins_over_the_models():
    config = MemoryConfig(fidelity="documented", max_tokens=0, context_size=1_000)
    assert DIFY.budget_limit(config, KNOWN, 10) == (990, 0)
    assert DIFY.budget(config, KNOWN, 10).context_size == 1_000


def test_a_node_that_passes_its_memory_no_limit_is_budgeted_a_fixed_2000_whatever_the_context():
    """Dify's Agent node: TokenBufferMemory's default limit, counted as a list as shipped, with the
    model's context only shown beside it; without plugin token counting nothing prunes."""
    shipped = MemoryConfig(fidelity="code", max_tokens=512, plugin_token_counting=True, history_budget=2_000)
    assert DIFY.budget_limit(shipped, KNOWN, 40) == (2_000, 3)
    assert DIFY.budget(shipped, KNOWN, 40) == Budget(
        2_000,
        "2,000 tokens whatever the context: the node passes its memory no limit, so Dify's default applies; "
        "the history is compared with it counted as a list (+3)",
        16_384,
        3,
    )
    assert DIFY.budget_limit(shipped, UNKNOWN, 40) == (2_000, 3)
    docs = MemoryConfig(fidelity="documented", max_tokens=512, history_budget=2_000)
    assert DIFY.budget_limit(docs, KNOWN, 40) == (2_000, 0)
    assert DIFY.budget(docs, KNOWN, 40) == Budget(
        2_000,
        "2,000 tokens whatever the context: the node passes its memory no limit, so Dify's default applies",
        16_384,
        0,
    )
    assert DIFY.budget_limit(MemoryConfig(fidelity="code", history_budget=2_000), KNOWN, 40) == (None, 0)
