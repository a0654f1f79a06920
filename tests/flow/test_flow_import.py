"""Flows: reading MemLens flow files and Dify DSL exports, the import report, serialisation, signatures."""

from __future__ import annotations

import copy

import pytest
import yaml

from core.flow.errors import FlowError
from core.flow.graph import Flow, classify_change, flow_from_data, load_flow, parse_flow
from core.flow.imported import import_report
from core.flow.nodes.llm import litellm_model
from tests.conftest import FIXTURES, ROOT

DSL = FIXTURES / "dify_dsl"
DSL_FILES = sorted(DSL.glob("*.yml"))


def test_every_dsl_sample_is_in_the_fixtures_with_its_source_and_licence():
    """The 14 shared samples and the 9 flows Dify's graph-engine tests run, each with a row in SOURCES.md
    naming its repository and licence."""
    assert len(DSL_FILES) == 14 + 9
    rows = [line for line in (DSL / "SOURCES.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    for path in DSL_FILES:
        (row,) = [r for r in rows if r.startswith(f"| `{path.name}`")]
        assert "/" in row.split("|")[2] and row.split("|")[5].strip().startswith(("MIT", "Dify Open Source License")), (
            row
        )


@pytest.mark.parametrize("path", DSL_FILES, ids=lambda p: p.name)
def test_every_dsl_sample_imports_and_round_trips_through_the_canonical_dict_and_yaml(path):
    flow = load_flow(path)
    doc = flow.to_dict()
    assert Flow.from_dict(doc).to_dict() == doc
    assert Flow.from_dict(yaml.safe_load(flow.to_yaml())).to_dict() == doc
    assert Flow.from_dict(doc).structural_signature() == flow.structural_signature()


def test_import_report_of_the_memory_test_sample_lists_emulated_pass_through_and_memory_settings():
    report = import_report(load_flow(DSL / "svcvit__记忆测试.yml"))
    types = {n.type for n in report.pass_through}
    assert {"code", "tool"} <= types and "variable-aggregator" not in types
    assert {n.type for n in report.emulated} == {"start", "llm", "assigner", "if-else", "answer", "variable-aggregator"}
    memory = report.llm_memory
    assert len(memory) == 14
    windows = sorted((m["window_size"] for m in memory.values() if m["memory"] == "on"))
    assert windows == [10] * 9 + [20]
    assert sum(1 for m in memory.values() if m["memory"] == "off") == 4
    on20 = [m for m in memory.values() if m["window_size"] == 20][0]
    assert on20["query_prompt_template"] == "{{#sys.query#}}" and on20["label"] == "window 20 turns"
    assert "note node ignored" in " ".join(report.warnings)


def test_import_report_of_a_window_off_block_and_a_template_without_query_template_key():
    report = import_report(load_flow(DSL / "svcvit__思考助手.yml"))
    (mem,) = report.llm_memory.values()
    assert mem["memory"] == "on" and mem["window_enabled"] is False and mem["window_size"] == 10
    assert mem["query_prompt_template"] is None
    assert mem["label"] == "no window (500-turn cap)"
    assert [n.type for n in report.pass_through] == ["knowledge-retrieval"]


def test_iteration_children_are_kept_but_reported_as_not_run():
    report = import_report(load_flow(DSL / "svcvit__搜索大师.yml"))
    inside = [n for n in report.nodes if n.status.startswith("inside ")]
    assert {n.type for n in inside} >= {"http-request", "tool"}
    assert all(not n.emulated for n in inside)


def test_a_workflow_mode_app_imports_with_a_warning_that_memory_has_no_effect():
    flow = load_flow(DSL / "svcvit__根据用户的意图进行回复.yml")
    assert flow.mode == "workflow"
    assert any("workflow mode" in w for w in flow.warnings)
    labels = [m["label"] for m in import_report(flow).llm_memory.values() if m["memory"] == "on"]
    assert labels == ["window 3 turns (no effect: workflow mode has no conversation)"]


@pytest.mark.parametrize(
    "mode,note",
    [
        (None, None),
        ("conversation", None),
        (
            "node",
            "llm node 'Thinker': memory mode 'node' (Dify's node-level memory: the node's own earlier exchanges) "
            "is not emulated: MemLens sends the conversation's history, as mode 'conversation' does",
        ),
        ("team", "llm node 'Thinker': memory mode 'team' (a memory mode MemLens does not know) is not emulated"),
    ],
)
def test_an_llm_node_s_memory_mode_other_than_the_conversation_s_is_named_as_not_emulated(mode, note):
    """Newer Dify lets a Chatflow's LLM node remember its own earlier exchanges (``memory.mode: node``);
    MemLens runs such a node with the conversation's history, and the import says so."""
    doc = yaml.safe_load((DSL / "svcvit__思考助手.yml").read_text(encoding="utf-8"))
    node = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"].get("memory"))
    node["data"]["title"] = "Thinker"
    if mode is not None:
        node["data"]["memory"]["mode"] = mode
    flow = parse_flow(yaml.safe_dump(doc, allow_unicode=True), "thinker.yml")
    found = [w for w in flow.warnings if "memory mode" in w]
    assert found == [] if note is None else len(found) == 1 and found[0].startswith(note)
    assert import_report(flow).to_text().count("is not emulated: MemLens sends") == len(found)


def test_a_dsl_without_version_reads_as_010():
    flow = load_flow(DSL / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml")
    assert flow.source["dsl_version"] == "0.1.0"
    assert flow.name == "Question Classifier + Knowledge + Chatbot"


def _minimal_dsl(**changes) -> dict:
    doc = yaml.safe_load((DSL / "svcvit__Artifact.yml").read_text(encoding="utf-8"))
    doc.update(changes)
    return doc


@pytest.mark.parametrize("version", ["0.6.1", "0.7.0", "1.0.0"])
def test_a_newer_dsl_version_is_read_as_the_newest_known_one_with_a_note_as_dify_imports_it_once_confirmed(version):
    same = parse_flow(yaml.safe_dump(_minimal_dsl(version="0.6.0")), "x.yml")
    flow = parse_flow(yaml.safe_dump(_minimal_dsl(version=version)), "x.yml")
    assert (
        flow.warnings
        == [
            f"DSL version {version} is newer than the newest MemLens reads (0.6.0): read as 0.6.0, "
            f"so a field added since is not used; check the flow runs as in Dify"
        ]
        + same.warnings
    )
    assert flow.source["dsl_version"] == version
    assert flow.to_dict()["nodes"] == same.to_dict()["nodes"] and flow.edges == same.edges


@pytest.mark.parametrize(
    "start_type,message",
    [
        (
            "trigger-schedule",
            "x.yml: the flow starts from a trigger-schedule node, which MemLens does not run: it runs a "
            "flow from its Start node (a user's input); add one to try the flow here",
        ),
        ("template-transform", "x.yml: the flow has no start node; add a node of type 'start' as the root"),
    ],
)
def test_a_flow_without_a_start_node_is_refused_saying_what_starts_it(start_type, message):
    doc = _minimal_dsl()
    start = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == "start")
    start["data"]["type"] = start_type
    with pytest.raises(FlowError) as err:
        parse_flow(yaml.safe_dump(doc, allow_unicode=True), "x.yml")
    assert str(err.value) == message


def test_an_unreadable_dsl_version_is_refused_with_the_supported_version():
    with pytest.raises(FlowError, match="unknown DSL version 'abc'"):
        parse_flow(yaml.safe_dump(_minimal_dsl(version="abc")), "x.yml")


def test_non_flow_app_modes_and_non_flow_files_are_refused():
    doc = _minimal_dsl()
    refusals = {
        "completion": "x.yml: app mode 'completion' is not a flow; MemLens runs advanced-chat (Chatflow), workflow, "
        "basic Chatbot (chat) and Agent (agent-chat) apps: switch the app to workflow orchestration in "
        "Dify (its menu) and export that"
    }
    for mode, message in refusals.items():
        doc["app"]["mode"] = mode
        with pytest.raises(FlowError) as e:
            parse_flow(yaml.safe_dump(doc), "x.yml")
        assert str(e.value) == message
    with pytest.raises(FlowError, match="neither a Dify DSL export"):
        parse_flow("just: text\n", "x.yml")
    with pytest.raises(FlowError, match="not valid YAML at line"):
        parse_flow("a: [1, 2\nb: c\n", "x.yml")
    with pytest.raises(FlowError, match="no such file"):
        load_flow(ROOT / "no-such-flow.yml")


def test_malformed_nodes_are_refused_at_load_time_naming_the_node():
    doc = _minimal_dsl()
    llm = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == "llm")
    llm["data"]["memory"]["window"]["size"] = 2_000_000
    with pytest.raises(
        FlowError,
        match="node 'llm' \\(llm\\): memory window size 2,000,000 is out of range: Dify runs any size above 500 as 500",
    ):
        parse_flow(yaml.safe_dump(doc), "x.yml")


@pytest.mark.parametrize(
    "size, window, label",
    [
        (600, 600, "window 600 turns (runs as 500: Dify's row cap)"),
        (500, 500, "window 500 turns"),
        (0, None, "window 0: no window, as Dify reads 0 or less (500-turn cap)"),
        (-4, None, "window -4: no window, as Dify reads 0 or less (500-turn cap)"),
    ],
)
def test_a_dsl_window_above_500_or_not_above_0_loads_and_runs_as_difys_500_rows(size, window, label):
    """TokenBufferMemory takes ``min(size, 500)`` rows, and 500 for a size of 0 or less (spec/dify-memory.md §1.2)."""
    from core.flow.node_memory import node_memory_config
    from core.memory.strategies.dify import row_limit

    doc = _minimal_dsl()
    llm = _graph_node(doc, "llm")
    llm["data"]["memory"]["window"] = {"enabled": True, "size": size}
    flow = parse_flow(yaml.safe_dump(doc), "x.yml")
    node = flow.node(llm["id"])
    assert flow.llm(node.id).memory.window == window
    assert import_report(flow).llm_memory[node.id]["label"] == label
    config = node_memory_config(flow, node.id)
    assert (
        config.settings.window == window and row_limit(config.settings.window) == 500
    )  # the rows the node's memory fetches


def _graph_node(doc, node_type):
    return next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == node_type)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d["workflow"]["graph"].update(nodes=3), "x.yml: 'workflow.graph.nodes' must be a list, not int"),
        (lambda d: d["workflow"]["graph"].update(edges={"a": 1}), "'workflow.graph.edges' must be a list, not dict"),
        (
            lambda d: d["workflow"].update(conversation_variables=2.5),
            "'workflow.conversation_variables' must be a list, not float",
        ),
        (
            lambda d: d["workflow"].update(environment_variables=True),
            "'workflow.environment_variables' must be a list, not bool",
        ),
        (lambda d: _graph_node(d, "llm")["data"].update(context=["x"]), "'context' must be {enabled: true|false"),
        (
            lambda d: _graph_node(d, "llm")["data"].update(context={"enabled": True, "variable_selector": 7}),
            "'context' must be {enabled: true|false",
        ),
        (
            lambda d: _graph_node(d, "llm")["data"].update(prompt_config={"jinja2_variables": 1.5}),
            "'prompt_config' must be {jinja2_variables",
        ),
        (
            lambda d: _graph_node(d, "llm")["data"].update(prompt_config=["x"]),
            "'prompt_config' must be {jinja2_variables",
        ),
        (
            lambda d: _graph_node(d, "start")["data"].update(variables={"name": "x"}),
            "'variables' must be a list of the start form's fields",
        ),
    ],
)
def test_an_export_whose_blocks_have_the_wrong_shape_is_refused_naming_the_block(change, message):
    doc = _minimal_dsl()
    change(doc)
    with pytest.raises(FlowError) as err:
        parse_flow(yaml.safe_dump(doc), "x.yml")
    assert message in str(err.value)


