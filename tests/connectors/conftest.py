"""Fixtures: one real agent server on 127.0.0.1 for the whole connector test session."""

from __future__ import annotations

import sys
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


@pytest.fixture(autouse=True)
def _project_roots_leave_sys_path() -> Iterator[None]:
    """A python agent's project root, put on sys.path by the connector (as the CLI wants it for
    the process), leaves it with its test: a leftover root holding `my_agents.py` shadowed the next
    test's `my_agents/` folder (a regular module wins over a namespace package)."""
    before = set(sys.path)
    yield
    sys.path[:] = [p for p in sys.path if p in before]
