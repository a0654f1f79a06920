"""Every command-line error is one line — never a traceback — with exit status 1 for a runtime
failure (a database that cannot be opened, a bug) and 2 for a usage error or bad input."""

import socket
import subprocess
import sys

import pytest

from core.cli.app import main
from tests.conftest import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line_error(capsys, code, status=1):
    captured = capsys.readouterr()
    assert code == status, captured
    assert captured.err.startswith("error: ") and len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


def test_an_unreachable_postgresql_server_without_a_password_is_one_line(capsys):
    url = f"postgresql+psycopg://memlens@127.0.0.1:{_free_port()}/memlens"
    err = _one_line_error(capsys, main(["conversations", "--db", url]))
    assert "cannot open the database" in err and "127.0.0.1" in err


def test_a_password_in_the_url_is_never_printed(capsys):
    url = f"postgresql+psycopg://memlens:hunter2secret@127.0.0.1:{_free_port()}/memlens"
    err = _one_line_error(capsys, main(["conversations", "--db", url]))
    assert "hunter2secret" not in err and "***" in err


def test_a_sqlite_path_that_cannot_be_created_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    err = _one_line_error(
        capsys,
        main(
            [
                "flows",
                "import",
                str(ROOT / "sample_data" / "flows" / "minimal-chat.yml"),
                "--db",
                f"sqlite:///{blocker / 'memlens.db'}",
            ]
        ),
    )
    assert "cannot open the database" in err


def test_a_sqlite_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    err = _one_line_error(capsys, main(["export", "x", "--db", f"sqlite:///{tmp_path}"]))
    assert "cannot open the database" in err


def test_a_database_without_a_driver_is_one_line(capsys):
    err = _one_line_error(capsys, main(["conversations", "--db", "mysql://user@localhost/memlens"]))
    assert "driver" in err


def test_a_malformed_database_url_is_bad_input(capsys):
    err = _one_line_error(capsys, main(["conversations", "--db", "not a url"]), status=2)
    assert "not a database URL" in err


@pytest.mark.parametrize("port, words", [("99999", "out of range"), ("-1", "out of range"), ("web", "whole number")])
def test_serve_refuses_a_bad_port_in_one_line(port, words, capsys):
    err = _one_line_error(capsys, main(["serve", "--port", port]), status=2)
    assert words in err


