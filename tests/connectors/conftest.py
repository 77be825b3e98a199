"""Fixtures: one real agent server on 127.0.0.1 for the whole connector test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.connectors.servers import AgentServer, install_agui, install_rest
from tests.support import skip_or_fail


@pytest.fixture(scope="session")
def server() -> Iterator[AgentServer]:
    try:
        srv = AgentServer()
        install_rest(srv)
        install_agui(srv)
        srv.start()
    except (OSError, RuntimeError) as exc:
        skip_or_fail(f"cannot start the test agent server on 127.0.0.1: {exc}")
    yield srv
    srv.close()
