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
    err = _one_line_error(capsys, main(["conversations", "--db", f"sqlite:///{blocker / 'memlens.db'}"]))
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


@pytest.mark.parametrize("port, words", [("99999", "out of range"), ("-1", "out of range"),
                                         ("web", "whole number")])
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
    p = subprocess.run([sys.executable, "-m", "core", "export", "some-id", "--db", f"sqlite:///{blocker / 'x.db'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "cannot open the database" in p.stderr
