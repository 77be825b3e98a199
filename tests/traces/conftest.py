"""Fixtures for the trace tests: a real single-node OpenSearch (2.19, from Maven Central jars) on
127.0.0.1, shared by the session; it skips when Java or Maven is missing (or the node cannot
start), and fails instead when AGENT_HEALTH_REQUIRE_SERVICES=1 (CI)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services" / "opensearch"))

from node import NodeUnavailable, running_node

from tests.support import skip_or_fail


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running, green single-node OpenSearch on a free port of 127.0.0.1."""
    node = running_node(tmp_path_factory.mktemp("opensearch"))
    try:
        url = node.__enter__()
    except NodeUnavailable as exc:
        skip_or_fail(str(exc))
    try:
        yield url
    finally:
        node.__exit__(None, None, None)