@pytest.mark.parametrize(
    "case,message",
    [
        ({"case_id": "true", "conditions": [None]}, "each condition needs a 'comparison_operator'"),
        (
            {"case_id": "true", "conditions": [{"comparison_operator": ["is"], "variable_selector": ["sys", "query"]}]},
            "each condition needs a 'comparison_operator'",
        ),
        (
            {"case_id": "true", "conditions": [{"comparison_operator": "is", "variable_selector": 3}]},
            "a 'variable_selector' list",
        ),
    ],
)
def test_an_if_else_condition_of_the_wrong_shape_is_refused(case, message):

    doc = yaml.safe_load(MEMLENS_FLOW)
    next(n for n in doc["nodes"] if n["id"] == "check")["cases"] = [case]
    with pytest.raises(FlowError, match="node 'check' \\(if-else\\)") as err:
        flow_from_data(doc, "tiny.yml")
    assert message in str(err.value)


MEMLENS_FLOW = """
format: memlens-flow
version: 1
name: tiny
variables:
  - {name: count, type: number, default: 0}
nodes:
  - {id: start, type: start}
  - id: a
    type: llm
    model: openai/gpt-4o-mini
    max_tokens: 100
    prompt: [{role: system, text: "Be brief."}]
    memory: {window: 2}
  - {id: b, type: llm, prompt_template: [{role: user, text: "{{#sys.query#}}"}], memory: off}
  - id: check
    type: if-else
    cases: [{case_id: "true", logical_operator: and, conditions: [{variable_selector: [sys, dialogue_count], comparison_operator: ">", value: "1"}]}]
  - {id: answer, type: answer, answer: "{{#a.text#}}"}
edges:
  - [start, a]
  - [a, b]
  - [b, check]
  - {source: check, target: answer, handle: "false"}
"""


