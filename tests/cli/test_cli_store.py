"""``python -m core conversations | export | import`` against a stored database."""

import json
import subprocess
import sys

from core.io import read_conversations
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database
from tests.conftest import FIXTURES, ROOT

T = FIXTURES / "transcripts"


def cli(*args):
    p = subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    return p.returncode, p.stdout, p.stderr


def _stored_conversation(url):
    db = Database(url)
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="cli").id
    first = service.send(conv, "Hi, I'm Dana.")
    service.send(conv, "Where is my order 4411?")
    service.regenerate(conv, first.id)
    db.dispose()
    return conv


def test_export_then_import_through_the_cli_gives_the_same_json(tmp_path):
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    conv = _stored_conversation(src)
    code, exported, err = cli("export", conv, "--db", src)
    assert code == 0, err
    (tmp_path / "conv.json").write_text(exported)
    code, out, err = cli("import", tmp_path / "conv.json", "--db", dst)
    assert code == 0 and out.strip() == conv, err
    code, again, _ = cli("export", conv, "--db", dst)
    assert json.loads(again) == json.loads(exported)
    code, listing, _ = cli("conversations", "--db", dst)
    assert conv in listing and "1 turn (3 with branches)" in listing and "support-bot v1" in listing


def test_a_malformed_export_exits_2_and_writes_nothing(tmp_path):
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    conv = _stored_conversation(src)
    bundle = json.loads(cli("export", conv, "--db", src)[1])
    bundle["turns"][1]["parent_id"] = 17
    (tmp_path / "bad.json").write_text(json.dumps(bundle))
    code, out, err = cli("import", tmp_path / "bad.json", "--db", dst)
    assert code == 2 and "turn 1: 'parent_id' must be a string or null" in err and "Traceback" not in err
    (tmp_path / "foreign.json").write_text('{"hello": "world"}')
    code, _, err = cli("import", tmp_path / "foreign.json", "--db", dst)
    assert code == 2 and "unknown format" in err
    assert repo.list_conversations(Database(dst)) == []


def test_importing_transcripts_stores_conversations_that_replay_identically(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    code, out, err = cli("import", T / "dify-web__realWorldMessages.json", "--db", url)
    assert code == 0, err
    (conv_id,) = out.split()
    stored = repo.load_conversation(Database(url), conv_id)
    original = read_conversations(T / "dify-web__realWorldMessages.json")[0]
    config = MemoryConfig(window=2)
    for number in range(1, 8):
        a, b = Replay(stored, config).ledger(number), Replay(original, config).ledger(number)
        assert [(e.ref, e.reason, e.tokens) for e in a.entries] == [(e.ref, e.reason, e.tokens) for e in b.entries]


def test_importing_says_what_the_file_held_besides_conversations(tmp_path):
    from tests.io.test_langsmith import chat_model_run

    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"id": "r1", "name": "LangGraph", "run_type": "chain", "inputs": {}, "outputs": {}},
                chat_model_run(),
            )
        )
    )
    code, out, err = cli("import", runs, "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert code == 0, err
    assert len(out.split()) == 1  # the one model call, stored
    assert "note: left out the runs that are not model calls (1 chain): only an LLM run holds a prompt" in err


def test_importing_a_file_again_says_its_conversations_are_stored_as_new_copies(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    path = T / "dify-web__realWorldMessages.json"
    code, _, err = cli("import", path, "--db", url)
    assert code == 0 and "imported before" not in err
    code, out, err = cli("import", path, "--db", url)
    assert code == 0 and len(out.split()) == 1
    assert (
        "note: 1 conversation of this file was imported before (the same source and id): stored again as new "
        "copies" in err
    )


def test_export_of_an_unknown_conversation_is_a_clear_error(tmp_path):
    Database(f"sqlite:///{tmp_path / 'x.db'}").dispose()  # a store that holds none
    code, out, err = cli("export", "no-such-id", "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert code == 1 and out == "" and "no conversation with id 'no-such-id'" in err


def test_run_stores_a_conversation_and_continues_it_on_its_active_thread(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    flow = ROOT / "sample_data" / "flows" / "support-bot.yml"
    (tmp_path / "q1.json").write_text(json.dumps(["Hi, I'm Dana.", "My order number is 4411."]))
    (tmp_path / "q2.json").write_text(json.dumps(["What's my name?"]))
    code, out, err = cli("run", flow, "--queries", tmp_path / "q1.json", "--db", url, "--format", "json")
    assert code == 0, err
    first = json.loads(out)
    conv_id = first["conversation_id"]
    code, out, err = cli(
        "run", flow, "--queries", tmp_path / "q2.json", "--db", url, "--conversation", conv_id, "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    (turn,) = doc["turns"]
    assert doc["conversation_id"] == conv_id and turn["turn"] == 3 and turn["dialogue_count"] == 3
    responder = next(n for n in turn["nodes"] if n["id"] == "responder")
    assert [e["kept"] for e in responder["ledger"]] == [True] * 4
    assert "Dana" in turn["answer"]
    assert len(repo.load_turn_rows(Database(url), conv_id)) == 3


def test_run_refuses_to_continue_a_conversation_with_a_structurally_different_flow(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    (tmp_path / "q.json").write_text(json.dumps(["hello"]))
    code, out, _ = cli(
        "run",
        ROOT / "sample_data" / "flows" / "support-bot.yml",
        "--queries",
        tmp_path / "q.json",
        "--db",
        url,
        "--format",
        "json",
    )
    conv_id = json.loads(out)["conversation_id"]
    code, out, err = cli(
        "run",
        ROOT / "sample_data" / "flows" / "minimal-chat.yml",
        "--queries",
        tmp_path / "q.json",
        "--db",
        url,
        "--conversation",
        conv_id,
    )
    assert code == 2 and "differs from it in structure" in err and out == ""


def test_every_listing_prints_a_stored_time_one_way():
    from core.cli.options import when

    assert when(86_400 * 365 + 3_660.5) == "1971-01-01 01:01"
    assert when(0.0) == "1970-01-01 00:00"
    assert when(None) == ""
    assert when(1e20) == "?"  # a damaged row's time no calendar holds
