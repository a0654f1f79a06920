"""The load benchmark's account of the machine's cores: CPU time of the server's process tree and
of the whole machine, read from Linux's /proc, so its report can say whether the server or the
machine was the limit."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.api_load import LoadResult, machine_cpu, process_tree_cpu
from tests.processes import gone

#: Burns about a second of CPU in a grandchild of the process started, then sleeps. The test asks
#: for half of it: /proc counts in clock ticks, which can fall a tick or two short of the precise
#: clock the burn is timed by.
BURN = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass\\n"
    "time.sleep(30)'])"
)


def test_process_tree_cpu_counts_the_processes_under_the_one_given():
    tree = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        deadline = time.monotonic() + 20
        used = 0.0
        while time.monotonic() < deadline:
            used = process_tree_cpu(tree.pid)
            if used is not None and used >= 0.5:
                break
            time.sleep(0.1)
        # the parent alone idles in subprocess.run: the half second is its child's
        assert used is not None and used >= 0.5
        assert process_tree_cpu(tree.pid) >= used  # only ever grows
    finally:
        tree.kill()
        tree.wait()


def test_process_tree_cpu_of_a_process_that_is_gone_is_unknown():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert gone(proc.pid)
    assert process_tree_cpu(proc.pid) is None


def test_machine_cpu_grows_with_work_done():
    before = machine_cpu()
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    after = machine_cpu()
    assert before is not None and after is not None and len(after) == 3
    busy = after[0] - before[0]
    assert busy >= 0.25  # at least this process's own burn
    assert all(b >= a for a, b in zip(before, after))


def test_cpu_summary_says_where_the_cores_went():
    result = LoadResult(
        clients=2,
        turns=5,
        seconds=10.0,
        latencies=[0.1] * 10,
        errors=[],
        lost=[],
        server_cpu=4.0,
        machine=(15.0, 4.0, 1.0),
    )
    line = result.cpu_summary()
    assert "the server 0.40" in line and "400 ms of its CPU per turn" in line
    assert "1.50 busy, 0.40 idle, 0.10 taken by the host" in line


def test_cpu_summary_is_empty_when_proc_could_not_tell():
    base = dict(clients=1, turns=1, seconds=1.0, latencies=[0.1], errors=[], lost=[])
    assert LoadResult(**base).cpu_summary() == ""
    assert LoadResult(**base, server_cpu=1.0).cpu_summary() == ""
    assert LoadResult(**base, machine=(1.0, 1.0, 0.0)).cpu_summary() == ""
