"""The command line's conventions, the same for every command: what is read is ``--input-format``, what
is printed ``--format`` (csv for tables, ISO 8601 times), ``--conversation`` names a stored conversation,
run bare a command prints its help, exit statuses 0/1/2, progress on a terminal's stderr, retries of
passing failures, and ``--help`` without the commands' imports."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import httpx
import pytest

from core.cli import main as main_module
from core.cli.main import COMMANDS, main
from core.store.db import Database
from tests.builders import recorded_support_bot
from tests.conftest import FIXTURES, ROOT

LISBON = ROOT / "sample_data" / "conversations" / "lisbon-trip.json"
TAU = FIXTURES / "transcripts" / "taubench__gpt-4o-airline.sample.jsonl"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def stored(tmp_path):
    """A database with one three-turn conversation recorded on the support-bot flow: (url, conversation id)."""
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    return url, recorded_support_bot(url)


# -- what is read, what is printed -------------------------------------------------------------------


def test_input_format_names_what_is_read_and_the_old_spelling_still_works_with_a_note(capsys):
    code, new, err = run(capsys, "replay", LISBON, "--input-format", "openai", "--turn", "3", "--format", "json")
    assert code == 0 and err == ""
    code, old, err = run(capsys, "replay", LISBON, "--format-in", "openai", "--turn", "3", "--format", "json")
    assert code == 0 and old == new
    assert err == "note: --format-in is deprecated; use --input-format openai\n"


def test_import_s_old_format_option_reads_as_the_input_format_with_a_note(capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    code, out, err = run(capsys, "import", TAU, "--format", "openai", "--db", url)
    assert code == 0 and len(out.split()) == 6
    assert "note: --format is deprecated; use --input-format openai" in err
    code, _, err = run(capsys, "import", TAU, "--input-format", "sharegpt", "--db", url)
    assert code == 2 and "'conversations' must be a list" in err  # the format given is the one read


def test_an_unknown_input_format_lists_the_known_ones(capsys):
    code, _, err = run(capsys, "ls", LISBON, "--input-format", "xml")
    assert code == 2 and "unknown format 'xml'; expected one of" in err and "openai" in err


def test_csv_prints_the_rows_json_does_with_a_header(capsys):
    _, as_json, _ = run(capsys, "ls", TAU, "--format", "json")
    code, as_csv, _ = run(capsys, "ls", TAU, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    assert [(int(r["index"]), int(r["turns"]), r["first_query"]) for r in rows] == [
        (r["index"], r["turns"], r["first_query"]) for r in json.loads(as_json)
    ]


def test_replay_csv_is_one_row_per_earlier_message_of_each_turn(capsys):
    _, as_json, _ = run(capsys, "replay", LISBON, "--window", "3", "--format", "json")
    code, as_csv, _ = run(capsys, "replay", LISBON, "--window", "3", "--format", "csv")
    assert code == 0
    expected = [
        (t["turn"], str(e["ref"]), e["turn"], e["role"], e["tokens"], e["kept"], e["reason"])
        for t in json.loads(as_json)["turns"]
        for e in t["ledger"]
    ]
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    assert [
        (
            int(r["turn"]),
            r["ref"],
            int(r["message_turn"]),
            r["role"],
            int(r["tokens"]),
            json.loads(r["kept"]),
            r["reason"],
        )
        for r in rows
    ] == expected
    assert {r["reason"] for r in rows} == {"kept", "outside_window"}


def test_stored_times_print_as_iso_8601_in_json_and_csv(capsys, stored):
    url, conv = stored
    _, out, _ = run(capsys, "conversations", "--db", url, "--format", "json")
    row = json.loads(out)[0]
    assert row["id"] == conv and ISO.match(row["created_at"]) and ISO.match(row["updated_at"])
    _, out, _ = run(capsys, "flows", "list", "--db", url, "--format", "json")
    assert ISO.match(json.loads(out)[0]["created_at"])
    _, out, _ = run(capsys, "conversations", "--db", url, "--format", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert row["id"] == conv and ISO.match(row["updated_at"]) and row["damaged"] == "[]"
    flow_id = json.loads(run(capsys, "flows", "list", "--db", url, "--format", "json")[1])[0]["id"]
    assert run(capsys, "keys", "create", flow_id, "--db", url)[0] == 0
    _, out, _ = run(capsys, "keys", "list", "--db", url, "--format", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert ISO.match(row["created_at"]) and row["revoked_at"] == ""


# -- --conversation ------------------------------------------------------------------------------------


def test_replay_takes_a_stored_conversation(capsys, stored):
    url, conv = stored
    code, out, err = run(capsys, "replay", "--conversation", conv, "--db", url, "--window", "2", "--format", "json")
    assert code == 0, err
    turns = json.loads(out)["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert [e["reason"] for e in turns[-1]["ledger"]] == ["outside_window", "outside_window", "kept", "kept"]


def test_replay_wants_a_file_or_a_conversation_not_both(capsys, stored):
    url, conv = stored
    code, _, err = run(capsys, "replay", LISBON, "--conversation", conv, "--db", url)
    assert code == 2 and "give a conversation FILE or --conversation ID (one of them)" in err


def test_export_takes_the_conversation_either_way(capsys, stored):
    url, conv = stored
    code, by_position, _ = run(capsys, "export", conv, "--db", url)
    assert code == 0
    code, by_option, _ = run(capsys, "export", "--conversation", conv, "--db", url)
    assert code == 0 and by_option == by_position


# -- help, exit statuses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, shown",
    [
        ([], "commands:"),
        (["flows"], "{import,list}"),
        (["keys"], "{create,revoke,list}"),
        (["replay"], "--conversation ID"),
        (["why"], "phrase"),
        (["export"], "--conversation ID"),
    ],
)
def test_run_bare_a_command_prints_its_help_and_exits_2(capsys, args, shown):
    code, out, err = run(capsys, *args)
    assert code == 2 and out.startswith("usage:") and shown in out and "error" not in err


def test_help_and_version_exit_0(capsys):
    assert run(capsys, "--version")[:2] == (0, "memlens 1.0.0\n")
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(f"  {name} " in out for name in COMMANDS)


@pytest.mark.parametrize(
    "args, status, words",
    [
        (["export", "no-such-id"], 1, "no conversation with id 'no-such-id'"),
        (["why", "--conversation", "no-such-id", "Dana"], 1, "no conversation with id"),
        (["keys", "revoke", "no-such-key"], 1, "no API key with id"),
        (["replay", "--conversation", "no-such-id"], 1, "no conversation with id"),
        (["replay", str(LISBON), "--window", "-1"], 2, "--window -1 is out of range"),
        (["replay", str(ROOT / "no-such-file.json")], 2, "no-such-file.json"),
        (["bogus"], 2, "unknown command 'bogus'"),
        (["ls", str(LISBON), "--colour"], 2, "unrecognized arguments: --colour"),
    ],
)
def test_exit_status_is_1_for_a_runtime_failure_and_2_for_bad_input(capsys, tmp_path, args, status, words):
    from core.store.db import Database

    Database(f"sqlite:///{tmp_path / 'x.db'}").dispose()  # a store that holds none (a reader makes none)
    code, out, err = (
        run(capsys, *args, "--db", f"sqlite:///{tmp_path / 'x.db'}")
        if args[0] in ("export", "why", "keys") or "--conversation" in args
        else run(capsys, *args)
    )
    assert (code, out) == (status, ""), err
    assert err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1


def test_a_model_failure_is_a_runtime_failure(capsys, monkeypatch):
    from core.cli.commands import run as run_command
    from core.llm.errors import LLMError

    def fails(args):
        raise LLMError("openai/gpt-4o: cannot reach the provider (3 attempts over 1.6 s)")

    monkeypatch.setattr(run_command, "cmd_run", fails)
    code, _, err = run(capsys, "run", "flow.yml", "--queries", "q.json")
    assert code == 1 and "3 attempts" in err


# -- --help without the commands' imports ----------------------------------------------------------------


def _loaded_by(*args) -> set[str]:
    code = (
        "import sys; from core.cli.main import main\n"
        "try: main(%r)\nexcept SystemExit: pass\n"
        "print(' '.join(sorted(sys.modules)))" % (list(args),)
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return set(proc.stdout.split())


def test_help_imports_no_command_and_no_heavy_library():
    loaded = _loaded_by("--help")
    assert not {m for m in loaded if m.startswith(("core.cli.app", "core.cli.commands."))}
    assert not loaded & {"sqlalchemy", "litellm", "streamlit", "numpy", "pandas", "fastapi", "tiktoken", "httpx"}


def test_a_command_imports_its_own_module_only():
    loaded = _loaded_by("flows", "--help")
    commands = {m for m in loaded if m.startswith("core.cli.commands.") or m == "core.cli.app"}
    assert commands == {"core.cli.commands.flows"}


def test_every_command_module_has_its_line_in_commands():
    assert main_module._unlisted_modules() == []
    parser = main_module.build_parser()
    assert set(parser.commands) == set(COMMANDS)


# -- progress on a terminal ---------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_run_shows_progress_on_a_terminal_and_nothing_elsewhere(capsys, monkeypatch):
    flow = ROOT / "sample_data" / "flows" / "support-bot.yml"
    queries = ROOT / "sample_data" / "flows" / "support-bot.queries.json"
    code, _, err = run(capsys, "run", flow, "--queries", queries, "--format", "json")
    assert code == 0 and err == ""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["run", str(flow), "--queries", str(queries), "--format", "json"]) == 0
    shown = terminal.getvalue()
    total = len(json.loads(queries.read_text()))
    assert f"run: 1 of {total} turns" in shown and f"run: {total} of {total} turns" in shown
    assert shown.endswith("\r\x1b[K")  # wiped at the end


def test_report_replies_and_import_show_progress_on_a_terminal(monkeypatch, tmp_path, capsys):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["report", str(LISBON), "--replies", "-o", str(tmp_path / "r.html")]) == 0
    assert re.search(r"report: \d+ replies asked again", terminal.getvalue())
    assert main(["import", str(TAU), "--db", f"sqlite:///{tmp_path / 'x.db'}"]) == 0
    assert re.search(r"import: [\d.]+ of [\d.]+ MB read", terminal.getvalue())


# -- retries ------------------------------------------------------------------------------------------------


@pytest.fixture
def no_waiting(monkeypatch):
    import core.retry

    pauses = []
    monkeypatch.setattr(core.retry, "sleep", pauses.append)
    return pauses


def _answers(*statuses, headers=None):
    """A transport answering each request with the next status (an empty page when 200)."""
    queue = list(statuses)

    def handle(request):
        status = queue.pop(0) if queue else 200
        body = {"data": [], "has_more": False} if status == 200 else {"message": "busy"}
        return httpx.Response(status, json=body, headers=headers or {})

    return httpx.MockTransport(handle)


def test_pull_tries_a_429_or_5xx_again_and_goes_on(no_waiting, tmp_path):
    from core.service.dify_pull import pull

    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    result = pull(
        db,
        "https://dify.example/v1",
        "app-key",
        "dana",
        everything=True,
        transport=_answers(429, 503, headers={"Retry-After": "2"}),
    )
    assert result.ids == {} and no_waiting == [2.0, 2.0]


def test_pull_says_how_many_tries_failed(no_waiting, tmp_path):
    from core.io.errors import PullFailedError
    from core.service.dify_pull import pull

    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(PullFailedError, match=r"answered 503 \(busy\) \(3 attempts over [\d.]+ s\)"):
        pull(db, "https://dify.example/v1", "app-key", "dana", everything=True, transport=_answers(503, 503, 503))
    assert len(no_waiting) == 2 and no_waiting[0] < no_waiting[1]  # the pause grows


def test_pull_does_not_retry_a_refused_key(no_waiting, tmp_path):
    from core.io.errors import PullFailedError
    from core.service.dify_pull import pull

    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(PullFailedError, match="refused the key"):
        pull(db, "https://dify.example/v1", "app-key", "dana", everything=True, transport=_answers(401))
    assert no_waiting == []


def _litellm_error(name: str, status: int):
    import litellm

    cls = getattr(litellm, name)
    response = httpx.Response(status, request=httpx.Request("POST", "https://api.openai.com/v1/chat/completions"))
    try:
        return cls(message="busy", llm_provider="openai", model="gpt-4o", response=response)
    except TypeError:
        return cls(message="busy", llm_provider="openai", model="gpt-4o")


@pytest.mark.parametrize(
    "name, status, tries",
    [
        ("RateLimitError", 429, 3),
        ("InternalServerError", 500, 3),
        ("Timeout", 408, 3),
        ("AuthenticationError", 401, 1),
        ("BadRequestError", 400, 1),
    ],
)
def test_a_model_call_is_tried_again_only_after_a_passing_failure(no_waiting, monkeypatch, name, status, tries):
    from core.llm import client as llm_client
    from core.llm.errors import LLMError

    litellm = llm_client._litellm()
    calls = []

    def completion(**kwargs):
        calls.append(kwargs)
        raise _litellm_error(name, status)

    monkeypatch.setattr(litellm, "completion", completion)
    monkeypatch.setattr(llm_client.LiteLLMClient, "route", lambda self, model: (model, ""))
    with pytest.raises(LLMError) as info:
        llm_client.LiteLLMClient().complete("openai/gpt-4o", [{"role": "user", "content": "hi"}])
    assert len(calls) == tries and len(no_waiting) == tries - 1
    assert all(c["num_retries"] == 0 and c["max_retries"] == 0 for c in calls)  # no retries inside litellm
    assert (f"({tries} attempts over" in str(info.value)) == (tries > 1)


def test_a_model_call_that_succeeds_on_a_later_try_returns_its_reply(no_waiting, monkeypatch):
    from core.llm import client as llm_client

    litellm = llm_client._litellm()
    real = litellm.completion
    failures = [_litellm_error("RateLimitError", 429)]

    def completion(**kwargs):
        if failures:
            raise failures.pop()
        return real(**{**kwargs, "model": "memlens/demo"})

    monkeypatch.setattr(litellm, "completion", completion)
    monkeypatch.setattr(llm_client.LiteLLMClient, "route", lambda self, model: (model, ""))
    reply = llm_client.LiteLLMClient().complete("openai/gpt-4o", [{"role": "user", "content": "My name is Dana."}])
    assert "Dana" in reply.text and len(no_waiting) == 1
