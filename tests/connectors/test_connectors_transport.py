"""The connection pools under the http connector (aiohttp by default, httpx's own on request):
keep-alive reuse, connections the agent drops, the connection limit, the settings that choose them."""

from __future__ import annotations

import asyncio

import pytest
from httpx_aiohttp import HttpxAiohttpClient

from agent_health.connectors.transport import build_client
from agent_health.errors import ConfigError
from agent_health.model.agent import AgentRequest
from tests.connectors.servers import invoke, runtime

POOLS = ["aiohttp", "httpx"]


def run_many(rt, n: int, prompt: str = "p"):
    async def go():
        try:
            return [await rt.invoke(AgentRequest(prompt=f"{prompt}{i}")) for i in range(n)]
        finally:
            await rt.aclose()

    return asyncio.run(go())


def test_the_default_pool_is_aiohttp():
    rt = runtime("http", endpoint="http://127.0.0.1:9/chat")
    assert rt.connector.settings.effective_pool == "aiohttp"
    assert isinstance(rt.connector.client, HttpxAiohttpClient)
    asyncio.run(rt.aclose())


@pytest.mark.parametrize("pool", POOLS)
def test_sequential_runs_reuse_one_keep_alive_connection(server, pool):
    before = len(server.requests)
    results = run_many(runtime("http", endpoint=server.url + "/chat", pool=pool), 5)
    assert [r.output for r in results] == [f"answer to: p{i}" for i in range(5)]
    assert len({r["client_port"] for r in server.requests[before:]}) == 1


@pytest.mark.parametrize("pool", POOLS)
def test_connection_dropped_by_the_agent_is_replaced(server, pool):
    before = len(server.requests)
    results = run_many(runtime("http", endpoint=server.url + "/drop-after", pool=pool), 3)
    assert all(r.output == "dropped after" for r in results)
    assert len({r["client_port"] for r in server.requests[before:]}) == 3


@pytest.mark.parametrize("pool", POOLS)
def test_limit_caps_connections_in_use(server, pool):
    async def go():
        async with build_client(pool=pool, max_connections=2) as client:

            async def one(i):
                r = await client.post(server.url + "/chat", json={"prompt": f"c{i}"})
                return r.json()["response"]

            before = len(server.requests)
            out = await asyncio.gather(*(one(i) for i in range(8)))
            return out, {r["client_port"] for r in server.requests[before:]}

    out, ports = asyncio.run(go())
    assert out == [f"answer to: c{i}" for i in range(8)] and len(ports) <= 2


def test_http2_picks_the_httpx_pool_and_refuses_aiohttp(server):
    rt = runtime("http", endpoint=server.url + "/chat", http2=True)
    assert rt.connector.settings.effective_pool == "httpx"
    assert invoke(rt, "x").output == "answer to: x"  # plain http:// stays HTTP/1.1
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.http2: .*needs pool 'httpx'"):
        runtime("http", endpoint=server.url + "/chat", http2=True, pool="aiohttp")
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.pool"):
        runtime("http", endpoint=server.url + "/chat", pool="lean")


@pytest.mark.parametrize("pool", POOLS)
def test_credentials_in_the_url_are_sent_as_basic_auth(server, pool):
    import base64

    host = server.url.split("://", 1)[1]
    r = invoke(runtime("http", endpoint=f"http://svc:pa55@{host}/echo", pool=pool))
    received = {k.lower(): v for k, v in r.raw_events[0]["body"]["received"]["headers"].items()}
    assert received["authorization"] == "Basic " + base64.b64encode(b"svc:pa55").decode()


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize(
    ("method", "extra", "body"),
    [
        ("POST", {}, b'{"prompt": "p"}'),
        ("POST", {}, b""),  # httpx sends `Content-Length: 0` for an empty POST
        ("PUT", {"Host": "agent.example", "content-length": "15"}, b'{"prompt": "p"}'),  # the caller's win
        ("PATCH", {"Transfer-Encoding": "chunked"}, b""),
    ],
)
def test_the_connector_builds_the_request_httpx_would(pool, method, extra, body):
    """RequestBuilder skips httpx's build_request for speed; the request must come out the same:
    the client's default headers, the request's own winning whatever their case, the headers
    httpx adds (Host, Content-Length), the URL, the body and the client's timeouts."""
    from agent_health.connectors.transport import RequestBuilder

    async def go():
        async with build_client(pool=pool, timeout_s=7.0, connect_timeout_s=3.0) as client:
            headers = {"content-type": "application/json", "User-Agent": "agent-health-test", "x-run": "r1", **extra}
            url = "http://127.0.0.1:9/agent?x=1"
            ours = RequestBuilder(client).build(method, url, headers, body)
            theirs = client.build_request(method, url, headers=headers, content=body)
            return ours, theirs

    ours, theirs = asyncio.run(go())

    def shape(r):
        return (
            sorted((k.lower(), v) for k, v in r.headers.multi_items()),
            str(r.url),
            r.method,
            r.content,
            type(r.stream),
        )

    assert shape(ours) == shape(theirs)
    assert ours.extensions == theirs.extensions == {"timeout": {"connect": 3.0, "read": 7.0, "write": 7.0, "pool": 7.0}}
    assert [v for k, v in ours.headers.multi_items() if k.lower() == "user-agent"] == ["agent-health-test"]


@pytest.mark.parametrize("pool", POOLS)
def test_a_cookie_the_agent_sets_is_sent_back(server, pool):
    async def go():
        rt = runtime("http", endpoint=server.url + "/set-cookie", pool=pool)
        try:
            await rt.invoke(AgentRequest(prompt="first"))
            rt.connector.settings.endpoint = server.url + "/echo"
            return await rt.invoke(AgentRequest(prompt="second"))
        finally:
            await rt.aclose()

    second = asyncio.run(go())
    received = {k.lower(): v for k, v in second.raw_events[0]["body"]["received"]["headers"].items()}
    assert received.get("cookie") == "session=s1"


@pytest.mark.parametrize("pool", POOLS)
def test_a_finished_response_is_freed_without_the_garbage_collector(server, pool):
    """httpx links a streamed response and its stream both ways; the connector breaks the link when
    it closes the response, so a run of many HTTP tests does not spend its CPU collecting them."""
    import gc

    async def runs():
        rt = runtime("http", endpoint=server.url + "/chat", pool=pool)
        try:
            await rt.invoke(AgentRequest(prompt="warm"))  # the pool and its connection exist now
            gc.collect()
            gc.disable()
            try:
                for i in range(20):
                    await rt.invoke(AgentRequest(prompt=f"p{i}"))
                gc.set_debug(gc.DEBUG_SAVEALL)  # keep what a collection finds unreachable, to look at
                gc.collect()
                return [type(o).__name__ for o in gc.garbage]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
        finally:
            await rt.aclose()

    garbage = asyncio.run(runs())
    assert "Response" not in garbage and "Request" not in garbage, sorted(set(garbage))
