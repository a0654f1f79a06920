"""A real Dify export with anything changed anywhere in its graph or its variables is imported or
refused with one clear error, and a flow that imports runs its turns or fails them with one — never
another exception. Each example puts an arbitrary value at one or two places of a shared sample."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import MemLensError
from core.flow.graph import parse_flow
from core.flow.runtime import run_conversation
from core.llm.client import DemoClient
from tests.builders import places, put
from tests.conftest import FIXTURES

SAMPLES = sorted((FIXTURES / "dify_dsl").glob("*.yml"))
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "x", "llm", "start", "number", "string", "{{#sys.query#}}", "sys", "query"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["enabled", "size", "type", "variable", "value", "variable_selector"]), inner, max_size=2
        )
    ),
    max_leaves=4,
)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_export_changed_anywhere_imports_and_runs_or_is_refused_in_one_line(path, data):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for _ in range(data.draw(st.integers(1, 2))):
        where = [p for p in places(doc) if "graph" in p or "conversation_variables" in p]
        doc = put(doc, where[data.draw(st.integers(0, len(where) - 1))], copy.deepcopy(data.draw(VALUES)))
    try:
        flow = parse_flow(yaml.safe_dump(doc, allow_unicode=True), path.name)
    except MemLensError as e:
        assert str(e) and "Traceback" not in str(e)
        return
    try:
        records = run_conversation(flow, ["hello", "and again"], llm=DemoClient())[1]
    except MemLensError as e:  # a run refused before anything ran (a required input, say)
        assert str(e)
        return
    assert all(r.status in ("succeeded", "failed") for r in records)
