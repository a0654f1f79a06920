"""Load on the Service API over loopback: 20 concurrent clients × 50 turns, on SQLite and PostgreSQL.

The server runs as ``python -m core serve --demo`` in its own process; half the clients stream,
half block. Nothing may be lost and nothing may fail: every conversation holds its 50 turns in
order, each answered as its client received it, and the flow's turn counter says 50. Throughput
and p95 latency are printed, never asserted (the machine is shared). The measurement is
benchmarks/api_load.py, which also runs by hand.
"""

from __future__ import annotations

import pytest

from benchmarks import api_load

CLIENTS = 20
TURNS = 50


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_twenty_concurrent_clients_of_fifty_turns_lose_nothing(backend, tmp_path, request, capsys):
    url = (
        f"sqlite:///{tmp_path / 'memlens.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres").create_database()
    )
    result = api_load.measure(url, clients=CLIENTS, turns=TURNS, deadline=300)
    with capsys.disabled():
        print(f"\n[api load, {backend}] {result.summary()}")
    assert result.errors == []
    assert result.lost == []
    assert result.completed == CLIENTS * TURNS
