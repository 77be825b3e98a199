"""The replay tests' agent: the connector tests' REST agent on 127.0.0.1 (tests/connectors/servers.py),
one for the session, which counts the calls that reach it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.connectors.servers import AgentServer, install_rest
from tests.support import skip_or_fail


@pytest.fixture(scope="session")
def server() -> Iterator[AgentServer]:
    try:
        srv = AgentServer()
        install_rest(srv)
        srv.start()
    except (OSError, RuntimeError) as exc:
        skip_or_fail(f"cannot start the test agent server on 127.0.0.1: {exc}")
    yield srv
    srv.close()
