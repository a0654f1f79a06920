"""``python -m core replay``: the JSON shape, the table, the summary lines and every bad-input case."""

import json
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, ROOT

T = FIXTURES / "transcripts"
REAL = T / "dify-web__realWorldMessages.json"
TAU = T / "taubench__gpt-4o-airline.sample.jsonl"


def run(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "core", "replay", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_json_output_has_exactly_the_documented_shape():
    code, out, err = run(REAL, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"memory", "model", "encoding", "tokens_exact", "turns"}
    assert (doc["memory"], doc["model"], doc["encoding"], doc["tokens_exact"]) == (
        "dify",
        "gpt-4o-mini",
        "o200k_base",
        True,
    )
    assert [t["turn"] for t in doc["turns"]] == [1, 2, 3, 4, 5, 6, 7]
    for t in doc["turns"]:
        assert set(t) == {"turn", "prompt_tokens", "history_tokens", "budget", "ledger"}
        for e in t["ledger"]:
            assert set(e) == {"ref", "turn", "role", "tokens", "kept", "reason"}
    turn6 = doc["turns"][5]
    assert [e["ref"] for e in turn6["ledger"] if e["kept"]] == [
        "cd5affb0-7bc2-4a6f-be7e-25e74595c9dd:query",
        "cd5affb0-7bc2-4a6f-be7e-25e74595c9dd:answer",
    ]
    assert turn6["history_tokens"] == sum(e["tokens"] for e in turn6["ledger"] if e["kept"])


def test_openai_refs_are_message_indexes_and_turns_are_one_based():
    code, out, _ = run(TAU, "--index", "1", "--turn", "2", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["turns"][0]["turn"] == 2
    assert [e["ref"] for e in doc["turns"][0]["ledger"]] == [1, 2]  # message 0 is the system prompt


def test_summary_prints_a_table_of_one_row_per_turn():
    code, out, _ = run(TAU, "--index", "0", "--window", "3", "--format", "summary")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 + 30
    assert lines[0] == "memory: dify window 3 · model gpt-4o-mini"
    assert lines[1].split() == [
        "turn",
        "kept",
        "dropped",
        "not",
        "eligible",
        "history",
        "tok",
        "prompt",
        "tok",
        "budget",
        "oldest",
        "kept",
    ]
    last = lines[-1].split()  # turn 30: the window's 3 rows are the current turn and the 2 before it
    assert last[0] == "30" and last[1] == "4" and last[6] == "–" and last[7] == "28"


def test_jsonl_prints_one_object_per_turn():
    code, out, _ = run(TAU, "--index", "0", "--window", "3", "--format", "jsonl")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 30
    assert set(lines[0]) == {
        "turn",
        "kept",
        "dropped",
        "not_eligible",
        "history_tokens",
        "prompt_tokens",
        "budget",
        "oldest_kept_turn",
    }
    # Dify 1.x: the window's 3 rows are the current turn and the 2 before it.
    assert lines[-1]["oldest_kept_turn"] == 28 and lines[-1]["kept"] == 4


@pytest.mark.parametrize("memory", ["dify", "off"])
def test_summary_counts_dropped_and_not_eligible_as_the_ledger_reasons_do(memory):
    """A branched conversation: another branch's messages are not eligible, not dropped; with memory
    off no earlier message is dropped, each is not eligible. Every earlier message is counted once."""
    code, out, err = run(REAL, "--memory", memory, "--window", "2", "--format", "jsonl")
    assert code == 0, err
    summaries = [json.loads(line) for line in out.splitlines()]
    code, out, err = run(REAL, "--memory", memory, "--window", "2", "--format", "json")
    assert code == 0, err
    ledgers = json.loads(out)["turns"]
    assert [s["turn"] for s in summaries] == [t["turn"] for t in ledgers]
    other_branch = 0
    for s, t in zip(summaries, ledgers):
        reasons = [e["reason"] for e in t["ledger"]]
        other_branch += reasons.count("other_branch")
        left_out = {"kept", "other_branch", "memory_off", "scope"}
        assert s["kept"] == reasons.count("kept")
        assert s["dropped"] == sum(r not in left_out for r in reasons)
        assert s["not_eligible"] == len(reasons) - s["kept"] - s["dropped"]
        if memory == "off":
            assert s["kept"] == s["dropped"] == 0 and s["not_eligible"] == len(reasons) > 0 or t["turn"] == 1
    assert other_branch > 0 or memory == "off"  # the file branches: some turn saw another branch


def test_table_is_readable_per_turn_with_reasons_and_totals():
    code, out, _ = run(REAL, "--turn", "6", "--model", "acme/model-x", "--plugin-token-counting")
    assert code == 0
    assert "Turn 6: '3306'" in out
    assert "other_branch" in out and "on another branch" in out
    assert "cl100k_base, estimated" in out
    assert "Dify's default budget of 2,000 tokens" in out
    assert "kept 2 of 10" in out


def test_code_fidelity_and_window_strategy_options_are_applied():
    code, out, _ = run(TAU, "--memory", "window", "--window", "4", "--format", "json", "--turn", "5")
    assert code == 0 and json.loads(out)["memory"] == "window"
    assert sum(e["kept"] for e in json.loads(out)["turns"][0]["ledger"]) == 4
    code, out, _ = run(TAU, "--fidelity", "code", "--window", "3", "--format", "jsonl", "--turn", "5")
    assert code == 0 and json.loads(out)["kept"] == 4 and json.loads(out)["budget"] is None


@pytest.mark.parametrize(
    "args,needle",
    [
        (["/no/such/file.json"], "no such file"),
        ([T / "SOURCES.md"], "not JSON or JSON Lines"),
        ([T / "dify-docs__messages_api_examples.json"], "unknown format"),
        (["{tmp}/norole.json"], "has no 'role'"),
        (["{tmp}/badrole.json"], "unknown role 'robot'"),
        ([REAL, "--window", "-1"], "--window -1 is out of range"),
        ([REAL, "--window", "2000000"], "window 2000000 is out of range"),
        ([REAL, "--memory", "window", "--window", "201"], "window 201 is out of range"),
        ([REAL, "--turn", "99"], "--turn 99 is out of range"),
        ([REAL, "--turn", "0"], "--turn 0 is out of range"),
        ([TAU, "--index", "6"], "--index 6 is out of range"),
        ([REAL, "--context-size", "0"], "--context-size 0 is out of range"),
        ([REAL, "--max-tokens", "x"], "--max-tokens must be a whole number"),
        ([REAL, "--memory", "magic"], "invalid choice: 'magic'"),
        ([REAL, "--format", "xml"], "invalid choice: 'xml'"),
        ([REAL, "--input-format", "csv"], "unknown format 'csv'; expected one of"),
        ([REAL, "--input-format", "sharegpt"], "'conversations' must be a list"),
    ],
)
def test_bad_input_prints_one_clear_line_and_exits_2(tmp_path, args, needle):
    (tmp_path / "norole.json").write_text('[{"role": "user", "content": "a"}, {"content": "b"}]')
    (tmp_path / "badrole.json").write_text('[{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]')
    code, out, err = run(*[str(a).replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err and "Traceback" not in err


CHATGPT = FIXTURES / "exports" / "chatgpt__conversations.json"


def test_replay_of_a_file_with_several_conversations_says_how_many_and_which():
    code, out, err = run(TAU, "--index", "2", "--format", "json")
    assert code == 0
    json.loads(out)  # stdout stays one JSON document
    assert "holds 6 conversations; replaying --index 2" in err and "memlens ls" in err
    code, _, err = run(REAL, "--format", "jsonl")
    assert code == 0 and err == ""  # one conversation: nothing to say


def test_replay_format_in_names_the_input_format():
    code, out, err = run(CHATGPT, "--input-format", "chatgpt", "--index", "1", "--format", "jsonl")
    assert code == 0, err
    assert [json.loads(line)["turn"] for line in out.splitlines()] == [1, 2]
    assert "'Powers of two', 2 turns" in err


def test_replay_help_explains_index_turn_and_format_in():
    proc = subprocess.run(
        [sys.executable, "-m", "core", "replay", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    text = " ".join(proc.stdout.split())
    assert "which conversation of a file with several" in text
    assert "replay only this turn" in text
    assert "the file's format (default: detected)" in text and "chatgpt" in text


def test_ls_lists_index_turns_and_first_query():
    proc = subprocess.run(
        [sys.executable, "-m", "core", "ls", str(CHATGPT)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split(None, 2) == ["0", "5", "'Plan three days in Lisbon.'"]
    assert lines[2].split(None, 2) == ["1", "2", "'What is 2 to the power of 10?'"]
    assert lines[3].startswith("2 conversations in ")
    proc = subprocess.run(
        [sys.executable, "-m", "core", "ls", str(TAU), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = json.loads(proc.stdout)
    assert [r["index"] for r in rows] == list(range(6)) and all(r["turns"] > 0 for r in rows)


def test_an_agent_apps_log_replays_as_its_agent_runner_unless_memory_is_given():
    agent = ROOT / "sample_data" / "conversations" / "shop-agent.json"
    code, out, err = run(
        agent,
        "--format",
        "json",
        "--turn",
        "5",
        "--plugin-token-counting",
        "--context-size",
        "560",
        "--max-tokens",
        "256",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["memory"] == "dify_agent"
    assert {e["turn"] for e in doc["turns"][0]["ledger"] if not e["kept"] and e["reason"] == "over_budget"} == {1}
    code, out, _ = run(agent, "--format", "json", "--turn", "5", "--memory", "dify")
    assert code == 0 and json.loads(out)["memory"] == "dify"
    # A log with no agent thoughts keeps the LLM node's memory.
    code, out, _ = run(REAL, "--format", "json", "--turn", "2")
    assert code == 0 and json.loads(out)["memory"] == "dify"


def test_a_claude_code_transcript_replays_as_the_whole_thread_unless_memory_is_given(tmp_path):
    from tests.io.test_claude_code import TRANSCRIPT

    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in TRANSCRIPT), encoding="utf-8")
    code, out, err = run(path, "--format", "json", "--turn", "2")  # "Now run all tests.": after the tool round
    assert code == 0, err
    doc = json.loads(out)
    assert doc["memory"] == "buffer"
    # The first round whole: the prompt, the thinking, the words before the call, the call, its result, the reply.
    assert [e["ref"] for e in doc["turns"][0]["ledger"] if e["kept"]] == ["u1", "a1:reasoning", "a2", "a3", "u2", "a4"]
    code, out, _ = run(path, "--format", "json", "--turn", "2", "--memory", "dify")
    assert code == 0 and json.loads(out)["memory"] == "dify"
    # Dify's LLM node replays the query and the answer only.
    assert [e["ref"] for e in json.loads(out)["turns"][0]["ledger"] if e["kept"]] == ["u1", "a4"]
    code, out, _ = run(path, "--format", "json", "--turn", "2", "--granularity", "query_answer")
    assert code == 0 and [e["ref"] for e in json.loads(out)["turns"][0]["ledger"] if e["kept"]] == ["u1", "a4"]


def test_skip_bad_lists_and_replays_the_good_conversations_and_reports_each_bad_one(tmp_path):
    def tree(tree_id, first_role):
        reply = {"message_id": f"{tree_id}-a", "role": "assistant", "text": "hello", "replies": []}
        return json.dumps(
            {
                "message_tree_id": tree_id,
                "prompt": {
                    "message_id": f"{tree_id}-p",
                    "role": first_role,
                    "text": f"hi from {tree_id}",
                    "replies": [reply],
                },
            }
        )

    path = tmp_path / "trees.jsonl"
    path.write_text("\n".join([tree("one", "prompter"), tree("bad", "assistant"), tree("two", "prompter")]))
    code, _, err = run(path)
    assert code == 2 and "record 1 (conversation 'bad')" in err and "nothing was imported" in err
    proc = subprocess.run(
        [sys.executable, "-m", "core", "ls", str(path), "--skip-bad", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and [r["first_query"] for r in json.loads(proc.stdout)] == [
        "hi from one",
        "hi from two",
    ]
    assert proc.stderr.count("skipped: record 1 (conversation 'bad')") == 1
    code, out, err = run(path, "--skip-bad", "--index", "1", "--format", "json")
    assert code == 0 and json.loads(out)["turns"][0]["ledger"] == [] and "skipped: record 1" in err
    assert "2 conversations" in err  # the good ones: --index counts them
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text(tree("bad", "assistant"))
    code, out, err = run(only_bad, "--skip-bad")
    assert (code, out) == (2, "") and err.splitlines()[-1] == (
        f"error: {only_bad}: nothing to replay (0 conversations from bad.jsonl (oasst); 1 bad record left out)"
    )


def test_where_did_it_go_on_an_agent_apps_log_follows_its_agent_runner():
    agent = ROOT / "sample_data" / "conversations" / "shop-agent.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "why",
            str(agent),
            "Priya",
            "--plugin-token-counting",
            "--context-size",
            "560",
            "--max-tokens",
            "256",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "dify agent app + token counting: had it through turn 2; gone from turn 3 — over token budget 285."
        in proc.stdout
    )


def test_a_react_agent_app_remembers_each_run_as_its_scratchpad_and_forgets_the_final_answers():
    """``--agent-strategy react``: the sample's turn 2 called two tools and then answered with both
    prices; its scratchpad keeps the first step's words, the first call and the last result, so the
    pounds it quoted are never sent again, while the warehouse from turn 1's tool result is."""
    agent = ROOT / "sample_data" / "conversations" / "shop-agent.json"
    code, out, err = run(agent, "--format", "json", "--turn", "5", "--agent-strategy", "react")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["memory"] == "dify_agent"
    reasons = {e["ref"]: e["reason"] for e in doc["turns"][0]["ledger"]}
    assert [
        reasons[r]
        for r in ("msg-2:query", "msg-2:thought1", "msg-2:observation1.1", "msg-2:observation1.2", "msg-2:answer")
    ] == ["kept", "rewritten", "omitted", "rewritten", "omitted"]

    def why(phrase):
        proc = subprocess.run(
            [sys.executable, "-m", "core", "why", str(agent), phrase, "--agent-strategy", "react"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()[-1]

    assert why("£5.93") == (
        "dify agent app (ReAct): never had it — from turn 3 on it was not sent (left out of its turn's scratchpad)."
    )
    assert why("Rotterdam") == "dify agent app (ReAct): still has it at turn 6, the newest turn."
    code, _, err = run(agent, "--agent-strategy", "cot")
    assert code == 2 and "invalid choice: 'cot'" in err


def test_the_table_says_whose_a_regenerated_replys_question_is():
    """ChatGPT's Lisbon trip: turn 3's question is one node of the export that the regenerated turn 4
    holds too; the table names that turn, in its own numbers, where it said the question was never sent."""
    code, out, err = run(CHATGPT, "--index", "0")
    assert code == 0, err
    copies = [line for line in out.splitlines() if "same message" in line]
    assert [line.split("—")[1].strip().split(" (")[0] for line in copies] == [
        "on another branch, but the same message as this turn's",  # turn 4's own question
        "on another branch, but the same message as turn 4's",
    ]  # turn 5's table
    assert all(" turn 3 " in line and line.split()[:2] == ["✗", "other_branch"] for line in copies)
    assert "never sent" not in out
