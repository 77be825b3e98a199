"""Shared fixtures. Tests that need a real service start it in their own fixtures; the helpers they
share (ports, HTTP servers, skip-or-fail) live in tests/support. The OpenSearch node is here, once
per session, because several test folders (traces, faults) query it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a running, green single-node OpenSearch (2.19, from Maven Central jars) on a free port
    of 127.0.0.1; it skips when Java or Maven is missing (or the node cannot start), and fails
    instead when AGENT_HEALTH_REQUIRE_SERVICES=1 (CI)."""
    sys.path.insert(0, str(ROOT / "tests" / "services" / "opensearch"))
    from node import NodeUnavailable, running_node

    from tests.support import skip_or_fail

    node = running_node(tmp_path_factory.mktemp("opensearch"))
    try:
        url = node.__enter__()
    except NodeUnavailable as exc:
        skip_or_fail(str(exc))
    try:
        yield url
    finally:
        node.__exit__(None, None, None)


@pytest.fixture
def write_eval(tmp_path: Path):
    """Write an eval file (dedented) under tmp_path/evals and return its path."""

    def write(name: str, body: str) -> Path:
        path = tmp_path / "evals" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body).lstrip())
        return path

    return write


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a separate process."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("AGENT_HEALTH_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_health", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
