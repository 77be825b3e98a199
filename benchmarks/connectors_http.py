"""Benchmark of the http connector. Prints figures; it asserts nothing.

1. Overhead per request against a local zero-latency agent: the connector (through
   AgentRuntime.invoke, as tests call it) vs a raw httpx loop posting the same body on a pooled
   client. Target: at most 0.3 ms.
   Also against raw httpx on the connector's lean pool, which isolates the connector's own code.
2. 1,000 tests through the engine (session.run_tests) against a local agent with 200 ms latency at
   concurrency 64, vs the ideal ceil(1000/64) x 200 ms. Target: at most 1.15 x ideal.

The agent server runs in its own process (stdlib asyncio, HTTP/1.1 keep-alive) so it does not
share the benchmark's interpreter.

    /work/main/.venv/bin/python benchmarks/connectors_http.py [--requests 3000] [--tests 1000]
"""

from __future__ import annotations

import argparse
import asyncio
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
            return proc, f"http://127.0.0.1:{port}/agent"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("benchmark agent server did not start")


async def raw_loop(url: str, n: int, lean: bool = False) -> tuple[float, float]:
    """The same request on the wire (body and headers, trace context included), bare httpx on
    its default pool (or on the connector's lean pool). Returns (wall, client CPU) s per request."""
    import uuid

    import httpx

    from agent_health.connectors.transport import LeanTransport

    transport = LeanTransport(10) if lean else None
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=10), transport=transport) as client:
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


async def connector_loop(url: str, n: int) -> tuple[float, float]:
    from agent_health.config.agents import AgentSpec
    from agent_health.connectors.base import AgentRuntime
    from agent_health.model.agent import AgentRequest

    rt = AgentRuntime(AgentSpec(key="bench", connector="http", settings={"endpoint": url}).resolve())
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            await rt.invoke(AgentRequest(prompt="benchmark prompt"))
        return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
    finally:
        await rt.aclose()


def overhead(n: int, rounds: int = 5) -> None:
    proc, url = start_server(0.0)
    try:
        asyncio.run(raw_loop(url, 300))
        asyncio.run(connector_loop(url, 300))  # warm up imports, pools, server
        raws, leans, conns = [], [], []
        for _ in range(rounds):  # interleaved so drift hits all equally
            raws.append(asyncio.run(raw_loop(url, n)))
            leans.append(asyncio.run(raw_loop(url, n, lean=True)))
            conns.append(asyncio.run(connector_loop(url, n)))
    finally:
        proc.kill()
        proc.wait()

    def ms(rows: list[tuple[float, float]], i: int, f=statistics.median) -> float:
        return f(r[i] for r in rows) * 1000

    print(
        f"[overhead] {rounds} interleaved rounds x {n} sequential requests, zero-latency local agent "
        "(same body and headers on the wire)"
    )
    print(f"  raw httpx loop      : {ms(raws, 0):.3f} ms wall, {ms(raws, 1):.3f} ms client CPU per request (median)")
    print(f"  raw httpx, lean pool: {ms(leans, 0):.3f} ms wall, {ms(leans, 1):.3f} ms client CPU per request (median)")
    print(f"  http connector      : {ms(conns, 0):.3f} ms wall, {ms(conns, 1):.3f} ms client CPU per request (median)")
    print(
        f"  overhead vs raw httpx          : {ms(conns, 0) - ms(raws, 0):+.3f} ms wall (median), "
        f"{ms(conns, 1) - ms(raws, 1):+.3f} ms CPU (median); target <= 0.300"
    )
    print(
        f"  overhead vs same pool, bare    : {ms(conns, 0) - ms(leans, 0):+.3f} ms wall (median), "
        f"{ms(conns, 1) - ms(leans, 1):+.3f} ms CPU (median) (the connector's own code)"
    )


def engine_ratio(n_tests: int, concurrency: int, latency_s: float, repeats: int = 3) -> None:
    from agent_health.config import define_config
    from agent_health.loader import load_tests
    from agent_health.model import RunSettings
    from agent_health.session import run_tests

    proc, url = start_server(latency_s)
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
                agents=[{"key": "bench", "connector": "http", "settings": {"endpoint": url}, "versions": {"v1": {}}}],
            )
            opts = RunSettings(concurrency=concurrency, timeout_s=60, judge={"skip": True}, store=None)
            run_tests(loaded.tests[:concurrency], cfg, "bench@v1", opts)  # warm-up
            walls = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                results = run_tests(loaded.tests, cfg, "bench@v1", opts, replay="off")
                walls.append(time.perf_counter() - t0)
    finally:
        proc.kill()
        proc.wait()
    statuses = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "errored")}
    ideal = math.ceil(n_tests / concurrency) * latency_s
    print(
        f"[engine] {n_tests} tests x {latency_s * 1000:.0f} ms agent latency, concurrency {concurrency}, "
        f"through session.run_tests ({repeats} runs)"
    )
    print(f"  statuses (last run): {statuses}")
    print(f"  wall               : {', '.join(f'{w:.3f}' for w in walls)} s; ideal {ideal:.3f} s")
    print(
        f"  ratio              : {min(walls) / ideal:.3f} x ideal best, {statistics.median(walls) / ideal:.3f} x "
        "median (target <= 1.15)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", nargs=2, metavar=("PORT", "LATENCY_S"), help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve(int(args.serve[0]), float(args.serve[1])))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    overhead(args.requests)
    engine_ratio(args.tests, args.concurrency, args.latency_ms / 1000)


if __name__ == "__main__":
    main()
