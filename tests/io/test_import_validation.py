"""Imports check every field they store: a malformed export, transcript or flow is refused whole,
with one line naming the record and the field, exit status 2, and nothing written."""

import copy
import json

import pytest

from core.cli.app import main
from core.llm.client import DemoClient
from core.service.imports import import_upload
from core.service.sessions import ConversationService, store_conversations
from core.store import repo
from core.store.errors import ImportCheckError
from core.store.db import Database
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
    "string conversation timestamp": (_set(("conversation", "updated_at"), "yesterday"),
                                      "conversation: 'updated_at'"),
    "string turn_seq in variable history": (_set(("variable_history", 0, "turn_seq"), "one"),
                                            "variable change 0: 'turn_seq'"),
    "deeply nested inputs": (_set(("turns", 0, "inputs"), {"x": _nested(500)}), "turns[0].inputs.x"),
    "id too long for its column": (_set(("turns", 0, "id"), "t" * 37), "turn 0: 'id'"),
    "variable value of the wrong type": (_set(("variables", 0, "value"), {"not": "a string"}), "variable 0"),
    "unreadable ledger": (lambda b: b["turns"][0]["node_runs"][-1].__setitem__("ledger", {"runs": "x"}),
                          "turn 0"),
}


@pytest.mark.parametrize("shape", MALFORMED)
def test_a_malformed_export_is_refused_whole_with_one_line_naming_record_and_field(shape, export, tmp_path,
                                                                                   capsys):
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


def test_an_export_over_the_import_size_is_refused_before_it_is_parsed(export, tmp_path, capsys):
    # 52 MB of otherwise valid turns: the size decides, before any parsing or writing.
    turn = export["turns"][0]
    filler = "x" * 4000
    turns = [dict(turn, id=f"t{i}", parent_id=None, seq=i + 1, answer=filler) for i in range(13_500)]
    big = dict(export, turns=turns)
    big["conversation"] = dict(export["conversation"], active_turn_id=None)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    assert path.stat().st_size > 52 * 1024 * 1024
    url = f"sqlite:///{tmp_path / 'dst.db'}"
    code = main(["import", str(path), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and "MemLens imports files up to 50 MB" in err, err
    assert repo.list_conversations(Database(url)) == []
    with pytest.raises(Exception, match="up to 50 MB"):
        import_upload(Database(url), path.read_bytes(), "big.json")


def test_a_transcript_with_a_value_the_store_cannot_keep_writes_nothing(tmp_path):
    from dataclasses import replace

    conv = linear(3)
    conv.turns[1] = replace(conv.turns[1], created_at=float("nan"))
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ImportCheckError, match="turn 1: 'created_at' must be a finite number"):
        store_conversations(db, [linear(2), conv])
    assert repo.list_conversations(db) == []


def test_a_dify_history_with_a_status_too_long_for_its_column_exits_2(tmp_path, capsys):
    rows = [{"id": "m1", "conversation_id": "c1", "parent_message_id": None, "query": "hi", "answer": "hello",
             "created_at": 1700000000, "status": "normal" * 5}]
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

    assert load_yaml("base: &b {model: gpt-4o}\nnode: *b\n") == {"base": {"model": "gpt-4o"},
                                                                 "node": {"model": "gpt-4o"}}


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


@pytest.mark.parametrize("shape", ["NaN created_at", "id too long for its column", "string turn_seq in variable history"])
def test_shapes_a_postgresql_store_would_choke_on_are_refused_on_both_backends(shape, export, db_url, tmp_path,
                                                                             capsys):
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
