"""A Workflow app's end node: its outputs are what its selectors read; a selector that is not a list of names
is the flow's error, said in one line when the flow is read, before anything runs."""

import pytest

from core.flow.errors import FlowError
from core.flow.graph import Flow


def _workflow(outputs) -> dict:
    return {
        "format": "memlens-flow",
        "version": 1,
        "name": "t",
        "mode": "workflow",
        "nodes": [
            {"id": "start", "type": "start", "variables": []},
            {"id": "end", "type": "end", "outputs": outputs},
        ],
        "edges": [["start", "end"]],
    }


@pytest.mark.parametrize(
    ("outputs", "where"),
    [
        ([{"variable": "text", "value_selector": True}], "outputs[0].value_selector"),
        ([{"variable": "text", "value_selector": ["llm", 3]}], "outputs[0].value_selector"),
        ({"variable": "text"}, "outputs must be a list"),
    ],
)
def test_an_end_node_that_reads_no_variable_is_refused_when_the_flow_is_read(outputs, where):
    with pytest.raises(FlowError, match=r"^flow: node 'end' \(end\): " + where.replace("[", r"\[").replace("]", r"\]")):
        Flow.from_dict(_workflow(outputs))


def test_an_output_without_a_name_is_left_out_as_dify_leaves_it():
    from core.flow.nodes.end import end_settings

    flow = Flow.from_dict(_workflow([{"value_selector": ["sys", "query"]}, {"variable": "q", "value_selector": []}]))
    end = next(n for n in flow.nodes if n.id == "end")
    assert end_settings(end) == (("q", ()),)
