"""A lean HTTP/1.1 keep-alive connection pool for httpx, on asyncio streams and h11.

httpx's default pool (httpcore) re-scans every waiting request against every connection, and
polls each idle socket, on every request event; at 64 concurrent agent runs that costs more CPU
than the requests themselves (see benchmarks/connectors_http.py). This transport keeps idle
connections in a LIFO list per origin and a semaphore for the limit, so each request costs the
same whatever the concurrency. It raises httpx's own exception types, so callers cannot tell it
from the default transport; proxies from the environment still go through httpx's proxy mounts.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import h11
import httpx

_READ_SIZE = 65536


class _Conn:
    __slots__ = ("h11", "idle_since", "origin", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: tuple[str, str, int]):
        self.reader, self.writer, self.origin = reader, writer, origin
        self.h11 = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # already broken; nothing left to release
            pass

    async def next_event(self, read_timeout: float | None, request: httpx.Request) -> object:
        """The next h11 event, reading from the socket as needed (bounded by the read timeout)."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(read_timeout):
                    data = await self.reader.read(_READ_SIZE)
            except TimeoutError:
                raise httpx.ReadTimeout("timed out reading from the agent", request=request) from None
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
            self.h11.receive_data(data)


class LeanTransport(httpx.AsyncBaseTransport):
    """Pooled keep-alive HTTP/1.1 connections, at most `max_connections` in use at once."""

    def __init__(
        self, max_connections: int = 100, ssl_context: ssl.SSLContext | None = None, keepalive_expiry: float = 5.0
    ):
        self._max = max_connections
        self._ssl = ssl_context
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._slots: asyncio.Semaphore | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        if self._slots is None:  # created on first use, inside the running loop
            self._slots = asyncio.Semaphore(self._max)
        if self._slots.locked():  # only a wait for a free slot needs a timer
            try:
                async with asyncio.timeout(timeouts.get("pool")):
                    await self._slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout("no free connection to the agent", request=request) from None
        else:
            await self._slots.acquire()
        try:
            return await self._exchange(request, timeouts)
        except BaseException:
            self._slots.release()
            raise

    async def _exchange(self, request: httpx.Request, timeouts: dict[str, float | None]) -> httpx.Response:
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        body = await request.aread()
        h11_request = h11.Request(method=request.method, target=url.raw_path, headers=list(request.headers.raw))
        for attempt in (0, 1):
            conn = self._idle_conn(origin)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(origin, timeouts.get("connect"), request)
            try:
                data = conn.h11.send(h11_request) or b""
                if body:
                    data += conn.h11.send(h11.Data(data=body)) or b""
                data += conn.h11.send(h11.EndOfMessage()) or b""
                conn.writer.write(data)
                if conn.writer.transport.get_write_buffer_size():  # the socket did not take it all
                    try:
                        async with asyncio.timeout(timeouts.get("write")):
                            await conn.writer.drain()
                    except TimeoutError:
                        raise httpx.WriteTimeout("timed out sending to the agent", request=request) from None
                while True:
                    event = await conn.next_event(timeouts.get("read"), request)
                    if isinstance(event, h11.Response):
                        break
                    if isinstance(event, h11.ConnectionClosed):
                        raise httpx.RemoteProtocolError(
                            "Server disconnected without sending a response.", request=request
                        )
            except (httpx.RemoteProtocolError, httpx.ReadError, OSError) as exc:
                conn.close()
                # A keep-alive connection the server closed while idle: safe to retry once on a
                # fresh connection, since no byte of a response was seen.
                if reused and attempt == 0:
                    continue
                if isinstance(exc, OSError):
                    raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from exc
                raise
            except BaseException:
                conn.close()
                raise
            stream = _Body(self, conn, timeouts.get("read"), request)
            return httpx.Response(
                status_code=event.status_code,
                headers=list(event.headers),
                stream=stream,
                extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def _idle_conn(self, origin: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(origin)
        now = asyncio.get_running_loop().time()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since < self._expiry and not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.close()
        return None

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None, request: httpx.Request) -> _Conn:
        scheme, host, port = origin
        tls = None
        if scheme == "https":
            tls = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Conn(reader, writer, origin)

    def _release(self, conn: _Conn, reusable: bool) -> None:
        if reusable and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.setdefault(conn.origin, []).append(conn)
        else:
            conn.close()
        if self._slots is not None:
            self._slots.release()

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


class _Body(httpx.AsyncByteStream):
    """The response body; hands the connection back to the pool when read to the end."""

    def __init__(self, pool: LeanTransport, conn: _Conn, read_timeout: float | None, request: httpx.Request):
        self._pool, self._conn, self._timeout, self._request = pool, conn, read_timeout, request
        self._complete = False
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._complete:
            event = await self._conn.next_event(self._timeout, self._request)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body", request=self._request
                )

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            self._pool._release(self._conn, self._complete)
