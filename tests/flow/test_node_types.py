"""Node types are one registry (core/flow/node_types.py) holding each type's reader and runner, and
ARCHITECTURE.md's "a node type" recipe, followed once with a toy type, is complete."""

import ast
from pathlib import Path

import pytest

from core.flow import runtime
from core.flow.errors import FlowError, NodeFailed, node_error
from core.flow.graph import parse_flow
from core.flow.imported import import_report
from core.flow.node_types import NODE_TYPES, NodeType
from core.flow.runtime import run_conversation
from core.flow.templates import render
from core.llm.client import DemoClient

FLOW_DIR = Path(runtime.__file__).parent


def test_every_node_type_in_the_table_has_a_runner_and_every_runner_a_type():
    assert all(kind.run is not None for kind in NODE_TYPES.values())
    assert all(name == kind.name for name, kind in NODE_TYPES.items())


def test_the_flow_package_dispatches_node_types_with_plain_imports():
    for path in FLOW_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "importlib" not in imported, path.name


# -- the recipe, followed with a toy node type: it shouts a template ---------------------------------


def _shout_settings(node):
    text = node.data.get("text")
    if not isinstance(text, str):
        raise node_error(node, "'text' must be a template text such as {{#sys.query#}}")
    if node.data.get("times", 1) not in (1, 2, 3):
        raise node_error(node, "'times' must be 1, 2 or 3")
    return text, node.data.get("times", 1)


def _run_shout(node, ctx, run):
    text, times = _shout_settings(node)
    rendered = render(text, ctx.pool)
    if not rendered:
        raise NodeFailed("nothing to shout")
    run.outputs = {"text": " ".join([rendered.upper()] * times)}


TOY_FLOW = """
format: memlens-flow
version: 1
name: shouting
nodes:
  - {id: start, type: start}
  - {id: shout, type: shout, text: "{{#sys.query#}}", times: TIMES}
  - {id: answer, type: answer, answer: "{{#shout.text#}}"}
edges: [[start, shout], [shout, answer]]
"""


@pytest.fixture
def shout_registered(monkeypatch):
    monkeypatch.setitem(NODE_TYPES, "shout", NodeType("shout", _shout_settings, _run_shout, own=True))


def test_before_it_is_registered_a_toy_type_is_a_pass_through():
    flow = parse_flow(TOY_FLOW.replace("TIMES", "9"), "toy.yml")
    assert [n.id for n in import_report(flow).pass_through] == ["shout"]
    _, records = run_conversation(flow, ["hello"], llm=DemoClient())
    assert records[0].answer == ""


def test_a_node_type_registered_as_the_recipe_says_is_checked_at_load_and_runs(shout_registered):
    with pytest.raises(FlowError, match="toy.yml: node 'shout' \\(shout\\): 'times' must be 1, 2 or 3"):
        parse_flow(TOY_FLOW.replace("TIMES", "9"), "toy.yml")
    flow = parse_flow(TOY_FLOW.replace("TIMES", "2"), "toy.yml")
    assert [n.id for n in import_report(flow).emulated] == ["start", "shout", "answer"]
    _, records = run_conversation(flow, ["hello", ""], llm=DemoClient())
    assert records[0].answer == "HELLO HELLO"
    assert records[0].node_run("shout").outputs == {"text": "HELLO HELLO"}
    assert records[1].node_run("shout").error == "nothing to shout"
