"""Benchmark of the http connector and its connection pools. Prints figures; it asserts nothing.

1. Overhead per request against a local zero-latency agent: the connector (through
   AgentRuntime.invoke, as tests call it) vs a raw httpx loop posting the same body, on each pool.
   Target: the connector adds at most 0.3 ms to a raw loop on its own pool.
2. 1,000 requests at concurrency 64 on a bare client over each pool, against a local agent with
   200 ms latency, vs the ideal ceil(1000/64) x 200 ms = 3.20 s. Target: at most 1.08 x ideal for
   the default pool.
3. 1,000 tests through the engine (session.run_tests), same agent and concurrency, on each pool,
   interleaved with the same tests on the python connector (an in-process function with the same
   latency and answer) and the demo agent. Prints `ours / ideal = X.XXx (target <= 1.15x)` for the
   default pool, and each case's CPU ms per test: the CPU seconds of this process over the run
   (the agent server has its own process), the robust figure on a shared machine, where the wall
   ratio moves with the load. Target: at most 1.15 x ideal.

Every pool is measured in the same run, interleaved, so machine load hits them alike. The agent
server runs in its own process (stdlib asyncio, HTTP/1.1 keep-alive) so it does not share the
benchmark's interpreter.

    .venv/bin/python benchmarks/connectors_http.py [--requests 3000] [--tests 1000] [--pools aiohttp,httpx]
        [--repeats 3] [--quick]

`--quick` runs part 3 alone on the first pool (with the python connector and demo beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESPONSE = json.dumps(
    {
        "response": "ok",
        "toolCalls": [{"name": "search_logs", "args": {"q": "x"}, "result": "r"}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
).encode()


async def serve(port: int, latency_s: float) -> None:
    """A minimal keep-alive HTTP/1.1 agent: reads one request, waits `latency_s`, answers."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                if latency_s:
                    await asyncio.sleep(latency_s)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(RESPONSE), RESPONSE)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(latency_s: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(latency_s)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            time.sleep(0.05)
        else:
            return proc, f"http://127.0.0.1:{port}/agent"
    proc.kill()
    raise SystemExit("benchmark agent server did not start")


async def raw_loop(url: str, n: int, pool: str) -> tuple[float, float]:
    """The same request on the wire (body and headers, trace context included) on a bare httpx
    client over `pool`. Returns (wall, client CPU) s per request."""
    import uuid

    from agent_health.connectors.transport import build_client

    async with build_client(pool=pool, max_connections=10) as client:  # type: ignore[arg-type]
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            run_id = uuid.uuid4().hex
            body = json.dumps({"prompt": "benchmark prompt", "context": [], "run_id": run_id}).encode()
            headers = {
                "content-type": "application/json",
                "accept": "application/json",
                "traceparent": f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01",
                "x-agent-health-run-id": run_id,
            }
            r = await client.post(url, content=body, headers=headers)
            json.loads(r.content)
        return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


async def aiohttp_loop(url: str, n: int) -> tuple[float, float]:
    """The same request on a bare aiohttp session, without httpx: the floor under both loops above.
    Returns (wall, client CPU) s per request."""
    import uuid

    import aiohttp

    async with aiohttp.ClientSession() as session:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            run_id = uuid.uuid4().hex
            body = json.dumps({"prompt": "benchmark prompt", "context": [], "run_id": run_id}).encode()
            headers = {
                "content-type": "application/json",
                "accept": "application/json",
                "traceparent": f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01",
                "x-agent-health-run-id": run_id,
            }
            async with session.post(url, data=body, headers=headers) as r:
                json.loads(await r.read())
        return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


async def connector_loop(url: str, n: int, pool: str) -> tuple[float, float]:
    from agent_health.config.agents import AgentSpec
    from agent_health.connectors.base import AgentRuntime
    from agent_health.model.agent import AgentRequest

    spec = AgentSpec(key="bench", connector="http", settings={"endpoint": url, "pool": pool})
    rt = AgentRuntime(spec.resolve())
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            await rt.invoke(AgentRequest(prompt="benchmark prompt"))
        return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
    finally:
        await rt.aclose()


def overhead(n: int, pools: list[str], rounds: int = 5) -> None:
    proc, url = start_server(0.0)
    raws: dict[str, list[tuple[float, float]]] = {p: [] for p in pools}
    conns: dict[str, list[tuple[float, float]]] = {p: [] for p in pools}
    bare: list[tuple[float, float]] = []
    try:
        asyncio.run(aiohttp_loop(url, 300))
        for pool in pools:  # warm up imports, pools, server
            asyncio.run(raw_loop(url, 300, pool))
            asyncio.run(connector_loop(url, 300, pool))
        for _ in range(rounds):  # interleaved so drift hits all equally
            bare.append(asyncio.run(aiohttp_loop(url, n)))
            for pool in pools:
                raws[pool].append(asyncio.run(raw_loop(url, n, pool)))
                conns[pool].append(asyncio.run(connector_loop(url, n, pool)))
    finally:
        proc.kill()
        proc.wait()

    def ms(rows: list[tuple[float, float]], i: int) -> float:
        return statistics.median(r[i] for r in rows) * 1000

    print(
        f"[overhead] {rounds} interleaved rounds x {n} sequential requests, zero-latency local agent "
        "(same body and headers on the wire; medians)"
    )
    for pool in pools:
        r, c = raws[pool], conns[pool]
        print(
            f"  {pool:8} raw httpx loop: {ms(r, 0):.3f} ms wall, {ms(r, 1):.3f} ms CPU; http connector: "
            f"{ms(c, 0):.3f} ms wall, {ms(c, 1):.3f} ms CPU; connector overhead {ms(c, 0) - ms(r, 0):+.3f} ms wall "
            f"(target <= 0.300)"
        )
    print(f"  bare aiohttp session, no httpx: {ms(bare, 0):.3f} ms wall, {ms(bare, 1):.3f} ms CPU")


async def concurrent_requests(url: str, n: int, concurrency: int, pool: str) -> float:
    """`n` requests, `concurrency` in flight at once, on a bare httpx client over `pool`; wall s."""
    from agent_health.connectors.transport import build_client

    async with build_client(pool=pool, max_connections=100) as client:  # type: ignore[arg-type]
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                r = await client.post(url, json={"prompt": f"question {i}", "context": [], "run_id": str(i)})
                json.loads(r.content)

        await asyncio.gather(*(one(i) for i in range(concurrency)))  # warm: open the connections
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - t0


def pool_ratio(n: int, concurrency: int, latency_s: float, pools: list[str], repeats: int = 3) -> None:
    proc, url = start_server(latency_s)
    walls: dict[str, list[float]] = {p: [] for p in pools}
    try:
        for _ in range(repeats):  # interleaved so drift hits all pools alike
            for pool in pools:
                walls[pool].append(asyncio.run(concurrent_requests(url, n, concurrency, pool)))
    finally:
        proc.kill()
        proc.wait()
    ideal = math.ceil(n / concurrency) * latency_s
    print(
        f"[pool] {n} requests x {latency_s * 1000:.0f} ms agent latency, concurrency {concurrency}, bare client "
        f"({repeats} interleaved runs per pool); ideal {ideal:.3f} s"
    )
    for pool in pools:
        w = walls[pool]
        print(
            f"  {pool:8} wall {', '.join(f'{x:.3f}' for x in w)} s; {min(w) / ideal:.3f} x ideal best, "
            f"{statistics.median(w) / ideal:.3f} x median"
        )
    print("  target: <= 1.08 x ideal for the default pool (aiohttp)")


async def python_agent(prompt: str) -> dict[str, object]:
    """The in-process twin of the benchmark's HTTP agent (python connector): same latency, same
    answer. Its latency is set by engine_ratio."""
    await asyncio.sleep(python_agent.latency_s)  # type: ignore[attr-defined]
    return json.loads(RESPONSE)


def engine_ratio(
    n_tests: int, concurrency: int, latency_s: float, pools: list[str], repeats: int = 3, compare: bool = True
) -> None:
    """Part 3: the same tests through session.run_tests on the http connector (one line per pool)
    and, with `compare`, on the python connector (an in-process function with the same latency
    and answer) and the demo agent, interleaved. Wall time against the ideal, and the CPU seconds
    of this process (the agent server runs in its own) per test."""
    from agent_health.config import define_config
    from agent_health.loader import load_tests
    from agent_health.model import RunSettings
    from agent_health.session import run_tests

    python_agent.latency_s = latency_s  # type: ignore[attr-defined]
    proc, url = start_server(latency_s)
    kinds = [f"http@{pool}" for pool in pools] + (["python", "demo"] if compare else [])
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    gcs: dict[str, list[float]] = {k: [] for k in kinds}
    collecting = [0.0, 0.0]  # CPU seconds spent in garbage collections, when the current one started

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    statuses: dict[str, dict[str, int]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "bench.eval.py").write_text(
                textwrap.dedent(f"""
                from agent_health import test

                for i in range({n_tests}):
                    @test(f"bench {{i}}", prompt=f"question {{i}}")
                    async def body(agent):
                        await agent.run()
            """)
            )
            loaded = load_tests([Path(tmp, "bench.eval.py")])
            assert not loaded.errors and len(loaded.tests) == n_tests, loaded.errors
            cfg = define_config(
                root=tmp,
                agents=[
                    {
                        "key": "http",
                        "connector": "http",
                        "settings": {"endpoint": url},
                        "versions": {pool: {"pool": pool} for pool in pools},
                    },
                    {
                        "key": "python",
                        "connector": "python",
                        "settings": {"function": python_agent},
                        "versions": {"v": {}},
                    },
                    {
                        "key": "demo",
                        "connector": "demo",
                        "settings": {"latency_ms": latency_s * 1000},
                        "versions": {"v2": {}},
                    },
                ],
            )
            refs = {k: k if "@" in k else {"python": "python@v", "demo": "demo@v2"}[k] for k in kinds}
            opts = RunSettings(concurrency=concurrency, timeout_s=60, judge={"skip": True}, store=None)
            for kind in kinds:
                run_tests(loaded.tests[:concurrency], cfg, refs[kind], opts)  # warm-up
            gc.callbacks.append(on_gc)
            for _ in range(repeats):  # interleaved so drift hits all alike
                for kind in kinds:
                    collecting[0] = 0.0
                    t0, c0 = time.perf_counter(), time.process_time()
                    results = run_tests(loaded.tests, cfg, refs[kind], opts, replay="off")
                    walls[kind].append(time.perf_counter() - t0)
                    cpus[kind].append(time.process_time() - c0)
                    gcs[kind].append(collecting[0])
                    statuses[kind] = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "errored")}
    finally:
        if on_gc in gc.callbacks:
            gc.callbacks.remove(on_gc)
        proc.kill()
        proc.wait()
    ideal = math.ceil(n_tests / concurrency) * latency_s
    print(
        f"[engine] {n_tests} tests x {latency_s * 1000:.0f} ms agent latency, concurrency {concurrency}, "
        f"through session.run_tests ({repeats} interleaved runs each); ideal {ideal:.3f} s; CPU is this "
        "process's (the HTTP agent runs in its own), median of the runs"
    )
    for kind in kinds:
        w = walls[kind]
        print(
            f"  {kind:12} wall {', '.join(f'{x:.3f}' for x in w)} s; {min(w) / ideal:.3f} x ideal best, "
            f"{statistics.median(w) / ideal:.3f} x median; CPU {statistics.median(cpus[kind]) / n_tests * 1000:.3f} "
            f"ms/test, of which garbage collection {statistics.median(gcs[kind]) / n_tests * 1000:.3f}; "
            f"statuses (last run) {statuses[kind]}"
        )
    default = f"http@{pools[0]}"
    print(
        f"  {default}: ours / ideal = {min(walls[default]) / ideal:.2f}x best, "
        f"{statistics.median(walls[default]) / ideal:.2f}x median (target <= 1.15x); "
        f"CPU {statistics.median(cpus[default]) / n_tests * 1000:.3f} ms/test"
        + (
            f" (python connector {statistics.median(cpus['python']) / n_tests * 1000:.3f}, "
            f"demo {statistics.median(cpus['demo']) / n_tests * 1000:.3f})"
            if compare
            else ""
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", nargs=2, metavar=("PORT", "LATENCY_S"), help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument(
        "--pools", default="aiohttp,httpx", help="comma-separated pools to compare (the first is the default)"
    )
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs of each case in parts 2 and 3")
    ap.add_argument("--quick", action="store_true", help="part 3 only, on the first pool")
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve(int(args.serve[0]), float(args.serve[1])))
        return
    pools = [p.strip() for p in args.pools.split(",") if p.strip()]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, pools {', '.join(pools)}; "
        f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if args.quick:
        engine_ratio(args.tests, args.concurrency, args.latency_ms / 1000, pools[:1], args.repeats)
    else:
        overhead(args.requests, pools)
        pool_ratio(args.tests, args.concurrency, args.latency_ms / 1000, pools, args.repeats)
        engine_ratio(args.tests, args.concurrency, args.latency_ms / 1000, pools, args.repeats)
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
