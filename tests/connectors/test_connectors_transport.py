"""The lean connection pool under the http connector: keep-alive reuse, stale connections, limits."""

from __future__ import annotations

import asyncio

import httpx

from agent_health.connectors.transport import LeanTransport
from agent_health.model.agent import AgentRequest
from tests.connectors.servers import invoke, runtime


def run_many(rt, n: int, prompt: str = "p"):
    async def go():
        try:
            return [await rt.invoke(AgentRequest(prompt=f"{prompt}{i}")) for i in range(n)]
        finally:
            await rt.aclose()

    return asyncio.run(go())


def test_sequential_runs_reuse_one_keep_alive_connection(server):
    before = len(server.requests)
    results = run_many(runtime("http", endpoint=server.url + "/chat"), 5)
    assert [r.output for r in results] == [f"answer to: p{i}" for i in range(5)]
    assert len({r["client_port"] for r in server.requests[before:]}) == 1


def test_connection_dropped_by_the_agent_is_replaced(server):
    before = len(server.requests)
    results = run_many(runtime("http", endpoint=server.url + "/drop-after"), 3)
    assert all(r.output == "dropped after" for r in results)
    assert len({r["client_port"] for r in server.requests[before:]}) == 3


def test_httpx_pool_remains_available(server):
    assert invoke(runtime("http", endpoint=server.url + "/chat", pool="httpx"), "x").output == "answer to: x"


def test_limit_caps_connections_in_use(server):
    async def go():
        transport = LeanTransport(max_connections=2)
        async with httpx.AsyncClient(transport=transport) as client:

            async def one(i):
                r = await client.post(server.url + "/chat", json={"prompt": f"c{i}"})
                return r.json()["response"]

            before = len(server.requests)
            out = await asyncio.gather(*(one(i) for i in range(8)))
            return out, {r["client_port"] for r in server.requests[before:]}

    out, ports = asyncio.run(go())
    assert out == [f"answer to: c{i}" for i in range(8)] and len(ports) <= 2
