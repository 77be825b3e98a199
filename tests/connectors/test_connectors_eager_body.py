"""aiohttp's request body leaves with the request, before the caller's step ends (Python 3.11 as
3.12+): otherwise, with many runs in flight, every next request waits for all the answers that
arrived with it to be processed, and the runs stay in lock-step (benchmarks/connectors_http.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest

from agent_health.connectors import eager_body
from agent_health.connectors.transport import build_client


def test_the_body_is_on_the_wire_before_the_loop_runs_anything_else(server):
    async def go():
        async with build_client(pool="aiohttp") as client:
            await client.post(server.url + "/chat", json={"prompt": "warm"})  # a kept-alive connection
            before = len(server.requests)
            request = asyncio.ensure_future(client.post(server.url + "/chat", json={"prompt": "eager"}))
            await asyncio.sleep(0)  # the request's first step runs: it sends and waits for the answer
            time.sleep(1.0)  # the loop is busy, as when 64 answers arrive together
            unblocked = time.monotonic()
            response = await request
            return response, server.requests[before], unblocked

    response, received, unblocked = asyncio.run(go())
    assert response.json()["response"] == "answer to: eager"
    assert received["at"] < unblocked - 0.5  # not left for the loop's next pass


def test_a_body_too_large_for_one_write_is_sent_whole(server):
    body = bytes(range(256)) * (32 * 1024)  # 8 MiB: the first write fills the socket and waits to drain

    async def go():
        async with build_client(pool="aiohttp") as client:
            before = len(server.requests)
            response = await client.post(server.url + "/echo", content=body)
            return response, server.requests[before]

    response, received = asyncio.run(go())
    assert response.status_code == 200 and received["raw"] == body


def test_an_upload_cancelled_midway_leaves_no_writer_behind(server):
    # An agent that accepts and never reads: the body's writer waits on a full socket until the
    # caller gives up; it must stop there, and the client must go on serving other requests.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/agent"

    async def go():
        async with build_client(pool="aiohttp") as client:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.post(url, content=b"x" * (32 * 1024 * 1024)), 0.5)
            gave_up = time.monotonic() - started
            for conn in accepted:  # the agent goes away: the connection finishes closing
                conn.close()
            await asyncio.sleep(0.05)
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            after = await client.post(server.url + "/chat", json={"prompt": "next"})
            return gave_up, left, after.json()["response"]

    try:
        gave_up, left, after = asyncio.run(go())
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    assert gave_up < 3 and left == [] and after == "answer to: next"


def test_a_task_factory_already_on_the_loop_still_makes_every_task(server):
    made: list[str] = []

    async def go():
        loop = asyncio.get_running_loop()

        def factory(loop, coro, **kwargs):
            made.append(coro.__qualname__)
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)
        eager_body.install(loop)
        await asyncio.create_task(asyncio.sleep(0))
        async with httpx.AsyncClient() as plain:  # a client of the user's, on the same loop
            await plain.get(server.url + "/nothing")
        async with build_client(pool="aiohttp") as client:
            return await client.post(server.url + "/echo", content=b"y" * (8 * 1024 * 1024))

    response = asyncio.run(go())
    assert response.status_code == 200
    assert "sleep" in made  # the user's factory still makes the loop's other tasks
