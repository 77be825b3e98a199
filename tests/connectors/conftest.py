"""Fixtures: one real agent server on 127.0.0.1 for the whole connector test session."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest

from tests.connectors.servers import AgentServer, install_agui, install_rest, require_or_skip, wait_until_up


@pytest.fixture(scope="session")
def server() -> Iterator[AgentServer]:
    try:
        srv = AgentServer()
    except OSError as exc:
        require_or_skip(f"cannot start the test agent server on 127.0.0.1: {exc}")
    install_rest(srv)
    install_agui(srv)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    if not wait_until_up("127.0.0.1", srv.server_address[1]):
        srv.shutdown()
        require_or_skip("the test agent server did not answer within 5s")
    yield srv
    srv.shutdown()
    srv.server_close()
