"""A real HTTP server on 127.0.0.1 and a free port, served from a background thread."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.net import wait_for_port


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that does not print a line per request."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


class LocalHTTPServer(ThreadingHTTPServer):
    """`with LocalHTTPServer(Handler) as srv: ... srv.url ...`, or `start()` / `close()`.

    Binds port 0 (no race for a free port); `tls` wraps the socket for https."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None):
        super().__init__(("127.0.0.1", 0), handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # connections tests cut on purpose would print tracebacks

    def start(self) -> LocalHTTPServer:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        if not wait_for_port(self.port):
            self.close()
            raise RuntimeError(f"local HTTP server on {self.url} did not accept connections within 5s")
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread = None
        self.server_close()

    def __enter__(self) -> LocalHTTPServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