def test_memlens_flow_shorthands_expand_to_difys_node_data():
    flow = parse_flow(MEMLENS_FLOW, "tiny.yml")
    a, b = flow.llm("a"), flow.llm("b")
    assert (a.provider, a.name, a.model, a.max_tokens) == ("openai", "gpt-4o-mini", "openai/gpt-4o-mini", 100)
    assert a.memory.window == 2 and a.memory.query_prompt_template == "{{#sys.query#}}"
    assert b.memory is None and b.model == "memlens/demo"
    assert flow.edges[-1].handle == "false"
    assert flow.variables[0].id  # ids are generated (stable) when a hand-written flow gives none
    assert parse_flow(MEMLENS_FLOW, "tiny.yml").variables[0].id == flow.variables[0].id


def test_memlens_flow_round_trips_losslessly():
    flow = parse_flow(MEMLENS_FLOW, "tiny.yml")
    again = Flow.from_dict(yaml.safe_load(flow.to_yaml()))
    assert again.to_dict() == flow.to_dict()
    assert classify_change(flow, again) == "same"


def test_value_edits_keep_the_structural_signature_and_structure_edits_change_it():
    flow = parse_flow(MEMLENS_FLOW, "tiny.yml")
    doc = flow.to_dict()
    values = copy.deepcopy(doc)
    values["nodes"][1]["memory"]["window"]["size"] = 5
    values["nodes"][1]["prompt_template"][0]["text"] = "Be verbose."
    values["nodes"][2]["memory"] = {"window": {"enabled": True, "size": 3}}  # memory switched on: a value
    values["variables"][0]["value"] = 7
    edited = Flow.from_dict(values)
    assert edited.structural_signature() == flow.structural_signature()
    assert classify_change(flow, edited) == "values"

    added = copy.deepcopy(doc)
    added["nodes"].append({"id": "extra", "type": "answer", "answer": "x"})
    added["edges"].append({"source": added["nodes"][-2]["id"], "target": "extra"})
    reordered = copy.deepcopy(doc)
    reordered["nodes"][1], reordered["nodes"][2] = reordered["nodes"][2], reordered["nodes"][1]
    rewired = copy.deepcopy(doc)
    rewired["edges"][-1]["handle"] = "true"
    for changed in (added, reordered, rewired):
        assert classify_change(flow, Flow.from_dict(changed)) == "structure"