def test_an_unexpected_failure_is_one_line_unless_debugging(monkeypatch, capsys):
    from core.cli.commands import store

    def broken(_args):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(store, "cmd_conversations", broken)
    monkeypatch.delenv("MEMLENS_DEBUG", raising=False)
    parser_main = main(["conversations"])
    err = _one_line_error(capsys, parser_main)
    assert "RuntimeError: disk on fire second line" in err and "MEMLENS_DEBUG=1" in err
    monkeypatch.setenv("MEMLENS_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["conversations"])


def test_the_real_process_prints_no_traceback_for_a_bad_database(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    p = subprocess.run(
        [sys.executable, "-m", "core", "export", "some-id", "--db", f"sqlite:///{blocker / 'x.db'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "no database at" in p.stderr  # a command that only reads makes none


# -- input that is not text, numbers too long to read, databases a command cannot use --------------------


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
    )


def _refused(p: subprocess.CompletedProcess, words: str, status: int = 2) -> None:
    """One line naming ``words``; status 2 for bad input, 1 for a database that cannot be used."""
    assert p.returncode == status, p
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert words in p.stderr and "Traceback" not in p.stderr and "[SQL" not in p.stderr, p.stderr


@pytest.mark.parametrize(
    "text, words",
    [
        (
            '"hi \\ud800 there"',
            "'messages[0].content' holds text with a lone surrogate (\\ud800), which is not text UTF-8 can hold",
        ),
        (
            '"hi \\u0000 there"',
            "'messages[0].content' holds text with a NUL character (\\u0000), which PostgreSQL cannot store",
        ),
    ],
)
def test_text_no_store_keeps_is_refused_by_every_command_that_reads_the_file(tmp_path, text, words):
    path = tmp_path / "chat.json"
    path.write_text('{"messages": [{"role": "user", "content": %s}, {"role": "assistant", "content": "ok"}]}' % text)
    for args in (
        ["import", str(path), "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        ["replay", str(path)],
        ["ls", str(path)],
        ["report", str(path), "-o", str(tmp_path / "r.html")],
        ["why", str(path), "hi"],
    ):
        _refused(_run(*args), words)


def test_a_nul_is_refused_before_it_reaches_postgresql(tmp_path, postgres):
    url = postgres.create_database()
    path = tmp_path / "chat.json"
    path.write_text('{"messages": [{"role": "user", "content": "a\\u0000b"}, {"role": "assistant", "content": "ok"}]}')
    _refused(_run("import", str(path), "--db", url), "holds text with a NUL character")
    assert _run("conversations", "--db", url, "--format", "json").stdout.strip() == "[]"


def test_a_number_past_pythons_digit_limit_is_one_line_in_a_file_a_flow_and_an_input(tmp_path):
    huge = "1" + "0" * 5000
    chat = tmp_path / "chat.json"
    chat.write_text(
        '{"messages": [{"role": "user", "content": "hi", "n": %s}, {"role": "assistant", "content": "ok"}]}' % huge
    )
    for args in (["import", str(chat), "--db", f"sqlite:///{tmp_path / 'x.db'}"], ["replay", str(chat)]):
        _refused(_run(*args), "holds a whole number of more than 4,300 digits")
    flow = tmp_path / "flow.yml"
    flow.write_text((ROOT / "sample_data" / "flows" / "minimal-chat.yml").read_text() + f"\nextra: {huge}\n")
    _refused(
        _run("flows", "import", str(flow), "--db", f"sqlite:///{tmp_path / 'y.db'}"),
        "flow.yml holds a whole number of more than 4,300 digits",
    )
    queries = tmp_path / "queries.json"
    queries.write_text('[{"query": "hi", "inputs": {"n": %s}}]' % huge)
    _refused(
        _run("run", str(ROOT / "sample_data" / "flows" / "minimal-chat.yml"), "--queries", str(queries)),
        "holds a whole number of more than 4,300 digits",
    )


def test_an_argument_that_is_not_utf8_is_one_line():
    p = subprocess.run(
        [sys.executable.encode(), b"-m", b"core", b"why", str(ROOT / "README.md").encode(), b"\xff"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.decode() == "error: argument 3 ('\\udcff') is not UTF-8 text\n"


def test_a_database_url_of_an_unknown_kind_is_one_line(capsys):
    err = _one_line_error(capsys, main(["conversations", "--db", "foo://bar"]), 2)
    assert err.startswith("error: foo://bar: MemLens has no driver for foo:// databases; expected e.g. sqlite:///")


@pytest.mark.parametrize(
    "args",
    [
        ["conversations"],
        ["conversations", "--format", "json"],
        ["export", "some-id"],
        ["report", "--conversation", "some-id", "-o", "r.html"],
        ["flows", "list"],
        ["keys", "list"],
        ["why", "--conversation", "some-id", "Dana"],
        ["replay", "--conversation", "some-id"],
    ],
)
def test_a_command_that_only_reads_makes_no_folder_and_no_database(tmp_path, args):
    url = f"sqlite:///{tmp_path / 'new-folder' / 'memlens.db'}"
    p = _run(*args, "--db", url)
    assert not (tmp_path / "new-folder").exists()
    if args[0] == "conversations":  # nothing stored there: none listed
        assert p.returncode == 0 and p.stdout.strip() in (
            "[]",
            f"no conversations yet (no database at {tmp_path / 'new-folder' / 'memlens.db'})",
        )
    else:
        _refused(p, f"no database at {tmp_path / 'new-folder' / 'memlens.db'}: nothing is stored there", 1)


def _stored(tmp_path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    p = _run("import", str(ROOT / "sample_data" / "conversations" / "lisbon-trip.json"), "--db", url)
    assert p.returncode == 0, p.stderr
    return url, p.stdout.split()[0]


def test_a_read_only_database_is_read_and_a_write_to_it_is_one_line(tmp_path, monkeypatch, capsys):
    url, conversation = _stored(tmp_path)
    read_only = f"sqlite:///file:{tmp_path / 'x.db'}?mode=ro&uri=true"
    assert conversation in _run("conversations", "--db", read_only).stdout
    _refused(
        _run("import", str(ROOT / "sample_data" / "conversations" / "lisbon-trip.json"), "--db", read_only),
        "error: the database failed: attempt to write a readonly database",
        1,
    )
    assert not (ROOT / "file:").exists()  # the URI's path is the file's, not a folder named after the scheme
    # A file this process may not write (as a user without the right would find it): refused before any write.
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if mode == os.W_OK else real(path, mode))
    err = _one_line_error(
        capsys, main(["import", str(ROOT / "sample_data" / "conversations" / "lisbon-trip.json"), "--db", url])
    )
    assert "is read-only (its file or its folder cannot be written)" in err


def test_a_damaged_database_takes_no_write_and_says_so_in_one_line(tmp_path):
    url, conversation = _stored(tmp_path)
    with open(tmp_path / "x.db", "r+b") as fh:  # overwrite pages past the schema with noise
        fh.seek(4096 * 3)
        fh.write(b"\xff" * 4096 * 8)
    size = (tmp_path / "x.db").stat().st_size
    _refused(
        _run("import", str(ROOT / "sample_data" / "conversations" / "lisbon-trip.json"), "--db", url), "is damaged (", 1
    )
    assert (tmp_path / "x.db").stat().st_size == size
    p = _run("export", conversation, "--db", url)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr and "[SQL" not in p.stderr
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    _refused(
        _run(
            "import",
            str(ROOT / "sample_data" / "conversations" / "lisbon-trip.json"),
            "--db",
            f"sqlite:///{tmp_path / 'junk.db'}",
        ),
        "is damaged (file is not a database)",
        1,
    )
