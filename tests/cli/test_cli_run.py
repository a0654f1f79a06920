"""``python -m core run``: the JSON shape, the table, variables and if-else on sys.dialogue_count, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from core.cli.app import main
from tests.conftest import FIXTURES, ROOT

FLOW = {
    "format": "memlens-flow",
    "version": 1,
    "name": "cli-flow",
    "variables": [
        {"name": "turns", "type": "number", "default": 0},
        {"name": "queries", "type": "array[string]", "default": []},
        {"name": "plan", "type": "string", "default": "free"},
    ],
    "nodes": [
        {
            "id": "start",
            "type": "start",
            "variables": [
                {"variable": "plan", "label": "Plan", "type": "select", "options": ["free", "pro"], "required": False}
            ],
        },
        {
            "id": "llm",
            "type": "llm",
            "model": "openai/gpt-4o-mini",
            "prompt_template": [{"role": "system", "text": "Turn {{#sys.dialogue_count#}}."}],
            "memory": {"window": 3},
        },
        {
            "id": "count",
            "type": "assigner",
            "version": "2",
            "items": [
                {
                    "variable_selector": ["conversation", "turns"],
                    "input_type": "constant",
                    "operation": "+=",
                    "value": 1,
                },
                {
                    "variable_selector": ["conversation", "queries"],
                    "input_type": "variable",
                    "operation": "append",
                    "value": ["sys", "query"],
                },
            ],
        },
        {
            "id": "save_plan",
            "type": "assigner",
            "assigned_variable_selector": ["conversation", "plan"],
            "write_mode": "over-write",
            "input_variable_selector": ["start", "plan"],
        },
        {
            "id": "quota",
            "type": "if-else",
            "cases": [
                {
                    "case_id": "over",
                    "logical_operator": "and",
                    "conditions": [
                        {
                            "variable_selector": ["sys", "dialogue_count"],
                            "comparison_operator": ">",
                            "value": "2",
                            "varType": "number",
                        }
                    ],
                }
            ],
        },
        {"id": "answer", "type": "answer", "answer": "{{#llm.text#}}"},
        {"id": "answer_over", "type": "answer", "answer": "Quota reached after {{#conversation.turns#}} turns."},
    ],
    "edges": [
        ["start", "llm"],
        ["llm", "count"],
        ["count", "save_plan"],
        ["save_plan", "quota"],
        ["quota", "answer_over", "over"],
        ["quota", "answer", "false"],
    ],
}
QUERIES = ["Hi, I'm Dana.", {"query": "What's my name?", "inputs": {"plan": "pro"}}, "And now?", "Last one"]


@pytest.fixture
def files(tmp_path):
    flow = tmp_path / "flow.yml"
    flow.write_text(yaml.safe_dump(FLOW, allow_unicode=True), encoding="utf-8")
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(QUERIES), encoding="utf-8")
    return flow, queries


def run_cli(capsys, *args):
    code = main(["run", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_has_exactly_the_documented_shape_with_variables_and_if_else(files):
    flow, queries = files
    proc = subprocess.run(
        [sys.executable, "-m", "core", "run", str(flow), "--queries", str(queries), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"conversation_id", "turns"} and isinstance(doc["conversation_id"], str)
    turns = doc["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4]
    assert [t["dialogue_count"] for t in turns] == [1, 2, 3, 4]
    for t in turns:
        assert set(t) == {"turn", "dialogue_count", "query", "answer", "status", "error", "nodes", "variables"}
        assert (t["status"], t["error"]) == ("succeeded", None)
        for n in t["nodes"]:
            assert set(n) == {"id", "type", "emulated", "ledger", "prompt", "reply"}
            if n["type"] == "llm":
                assert all(set(e) == {"ref", "turn", "role", "tokens", "kept", "reason"} for e in n["ledger"])
                assert all(set(m) == {"role", "content"} for m in n["prompt"])
            else:
                assert (n["ledger"], n["prompt"], n["reply"]) == (None, None, None)
    # The demo model answered from the 2 turns its window of 3 rows holds in Dify 1.x (the node names
    # an OpenAI model: the demo model stood in).
    assert turns[1]["answer"] == "Your name is Dana."
    assert [n["id"] for n in turns[0]["nodes"]] == ["start", "llm", "count", "save_plan", "quota", "answer"]
    assert [n["id"] for n in turns[3]["nodes"]][-1] == "answer_over"
    llm3 = [n for n in turns[3]["nodes"] if n["id"] == "llm"][0]
    assert [(e["ref"], e["kept"], e["reason"]) for e in llm3["ledger"]] == [
        ("1:query", False, "outside_window"),
        ("1:answer", False, "outside_window"),
        ("2:query", True, "kept"),
        ("2:answer", True, "kept"),
        ("3:query", True, "kept"),
        ("3:answer", True, "kept"),
    ]
    assert llm3["prompt"][0] == {"role": "system", "content": "Turn 4."}
    # Variables after each turn; the if-else on sys.dialogue_count switches the answer from turn 3.
    # The plan select has no default, so a turn that does not give it writes Dify's None.
    assert [t["variables"] for t in turns] == [
        {"turns": 1, "queries": ["Hi, I'm Dana."], "plan": None},
        {"turns": 2, "queries": ["Hi, I'm Dana.", "What's my name?"], "plan": "pro"},
        {"turns": 3, "queries": ["Hi, I'm Dana.", "What's my name?", "And now?"], "plan": None},
        {"turns": 4, "queries": ["Hi, I'm Dana.", "What's my name?", "And now?", "Last one"], "plan": None},
    ]
    assert [t["answer"] for t in turns][2:] == ["Quota reached after 3 turns.", "Quota reached after 4 turns."]


def test_the_default_table_shows_turns_nodes_ledgers_and_variable_changes(files, capsys):
    flow, queries = files
    code, out, err = run_cli(capsys, flow, "--queries", queries)
    assert code == 0, err
    assert "Turn 3 · dialogue_count 3 · succeeded" in out
    assert "✗ 1:query      " in out and "tok — outside window of 3\n" in out  # the reason in its short words
    assert "window 3 (Dify 1.x as shipped · plugin token counting off)" in out
    assert "variable turns: 2 → 3 (+= by count)" in out
    assert "quota            if-else        → over" in out


def test_fidelity_documented_gives_one_turn_more(files, capsys):
    flow, queries = files
    code, out, _ = run_cli(capsys, flow, "--queries", queries, "--format", "json", "--fidelity", "documented")
    assert code == 0
    llm3 = [n for n in json.loads(out)["turns"][3]["nodes"] if n["id"] == "llm"][0]
    assert [e["ref"] for e in llm3["ledger"] if e["kept"]] == [
        "1:query",
        "1:answer",
        "2:query",
        "2:answer",
        "3:query",
        "3:answer",
    ]


def test_plugin_token_counting_and_granularity_are_run_options(files, capsys):
    flow, queries = files
    code, out, _ = run_cli(
        capsys, flow, "--queries", queries, "--plugin-token-counting", "--granularity", "ALL_MESSAGES"
    )
    assert code == 0 and "window 3 (Dify 1.x as shipped · plugin token counting on)" in out
    code, _, err = run_cli(capsys, flow, "--queries", queries, "--granularity", "everything")
    assert code == 2 and "granularity 'everything' is unknown" in err


def test_a_newer_dify_export_runs_and_the_table_lists_what_the_import_noted(capsys, tmp_path, files):
    _, queries = files
    newer = yaml.safe_load((FIXTURES / "dify_dsl" / "svcvit__Artifact.yml").read_text(encoding="utf-8"))
    newer["version"] = "9.0.0"
    path = tmp_path / "newer.yml"
    path.write_text(yaml.safe_dump(newer, allow_unicode=True), encoding="utf-8")
    code, out, err = run_cli(capsys, path, "--queries", queries)
    assert code == 0, err
    assert out.splitlines()[1] == (
        "  note: DSL version 9.0.0 is newer than the newest MemLens reads (0.6.0): read as "
        "0.6.0, so a field added since is not used; check the flow runs as in Dify"
    )
    code, out, _ = run_cli(capsys, ROOT / "sample_data" / "flows" / "agent-app.yml", "--queries", queries)
    assert code == 0 and "  note: its 1 tool (webscraper) not run: the model answers without it" in out


def test_a_dify_dsl_export_runs_too(capsys, tmp_path):
    queries = tmp_path / "q.json"
    queries.write_text('["one", "two"]', encoding="utf-8")
    code, out, _ = run_cli(
        capsys,
        FIXTURES / "dify_dsl" / "svcvit__Artifact.yml",
        "--queries",
        queries,
        "--format",
        "json",
        "--user",
        "u-42",
    )
    assert code == 0
    turns = json.loads(out)["turns"]
    assert [n["type"] for n in turns[1]["nodes"]] == ["start", "llm", "answer"]


def test_a_question_classifier_shows_its_memory_and_the_class_it_picked(capsys, tmp_path):
    queries = tmp_path / "q.json"
    queries.write_text('["Hello", "Questions about how to use products: the kettle"]', encoding="utf-8")
    code, out, _ = run_cli(
        capsys,
        FIXTURES / "dify_dsl" / "dify-templates__Question_Classifier_Knowledge_Chatbot.yml",
        "--queries",
        queries,
    )
    assert code == 0
    second = out.split("Turn 2")[1]
    # Nodes are named by their titles (an id only when two titles read alike).
    assert "  · Question Classifier question-classifier memory off · kept 0 of 2 earlier" in second
    assert "      → Questions about how to use products (branch 1711528736549)" in second


def test_a_parameter_extractor_shows_its_memory_and_what_it_extracted(capsys):
    code, out, _ = run_cli(
        capsys,
        ROOT / "sample_data" / "flows" / "order-desk.yml",
        "--queries",
        ROOT / "sample_data" / "flows" / "order-desk.queries.json",
    )
    assert code == 0
    third, fifth = out.split("Turn 3")[1].split("Turn 4")[0], out.split("Turn 5")[1]
    assert "Order slots      parameter-extractor window 3 (Dify 1.x as shipped" in third
    assert '      → order_number = 4411, name = "Dana"' in third
    assert '      → order_number = 0, name = ""' in fifth and "A: Which order is it about?" in fifth


def test_an_agent_app_shows_its_agent_s_memory_and_ledger_as_an_llm_node_s(capsys):
    code, out, _ = run_cli(
        capsys,
        ROOT / "sample_data" / "flows" / "agent-app.yml",
        "--queries",
        ROOT / "sample_data" / "flows" / "agent-app.queries.json",
        "--plugin-token-counting",
    )
    assert code == 0
    fourth = out.split("Turn 4")[1]
    assert (
        "  · Agent            tool-agent     dify agent app + token counting · kept 6 of 6 earlier · prompt " in fourth
    )
    assert [line.split()[:2] for line in fourth.splitlines() if " tok" in line and "✓" in line] == [
        ["✓", f"{t}:{part}"] for t in (1, 2, 3) for part in ("query", "answer")
    ]
    assert "history granularity" not in fourth  # a Dify agent sends every message: no granularity applies
    assert "A: Your order is 4411." in fourth


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"query": "x"}', "must be a JSON array of queries"),
        ("[]", "holds no queries"),
        ("[1]", "query 1 must be a string or an object"),
        ('[{"query": "x", "extra": 1}]', "unknown key(s) extra"),
        ("not json", "is not valid JSON: Expecting value at line 1, column 1"),
        ("[" * 5000 + "]" * 5000, "is nested more than"),
        ('[{"query": "x", "inputs": {"n": NaN}}]', "[0].inputs.n' holds nan, which is not a number JSON can carry"),
    ],
)
def test_a_bad_queries_file_is_one_line_and_exit_status_2(files, capsys, content, message):
    flow, queries = files
    queries.write_text(content, encoding="utf-8")
    code, out, err = run_cli(capsys, flow, "--queries", queries)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_an_unreadable_flow_or_unknown_version_is_one_line_and_exit_status_2(files, capsys, tmp_path):
    _, queries = files
    code, _, err = run_cli(capsys, tmp_path / "missing.yml", "--queries", queries)
    assert code == 2 and "no such file" in err and err.count("\n") == 1
    newer = yaml.safe_load((FIXTURES / "dify_dsl" / "svcvit__Artifact.yml").read_text(encoding="utf-8"))
    newer["version"] = "9.0"
    path = tmp_path / "newer.yml"
    path.write_text(yaml.safe_dump(newer, allow_unicode=True), encoding="utf-8")
    code, _, err = run_cli(capsys, path, "--queries", queries)
    assert code == 2 and "unknown DSL version '9.0'; expected a version like 0.6.0" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, FIXTURES / "dify_dsl" / "SOURCES.md", "--queries", queries)
    assert code == 2 and err.count("\n") == 1


def test_a_missing_required_input_is_bad_input(files, capsys, tmp_path):
    queries = tmp_path / "q.json"
    queries.write_text('["go"]', encoding="utf-8")
    code, _, err = run_cli(capsys, FIXTURES / "dify_dsl" / "svcvit__Deep Researcher On Dify .yml", "--queries", queries)
    assert code == 2 and "input 'Research_Theme' (Research Theme) is required" in err


def test_nodes_whose_titles_read_alike_are_named_with_their_ids(capsys, tmp_path):
    flow = tmp_path / "twins.yml"
    flow.write_text(
        """format: memlens-flow
version: 1
name: twins
mode: advanced-chat
nodes:
  - {id: start, type: start, title: Start}
  - {id: first, type: llm, title: LLM, model: memlens/demo, prompt_template: [{role: system, text: "One."}],
     memory: {window: 4}}
  - {id: second, type: llm, title: "LLM ", model: memlens/demo, prompt_template: [{role: system, text: "Two."}]}
  - {id: answer, type: answer, title: Answer, answer: "{{#second.text#}}"}
edges:
  - [start, first]
  - [first, second]
  - [second, answer]
""",
        encoding="utf-8",
    )
    queries = tmp_path / "q.json"
    queries.write_text('["Hi, I\'m Dana."]', encoding="utf-8")
    code, out, err = run_cli(capsys, flow, "--queries", queries)
    assert code == 0, err
    assert "  · LLM (first)      llm" in out and "  · LLM (second)     llm" in out
    assert "  · Answer           answer" in out  # a title no other node shares stays as it is
