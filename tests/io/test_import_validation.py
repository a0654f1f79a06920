"""Imports check every field they store: a malformed export, transcript or flow is refused whole,
with one line naming the record and the field, exit status 2, and nothing written."""

import copy
import json
import os
import re
import subprocess
import sys

import pytest

from core.cli.app import main
from core.llm.client import DemoClient
from core.service.imports import import_upload
from core.service.sessions import ConversationService
from core.service.transfer import store_conversations
from core.store import repo
from core.store.db import Database
from core.store.errors import ImportCheckError
from tests.builders import linear
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('src') / 'src.db'}"
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="shapes").id
    first = service.send(conv, "Hi, I'm Dana.")
    service.send(conv, "Where is my order 4411?")
    service.regenerate(conv, first.id)
    bundle = service.export(conv)
    db.dispose()
    assert bundle["variable_history"], "the sample flow must write a variable for the history shape"
    return bundle


def _set(path, value):
    def mutate(bundle):
        *head, last = path
        target = bundle
        for key in head:
            target = target[key]
        target[last] = value

    return mutate


def _nested(levels):
    value = []
    for _ in range(levels):
        value = [value]
    return value


# (mutation, words the one-line error must contain: the record and the field)
MALFORMED = {
    "inputs not an object": (_set(("conversation", "inputs"), "notadict"), "conversation: 'inputs'"),
    "NaN created_at": (_set(("conversation", "created_at"), float("nan")), "conversation: 'created_at'"),
    "object dialogue_count": (_set(("turns", 0, "dialogue_count"), {"n": 1}), "turn 0: 'dialogue_count'"),
    "node runs not a list": (_set(("turns", 1, "node_runs"), "llm"), "turn 1: 'node_runs'"),
    "node run not an object": (_set(("turns", 1, "node_runs"), ["llm"]), "turn 1 node run 0"),
    "string seq": (_set(("turns", 0, "seq"), "two"), "turn 0: 'seq'"),
    "string turn timestamp": (_set(("turns", 2, "created_at"), "2024-05-01T10:00:00Z"), "turn 2: 'created_at'"),
    "string conversation timestamp": (_set(("conversation", "updated_at"), "yesterday"), "conversation: 'updated_at'"),
    "string turn_seq in variable history": (
        _set(("variable_history", 0, "turn_seq"), "one"),
        "variable change 0: 'turn_seq'",
    ),
    "deeply nested inputs": (_set(("turns", 0, "inputs"), {"x": _nested(500)}), "turns[0].inputs.x"),
    "id too long for its column": (_set(("turns", 0, "id"), "t" * 37), "turn 0: 'id'"),
    "variable value of the wrong type": (_set(("variables", 0, "value"), {"not": "a string"}), "variable 0"),
    "unreadable ledger": (lambda b: b["turns"][0]["node_runs"][-1].__setitem__("ledger", {"runs": "x"}), "turn 0"),
}


@pytest.mark.parametrize("shape", MALFORMED)
def test_a_malformed_export_is_refused_whole_with_one_line_naming_record_and_field(shape, export, tmp_path, capsys):
    mutate, where = MALFORMED[shape]
    bundle = copy.deepcopy(export)
    mutate(bundle)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bundle))
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    code = main(["import", str(path), "--db", url])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert where in err, err
    assert repo.list_conversations(Database(url)) == []


def test_the_untouched_export_still_imports(export, tmp_path, capsys):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(export))
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    assert main(["import", str(path), "--db", url]) == 0
    assert capsys.readouterr().out.strip() == export["conversation"]["id"]


def test_the_import_page_refuses_the_same_export_and_stores_nothing(export, tmp_path):
    bundle = copy.deepcopy(export)
    bundle["conversation"]["inputs"] = "notadict"
    db = Database(f"sqlite:///{tmp_path / 'dst.db'}")
    with pytest.raises(Exception) as caught:
        import_upload(db, json.dumps(bundle).encode(), "bad.json")
    assert "conversation: 'inputs' must be an object" in str(caught.value)
    assert repo.list_conversations(db) == []