@pytest.mark.parametrize(
    "provider,name,expected",
    [
        ("langgenius/openai/openai", "gpt-4o-mini", "openai/gpt-4o-mini"),
        ("openai", "gpt-3.5-turbo", "openai/gpt-3.5-turbo"),
        ("google", "gemini-2.0-flash-exp", "gemini/gemini-2.0-flash-exp"),
        ("tongyi", "qwen-max", "dashscope/qwen-max"),
        ("", "", ""),
        ("memlens", "demo", "memlens/demo"),
    ],
)
def test_dify_model_providers_map_to_litellm_names(provider, name, expected):
    assert litellm_model(provider, name) == expected


def test_sample_flows_load_and_describe_themselves():
    for path in sorted((ROOT / "sample_data" / "flows").glob("*.yml")):
        flow = load_flow(path)
        assert path.read_text(encoding="utf-8").startswith("# ")
        assert import_report(flow).pass_through == []
    support = load_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    memory = import_report(support).llm_memory
    assert memory["classifier"]["memory"] == "off"
    assert memory["responder"]["window_size"] == 4


# -- the graph's paths: no cycle, every node reached from Start ----------------------------------------------


@pytest.mark.parametrize(
    "edge, named, loop",
    [
        ({"source": "answer", "target": "a"}, "'answer' → 'a'", "a → b → check → answer → a"),
        ({"source": "b", "target": "b"}, "'b' → 'b'", "b → b"),
        ({"source": "b", "target": "a"}, "'b' → 'a'", "a → b → a"),
        ({"source": "check", "target": "start"}, "'check' → 'start'", "start → a → b → check → start"),
    ],
)
def test_a_flow_whose_edges_make_a_cycle_is_refused_naming_the_edge(edge, named, loop):
    doc = yaml.safe_load(MEMLENS_FLOW)
    doc["edges"].append(edge)
    with pytest.raises(FlowError) as err:
        flow_from_data(doc, "tiny.yml")
    message = str(err.value)
    assert message.startswith(f"tiny.yml: the edge {named} makes a cycle ({loop})") and "\n" not in message


