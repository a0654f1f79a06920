"""A turn is never half-written, even when its process is killed: its row comes first and is marked
interrupted, its node runs come whole with its end, its variable changes point at it; parallel
writers lose nothing."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

from sqlalchemy import text

from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT
from tests.processes import gone

FLOW = ROOT / "sample_data" / "flows" / "support-bot.yml"


def _writer(url, conversation_id, count):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer", url, conversation_id, str(count)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _consistent(db):
    """A finished turn has all its node runs, a turn that never finished none; no run lacks its turn."""
    with db.engine.connect() as c:
        orphans = c.execute(
            text("SELECT count(*) FROM node_runs n LEFT JOIN turns t ON t.id = n.turn_id WHERE t.id IS NULL")
        ).scalar()
        turns = c.execute(text("SELECT id, status, meta FROM turns")).all()
        runs = dict(c.execute(text("SELECT turn_id, count(*) FROM node_runs GROUP BY turn_id")).all())
    unfinished = {"running", "interrupted"}
    meta = {t: (m if isinstance(m, dict) else json.loads(m)) for t, _, m in turns}
    assert orphans == 0, "a node run without its turn"
    assert [t for t, status, _ in turns if status not in unfinished and not runs.get(t)] == [], (
        "a finished turn without its node runs"
    )
    assert [t for t, status, _ in turns if status in unfinished and runs.get(t)] == [], (
        "an unfinished turn with node runs"
    )
    assert [t for t, _, _ in turns if runs.get(t, 0) != meta[t]["node_count"]] == [], (
        "a turn with only some of its node runs"
    )


def _read_until(stream, prefix: str, seen: list[str]) -> str:
    """Lines up to the first starting with ``prefix`` (returned); the others are kept in ``seen``."""
    while True:
        line = stream.readline()
        assert line, "the writer process ended unexpectedly; its last lines: " + "".join(seen[-5:])
        if line.startswith(prefix):
            return line
        seen.append(line)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


KILLS = 20
WATCHDOG_SECONDS = 300


def test_writers_killed_at_random_moments_leave_no_variable_change_without_its_turn(db_url):
    db = Database(db_url)
    service = ConversationService(db)
    version = service.import_flow(FLOW)
    conv = service.start(version.flow_id).id
    rng = random.Random(20261130)
    # One process imports everything once and forks each writer: a kill costs no Python start-up.
    writers = subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer", "--fork", db_url, conv],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    current: list[int] = []  # the writer running now
    # A step that never comes (a writer that stops reporting, a kill that never lands) ends the
    # processes instead of waiting forever: the read then fails with what was seen.
    watchdog = threading.Timer(WATCHDOG_SECONDS, lambda: [_kill(p) for p in (*current, writers.pid)])
    watchdog.daemon = True
    watchdog.start()
    try:
        for _ in range(KILLS):
            writers.stdin.write("start\n")
            writers.stdin.flush()
            pid = int(_read_until(writers.stdout, "writer ", lines).split()[1])
            current[:] = [pid]
            # Once this writer has committed a turn, kill it at a random moment of the ones after:
            # any moment, or one soon after a turn started running (so some kills land mid-turn).
            while not any(line.split()[2:] == [str(pid)] for line in lines if line.startswith("committed ")):
                lines.append(_read_until(writers.stdout, "committed ", lines))
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                while True:
                    line = _read_until(writers.stdout, "started ", lines)
                    if line.split()[2:] == [str(pid)]:
                        break
                time.sleep(rng.uniform(0.0, 0.05))
            os.kill(pid, signal.SIGKILL)
            current.clear()
            deadline = time.monotonic() + 30
            while not gone(pid):
                assert time.monotonic() < deadline, f"writer {pid} survived SIGKILL"
                time.sleep(0.01)
            _consistent(db)
    finally:
        watchdog.cancel()
        for pid in current:  # still running when a step failed: it would keep the output open
            _kill(pid)
        writers.stdin.close()  # the forking process ends at the end of its input
        out, err = writers.stdout.read(), writers.stderr.read()
        writers.wait(60)
    lines += out.splitlines(keepends=True)
    committed = [line.split()[1] for line in lines if line.startswith("committed ")]
    assert len(committed) >= KILLS, err

    rows = repo.load_turn_rows(db, conv)  # a reader: turns left running by the killed writers show as interrupted
    statuses = [r["status"] for r in rows]
    assert "running" not in statuses
    assert set(statuses) <= {"succeeded", "interrupted"}
    interrupted = [r for r in rows if r["status"] == "interrupted"]
    assert 1 <= len(interrupted) <= KILLS  # at most the turn in flight at each kill
    assert all(r["answer"] == "" and r["error"] == repo.INTERRUPTED_ERROR for r in interrupted)
    assert set(committed) <= {r["id"] for r in rows if r["status"] == "succeeded"}
    _consistent(db)

    # No variable change without its turn, and none lost: the counter went up once per turn that
    # reached the assigner, in turn order, each change pointing at its stored turn.
    turn_ids = {r["id"]: r["seq"] for r in rows}
    history = repo.variable_history(db, conv)
    assert [h["turn_id"] for h in history if h["turn_id"] not in turn_ids] == []
    assert all(turn_ids[h["turn_id"]] == h["turn_seq"] for h in history)
    counted = [h for h in history if h["name"] == "turn_count"]
    assert [(h["old"], h["new"]) for h in counted] == [(i, i + 1) for i in range(len(counted))]
    values = {v.name: v.value for v in repo.get_variables(db, conv)}
    assert values["turn_count"] == len(counted)
    assert {r["id"] for r in rows if r["status"] == "succeeded"} <= {h["turn_id"] for h in counted}

    # One thread: each turn, interrupted ones included, answers after the one before it.
    assert [r["parent_id"] for r in rows[1:]] == [r["id"] for r in rows[:-1]]
    assert [r["dialogue_count"] for r in rows] == list(range(1, len(rows) + 1))
    # The conversation goes on after the kills.
    assert service.send(conv, "Anyone there?").dialogue_count == len(rows) + 1
    db.dispose()


def test_two_processes_appending_to_different_conversations_lose_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    db = Database(url)
    service = ConversationService(db)
    version = service.import_flow(FLOW)
    convs = [service.start(version.flow_id).id for _ in range(2)]
    procs = [_writer(url, c, 25) for c in convs]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert out.count("committed ") == 25
    for c in convs:
        assert len(repo.load_turn_rows(db, c)) == 25
    _consistent(db)
    db.dispose()