def test_an_export_nested_thousands_of_levels_is_refused_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "memlens-conversation", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code = main(["import", str(path), "--db", f"sqlite:///{tmp_path / 'dst.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and "nested more than" in err and len(err.strip().splitlines()) == 1


def _small_limits(tmp_path, script: str) -> subprocess.CompletedProcess:
    """``script`` run with an import size of 1 MB and 1,000 turns a conversation: the export size is then
    2 MB + 1,000 × 1,000 bytes, about 2.95 MB."""
    env = {
        **os.environ,
        "MEMLENS_MAX_IMPORT_MB": "1",
        "MEMLENS_MAX_TURNS": "1000",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_an_export_over_the_export_size_is_refused_before_it_is_parsed(export, tmp_path):
    turn = export["turns"][0]
    turns = [dict(turn, id=f"t{i}", parent_id=None, seq=i + 1, answer="x" * 4000) for i in range(800)]
    big = dict(export, turns=turns)
    big["conversation"] = dict(export["conversation"], active_turn_id=None)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    assert path.stat().st_size > 3 * 1024 * 1024
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    done = _small_limits(
        tmp_path,
        f"""
import sys
from core.cli.app import main
from core.service.imports import import_upload
from core.store.db import Database
code = main(["import", {str(path)!r}, "--db", {url!r}])
try:
    import_upload(Database({url!r}), open({str(path)!r}, "rb").read(), "big.json")
except Exception as e:
    print("upload:", e)
sys.exit(code)""",
    )
    assert done.returncode == 2, done.stderr
    refusal = r"big\.json is [\d.]+ MB; MemLens reads conversation exports up to 3\.0 MB \(twice the import size"
    assert re.search(refusal, done.stderr) and re.search("upload: " + refusal, done.stdout), done
    assert len(done.stderr.strip().splitlines()) == 1
    assert repo.list_conversations(Database(url)) == []


@pytest.mark.parametrize(
    "shape",
    [
        "as many turns as a conversation holds, each empty",
        "text up to the import size",
        "both at once, with tool rounds",
    ],
)
def test_the_export_of_the_largest_transcript_memlens_imports_imports_back(tmp_path, shape):
    """The import size and the most turns a conversation holds set what an export may weigh, so the
    export of anything imported imports back (run with small limits: 1 MB, 1,000 turns)."""
    turns, text, tools = {
        "as many turns as a conversation holds, each empty": (1000, 0, False),
        "text up to the import size": (20, 24_000, False),
        "both at once, with tool rounds": (1000, 200, True),
    }[shape]
    messages = []
    for i in range(turns):
        messages.append({"role": "user", "content": "q" * text})
        if tools:
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": ""})
        messages.append({"role": "assistant", "content": '"\\' * (text // 3)})
    source = tmp_path / "chat.json"
    source.write_text(json.dumps({"messages": messages}, separators=(",", ":")))
    while source.stat().st_size > 1024 * 1024:  # no larger than the import size
        messages = messages[:-4]
        source.write_text(json.dumps({"messages": messages}, separators=(",", ":")))
    first, again = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    done = _small_limits(
        tmp_path,
        f"""
import contextlib, io, sys
from core.cli.app import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["import", {str(source)!r}, "--db", {first!r}]) == 0
conversation = out.getvalue().split()[0]
with open({str(tmp_path / "export.json")!r}, "w") as fh, contextlib.redirect_stdout(fh):
    assert main(["export", conversation, "--db", {first!r}]) == 0
sys.exit(main(["import", {str(tmp_path / "export.json")!r}, "--db", {again!r}]))""",
    )
    assert done.returncode == 0, done.stderr
    exported = (tmp_path / "export.json").stat().st_size
    assert exported > (1024 * 1024 if text else 6 * source.stat().st_size)  # what the import size alone refused


def test_a_transcript_with_a_value_the_store_cannot_keep_writes_nothing(tmp_path):
    from dataclasses import replace

    conv = linear(3)
    conv.turns[1] = replace(conv.turns[1], created_at=float("nan"))
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ImportCheckError, match="turn 1: 'created_at' must be a finite number"):
        store_conversations(db, [linear(2), conv])
    assert repo.list_conversations(db) == []


def test_a_dify_history_with_a_status_too_long_for_its_column_exits_2(tmp_path, capsys):
    rows = [
        {
            "id": "m1",
            "conversation_id": "c1",
            "parent_message_id": None,
            "query": "hi",
            "answer": "hello",
            "created_at": 1700000000,
            "status": "normal" * 5,
        }
    ]
    path = tmp_path / "dify.json"
    path.write_text(json.dumps({"data": rows}))
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    code = main(["import", str(path), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and "turn 0: 'status' is 30 characters" in err, err
    assert repo.list_conversations(Database(url)) == []


def _billion_laughs() -> str:
    text = 'app: {name: bomb, mode: advanced-chat}\nlol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for i in range(1, 10):
        text += f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return text + "workflow: {graph: {nodes: [], edges: []}, extra: *l9}\n"


def test_a_yaml_bomb_is_refused_by_flows_import_and_run(tmp_path, capsys):
    bomb = tmp_path / "bomb.yml"
    bomb.write_text(_billion_laughs())
    queries = tmp_path / "q.json"
    queries.write_text('["hi"]')
    code = main(["flows", "import", str(bomb), "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and "through its aliases" in err and len(err.strip().splitlines()) == 1
    code = main(["run", str(bomb), "--queries", str(queries)])
    err = capsys.readouterr().err
    assert code == 2 and "through its aliases" in err


def test_a_flow_nested_thousands_of_levels_is_refused_in_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.yml"
    deep.write_text("app: " + "[" * 5000 + "]" * 5000 + "\n")
    code = main(["flows", "import", str(deep), "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and "nested more than 100 levels" in err and len(err.strip().splitlines()) == 1


def test_yaml_aliases_within_the_limit_still_load():
    from core.limits import load_yaml

    assert load_yaml("base: &b {model: gpt-4o}\nnode: *b\n") == {
        "base": {"model": "gpt-4o"},
        "node": {"model": "gpt-4o"},
    }


def test_a_transcript_record_nested_past_the_limit_is_a_bad_record_naming_where(tmp_path, capsys):
    deep = {"messages": [{"role": "user", "content": "hi", "extra": _nested(300)}]}
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "fine"}]}) + "\n" + json.dumps(deep) + "\n")
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    code = main(["import", str(path), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and "record 1" in err and "'messages[0].extra" in err and "nested more than 100" in err, err
    assert repo.list_conversations(Database(url)) == []


def test_every_limit_is_documented_and_set_by_its_variable(tmp_path):
    import subprocess
    import sys

    from core.limits import LIMITS

    limits_doc = (ROOT / "docs" / "security.md").read_text()  # its Limits table
    for lim in LIMITS:
        assert f"`{lim.env}`" in limits_doc, lim.env
    # A lower depth set in the environment refuses what the default accepts; a bad value keeps the default.
    code = "import core.limits as l; l.check_value([[1]], 'x'); print('ok'); l.check_value([[[[1]]]], 'x')"
    env = {"PATH": "/usr/bin:/bin", "MEMLENS_MAX_DEPTH": "3"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 1 and "nested more than 3 levels" in p.stderr and p.stdout == "ok\n"
    env["MEMLENS_MAX_DEPTH"] = "lots"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and "MEMLENS_MAX_DEPTH='lots'" in p.stderr


@pytest.mark.parametrize(
    "shape", ["NaN created_at", "id too long for its column", "string turn_seq in variable history"]
)
def test_shapes_a_postgresql_store_would_choke_on_are_refused_on_both_backends(shape, export, db_url, tmp_path, capsys):
    mutate, where = MALFORMED[shape]
    bundle = copy.deepcopy(export)
    mutate(bundle)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bundle))
    code = main(["import", str(path), "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2 and where in err and len(err.strip().splitlines()) == 1
    assert repo.list_conversations(Database(db_url)) == []
    good = tmp_path / "good.json"
    good.write_text(json.dumps(export))
    assert main(["import", str(good), "--db", db_url]) == 0


def test_a_flow_file_over_the_flow_size_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    import core.limits

    monkeypatch.setattr(core.limits, "MAX_FLOW_BYTES", 200)
    big = tmp_path / "big.yml"
    big.write_text((ROOT / "sample_data" / "flows" / "support-bot.yml").read_text())
    code = main(["flows", "import", str(big), "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and "big.yml is" in err and "flow files are at most 200 bytes" in err


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env},
    )


def test_a_message_over_the_message_size_is_refused_in_one_line_by_every_command_that_reads_it(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "x" * 2001},
                    {"role": "assistant", "content": "ok"},
                ]
            }
        )
    )
    small = {"MEMLENS_MAX_MESSAGE_CHARS": "2000"}
    for args in (
        ["import", str(path), "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        ["replay", str(path)],
        ["report", str(path), "-o", str(tmp_path / "r.html")],
    ):
        done = _run(args, small)
        assert done.returncode == 2, (args, done.stderr)
        assert (
            done.stderr.count("\n") == 1
            and "turn 2, message 1 is 2,001 characters; MemLens takes messages of up "
            "to 2,000 (raise MEMLENS_MAX_MESSAGE_CHARS"
            in done.stderr
        ), done.stderr
    assert not (tmp_path / "r.html").exists()
    assert _run(["replay", str(path)], {}).returncode == 0  # the default takes it


def test_a_conversation_over_the_turn_limit_is_refused_before_any_work(tmp_path):
    path = tmp_path / "many.json"
    messages = [
        m for i in range(30) for m in ({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a"})
    ]
    path.write_text(json.dumps({"messages": messages}))
    url = f"sqlite:///{tmp_path / 'x.db'}"
    done = _run(["import", str(path), "--db", url], {"MEMLENS_MAX_TURNS": "20"})
    assert done.returncode == 2 and "has 30 turns; MemLens takes conversations of up to 20" in done.stderr
    assert done.stderr.count("\n") == 1
    imported = _run(["import", str(path), "--db", url], {})  # a store holding one longer than the limit
    assert imported.returncode == 0, imported.stderr
    done = _run(
        ["report", "--conversation", imported.stdout.split()[0], "--db", url, "-o", str(tmp_path / "r.html")],
        {"MEMLENS_MAX_TURNS": "20"},
    )
    assert done.returncode == 2 and done.stderr.startswith(
        "error: the conversation has 30 turns; MemLens takes conversations of up to 20 (a report on 100,000 takes about"
    )
    assert not (tmp_path / "r.html").exists()


def test_following_facts_over_a_long_branched_conversation_is_refused_before_the_work():
    """Each fact is asked at every turn of a conversation walked depth first: the limit counts that work."""
    from core.analysis.compare import compare
    from core.memory.config import MemoryConfig
    from tests.builders import dify

    rows = [
        (str(i), str(i - 3 if i % 5 == 0 and i > 3 else i - 1) if i > 1 else None, f"My name is Dana{i}.", "ok")
        for i in range(1, 41)
    ]
    conv = dify(rows)
    assert not conv.one_thread()
    configs = [MemoryConfig(window=3), MemoryConfig(strategy="buffer")]
    assert len(compare(conv, configs).facts) == 40
    script = (
        "from core.analysis.compare import compare\nfrom core.memory.replay import MemoryConfig\n"
        "from tests.builders import dify\n"
        f"conv = dify({rows!r})\n"
        "compare(conv, [MemoryConfig(window=3), MemoryConfig(strategy='buffer')])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MEMLENS_MAX_FACT_CHECKS": "3000", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert (
        "LimitError: following 40 facts over the 40 turns of a branched conversation under 2 configs asks 3,200 "
        "questions; MemLens asks at most 3,000 (raise MEMLENS_MAX_FACT_CHECKS)" in done.stderr
    ), done.stderr