def test_a_dify_export_with_a_cycle_is_refused_too():
    doc = _minimal_dsl()
    graph = doc["workflow"]["graph"]
    last = graph["edges"][-1]
    graph["edges"].append({"source": last["target"], "target": last["source"], "id": "back"})
    with pytest.raises(FlowError, match=f"the edge '{last['target']}' → '{last['source']}' makes a cycle"):
        flow_from_data(doc, "artifact.yml")


def test_a_node_no_path_from_start_reaches_is_refused_naming_it():
    doc = yaml.safe_load(MEMLENS_FLOW)
    doc["nodes"].append({"id": "orphan", "type": "answer", "answer": "never"})
    with pytest.raises(FlowError) as err:
        flow_from_data(doc, "tiny.yml")
    assert str(err.value) == (
        "tiny.yml: node 'orphan' (answer) is not reached from the Start node: no edge path leads "
        "to it, so it would never run; connect it or delete it"
    )
    # Two nodes that only reach each other are not reached either (and their cycle is never walked).
    doc["nodes"].append({"id": "other", "type": "answer", "answer": "never"})
    doc["edges"] += [["orphan", "other"], ["other", "orphan"]]
    with pytest.raises(FlowError, match="node 'orphan' \\(answer\\) is not reached from the Start node"):
        flow_from_data(doc, "tiny.yml")


def test_a_node_reached_by_two_paths_is_no_cycle():
    doc = yaml.safe_load(MEMLENS_FLOW)
    doc["edges"].append({"source": "check", "target": "answer", "handle": "true"})
    doc["edges"].append(["a", "check"])
    assert flow_from_data(doc, "tiny.yml").has_node("answer")


def test_a_stored_flow_with_a_cycle_still_opens_so_its_turns_can_be_shown():
    doc = parse_flow(MEMLENS_FLOW, "tiny.yml").to_dict()
    doc["edges"].append({"source": "answer", "target": "a", "handle": "source"})
    assert Flow.from_dict(doc, stored=True).has_node("a")
    with pytest.raises(FlowError, match="makes a cycle"):
        Flow.from_dict(doc)
