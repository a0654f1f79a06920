"""The capture proxy against calling the upstream directly, in the same run: what recording costs a bot.

A stand-in provider (``tests/capture/stub_upstream.py``, its own process) answers streamed chat completions
like a fast model: its first byte after ``--delay`` seconds, then ten pieces ``--chunk-delay`` apart.
``python -m core proxy`` (its own process, as in use) forwards to it and records every call into a new
SQLite store. Clients (one process, asyncio, httpx) each hold a conversation and ask ``--turns`` questions,
each request carrying the history so far (what a chat bot sends), streamed; directly and through the proxy:
one client asking both paths request by request, then 20 concurrent clients in rounds that alternate the
paths (so a machine whose load drifts burdens both alike). Per request: the time to its last byte (latency) and to its
first body byte (TTFB); per load: requests per second over the wall clock.

Printed: latency and TTFB percentiles of both paths, the proxy's added latency (p50 and p95 of the proxy
minus the same percentile direct), the TTFB difference, and throughput at 20 clients as a ratio to direct —
each beside its target (added p50 ≤ 5 ms, TTFB within 10 ms, throughput ≥ 0.8× direct); the CPU each
proxied call cost the stand-in, the proxy and its recorder process, and the machine's load. Then whether
the recorder kept up: every call the proxy answered is in the store, checked once the load ends.

Run: ``.venv/bin/python benchmarks/proxy.py [--turns 30] [--delay 0.1] [--chunk-delay 0.005]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

STUB = ROOT / "tests" / "capture" / "stub_upstream.py"
#: Rounds of the 20-client load: each runs the direct path, then the proxy.
ROUNDS = 5


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (Linux: /proc); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (the proxy's recorder)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a server process stopped: {proc.stderr.read()[:400]}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in {timeout} s")


async def one_request(client: httpx.AsyncClient, url: str, history: list[dict]) -> tuple[float, float, str]:
    body = {"model": "gpt-4o-mini", "stream": True, "messages": history}
    start = time.perf_counter()
    first = None
    text = []
    async with client.stream("POST", url, json=body, headers={"authorization": "Bearer sk-bench"}) as r:
        async for chunk in r.aiter_bytes():
            if first is None:
                first = time.perf_counter()
            text.append(chunk)
    end = time.perf_counter()
    return (end - start) * 1000, ((first or end) - start) * 1000, b"".join(text).decode()


def answer_of(stream: str) -> str:
    import json

    out = []
    for line in stream.split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices") or []:
                out.append((choice.get("delta") or {}).get("content") or "")
    return "".join(out)


async def load(base: str, clients: int, turns: int, tag: str) -> dict:
    url = f"{base}/chat/completions"
    latencies, firsts = [], []
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def conversation(c: int) -> None:
            history = [{"role": "system", "content": "You are a support bot."}]
            for k in range(turns):
                history.append({"role": "user", "content": f"{tag} client {c} question {k}: where is my order?"})
                latency, first, stream = await one_request(client, url, history)
                latencies.append(latency)
                firsts.append(first)
                history.append({"role": "assistant", "content": answer_of(stream)})

        await one_request(client, url, [{"role": "user", "content": f"{tag} warm-up"}])
        started = time.perf_counter()
        await asyncio.gather(*(conversation(c) for c in range(clients)))
        wall = time.perf_counter() - started
    return {"latency": latencies, "ttfb": firsts, "wall": wall, "requests": len(latencies) + 1}


async def paired(bases: dict[str, str], turns: int, tag: str) -> dict[str, dict]:
    """One client asking both paths in turn, request by request (the order flipping each turn): at one client
    the paths' figures then share every moment's load, which blocks of requests taken apart would not."""
    out = {path: {"latency": [], "ttfb": [], "wall": 0.0, "requests": 0} for path in bases}
    async with httpx.AsyncClient(timeout=60) as client:
        histories = {path: [{"role": "system", "content": "You are a support bot."}] for path in bases}
        for path, base in bases.items():
            await one_request(client, f"{base}/chat/completions", [{"role": "user", "content": f"{tag} warm-up"}])
        for k in range(turns):
            for path in list(bases) if k % 2 == 0 else list(reversed(list(bases))):
                history = histories[path]
                history.append({"role": "user", "content": f"{tag} {path} question {k}: where is my order?"})
                started = time.perf_counter()
                latency, first, stream = await one_request(client, f"{bases[path]}/chat/completions", history)
                out[path]["wall"] += time.perf_counter() - started
                out[path]["latency"].append(latency)
                out[path]["ttfb"].append(first)
                out[path]["requests"] += 1
                history.append({"role": "assistant", "content": answer_of(stream)})
    for r in out.values():
        r["requests"] += 1  # the warm-up
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=30, help="questions per client (default 30)")
    p.add_argument("--delay", type=float, default=0.1, help="the stand-in's seconds to its first byte (default 0.1)")
    p.add_argument("--chunk-delay", type=float, default=0.005, help="seconds between its pieces (default 0.005)")
    args = p.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="memlens-proxy-bench-"))
    db_url = f"sqlite:///{folder / 'capture.db'}"
    stub_port, proxy_port = free_port(), free_port()
    stub = start([sys.executable, str(STUB), str(stub_port), str(args.delay), str(args.chunk_delay)])
    proxy = start(
        [
            sys.executable,
            "-m",
            "core",
            "proxy",
            "--upstream",
            f"http://127.0.0.1:{stub_port}/v1",
            "--port",
            str(proxy_port),
            "--db",
            db_url,
        ]
    )
    try:
        wait_ready(f"http://127.0.0.1:{stub_port}/v1/models", stub)
        wait_ready(f"http://127.0.0.1:{proxy_port}/v1/models", proxy)
        time.sleep(1)  # the recorder process is starting
        direct_base, proxy_base = f"http://127.0.0.1:{stub_port}/v1", f"http://127.0.0.1:{proxy_port}/v1"
        results = {}
        cpu = {"direct": 0.0, "proxy": 0.0}
        pids = {"stand-in": [stub.pid], "proxy": [proxy.pid], "recorder": children(proxy.pid)}
        used = {name: 0.0 for name in pids}
        before = {name: sum(map(cpu_seconds, ps)) for name, ps in pids.items()}
        one = asyncio.run(paired({"direct": direct_base, "proxy": proxy_base}, args.turns, "one"))
        after = {name: sum(map(cpu_seconds, ps)) for name, ps in pids.items()}
        for path, r in one.items():
            results[(path, 1)] = {**r, "measured": len(r["latency"])}
            cpu[path] += r["requests"]
        for name in pids:  # (the direct path costs none of these but the stand-in's)
            used[name] += after[name] - before[name] if name != "stand-in" else (after[name] - before[name]) / 2
        for clients in (20,):
            # Rounds alternate the two paths, so a machine whose load drifts during the run burdens both alike.
            for r in range(ROUNDS):
                for path, base in (("direct", direct_base), ("proxy", proxy_base)):
                    before = {name: sum(map(cpu_seconds, ps)) for name, ps in pids.items()}
                    out = asyncio.run(load(base, clients, max(1, args.turns // ROUNDS), f"{path}{clients}r{r}"))
                    after = {name: sum(map(cpu_seconds, ps)) for name, ps in pids.items()}
                    if path == "proxy":
                        for name in pids:
                            used[name] += after[name] - before[name]
                    cpu[path] += out["requests"]
                    merged = results.setdefault(
                        (path, clients), {"latency": [], "ttfb": [], "wall": 0.0, "requests": 0, "measured": 0}
                    )
                    merged["latency"] += out["latency"]
                    merged["ttfb"] += out["ttfb"]
                    merged["wall"] += out["wall"]
                    merged["requests"] += out["requests"]
                    merged["measured"] += len(out["latency"])
        for r in results.values():
            r["throughput"] = r["measured"] / r["wall"]
        answered = sum(results[("proxy", c)]["requests"] for c in (1, 20)) + 1  # + the readiness probe's model list
        print(
            f"stand-in upstream: first byte after {args.delay * 1000:.0f} ms, 10 pieces {args.chunk_delay * 1000:.0f} ms "
            f"apart; {args.turns} questions per client, streamed, history growing"
        )
        print(f"{'clients':>7}  {'path':<6} {'p50 ms':>8} {'p95 ms':>8} {'TTFB p50':>9} {'TTFB p95':>9} {'req/s':>8}")
        for clients in (1, 20):
            for path in ("direct", "proxy"):
                r = results[(path, clients)]
                print(
                    f"{clients:>7}  {path:<6} {pct(r['latency'], 0.5):8.1f} {pct(r['latency'], 0.95):8.1f} "
                    f"{pct(r['ttfb'], 0.5):9.1f} {pct(r['ttfb'], 0.95):9.1f} {r['throughput']:8.1f}"
                )
        print()
        for clients in (1, 20):
            d, x = results[("direct", clients)], results[("proxy", clients)]
            added50 = pct(x["latency"], 0.5) - pct(d["latency"], 0.5)
            added95 = pct(x["latency"], 0.95) - pct(d["latency"], 0.95)
            ttfb = pct(x["ttfb"], 0.5) - pct(d["ttfb"], 0.5)
            print(
                f"{clients:>2} client(s): added latency p50 {added50:+.1f} ms (target ≤ 5: "
                f"{'met' if added50 <= 5 else 'NOT met'}), p95 {added95:+.1f} ms; TTFB p50 {ttfb:+.1f} ms "
                f"(target within 10: {'met' if abs(ttfb) <= 10 else 'NOT met'})"
            )
        ratio = results[("proxy", 20)]["throughput"] / results[("direct", 20)]["throughput"]
        print(f"throughput at 20 clients: {ratio:.2f}× direct (target ≥ 0.8: {'met' if ratio >= 0.8 else 'NOT met'})")
        calls = cpu["proxy"]
        print(
            "CPU per proxied call: "
            + ", ".join(f"{name} {used[name] / calls * 1000:.2f} ms" for name in used)
            + f"; the machine's load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        recorded, deadline = 0, time.monotonic() + 120
        from sqlalchemy import func, select

        from core.store.db import Database
        from core.store.models import NodeRunRow

        expected = answered - 1  # the model list is forwarded, not recorded
        db = Database(db_url)
        while time.monotonic() < deadline:
            with db.session(write=False) as s:
                recorded = s.scalar(select(func.count()).select_from(NodeRunRow))
            if recorded >= expected:
                break
            time.sleep(0.5)
        lag = time.monotonic() - (deadline - 120)
        print(f"recorded: {recorded}/{expected} calls in the store ({lag:.1f} s after the load ended)")
        db.dispose()
    finally:
        for proc in (proxy, stub):
            os.killpg(proc.pid, 15)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)


if __name__ == "__main__":
    main()
