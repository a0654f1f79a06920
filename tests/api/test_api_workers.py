"""``python -m core serve --workers N``: N server processes on one port over PostgreSQL, turns on one
conversation still one at a time across them; SQLite is refused in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from benchmarks.api_load import ServerProcess, parse_sse, prepare
from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT
from tests.store.test_turn_serialisation import _counter_exact

CONCURRENT = 6
ROUNDS = 4


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _tcp_connections(pid: int) -> list[list[str]]:
    """The rows of /proc/net/tcp{,6} for the sockets process ``pid`` holds (fields as the kernel
    prints them: [1] local address:port, [2] remote address:port, [3] state, [9] inode)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                rows.append(fields)
    return rows


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def _database_peers(pid: int, port: int) -> int:
    """How many TCP connections process ``pid`` holds to ``port`` (its database connections)."""
    return sum(1 for fields in _tcp_connections(pid) if _port(fields[2]) == port)


def test_two_workers_on_postgresql_run_concurrent_turns_on_one_conversation_as_one_thread(postgres):
    url = postgres.create_database()
    _, key = prepare(url)
    headers = {"Authorization": f"Bearer {key}"}
    with ServerProcess(url, workers=2) as server:
        with httpx.Client(base_url=server.base_url, timeout=120, headers=headers) as http:
            first = http.post(
                "/chat-messages",
                json={"inputs": {}, "query": "Hi, order 4411 is late.", "user": "dana", "response_mode": "blocking"},
            )
            assert first.status_code == 200, first.text
        conversation_id = first.json()["conversation_id"]
        answers = {first.json()["id"]: first.json()["answer"]}
        failures: list[str] = []

        def ask(i: int) -> None:
            mode = "streaming" if i % 2 else "blocking"
            body = {
                "inputs": {},
                "query": f"Question {i}: where is my parcel?",
                "user": "dana",
                "conversation_id": conversation_id,
                "response_mode": mode,
            }
            # A client of its own per request: a new connection, which either worker may accept.
            with httpx.Client(base_url=server.base_url, timeout=120, headers=headers) as c:
                r = c.post("/chat-messages", json=body)
            if r.status_code != 200:
                failures.append(r.text)
            elif mode == "blocking":
                answers[r.json()["id"]] = r.json()["answer"]
            else:
                events = parse_sse(r.text)
                message = next(e["message_id"] for e in events if e["event"] == "message_end")
                answers[message] = "".join(e["answer"] for e in events if e["event"] == "message")

        for round_ in range(ROUNDS):
            threads = [threading.Thread(target=ask, args=(round_ * CONCURRENT + k,)) for k in range(CONCURRENT)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        workers = _children(server.proc.pid)
        pg_port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        serving = [w for w in workers if _database_peers(w, pg_port)]
    assert failures == []
    assert len(serving) == 2, f"{len(workers)} worker processes, {len(serving)} of them used the database"
    db = Database(url)
    try:
        rows = repo.load_turn_rows(db, conversation_id)
        total = 1 + ROUNDS * CONCURRENT
        assert len(rows) == total
        assert {r["status"] for r in rows} == {"succeeded"}
        assert {r["id"]: r["answer"] for r in rows} == answers
        assert [r["seq"] for r in rows] == list(range(1, total + 1))
        assert [r["dialogue_count"] for r in rows] == list(range(1, total + 1))
        _counter_exact(db, conversation_id, rows)
    finally:
        db.dispose()


def _accepted(pid: int, port: int) -> int:
    """How many open client connections process ``pid`` accepted on local ``port``."""
    established = "01"
    return sum(1 for fields in _tcp_connections(pid) if fields[3] == established and _port(fields[1]) == port)


def _burst(server: ServerProcess, key: str, n: int = 16) -> dict[int, int]:
    """``n`` clients at once, each keeping its connection open: how many each child process holds.
    The server closes a connection idle for 5 s (uvicorn's keep-alive), which on a machine busy
    enough that the burst outlasts that loses some before they are counted: the burst is then
    asked again, up to three times."""
    for _ in range(3):
        held = _one_burst(server, key, n)
        if sum(held.values()) == n:
            return held
    assert sum(held.values()) == n, held
    return held


def _one_burst(server: ServerProcess, key: str, n: int) -> dict[int, int]:
    clients = [httpx.Client(timeout=120, headers={"Authorization": f"Bearer {key}"}) for _ in range(n)]
    try:
        start = threading.Barrier(n)
        statuses: list[int] = []

        def ask(client: httpx.Client) -> None:
            start.wait(60)
            statuses.append(client.get(f"{server.base_url}/parameters").status_code)

        threads = [threading.Thread(target=ask, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert statuses == [200] * n
        # (The supervisor's other child, multiprocessing's resource tracker, accepts nothing.)
        held = {w: _accepted(w, server.port) for w in _children(server.proc.pid)}
    finally:
        for c in clients:
            c.close()
    return held


def test_clients_that_keep_their_connections_are_spread_over_the_workers(postgres):
    """A burst of clients that each keep one connection open (as HTTP client libraries do): on one
    shared socket the first worker to wake accepted them all and the other idled. A worker that
    dies is replaced on its own socket, so the spread holds afterwards."""
    url = postgres.create_database()
    _, key = prepare(url)
    with ServerProcess(url, workers=2) as server:
        held = _burst(server, key)
        assert len([n for n in held.values() if n]) == 2, f"connections held per child process: {held}"

        dead = max(held, key=held.get)
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            dead in _children(server.proc.pid) or len(_children(server.proc.pid)) < len(held)
        ):
            time.sleep(0.2)
        held = _burst(server, key)
        assert dead not in held
        assert len([n for n in held.values() if n]) == 2, f"after a worker died: {held}"


def test_more_than_one_worker_on_sqlite_is_refused_in_one_line_and_creates_nothing(tmp_path):
    path = tmp_path / "memlens.db"
    proc = subprocess.run(
        [sys.executable, "-m", "core", "serve", "--workers", "2", "--port", "0", "--db", f"sqlite:///{path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers 2 needs PostgreSQL" in lines[0], proc.stderr
    assert not path.exists()


def test_zero_workers_is_refused(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "serve",
            "--workers",
            "0",
            "--port",
            "0",
            "--db",
            f"sqlite:///{tmp_path / 'memlens.db'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: --workers 0 is out of range: give 1 or more"], proc.stderr
