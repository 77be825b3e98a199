"""pytest plugin: a real single-node OpenSearch (2.19, from Maven Central jars) on 127.0.0.1, started
once per session for every test folder that asks for `opensearch_url` (traces, stores). It skips
when Java or Maven is missing (or the node cannot start), and fails instead when
AGENT_HEALTH_REQUIRE_SERVICES=1 (CI)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import skip_or_fail

_NODE_DIR = Path(__file__).resolve().parents[1] / "services" / "opensearch"


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running, green single-node OpenSearch on a free port of 127.0.0.1."""
    if str(_NODE_DIR) not in sys.path:
        sys.path.insert(0, str(_NODE_DIR))
    from node import NodeUnavailable, running_node

    node = running_node(tmp_path_factory.mktemp("opensearch"))
    try:
        url = node.__enter__()
    except NodeUnavailable as exc:
        skip_or_fail(str(exc))
    try:
        yield url
    finally:
        node.__exit__(None, None, None)
